//! `tune` end to end on `fixtures/broken/noisy` (tiny programs, so a search is quick).

use neuron_tune_tests::{
    broken_manifest, cli, cli_env, double_crate, events, final_event, journal_lines, params_text,
    root, scratch_dir, tune_args, KeepFile,
};
use serde_json::Value;

/// Held by the tests that tune the kernel fixtures: they write its tuned database, and each
/// restores the file as it found it when it ends (one restoring it between another's runs
/// would delete that one's records).
static TUNED_FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn replay_runs_a_strategy_on_a_recorded_landscape() {
    let cache = root().join("fixtures/landscapes/convolution_milo_A4000.json.gz");
    let cache = cache.to_str().unwrap();
    let replay = || {
        let args = [
            "replay",
            "--cache",
            cache,
            "--budget",
            "50",
            "--seed",
            "3",
            "--message-format",
            "json",
        ];
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        final_event(&out)
    };
    let e = replay();
    assert_eq!((e["evaluations"].as_u64(), e["seed"].as_u64()), (Some(50), Some(3)));
    let curve = e["best_so_far"].as_array().unwrap();
    assert_eq!(curve.len(), 50);
    // The best so far never gets worse, and the final event's best is its end.
    let values: Vec<f64> = curve.iter().filter_map(Value::as_f64).collect();
    assert!(values.windows(2).all(|w| w[1] <= w[0]), "{values:?}");
    assert_eq!(e["best_time"].as_f64(), values.last().copied());
    // The convergence figures are those of this curve (docs/tuning-loop.md): the first
    // evaluation within 95 % of the final best's speed, and the fall over the last fifth.
    let at = |i: usize| curve[i].as_f64();
    let f = at(49).unwrap();
    let to_95 = (0..50).find(|&i| at(i).is_some_and(|b| b * 0.95 <= f)).unwrap() + 1;
    let c = &e["convergence"];
    assert_eq!(c["evaluations_to_95"].as_u64(), Some(to_95 as u64), "{c}");
    assert_eq!(c["window"], 10);
    let before = at(39).unwrap();
    let fell = c["improvement_in_window"].as_f64().unwrap();
    assert!((fell - (before - f) / before).abs() < 1e-12, "{c}");
    // Same seed, same run.
    assert_eq!(replay()["best_so_far"], e["best_so_far"]);
}

