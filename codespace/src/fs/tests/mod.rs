//! Tests of the workspace filesystem on real files.
