//! The `cargo neuron-tune` subcommand as a library: the binary is a thin shell over it.
//!
//! * [`cli`] — flags and subcommands (clap); [`exit`] — the documented exit codes.
//! * [`cargo`] — discovery through `cargo metadata`, harness builds through `$CARGO`.
//! * [`workspace`] — a command's kernel crates: built, their worker pools started, listed.
//! * [`worker`] — harness worker processes and the persistent pool (crash and hang recovery).
//! * [`select`] — which variants (`--kernel`, `--shape`, `--params`, lazy `--all-variants`).
//! * [`eval`] — trace → store → simulate, streaming; [`store`] — the variant store.
//! * [`output`] — typed events, JSON and human reporting; [`energy`] — the energy estimate;
//!   [`command_line`] — the `cargo neuron-tune …` commands printed for a person to copy.
//! * [`tuned`] — the tuned database (`neuron-tune.tuned.toml`); [`models`] — models end to
//!   end (their calls benched as variants through the store, tuned or default, stale entries).
//! * [`gate`] — the gate's judgement (throughput against the baseline, moved calls);
//!   [`gate_report`] — its Markdown and JUnit reports; [`baseline`] — the baseline file.
//! * [`convergence`] — a tuning run's convergence figures, diagnosis rules and goal log.
//! * [`partition`] — `--partition k/n`: a stable share of a command's work items.
//! * [`seal`] — schema and checksum on every file the tool reads back.
//! * [`commands`] — one module per subcommand (`tune` drives `neuron-tune-search`).
//! * [`report`] — the HTML report: its data model (store, journals, tuned databases, gate
//!   history) and its rendering (inline SVG charts).
//!
//! It never decides correctness itself and never links user kernels: it asks the harness
//! binary cargo built, over the worker protocol (`neuron-tune-protocol`).

pub mod analyze;
pub mod baseline;
pub mod cargo;
pub mod cli;
pub mod command_line;
pub mod commands;
pub mod convergence;
pub mod energy;
pub mod eval;
pub mod exit;
pub mod gate;
pub mod gate_report;
pub mod interrupt;
pub mod model_calls;
pub mod models;
pub mod output;
pub mod partition;
pub mod report;
pub mod seal;
pub mod select;
pub mod store;
pub mod tuned;
pub mod worker;
pub mod workspace;

/// The tool talks to kernel crates over the protocol only, never through the harness's
/// internals, and never links user kernels (ARCHITECTURE.md, invariants): its manifest must
/// not name the harness crate.
#[cfg(test)]
#[test]
fn the_tool_never_depends_on_the_harness() {
    let manifest: toml::Table =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).parse().unwrap();
    for table in ["dependencies", "build-dependencies"] {
        if let Some(deps) = manifest.get(table).and_then(|t| t.as_table()) {
            assert!(!deps.contains_key("neuron-tune-harness"), "{table}");
            assert!(deps.contains_key("neuron-tune-protocol") || table != "dependencies");
        }
    }
}
