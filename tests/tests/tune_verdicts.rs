//! What `tune` concludes, and says, about a search: the default it measures against, the
//! variants it could not use, and what the figures of a search mean.

use neuron_tune_tests::{cli_env, events, root, KeepFile};
use serde_json::Value;

/// Held by the tests that tune the kernel fixtures: they write its tuned database, and each
/// puts the file back as it found it when it ends.
static TUNED_FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

const K: &str = "neuron-fixtures-kernels";

/// The fixtures' tuned database, put back when the guard drops, and absent until then (a
/// record left by another run would be measured against this run's best).
fn no_tuned_file() -> (std::sync::MutexGuard<'static, ()>, KeepFile) {
    let one = TUNED_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let path = root().join("fixtures/kernels/neuron-tune.tuned.toml");
    let keep = KeepFile::new(path.clone());
    let _ = std::fs::remove_file(&path);
    (one, keep)
}

fn run(args: &[&str]) -> (i32, String, String) {
    cli_env(args, &[("NO_COLOR", "1")])
}

fn tuned_record(kernel: &str) -> toml::Value {
    let path = root().join("fixtures/kernels/neuron-tune.tuned.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let db: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}: {text}"));
    let records = db["tuned"].as_array().unwrap();
    records.iter().find(|r| r["kernel"].as_str() == Some(kernel)).unwrap().clone()
}

