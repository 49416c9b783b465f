//! `check` draws its inputs through `Kernel::inputs`: a kernel with its own input domain is
//! checked on that domain, and a panicking generator is a failed check, not a crashed worker.

use neuron_sim::{Alu, Chip, Dtype, Hbm, Nc, Scalar, SimResult};
use neuron_tune_harness::cases::Cases;
use neuron_tune_harness::check::{check, check_remembering, CheckConfig, Distribution};
use neuron_tune_harness::proptest::prelude::*;
use neuron_tune_harness::{Kernel, ParamSpec, Params, Shape, TensorSpec, Work};

/// The one named shape of this file's kernels: 128 rows of 64 columns.
fn small() -> Vec<(String, Shape)> {
    vec![("small".into(), Shape::new(&[("rows", 128), ("cols", 64)]))]
}

/// Their small shapes: 1–128 rows of 1–64 columns.
fn up_to_128_by_64() -> BoxedStrategy<Shape> {
    (1u64..=128, 1u64..=64).prop_map(|(r, c)| Shape::new(&[("rows", r), ("cols", c)])).boxed()
}

/// Their tensors: `x` in, `y` out, both `rows × cols` of `dtype`.
fn x_to_y(sh: &Shape, dtype: Dtype) -> Vec<TensorSpec> {
    let d = [sh.dim("rows"), sh.dim("cols")];
    vec![TensorSpec::input("x", dtype, &d), TensorSpec::output("y", dtype, &d)]
}

/// `y = x` through SBUF; what `inputs` yields decides what the reference must be.
struct Passthrough {
    /// The value every input element takes (None: the default generator).
    constant: Option<f32>,
    /// The generator panics.
    generator_panics: bool,
    /// What the reference returns.
    reference: Reference,
}

#[derive(Clone, Copy, PartialEq)]
enum Reference {
    /// One output of the right length.
    Full,
    /// No outputs at all.
    Nothing,
    /// One output, one element short.
    Short,
}

/// The value the reference claims every output is.
const CLAIMED: f32 = 7.0;

impl Kernel for Passthrough {
    fn name(&self) -> &str {
        "copy"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 1, "buffers")]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::Bf16)
    }
    fn inputs(&self, sh: &Shape, seed: u64, dist: Distribution) -> Vec<Vec<f32>> {
        if self.generator_panics {
            panic!("no inputs for {sh}");
        }
        match self.constant {
            Some(v) => vec![vec![v; (sh.dim("rows") * sh.dim("cols")) as usize]],
            None => neuron_tune_harness::make_inputs(&self.tensors(sh), seed, dist),
        }
    }
    fn run(&self, nc: &mut Nc, _: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let pool = nc.sbuf_pool("io", 1);
        let tile = nc.tile(pool, Dtype::Bf16, &[sh.dim("rows"), sh.dim("cols")])?;
        nc.dma(tile, t[0])?;
        nc.dma(t[1], tile)
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        // Deliberately ignores its input: only the kernel's own generator makes this right.
        match self.reference {
            Reference::Full => vec![vec![CLAIMED; i[0].len()]],
            Reference::Nothing => vec![],
            Reference::Short => vec![vec![CLAIMED; i[0].len() - 1]],
        }
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 4.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

fn config() -> CheckConfig {
    CheckConfig { cases: 8, seed: 11, chip: Chip::trn2(), regressions: None }
}

#[test]
fn check_uses_the_kernels_input_generator() {
    let kernel = Passthrough {
        constant: Some(CLAIMED),
        generator_panics: false,
        reference: Reference::Full,
    };
    let report = check(&kernel, &Params::defaults(&kernel.params()), &config()).unwrap();
    assert!(report.passed, "{:?}", report.failure);
    assert_eq!(report.cases, 8);

    // The same kernel on the default (random) inputs disagrees with the reference.
    let kernel =
        Passthrough { constant: None, generator_panics: false, reference: Reference::Full };
    let report = check(&kernel, &Params::defaults(&kernel.params()), &config()).unwrap();
    assert!(!report.passed);
}

#[test]
fn a_panicking_generator_fails_the_check_with_its_message() {
    let kernel = Passthrough { constant: None, generator_panics: true, reference: Reference::Full };
    let report = check(&kernel, &Params::defaults(&kernel.params()), &config()).unwrap();
    assert!(!report.passed);
    let failure = report.failure.expect("a failure");
    assert!(failure.message.starts_with("input generator panicked: no inputs for"), "{failure:?}");
}

#[test]
fn a_reference_with_missing_or_short_outputs_fails_the_check_and_says_so() {
    for (reference, words) in [
        (Reference::Nothing, "the reference returned 0 outputs; the kernel writes 1 (`y`)"),
        (Reference::Short, "the reference's output `y` has"),
    ] {
        let kernel = Passthrough { constant: Some(CLAIMED), generator_panics: false, reference };
        let report = check(&kernel, &Params::defaults(&kernel.params()), &config()).unwrap();
        assert!(!report.passed, "a reference that does not match the outputs cannot pass");
        let failure = report.failure.expect("a failure");
        assert!(failure.message.contains(words), "{failure:?}");
    }
}

/// `y = x` that copies only the first 64 columns: right exactly when `cols ≤ 64`.
struct FirstColumns;

impl Kernel for FirstColumns {
    fn name(&self) -> &str {
        "first_columns"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 1, "buffers")]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::Bf16)
    }
    fn run(&self, nc: &mut Nc, _: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let (rows, w) = (sh.dim("rows"), sh.dim("cols").min(64));
        let pool = nc.sbuf_pool("io", 1);
        let tile = nc.tile(pool, Dtype::Bf16, &[128, 64])?;
        let v = tile.parts(0..rows as u32).cols(0..w);
        nc.dma(v, t[0].slice(&[0..rows, 0..w]))?;
        nc.dma(t[1].slice(&[0..rows, 0..w]), v)
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone()]
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 4.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

