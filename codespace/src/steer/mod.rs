//! (steer: being built)
