//! (fs: being built)
