//! Correctness checks: a variant against its CPU reference, with property-based tests.
//!
//! Each case draws a small shape from the kernel's strategy (only shapes valid for the
//! variant's parameters), an input seed and an input distribution, runs the functional
//! model and compares every output with the reference. A failure is shrunk by proptest to
//! the smallest shape and simplest input that still fails, persisted to a regression file
//! (replayed first next time) and reported with its metrics. The run's seed is returned so
//! `--seed` replays it exactly.

use crate::cases::Cases;
use crate::kernel::{catch_panic, run_variant, Kernel, Role, RunError, TensorSpec};
use crate::params::{Params, Shape};
use neuron_sim::{Chip, ExecMode};
pub use neuron_tune_protocol::{CheckFailure, CheckReport, Distribution, Metrics};
use proptest::prelude::*;
use proptest::test_runner::{
    Config, FailurePersistence, FileFailurePersistence, PersistedSeed, RngAlgorithm, TestError,
    TestRng, TestRunner,
};
use std::path::PathBuf;

/// proptest's file of failing cases, without its console advice. proptest's own writer
/// prints "Saving this and future failures in …" and a line to copy into a test suite's
/// regressions file: advice for `cargo test`, which a `cargo neuron-tune check` user saw
/// under the kernel's output, though this file lives in the store and is replayed by the
/// next check on its own. The format is proptest's (`cc <seed> # shrinks to <case>`), and
/// loading is proptest's.
#[derive(Clone, Debug, PartialEq)]
struct QuietRegressions(&'static str);

impl FailurePersistence for QuietRegressions {
    fn load_persisted_failures2(&self, source: Option<&'static str>) -> Vec<PersistedSeed> {
        FileFailurePersistence::Direct(self.0).load_persisted_failures2(source)
    }

    fn save_persisted_failure2(
        &mut self,
        _: Option<&'static str>,
        seed: PersistedSeed,
        shrunk: &dyn std::fmt::Debug,
    ) {
        use std::io::Write;
        let path = std::path::Path::new(self.0);
        let header = if path.is_file() {
            ""
        } else {
            "# Seeds of failing cases `cargo neuron-tune check` found, replayed before new ones.\n"
        };
        let case = format!("{shrunk:?}").replace(['\n', '\r'], " ");
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            let mut file = std::fs::OpenOptions::new().append(true).create(true).open(path)?;
            writeln!(file, "{header}{seed} # shrinks to {case}")
        });
        if let Err(e) = written {
            eprintln!("warning: {}: the failing case was not saved: {e}", path.display());
        }
    }

    fn box_clone(&self) -> Box<dyn FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn FailurePersistence) -> bool {
        other.as_any().downcast_ref::<Self>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
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

/// Why a case failed: the variant did not run at the shape (its rule refused it, it broke a
/// hardware rule, or its code panicked), or what it computed is wrong (with the metrics when
/// outputs were compared).
enum CaseFailure {
    Run(RunError),
    Wrong(String, Option<Metrics>),
}

/// A failed case as a check reports it: the message, the metrics when outputs were
/// compared, and the hardware rule when the simulator refused the program (a structural
/// error, whatever the inputs).
struct Failed {
    message: String,
    metrics: Option<Metrics>,
    /// The rule's name, the instruction that broke it and its source location.
    rule: Option<(String, String, String)>,
}

impl From<CaseFailure> for Failed {
    fn from(f: CaseFailure) -> Self {
        match f {
            CaseFailure::Run(RunError::Sim { violation, instruction, location, message }) => {
                Failed { message, metrics: None, rule: Some((violation, instruction, location)) }
            }
            CaseFailure::Run(e) => Failed { message: e.to_string(), metrics: None, rule: None },
            CaseFailure::Wrong(message, metrics) => Failed { message, metrics, rule: None },
        }
    }
}

impl Failed {
    /// The report's failing case: at `shape`, drawn from `seed` and `dist`, with `metrics`
    /// as reported (made finite) when outputs were compared.
    fn at(
        self,
        shape: Shape,
        input_seed: u64,
        distribution: Distribution,
        metrics: Metrics,
    ) -> CheckFailure {
        let (rule, instruction, location) = match self.rule {
            Some((r, i, l)) => (Some(r), Some(i), Some(l)),
            None => (None, None, None),
        };
        CheckFailure {
            shape,
            input_seed,
            distribution,
            message: self.message,
            metrics: self.metrics.map(|_| metrics),
            rule,
            instruction,
            location,
        }
    }
}

/// Run one case; `Err` says why it failed, telling a variant that did not run from one
/// that ran wrong.
/// The inputs and reference come from `cases` when it remembers the case (they depend on
/// the kernel, shape, seed and distribution only, never on the variant).
fn case(
    kernel: &dyn Kernel,
    params: &Params,
    shape: &Shape,
    seed: u64,
    dist: Distribution,
    chip: &Chip,
    cases: &mut Cases,
) -> Result<Metrics, CaseFailure> {
    use CaseFailure::Wrong;
    let key = (kernel.name(), shape, seed, dist);
    let inputs = cases.inputs(key, || {
        catch_panic(|| kernel.inputs(shape, seed, dist))
            .map_err(|m| Wrong(format!("input generator panicked: {m}"), None))
    })?;
    let run = run_variant(kernel, params, shape, chip, ExecMode::FUNCTIONAL, Some(&inputs))
        .map_err(CaseFailure::Run)?;
    let reference = cases.reference(key, &inputs, || {
        catch_panic(|| kernel.reference(shape, &inputs))
            .map_err(|m| Wrong(format!("reference panicked: {m}"), None))
    })?;
    // A reference must describe every output in full: comparing what is there would pass a
    // reference that returns nothing.
    let outputs: Vec<TensorSpec> =
        kernel.tensors(shape).into_iter().filter(|t| t.role == Role::Output).collect();
    if reference.len() != run.outputs.len() {
        let names: Vec<String> = outputs.iter().map(|t| format!("`{}`", t.name)).collect();
        return Err(Wrong(
            format!(
                "the reference returned {} outputs; the kernel writes {} ({})",
                reference.len(),
                run.outputs.len(),
                names.join(", ")
            ),
            None,
        ));
    }
    for ((o, r), spec) in run.outputs.iter().zip(reference.iter()).zip(&outputs) {
        if o.len() != r.len() {
            return Err(Wrong(
                format!(
                    "the reference's output `{}` has {} elements; the tensor {:?} has {}",
                    spec.name,
                    r.len(),
                    spec.dims,
                    o.len()
                ),
                None,
            ));
        }
    }
    let tol = kernel.tolerance(shape);
    let (m, worst_at) = Metrics::compare_located(&run.outputs, &reference, &tol);
    // An integer output (indices, counts, masks) is right or wrong: it must equal its
    // reference exactly, whatever the float outputs' tolerance (which, scaled by the
    // reference's RMS, would let an index be off by one above ~100).
    if let Some(wrong) = integer_mismatch(&run.outputs, &reference, &outputs) {
        return Err(Wrong(wrong, Some(m)));
    }
    if m.passes(&tol) {
        Ok(m)
    } else {
        // NaN where the reference has a value is first said as what it nearly always is:
        // a region the kernel never wrote (fresh memory is NaN).
        let unwritten = unwritten(&run.outputs, &reference, &outputs);
        Err(Wrong(
            format!(
                "{}{} of {} elements outside |err| ≤ {:.2e} + {}·|ref| (atol {} × max(1, RMS \
                 of the reference)); max abs err {:.3e}, cosine {:.6} (floor {}); {}{}",
                unwritten.as_ref().map_or(String::new(), |u| format!("{u}\n")),
                m.mismatches,
                m.elements,
                m.effective_atol,
                tol.rtol,
                tol.atol,
                m.max_abs_err,
                m.cosine,
                tol.min_cosine,
                past_bound(&run.outputs, &reference, &outputs, m.worst.zip(worst_at)),
                // A precision the kernel means is its to declare; a region never written is
                // no question of precision.
                match unwritten {
                    None =>
                        "; if this precision is what the kernel intends, override \
                             `Kernel::tolerance()`",
                    Some(_) => "",
                }
            ),
            Some(m),
        ))
    }
}

/// The first integer output that differs from its reference anywhere, said with its first
/// differing element and how many differ; `None` when every integer output is exact.
fn integer_mismatch(
    outputs: &[Vec<f32>],
    reference: &[Vec<f32>],
    specs: &[TensorSpec],
) -> Option<String> {
    outputs.iter().zip(reference).zip(specs).find_map(|((o, r), spec)| {
        if spec.dtype.is_float() {
            return None;
        }
        let differ = |(a, b): (&f32, &f32)| a != b;
        let first = o.iter().zip(r).position(differ)?;
        let count = o.iter().zip(r).filter(|&p| differ(p)).count();
        Some(format!(
            "{count} of {} elements of the integer output `{}` ({}) differ from the \
             reference, which an integer output must equal exactly; first: {} of {:?}: got {}, \
             expected {}",
            o.len(),
            spec.name,
            spec.dtype,
            at(&spec.name, &index_of(first, &spec.dims)),
            spec.dims,
            o[first],
            r[first]
        ))
    })
}

/// An element's index in a tensor of `dims`, from its row-major position.
fn index_of(i: usize, dims: &[u64]) -> Vec<u64> {
    let mut index = vec![0; dims.len()];
    let mut rest = i as u64;
    for (slot, &d) in index.iter_mut().zip(dims).rev() {
        *slot = rest % d.max(1);
        rest /= d.max(1);
    }
    index
}

/// `name[i, j, …]`.
fn at(name: &str, index: &[u64]) -> String {
    let index: Vec<String> = index.iter().map(u64::to_string).collect();
    format!("`{name}`[{}]", index.join(", "))
}

/// The outputs' NaNs where the reference has a value, said per output as the region never
/// written: `` `y`[64..128, ..] of [128, 512] `` when they fill a box of the tensor (a range
/// per dimension, `..` for all of one), else their count and first and last index. `None`
/// when there are none.
fn unwritten(outputs: &[Vec<f32>], reference: &[Vec<f32>], specs: &[TensorSpec]) -> Option<String> {
    let mut said = Vec::new();
    for ((o, r), spec) in outputs.iter().zip(reference).zip(specs) {
        let nan = |(&o, &r): (&f32, &f32)| o.is_nan() && !r.is_nan();
        let positions: Vec<usize> =
            o.iter().zip(r).enumerate().filter(|(_, e)| nan(*e)).map(|(i, _)| i).collect();
        let (Some(&first), Some(&last)) = (positions.first(), positions.last()) else {
            continue;
        };
        let dims = &spec.dims;
        let (mut lo, mut hi) = (vec![u64::MAX; dims.len()], vec![0; dims.len()]);
        for &i in &positions {
            for (d, x) in index_of(i, dims).into_iter().enumerate() {
                lo[d] = lo[d].min(x);
                hi[d] = hi[d].max(x);
            }
        }
        let volume: u64 = lo.iter().zip(&hi).map(|(l, h)| h + 1 - l).product();
        let (count, total) = (positions.len(), o.len());
        said.push(if volume == count as u64 {
            let ranges: Vec<String> = (0..dims.len())
                .map(|d| match (lo[d], hi[d] + 1) {
                    (0, end) if end == dims[d] => "..".to_string(),
                    (l, end) if end == l + 1 => l.to_string(),
                    (l, end) => format!("{l}..{end}"),
                })
                .collect();
            let region = match ranges.iter().all(|r| r == "..") {
                true => format!("all of `{}` ({dims:?})", spec.name),
                false => format!("`{}`[{}] of {dims:?}", spec.name, ranges.join(", ")),
            };
            format!(
                "{region} was never written: NaN, as fresh memory is, where the reference has \
                 values ({count} of {total} elements)"
            )
        } else {
            format!(
                "{count} of {total} elements of `{}` (of {dims:?}) are NaN where the reference \
                 has values, first {}, last {}: never written (fresh memory is NaN), or \
                 computed as NaN",
                spec.name,
                at(&spec.name, &index_of(first, dims)),
                at(&spec.name, &index_of(last, dims))
            )
        });
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// The element furthest past its own bound, `effective_atol + rtol·|ref|` (the bound the
/// verdict applies, so the element named is one that failed: `Metrics::compare`'s `worst`,
/// with where it is), as a kernel author looks for it: the output, the element's index in
/// the tensor's dims, the two values and how many times its bound its error is (a NaN or
/// infinity counts as furthest). When every element is within its bound (the cosine
/// failed), the one nearest it.
fn past_bound(
    outputs: &[Vec<f32>],
    reference: &[Vec<f32>],
    specs: &[TensorSpec],
    worst: Option<(neuron_tune_protocol::WorstElement, (usize, usize))>,
) -> String {
    let Some((w, (t, i))) = worst else { return "no element to compare".into() };
    let (got, expected) = (outputs[t][i], reference[t][i]);
    // `compare` makes every figure finite: a NaN or infinite error is `f64::MAX`.
    let q = if w.ratio == f64::MAX { f64::INFINITY } else { w.ratio };
    let (dims, allowed, err) = (&specs[t].dims, w.allowed, w.abs_err);
    let how = if q > 1.0 {
        "furthest past its bound (largest |err| ÷ its own bound)"
    } else {
        "every element within its bound, the cosine below its floor; nearest its bound"
    };
    let times = if q.is_finite() {
        format!("|err| {err:.3e} = {q:.3} × its bound {allowed:.3e}")
    } else {
        format!("its bound {allowed:.3e}")
    };
    format!(
        "{how}: {} of {dims:?}: got {got}, expected {expected}, {times}",
        at(&specs[t].name, &index_of(i, dims))
    )
}

/// Check `params` of `kernel` at each of `shapes` (full size, not drawn): one case per
/// shape, its input drawn from `seed` with normal values; the first failure is reported
/// with its shape. Nothing is shrunk or persisted: the shapes are the point.
pub fn check_at(
    kernel: &dyn Kernel,
    params: &Params,
    shapes: &[Shape],
    seed: u64,
    chip: &Chip,
) -> Result<CheckReport, RunError> {
    params.check(&kernel.params()).map_err(|e| RunError::Invalid(e.to_string()))?;
    let mut w = Metrics { cosine: 1.0, ..Metrics::default() };
    for (i, shape) in shapes.iter().enumerate() {
        match case(kernel, params, shape, seed, Distribution::Normal, chip, &mut Cases::default()) {
            Ok(m) => fold_worst(&mut w, &m),
            // The shape was asked for, not drawn: a variant its rule or a hardware rule
            // refuses there is invalid at it (as `bench` says), not wrong.
            Err(CaseFailure::Run(e @ (RunError::Invalid(_) | RunError::Sim { .. }))) => {
                return Err(e)
            }
            Err(f) => {
                let f = Failed::from(f);
                let m = failing_metrics(f.metrics);
                return Ok(CheckReport {
                    passed: false,
                    cases: i as u32 + 1,
                    seed,
                    max_abs_err: m.max_abs_err,
                    max_rel_err: m.max_rel_err,
                    mse: m.mse,
                    cosine: m.cosine,
                    effective_atol: m.effective_atol,
                    worst: m.worst,
                    failure: Some(f.at(shape.clone(), seed, Distribution::Normal, m)),
                    tolerance: Some(kernel.tolerance(shape)),
                });
            }
        }
    }
    Ok(CheckReport {
        passed: true,
        cases: shapes.len() as u32,
        seed,
        max_abs_err: w.max_abs_err,
        max_rel_err: w.max_rel_err,
        mse: w.mse,
        cosine: w.cosine,
        failure: None,
        tolerance: shapes.first().map(|s| kernel.tolerance(s)),
        effective_atol: w.effective_atol,
        worst: w.worst,
    })
}

/// `w` made the worst of itself and `m` (the largest errors, the smallest cosine).
fn fold_worst(w: &mut Metrics, m: &Metrics) {
    w.max_abs_err = w.max_abs_err.max(m.max_abs_err);
    w.max_rel_err = w.max_rel_err.max(m.max_rel_err);
    w.mse = w.mse.max(m.mse);
    w.cosine = w.cosine.min(m.cosine);
    w.effective_atol = w.effective_atol.max(m.effective_atol);
    w.worst = neuron_tune_protocol::WorstElement::worse(w.worst, m.worst);
}

/// A failing case's metrics as reported: its own, made finite, or (when its outputs were
/// never compared: a panic, a hardware error) the worst there is.
fn failing_metrics(metrics: Option<Metrics>) -> Metrics {
    let m = metrics.unwrap_or(Metrics {
        max_abs_err: f64::MAX,
        max_rel_err: f64::MAX,
        mse: f64::MAX,
        cosine: 0.0,
        mismatches: 0,
        effective_atol: 0.0,
        elements: 0,
        worst: None,
    });
    Metrics {
        max_abs_err: finite(m.max_abs_err),
        max_rel_err: finite(m.max_rel_err),
        mse: finite(m.mse),
        ..m
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
    check_remembering(kernel, params, cfg, &mut Cases::default())
}

/// [`check()`], taking the inputs and reference of the cases `cases` remembers and
/// remembering those it computes (a worker's, across its requests: [`crate::cases`]). The
/// report is the same, bit for bit.
pub fn check_remembering(
    kernel: &dyn Kernel,
    params: &Params,
    cfg: &CheckConfig,
    cases: &mut Cases,
) -> Result<CheckReport, RunError> {
    params.check(&kernel.params()).map_err(|e| RunError::Invalid(e.to_string()))?;
    // A case whose run the kernel refuses (`RunError::Invalid` from `run`: a rule its
    // `validate` does not state) is rejected like a shape `validate` refuses, never a
    // failure; a variant refused at every shape is invalid. Each such case costs a run, so
    // the rejects are capped at four per case.
    let mut pcfg = Config {
        cases: cfg.cases,
        failure_persistence: None,
        verbose: 0,
        max_global_rejects: 4 * cfg.cases.max(1),
        ..Config::default()
    };
    if let Some(path) = &cfg.regressions {
        // proptest wants a &'static str; one small leak per check in a worker is fine.
        let path: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
        pcfg.failure_persistence = Some(Box::new(QuietRegressions(path)));
    }
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&cfg.seed.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(pcfg, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let (p2, chip) = (params.clone(), cfg.chip.clone());
    let valid_shapes =
        kernel.small_shapes(params).prop_filter("shape valid for the variant", move |s| {
            kernel.validate(&p2, s, &chip).is_ok()
        });
    let strategy = (valid_shapes, any::<u64>(), prop::sample::select(Distribution::ALL.to_vec()));
    let worst = std::cell::RefCell::new(Metrics { cosine: 1.0, ..Metrics::default() });
    // The tolerance as the cases applied it (it may depend on the shape).
    let applied = std::cell::Cell::new(None);
    // Cases run until the first failure (shrinking runs more, not counted).
    let ran = std::cell::Cell::new(0u32);
    let failed = std::cell::Cell::new(false);
    // The last shape at which `run` refused the parameters, and why.
    let refused: std::cell::RefCell<Option<(Shape, String)>> = Default::default();
    let cases = std::cell::RefCell::new(cases);
    let result = runner.run(&strategy, |(shape, seed, dist)| {
        let outcome = case(kernel, params, &shape, seed, dist, &cfg.chip, &mut cases.borrow_mut());
        if let Err(CaseFailure::Run(RunError::Invalid(why))) = outcome {
            let reject = TestCaseError::reject(why.clone());
            *refused.borrow_mut() = Some((shape, why));
            return Err(reject);
        }
        ran.set(ran.get() + u32::from(!failed.get()));
        applied.set(Some(kernel.tolerance(&shape)));
        match outcome {
            Ok(m) => {
                fold_worst(&mut worst.borrow_mut(), &m);
                Ok(())
            }
            Err(f) => {
                failed.set(true);
                Err(TestCaseError::fail(Failed::from(f).message))
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
            tolerance: applied.get(),
            effective_atol: w.effective_atol,
            worst: w.worst,
        }),
        Err(TestError::Fail(_, (shape, seed, dist))) => {
            let again =
                case(kernel, params, &shape, seed, dist, &cfg.chip, &mut cases.borrow_mut());
            let f = match again {
                Err(e) => Failed::from(e),
                Ok(m) => Failed {
                    message: "failed only in the original (unshrunk) case".into(),
                    metrics: Some(m),
                    rule: None,
                },
            };
            let m = failing_metrics(f.metrics);
            let tolerance = Some(kernel.tolerance(&shape));
            Ok(CheckReport {
                passed: false,
                cases: ran.get(),
                seed: cfg.seed,
                max_abs_err: m.max_abs_err,
                max_rel_err: m.max_rel_err,
                mse: m.mse,
                cosine: m.cosine,
                effective_atol: m.effective_atol,
                worst: m.worst,
                failure: Some(f.at(shape, seed, dist, m)),
                tolerance,
            })
        }
        // Every small shape drawn was refused by the kernel's rule: usually the parameters
        // themselves are invalid, so the rule's own reason (for a shape drawn the same way)
        // comes first.
        Err(TestError::Abort(reason)) => {
            let mut runner = TestRunner::deterministic();
            let why = kernel
                .small_shapes(params)
                .new_tree(&mut runner)
                .ok()
                .map(|t| t.current())
                .and_then(|s| kernel.validate(params, &s, &cfg.chip).err().map(|e| (s, e)))
                .or_else(|| refused.take());
            Err(RunError::Invalid(match why {
                Some((shape, rule)) => format!(
                    "the kernel's rule refuses these parameters at every small shape drawn \
                     (at {shape}: {rule})"
                ),
                None => format!(
                    "no valid small shape for these parameters ({reason}); widen the kernel's \
                     small_shapes strategy"
                ),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neuron_sim::Dtype;

    #[test]
    fn nan_outside_a_box_is_counted_with_its_first_and_last_index() {
        let specs = [TensorSpec::output("y", Dtype::F32, &[2, 3])];
        let nan = f32::NAN;
        // Two NaNs not filling their bounding box ([0..2, 0..3] of 2 × 3 holds 6).
        let said = unwritten(&[vec![nan, 1.0, 1.0, 1.0, 1.0, nan]], &[vec![1.0; 6]], &specs);
        assert_eq!(
            said.as_deref(),
            Some(
                "2 of 6 elements of `y` (of [2, 3]) are NaN where the reference has values, \
                 first `y`[0, 0], last `y`[1, 2]: never written (fresh memory is NaN), or \
                 computed as NaN"
            )
        );
        // One element is a box of its own; a NaN the reference has too is not unwritten.
        let said = unwritten(&[vec![1.0, nan, 1.0, 1.0, 1.0, nan]], &[vec![1.0; 6]], &specs);
        assert!(said.unwrap().starts_with("2 of 6"));
        let one = unwritten(&[vec![1.0, 1.0, 1.0, 1.0, nan, 1.0]], &[vec![1.0; 6]], &specs);
        assert!(one.unwrap().starts_with("`y`[1, 1] of [2, 3] was never written"));
        let all = unwritten(&[vec![nan; 6]], &[vec![1.0; 6]], &specs).unwrap();
        assert!(all.starts_with("all of `y` ([2, 3]) was never written"), "{all}");
        let both = [vec![nan, 1.0, 1.0, 1.0, 1.0, 1.0]];
        assert_eq!(unwritten(&both, &[vec![nan, 1.0, 1.0, 1.0, 1.0, 1.0]], &specs), None);
    }

    /// An expert index off by one at 150 is within fp32's tolerance (rtol 1e-2 of 150 is
    /// 1.5) but wrong: an integer output must be exact, and the message names it.
    #[test]
    fn an_integer_output_must_equal_its_reference_exactly() {
        let specs = [
            TensorSpec::output("w", Dtype::F32, &[2]),
            TensorSpec::output("experts", Dtype::U32, &[2, 2]),
        ];
        let reference = [vec![0.5, 0.5], vec![3.0, 150.0, 7.0, 9.0]];
        let off = [vec![0.5, 0.5], vec![3.0, 151.0, 7.0, 9.0]];
        let tol = neuron_tune_protocol::Tolerance::FP32;
        assert!(Metrics::compare(&off, &reference, &tol).passes(&tol), "the tolerance lets it by");
        let said = integer_mismatch(&off, &reference, &specs).expect("a mismatch");
        assert!(
            said.starts_with("1 of 4 elements of the integer output `experts` (uint32)"),
            "{said}"
        );
        assert!(said.contains("`experts`[0, 1] of [2, 2]: got 151, expected 150"), "{said}");
        // Float outputs are left to the tolerance; exact integers pass.
        let float_off = [vec![0.5, 0.501], reference[1].clone()];
        assert_eq!(integer_mismatch(&float_off, &reference, &specs), None);
    }

    #[test]
    fn within_every_bound_the_cosine_failed_and_the_nearest_element_is_named() {
        let specs = [TensorSpec::output("y", Dtype::F32, &[2])];
        let (out, reference) = ([vec![1.0, 2.0]], [vec![1.0, 2.01]]);
        let tol = neuron_tune_protocol::Tolerance { atol: 0.0, rtol: 0.01, min_cosine: 1.0 };
        let (m, at) = Metrics::compare_located(&out, &reference, &tol);
        let said = past_bound(&out, &reference, &specs, m.worst.zip(at));
        assert!(said.starts_with("every element within its bound"), "{said}");
        assert!(said.contains("`y`[1] of [2]"), "{said}");
    }
}