#[test]
fn check_at_runs_each_given_shape_and_names_the_first_wrong_one() {
    use neuron_tune_harness::check::check_at;
    let shape = |r: u64, c: u64| Shape::new(&[("rows", r), ("cols", c)]);
    let p = Params::defaults(&FirstColumns.params());
    let chip = Chip::trn2();
    let ok = check_at(&FirstColumns, &p, &[shape(128, 64), shape(7, 30)], 3, &chip).unwrap();
    assert!(ok.passed, "{:?}", ok.failure);
    assert_eq!(ok.cases, 2);
    // The second shape has 100 columns: the last 36 are never written.
    let shapes = [shape(128, 64), shape(16, 100), shape(8, 200)];
    let bad = check_at(&FirstColumns, &p, &shapes, 3, &chip).unwrap();
    assert!(!bad.passed);
    assert_eq!(bad.cases, 2, "stops at the first wrong shape");
    let failure = bad.failure.expect("a failure");
    assert_eq!(failure.shape, shape(16, 100));
    assert_eq!(failure.distribution, Distribution::Normal);
}

/// `y = 1.015 · x` in fp32 against a reference `y = x`: a 1.5 % error, inside bf16's
/// relative tolerance (2 %) and outside fp32's (1 %).
struct OffByOnePointFivePercent;

impl Kernel for OffByOnePointFivePercent {
    fn name(&self) -> &str {
        "scaled"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::F32)
    }
    fn run(&self, nc: &mut Nc, _: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let pool = nc.sbuf_pool("io", 1);
        let tile = nc.tile(pool, Dtype::F32, &[sh.dim("rows"), sh.dim("cols")])?;
        nc.dma(tile, t[0])?;
        nc.tensor_scalar(tile, tile, (Alu::Multiply, Scalar::Imm(1.015)), None)?;
        nc.dma(t[1], tile)
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone()]
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 8.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