/// A replay states its landscape's unit (Kernel Tuner's `time` is in ms) and, when
/// `--early-stop` ends it before its budget, says so in the event and the result lines.
#[test]
fn a_replay_gives_its_unit_and_says_what_stopped_it() {
    let cache = root().join("fixtures/landscapes/convolution_milo_A4000.json.gz");
    let args = ["replay", "--cache", cache.to_str().unwrap(), "--budget", "500", "--seed", "3"];
    let mut early = args.to_vec();
    early.extend(["--early-stop", "5"]);
    let (code, out, err) = cli(&early);
    assert_eq!(code, 0, "{err}");
    let best = out.lines().find(|l| l.starts_with("  best ")).unwrap_or_else(|| panic!("{out}"));
    assert!(best.contains(" ms after "), "{best}");
    assert!(best.contains("; stopped by --early-stop: no improvement in the last 5 evaluations"));
    assert!(out.contains("convergence (best so far, ms): @1 "), "{out}");
    // Cut short while still improving (bayes, seed 1, 24 evaluations), a replay is told to
    // raise its budget, not to use flags a replay refuses.
    let short = ["replay", "--cache", cache.to_str().unwrap(), "--strategy", "bayes"];
    let (code, out, err) = cli(&[&short[..], &["--seed", "1", "--budget", "24"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("advice: raise --budget (a replay costs no simulation)"), "{out}");
    assert!(!out.contains("--resume") && !out.contains("--max-rounds"), "{out}");
    early.extend(["--message-format", "json"]);
    let (_, out, _) = cli(&early);
    let e = final_event(&out);
    assert_eq!(e["stopped_by"], "early_stop", "{e}");
    // The best so far was last improved 5 evaluations before the end.
    let curve: Vec<Option<f64>> =
        e["best_so_far"].as_array().unwrap().iter().map(Value::as_f64).collect();
    let n = curve.len();
    assert!(n < 500 && curve[n - 1] == curve[n - 6] && curve[n - 6] != curve[n - 7], "{curve:?}");
    // Run to its budget, nothing stopped it early: no such field.
    let mut budget = args.to_vec();
    budget[4] = "20";
    budget.extend(["--message-format", "json"]);
    let (_, out, _) = cli(&budget);
    assert!(final_event(&out).get("stopped_by").is_none(), "{out}");
}

/// A Kernel Tuner cache whose run was interrupted (never closed, its last entry cut) is
/// replayed, with a warning that what it never reached counts as absent.
#[test]
fn an_interrupted_kernel_tuner_cache_is_replayed_with_a_warning() {
    let path = neuron_tune_tests::scratch_dir("interrupted-cache").join("cut.json");
    let text = "{\n\"tune_params_keys\": [\"bx\"],\n\"tune_params\": {\"bx\": [16, 32, 64]},\n\
                \"objective\": \"time\",\n\"cache\": {\n\
                \"16\": {\"bx\": 16, \"time\": 3.0},\n\"32\": {\"bx\": 32, \"time\": 1.5},\n\
                \"64\": {\"bx\": 64, \"ti";
    std::fs::write(&path, text).unwrap();
    let (code, out, err) =
        cli(&["replay", "--cache", path.to_str().unwrap(), "--budget", "3", "--seed", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cut.json is an unterminated Kernel Tuner cache"), "{err}");
    assert!(err.contains("its last partial entry dropped"), "{err}");
    assert!(out.contains("optimum is 1.5000 ms (bx=32)"), "{out}");
}

#[test]
fn the_seed_line_says_how_to_replay_only_a_seed_the_tool_chose() {
    let cache = root().join("fixtures/landscapes/convolution_milo_A4000.json.gz");
    let status = |extra: &[&str]| {
        let mut args = vec!["replay", "--cache", cache.to_str().unwrap(), "--budget", "5"];
        args.extend(extra);
        let (code, _, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        err.lines().find(|l| l.contains("Replaying")).unwrap_or_else(|| panic!("{err}")).to_string()
    };
    // Given: the user knows the flag; the line names the seed and nothing more.
    let given = status(&["--seed", "11"]);
    assert!(given.ends_with(", seed 11"), "{given}");
    // Chosen from the clock: the line is the only record of it, so it says how to replay.
    let chosen = status(&[]);
    let seed = chosen.split("seed ").nth(1).and_then(|w| w.split(' ').next()).unwrap();
    assert!(seed.parse::<u64>().is_ok(), "{chosen}");
    assert!(chosen.ends_with(&format!("(replay with --seed {seed})")), "{chosen}");
}

#[test]
fn an_external_proposer_drives_a_real_tuning_run() {
    let proposer =
        neuron_tune_tests::cargo_build_bin("neuron-tune-example-proposer", "example-proposer");
    let args = tune_args("11", &["--proposer", proposer.to_str().unwrap()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = cli_env(&a, &[]);
    assert_eq!(code, 0, "{err}");
    let e = final_event(&out);
    assert_eq!((e["strategy"].as_str(), e["evaluations"].as_u64()), (Some("proposer"), Some(24)));
    // Every proposal was a real evaluation of a configuration of the space, none repeated
    // (the example proposer never proposes an evaluated configuration).
    let lines = journal_lines(e["journal"].as_str().unwrap());
    assert_eq!(lines.len(), 24);
    let mut seen: Vec<String> = lines.iter().map(|l| l["params"].to_string()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 24, "{seen:?}");
    assert!(lines.iter().all(|l| l["status"] == "measured" || l["status"] == "pruned"));
    // The best is the best of what it measured.
    let best = lines
        .iter()
        .filter(|l| l["status"] == "measured")
        .filter_map(|l| l["time_us"].as_f64())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(e["best_time"].as_f64(), Some(best));
}

#[test]
fn the_pareto_objective_returns_exactly_the_non_dominated_variants() {
    let manifest = broken_manifest("noisy");
    let args = [
        "tune",
        "--kernel",
        "noisy",
        "--budget",
        "4",
        "--seed",
        "5",
        "--objective",
        "pareto",
        "--manifest-path",
        &manifest,
        "--message-format",
        "json",
    ];
    let (code, out, err) = cli_env(&args, &[]);
    assert_eq!(code, 0, "{err}");
    let e = final_event(&out);
    let front = e["pareto"].as_array().expect("a pareto front").clone();
    assert!(!front.is_empty());
    let objectives = |v: &Value, t: &str, s: &str, en: &str| -> [f64; 3] {
        [v[t].as_f64().unwrap(), v[s].as_f64().unwrap(), v[en].as_f64().unwrap()]
    };
    let dominates = |a: &[f64; 3], b: &[f64; 3]| {
        a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
    };
    let front_pts: Vec<[f64; 3]> = front
        .iter()
        .map(|p| objectives(p, "time_us", "sbuf_bytes_per_partition", "energy_uj_estimate"))
        .collect();
    let measured: Vec<[f64; 3]> = journal_lines(e["journal"].as_str().unwrap())
        .iter()
        .filter(|l| l["status"] == "measured")
        .map(|l| objectives(l, "time_us", "sbuf_bytes", "energy_uj"))
        .collect();
    assert_eq!(measured.len(), 4, "nothing is pruned under the pareto objective");
    for f in &front_pts {
        assert!(measured.iter().all(|m| !dominates(m, f)), "{f:?} is dominated");
    }
    for m in &measured {
        assert!(front_pts.iter().any(|f| f == m || dominates(f, m)), "{m:?} is not covered");
    }
    // The front is made of measured variants, not points made up or mis-copied (one that
    // dominated everything would pass the two checks above): each is one of them, and it
    // holds every non-dominated one, once.
    for f in &front_pts {
        assert!(measured.contains(f), "{f:?} was not measured: {measured:?}");
    }
    let mut non_dominated: Vec<[f64; 3]> =
        measured.iter().filter(|m| !measured.iter().any(|o| dominates(o, m))).copied().collect();
    non_dominated.sort_by(|a, b| a.partial_cmp(b).unwrap());
    non_dominated.dedup();
    assert_eq!(front_pts.len(), non_dominated.len(), "{front_pts:?} vs {non_dominated:?}");
    // The fastest point of the front is the best variant.
    assert_eq!(front_pts[0][0], e["best_time"].as_f64().unwrap());
    // The tiles of the space trade time for SBUF: the front has more than one point.
    assert!(front_pts.len() > 1, "{front_pts:?}");
}

/// rmsnorm with `bufs` 2, 3 and 4 at `small` (two row tiles) runs one program: its ring
/// buffers are never used up, so the store serves all three one result. Their SBUF
/// differs all the same, and the Pareto front must see each variant's own: from the
/// kernel's allocation, the weight row (bf16) + `bufs` × (x and y tiles in bf16 and the
/// bf16 work tile) + 2 fp32 statistics, per partition, with hidden = 1024 and one row each.
#[test]
fn each_variant_gets_its_own_sbuf_even_where_variants_share_a_stored_result() {
    let _one = TUNED_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let _keep = KeepFile::new(root().join("fixtures/kernels/neuron-tune.tuned.toml"));
    let pins = "rows_per_partition=1,scale_on=vector,spmd=1,square_on=scalar,work_dtype=bf16";
    let args = [
        "tune",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "rmsnorm",
        "--shape",
        "small",
        "--params",
        pins,
        "--strategy",
        "grid",
        "--budget",
        "4",
        "--seed",
        "1",
        "--objective",
        "pareto",
        "--message-format",
        "json",
    ];
    // Twice: the second run is served from the store throughout.
    for run in ["first", "second"] {
        let (code, out, err) = cli_env(&args, &[]);
        assert_eq!(code, 0, "{err}");
        let e = final_event(&out);
        let journal = e["journal"].as_str().unwrap().to_string();
        assert!(journal.contains("-pareto-"), "a Pareto run has a journal of its own: {journal}");
        let lines = journal_lines(&journal);
        assert_eq!(lines.len(), 4, "{run} run: {lines:?}");
        let hidden = 1024;
        let mut hashes = std::collections::BTreeSet::new();
        for l in &lines {
            let bufs = l["params"]["bufs"].as_u64().unwrap();
            let expected = hidden * 2 + bufs * hidden * (2 + 2 + 2) + 2 * 4;
            assert_eq!(l["sbuf_bytes"], expected, "{run} run, bufs={bufs}: {l}");
            if bufs >= 2 {
                hashes.insert(l["program_hash"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(hashes.len(), 1, "bufs 2, 3 and 4 share one program: {hashes:?}");
        // So bufs 3 and 4 (as fast as 2, more SBUF) are dominated and off the front.
        let front: Vec<u64> = e["pareto"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["params"]["bufs"].as_u64().unwrap())
            .collect();
        assert!(!front.contains(&3) && !front.contains(&4), "{run} run: front {front:?}");
    }
}

/// `--time` stops starting evaluations; the batch under way (4 proposals, evaluated
/// together) finishes and is journaled, rather than cut after its first result with the
/// other three simulated and lost.
#[test]
fn a_time_limit_lets_the_batch_under_way_finish() {
    let args = tune_args("8", &["--time", "0.000001"]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = cli_env(&a, &[]);
    assert_eq!(code, 0, "{err}");
    let e = final_event(&out);
    assert_eq!(e["evaluations"], 4, "one whole batch: {e}");
    assert_eq!(e["stopped_by"], "time", "it says what ended it: {e}");
    let lines = journal_lines(e["journal"].as_str().unwrap());
    let evaluated = lines.iter().filter(|l| l["n"].is_u64() && l["n"] != u64::MAX).count();
    assert!(evaluated >= 4, "all four are journaled: {lines:?}");
}

/// `double` whose time depends on both parameters (buffers to overlap with, columns per
/// DMA), and which sleeps for a wall-clock time of its own per variant (0 to 160 ms, not a
/// function of its simulated time) each time it runs at the tuned shape: with several
/// workers, a batch's answers come back in another order than it was proposed in.
const SCRAMBLED: &str = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let (bufs, cw) = (p.uint("bufs")?, p.uint("cols_per_tile")?);
    if (sh.dim("rows"), sh.dim("cols")) == (256, 512) {
        std::thread::sleep(std::time::Duration::from_millis((bufs * 37 + cw / 32) % 5 * 40));
    }
    let pool = nc.sbuf_pool("io", bufs as u32);
    correct(nc, p, sh, x, y, pool)
}
"#;

/// A seed replays at any parallelism: the stochastic strategies hear each batch's outcomes
/// in proposal order, never in completion order, so `-j 1` and `-j 3` make the same
/// proposals, the same journal and the same best.
#[test]
fn a_seed_replays_a_stochastic_search_at_any_parallelism() {
    let dir = scratch_dir("tune-jobs");
    let space = "{ bufs = [1, 2, 3, 4, 5, 6, 7, 8], cols_per_tile = [32, 64, 96, 128, 192, 256, 384, 512] }";
    double_crate(&dir, "tune-jobs", space, SCRAMBLED, true);
    let manifest = dir.join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();
    for strategy in ["default", "bayes"] {
        // (best params, best so far, journal's (n, params, status, time) per evaluation)
        let run = |jobs: &str| {
            let a = [
                "tune",
                "--manifest-path",
                manifest,
                "--kernel",
                "double",
                "--strategy",
                strategy,
                "--seed",
                "90210",
                "--budget",
                "24",
                "-j",
                jobs,
                "--message-format",
                "json",
            ];
            let (code, out, err) = cli_env(&a, &[]);
            assert_eq!(code, 0, "{strategy} -j {jobs}: {err}");
            let e = final_event(&out);
            // 24 simulations; a proposal pruned by its lower bound is not charged to them.
            let pruned = e["pruned"].as_u64().unwrap();
            assert_eq!(e["evaluations"], 24 + pruned, "{strategy} -j {jobs}: {e}");
            // Read now: the next run (same kernel, strategy and seed) replaces the journal.
            let lines = journal_lines(e["journal"].as_str().unwrap());
            let journal: Vec<[Value; 4]> = lines
                .iter()
                .filter(|l| l.get("n").is_some())
                .map(|l| {
                    [l["n"].clone(), l["params"].clone(), l["status"].clone(), l["time_us"].clone()]
                })
                .collect();
            assert_eq!(journal.len() as u64, 24 + pruned, "{strategy} -j {jobs}: {lines:?}");
            (e["best_params"].clone(), e["best_so_far"].clone(), journal)
        };
        let three = run("3");
        let one = run("1");
        // The search had something to find, and found it at more than one point.
        let curve: Vec<f64> = one.1.as_array().unwrap().iter().filter_map(Value::as_f64).collect();
        assert!(curve.first() > curve.last(), "{strategy}: a flat search: {curve:?}");
        assert_eq!(one.0, three.0, "{strategy}: the best params at -j 1 and -j 3");
        assert_eq!(one.1, three.1, "{strategy}: the convergence at -j 1 and -j 3");
        assert_eq!(one.2, three.2, "{strategy}: the journal at -j 1 and -j 3");
    }
}

#[test]
fn pruned_proposals_are_not_charged_to_the_budget() {
    // The GEMM at its small shape on trn1: some proposals' lower bounds cannot beat the
    // incumbent.
    let _one = TUNED_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let _keep = KeepFile::new(root().join("fixtures/kernels/neuron-tune.tuned.toml"));
    let a = [
        "tune",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "gemm",
        "--shape",
        "small",
        "--chip",
        "trn1",
        "--budget",
        "20",
        "--seed",
        "2",
        "-j",
        "2",
        "--message-format",
        "json",
    ];
    let (code, out, err) = cli_env(&a, &[]);
    assert_eq!(code, 0, "{err}");
    let e = final_event(&out);
    let pruned = e["pruned"].as_u64().unwrap();
    assert!(pruned > 0, "this seed prunes: {e}");
    // Twenty variants simulated, and every proposal, pruned or not, journaled once.
    assert_eq!(e["evaluations"].as_u64(), Some(20 + pruned));
    let lines = journal_lines(e["journal"].as_str().unwrap());
    assert_eq!(lines.len() as u64, 20 + pruned);
    let pruned_lines = lines.iter().filter(|l| l["status"] == "pruned").count() as u64;
    assert_eq!(pruned_lines, pruned, "the journal and the result agree on what was pruned");
    // The human status says so (the same run again: everything it simulated is in the store).
    let (code, _, err) = cli_env(&a[..a.len() - 2], &[]);
    assert_eq!(code, 0, "{err}");
    let said = format!("after {} evaluations ({pruned} pruned without simulating)", 20 + pruned);
    assert!(err.contains(&said), "{err}");
    // A pruned variant's bound is no better than the best found.
    let best = e["best_time"].as_f64().unwrap();
    for l in lines.iter().filter(|l| l["status"] == "pruned") {
        assert!(l["time_us"].as_f64().unwrap() >= best, "{l}");
    }
}

#[test]
fn a_run_that_finds_nothing_faster_keeps_the_recorded_winner_and_a_tie_keeps_the_default() {
    let _one = TUNED_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let path = root().join("fixtures/kernels/neuron-tune.tuned.toml");
    let _keep = KeepFile::new(path.clone());
    let _ = std::fs::remove_file(&path);
    let tune = |kernel: &str, strategy: &str, budget: &str, seed: &str| {
        let a = [
            "tune",
            "-p",
            "neuron-fixtures-kernels",
            "--kernel",
            kernel,
            "--shape",
            "small",
            "--strategy",
            strategy,
            "--budget",
            budget,
            "--seed",
            seed,
            "-j",
            "2",
            "--message-format",
            "json",
        ];
        let (code, out, err) = cli_env(&a, &[]);
        assert_eq!(code, 0, "{err}");
        (final_event(&out), err)
    };
    let recorded = |kernel: &str| -> Value {
        let text = std::fs::read_to_string(&path).unwrap();
        let db: toml::Value = toml::from_str(&text).unwrap();
        let rec =
            db["tuned"].as_array().unwrap().iter().find(|r| r["kernel"].as_str() == Some(kernel));
        serde_json::to_value(rec.unwrap_or_else(|| panic!("no {kernel} record in {text}"))).unwrap()
    };
    // The whole softmax space (36 variants, grid): its best beats the default.
    let (whole, _) = tune("softmax", "grid", "36", "3");
    let (best, best_time) = (whole["best_params"].clone(), whole["best_time"].as_f64().unwrap());
    assert!(best_time < whole["default_time"].as_f64().unwrap(), "{whole}");
    assert_eq!(recorded("softmax")["params"], best);
    // `profile` without --params profiles the default, and names the recorded winner.
    let (code, _, err) =
        cli_env(&["profile", "-p", "neuron-fixtures-kernels", "softmax", "--shape", "small"], &[]);
    assert_eq!(code, 0, "{err}");
    let names = format!("the tuned database's winner at this shape is {}", params_text(&best));
    assert!(err.contains(&names), "{names}\n{err}");
    // One evaluation (grid's first variant, slower than the default): the run's result is
    // the default, as always, but the file keeps its faster record, where it used to take
    // the default.
    let (short, err) = tune("softmax", "grid", "1", "3");
    assert!(short["best_so_far"][0].as_f64().unwrap() > best_time, "{short}");
    assert_eq!(short["kept"], "default", "{short}");
    assert_eq!(short["kept_record"]["params"], best, "{err}");
    assert_eq!(short["kept_record"]["time_us"].as_f64(), Some(best_time));
    assert_eq!(recorded("softmax")["params"], best);
    assert_eq!(recorded("softmax")["time_us"].as_f64(), Some(best_time));
    // The human status says what was kept, and why.
    let a = ["tune", "-p", "neuron-fixtures-kernels", "--kernel", "softmax", "--shape", "small"];
    let (code, out, err) =
        cli_env(&[&a[..], &["--strategy", "grid", "--budget", "1"]].concat(), &[]);
    assert_eq!(code, 0, "{err}");
    // The file keeps its record: it is said to be unchanged, not written.
    assert!(
        err.contains("neuron-tune.tuned.toml unchanged (this run's 1 record already there)"),
        "{err}"
    );
    // The convergence line says the figures are the search's, which lost to the default.
    let (d, s) =
        (short["default_time"].as_f64().unwrap(), short["best_so_far"][0].as_f64().unwrap());
    // One verdict line: the record the file keeps first, then what this run found.
    let kept = format!(
        "  softmax small: kept the recorded winner {}, {best_time:.1} µs; this run kept the \
         default, {d:.1} µs: no variant beat it (the search's best: {s:.1} µs, {:.1} % \
         slower); the search: 95 % of the final best after 1 evaluation",
        params_text(&best),
        100.0 * (s / d - 1.0)
    );
    assert!(out.contains(&kept), "{kept}\n{out}");
    assert!(!out.contains("the tuned database keeps its"), "said once:\n{out}");
    // The table (stdout) shows what the file holds: the recorded winner, marked.
    let row = out.lines().rfind(|l| l.trim_start().starts_with("softmax ")).unwrap_or("");
    assert!(row.contains(&format!(" {best_time:.1} ")), "{row}\n{out}");
    assert!(row.trim_end().ends_with("(recorded winner kept)"), "{row}");
    let line = err.lines().find(|l| l.contains("Kept the recorded softmax small: ")).unwrap_or("");
    assert!(line.contains(&format!("({best_time:.1} µs; this run's best ")), "{err}");
    assert!(line.trim_end().ends_with(" µs is not faster)"), "{line}");
    assert!(!line.trim_start().contains("  "), "one line, single spaces: {line:?}");
    // A run that does find it again has nothing to keep.
    let (again, _) = tune("softmax", "grid", "36", "3");
    assert_eq!(again["best_params"], best);
    assert!(again.get("kept_record").is_none(), "{again}");
    // A pinned run whose pins exclude the record: the file keeps the (faster) record, but
    // the table shows the pinned run's own result — its best, or the kernel's default (bufs
    // 2) where nothing pinned beats it — and a note names the record.
    let bufs = best["bufs"].as_i64().unwrap();
    let pin = format!("bufs={}", if bufs == 1 { 2 } else { 1 });
    let (code, out, err) = cli_env(
        &[&a[..], &["--params", &pin, "--strategy", "grid", "--budget", "6", "--seed", "3"]]
            .concat(),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let row = out.lines().rfind(|l| l.trim_start().starts_with("softmax ")).unwrap_or("");
    let own = row.contains(&pin) || row.contains("bufs=2,exp_dtype=fp32,normalize_on=vector");
    assert!(own && !row.contains("recorded winner kept"), "{row}\n{out}");
    assert!(err.contains("lies outside the space searched"), "{err}");
    assert_eq!(recorded("softmax")["params"], best);
    // A goal missed by a short run while the file keeps its faster record: the goal is
    // judged on the record (what the file holds), and the message says whose figures they
    // are.
    let (code, _, err) = cli_env(
        &[&a[..], &["--goal", "11.5us", "--max-rounds", "1", "--strategy", "grid"]].concat(),
        &[],
    );
    assert_eq!(code, 6, "{err}");
    assert!(err.contains(&format!("best {best_time:.2} µs")), "{err}");
    let kept =
        format!("(that best is the tuned record kept, {}; this run's own", params_text(&best));
    assert!(err.contains(&kept), "{kept}\n{err}");

    // `add`, seed 12 of `random`: its one proposal (bufs 3) runs exactly as long as the
    // default (bufs 2) does; a tie keeps the default, so the record does not churn.
    let (tie, _) = tune("add", "random", "1", "12");
    let proposal = journal_lines(tie["journal"].as_str().unwrap())[0].clone();
    assert_eq!(proposal["time_us"], tie["default_time"], "the seed's proposal ties: {proposal}");
    assert_ne!(proposal["params"], tie["best_params"], "and is not the default: {proposal}");
    assert_eq!(tie["best_time"], tie["default_time"]);
    assert_eq!(tie["kept"], "default");
    assert_eq!(recorded("add")["params"], tie["best_params"]);
}

#[test]
fn tune_params_pins_those_parameters_and_searches_the_rest() {
    let _one = TUNED_FILE.lock().unwrap_or_else(|e| e.into_inner());
    let _keep = KeepFile::new(root().join("fixtures/kernels/neuron-tune.tuned.toml"));
    let base = ["tune", "-p", "neuron-fixtures-kernels", "--kernel", "softmax", "--shape", "small"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        cli_env(&a, &[])
    };
    // softmax's space is 3 bufs × 3 normalize_on × 2 exp_dtype × 2 spmd: with bufs pinned,
    // grid exhausts the other 12 and proposes nothing with another bufs.
    let args = ["--params", "bufs=1", "--strategy", "grid", "--budget", "18"];
    let (code, out, err) = with(&[&args[..], &["--message-format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let e = final_event(&out);
    assert_eq!(e["evaluations"], 12, "{e}");
    let lines = journal_lines(e["journal"].as_str().unwrap());
    assert_eq!(lines.len(), 12);
    assert!(lines.iter().all(|l| l["params"]["bufs"] == 1), "{lines:?}");
    // The best is pinned too, unless nothing pinned beats the kernel's own default (bufs 2),
    // which is what the result is measured against, and then kept.
    let fastest = lines.iter().filter_map(|l| l["time_us"].as_f64()).fold(f64::MAX, f64::min);
    match fastest < e["default_time"].as_f64().unwrap() {
        true => assert_eq!(e["best_params"]["bufs"], 1, "{e}"),
        false => {
            assert_eq!((&e["kept"], &e["best_params"]["bufs"]), (&"default".into(), &2.into()))
        }
    }
    // A misspelt or out-of-space pin is an error naming it (exit 2), as in `bench`.
    let (code, _, err) = with(&["--params", "buf=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("buf") && err.contains("unknown parameter"), "{err}");
    // `--all-variants` is bench's grid, not a search.
    let (code, _, err) = with(&["--all-variants"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--all-variants"), "{err}");
}

#[test]
fn what_kernel_code_prints_during_a_search_reaches_the_user() {
    // The `noisy` kernel's body prints on stdout and stderr; as in `bench`, each print comes
    // back as an `output` event of its variant (and never as a protocol line).
    let manifest = broken_manifest("noisy");
    let (code, out, err) = cli(&[
        "tune",
        "--kernel",
        "noisy",
        "--budget",
        "4",
        "--seed",
        "11",
        "--manifest-path",
        &manifest,
        "--message-format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    // (`list` at start-up has its own, of the validity rule: not of a variant.)
    let outputs: Vec<Value> =
        events(&out, "output").into_iter().filter(|e| e["kernel"] == "noisy").collect();
    assert!(!outputs.is_empty(), "{out}");
    assert!(outputs.iter().all(|e| !e["params"].as_object().unwrap().is_empty()), "{out}");
    assert!(
        outputs.iter().any(|e| e["text"].as_str().unwrap().contains("body on stderr")),
        "{out}"
    );
}

/// `--objective pareto` on the elementwise template's `my_add` at `small`, where
/// `bufs=3,cols_per_tile=1024` runs exactly as long as `bufs=2,cols_per_tile=1024` with
/// 6144 B of SBUF against 4096 B. A time-objective run (seed 4, 4 evaluations) records the
/// first; the Pareto run then shows the second on its front, and the file must keep that
/// one: on a tie in time the variant that dominates wins, where the record used to stand
/// (a tie kept it).
#[test]
fn a_pareto_run_records_the_variant_that_dominates_on_a_tie_in_time() {
    let dir = neuron_tune_tests::empty_kernel_crate("pareto-tie");
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let (code, _, err) = cli(&["new", "my_add", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let tune = |extra: &[&str]| {
        let mut a = vec!["tune", "--kernel", "my_add", "--shape", "small", "--manifest-path", m];
        a.extend_from_slice(extra);
        a.extend(["--message-format", "json"]);
        let (code, out, err) = cli_env(&a, &[]);
        assert_eq!(code, 0, "{a:?}\n{err}");
        final_event(&out)
    };
    let recorded = || -> Value {
        let text = std::fs::read_to_string(dir.join("neuron-tune.tuned.toml")).unwrap();
        let db: toml::Value = toml::from_str(&text).unwrap();
        serde_json::to_value(&db["tuned"][0]["params"]).unwrap()
    };
    let heavy = serde_json::json!({"bufs": 3, "cols_per_tile": 1024});
    let light = serde_json::json!({"bufs": 2, "cols_per_tile": 1024});
    let first = tune(&["--seed", "4", "--budget", "4"]);
    assert_eq!((&first["best_params"], recorded()), (&heavy, heavy.clone()), "{first}");

    let pareto = tune(&["--objective", "pareto", "--seed", "1"]);
    let front = pareto["pareto"].as_array().unwrap();
    let point = |p: &Value| front.iter().find(|f| f["params"] == *p).cloned();
    let fastest = point(&light).unwrap_or_else(|| panic!("{light} not on the front: {pareto}"));
    assert!(point(&heavy).is_none(), "{heavy} is dominated: {pareto}");
    assert_eq!(fastest["time_us"], front[0]["time_us"], "{pareto}");
    assert_eq!(recorded(), light, "the dominating variant is recorded: {pareto}");
    assert_eq!((&pareto["best_params"], &pareto["best_time"]), (&light, &fastest["time_us"]));
    assert!(pareto.get("kept_record").is_none(), "{pareto}");
    // A time-objective run that ties it keeps the record, as before.
    tune(&["--seed", "4", "--budget", "4"]);
    assert_eq!(recorded(), light);
}
