//! Kernel and model registration, search spaces, correctness checks and the worker protocol.
//!
//! (Being built under issue 3; see ARCHITECTURE.md.)
