//! `neuron-tune-harness`: what a kernel crate links.
//!
//! It answers two questions about the kernels of one crate — "what is here?" and "what does
//! this variant do?" — and never "which variant is best" (that is the tuner's business).
//!
//! * [`Kernel`] — a kernel's name, typed parameters and validity rule, named shapes and a
//!   proptest strategy for small ones, tensors, body, CPU reference, tolerance and work.
//! * [`space`] — search spaces and shapes from TOML, validated with located errors.
//! * [`check()`] — property-based correctness against the reference, with shrinking.
//! * [`model`] — models composed of kernel calls, evaluated end to end.
//! * [`panics`] — a panic reported once per request, however often shrinking repeats it.
//! * [`worker`] / [`stdio`] — the worker side of the protocol (`neuron-tune-protocol`,
//!   re-exported as [`protocol`]) on a channel kernel code cannot print into; a harness
//!   binary is one [`harness_main!`] call:
//!
//! ```ignore
//! neuron_tune_harness::harness_main!(kernels: [Gemm, RmsNorm], models: [Qwen3]);
//! ```

pub mod cases;
pub mod check;
pub mod inputs;
pub mod kernel;
pub mod model;
pub mod panics;
pub mod params;
pub mod space;
pub mod stdio;
pub mod worker;

/// The worker protocol's types (what the tool and this harness say to each other).
pub use neuron_tune_protocol as protocol;

pub use check::{check, CheckConfig, CheckReport, Distribution};
pub use inputs::make_inputs;
pub use kernel::{
    default_tolerance, run_variant, tolerance_for, Kernel, Metrics, Role, RunError, TensorSpec,
    Tolerance, Work,
};
pub use model::{
    evaluate_functional, evaluate_timing, Model, ModelBuilder, TensorId, Tuned, TunedEntry,
};
pub use params::{ParamKind, ParamSpec, ParamValue, Params, Shape};
pub use space::{CrateConfig, KernelConfig, SpaceError};

/// Re-exported so kernel crates need no direct proptest dependency for `small_shapes`.
pub use proptest;

/// The `main` of a harness binary: serve these kernels and models over the worker protocol.
///
/// ```ignore
/// neuron_tune_harness::harness_main!(kernels: [Gemm, RmsNorm], models: [Qwen3]);
/// ```
/// Each entry is an expression whose value implements [`Kernel`] (or [`Model`]).
#[macro_export]
macro_rules! harness_main {
    (kernels: [$($k:expr),* $(,)?] $(, models: [$($m:expr),* $(,)?])? $(,)?) => {
        fn main() {
            let registry = $crate::worker::Registry {
                crate_name: env!("CARGO_PKG_NAME").to_string(),
                manifest_dir: std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
                kernels: vec![$(std::sync::Arc::new($k) as std::sync::Arc<dyn $crate::Kernel>),*],
                models: vec![$($(std::sync::Arc::new($m) as std::sync::Arc<dyn $crate::Model>),*)?],
            };
            std::process::exit($crate::worker::main(registry));
        }
    };
}
