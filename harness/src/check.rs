//! Correctness checks: a variant against its CPU reference, with property-based tests.
//!
//! Each case draws a small shape from the kernel's strategy (only shapes valid for the
//! variant's parameters), an input seed and an input distribution, runs the functional
//! model and compares every output with the reference. A failure is shrunk by proptest to
//! the smallest shape and simplest input that still fails, persisted to a regression file
//! (replayed first next time) and reported with its metrics. The run's seed is returned so
//! `--seed` replays it exactly.

use crate::kernel::{catch_panic, run_variant, Kernel, Metrics, Role, RunError};
use crate::params::{Params, Shape};
use neuron_sim::{Chip, ExecMode};
use proptest::prelude::*;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestError, TestRng, TestRunner,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How inputs are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Standard normal values.
    Normal,
    /// Exact small values: 0, ±1, ±0.5, ±2 (shrinks to here).
    Edge,
    /// Normal values times 64: large magnitudes.
    Large,
}

impl Distribution {
    const ALL: [Distribution; 3] = [Distribution::Edge, Distribution::Normal, Distribution::Large];
}

/// Deterministic inputs for `specs` from a seed (xorshift64* + Box–Muller). Written here so
/// a seed means the same inputs in every version of every dependency.
pub fn make_inputs(
    specs: &[crate::kernel::TensorSpec],
    seed: u64,
    dist: Distribution,
) -> Vec<Vec<f32>> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    specs
        .iter()
        .filter(|s| s.role == Role::Input)
        .map(|s| {
            (0..s.elems())
                .map(|_| {
                    let v = match dist {
                        Distribution::Edge => {
                            [0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0][(next() * 7.0) as usize % 7]
                        }
                        Distribution::Normal | Distribution::Large => {
                            let (u1, u2) = (next().max(1e-12), next());
                            let z =
                                (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                            if dist == Distribution::Large {
                                z * 64.0
                            } else {
                                z
                            }
                        }
                    };
                    s.dtype.round(v as f32 * s.init_scale)
                })
                .collect()
        })
        .collect()
}

/// Settings of one check.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    pub cases: u32,
    pub seed: u64,
    pub chip: Chip,
    /// Where failing cases are persisted and replayed from (None: no persistence).
    pub regressions: Option<PathBuf>,
}

/// The smallest failing case found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckFailure {
    pub shape: Shape,
    pub input_seed: u64,
    pub distribution: Distribution,
    pub message: String,
    pub metrics: Option<Metrics>,
}

/// Outcome of a check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub passed: bool,
    pub cases: u32,
    pub seed: u64,
    /// Worst over the cases that ran (the failing case's own when one failed).
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub mse: f64,
    pub cosine: f64,
    pub failure: Option<CheckFailure>,
}

/// Run one case; `Err` describes the failure.
fn case(
    kernel: &dyn Kernel,
    params: &Params,
    shape: &Shape,
    seed: u64,
    dist: Distribution,
    chip: &Chip,
) -> Result<Metrics, (String, Option<Metrics>)> {
    let inputs = catch_panic(|| kernel.inputs(shape, seed, dist))
        .map_err(|m| (format!("input generator panicked: {m}"), None))?;
    let run = run_variant(kernel, params, shape, chip, ExecMode::FUNCTIONAL, Some(&inputs))
        .map_err(|e| (e.to_string(), None))?;
    let reference = catch_panic(|| kernel.reference(shape, &inputs))
        .map_err(|m| (format!("reference panicked: {m}"), None))?;
    let tol = kernel.tolerance();
    let m = Metrics::compare(&run.outputs, &reference, &tol);
    if m.passes(&tol) {
        Ok(m)
    } else {
        Err((
            format!(
                "{} of {} elements outside atol={} + rtol={}·|ref| (max abs err {:.3e}, cosine {:.6})",
                m.mismatches, m.elements, tol.atol, tol.rtol, m.max_abs_err, m.cosine
            ),
            Some(m),
        ))
    }
}

/// JSON has no infinity: a NaN or infinite error (e.g. an output never written) is
/// reported as `f64::MAX`.
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::MAX
    }
}

/// Check `params` of `kernel` over random small shapes and inputs.
pub fn check(
    kernel: &dyn Kernel,
    params: &Params,
    cfg: &CheckConfig,
) -> Result<CheckReport, RunError> {
    params.check(&kernel.params()).map_err(|e| RunError::Invalid(e.to_string()))?;
    let mut pcfg =
        Config { cases: cfg.cases, failure_persistence: None, verbose: 0, ..Config::default() };
    if let Some(path) = &cfg.regressions {
        // proptest wants a &'static str; one small leak per check in a worker is fine.
        let path: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
        pcfg.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(path)));
    }
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&cfg.seed.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(pcfg, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let p2 = params.clone();
    let valid_shapes = kernel
        .small_shapes(params)
        .prop_filter("shape valid for the variant", move |s| kernel.validate(&p2, s).is_ok());
    let strategy = (valid_shapes, any::<u64>(), prop::sample::select(Distribution::ALL.to_vec()));
    let worst = std::cell::RefCell::new(Metrics { cosine: 1.0, ..Metrics::default() });
    // Cases run until the first failure (shrinking runs more, not counted).
    let ran = std::cell::Cell::new(0u32);
    let failed = std::cell::Cell::new(false);
    let result = runner.run(&strategy, |(shape, seed, dist)| {
        if !failed.get() {
            ran.set(ran.get() + 1);
        }
        match case(kernel, params, &shape, seed, dist, &cfg.chip) {
            Ok(m) => {
                let mut w = worst.borrow_mut();
                w.max_abs_err = w.max_abs_err.max(m.max_abs_err);
                w.max_rel_err = w.max_rel_err.max(m.max_rel_err);
                w.mse = w.mse.max(m.mse);
                w.cosine = w.cosine.min(m.cosine);
                Ok(())
            }
            Err((msg, _)) => {
                failed.set(true);
                Err(TestCaseError::fail(msg))
            }
        }
    });
    let w = *worst.borrow();
    match result {
        Ok(()) => Ok(CheckReport {
            passed: true,
            cases: cfg.cases,
            seed: cfg.seed,
            max_abs_err: w.max_abs_err,
            max_rel_err: w.max_rel_err,
            mse: w.mse,
            cosine: w.cosine,
            failure: None,
        }),
        Err(TestError::Fail(_, (shape, seed, dist))) => {
            let (message, metrics) = match case(kernel, params, &shape, seed, dist, &cfg.chip) {
                Err(e) => e,
                Ok(m) => ("failed only in the original (unshrunk) case".into(), Some(m)),
            };
            let m = metrics.unwrap_or(Metrics { max_abs_err: f64::MAX, max_rel_err: f64::MAX, mse: f64::MAX, cosine: 0.0, mismatches: 0, elements: 0 });
            let m = Metrics { max_abs_err: finite(m.max_abs_err), max_rel_err: finite(m.max_rel_err), mse: finite(m.mse), ..m };
            let metrics = metrics.map(|_| m);
            Ok(CheckReport {
                passed: false,
                cases: ran.get(),
                seed: cfg.seed,
                max_abs_err: m.max_abs_err,
                max_rel_err: m.max_rel_err,
                mse: m.mse,
                cosine: m.cosine,
                failure: Some(CheckFailure { shape, input_seed: seed, distribution: dist, message, metrics }),
            })
        }
        Err(TestError::Abort(reason)) => Err(RunError::Invalid(format!(
            "no valid small shape for these parameters ({reason}); widen the kernel's small_shapes strategy"
        ))),
    }
}
