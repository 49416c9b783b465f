//! Bad search spaces give an error naming the file, the key and its line.

use neuron_sim::{Hbm, Nc, SimResult};
use neuron_tune_harness::proptest::prelude::*;
use neuron_tune_harness::space::parse_config;
use neuron_tune_harness::*;
use std::path::Path;

struct K;

impl Kernel for K {
    fn name(&self) -> &str {
        "rmsnorm"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("bufs", 2, ""),
            ParamSpec::bool("fuse", false, ""),
            ParamSpec::choice("engine", &["vector", "scalar"], "vector", ""),
        ]
    }
    fn validate(&self, p: &Params, _: &Shape, _: &neuron_sim::Chip) -> Result<(), String> {
        (p.int("bufs").unwrap() <= 4).then_some(()).ok_or_else(|| "bufs > 4".into())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("small".into(), Shape::new(&[("rows", 256), ("hidden", 1024)]))]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        Just(Shape::new(&[("rows", 1), ("hidden", 1)])).boxed()
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

const HEAD: &str = "[package]\nname = \"k\"\nversion = \"0.1.0\"\n\n[package.metadata.neuron-tune]\nharness = \"h\"\n\n";

fn parse(body: &str) -> Result<CrateConfig, SpaceError> {
    let text = format!("{HEAD}{body}");
    parse_config(Path::new("crate/Cargo.toml"), &text, true, &[&K], CrateConfig::default())
}

/// Assert the error is at `line` (of the whole file), names `key`, and says `what`.
fn expect(body: &str, line: usize, key: &str, what: &str) {
    let e = parse(body).unwrap_err();
    let head_lines = HEAD.matches('\n').count();
    assert_eq!(e.file, Path::new("crate/Cargo.toml"));
    assert_eq!(e.line, head_lines + line, "{e}");
    assert_eq!(e.key, key, "{e}");
    assert!(e.message.contains(what), "{e}");
    assert!(e.to_string().starts_with(&format!("crate/Cargo.toml:{}:", head_lines + line)), "{e}");
}

#[test]
fn a_toml_shape_named_like_the_kernels_replaces_it_in_place() {
    let cfg = parse("[package.metadata.neuron-tune.kernels.rmsnorm]\nshapes = { big = { rows = 8, hidden = 8 }, small = { rows = 128, hidden = 64 } }\n").unwrap();
    let names: Vec<(&str, u64)> =
        cfg.kernels["rmsnorm"].shapes.iter().map(|(n, s)| (n.as_str(), s.dim("rows"))).collect();
    assert_eq!(names, [("small", 128), ("big", 8)]);
}

#[test]
fn a_good_space_is_read_with_its_shapes_and_defaults() {
    let cfg = parse("[package.metadata.neuron-tune.kernels.rmsnorm]\nspace = { bufs = [1, 2, 4], engine = [\"scalar\"] }\nshapes = { big = { rows = 16384, hidden = 1024 } }\ndefault = { bufs = 4 }\n").unwrap();
    let k = &cfg.kernels["rmsnorm"];
    assert_eq!(k.space["bufs"], [ParamValue::Int(1), ParamValue::Int(2), ParamValue::Int(4)]);
    assert_eq!(k.space["fuse"], [ParamValue::Bool(false)], "undeclared in TOML: just the default");
    assert_eq!(k.space().len(), 3);
    // Added to the kernel's own `small`, not instead of it.
    let small = ("small".to_string(), Shape::new(&[("rows", 256), ("hidden", 1024)]));
    let big = ("big".to_string(), Shape::new(&[("rows", 16384), ("hidden", 1024)]));
    assert_eq!(k.shapes, [small, big]);
    assert_eq!(k.defaults.int("bufs").unwrap(), 4);
    assert_eq!(cfg.harness.as_deref(), Some("h"));
}

#[test]
fn unknown_parameter() {
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nspace = { bufs = [1], tile = [64] }\n",
        2,
        "package.metadata.neuron-tune.kernels.rmsnorm.space.tile",
        "kernel `rmsnorm` has no parameter `tile` (it has: bufs, fuse, engine)",
    );
}

#[test]
fn wrong_type() {
    expect("[package.metadata.neuron-tune.kernels.rmsnorm.space]\nfuse = [true]\nbufs = [1, \"two\"]\n", 3, "package.metadata.neuron-tune.kernels.rmsnorm.space.bufs", "`\"two\"` is not an integer");
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nspace = { engine = [\"gpsimd\"] }\n",
        2,
        "package.metadata.neuron-tune.kernels.rmsnorm.space.engine",
        "is not one of \"vector\", \"scalar\"",
    );
}

#[test]
fn empty_range() {
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\n\nspace = { bufs = [] }\n",
        3,
        "package.metadata.neuron-tune.kernels.rmsnorm.space.bufs",
        "empty",
    );
}