#[test]
fn the_default_tolerance_is_the_output_dtypes_so_an_fp32_kernel_off_by_1_5_percent_fails() {
    use neuron_tune_harness::{default_tolerance, tolerance_for};
    let shape = Shape::new(&[("rows", 128), ("cols", 64)]);
    let kernel = OffByOnePointFivePercent;
    assert_eq!(kernel.tolerance(&shape), tolerance_for(Dtype::F32));
    let report = check(&kernel, &Params::new(), &config()).unwrap();
    assert!(!report.passed, "a 1.5 % error in fp32 is a wrong answer: {report:?}");
    // The failure says which element is furthest past its bound and what the two values
    // were: got 1.015 times what was expected.
    let failure = report.failure.as_ref().unwrap();
    let at = failure.message.split("own bound): `y`[").nth(1).expect("the worst element");
    let number = |after: &str| -> f64 {
        let v = at.split(after).nth(1).unwrap();
        v.split(|c: char| c == ',' || c.is_whitespace()).next().unwrap().parse().unwrap()
    };
    let (got, expected) = (number("got "), number("expected "));
    assert!(((got / expected) - 1.015).abs() < 1e-5, "{}", failure.message);
    assert_eq!(report.tolerance, Some(tolerance_for(Dtype::F32)));
    // Its outputs would pass the bf16 tolerance the default used to be: the test is about
    // which tolerance applies, not about an error large enough to fail any.
    let (x, y): (Vec<f32>, Vec<f32>) = (0..64).map(|i| (i as f32, i as f32 * 1.015)).unzip();
    let bf16 = tolerance_for(Dtype::Bf16);
    assert!(neuron_tune_harness::Metrics::compare(&[y], &[x], &bf16).passes(&bf16));
    // The least precise output decides; a kernel with no output is held to fp32's.
    let of = |dtypes: &[Dtype]| {
        let t: Vec<TensorSpec> = dtypes.iter().map(|&d| TensorSpec::output("o", d, &[1])).collect();
        default_tolerance(&t)
    };
    assert_eq!(of(&[Dtype::F32, Dtype::Bf16]), tolerance_for(Dtype::Bf16));
    assert_eq!(of(&[Dtype::Fp8E4m3, Dtype::F32]), tolerance_for(Dtype::Fp8E4m3));
    assert_eq!(of(&[]), tolerance_for(Dtype::F32));
    // Integer outputs are exact below 2^24: held to fp32's, and never the loosest.
    for int in [Dtype::I32, Dtype::U8, Dtype::I8, Dtype::U16, Dtype::I16, Dtype::U32] {
        assert_eq!(tolerance_for(int), tolerance_for(Dtype::F32), "{int}");
        assert_eq!(of(&[int, Dtype::Bf16]), tolerance_for(Dtype::Bf16), "{int}");
    }
}

#[test]
fn a_failing_case_is_saved_in_proptests_format_and_replayed_first() {
    let path = std::env::temp_dir().join(format!("neuron-tune-regressions-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = CheckConfig { regressions: Some(path.clone()), ..config() };
    let kernel =
        Passthrough { constant: None, generator_panics: false, reference: Reference::Full };
    let params = Params::defaults(&kernel.params());
    let first = check(&kernel, &params, &cfg).unwrap();
    assert!(!first.passed);
    let text = std::fs::read_to_string(&path).unwrap();
    let seeds: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(seeds.len(), 1, "{text}");
    assert!(seeds[0].starts_with("cc ") && seeds[0].contains(" # shrinks to ("), "{text}");
    // proptest reads it back: the saved case runs first and fails at once.
    let again = check(&kernel, &params, &cfg).unwrap();
    assert!(!again.passed);
    assert_eq!(again.cases, 1);
    assert_eq!(again.failure.unwrap().shape, first.failure.unwrap().shape);
    let _ = std::fs::remove_file(&path);
}

/// `y = x`, whose `run` refuses what its `validate` does not state: odd row counts when
/// `bufs` is 1 (a shape-dependent rule), and every shape when `bufs` is 0 (parameters it
/// cannot use at all, as `Params::uint` refuses a 0).
struct RefusesInRun;

impl Kernel for RefusesInRun {
    fn name(&self) -> &str {
        "refuses_in_run"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 1, "buffers")]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::Bf16)
    }
    fn run(&self, nc: &mut Nc, p: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let bufs = p.int("bufs").unwrap();
        if bufs == 0 || (bufs == 1 && sh.dim("rows") % 2 == 1) {
            return Err(format!("bufs = {bufs} at {sh}").into());
        }
        Passthrough { constant: None, generator_panics: false, reference: Reference::Full }
            .run(nc, p, sh, t)
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone()]
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 4.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

