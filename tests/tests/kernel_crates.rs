//! A model whose crate links two kernel crates that each define a kernel named `double`, and
//! calls both: each call is told by its kernel's Rust crate (`Kernel::rust_crate`), so it
//! runs that crate's kernel with that crate's tuned record, a stale record is that crate's
//! alone, `bench --model` names each call's package, and `--shape MODEL@SHAPE` benches each
//! in its own crate — where the kernels were known by name alone, neither record was used.
//! A baseline records each call with its crate, and the gate's list of the calls that moved
//! names each crate's `double` apart.

use cargo_neuron_tune::tuned::{TunedDb, TunedRecord};
use neuron_tune_tests::{cli_in, cli_in_ok, cli_json, events, root, scratch_dir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `y = 2x` at its defaults (bufs = 2, cols_per_tile = 512).
const FAST: &str =
    "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
    let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\")? as u32);\n\
    correct(nc, p, sh, x, y, pool)\n\
}\n";

/// The same, then its first block again (still `y = 2x`): another program at any parameters,
/// so which crate's kernel ran shows in the program hash.
const REF: &str =
    "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
    let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\")? as u32);\n\
    correct(nc, p, sh, x, y, pool)?;\n\
    let cw = p.uint(\"cols_per_tile\")?;\n\
    block(nc, pool, x, y, 0, sh.dim(\"rows\").min(128), 0, sh.dim(\"cols\").min(cw), cw)\n\
}\n";

/// The model: `double` of `kcrates-fast` on `x`, then `double` of `kcrates-ref` on that, at
/// {rows = 256, cols = 512}: the kernels' own shape `small`.
const MODELS: &str = "use neuron_sim::Dtype;\n\
    use neuron_tune_harness::{Kernel, Model, ModelBuilder, Shape};\n\
    use std::sync::Arc;\n\
    struct Pair;\n\
    impl Model for Pair {\n\
        fn name(&self) -> &str { \"pair\" }\n\
        fn shapes(&self) -> Vec<(String, Shape)> { vec![(\"one\".into(), Shape::new(&[(\"tokens\", 256)]))] }\n\
        fn build(&self, b: &mut ModelBuilder, s: &Shape) -> Result<(), String> {\n\
            let t = s.dim(\"tokens\");\n\
            let x = b.input(\"x\", Dtype::Bf16, &[t, 512]);\n\
            let y = b.scratch(\"y\", Dtype::Bf16, &[t, 512]);\n\
            let z = b.output(\"z\", Dtype::Bf16, &[t, 512]);\n\
            let at = Shape::new(&[(\"rows\", t), (\"cols\", 512)]);\n\
            let fast: Arc<dyn Kernel> = Arc::new(kcrates_fast::Double);\n\
            let reference: Arc<dyn Kernel> = Arc::new(kcrates_ref::Double);\n\
            b.call(&fast, at.clone(), &[x, y])?;\n\
            b.call(&reference, at, &[y, z])\n\
        }\n\
        fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> { vec![i[0].iter().map(|v| 4.0 * v).collect()] }\n\
        fn tokens(&self, s: &Shape) -> f64 { s.dim(\"tokens\") as f64 }\n\
    }\n\
    neuron_tune_harness::harness_main!(kernels: [], models: [Pair]);\n";

fn manifest(name: &str, deps: &str, bin: &str, kernels: bool) -> String {
    let r = root();
    let space = match kernels {
        true => "\n[package.metadata.neuron-tune.kernels.double]\nspace = { bufs = [1, 2], cols_per_tile = [128, 512] }\n",
        false => "",
    };
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nneuron-sim = {{ path = \"{}\" }}\nneuron-tune-harness = {{ path = \"{}\" }}\n{deps}\n\
         [[bin]]\nname = \"harness-{name}\"\npath = \"{bin}\"\n\n\
         [package.metadata.neuron-tune]\nharness = \"harness-{name}\"\n{space}",
        r.join("sim").display(),
        r.join("harness").display(),
    )
}

/// The workspace: `fast/` (`kcrates-fast`) and `ref/` (`kcrates-ref`), each a library
/// defining `Double` (kernel `double`) and a harness listing it, and `models/`
/// (`kcrates-models`) linking both, whose harness has the model `pair`.
fn workspace(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "Cargo.toml",
        "[workspace]\nresolver = \"2\"\nmembers = [\"fast\", \"ref\", \"models\"]\n",
    );
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let common = std::fs::read_to_string(root().join("fixtures/broken/common.rs")).unwrap();
    for (dir, name, body) in [("fast", "kcrates-fast", FAST), ("ref", "kcrates-ref", REF)] {
        write(&format!("{dir}/Cargo.toml"), &manifest(name, "", "src/bin/harness.rs", true));
        write(&format!("{dir}/src/lib.rs"), &format!("{common}\n{body}"));
        let lib = name.replace('-', "_");
        write(
            &format!("{dir}/src/bin/harness.rs"),
            &format!("neuron_tune_harness::harness_main!(kernels: [{lib}::Double]);\n"),
        );
    }
    let deps = "kcrates-fast = { path = \"../fast\" }\nkcrates-ref = { path = \"../ref\" }\n";
    write("models/Cargo.toml", &manifest("kcrates-models", deps, "src/main.rs", false));
    write("models/src/main.rs", MODELS);
    dir
}

/// One variant's measurement: end-to-end time (launch overhead included), program.
#[derive(Clone, Debug, PartialEq)]
struct Measured {
    time_us: f64,
    program_hash: String,
}

/// Every variant of `package`'s `double` at `small`, by parameters (as JSON text).
fn grid(ws: &Path, package: &str) -> BTreeMap<String, Measured> {
    let (out, _) = cli_in_ok(
        ws,
        &["bench", "-p", package, "--kernel", "double", "--shape", "small", "--all-variants"],
    );
    let rows = events(&out, "bench");
    assert_eq!(rows.len(), 4, "{out}");
    rows.iter()
        .map(|r| {
            let m = Measured {
                time_us: r["time_us"].as_f64().unwrap(),
                program_hash: r["program_hash"].as_str().unwrap().to_string(),
            };
            (r["params"].to_string(), m)
        })
        .collect()
}

fn params(bufs: i64, cols_per_tile: i64) -> neuron_tune_protocol::Params {
    serde_json::from_value(serde_json::json!({"bufs": bufs, "cols_per_tile": cols_per_tile}))
        .unwrap()
}

/// A record of `double` at the model's call, `pair@one` on trn2.
fn record(p: &neuron_tune_protocol::Params, m: &Measured, hash: &str) -> TunedRecord {
    TunedRecord {
        kernel: "double".into(),
        chip: "trn2".into(),
        shape: "pair@one".into(),
        dims: neuron_tune_protocol::Shape::new(&[("rows", 256), ("cols", 512)]),
        params: p.clone(),
        time_us: m.time_us,
        program_hash: hash.into(),
        tool_version: "0".into(),
        sim_version: "0".into(),
        validated_shapes: vec![],
        validated_models: vec![],
    }
}

fn call<'a>(run: &'a Value, krate: &str) -> &'a Value {
    let calls = run["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{run}");
    calls.iter().find(|c| c["crate"] == krate).unwrap_or_else(|| panic!("no {krate} call: {run}"))
}

