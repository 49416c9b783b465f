//! Models end to end on a scratch copy of the fixture workspace: `bench --model` with and
//! without a tuned database, `tune --model`, and stale tuned entries.

use neuron_tune_tests::{cli, cli_in, cli_in_ok, events, fixture_workspace};
use serde_json::Value;
use std::path::Path;

fn run(ws: &Path, args: &[&str]) -> String {
    cli_in_ok(ws, args).0
}

fn model_event(ws: &Path) -> Value {
    let out = run(ws, &["bench", "--model", "qwen3", "--shape", "tiny"]);
    let mut e = events(&out, "model");
    assert_eq!(e.len(), 1, "{out}");
    // The run ends with a summary, as every command's does: the distinct calls of its
    // tuned and default runs (one run when nothing is tuned), served or simulated.
    let summary = events(&out, "summary").pop().unwrap_or_else(|| panic!("no summary: {out}"));
    let model = e.last().unwrap();
    let n = |r: &Value| r["calls"].as_array().unwrap().len() as u64;
    let runs = if model["tuned"] == model["default"] {
        n(&model["tuned"])
    } else {
        n(&model["tuned"]) + n(&model["default"])
    };
    assert_eq!((&summary["command"], summary["variants"].as_u64()), (&"bench".into(), Some(runs)));
    assert_eq!(summary["failed"], 0);
    e.pop().unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The end-to-end figures follow from the calls: Σ calls × (time + launch overhead), and
/// tokens / that time.
fn assert_consistent(run: &Value) {
    // The chip's launch overhead (11 µs on every built-in chip: docs/neuroncore.md §7), not
    // a figure the output under test could get wrong along with its total.
    let overhead = f(&run["launch_overhead_us"]);
    let chip = run["chip"].as_str().unwrap();
    let want = match chip {
        "trn1" => neuron_sim::Chip::trn1(),
        "trn2" => neuron_sim::Chip::trn2(),
        "trn3" => neuron_sim::Chip::trn3(),
        other => panic!("not a built-in chip: {other}"),
    }
    .launch_overhead_ns
        / 1e3;
    assert_eq!(overhead, want, "{chip}'s launch overhead: {run}");
    let total: f64 = run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| f(&c["calls"]) * (f(&c["time_us"]) + overhead))
        .sum();
    assert!((total - f(&run["total_us"])).abs() < 1e-6 * total, "{run}");
    let tps = f(&run["tokens"]) / (total * 1e-6);
    assert!((tps - f(&run["tokens_per_s"])).abs() < 1e-6 * tps, "{run}");
    // A Qwen3 evaluation is one prompt's prefill (the Model trait's default).
    assert_eq!(f(&run["prompts"]), 1.0, "{run}");
    let pps = 1.0 / (total * 1e-6);
    assert!((pps - f(&run["prompts_per_s"])).abs() < 1e-6 * pps, "{run}");
}

fn calls_of<'a>(run: &'a Value, kernel: &str) -> Vec<&'a Value> {
    run["calls"].as_array().unwrap().iter().filter(|c| c["kernel"] == kernel).collect()
}

fn rope_calls(run: &Value) -> Vec<&Value> {
    calls_of(run, "rope")
}