/// A shape at which the kernel's `run` refuses the parameters is skipped like one its
/// `validate` refuses (the variant is invalid there, as `bench` says, not wrong); refused
/// at every shape drawn, the variant is invalid, with the kernel's reason.
#[test]
fn a_case_the_kernel_refuses_in_run_is_skipped_and_refused_everywhere_is_invalid() {
    let p = |bufs: i64| Params::new().with("bufs", bufs);
    let report = check(&RefusesInRun, &p(1), &config()).expect("odd rows are skipped");
    assert!(report.passed, "{:?}", report.failure);
    assert_eq!(report.cases, 8, "eight cases ran, at even row counts");
    match check(&RefusesInRun, &p(0), &config()) {
        Err(neuron_tune_harness::RunError::Invalid(why)) => {
            assert!(why.contains("at every small shape drawn") && why.contains("bufs = 0"), "{why}")
        }
        other => panic!("refused everywhere is invalid: {other:?}"),
    }
}

/// A kernel that counts how often its inputs are drawn and its reference computed.
struct Counted<K> {
    kernel: K,
    inputs: std::sync::atomic::AtomicUsize,
    references: std::sync::atomic::AtomicUsize,
}

impl<K: Kernel> Counted<K> {
    fn new(kernel: K) -> Self {
        Counted { kernel, inputs: Default::default(), references: Default::default() }
    }
    /// (inputs drawn, references computed) so far.
    fn calls(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.inputs.load(SeqCst), self.references.load(SeqCst))
    }
}

impl<K: Kernel> Kernel for Counted<K> {
    fn name(&self) -> &str {
        self.kernel.name()
    }
    fn params(&self) -> Vec<ParamSpec> {
        self.kernel.params()
    }
    fn validate(&self, p: &Params, sh: &Shape, chip: &Chip) -> Result<(), String> {
        self.kernel.validate(p, sh, chip)
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        self.kernel.shapes()
    }
    fn small_shapes(&self, p: &Params) -> BoxedStrategy<Shape> {
        self.kernel.small_shapes(p)
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        self.kernel.tensors(sh)
    }
    fn inputs(&self, sh: &Shape, seed: u64, dist: Distribution) -> Vec<Vec<f32>> {
        self.inputs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.kernel.inputs(sh, seed, dist)
    }
    fn run(&self, nc: &mut Nc, p: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        self.kernel.run(nc, p, sh, t)
    }
    fn reference(&self, sh: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        self.references.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.kernel.reference(sh, i)
    }
    fn work(&self, sh: &Shape) -> Work {
        self.kernel.work(sh)
    }
}

/// A worker remembers each case's inputs and reference across checks
/// (`harness/src/cases.rs`): the report must be the one a cold check gives, bit for bit —
/// passing, and failing with its shrunk case and error figures — and a second check of the
/// same cases draws and computes nothing again.
#[test]
fn remembered_cases_give_the_cold_report_bit_for_bit_and_are_not_drawn_again() {
    for (constant, passes) in [(Some(CLAIMED), true), (None, false)] {
        let kernel = Counted::new(Passthrough {
            constant,
            generator_panics: false,
            reference: Reference::Full,
        });
        let params = Params::defaults(&kernel.params());
        let json = |r: &neuron_tune_harness::CheckReport| serde_json::to_string(r).unwrap();
        let cold = check(&kernel, &params, &config()).unwrap();
        assert_eq!(cold.passed, passes);
        let mut cases = Cases::new(Cases::LIMIT);
        let before = kernel.calls();
        let first = check_remembering(&kernel, &params, &config(), &mut cases).unwrap();
        let drawn = kernel.calls();
        let second = check_remembering(&kernel, &params, &config(), &mut cases).unwrap();
        assert_eq!(json(&first), json(&cold), "the first remembering check");
        assert_eq!(json(&second), json(&cold), "the check served from memory");
        assert!(drawn.0 > before.0 && drawn.1 > before.1, "the first check computes its cases");
        assert_eq!(kernel.calls(), drawn, "the second check computes none");
    }
}

/// `y = x` in fp32 at the inputs `[100, 1]`, against a reference `[100.5, 1.05]`: the
/// larger error (0.5 off 100.5) is within its bound, 1 % of |ref|, and the smaller one
/// (0.05 off 1.05) is far past its own.
struct FailsAtTheSmallerError;

