//! The `cargo neuron-tune` subcommand as a library: the binary is a thin shell over it.
//!
//! * [`cli`] — flags and subcommands (clap), documented exit codes.
//! * [`cargo`] — discovery through `cargo metadata`, harness builds through `$CARGO`.
//! * [`pool`] — harness worker processes (duct), per-request timeout, crash recovery.
//! * [`store`] — the content-addressed variant store with atomic writes and a run lock.
//! * [`run`] — the subcommands; [`new`] — kernel scaffolding.
//!
//! It never decides correctness itself and never links user kernels: it asks the harness
//! binary cargo built, over the worker protocol.

pub mod cargo;
pub mod cli;
pub mod new;
pub mod pool;
pub mod run;
pub mod store;