#[test]
fn a_tuned_database_changes_model_throughput_and_a_changed_kernel_makes_it_stale() {
    let ws = fixture_workspace("models-tuned");

    // No tuned database: tuned and default are the same model.
    let before = model_event(&ws);
    assert_eq!(before["tokens_per_s"], before["default_tokens_per_s"]);
    assert!(before["tuned"]["calls"].as_array().unwrap().iter().all(|c| c["tuned"] == false));
    assert_consistent(&before["tuned"]);

    // Tune the model's RoPE calls; the whole space (6 variants) fits the budget, so the
    // winners are the fastest RoPE variants at the model's two RoPE shapes.
    let out = run(
        &ws,
        &[
            "tune", "--model", "qwen3", "--shape", "tiny", "--kernel", "rope", "--budget", "6",
            "--seed", "1",
        ],
    );
    let tuned = events(&out, "tune");
    assert_eq!(tuned.len(), 2, "the model calls RoPE at two shapes: {out}");
    let db = ws.join("kernels/neuron-tune.tuned.toml");
    let text = std::fs::read_to_string(&db).unwrap();
    assert_eq!(text.matches("kernel = \"rope\"").count(), 2, "{text}");
    assert!(text.contains("shape = \"qwen3@tiny\""), "{text}");
    // The two calls share the label `qwen3@tiny` but are two problems: each has its own
    // journal, so resuming replays each one's own evaluations and records the same winners
    // (a shared journal replayed one call's times as the other's).
    let journals: Vec<&str> = tuned.iter().map(|t| t["journal"].as_str().unwrap()).collect();
    assert_ne!(journals[0], journals[1]);
    // Their events say which call each is about: the problem's dimensions.
    assert!(tuned.iter().all(|t| t["dims"].is_object()), "{out}");
    assert_ne!(tuned[0]["dims"], tuned[1]["dims"]);
    let out = run(
        &ws,
        &[
            "tune", "--model", "qwen3", "--shape", "tiny", "--kernel", "rope", "--budget", "6",
            "--seed", "1", "--resume",
        ],
    );
    let resumed = events(&out, "tune");
    for (a, b) in tuned.iter().zip(&resumed) {
        assert_eq!((&a["best_params"], &a["best_time"]), (&b["best_params"], &b["best_time"]));
        assert_eq!(a["journal"], b["journal"]);
    }
    assert_eq!(std::fs::read_to_string(&db).unwrap(), text, "a resumed run records the same");

    // The report keeps the two calls apart: a trace file per call and variant, each written
    // (two calls shared one file, overwritten, before traces were named by dimensions).
    let page = ws.join("report-rope");
    let out = run(&ws, &["report", "--kernel", "rope", "--out", page.to_str().unwrap()]);
    let report = &events(&out, "report")[0];
    let traces: Vec<&str> =
        report["traces"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(traces.len(), 4, "best and default of two calls: {report}");
    let mut distinct = traces.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{traces:?}");
    assert!(traces.iter().all(|t| Path::new(t).is_file()), "{traces:?}");

    // The model now runs the tuned RoPE calls, and is faster by exactly their gain.
    let after = model_event(&ws);
    assert_consistent(&after["tuned"]);
    assert_consistent(&after["default"]);
    assert_eq!(after["default_tokens_per_s"], before["default_tokens_per_s"]);
    let (with, without) = (rope_calls(&after["tuned"]), rope_calls(&after["default"]));
    assert_eq!(with.len(), 2);
    let mut saved = 0.0;
    for (w, d) in with.iter().zip(&without) {
        assert_eq!(w["tuned"], true);
        assert!(f(&w["time_us"]) < f(&d["time_us"]), "the tuned call is faster: {w} vs {d}");
        saved += f(&w["calls"]) * (f(&d["time_us"]) - f(&w["time_us"]));
        let event = tuned.iter().find(|t| t["best_params"] == w["params"]).unwrap();
        assert!(event["shape"] == "qwen3@tiny", "{event}");
    }
    let (t_with, t_without) = (f(&after["total_us"]), f(&after["default_total_us"]));
    assert!((t_without - t_with - saved).abs() < 1e-6 * t_without, "{t_with} {t_without} {saved}");
    assert!(f(&after["tokens_per_s"]) > f(&after["default_tokens_per_s"]));
    assert_eq!(after["stale"].as_array().unwrap().len(), 0);

    // Change the RoPE program (the same values: the operands of a commutative add swapped).
    let src = ws.join("kernels/src/rope.rs");
    let code = std::fs::read_to_string(&src).unwrap();
    let changed =
        code.replace("tensor_tensor(y2, e, f, Alu::Add)", "tensor_tensor(y2, f, e, Alu::Add)");
    assert_ne!(code, changed, "the fixture's RoPE add is where this test expects it");
    std::fs::write(&src, changed).unwrap();

    let stale = model_event(&ws);
    let notes: Vec<&str> =
        stale["stale"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(notes.len(), 2, "both tuned RoPE calls are stale: {notes:?}");
    // The two share the label qwen3@tiny: each note names its own call's dimensions.
    assert_ne!(notes[0], notes[1]);
    for (note, call) in notes.iter().zip(rope_calls(&stale["tuned"])) {
        let heads = call["shape"]["heads"].as_u64().unwrap();
        assert!(
            note.contains("at qwen3@tiny {") && note.contains(&format!("heads={heads}")),
            "{note}"
        );
    }
    assert!(notes.iter().all(|n| n.contains("rope") && n.contains("neuron-tune.tuned.toml")));
    assert!(rope_calls(&stale["tuned"]).iter().all(|c| c["stale"].is_string()));

    // `list` says so too.
    let out = run(&ws, &["list", "-p", "neuron-fixtures-kernels"]);
    let list = events(&out, "list").pop().unwrap();
    let rope: Vec<&Value> =
        list["tuned"].as_array().unwrap().iter().filter(|t| t["kernel"] == "rope").collect();
    assert_eq!(rope.len(), 2);
    assert!(rope.iter().all(|t| t["stale"] == true), "{rope:?}");
}

#[test]
fn an_unknown_model_is_a_usage_error_naming_the_models() {
    let (code, _, err) = cli(&["bench", "--model", "llama", "-p", "neuron-fixtures-qwen3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--model llama: no such model") && err.contains("qwen3_naive"), "{err}");
}

/// `--validate` holds each new best against what it would replace in the run's outcome:
/// the run's previous best, or the default. A faster record already in the tuned database is
/// not what it replaces (the record is kept when the run's best is slower), so the early
/// bests of a second run are not rolled back, and none is counted invalid.
#[test]
fn validating_against_models_does_not_roll_back_bests_slower_than_a_kept_record() {
    let ws = fixture_workspace("models-validate");
    let tune = |extra: &[&str]| {
        let mut a = vec!["tune", "--workspace", "--kernel", "rmsnorm", "--shape", "small"];
        a.extend_from_slice(extra);
        let out = run(&ws, &a);
        events(&out, "tune").pop().unwrap_or_else(|| panic!("no tune event: {out}"))
    };
    let first = tune(&["--budget", "40", "--seed", "1"]);
    let second = tune(&["--budget", "20", "--seed", "2", "--validate"]);
    assert!(second["best_time"].as_f64() >= first["best_time"].as_f64(), "{second}");
    assert_eq!(second["invalid"], 0, "{second}");
    assert!(second["diagnoses"].as_array().unwrap().iter().all(|d| d["rule"] != "invalid_heavy"));
    // What the models were checked on is said, and the faster record stays.
    assert!(second["validated"]["models"].as_array().is_some_and(|m| !m.is_empty()), "{second}");
    assert_eq!(second["kept_record"]["params"], first["best_params"], "{second}");
}

/// One problem reached under two names: a model's call (`qwen3@tiny`) and the kernel's own
/// named shape of the same dimensions (rmsnorm's `small`). Its record is keyed by the
/// dimensions; tuned under either name with the same outcome, it keeps the label it has, so
/// runs alternating the two commands (`tune --model qwen3`, then the README's main job)
/// leave the file as it is, and say so, where they used to flip the label at each run.
#[test]
fn a_problem_tuned_under_two_names_keeps_its_label_and_the_file_does_not_churn() {
    let ws = fixture_workspace("models-labels");
    let db = ws.join("kernels/neuron-tune.tuned.toml");
    let grid = ["--kernel", "rmsnorm", "--strategy", "grid", "--budget", "4", "--seed", "1"];
    let by_model = [&["tune", "--model", "qwen3", "--shape", "tiny"][..], &grid].concat();
    let by_shape =
        [&["tune", "-p", "neuron-fixtures-kernels", "--shape", "small"][..], &grid].concat();
    run(&ws, &by_model);
    let text = std::fs::read_to_string(&db).unwrap();
    // The label of the record at `small`'s dimensions.
    let labelled = |text: &str| {
        let db: toml::Value = toml::from_str(text).unwrap();
        let records = db["tuned"].as_array().unwrap().clone();
        let dims =
            |r: &toml::Value| (r["dims"]["rows"].as_integer(), r["dims"]["hidden"].as_integer());
        let r = records.iter().find(|r| {
            r["kernel"].as_str() == Some("rmsnorm") && dims(r) == (Some(256), Some(1024))
        });
        r.unwrap_or_else(|| panic!("no record at small's dimensions in {text}"))["shape"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(labelled(&text), "qwen3@tiny", "{text}");
    let manifest = ws.join("Cargo.toml");
    for (i, args) in [&by_shape, &by_model, &by_shape].into_iter().enumerate() {
        let mut a = args.clone();
        a.extend(["--manifest-path", manifest.to_str().unwrap()]);
        let (code, _, err) = cli(&a);
        assert_eq!(code, 0, "{a:?}\n{err}");
        let now = std::fs::read_to_string(&db).unwrap();
        assert_eq!(labelled(&now), "qwen3@tiny", "run {i} ({a:?}): {err}");
        assert_eq!(now, text, "run {i} ({a:?}) changed the file:\n{err}");
        assert!(err.contains("neuron-tune.tuned.toml unchanged (this run's "), "{err}");
    }
}

/// `--tuned` runs, at each shape, what the crate's tuned database records there (what the
/// models run), and the default at a shape without a record, saying so.
#[test]
fn tuned_flag_runs_each_shapes_recorded_winner_and_the_default_elsewhere() {
    let ws = fixture_workspace("tuned-flag");
    let with_ws = |args: &[&str]| cli_in(&ws, args);
    let out = run(
        &ws,
        &["tune", "--kernel", "rmsnorm", "--shape", "small", "--budget", "12", "--seed", "3"],
    );
    let tuned = &events(&out, "tune")[0];
    let best = &tuned["best_params"];
    // Else `--tuned` and the default could not be told apart.
    let defaults = {
        let (_, out, _) = with_ws(&["bench", "--kernel", "rmsnorm", "--shape", "small"]);
        events(&out, "bench")[0]["params"].clone()
    };
    assert_ne!(best, &defaults, "seed 3 must find a winner other than the default: {tuned}");

    let (code, out, err) = with_ws(&["bench", "--kernel", "rmsnorm", "--tuned"]);
    assert_eq!(code, 0, "{err}");
    let rows = events(&out, "bench");
    assert!(rows.len() > 1, "rmsnorm has several shapes: {out}");
    for row in &rows {
        if row["shape"] == "small" {
            assert_eq!(&row["params"], best, "{row}");
            assert_eq!(row["time_us"], tuned["best_time"], "the recorded winner's time: {row}");
        } else {
            assert_eq!(row["params"], defaults, "no record at {}: the default", row["shape"]);
            assert!(err.contains(row["shape"].as_str().unwrap()), "{err}");
        }
    }
    assert!(err.contains("note: `rmsnorm` has no tuned record on trn2 at shape"), "{err}");

    // `check --tuned --shape small`: the winner, at full size.
    let (code, out, err) =
        with_ws(&["check", "--kernel", "rmsnorm", "--tuned", "--shape", "small", "--seed", "1"]);
    assert_eq!(code, 0, "{err}");
    let checked = events(&out, "check");
    assert_eq!(checked.len(), 1, "{out}");
    assert_eq!(&checked[0]["params"], best, "{out}");

    // `profile --tuned`: the winner, where the default was profiled before.
    let (code, out, err) = with_ws(&["profile", "rmsnorm", "--tuned", "--shape", "small"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(&events(&out, "profile")[0]["params"], best, "{err}");
    let (_, _, err) = with_ws(&["profile", "rmsnorm", "--shape", "small"]);
    assert!(err.contains("(`--tuned` profiles it)"), "{err}");

    // `--tuned` chooses the parameters: not with --params or --all-variants.
    let pairs: [&[&str]; 2] =
        [&["bench", "--tuned", "--params", "bufs=2"], &["check", "--tuned", "--all-variants"]];
    for args in pairs {
        let (code, _, err) = with_ws(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("cannot be used with"), "{err}");
    }
}

/// A second kernel crate in the fixture workspace, `experimental/` (package
/// `neuron-fixtures-experimental`, a library and a harness), whose one kernel is
/// named `add` like the fixture kernel the Qwen3 model calls for its residuals (it is
/// `fixtures/broken/common.rs`'s `y = 2·x` under that name). Its directory and name sort
/// before the fixture kernels', so a merge of every database would meet its records first,
/// and the first crate listing `add` is this one.
fn add_experimental_crate(ws: &Path) {
    let dir = ws.join("experimental");
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"neuron-fixtures-experimental\"\nversion.workspace = true\n\
         edition.workspace = true\npublish = false\n\n[dependencies]\nneuron-sim.workspace = true\n\
         neuron-tune-harness.workspace = true\n\n[[bin]]\nname = \"experimental-harness\"\n\
         path = \"src/bin/harness.rs\"\n\n[package.metadata.neuron-tune]\n\
         harness = \"experimental-harness\"\n\n[package.metadata.neuron-tune.kernels.add]\n\
         space = { bufs = [1, 2], cols_per_tile = [256, 512] }\n",
    )
    .unwrap();
    let common =
        std::fs::read_to_string(neuron_tune_tests::root().join("fixtures/broken/common.rs"))
            .unwrap()
            .replace("\"double\"", "\"add\"");
    assert!(common.contains("\"add\""), "common.rs names its kernel where this test expects it");
    let body = "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
                    let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\").unwrap() as u32);\n\
                    correct(nc, p, sh, x, y, pool)\n\
                }\n";
    std::fs::write(dir.join("src/lib.rs"), format!("{common}\n{body}")).unwrap();
    std::fs::write(
        dir.join("src/bin/harness.rs"),
        "neuron_tune_harness::harness_main!(kernels: [neuron_fixtures_experimental::Double]);\n",
    )
    .unwrap();
    let manifest = ws.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let members = "members = [\"kernels\", \"qwen3\"]";
    assert!(text.contains(members), "{text}");
    let text = text.replace(members, "members = [\"experimental\", \"kernels\", \"qwen3\"]");
    std::fs::write(&manifest, text).unwrap();
    let status = neuron_tune_tests::cargo()
        .args(["update", "--workspace", "--offline", "-q"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Tuned records key by kernel name, chip and dimensions, and do not name their package:
/// the file is the package's. A model uses the records of the crates its harness links
/// (its own and its dependencies), never another package's record of a kernel of the same
/// name — wrong parameters, possibly invalid for its kernel, and a stale warning about a
/// file it has nothing to do with. `tune --model` tunes the kernel the model runs, in its
/// dependency's database; a model whose crate links two crates defining the kernel runs the
/// one of the Rust crate its plan names, with that crate's record.
#[test]
fn a_model_uses_the_tuned_records_of_the_crates_it_links_not_a_same_named_kernels() {
    use cargo_neuron_tune::tuned::{TunedDb, TunedRecord};
    let ws = fixture_workspace("models-scope");
    add_experimental_crate(&ws);
    let with_ws = |args: &[&str]| cli_in(&ws, args);
    let tune_add =
        ["tune", "--model", "qwen3", "--shape", "tiny", "--kernel", "add", "--strategy", "grid"];
    let tune_add = [&tune_add[..], &["--budget", "9", "--seed", "11"]].concat();

    // `tune --model` tunes the `add` the model runs: its dependency's, in that database.
    let (code, out, err) = with_ws(&tune_add);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&out, "tune").len(), 1, "one distinct add call at tiny: {out}");
    assert!(!ws.join("experimental/neuron-tune.tuned.toml").exists(), "{err}");
    let kernels = TunedDb::load(&ws.join("kernels")).unwrap();
    let record: TunedRecord =
        kernels.records().iter().find(|r| r.kernel == "add").cloned().unwrap_or_else(|| {
            panic!("no add record in the kernels crate's database: {err}");
        });
    assert_eq!(record.shape, "qwen3@tiny");

    // The other crate's database holds a record of its own `add` at the same problem, with
    // other parameters (valid for the fixture's `add` too, so nothing but this test would
    // tell) and its own program.
    let params_of = |b: i64, c: i64| -> neuron_tune_protocol::Params {
        serde_json::from_value(serde_json::json!({"bufs": b, "cols_per_tile": c})).unwrap()
    };
    let params = [(1, 256), (3, 512), (1, 512)]
        .into_iter()
        .map(|(b, c)| params_of(b, c))
        .find(|p| *p != params_of(2, 1024) && *p != record.params)
        .unwrap();
    assert_ne!(params, record.params);
    let mut experimental = TunedDb::load(&ws.join("experimental")).unwrap();
    experimental.record(TunedRecord {
        shape: "qwen3@tiny".into(),
        params: params.clone(),
        program_hash: "0".repeat(32),
        ..record.clone()
    });
    experimental.save().unwrap();
    let experimental_db = ws.join("experimental/neuron-tune.tuned.toml");
    assert!(experimental_db.is_file());

    // The model runs its dependency's record, and has no word about the other file.
    let (code, out, err) = with_ws(&["bench", "--model", "qwen3", "--shape", "tiny"]);
    assert_eq!(code, 0, "{err}");
    let model = events(&out, "model").pop().unwrap_or_else(|| panic!("{out}"));
    let adds = calls_of(&model["tuned"], "add");
    assert_eq!(adds.len(), 1, "{model}");
    assert_eq!(adds[0]["tuned"], true, "{model}");
    assert_eq!(adds[0]["params"], serde_json::to_value(&record.params).unwrap(), "{model}");
    assert!(adds[0]["stale"].is_null(), "{model}");
    assert_eq!(model["stale"].as_array().unwrap().len(), 0, "{model}");
    let other_file = experimental_db.display().to_string();
    assert!(
        !err.contains(&other_file) && !err.contains("stale"),
        "no word of the other file: {err}"
    );

    // A model crate that links both crates: its `add` calls are of the kernels crate's Rust
    // crate (its plan says which), so they keep that crate's record, and nothing is withheld
    // (both were, while kernels were known by name alone); `tune --model` tunes that crate's
    // `add`, leaving the other database as it is.
    let qwen3 = ws.join("qwen3/Cargo.toml");
    let text = std::fs::read_to_string(&qwen3).unwrap();
    let dep = "neuron-fixtures-kernels = { path = \"../kernels\" }";
    assert!(text.contains(dep), "{text}");
    let both = format!("{dep}\nneuron-fixtures-experimental = {{ path = \"../experimental\" }}");
    std::fs::write(&qwen3, text.replace(dep, &both)).unwrap();
    let (code, out, err) = with_ws(&["bench", "--model", "qwen3", "--shape", "tiny"]);
    assert_eq!(code, 0, "{err}");
    let model = events(&out, "model").pop().unwrap_or_else(|| panic!("{out}"));
    let adds = calls_of(&model["tuned"], "add");
    assert_eq!(
        (&adds[0]["tuned"], &adds[0]["crate"]),
        (&true.into(), &"neuron_fixtures_kernels".into()),
        "{model}"
    );
    assert_eq!(adds[0]["params"], serde_json::to_value(&record.params).unwrap(), "{model}");
    assert_eq!(adds[0]["package"], "neuron-fixtures-kernels", "{model}");
    assert!(!err.contains("define a kernel `add`") && !err.contains(&other_file), "{err}");
    let experimental_text = std::fs::read_to_string(&experimental_db).unwrap();
    let (code, out, err) = with_ws(&tune_add);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&out, "tune").len(), 1, "the kernels crate's add alone: {out}");
    assert_eq!(std::fs::read_to_string(&experimental_db).unwrap(), experimental_text);

    // Linked through an optional dependency, the other crate counts only when the run's
    // `--features` switches it on: the model's harness links it then (and not otherwise).
    let optional = format!(
        "{dep}\nneuron-fixtures-experimental = {{ path = \"../experimental\", optional = true }}"
    );
    let features = "\n[features]\nexperimental = [\"dep:neuron-fixtures-experimental\"]\n";
    std::fs::write(&qwen3, text.replace(dep, &optional) + features).unwrap();
    let bench = ["bench", "--model", "qwen3", "--shape", "tiny"];
    let (code, out, err) = with_ws(&bench);
    assert_eq!(code, 0, "{err}");
    let model = events(&out, "model").pop().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(calls_of(&model["tuned"], "add")[0]["tuned"], true, "feature off: {model}\n{err}");
    assert!(!err.contains("define a kernel `add`"), "{err}");
    let featured = [&bench[..], &["-p", "neuron-fixtures-qwen3", "--features", "experimental"]];
    let (code, out, err) = with_ws(&featured.concat());
    assert_eq!(code, 0, "{err}");
    let model = events(&out, "model").pop().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(calls_of(&model["tuned"], "add")[0]["tuned"], true, "feature on: {model}");
    assert!(!err.contains("define a kernel `add`"), "{err}");
}