impl Kernel for FailsAtTheSmallerError {
    fn name(&self) -> &str {
        "skewed"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::F32)
    }
    fn inputs(&self, _: &Shape, _: u64, _: Distribution) -> Vec<Vec<f32>> {
        vec![vec![100.0, 1.0]]
    }
    fn run(&self, nc: &mut Nc, _: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let pool = nc.sbuf_pool("io", 1);
        let tile = nc.tile(pool, Dtype::F32, &[sh.dim("rows"), sh.dim("cols")])?;
        nc.dma(tile, t[0])?;
        nc.dma(t[1], tile)
    }
    fn reference(&self, _: &Shape, _: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![vec![100.5, 1.05]]
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 8.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

#[test]
fn a_failed_tolerance_names_the_element_furthest_past_its_bound_not_the_largest_error() {
    use neuron_tune_harness::check::check_at;
    let shape = Shape::new(&[("rows", 1), ("cols", 2)]);
    let report =
        check_at(&FailsAtTheSmallerError, &Params::new(), &[shape], 1, &Chip::trn2()).unwrap();
    assert!(!report.passed);
    let message = report.failure.expect("a failure").message;
    assert!(message.starts_with("1 of 2 elements outside"), "{message}");
    // The failing element, by its error as a multiple of its own bound (said as such)...
    assert!(
        message.contains(
            "furthest past its bound (largest |err| ÷ its own bound): `y`[0, 1] of [1, 2]: got \
             1, expected 1.05"
        ),
        "{message}"
    );
    // ...never the passing one with the largest absolute error.
    assert!(!message.contains("`y`[0, 0]"), "{message}");
    // An intended precision is the kernel's to declare.
    assert!(message.ends_with("override `Kernel::tolerance()`"), "{message}");
}

#[test]
fn outputs_never_written_are_said_first_as_the_region_left_nan() {
    use neuron_tune_harness::check::check_at;
    let shape = |r: u64, c: u64| Shape::new(&[("rows", r), ("cols", c)]);
    let p = Params::defaults(&FirstColumns.params());
    // 16 rows of 100 columns: columns 64..100 of every row are never written.
    let bad = check_at(&FirstColumns, &p, &[shape(16, 100)], 3, &Chip::trn2()).unwrap();
    let message = bad.failure.expect("a failure").message;
    let first = message.lines().next().unwrap();
    assert_eq!(
        first,
        "`y`[.., 64..100] of [16, 100] was never written: NaN, as fresh memory is, where the \
         reference has values (576 of 1600 elements)",
        "{message}"
    );
    // The comparison follows on its own line.
    assert!(message.lines().nth(1).unwrap().starts_with("576 of 1600 elements outside"));
}

/// A copy through a tile too large for SBUF at any shape: a hardware rule broken whatever
/// the inputs.
struct Overflows;

impl Kernel for Overflows {
    fn name(&self) -> &str {
        "overflows"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        small()
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        up_to_128_by_64()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        x_to_y(sh, Dtype::F32)
    }
    fn run(&self, nc: &mut Nc, _: &Params, _: &Shape, _: &[Hbm]) -> SimResult<()> {
        let pool = nc.sbuf_pool("huge", 1);
        nc.tile(pool, Dtype::F32, &[128, 1 << 20])?;
        Ok(())
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone()]
    }
    fn work(&self, sh: &Shape) -> Work {
        Work { flops: 0.0, bytes: 8.0 * (sh.dim("rows") * sh.dim("cols")) as f64 }
    }
}

#[test]
fn a_broken_hardware_rule_names_its_rule_instruction_and_location() {
    let report = check(&Overflows, &Params::new(), &config()).unwrap();
    assert!(!report.passed);
    let f = report.failure.expect("a failure");
    assert_eq!(f.rule.as_deref(), Some("over_capacity"), "{f:?}");
    assert!(f.instruction.as_deref().is_some_and(|i| !i.is_empty()), "{f:?}");
    let location = f.location.as_deref().unwrap_or_default();
    assert!(location.contains("tests/check.rs:"), "{f:?}");
    assert!(f.message.contains("SBUF over capacity"), "{f:?}");
    // Its outputs were never compared: no metrics.
    assert_eq!(f.metrics, None);
}
