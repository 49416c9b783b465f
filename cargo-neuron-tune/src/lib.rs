//! The `cargo neuron-tune` subcommand as a library: the binary is a thin shell over it.
//!
//! * [`cli`] — flags and subcommands (clap).
//! * [`cargo`] — discovery through `cargo metadata`, harness builds through `$CARGO`.
//! * [`store`] — the content-addressed variant store with atomic writes and a run lock.

pub mod cargo;
pub mod cli;
pub mod store;