#[test]
fn unknown_kernel() {
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnrom]\nspace = { bufs = [1] }\n",
        1,
        "package.metadata.neuron-tune.kernels.rmsnrom",
        "no kernel `rmsnrom` is registered (known: rmsnorm)",
    );
}

#[test]
fn shape_with_other_dims() {
    expect("[package.metadata.neuron-tune.kernels.rmsnorm]\nshapes = { big = { rows = 1, width = 2 } }\n", 2, "package.metadata.neuron-tune.kernels.rmsnorm.shapes.big", "takes shapes with dims {hidden, rows}");
}

/// Dims whose product passes 2^48 are refused where they are written: they used to reach
/// the kernel and overflow its size arithmetic (a panic blamed on the kernel, exit 4).
#[test]
fn a_shape_too_large_to_run_is_refused_naming_it() {
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nshapes = { big = { rows = 99999999999999, hidden = 99999999999 } }\n",
        2,
        "package.metadata.neuron-tune.kernels.rmsnorm.shapes.big",
        "hidden × rows = over 2^64 elements; a shape may span at most 2^48 = 281474976710656",
    );
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nshapes = { big = { rows = 16777216, hidden = 16777217 } }\n",
        2,
        "package.metadata.neuron-tune.kernels.rmsnorm.shapes.big",
        "hidden × rows = 281474993487872 elements; a shape may span at most 2^48",
    );
    // Exactly 2^48 elements is allowed.
    let cfg = parse("[package.metadata.neuron-tune.kernels.rmsnorm]\nshapes = { big = { rows = 16777216, hidden = 16777216 } }\n").unwrap();
    assert_eq!(cfg.kernels["rmsnorm"].shape("big").unwrap().dim("hidden"), 1 << 24);
    // The same bound for dims that come with a request instead of a name.
    let e = neuron_tune_harness::space::check_shape_size(&Shape::new(&[("n", u64::MAX)]));
    assert!(e.unwrap_err().contains("n = 18446744073709551615 elements"));
}

#[test]
fn unknown_key_and_syntax_errors_are_located_too() {
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nspcae = { bufs = [1] }\n",
        2,
        "(toml)",
        "unknown field `spcae`",
    );
    expect(
        "[package.metadata.neuron-tune.kernels.rmsnorm]\nspace = { bufs = [1, }\n",
        2,
        "(toml)",
        "invalid array",
    );
}

#[test]
fn neuron_tune_toml_uses_the_same_keys_without_the_prefix() {
    let text = "[kernels.rmsnorm]\nspace = { fuse = [1] }\n";
    let e = parse_config(Path::new("neuron-tune.toml"), text, false, &[&K], CrateConfig::default())
        .unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (2, "kernels.rmsnorm.space.fuse"));
    assert!(e.message.contains("is not true or false"), "{e}");
}

/// Cargo.toml and neuron-tune.toml merge key by key: a kernel entry in the side file used
/// to replace the kernel's whole Cargo.toml configuration (its space collapsed to the
/// defaults). Where both set one key, the side file's value stands for that key alone.
#[test]
fn neuron_tune_toml_merges_with_the_manifest_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = format!(
        "{HEAD}[package.metadata.neuron-tune.kernels.rmsnorm]\n\
         space = {{ bufs = [1, 2, 4], engine = [\"vector\", \"scalar\"] }}\n\
         shapes = {{ big = {{ rows = 16384, hidden = 1024 }}, mid = {{ rows = 512, hidden = 512 }} }}\n\
         default = {{ bufs = 4, fuse = true }}\n"
    );
    std::fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        dir.path().join("neuron-tune.toml"),
        "[kernels.rmsnorm]\nspace = { engine = [\"scalar\"] }\n\
         shapes = { mid = { rows = 256, hidden = 256 }, tiny = { rows = 1, hidden = 8 } }\n\
         default = { bufs = 1 }\n",
    )
    .unwrap();
    let cfg = neuron_tune_harness::space::load_crate_config(dir.path(), &[&K]).unwrap();
    let k = &cfg.kernels["rmsnorm"];
    // `space.bufs` from Cargo.toml, `space.engine` from the side file.
    assert_eq!(k.space["bufs"], [ParamValue::Int(1), ParamValue::Int(2), ParamValue::Int(4)]);
    assert_eq!(k.space["engine"], [ParamValue::from("scalar")]);
    // Named shapes merge: the kernel's, the manifest's, the side file's (`mid` replaced).
    let shapes: Vec<(&str, u64)> =
        k.shapes.iter().map(|(n, s)| (n.as_str(), s.dim("rows"))).collect();
    assert_eq!(shapes, [("small", 256), ("big", 16384), ("mid", 256), ("tiny", 1)]);
    // `default.bufs` from the side file, `default.fuse` from Cargo.toml.
    assert_eq!(k.defaults.int("bufs").unwrap(), 1);
    assert!(k.defaults.bool("fuse").unwrap());
    assert_eq!(cfg.harness.as_deref(), Some("h"));
}

