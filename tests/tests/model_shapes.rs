//! `--shape MODEL@SHAPE`: a kernel at the dims a model calls it with at one of its shapes —
//! what `tune --model` tunes — so that the `bench` reproducer a fault of `tune --model`
//! prints runs as printed; its labels, and its errors.

use neuron_tune_tests::{
    cli_env, cli_in, events, kernels_and_models_workspace, like_double, root, run_printed,
    scratch_dir,
};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// `mshape-kernels`'s tuned database: the fault test's `tune` writes it (and refuses it
/// damaged), so the test that damages it holds this too.
static DATABASE: Mutex<()> = Mutex::new(());

/// The models' shape `one`: `tokens` × `width`.
const TOKENS: u64 = 256;
const WIDTH: u64 = 1024;

/// `double` that panics at `cols_per_tile = 128` (a bug in the kernel) and whose
/// `cols_per_tile = 65536` overflows SBUF: as `tune_faults.rs`'s.
const PANICKY: &str =
    "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
    let cw = p.uint(\"cols_per_tile\")?;\n\
    let index: Vec<u64> = if cw == 128 { Vec::new() } else { vec![0] };\n\
    let _ = index[0]; // BUG: empty when cols_per_tile = 128\n\
    let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\")? as u32);\n\
    correct(nc, p, sh, x, y, pool)\n\
}\n";

const CORRECT: &str =
    "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
    let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\")? as u32);\n\
    correct(nc, p, sh, x, y, pool)\n\
}\n";

/// A workspace of two crates, built once for this file's tests: `mshape-kernels` lists
/// `double` ([`PANICKY`]) and `triple`, and `mshape-models` (which links it, as a models
/// crate must for its kernels to be tuned and benched in the kernels crate) has two models
/// calling `double` at their shape `one` ({tokens = 256, width = 1024}): `net` twice — on the
/// `[tokens, width]` input, then on that result seen as `[tokens / 2, 2 · width]` — and
/// `solo` once, on `[tokens, width]`. Neither calls `triple`.
fn workspace() -> &'static Path {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let dir = scratch_dir("model-shapes");
        let common = std::fs::read_to_string(root().join("fixtures/broken/common.rs")).unwrap();
        let kernels = format!(
            "{common}\n{PANICKY}\n{}\nneuron_tune_harness::harness_main!(kernels: [Double, Triple]);\n",
            like_double("triple", "Double.run(nc, p, s, t)", "Double.reference(s, i)")
        );
        let models = format!(
            "{common}\n{CORRECT}\n\
             use neuron_tune_harness::{{Model, ModelBuilder}};\n\
             fn one() -> Vec<(String, Shape)> {{ vec![(\"one\".into(), Shape::new(&[(\"tokens\", {TOKENS}), (\"width\", {WIDTH})]))] }}\n\
             fn double() -> std::sync::Arc<dyn Kernel> {{ std::sync::Arc::new(Double) }}\n\
             struct Net;\n\
             impl Model for Net {{\n\
                 fn name(&self) -> &str {{ \"net\" }}\n\
                 fn shapes(&self) -> Vec<(String, Shape)> {{ one() }}\n\
                 fn build(&self, b: &mut ModelBuilder, s: &Shape) -> Result<(), String> {{\n\
                     let (t, w) = (s.dim(\"tokens\"), s.dim(\"width\"));\n\
                     let x = b.input(\"x\", Dtype::Bf16, &[t, w]);\n\
                     let y = b.scratch(\"y\", Dtype::Bf16, &[t, w]);\n\
                     b.call(&double(), Shape::new(&[(\"rows\", t), (\"cols\", w)]), &[x, y])?;\n\
                     let folded = b.reshape(y, &[t / 2, 2 * w])?;\n\
                     let z = b.output(\"z\", Dtype::Bf16, &[t / 2, 2 * w]);\n\
                     b.call(&double(), Shape::new(&[(\"rows\", t / 2), (\"cols\", 2 * w)]), &[folded, z])\n\
                 }}\n\
                 fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ vec![i[0].iter().map(|v| 4.0 * v).collect()] }}\n\
                 fn tokens(&self, s: &Shape) -> f64 {{ s.dim(\"tokens\") as f64 }}\n\
             }}\n\
             struct Solo;\n\
             impl Model for Solo {{\n\
                 fn name(&self) -> &str {{ \"solo\" }}\n\
                 fn shapes(&self) -> Vec<(String, Shape)> {{ one() }}\n\
                 fn build(&self, b: &mut ModelBuilder, s: &Shape) -> Result<(), String> {{\n\
                     let (t, w) = (s.dim(\"tokens\"), s.dim(\"width\"));\n\
                     let x = b.input(\"x\", Dtype::Bf16, &[t, w]);\n\
                     let y = b.output(\"y\", Dtype::Bf16, &[t, w]);\n\
                     b.call(&double(), Shape::new(&[(\"rows\", t), (\"cols\", w)]), &[x, y])\n\
                 }}\n\
                 fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ Double.reference(s, i) }}\n\
                 fn tokens(&self, s: &Shape) -> f64 {{ s.dim(\"tokens\") as f64 }}\n\
             }}\n\
             neuron_tune_harness::harness_main!(kernels: [], models: [Net, Solo]);\n"
        );
        kernels_and_models_workspace(
            &dir,
            [
                "mshape-kernels",
                "\n[package.metadata.neuron-tune.kernels.double]\nspace = { cols_per_tile = [128, 512, 65536] }\n\n\
                 [package.metadata.neuron-tune.kernels.triple]\nspace = { bufs = [1, 2] }\n",
                &kernels,
            ],
            ["mshape-models", &models],
        );
        dir
    })
}

