//! The search engine of cargo-neuron-tune: which kernel configuration to try next.
//!
//! * [`space`] — a lazy configuration [`Space`] of named dimensions; index ↔
//!   configuration by mixed radix; uniform sampling without replacement for spaces of any
//!   size; neighbours; validity as a caller-supplied [`Oracle`].
//! * [`strategy`] — ask/tell [`Strategy`] objects: `grid`, `random`,
//!   `bayes` (TPE), `anneal`, `genetic` and the `default` portfolio; seeded and deterministic.
//! * [`proposer`] — a strategy that asks an external program (a script, an LLM agent) for
//!   proposals over a JSON protocol (see `PROPOSER.md`).
//! * [`landscape`] — recorded results (Kernel Tuner caches, T4 results) replayed as an
//!   evaluator with its own validity oracle.
//! * [`baseline`] — the exact expected best-so-far of valid-only random search.
//! * [`pareto`] — the non-dominated set of multi-objective points.
//! * [`driver`] — a synchronous ask–evaluate–tell loop with budgets and early stopping.
//!
//! The crate has no knowledge of the simulator: the caller supplies the evaluator.

pub mod baseline;
pub mod driver;
pub mod landscape;
pub mod pareto;
pub mod proposer;
pub mod rng;
pub mod space;
pub mod strategy;

pub use driver::{run, Budget, Evaluator, RunResult, Stop, Trial};
pub use landscape::Landscape;
pub use proposer::Proposer;
pub use rng::Rng;
pub use space::{Config, Dim, Level, Oracle, Space};
pub use strategy::{builtin, Ctx, Outcome, Strategy, BUILTIN};

/// Everything that can go wrong in the search crate.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// An ill-formed space.
    #[error("space: {0}")]
    Space(String),
    /// A landscape file that cannot be read or understood.
    #[error("landscape: {0}")]
    Landscape(String),
    /// An external proposer that failed or broke the protocol.
    #[error("proposer: {0}")]
    Proposer(String),
}
