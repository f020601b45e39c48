//! Tests on real processes, named after the field cases they pin (CASES.md P2, P8, P9, E13, R36).

mod lifecycle;
mod pipe_cases;
mod pty_cases;
mod support;
mod utf8_cases;