/// The label of a model's call at `{rows, cols}` when the model calls the kernel at several
/// dims at its shape (dims by name, as `--shape` takes it back).
fn label(model: &str, rows: u64, cols: u64) -> String {
    format!("{model}@one{{cols={cols},rows={rows}}}")
}

/// `net`'s two calls of `double` at `one`, as its `build` makes them: on `[tokens, width]`,
/// then on `[tokens / 2, 2 · width]`.
fn net_calls() -> [String; 2] {
    [label("net", TOKENS, WIDTH), label("net", TOKENS / 2, 2 * WIDTH)]
}

#[test]
fn a_fault_of_tune_model_is_reproduced_by_the_bench_it_prints() {
    let ws = workspace();
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let manifest = ws.join("Cargo.toml");
    let args = [
        "tune",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--model",
        "net",
        "--shape",
        "one",
        "--kernel",
        "double",
        "--strategy",
        "grid",
        "--budget",
        "3",
        "--seed",
        "41007",
        "--chip",
        "trn1",
    ];
    let (code, out, err) = cli_env(&args, &[("NO_COLOR", "1")]);
    // Each of `net`'s calls of `double` is a target, and panics at cols_per_tile = 128.
    assert_eq!(code, 4, "{out}\n{err}");
    let commands: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("faults: "))
        .map(|l| l.split('`').nth(1).unwrap_or_else(|| panic!("{l}")))
        .collect();
    assert_eq!(commands.len(), 2, "{out}");
    for (command, call) in commands.iter().zip(net_calls()) {
        // The kernel's package and the model's (whose model `--shape` names), the call's
        // dims (the one problem that faulted), the run's chip and build.
        let start = format!(
            "cargo neuron-tune bench --manifest-path {} -p mshape-kernels -p mshape-models \
             --kernel double --shape '{call}' --params bufs=2,cols_per_tile=128 --chip trn1 ",
            manifest.display()
        );
        assert!(command.starts_with(&start), "{command}\n{start}");
        // The error an exit 4 ends with names the same command.
        assert!(err.contains(&format!("`{command}` reproduces it")), "{err}");
        // Pasted into a shell where the run was started, it panics again: exit 4, the
        // fault said at the call's dims.
        let (code, bench_out, bench_err) = run_printed(command);
        assert_eq!(code, 4, "{command}\n{bench_out}\n{bench_err}");
        let said =
            format!("panic    double bufs=2,cols_per_tile=128 at {call}: index out of bounds");
        assert!(bench_err.contains(&said), "{said}\n{bench_err}");
    }
}

