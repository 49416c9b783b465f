//! A kernel is its Rust crate and its name: a model calling two kernels of one name from two
//! crates gets each crate's tuned parameters, a request naming the crate gets that kernel,
//! and a name alone that the models call from two crates is refused, never the first picked.

use neuron_sim::{Chip, Dtype, Hbm, Nc, SimResult};
use neuron_tune_harness::kernel::crate_of_type;
use neuron_tune_harness::model::{plan, Defaults};
use neuron_tune_harness::proptest::prelude::*;
use neuron_tune_harness::protocol::ErrorKind;
use neuron_tune_harness::worker::Registry;
use neuron_tune_harness::*;
use std::sync::Arc;

/// `y = x` through SBUF, named `gemm`; `other` says another crate defines it (as a kernel
/// of a shared crate's type may say, overriding `rust_crate`).
struct Copy {
    other: bool,
}

impl Kernel for Copy {
    fn name(&self) -> &str {
        "gemm"
    }
    fn rust_crate(&self) -> &str {
        match self.other {
            true => "other_kernels",
            false => crate_of_type(std::any::type_name::<Self>()),
        }
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 1, "buffers")]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("small".into(), Shape::new(&[("rows", 128), ("cols", 64)]))]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        Just(Shape::new(&[("rows", 128), ("cols", 64)])).boxed()
    }
    fn tensors(&self, sh: &Shape) -> Vec<TensorSpec> {
        let d = [sh.dim("rows"), sh.dim("cols")];
        vec![TensorSpec::input("x", Dtype::Bf16, &d), TensorSpec::output("y", Dtype::Bf16, &d)]
    }
    fn run(&self, nc: &mut Nc, p: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let pool = nc.sbuf_pool("io", p.uint("bufs").unwrap() as u32);
        let tile = nc.tile(pool, Dtype::Bf16, &[sh.dim("rows"), sh.dim("cols")])?;
        nc.dma(tile, t[0])?;
        nc.dma(t[1], tile)
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone()]
    }
    fn work(&self, _: &Shape) -> Work {
        Work::default()
    }
}

/// A plain kernel, its crate not overridden.
struct Plain;

impl Kernel for Plain {
    fn name(&self) -> &str {
        "plain"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        Just(Shape::default()).boxed()
    }
    fn tensors(&self, _: &Shape) -> Vec<TensorSpec> {
        vec![]
    }
    fn run(&self, _: &mut Nc, _: &Params, _: &Shape, _: &[Hbm]) -> SimResult<()> {
        Ok(())
    }
    fn reference(&self, _: &Shape, _: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![]
    }
    fn work(&self, _: &Shape) -> Work {
        Work::default()
    }
}

/// Calls this crate's `gemm`, then the other crate's, on one input.
struct Both;

impl Model for Both {
    fn name(&self) -> &str {
        "both"
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("one".into(), Shape::new(&[("tokens", 128)]))]
    }
    fn build(&self, b: &mut ModelBuilder, _: &Shape) -> Result<(), String> {
        let x = b.input("x", Dtype::Bf16, &[128, 64]);
        let (y1, y2) =
            (b.output("y1", Dtype::Bf16, &[128, 64]), b.output("y2", Dtype::Bf16, &[128, 64]));
        let at = Shape::new(&[("rows", 128), ("cols", 64)]);
        let (ours, theirs): (Arc<dyn Kernel>, Arc<dyn Kernel>) =
            (Arc::new(Copy { other: false }), Arc::new(Copy { other: true }));
        b.call(&ours, at.clone(), &[x, y1])?;
        b.call(&theirs, at, &[x, y2])
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].clone(), i[0].clone()]
    }
    fn tokens(&self, _: &Shape) -> f64 {
        128.0
    }
}

#[test]
fn a_kernels_crate_is_the_crate_of_its_type() {
    assert_eq!(crate_of_type("my_kernels::gemm::Gemm"), "my_kernels");
    assert_eq!(crate_of_type("shared::Elementwise<my_kernels::Add>"), "shared");
    assert_eq!(crate_of_type("&mut a::B"), "a");
    assert_eq!(crate_of_type("(a::B, c::D)"), "");
    // This test file is the crate `identity`; through a trait object too.
    assert_eq!(Plain.rust_crate(), "identity");
    let k: Arc<dyn Kernel> = Arc::new(Plain);
    assert_eq!(k.rust_crate(), "identity");
}

#[test]
fn a_model_calling_two_kernels_of_one_name_gets_each_crates_parameters() {
    let shape = Shape::new(&[("tokens", 128)]);
    let at = Shape::new(&[("rows", 128), ("cols", 64)]);
    let entry = |krate: &str, bufs: i64| TunedEntry {
        kernel: "gemm".into(),
        krate: Some(krate.into()),
        shape: at.clone(),
        params: Params::new().with("bufs", bufs),
    };
    let tuned = Tuned(vec![entry("identity", 2), entry("other_kernels", 3)]);
    let p = plan(&Both, &shape, &Chip::trn2(), &tuned, &Defaults::new()).unwrap();
    let calls: Vec<(Option<&str>, String, bool)> =
        p.calls.iter().map(|c| (c.krate.as_deref(), c.params.to_string(), c.tuned)).collect();
    assert_eq!(
        calls,
        [
            (Some("identity"), Params::new().with("bufs", 2).to_string(), true),
            (Some("other_kernels"), Params::new().with("bufs", 3).to_string(), true)
        ]
    );
    // One crate's entry only: the other crate's `gemm` runs its default.
    let p = plan(
        &Both,
        &shape,
        &Chip::trn2(),
        &Tuned(vec![entry("other_kernels", 3)]),
        &Defaults::new(),
    )
    .unwrap();
    assert_eq!(p.calls.iter().map(|c| c.tuned).collect::<Vec<_>>(), [false, true]);
    // Timing: each call simulated with its own crate's kernel and parameters.
    let t = evaluate_timing(&Both, &shape, &Chip::trn2(), &tuned, &Defaults::new()).unwrap();
    let crates: Vec<Option<&str>> = t.kernels.iter().map(|k| k.krate.as_deref()).collect();
    assert_eq!(crates, [Some("identity"), Some("other_kernels")]);
}

#[test]
fn a_name_its_models_call_from_two_crates_is_refused_without_the_crate() {
    let reg = Registry {
        crate_name: "models".into(),
        manifest_dir: std::path::PathBuf::from("."),
        kernels: vec![Arc::new(Plain)],
        models: vec![Arc::new(Both)],
    };
    let e = reg.kernel("gemm", None).err().expect("two crates' gemm: refused");
    assert_eq!(e.kind, ErrorKind::BadRequest);
    assert!(
        e.message.contains("ambiguous")
            && e.message.contains("`identity`")
            && e.message.contains("`other_kernels`"),
        "{}",
        e.message
    );
    // Named with its crate, each is found.
    for c in ["identity", "other_kernels"] {
        assert_eq!(
            reg.kernel("gemm", Some(c)).map(|k| k.rust_crate().to_string()).ok().as_deref(),
            Some(c)
        );
    }
    let e = reg.kernel("gemm", Some("third")).err().expect("no such crate's gemm");
    assert_eq!(e.kind, ErrorKind::UnknownKernel);
    assert!(e.message.contains("of crate `third`"), "{}", e.message);
    // A kernel the crate lists is found by its name alone.
    assert_eq!(
        reg.kernel("plain", None).map(|k| k.name().to_string()).ok().as_deref(),
        Some("plain")
    );
}