/// `list`'s valid-variant count: exact up to `COUNT_LIMIT` configurations, an estimate from
/// `COUNT_LIMIT` evenly spread samples above. `K` accepts bufs ≤ 4; with `engine` and
/// `fuse` (two levels each, the fastest-varying: names in order, last fastest) the valid
/// configurations are the first 4 × 2 × 2 = 16 indices.
#[test]
fn valid_variants_are_counted_up_to_the_limit_and_estimated_past_it() {
    use neuron_tune_harness::space::{KernelConfig, COUNT_LIMIT};
    let chip = neuron_sim::Chip::trn2();
    let shape = Shape::new(&[("rows", 256), ("hidden", 1024)]);
    let count = |levels: i64| {
        let mut cfg = KernelConfig::of(&K);
        cfg.space.insert("bufs".into(), (1..=levels).map(ParamValue::Int).collect());
        cfg.space.insert("fuse".into(), vec![ParamValue::Bool(false), ParamValue::Bool(true)]);
        cfg.space.insert("engine".into(), vec!["vector".into(), "scalar".into()]);
        let n = cfg.space().len();
        let c = cfg.count_valid(&K, &shape, &chip);
        (n, c.valid, c.exact)
    };
    assert_eq!(COUNT_LIMIT, 20_000);
    // 5000 × 4 = 20 000: walked, exact.
    assert_eq!(count(5000), (20_000, 16, true));
    // 5001 × 4 = 20 004: sampled at stride 20 004 / 20 000 = 1 (offset (i·7919) mod 1 = 0),
    // so indices 0..20 000, 16 of them valid: round(16 / 20 000 × 20 004) = 16, an estimate.
    assert_eq!(count(5001), (20_004, 16, false));
    // 100 000 × 4 = 400 000: stride 20, sample i at 20·i + (7919·i mod 20); only i = 0 (index
    // 0) is below 16, so round(1 / 20 000 × 400 000) = 20.
    assert_eq!(count(100_000), (400_000, 20, false));
    // Whether the default is valid is said apart (what every untuned call runs): K's default
    // bufs = 2 is, a configured default of 7 is not, counted or estimated alike.
    for levels in [8, 100_000] {
        let mut cfg = KernelConfig::of(&K);
        cfg.space.insert("bufs".into(), (1..=levels).map(ParamValue::Int).collect());
        assert!(cfg.count_valid(&K, &shape, &chip).default_valid, "{levels}");
        cfg.defaults.0.insert("bufs".into(), ParamValue::Int(7));
        assert!(!cfg.count_valid(&K, &shape, &chip).default_valid, "{levels}");
    }
}

/// The column points at the text to fix, in the file as written: the bad value, the
/// misspelt key, the character the TOML parser stopped at.
#[test]
fn errors_point_at_the_offending_text() {
    let cases = [
        ("[package.metadata.neuron-tune.kernels.rmsnorm.space]\nfuse = [true]\nbufs = [1, \"two\"]\n", "\"two\"]"),
        ("[package.metadata.neuron-tune.kernels.rmsnorm]\nspcae = { bufs = [1] }\n", "spcae"),
        ("[package.metadata.neuron-tune.kernels.rmsnorm]\nspace = { bufs = [1, }\n", "}"),
        ("[package.metadata.neuron-tune.kernels.rmsnrom]\nspace = { bufs = [1] }\n", "rmsnrom]"),
    ];
    for (body, at) in cases {
        let e = parse(body).unwrap_err();
        let text = format!("{HEAD}{body}");
        let line = text.lines().nth(e.line - 1).unwrap();
        assert!(line[e.column - 1..].starts_with(at), "{e}: column {} of {line:?}", e.column);
        let shown = format!("crate/Cargo.toml:{}:{}:", e.line, e.column);
        assert!(e.to_string().starts_with(&shown), "{e}");
    }
}