#[test]
fn bench_at_a_models_shape_runs_the_kernel_at_the_dims_the_model_calls_it_with() {
    let ws = workspace();
    let bench = |shapes: &[&str]| {
        let mut args = vec!["bench", "--kernel", "double", "--params", "cols_per_tile=512"];
        for shape in shapes {
            args.extend(["--shape", shape]);
        }
        let (code, out, err) = cli_in(ws, &args);
        assert_eq!(code, 0, "{shapes:?}\n{out}\n{err}");
        events(&out, "bench")
    };
    // (label, program hash) of each row, by label: events stream as results arrive.
    let of = |rows: &[serde_json::Value]| -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = rows
            .iter()
            .map(|e| {
                (e["shape"].as_str().unwrap().into(), e["program_hash"].as_str().unwrap().into())
            })
            .collect();
        rows.sort();
        rows
    };
    // `net` calls `double` at two dims at `one`: both run, each labelled with its dims.
    let net = of(&bench(&["net@one"]));
    let labels: Vec<&str> = net.iter().map(|(l, _)| l.as_str()).collect();
    let mut expected = net_calls();
    expected.sort();
    assert_eq!(labels, expected, "{net:?}");
    // In label order: `{cols=1024,rows=256}` (the first call) before `{cols=2048,..}`.
    assert_eq!(net[0].0, net_calls()[0]);
    assert_ne!(net[0].1, net[1].1, "two dims, two programs: {net:?}");
    // `solo` calls it once, at `net`'s first call's dims: its label is the model's shape,
    // and its program that call's (the same kernel, parameters and dims).
    let solo = of(&bench(&["solo@one"]));
    assert_eq!(solo, [("solo@one".to_string(), net[0].1.clone())]);
    // A label with dims selects that call alone.
    let second = bench(&[&net_calls()[1]]);
    assert_eq!(of(&second), [net[1].clone()]);
    // Neither is the kernel's own shape `small` ({rows = 256, cols = 512}).
    let small = of(&bench(&["small"]));
    assert!(net.iter().all(|(_, h)| *h != small[0].1), "{net:?} {small:?}");
    // Named and model shapes in one run, each problem once under the first value's label:
    // `net@one` given twice, a label of one of its calls, and `solo@one`, whose one call
    // is `net`'s first (the same kernel of the same crate at the same dims).
    let mixed = of(&bench(&["small", "net@one", &net_calls()[1], "solo@one", "net@one"]));
    let mut expected = [small[0].clone(), net[0].clone(), net[1].clone()];
    expected.sort();
    assert_eq!(mixed, expected);

    // `check --shape` runs one seeded case at the model's dims, as at a named shape.
    let (code, out, err) = cli_in(
        ws,
        &["check", "--kernel", "double", "--shape", "solo@one", "--params", "cols_per_tile=512"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let checks = events(&out, "check");
    assert_eq!(checks.len(), 1, "{out}");
    assert_eq!(
        (checks[0]["shape"].as_str(), checks[0]["passed"].as_bool()),
        (Some("solo@one"), Some(true))
    );

    // `build` traces the programs `bench` ran there, under the same labels.
    let (code, out, err) = cli_in(
        ws,
        &["build", "--kernel", "double", "--shape", "net@one", "--params", "cols_per_tile=512"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(of(&events(&out, "build")), net);

    // `profile` at one call's label: that call, timed as `bench` timed it.
    let (code, out, err) = cli_in(
        ws,
        &["profile", "double", "--shape", &net_calls()[1], "--params", "cols_per_tile=512"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let profile = events(&out, "profile").pop().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(profile["shape"].as_str(), Some(net_calls()[1].as_str()));
    assert_eq!(profile["time_us"], second[0]["time_us"], "{profile}\n{second:?}");
}

/// A damaged record in the kernels crate's tuned database stops `bench`, `check`, `build`
/// and `profile` at a model's shape no more than at a named one (docs/formats.md): which
/// crate runs a model's call comes from cargo metadata, not from the records.
#[test]
fn a_damaged_tuned_database_does_not_stop_the_commands_at_a_models_shape() {
    let ws = workspace();
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let db = ws.join("kernels").join("neuron-tune.tuned.toml");
    let _restore = Restore::damage(&db);
    let run = |args: &[&str]| {
        let (code, out, err) = cli_in(ws, args);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
        err
    };
    // The warning block, from its first line to what the command leaves out.
    let warning = |err: &str| -> String {
        let start = format!("warning: {}:", db.display());
        let lines: Vec<&str> = err.lines().skip_while(|l| !l.starts_with(&start)).collect();
        let end = lines.iter().position(|l| l.starts_with("  Ignored: ")).unwrap_or_else(|| {
            panic!("no warning about {} in\n{err}", db.display());
        });
        lines[..=end].join("\n")
    };
    let bench = |shape: &str| {
        run(&["bench", "--kernel", "double", "--shape", shape, "--params", "cols_per_tile=512"])
    };
    let named = warning(&bench("small"));
    assert!(named.contains("tuned #1 (double/trn2/net@one)"), "{named}");
    assert_eq!(warning(&bench("net@one")), named);
    let profile = run(&["profile", "double", "--shape", "solo@one"]);
    assert!(profile.contains(&format!("warning: {}:", db.display())), "{profile}");
    // `check` and `build` without `--tuned` do not read it.
    for command in ["check", "build"] {
        let err = run(&[command, "--kernel", "double", "--shape", "solo@one"]);
        assert!(!err.contains(&db.display().to_string()), "{command}: {err}");
    }
}

/// A tuned database holding one damaged record (its `time_us` edited: its checksum no
/// longer holds) while alive, then as it was.
struct Restore {
    path: PathBuf,
    was: Option<Vec<u8>>,
}

impl Restore {
    fn damage(path: &Path) -> Restore {
        let was = std::fs::read(path).ok();
        std::fs::write(
            path,
            "schema = 1\n\n[[tuned]]\nchecksum = \"0123456789abcdef0123456789abcdef\"\n\
             chip = \"trn2\"\nkernel = \"double\"\nprogram_hash = \"0123456789abcdef0123456789abcdef\"\n\
             shape = \"net@one\"\nsim_version = \"0\"\ntime_us = 1.5\ntool_version = \"0.1.0\"\n\n\
             [tuned.dims]\ncols = 1024\nrows = 256\n\n[tuned.params]\nbufs = 2\ncols_per_tile = 512\n",
        )
        .unwrap();
        Restore { path: path.to_path_buf(), was }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        match &self.was {
            Some(text) => std::fs::write(&self.path, text).unwrap(),
            None => std::fs::remove_file(&self.path).unwrap(),
        }
    }
}

#[test]
fn a_models_shape_that_does_not_resolve_is_a_usage_error_naming_what_exists() {
    let ws = workspace();
    let refused = |args: &[&str], words: &[&str]| {
        let (code, out, err) = cli_in(ws, args);
        assert_eq!(code, 2, "{args:?}\n{out}\n{err}");
        for w in words {
            assert!(err.contains(w), "{args:?}: `{w}` not in\n{err}");
        }
    };
    // An unknown model: the models there are named.
    refused(
        &["bench", "--kernel", "double", "--shape", "llama@one"],
        &["--shape llama@one: no model `llama`", "have: net, solo"],
    );
    // An unknown shape of a model: its shapes are named.
    refused(
        &["bench", "--kernel", "double", "--shape", "net@two"],
        &["--shape net@two: model `net` has no shape `two` (it has: one)"],
    );
    // A kernel the model does not call there: what it calls is named.
    refused(
        &["bench", "--kernel", "triple", "--shape", "net@one"],
        &["--shape net@one: model `net` does not call kernel `triple` at shape `one` (it calls: double)"],
    );
    // Dims it does not call the kernel at: the calls it makes are named.
    refused(
        &["bench", "--kernel", "double", "--shape", "net@one{cols=1,rows=2}"],
        &[
            "calls no selected kernel at those dims",
            format!("double at {}", net_calls()[1]).as_str(),
        ],
    );
    // The model's package left out: said, with what to do.
    refused(
        &["bench", "-p", "mshape-kernels", "--kernel", "double", "--shape", "net@one"],
        &["no model `net` in the selected packages", "-p it too"],
    );
    // `profile` takes one variant: a kernel called at several dims is refused, naming them.
    refused(
        &["profile", "double", "--shape", "net@one"],
        &["profile takes one", net_calls()[0].as_str(), net_calls()[1].as_str()],
    );
}