/// `--params` pins a subspace that excludes rmsnorm's default (2 buffers, 1 row per
/// partition, fp32 work tiles), and nothing in it is as fast as that default (on one core,
/// as the default: two cores would be). The default column and the speed-up are the
/// kernel's real default's, and the record is not slower than it: the default is kept, and
/// said to be, loudly.
#[test]
fn a_pinned_search_is_measured_against_the_kernels_real_default() {
    let (_one, _keep) = no_tuned_file();
    let (code, bench, err) = run(&[
        "bench",
        "-p",
        K,
        "--kernel",
        "rmsnorm",
        "--shape",
        "small",
        "--message-format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let default = events(&bench, "bench")[0].clone();
    let default_us = default["time_us"].as_f64().unwrap();
    let args = [
        "tune",
        "-p",
        K,
        "--kernel",
        "rmsnorm",
        "--shape",
        "small",
        "--params",
        "bufs=1,rows_per_partition=8,spmd=1",
        "--budget",
        "10",
        "--seed",
        "31001",
    ];
    let (code, out, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let e = events(&out, "tune").pop().unwrap();
    assert_eq!(e["default_time"].as_f64(), Some(default_us), "{e}");
    assert!(e["best_time"].as_f64().unwrap() <= default_us, "{e}");
    assert_eq!(e["kept"], "default", "{e}");
    assert_eq!(e["best_params"], default["params"], "{e}");
    // The pinned search's own best is in the journal, and slower.
    let journal = std::fs::read_to_string(e["journal"].as_str().unwrap()).unwrap();
    let pinned: Vec<f64> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["status"] == "measured")
        .filter_map(|l| l["time_us"].as_f64())
        .collect();
    assert!(!pinned.is_empty() && pinned.iter().all(|t| *t > default_us), "{pinned:?}");
    let record = tuned_record("rmsnorm");
    assert!(record["time_us"].as_float().unwrap() <= default_us, "{record}");

    // As a person reads it: the row is the default against itself, and stderr says why.
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with("  rmsnorm ") && !l.contains(':'));
    let row = row.unwrap_or_else(|| panic!("no table row: {out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let d = format!("{default_us:.1}");
    assert_eq!(cells[2..5], [d.as_str(), d.as_str(), "default"], "{row}");
    assert!(out.contains("kept the default") && out.contains("pinned by --params"), "{out}");
    assert!(
        err.contains("warning: rmsnorm small: the kernel's default ")
            && err.contains("lies outside the space pinned by --params"),
        "{err}"
    );
}

/// A chip of 64 partitions: every variant of `add` (its tiles span 128) breaks a hardware
/// rule there, the default too. Nothing valid to run is a configuration error (2), as in
/// `bench`, and the error names the rule and its numbers.
#[test]
fn a_search_where_every_variant_breaks_a_hardware_rule_exits_2_naming_the_rule() {
    let (_one, _keep) = no_tuned_file();
    let (code, trn2, err) = run(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let p64 = trn2.replace("name = \"trn2\"", "name = \"p64\"");
    let p64 = p64.replace("partitions = 128", "partitions = 64");
    let file = neuron_tune_tests::scratch_dir("tune-p64").join("p64.toml");
    std::fs::write(&file, p64).unwrap();
    let chip = file.to_str().unwrap();
    let args = ["tune", "-p", K, "--kernel", "add", "--shape", "small", "--chip", chip];
    let args = [&args[..], &["--budget", "24", "--seed", "31003"]].concat();
    let (code, out, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 2, "{err}");
    let rule = "tile spans 128 partitions, more than the 64 a NeuronCore has";
    let error = events(&out, "error").pop().unwrap_or_else(|| panic!("no error event: {out}"));
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("add at small: no valid variant on p64: "), "{message}");
    // Its 18 variants, the default among them: the whole space, refused by one rule.
    assert!(message.contains("19 × hardware rule (partition_overflow): "), "{message}");
    assert!(message.contains(rule) && message.contains("nothing recorded"), "{message}");
    assert!(!root().join("fixtures/kernels/neuron-tune.tuned.toml").exists());
    // A person sees it as the error.
    let (code, _, err) = run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("error: add at small: no valid variant on p64") && err.contains(rule));
}

/// `add` has 18 variants and `attention_naive` one, its default: a budget of 40 tries every
/// one. Such a search is said to have searched the whole space, with no convergence
/// figure that implies it could go on (nor the `not_converged` diagnosis), and a goal it
/// misses is said to be out of the space's reach.
#[test]
fn a_search_of_the_whole_space_says_so_and_judges_no_convergence() {
    let (_one, _keep) = no_tuned_file();
    let args = ["tune", "-p", K, "--kernel", "add", "--kernel", "attention_naive"];
    let args = [&args[..], &["--shape", "small", "--budget", "40", "--seed", "31004"]].concat();
    let (code, out, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let tuned = events(&out, "tune");
    let of = |k: &str| tuned.iter().find(|e| e["kernel"] == k).unwrap().clone();
    let (add, naive) = (of("add"), of("attention_naive"));
    assert_eq!((add["evaluations"].as_u64(), naive["evaluations"].as_u64()), (Some(18), Some(1)));
    assert_eq!(add["convergence"]["whole_space"], 18, "{add}");
    assert_eq!(naive["convergence"]["whole_space"], 1, "{naive}");
    assert_eq!(add["diagnoses"], Value::Array(vec![]), "{add}");

    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let line = |k: &str| {
        let l = out.lines().find(|l| l.starts_with(&format!("  {k} small: ")));
        l.unwrap_or_else(|| panic!("no result line of {k}: {out}")).to_string()
    };
    let add_line = line("add");
    assert!(add_line.contains(": searched the whole space (18 variants); "), "{add_line}");
    assert!(!add_line.contains("95 %") && !add_line.contains("improved"), "{add_line}");
    let naive_line = line("attention_naive");
    assert!(
        naive_line.ends_with(" µs: its space holds only the default: nothing to search"),
        "{naive_line}"
    );
    assert!(!out.contains("diagnosis"), "{out}");
    // The status line gives the unit of its convergence curve, once.
    assert!(
        err.contains("after 18 evaluations (the whole space) ")
            && err.contains("; convergence (best so far, µs): @1 ")
    );

    // A goal no variant of the space meets: more rounds cannot help, and the error says so.
    let goal = ["tune", "-p", K, "--kernel", "add", "--shape", "small", "--seed", "31004"];
    let (code, _, err) = run(&[&goal[..], &["--goal", "50%", "--max-rounds", "8"]].concat());
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains(
            "the whole space (18 variants) was searched, so more rounds or a larger budget \
             cannot help"
        ),
        "{err}"
    );
}

/// `double` whose 3-buffer level skips the multiply (y = x): faster than the others, and
/// wrong. Its check fails, so it never wins, and that is said, not only counted.
const SKIPS_AT_3: &str = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let bufs = p.uint("bufs")?;
    let pool = nc.sbuf_pool("io", bufs as u32);
    if bufs != 3 {
        return correct(nc, p, sh, x, y, pool);
    }
    // BUG: 3 buffers skip the multiply.
    let (rows, cols) = (sh.dim("rows"), sh.dim("cols"));
    let mut r = 0;
    while r < rows {
        let pr = (rows - r).min(128);
        let t = nc.tile(pool, Dtype::Bf16, &[128, cols])?;
        let v = t.parts(0..pr as u32);
        nc.dma(v, x.rows(r..r + pr))?;
        nc.dma(y.rows(r..r + pr), v)?;
        r += pr;
    }
    Ok(())
}
"#;

/// A would-be winner that fails its correctness check is a fault of the kernel: warned
/// about with its time, the shrunk failing case and the `check` command that replays it,
/// reported to scripts as `variant_failed`, counted in `faults`, and the run exits 4 (a
/// correctness check failed) after recording the winner among the correct variants. The
/// command, pasted into a shell where the run was started, replays the failure, though the
/// crate's manifest and the chip file (a copy of trn2, named by its file) are in paths with
/// spaces: it carries them quoted, with the package, the chip and the build flags.
#[test]
fn a_would_be_winner_that_fails_its_check_is_named_with_its_failing_case_and_exits_4() {
    let dir = neuron_tune_tests::scratch_dir("tune-wrong");
    let krate = dir.join("my kernels");
    neuron_tune_tests::double_crate(&krate, "tune-wrong", "{ bufs = [1, 2, 3] }", SKIPS_AT_3, true);
    let manifest = krate.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let (code, trn2, err) = run(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let chip_file = dir.join("dir with space").join("my chip.toml");
    std::fs::create_dir_all(chip_file.parent().unwrap()).unwrap();
    std::fs::write(&chip_file, trn2.replace("name = \"trn2\"", "name = \"my chip\"")).unwrap();
    // As given, relative to where the tool runs (the repository root).
    let chip = chip_file.strip_prefix(root()).unwrap().to_str().unwrap();
    let args = ["tune", "--manifest-path", m, "--kernel", "double", "--shape", "small"];
    let args = [&args[..], &["--strategy", "grid", "--budget", "3", "--seed", "31006"]].concat();
    let args = [&args[..], &["--chip", chip]].concat();
    let args = [&args[..], &["--recheck"]].concat();
    let (code, out, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 4, "{err}");
    let e = events(&out, "tune").pop().unwrap_or_else(|| panic!("no tune event: {out}"));
    assert_ne!(e["best_params"]["bufs"], 3, "{e}");
    assert_eq!((e["faults"].as_u64(), e["invalid"].as_u64()), (Some(1), Some(0)), "{e}");
    let failed = events(&out, "variant_failed");
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(
        (&failed[0]["kind"], &failed[0]["params"]["bufs"]),
        (&"failed_check".into(), &3.into())
    );
    let journal = std::fs::read_to_string(e["journal"].as_str().unwrap()).unwrap();
    let wrong: Value = journal
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|l: &Value| l["status"] == "failed_check")
        .unwrap_or_else(|| panic!("{journal}"));
    assert!(wrong["time_us"].as_f64().unwrap() < e["best_time"].as_f64().unwrap(), "{wrong}");
    assert!(wrong["check"]["case"]["shape"].is_object(), "{wrong}");

    // A person is told which variant, how it fails and how to see it fail again.
    let (code, out, err) = run(&args);
    assert_eq!(code, 4, "{err}");
    let warning = err
        .lines()
        .find(|l| l.starts_with("warning: double small bufs=3,cols_per_tile=512 ("))
        .unwrap_or_else(|| panic!("no warning naming the variant: {err}"));
    assert!(warning.contains("faster than the result's"), "{warning}");
    assert!(warning.contains("failed its correctness check"), "{warning}");
    assert!(warning.contains(": smallest failing shape "), "{warning}");
    // The command is the last quoted part (the failing case's message may quote names).
    let command = warning.rsplit('`').nth(1).unwrap_or_else(|| panic!("{warning}"));
    let start = format!(
        "cargo neuron-tune check --manifest-path '{m}' -p tune-wrong --kernel double --params \
         bufs=3,cols_per_tile=512 --cases 2 --seed 3100"
    );
    assert!(command.starts_with(&start), "{warning}");
    assert!(command.contains(&format!(" --chip '{chip}' ")), "{warning}");
    assert!(command.contains(" --profile dev "), "{warning}");
    assert!(err.contains("double at small: 1 variant failed its correctness check"), "{err}");
    assert!(out.contains("faults: 1 of 3 evaluations: the kernel failed its correctness check"));
    assert!(out.contains(&format!("`{command}` reproduces the first")), "{out}");
    // Pasted into a shell where the run was started, the command replays the failure.
    let (code, out, err) = neuron_tune_tests::run_printed(command);
    assert_eq!(code, 4, "{command}\n{out}\n{err}");
    assert!(out.contains("FAILED") && out.contains("smallest failing shape"), "{out}");
}

/// `fit` (fixtures/broken/loop) runs `1 + |guess − cols/128|` passes: narrow's winner is
/// guess 2, wide's guess 8, and each is 7 passes at the other shape. Tuned together, each
/// shape gets a record of its own and runs it, never the other's winner: no shape is
/// over-fitted for, and saying so would be a false alarm (as it was for `tune --model`,
/// whose every call gets its own record).
#[test]
fn winners_that_differ_by_shape_are_no_over_fitting_when_each_shape_has_its_own_record() {
    let manifest = neuron_tune_tests::broken_manifest("loop");
    let args = ["tune", "--manifest-path", &manifest, "--kernel", "fit", "--strategy", "grid"];
    let args = [&args[..], &["--seed", "31005", "--budget", "3"]].concat();
    let (code, out, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let tuned = events(&out, "tune");
    let guess = |shape: &str| {
        let e = tuned.iter().find(|e| e["shape"] == shape).unwrap();
        e["best_params"]["guess"].as_i64().unwrap()
    };
    assert_eq!((guess("narrow"), guess("wide")), (2, 8), "{out}");
    assert_eq!(events(&out, "diagnosis"), Vec::<Value>::new(), "{out}");
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("over-fitted") && !err.contains("over-fitted"), "{out}");
}

/// A default the kernel's rules refuse (here a pool of 0 buffers, set in the crate's
/// configuration) is what every untuned call would run. A search that finds a valid winner
/// still records it, and says the default is not valid, with the reason and where to fix
/// it, instead of leaving only a "-" in the table's default column.
#[test]
fn a_default_the_rules_refuse_is_said_even_when_a_winner_is_found() {
    let dir = neuron_tune_tests::scratch_dir("tune-bad-default");
    let body = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let pool = nc.sbuf_pool("io", p.uint("bufs")? as u32);
    correct(nc, p, sh, x, y, pool)
}
"#;
    let space = "{ bufs = [0, 1, 2] }\ndefault = { bufs = 0 }";
    neuron_tune_tests::double_crate(&dir, "tune-bad-default", space, body, true);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let args = ["tune", "--manifest-path", m, "--shape", "small", "--budget", "2", "--seed", "1"];
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    let row = out.lines().rfind(|l| l.trim_start().starts_with("double ")).unwrap_or("");
    assert!(row.contains("bufs="), "a winner is recorded: {row}\n{out}");
    assert!(
        err.contains("warning: double at small: the default parameters bufs=0,cols_per_tile=512 are not valid here ("),
        "{err}"
    );
    assert!(err.contains("set a valid one (`default = { ... }`"), "{err}");
    // The search's figures do not count the default (no evaluation of theirs): its line
    // says the default was invalid rather than a bare "0 % invalid".
    let figures = out
        .lines()
        .find(|l| l.starts_with("  double small: ") && l.contains("% pruned, "))
        .unwrap_or_else(|| panic!("no figures line: {out}"));
    assert!(figures.contains("the default itself"), "{figures}");
    assert!(!figures.ends_with(" 0 % invalid"), "{figures}");
    let (code, json, err) = run(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let tuned = events(&json, "tune").pop().unwrap_or_else(|| panic!("no tune event: {json}"));
    assert_eq!(tuned["convergence"]["default_invalid"], true, "{tuned}");
    // The report's run table gives the same figures, from the journal's meta file.
    let out_dir = dir.join("report");
    let report = ["report", "--manifest-path", m, "--out", out_dir.to_str().unwrap()];
    let (code, _, err) = run(&report);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(
        html.contains(" invalid and the default itself</td>")
            || html.contains("none invalid but the default itself</td>"),
        "{html}"
    );
}