#[test]
fn a_model_calling_two_crates_same_named_kernels_uses_each_crates_record() {
    let ws = workspace("kernel-crates");
    // Each crate's `double` at every variant: the two crates' kernels are different programs.
    let (fast, slow) = (grid(&ws, "kcrates-fast"), grid(&ws, "kcrates-ref"));
    let (default, f, r) = (params(2, 512), params(1, 128), params(2, 128));
    let key = |p: &neuron_tune_protocol::Params| serde_json::to_value(p).unwrap().to_string();
    assert_ne!(fast[&key(&f)].program_hash, slow[&key(&f)].program_hash);

    // Each crate records its own winner at the model's call: `kcrates-fast` (bufs 1,
    // 128 columns) of its program, `kcrates-ref` (bufs 2, 128 columns) of a program its
    // kernel no longer traces to: stale.
    let fast_record = record(&f, &fast[&key(&f)], &fast[&key(&f)].program_hash);
    let ref_record = record(&r, &slow[&key(&r)], &"0".repeat(32));
    for (dir, rec) in [("fast", fast_record), ("ref", ref_record)] {
        let mut db = TunedDb::load(&ws.join(dir)).unwrap();
        db.record(rec);
        db.save().unwrap();
    }

    let (code, out, err) = cli_in(&ws, &["bench", "--model", "pair", "--shape", "one"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let model = events(&out, "model").pop().unwrap_or_else(|| panic!("{out}"));
    let overhead = model["tuned"]["launch_overhead_us"].as_f64().unwrap();
    // Each call ran its crate's kernel with its crate's record: that crate's program at
    // those parameters, in that time.
    for (krate, package, p, grid) in
        [("kcrates_fast", "kcrates-fast", &f, &fast), ("kcrates_ref", "kcrates-ref", &r, &slow)]
    {
        let c = call(&model["tuned"], krate);
        assert_eq!((&c["tuned"], &c["package"]), (&true.into(), &package.into()), "{model}");
        assert_eq!(c["params"], serde_json::to_value(p).unwrap(), "{model}");
        let m = &grid[&key(p)];
        assert_eq!(c["program_hash"], m.program_hash.as_str(), "{krate}: {model}");
        let t = c["time_us"].as_f64().unwrap() + overhead;
        assert!((t - m.time_us).abs() < 1e-6 * m.time_us, "{krate}: {t} vs {}", m.time_us);
        let d = call(&model["default"], krate);
        assert_eq!(d["params"], serde_json::to_value(&default).unwrap(), "{model}");
        assert_eq!(d["program_hash"], grid[&key(&default)].program_hash.as_str(), "{model}");
    }
    // The throughput is what the two records imply, not the defaults'.
    let tokens_per_s = |a: &Measured, b: &Measured| 256.0 / ((a.time_us + b.time_us) * 1e-6);
    let expected = tokens_per_s(&fast[&key(&f)], &slow[&key(&r)]);
    let default_tps = tokens_per_s(&fast[&key(&default)], &slow[&key(&default)]);
    let got = model["tokens_per_s"].as_f64().unwrap();
    assert!((got - expected).abs() < 1e-6 * expected, "{got} vs {expected}: {model}");
    let got_default = model["default_tokens_per_s"].as_f64().unwrap();
    assert!((got_default - default_tps).abs() < 1e-6 * default_tps, "{model}");
    assert!((expected - default_tps).abs() > 1e-3 * default_tps, "records that change nothing");
    // Stale: `kcrates-ref`'s record only, and nothing withheld.
    let stale = model["stale"].as_array().unwrap();
    assert_eq!(stale.len(), 1, "{model}");
    let stale = stale[0].as_str().unwrap();
    assert!(
        stale.contains(&format!("ref{}neuron-tune.tuned.toml", std::path::MAIN_SEPARATOR)),
        "{stale}"
    );
    assert!(call(&model["tuned"], "kcrates_ref")["stale"].is_string(), "{model}");
    assert!(call(&model["tuned"], "kcrates_fast")["stale"].is_null(), "{model}");
    assert_eq!(err.matches("stale tuned entry").count(), 1, "{err}");
    assert!(!err.contains("define a kernel"), "nothing withheld: {err}");

    // The breakdown names each call's package: the two calls share a kernel name.
    let manifest = ws.join("Cargo.toml");
    let human = neuron_tune_tests::cli(&[
        "bench",
        "--model",
        "pair",
        "--shape",
        "one",
        "--manifest-path",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(human.0, 0, "{}", human.2);
    for package in ["kcrates-fast", "kcrates-ref"] {
        assert!(human.1.contains(&format!("double ({package})")), "{}", human.1);
    }

    // `--shape MODEL@SHAPE` selects each call in its own crate (it was refused: two linked
    // crates define `double`), at the dims the model calls it with.
    let (code, out, err) = cli_json(&[
        "bench",
        "--kernel",
        "double",
        "--shape",
        "pair@one",
        "--manifest-path",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let mut hashes: Vec<String> = events(&out, "bench")
        .iter()
        .map(|b| b["program_hash"].as_str().unwrap().to_string())
        .collect();
    hashes.sort();
    let mut want =
        vec![fast[&key(&default)].program_hash.clone(), slow[&key(&default)].program_hash.clone()];
    want.sort();
    assert_eq!(hashes, want, "{out}");
}

/// The baseline records each of the two `double` calls with its crate, and the gate matches
/// them by crate: with each crate's record applied after the save, both calls moved, each
/// from its crate's default to its crate's record, at its crate's times, and the moved list
/// names each by its package (the name alone would not tell them apart). Where calls were
/// matched by kernel and shape, the baseline held two indistinguishable `double` calls and
/// the gate listed one of them.
#[test]
fn a_baseline_and_the_gate_keep_two_crates_same_named_kernels_apart() {
    let ws = workspace("kernel-crates-gate");
    let (fast, slow) = (grid(&ws, "kcrates-fast"), grid(&ws, "kcrates-ref"));
    let default = serde_json::to_value(params(2, 512)).unwrap().to_string();
    cli_in_ok(&ws, &["baseline", "save"]);
    let text = std::fs::read_to_string(ws.join("neuron-tune.baseline.toml")).unwrap();
    let file: toml::Table = text.parse().unwrap();
    let entry = &file["model"].as_array().unwrap()[0];
    assert_eq!(entry["model"].as_str(), Some("pair"), "{text}");
    let calls = entry["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{text}");
    let by_crate = |c: &str| {
        let of: Vec<_> =
            calls.iter().filter(|x| x.get("crate").and_then(|v| v.as_str()) == Some(c)).collect();
        assert_eq!(of.len(), 1, "one `double` call of {c}:\n{text}");
        of[0].clone()
    };
    for (krate, package, grid) in
        [("kcrates_fast", "kcrates-fast", &fast), ("kcrates_ref", "kcrates-ref", &slow)]
    {
        let c = by_crate(krate);
        assert_eq!(c["kernel"].as_str(), Some("double"), "{text}");
        assert_eq!(c["package"].as_str(), Some(package), "{text}");
        // Its own crate's program: the calls were not merged nor swapped.
        assert_eq!(c["program_hash"].as_str(), Some(grid[&default].program_hash.as_str()));
    }

    // Each crate's record: the variant whose time is farthest from its default's.
    let farthest = |grid: &BTreeMap<String, Measured>| {
        let d = grid[&default].time_us;
        let (p, m) = grid
            .iter()
            .filter(|(p, _)| **p != default)
            .max_by(|a, b| (a.1.time_us - d).abs().total_cmp(&(b.1.time_us - d).abs()))
            .unwrap();
        assert!((m.time_us - d).abs() > 1e-3 * d, "a variant that changes nothing: {grid:?}");
        (serde_json::from_str::<neuron_tune_protocol::Params>(p).unwrap(), m.clone())
    };
    let (f, r) = (farthest(&fast), farthest(&slow));
    for (dir, (p, m)) in [("fast", &f), ("ref", &r)] {
        let mut db = TunedDb::load(&ws.join(dir)).unwrap();
        db.record(record(p, m, &m.program_hash));
        db.save().unwrap();
    }
    let md = ws.join("gate-summary.md");
    let xml = ws.join("gate-junit.xml");
    let args = ["gate", "--markdown", md.to_str().unwrap(), "--junit", xml.to_str().unwrap()];
    let (code, out, err) = cli_in(&ws, &args);
    let before = fast[&default].time_us + slow[&default].time_us;
    let slower = f.1.time_us + r.1.time_us > before;
    assert_eq!(code, if slower { 5 } else { 0 }, "{out}\n{err}");
    let judged = events(&out, "gate");
    assert_eq!(judged.len(), 1, "{out}");
    let summary = events(&out, "gate_summary").pop().expect("a gate summary");
    for moved in [&judged[0]["moved"], &summary["moved"]] {
        let moved = moved.as_array().unwrap();
        assert_eq!(moved.len(), 2, "both calls moved, each apart: {moved:?}");
        for (krate, package, (p, m), grid) in
            [("kcrates_fast", "kcrates-fast", &f, &fast), ("kcrates_ref", "kcrates-ref", &r, &slow)]
        {
            let c =
                moved.iter().find(|c| c["crate"] == krate).unwrap_or_else(|| panic!("{moved:?}"));
            assert_eq!((&c["kernel"], &c["package"]), (&"double".into(), &package.into()), "{c}");
            assert_eq!(c["before_params"], serde_json::to_value(params(2, 512)).unwrap(), "{c}");
            assert_eq!(c["after_params"], serde_json::to_value(p).unwrap(), "{c}");
            let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-6 * want;
            assert!(close(&c["before_us"], grid[&default].time_us), "{krate}: {c}");
            assert!(close(&c["after_us"], m.time_us), "{krate}: {c}");
            assert_eq!(c["models"], serde_json::json!(["pair@one"]), "{c}");
        }
    }
    // For people, each by its package, in the Markdown summary and on the terminal.
    let md = std::fs::read_to_string(&md).unwrap();
    let (code, human, err) = neuron_tune_tests::cli(&[
        "gate",
        "--manifest-path",
        ws.join("Cargo.toml").to_str().unwrap(),
        "--markdown",
        ws.join("gate-summary-2.md").to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(code, if slower { 5 } else { 0 }, "{human}\n{err}");
    for package in ["kcrates-fast", "kcrates-ref"] {
        assert!(md.contains(&format!("| `double ({package})` |")), "{md}");
        assert!(human.contains(&format!("double ({package})")), "{human}");
    }
}
