//! The tuning loop end to end on `fixtures/broken/loop`: `tune --goal` with rounds and its
//! decision log, the convergence analysis, and each diagnosis rule on a real run built to
//! trigger it (docs/tuning-loop.md). `--strategy grid` walks each space in its listed
//! order, so every run here is the same run.

use neuron_tune_tests::{broken_manifest, cli_command, events};
use serde_json::Value;

/// `tune` on the loop fixture with `--message-format json`: (exit code, final tune event,
/// stderr). Each run has its own seed: a run's journal is named by kernel, shape, chip,
/// strategy and seed, and the tests run in parallel.
fn tune(seed: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    tune_in(&broken_manifest("loop"), seed, args, env)
}

/// Everything the tests build, built once before any run: a run that starts with a cold
/// harness build (minutes on a fresh target directory) or waits on cargo's lock while
/// another test builds would be diagnosed `slow` by its build time, which the tests of the
/// other rules must not see. Returns the example proposer.
fn built() -> &'static std::path::Path {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let (code, _, err) =
            neuron_tune_tests::cli(&["build", "--manifest-path", &broken_manifest("loop")]);
        assert_eq!(code, 0, "{err}");
        neuron_tune_tests::cargo_build_bin("neuron-tune-example-proposer", "example-proposer")
    })
}

/// [`tune`] on another crate (or workspace) than the loop fixture.
fn tune_in(
    manifest: &str,
    seed: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, Value, String) {
    let (code, mut all, err) = tune_all_in(manifest, seed, args, env);
    (code, all.pop().unwrap(), err)
}

/// [`tune_in`] with every tune event (one per kernel and shape), in order.
fn tune_all_in(
    manifest: &str,
    seed: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, Vec<Value>, String) {
    built();
    let mut a = vec!["tune", "--seed", seed];
    // An external proposer replaces the strategy (the CLI refuses both).
    if !args.contains(&"--proposer") {
        a.extend_from_slice(&["--strategy", "grid"]);
    }
    a.extend_from_slice(args);
    a.extend_from_slice(&["--manifest-path", manifest, "--message-format", "json"]);
    let mut cmd = cli_command(&a);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the CLI runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = events(&stdout, "tune");
    assert!(!all.is_empty(), "no tune event: {stderr}");
    (out.status.code().unwrap_or(-1), all, stderr)
}

/// The run's journal as the tool reads it back: every line sealed and trusted, seals off.
fn journal(e: &Value) -> Vec<Value> {
    let path = std::path::Path::new(e["journal"].as_str().unwrap());
    let read = cargo_neuron_tune::store::read_journal(path).unwrap();
    assert!(read.rejected.is_empty(), "{:?}", read.rejected);
    read.lines
}

fn rules(e: &Value) -> Vec<String> {
    e["diagnoses"].as_array().unwrap().iter().map(|d| d["rule"].as_str().unwrap().into()).collect()
}

/// The diagnosis of `rule` in a tune event (it must have fired).
fn diagnosis(e: &Value, rule: &str) -> Value {
    let all = e["diagnoses"].as_array().unwrap();
    all.iter().find(|d| d["rule"] == rule).unwrap_or_else(|| panic!("no {rule}: {e}")).clone()
}

fn repeats(v: &Value) -> i64 {
    v["repeats"].as_i64().unwrap()
}

#[test]
fn a_reachable_goal_stops_early_and_an_unreachable_one_names_the_limit() {
    // `steps` gets faster as `repeats` falls (8 is the default); grid proposes 8, 7, 6, 5 in
    // round 1. Whatever the simulated times, the goal is met exactly when the best so far
    // reaches default / 1.2, and the run must stop at that round.
    let (code, e, err) =
        tune("101", &["--kernel", "steps", "--goal", "20%", "--max-rounds", "2"], &[]);
    assert_eq!(code, 0, "{err}");
    let default = e["default_time"].as_f64().unwrap();
    let g = &e["goal"];
    assert_eq!(g["met"], true, "{e}");
    assert!((g["target_us"].as_f64().unwrap() - default / 1.2).abs() < 1e-9);
    let rounds = e["rounds"].as_array().unwrap();
    assert_eq!(g["rounds"].as_u64(), Some(rounds.len() as u64));
    assert!(rounds.len() < 2, "met in fewer rounds than the budget: {rounds:?}");
    // The journal's evaluations say the goal was met at this round and not before.
    let lines = journal(&e);
    let evals: Vec<&Value> = lines.iter().filter(|l| l.get("n").is_some()).collect();
    assert_eq!(evals.len(), 4 * rounds.len());
    let best = evals.iter().filter_map(|l| l["time_us"].as_f64()).fold(f64::INFINITY, f64::min);
    assert!(best <= default / 1.2, "{best} vs {default}");
    assert_eq!(e["best_time"].as_f64(), Some(best));
    // The decision log is in the journal (kind `round`) exactly as in the event.
    let logged: Vec<&Value> = lines.iter().filter(|l| l["line"] == "round").collect();
    assert_eq!(logged.len(), rounds.len());
    assert_eq!(logged[0], &rounds[0]);
    assert_eq!(
        (rounds[0]["decision"].as_str(), rounds[0]["goal_met"].as_bool()),
        (Some("kept"), Some(true))
    );
    assert_eq!(rounds[0]["proposals"], 4);
    assert_eq!(repeats(&e["best_params"]), 5, "the fastest of 8, 7, 6, 5");
    // Met while still improving: that is the goal's end, not a search cut short.
    assert!(!rules(&e).contains(&"not_converged".to_string()), "{e}");

    // A goal the default meets: nothing is searched, and the run says so.
    let slow = format!("{:.3}us", default * 1.5);
    let (code, d, err) = tune("115", &["--kernel", "steps", "--goal", &slow], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((d["evaluations"].as_u64(), d["goal"]["met"].as_bool()), (Some(0), Some(true)));
    let m = broken_manifest("loop");
    let human = ["tune", "--manifest-path", &m, "--kernel", "steps", "--goal", &slow];
    let (code, out, err) = neuron_tune_tests::cli(&[&human[..], &["--seed", "115"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("steps small: nothing searched: the default already meets the goal"),
        "{out}"
    );
    assert!(err.contains("nothing searched (it already meets the goal)"), "{err}");

    // The same goal as a throughput of the declared useful work: `steps` declares 4 bytes
    // per element of its 256 × 512 `small` shape (fixtures/broken/common.rs), so a rate of
    // bytes / (default / 1.15) asks for a time of default / 1.15, which the round above
    // beat (it reached default / 1.2).
    let bytes = 4.0 * 256.0 * 512.0;
    let gbps = bytes / (default / 1.15 * 1e-6) / 1e9;
    let goal = format!("{gbps:.6}GB/s");
    let (code, t, err) =
        tune("112", &["--kernel", "steps", "--goal", &goal, "--max-rounds", "2"], &[]);
    assert_eq!(code, 0, "{err}");
    let expected = bytes / (gbps * 1e9) * 1e6;
    let target = t["goal"]["target_us"].as_f64().unwrap();
    assert!((target - expected).abs() < 1e-6 * expected, "{target} vs {expected}");
    assert!((target - default / 1.15).abs() < 1e-5 * default, "{target} vs {default}");
    assert_eq!((t["goal"]["met"].as_bool(), t["goal"]["rounds"].as_u64()), (Some(true), Some(1)));
    assert!(t["goal"]["goal"].as_str().unwrap().ends_with(" GB/s"), "{t}");
    // 2.2 times the default's rate is out of reach in one round (it needs default / 2.2,
    // above the 11 µs launch overhead, below what 4 proposals reach): the message gives the
    // rate reached, the declared bytes over the best time, and says which time that is.
    let gbps = bytes / (default / 2.2 * 1e-6) / 1e9;
    let goal = format!("{gbps:.6}GB/s");
    let (code, t, err) =
        tune("114", &["--kernel", "steps", "--goal", &goal, "--max-rounds", "1"], &[]);
    assert_eq!(code, 6, "{err}");
    // The best is what the tuned file holds after the run: a record kept by an earlier
    // test's run (faster than this run's own best) when there is one.
    let best = t["kept_record"]["time_us"].as_f64().or(t["best_time"].as_f64()).unwrap();
    let reached = bytes / (best * 1e-6) / 1e9;
    let shown: f64 = err
        .split(" GB/s of declared work per call time (launch included)")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no rate reached in: {err}"));
    assert!((shown - reached).abs() <= 0.05 + 1e-9, "{shown} vs {reached}: {err}");

    // Ten times faster needs default / 10, below the chip's 11 µs launch overhead that every
    // call pays: refused before any round is spent (exit 2).
    let m = broken_manifest("loop");
    let (code, _, err) = neuron_tune_tests::cli(&[
        "tune",
        "--manifest-path",
        &m,
        "--kernel",
        "steps",
        "--goal",
        "900%",
        "--seed",
        "102",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pays its 11.0 µs launch overhead; no variant can meet it"), "{err}");

    // 2.5× faster (default / 2.5, above the launch overhead) is out of reach too: the floor,
    // one pass (`repeats = 1`), takes longer. Exit 6, after exactly the allowed rounds, with
    // the best variant's verdict — the same kind its journal line records.
    let (code, e, err) =
        tune("102", &["--kernel", "steps", "--goal", "150%", "--max-rounds", "2"], &[]);
    assert_eq!(code, 6, "{err}");
    assert_eq!((e["goal"]["met"].as_bool(), e["goal"]["rounds"].as_u64()), (Some(false), Some(2)));
    let rounds = e["rounds"].as_array().unwrap();
    assert!(rounds.iter().all(|r| r["goal_met"] == false));
    assert_eq!(repeats(&e["best_params"]), 1, "8 proposals in 2 rounds reach repeats = 1");
    let lines = journal(&e);
    let best_line = lines
        .iter()
        .find(|l| l["params"] == e["best_params"] && l["status"] == "measured")
        .expect("the best is journaled");
    let kind = best_line["bottleneck"].as_str().unwrap().split(':').next().unwrap().to_string();
    assert_eq!(e["goal"]["limit"]["kind"].as_str(), Some(kind.as_str()));
    assert!(err.contains("not met after 2 rounds"), "{err}");
    assert!(err.contains(&format!("limited by {kind}")), "{err}");
    assert!(!e["goal"]["limit"]["evidence"].as_array().unwrap().is_empty());
}

/// The goal is judged on what the tuned file holds after the run: a record kept because it
/// is faster than the run's own best (measured again) meets a goal the run's best misses.
/// On trn3, which only this test tunes `steps` on.
#[test]
fn a_goal_is_met_by_a_faster_tuned_record_the_run_keeps() {
    // The whole space: the record is the floor, `repeats = 1`.
    let (code, e, err) =
        tune("131", &["--kernel", "steps", "--chip", "trn3", "--budget", "8"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(repeats(&e["best_params"]), 1);
    let floor = e["best_time"].as_f64().unwrap();
    let default = e["default_time"].as_f64().unwrap();

    // Two proposals (8, 7) cannot reach a goal just above the floor; the record does.
    let goal = format!("{:.4}us", floor * 1.001);
    let short = ["--kernel", "steps", "--chip", "trn3", "--budget", "2", "--max-rounds", "1"];
    let (code, e, err) = tune("132", &[&short[..], &["--goal", &goal]].concat(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(e["best_time"].as_f64().unwrap() > floor * 1.001, "the run's own best misses: {e}");
    assert_eq!(repeats(&e["kept_record"]["params"]), 1, "{e}");
    let g = &e["goal"];
    assert_eq!((g["met"].as_bool(), g["met_by_record"].as_bool()), (Some(true), Some(true)), "{e}");
    let speedup = g["speedup"].as_f64().unwrap();
    assert!((speedup - default / e["kept_record"]["time_us"].as_f64().unwrap()).abs() < 1e-9);
    assert!(g["limit"].is_null(), "a goal met has no limit to name: {g}");

    // A goal the record misses too: exit 6, naming the record as the best.
    let goal = format!("{:.4}us", floor * 0.9);
    let (code, e, err) = tune("133", &[&short[..], &["--goal", &goal]].concat(), &[]);
    assert_eq!(code, 6, "{err}");
    assert_eq!(
        (e["goal"]["met"].as_bool(), e["goal"]["met_by_record"].as_bool()),
        (Some(false), Some(false))
    );
    assert!(err.contains("that best is the tuned record kept, repeats=1"), "{err}");
    assert!(err.contains(&format!("best {floor:.2} µs")), "{err}");
}

/// A run refused before its first evaluation (a goal no variant can reach) leaves the
/// journal of the earlier run with its seed as it was, and `--resume --seed` with a seed no
/// journal has says so rather than starting afresh in silence. On trn1, which only this
/// test tunes `steps` on.
#[test]
fn a_refused_run_keeps_the_journal_and_a_seed_with_no_journal_is_said() {
    let run = ["--kernel", "steps", "--chip", "trn1", "--budget", "3"];
    let (code, e, err) = tune("141", &run, &[]);
    assert_eq!(code, 0, "{err}");
    let path = std::path::PathBuf::from(e["journal"].as_str().unwrap());
    let meta = path.with_extension("meta.json");
    let (journal, meta_text) = (std::fs::read(&path).unwrap(), std::fs::read(&meta).unwrap());
    assert!(!journal.is_empty());

    let m = broken_manifest("loop");
    let refused = ["tune", "--manifest-path", &m, "--strategy", "grid", "--seed", "141"];
    let (code, _, err) =
        neuron_tune_tests::cli(&[&refused[..], &run, &["--goal", "900%"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no variant can meet it"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), journal, "the journal is left as it was");
    assert_eq!(std::fs::read(&meta).unwrap(), meta_text, "and so is its meta file");

    // Seed 142 has no journal (an earlier run of this test left one: removed).
    let other = path.to_str().unwrap().replace("-141.jsonl", "-142.jsonl");
    let _ = std::fs::remove_file(&other);
    let (code, _, err) = tune("142", &[&run[..], &["--resume"]].concat(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("--resume --seed 142: no journal of these kernels")
            && err.contains("starting a new run"),
        "{err}"
    );
}

#[test]
fn a_run_stopped_while_improving_is_diagnosed_not_converged() {
    // Every grid proposal of `steps` beats the last: after 7 of its 8 it is still falling.
    let (code, e, err) = tune("103", &["--kernel", "steps", "--budget", "7"], &[]);
    assert_eq!(code, 0, "{err}");
    let curve: Vec<f64> =
        e["best_so_far"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(curve.windows(2).all(|w| w[1] < w[0]), "each proposal improved: {curve:?}");
    let c = &e["convergence"];
    // Window: the last max(4, 7/5) = 4 evaluations; the best before it was curve[2].
    assert_eq!(c["window"], 4);
    let expected = (curve[2] - curve[6]) / curve[2];
    assert!((c["improvement_in_window"].as_f64().unwrap() - expected).abs() < 1e-12);
    assert_eq!(rules(&e), ["not_converged"]);
    // Stored beside the journal for `report`, as printed.
    let meta_path =
        std::path::Path::new(e["journal"].as_str().unwrap()).with_extension("meta.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    assert_eq!(meta["diagnoses"], e["diagnoses"]);
    // Sealed like the journal's lines: an edited meta file is not believed, and a resume
    // cannot tell which problem its journal is about, so it starts afresh.
    assert_eq!(meta["schema"], 2);
    // The default's evaluation is no proposal: it has no `n` (it had 2⁶⁴ − 1 in schema 1).
    assert!(meta["default"]["time_us"].is_number() && meta["default"].get("n").is_none());
    meta["seed"] = 104.into();
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
    // A line a resume would warn about and a run afresh removes with the journal.
    let journal = std::path::Path::new(e["journal"].as_str().unwrap());
    let mut lines = std::fs::read_to_string(journal).unwrap();
    lines.push_str("not a journal line\n");
    std::fs::write(journal, lines).unwrap();
    let (code, again, err) = tune("103", &["--kernel", "steps", "--budget", "7", "--resume"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("meta.json: not used (its checksum does not match"), "{err}");
    assert!(!err.contains(".jsonl:"), "the journal was not read: {err}");
    assert!(!std::fs::read_to_string(journal).unwrap().contains("not a journal"));
    assert_eq!(again["best_so_far"], e["best_so_far"], "the same run, made again");
    // The fixed keys are still there.
    for k in ["best_params", "best_time", "evaluations", "seed", "strategy"] {
        assert!(!e[k].is_null(), "{k}");
    }
}

#[test]
fn a_space_mostly_over_sbuf_is_diagnosed_invalid_heavy() {
    // 16 configurations; on trn1 every `scratch` ≥ 3 (192 KiB and more of scratch) overflows
    // a partition's SBUF: 5 levels × 2 `bufs` = 10 of 16 invalid.
    let (code, e, err) =
        tune("104", &["--kernel", "overflow", "--budget", "16", "--chip", "trn1"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((e["evaluations"].as_u64(), e["invalid"].as_u64()), (Some(16), Some(10)));
    assert_eq!(e["convergence"]["invalid_fraction"].as_f64(), Some(10.0 / 16.0));
    let d = diagnosis(&e, "invalid_heavy");
    let evidence: Vec<&str> =
        d["evidence"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(evidence[0], "10 of 16 evaluations were invalid");
    assert_eq!(evidence[1], "10 refused by SBUF capacity");
    // The culprits: scratch 3 to 7, each 2 of 2 (the top five shown).
    for s in 3..=7 {
        assert!(
            evidence.contains(&format!("scratch={s}: 2 of 2 invalid").as_str()),
            "{evidence:?}"
        );
    }
    assert!(d["advice"][0].as_str().unwrap().contains("scratch=3"), "{d}");
}

#[test]
fn an_external_proposer_ignoring_the_validity_rule_is_diagnosed_invalid_heavy() {
    // The example proposer knows nothing of `picky`'s rule (cols_per_tile must divide the
    // 512 columns) and proposes the whole space: 9 proposals, of which the rule refuses 7
    // before evaluation; 64 and 128 are the only evaluations.
    let proposer = built();
    let (code, e, err) = tune(
        "113",
        &["--kernel", "picky", "--budget", "20", "--proposer", proposer.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!((e["evaluations"].as_u64(), e["invalid"].as_u64()), (Some(2), Some(0)), "{e}");
    let d = diagnosis(&e, "invalid_heavy");
    assert_eq!(d["summary"], "invalid-heavy: 78 % of the proposals were invalid");
    let text = d.to_string();
    assert!(text.contains("7 of 9 proposals were invalid"), "{text}");
    assert!(text.contains("7 refused by the kernel's validity rule"), "{text}");
    assert!(text.contains("7 proposals were refused by the kernel's validate()"), "{text}");
}

#[test]
fn a_space_the_rule_refuses_entirely_is_a_configuration_error_and_records_nothing() {
    // Pinned to 96 columns, which do not divide `small`'s 512: the one configuration of the
    // space is refused. The default (128) is valid but not in the space asked for, so it is
    // not recorded as the search's winner either.
    built();
    let manifest = broken_manifest("loop");
    let (code, out, err) = neuron_tune_tests::cli_json(&[
        "tune",
        "--manifest-path",
        &manifest,
        "--kernel",
        "picky",
        "--params",
        "cols_per_tile=96",
        "--budget",
        "4",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(events(&out, "tune").is_empty(), "no result: {out}");
    let error = events(&out, "error")[0]["message"].as_str().unwrap().to_string();
    assert_eq!(
        error,
        "picky at small: the kernel's rule refuses every configuration of its space (e.g. \
         cols_per_tile=96: cols_per_tile = 96: must divide cols = 512); nothing searched, \
         nothing recorded (`cargo neuron-tune list` counts the valid ones)"
    );
}

#[test]
fn a_run_spent_in_correctness_checks_is_diagnosed_slow() {
    // Each of the 4 grid proposals is a would-be winner, so each is checked (8 cases of
    // tiny shapes), and the kernel's functional run sleeps 250 ms a case: on one worker (a
    // check's parts run in parallel on as many as there are), ≥ 8 s of checks against a
    // warm build and four small simulations. `--recheck`: an earlier run's verdicts are not reused.
    let args = ["--kernel", "steps", "--budget", "4", "--jobs", "1", "--recheck"];
    let (code, e, err) = tune("105", &args, &[("LOOP_CHECK_SLEEP_MS", "250")]);
    assert_eq!(code, 0, "{err}");
    let slow = diagnosis(&e, "slow");
    assert!(slow["summary"].as_str().unwrap().contains("correctness checks"), "{slow}");
    // Read by a person, its wall-clock figures go to stderr: stdout, the results, stays the
    // same from run to run.
    let manifest = broken_manifest("loop");
    let human = ["tune", "--manifest-path", &manifest, "--seed", "107", "--strategy", "grid"];
    let (code, out, err) = neuron_tune_tests::cli_env(
        &[&human[..], &args[..]].concat(),
        &[("LOOP_CHECK_SLEEP_MS", "250")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("diagnosis slow:"), "{err}");
    assert!(!out.contains("slow"), "{out}");
    // Without the sleep the same run is not slow (its checks draw tiny shapes).
    let args = ["--kernel", "steps", "--budget", "4", "--recheck"];
    let (code, e, err) = tune("106", &args, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!rules(&e).contains(&"slow".to_string()), "{e}");
}

#[test]
fn a_rerun_of_the_same_build_reuses_its_check_verdicts() {
    // The slow run above, checked afresh (its verdicts stored), then run again with the
    // same sleeping check but without --recheck: its four would-be winners' verdicts
    // come from the store, so the run is no longer slow (each check would sleep ≥ 2 s on
    // one worker) and finds the same.
    let sleepy = [("LOOP_CHECK_SLEEP_MS", "250")];
    let args = ["--kernel", "steps", "--budget", "4", "--jobs", "1"];
    // (n, status) per evaluation; read before the next run, which starts the journal anew.
    let verdicts = |e: &Value| -> Vec<(Value, Value)> {
        let evaluations = journal(e).into_iter().filter(|l| l.get("n").is_some());
        evaluations.map(|l| (l["n"].clone(), l["status"].clone())).collect()
    };
    let fresh: Vec<&str> = args.iter().copied().chain(["--recheck"]).collect();
    let (code, first, err) = tune("107", &fresh, &sleepy);
    assert_eq!(code, 0, "{err}");
    assert!(rules(&first).contains(&"slow".to_string()), "{first}");
    let checked = verdicts(&first);
    let (code, again, err) = tune("107", &args, &sleepy);
    assert_eq!(code, 0, "{err}");
    assert!(!rules(&again).contains(&"slow".to_string()), "{again}");
    assert_eq!(checked, verdicts(&again));
    assert_eq!(first["best_params"], again["best_params"]);
}

#[test]
fn a_faster_variant_that_fails_its_property_check_never_wins() {
    // `hasty` computes its output `passes` times; grid proposes 3, 2, 1 and each is faster
    // than the last, so each is a would-be winner and checked. The single pass forgets a
    // column on shapes of 6 rows or more: its check fails (of its four parts, at seeds
    // 115 to 118, some draw such a shape and some do not: checked below), it is recorded as
    // failed, faster or not, and the best is the correct 2. The check's parts run in
    // parallel on the workers; its cases depend on the seed alone, so one worker and two
    // give the same run.
    let mut journal_path = String::new();
    // (n, status) per journal line: the second run's times come from the store, so only
    // the statuses (the checks' verdicts) can tell the runs apart.
    let runs: Vec<Vec<(Value, Value)>> = ["1", "2"]
        .iter()
        .map(|jobs| {
            // --recheck: each run checks for itself (the second would reuse the first's).
            let args = ["--kernel", "hasty", "--jobs", jobs, "--recheck"];
            let (code, e, err) = tune("115", &args, &[]);
            assert_eq!(code, 4, "a failed check is a fault of the kernel: {err}");
            assert_eq!(e["best_params"]["passes"], 2, "--jobs {jobs}: {e}");
            assert_eq!((&e["faults"], &e["invalid"]), (&1.into(), &0.into()), "{e}");
            journal_path = e["journal"].as_str().unwrap().to_string();
            let lines = journal(&e);
            let status = |passes: i64| {
                let l = lines.iter().find(|l| l["params"]["passes"] == passes).unwrap();
                (l["status"].as_str().unwrap().to_string(), l["time_us"].as_f64().unwrap())
            };
            let ((two, t2), (one, t1)) = (status(2), status(1));
            assert_eq!((two.as_str(), one.as_str()), ("measured", "failed_check"), "{lines:?}");
            assert!(t1 < t2, "the wrong variant is the faster: {t1} vs {t2}");
            let evaluations = lines.iter().filter(|l| l.get("n").is_some());
            evaluations.map(|l| (l["n"].clone(), l["status"].clone())).collect()
        })
        .collect();
    assert_eq!(runs[0], runs[1], "--jobs 1 and --jobs 2 made different runs");
    // The parts one by one, as `check` replays them (each without the failures an earlier
    // `check` saved, which it would replay first and tune does not): the verdict must be
    // all of them, not any one.
    let journals = std::path::Path::new(&journal_path).parent().unwrap();
    let saved = journals.parent().unwrap().join("regressions");
    let parts: Vec<bool> = (115..119)
        .map(|seed| {
            for f in std::fs::read_dir(&saved).into_iter().flatten().flatten() {
                if f.file_name().to_string_lossy().starts_with("hasty-") {
                    std::fs::remove_file(f.path()).unwrap();
                }
            }
            let (code, out, err) = neuron_tune_tests::cli_json(&[
                "check",
                "--manifest-path",
                &broken_manifest("loop"),
                "--kernel",
                "hasty",
                "--params",
                "passes=1",
                "--cases",
                "2",
                "--seed",
                &seed.to_string(),
            ]);
            assert!(code == 0 || code == 4, "{err}");
            neuron_tune_tests::events(&out, "check")[0]["passed"].as_bool().unwrap()
        })
        .collect();
    assert!(parts.contains(&true) && parts.contains(&false), "the parts' verdicts: {parts:?}");
}

#[test]
fn a_winner_wrong_on_another_shape_of_its_key_set_is_rolled_back() {
    // `tail` at both its shapes (its key set): 512-column tiles are faster, right at
    // `aligned` (1024 columns) and pass the property check (which draws multiples of 512
    // only), but drop the tail of `ragged` (1000 columns). Each round's winner is validated
    // on both named shapes, rolled back, and the log names `ragged`; no correct variant
    // beats the default by 5 %, so the goal is not met. The last event is `ragged`'s.
    let (code, mut all, err) = tune_all_in(
        &broken_manifest("loop"),
        "107",
        &["--kernel", "tail", "--goal", "5%", "--max-rounds", "2"],
        &[],
    );
    assert_eq!(code, 6, "{err}");
    // At `aligned` the 512 variant is right where it was measured, and wrong only at the
    // other shape of the key set: the cross-shape case itself.
    let aligned = &all[0];
    assert_eq!(aligned["shape"], "aligned");
    let r = &aligned["rounds"][0];
    assert_eq!(r["decision"], "rolled_back", "{r}");
    assert!(r["reason"].as_str().unwrap().contains("cols_per_tile=512"), "{r}");
    assert!(r["reason"].as_str().unwrap().contains("wrong at shape ragged"), "{r}");
    assert_eq!(aligned["best_params"]["cols_per_tile"], 128);
    let e = all.pop().unwrap();
    assert_eq!(e["shape"], "ragged");
    let lines = journal(&e);
    // The 512 variant was measured faster than the default and passed the property check.
    let fast = lines
        .iter()
        .find(|l| l["params"]["cols_per_tile"] == 512)
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(fast["status"], "measured");
    assert!(fast["time_us"].as_f64().unwrap() < e["default_time"].as_f64().unwrap());
    // The journal marks that evaluation rolled back (what `report` reads back).
    assert!(lines.iter().any(|l| l["line"] == "rolled_back" && l["n"] == fast["n"]), "{lines:?}");
    let r = &e["rounds"][0];
    assert_eq!(r["decision"], "rolled_back", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("cols_per_tile=512"), "{reason}");
    assert!(reason.contains("wrong at shape ragged"), "{reason}");
    // The winner is the correct variant, and the log in the journal says the same.
    assert_eq!(e["best_params"]["cols_per_tile"], 128);
    assert!(lines.iter().any(|l| l["line"] == "round" && l["decision"] == "rolled_back"));
    assert_eq!(e["invalid"], 1, "the rolled-back winner counts as invalid");

    // The tuned database records the shapes the winner was validated on (the 128 variant,
    // as fast as the default, checked on both shapes of the key set); only this test tunes
    // `tail`.
    let db = std::fs::read_to_string(
        neuron_tune_tests::root().join("fixtures/broken/loop/neuron-tune.tuned.toml"),
    )
    .unwrap();
    let tail = db
        .split("[[tuned]]")
        .find(|r| r.contains("kernel = \"tail\"") && r.contains("shape = \"aligned\""))
        .unwrap_or_else(|| panic!("{db}"));
    assert!(tail.contains("validated_shapes = [\"aligned\", \"ragged\"]"), "{tail}");

    // The report shows the same decision log, read back from the journal: one row per
    // round, the rolled-back one marked with its reason.
    let out = neuron_tune_tests::scratch_dir("loop-report");
    let (code, _, err) = neuron_tune_tests::cli(&[
        "report",
        "--kernel",
        "tail",
        "--out",
        out.to_str().unwrap(),
        "--manifest-path",
        &broken_manifest("loop"),
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let section = html
        .split("<h2>tail @ ragged on ")
        .nth(1)
        .unwrap_or_else(|| panic!("no section for tail at ragged:\n{html}"));
    let log = section
        .split("<h3>Decision log: grid seed 107</h3>")
        .nth(1)
        .unwrap_or_else(|| panic!("no decision log for seed 107:\n{html}"));
    let log = &log[..log.find("</table>").unwrap()];
    assert_eq!(log.matches("<tr class=").count(), e["rounds"].as_array().unwrap().len(), "{log}");
    assert!(log.contains("<tr class=\"rolled_back\"><td class=\"n\">1</td>"), "{log}");
    assert!(log.contains("wrong at shape ragged"), "{log}");
}

/// A winner that breaks a hardware rule at another shape of its key set is invalid there,
/// not wrong: that shape is left out of its validation, as one its validity rule refuses
/// would be, and the winner stands. `roomy`'s fastest variant (3 scratch buffers) fits
/// `narrow` and overflows SBUF at `wide`.
#[test]
fn validate_leaves_out_a_key_shape_where_the_winner_breaks_a_hardware_rule() {
    // Both shapes tuned (the key set is every named shape): at `wide` only 0 and 1 scratch
    // buffers fit, and 1 wins; at `narrow` 3 wins and is validated on `narrow` alone.
    let args = ["--kernel", "roomy", "--validate", "--recheck"];
    let (code, tuned, err) = tune_all_in(&broken_manifest("loop"), "116", &args, &[]);
    assert_eq!(code, 0, "{err}");
    let at = |shape: &str| tuned.iter().find(|e| e["shape"] == shape).unwrap().clone();
    let (narrow, wide) = (at("narrow"), at("wide"));
    assert_eq!(
        (&narrow["best_params"]["scratch"], &wide["best_params"]["scratch"]),
        (&3.into(), &1.into())
    );
    assert_eq!(narrow["validated"]["shapes"], serde_json::json!(["narrow"]), "{narrow}");
    assert_eq!(wide["validated"]["shapes"], serde_json::json!(["narrow", "wide"]), "{wide}");
    assert!(journal(&narrow).iter().all(|l| l["line"] != "rolled_back"), "{narrow}");
}

#[test]
fn validate_without_a_goal_rolls_back_a_winner_wrong_on_its_key_set() {
    // The same planted bug as above, without --goal: --validate alone validates each new
    // best, so neither shape's result is the 512 path, and each event says what its best
    // was validated on. No goal: no rounds in the log, exit 0.
    let (code, tuned, err) =
        tune_all_in(&broken_manifest("loop"), "111", &["--kernel", "tail", "--validate"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tuned.len(), 2, "aligned and ragged: {tuned:?}");
    for e in &tuned {
        assert_ne!(e["best_params"]["cols_per_tile"], 512, "{e}");
        assert!(e.get("rounds").is_none(), "no goal, no rounds: {e}");
        let lines = journal(e);
        let fast = lines
            .iter()
            .find(|l| l["params"]["cols_per_tile"] == 512 && l["status"] == "measured")
            .unwrap_or_else(|| panic!("the 512 variant measured: {lines:?}"));
        assert!(lines.iter().any(|l| l["line"] == "rolled_back" && l["n"] == fast["n"]));
        assert!(
            lines.iter().any(|l| l["line"] == "rolled_back"
                && l["reason"].as_str().is_some_and(|r| r.contains("wrong at shape ragged"))),
            "{lines:?}"
        );
        // What stands was validated on both shapes of the key set, unless it is the
        // default (128), which is kept as it is and may carry no validation.
        match e.get("validated") {
            Some(v) => assert_eq!(v["shapes"], serde_json::json!(["aligned", "ragged"]), "{e}"),
            None => assert_eq!(e["best_params"], serde_json::json!({"cols_per_tile": 128})),
        }
    }
    // Resumed, the run replays its journal: the same results, and no roll-back written twice.
    let rollbacks = |e: &Value| journal(e).iter().filter(|l| l["line"] == "rolled_back").count();
    let before: Vec<usize> = tuned.iter().map(rollbacks).collect();
    let args = ["--kernel", "tail", "--validate", "--resume"];
    let (code, again, err) = tune_all_in(&broken_manifest("loop"), "111", &args, &[]);
    assert_eq!(code, 0, "{err}");
    for (a, b) in tuned.iter().zip(&again) {
        assert_eq!((&a["best_params"], &a["best_time"]), (&b["best_params"], &b["best_time"]));
    }
    assert_eq!(again.iter().map(rollbacks).collect::<Vec<_>>(), before);
}

/// A workspace of two crates: `kernels` lists `scale` (y = 2·x computed `passes` times over,
/// 3 by default, so fewer is faster), and `models` has a model `net` calling `scale` once at
/// `scale`'s own shape — through its own copy of the kernel, as a models crate that links the
/// kernels crate but pins an older release of its code would: there `passes` counted the other way (it
/// computes `4 − passes` times over) and had to be at least 2. The tuner measures the kernels
/// crate's program; the model runs the other one. A second model, `stale`, listed first,
/// also calls a kernel `retired` that refuses every parameter: it fails with or without the
/// tuner's candidates, so it must be left out of the check, not held against them.
fn pinned_models_workspace() -> std::path::PathBuf {
    let dir = neuron_tune_tests::scratch_dir("pinned-models");
    let r = neuron_tune_tests::root();
    let common = std::fs::read_to_string(r.join("fixtures/broken/common.rs")).unwrap();
    let scale = |name: &str, kernel: &str, passes: &str, least: i64| {
        format!(
            "pub struct {name};\n\
             impl Kernel for {name} {{\n\
                 fn validate(&self, p: &Params, _: &Shape, _: &neuron_sim::Chip) -> Result<(), String> {{\n\
                     let n = p.int(\"passes\")?;\n\
                     if n < {least} {{ Err(format!(\"passes = {{n}}: this release needs at least {least}\")) }} else {{ Ok(()) }}\n\
                 }}\n\
                 fn name(&self) -> &str {{ \"{kernel}\" }}\n\
                 fn params(&self) -> Vec<ParamSpec> {{ vec![ParamSpec::int(\"passes\", 3, \"passes over the output\")] }}\n\
                 fn shapes(&self) -> Vec<(String, Shape)> {{ vec![(\"one\".into(), Shape::new(&[(\"rows\", 1024), (\"cols\", 2048)]))] }}\n\
                 fn small_shapes(&self, p: &Params) -> BoxedStrategy<Shape> {{ Double.small_shapes(p) }}\n\
                 fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {{ Double.tensors(s) }}\n\
                 fn run(&self, nc: &mut Nc, p: &Params, s: &Shape, t: &[Hbm]) -> SimResult<()> {{\n\
                     let passes = p.int(\"passes\")?;\n\
                     for _ in 0..{passes} {{ body(nc, &Params::new().with(\"bufs\", 2).with(\"cols_per_tile\", 512), s, t[0], t[1])?; }}\n\
                     Ok(())\n\
                 }}\n\
                 fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ Double.reference(s, i) }}\n\
                 fn work(&self, s: &Shape) -> Work {{ Double.work(s) }}\n\
             }}\n"
        )
    };
    let body = "fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {\n\
                    let pool = nc.sbuf_pool(\"io\", 2);\n    correct(nc, p, sh, x, y, pool)\n}\n";
    let kernels = format!(
        "{common}\n{body}\n{}\nneuron_tune_harness::harness_main!(kernels: [Scale]);\n",
        scale("Scale", "scale", "passes", 1)
    );
    let models = format!(
        "{common}\n{body}\n{}\n\
         use neuron_tune_harness::{{Model, ModelBuilder}};\n\
         struct Net;\n\
         impl Model for Net {{\n\
             fn name(&self) -> &str {{ \"net\" }}\n\
             fn shapes(&self) -> Vec<(String, Shape)> {{ ScaleAsPinned.shapes() }}\n\
             fn build(&self, b: &mut ModelBuilder, s: &Shape) -> Result<(), String> {{\n\
                 let d = [s.dim(\"rows\"), s.dim(\"cols\")];\n\
                 let x = b.input(\"x\", Dtype::Bf16, &d);\n\
                 let y = b.output(\"y\", Dtype::Bf16, &d);\n\
                 let k: std::sync::Arc<dyn Kernel> = std::sync::Arc::new(ScaleAsPinned);\n\
                 b.call(&k, s.clone(), &[x, y])\n\
             }}\n\
             fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ Double.reference(s, i) }}\n\
             fn tokens(&self, s: &Shape) -> f64 {{ s.dim(\"rows\") as f64 }}\n\
         }}\n\
         struct Stale;\n\
         impl Model for Stale {{\n\
             fn name(&self) -> &str {{ \"stale\" }}\n\
             fn shapes(&self) -> Vec<(String, Shape)> {{ ScaleAsPinned.shapes() }}\n\
             fn build(&self, b: &mut ModelBuilder, s: &Shape) -> Result<(), String> {{\n\
                 let d = [s.dim(\"rows\"), s.dim(\"cols\")];\n\
                 let x = b.input(\"x\", Dtype::Bf16, &d);\n\
                 let y = b.scratch(\"y\", Dtype::Bf16, &d);\n\
                 let z = b.output(\"z\", Dtype::Bf16, &d);\n\
                 let k: std::sync::Arc<dyn Kernel> = std::sync::Arc::new(ScaleAsPinned);\n\
                 b.call(&k, s.clone(), &[x, y])?;\n\
                 let r: std::sync::Arc<dyn Kernel> = std::sync::Arc::new(Retired);\n\
                 b.call(&r, s.clone(), &[y, z])\n\
             }}\n\
             fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ Double.reference(s, i) }}\n\
             fn tokens(&self, s: &Shape) -> f64 {{ s.dim(\"rows\") as f64 }}\n\
         }}\n\
         {}\n\
         neuron_tune_harness::harness_main!(kernels: [], models: [Stale, Net]);\n",
        scale("ScaleAsPinned", "scale", "(4 - passes)", 2),
        scale("Retired", "retired", "passes", 99)
    );
    // Slowest first, so grid proposes 3, 2, 1 in round 1. The models crate links the
    // kernels crate (so its models see that crate's tuned records, as
    // `TunedSet::for_model` gives them) but calls its own copy of the kernel.
    let space = "\n[package.metadata.neuron-tune.kernels.scale]\nspace = { passes = [3, 2, 1] }\n";
    neuron_tune_tests::kernels_and_models_workspace(
        &dir,
        ["pinned-kernels", space, &kernels],
        ["pinned-models", &models],
    );
    dir
}

#[test]
fn a_winner_that_lowers_a_model_using_the_kernel_is_rolled_back() {
    let dir = pinned_models_workspace();
    let manifest = dir.join("Cargo.toml");
    let run = |select: &[&str], seed: &str| {
        let mut a = vec!["--kernel", "scale", "--goal", "50%", "--max-rounds", "2"];
        a.extend_from_slice(select);
        tune_in(manifest.to_str().unwrap(), seed, &a, &[])
    };
    let db = || std::fs::read_to_string(dir.join("kernels/neuron-tune.tuned.toml")).unwrap();

    // With the models crate: `net` runs the pinned copy, which refuses 1 pass and where 2
    // means 2 passes against 1 for the default (nothing is tuned yet). Each would-be winner
    // is rolled back, the log naming the model: 1 breaks it, 2 lowers its throughput; the
    // default's 3 passes stand and the goal is missed.
    let (code, e, err) = run(&["--workspace"], "2");
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("left out of the validation: model stale@one fails without the candidate too"),
        "{err}"
    );
    let r = &e["rounds"][0];
    assert_eq!(r["decision"], "rolled_back", "{r}");
    let reason = r["reason"].as_str().unwrap();
    let (one, two) = reason.split_once("; passes=2").unwrap_or_else(|| panic!("{reason}"));
    assert!(one.contains("passes=1") && one.contains("breaks model net@one"), "{reason}");
    assert!(one.contains("this release needs at least 2"), "{reason}");
    assert!(two.contains("lowers model net@one from"), "{reason}");
    assert_eq!(e["best_params"]["passes"], 3, "{e}");
    assert_eq!(e["goal"]["met"], false);
    // The winner was checked against the model, and the database says so.
    let record = db();
    assert!(record.contains("validated_models = [\"net@one\"]"), "{record}");

    // --validate without a goal checks the models the same way: both faster variants are
    // rolled back (the journal names the model), the default's 3 passes stand, exit 0.
    let m = manifest.to_str().unwrap();
    let (code, e, err) = tune_in(m, "3", &["--kernel", "scale", "--validate", "--workspace"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(e["best_params"]["passes"], 3, "{e}");
    assert!(e.get("rounds").is_none(), "no goal, no rounds: {e}");
    let reasons: Vec<String> = journal(&e)
        .iter()
        .filter(|l| l["line"] == "rolled_back")
        .map(|l| l["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("breaks model net@one")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("lowers model net@one from")), "{reasons:?}");

    // The kernels crate alone: no selected model uses the kernel; one pass is well over
    // 1.5× faster than three, so the goal is met in round 1 (and the record replaces the
    // one above, without models).
    let (code, e, err) = run(&["-p", "pinned-kernels"], "1");
    assert_eq!(code, 0, "{err}");
    assert_eq!(e["best_params"]["passes"], 1, "{e}");
    assert_eq!(e["rounds"][0]["decision"], "kept");
    assert!(!db().contains("validated_models"), "{}", db());
}

#[test]
fn a_worker_killed_by_ctrl_c_during_a_check_journals_no_verdict_and_resume_finds_the_same() {
    // A terminal's Ctrl-C reaches the whole process group, and a worker can die of it
    // before the tool's own handler has run: its check part then answers "crashed", and if
    // that was the last part outstanding, the old code took the check for failed and
    // journaled the correct variant as `failed_check`. A worker dead of SIGINT is the
    // interruption: the run ends with 130, journals no verdict for the evaluation in
    // flight, and resumes to what an uninterrupted run finds. Here the SIGINT goes to the
    // workers alone, so the tool learns of it only from them (the race, made certain).
    // Each of the four grid proposals is checked, and the sleeping functional run makes each
    // check last ≥ 2 s on one worker, so the signal lands in one.
    built();
    let manifest = broken_manifest("loop");
    let run = |seed: &str, extra: &[&str]| -> Vec<String> {
        let mut a = vec!["tune", "--strategy", "grid", "--seed", seed, "--kernel", "steps"];
        a.extend_from_slice(&["--budget", "4", "--jobs", "1", "--recheck"]);
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--manifest-path", &manifest, "--message-format", "json"]);
        a.into_iter().map(String::from).collect()
    };
    let journals = neuron_tune_tests::test_target_dir().join("neuron-tune/journals");
    let journal_of = |seed: &str| -> Option<std::path::PathBuf> {
        let suffix = format!("-grid-{seed}.jsonl");
        std::fs::read_dir(&journals).ok()?.flatten().map(|e| e.path()).find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("tune-broken-loop.steps-") && name.ends_with(&suffix)
        })
    };
    if let Some(old) = journal_of("108") {
        std::fs::remove_file(old).unwrap();
    }
    let args = run("108", &[]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = cli_command(&a)
        .env("LOOP_CHECK_SLEEP_MS", "250")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first evaluation is journaled once its check ends; the second one's starts.
    let start = std::time::Instant::now();
    let lines = |p: &Option<std::path::PathBuf>| {
        p.as_ref().map_or(0, |p| cargo_neuron_tune::store::read_journal(p).unwrap().lines.len())
    };
    while lines(&journal_of("108")) < 1 {
        assert!(start.elapsed().as_secs() < 120, "the run never journaled");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let workers = children_of(child.id());
    assert!(!workers.is_empty(), "the tool has a worker");
    for pid in workers {
        let status =
            std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
        assert!(status.success());
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let kept = cargo_neuron_tune::store::read_journal(&journal_of("108").unwrap()).unwrap().lines;
    assert!(kept.len() < 4, "the run was interrupted before its end: {kept:?}");
    assert!(kept.iter().all(|l| l["status"] == "measured"), "{kept:?}");

    // Resumed, it ends as an uninterrupted run does (grid: every seed is the same run).
    let (code, e, err) = tune_args(&run("108", &["--resume"]));
    assert_eq!(code, 0, "{err}");
    let (code, whole, err) = tune_args(&run("109", &[]));
    assert_eq!(code, 0, "{err}");
    let verdicts = |e: &Value| -> Vec<(Value, Value)> {
        let evaluations = journal(e).into_iter().filter(|l| l.get("n").is_some());
        evaluations.map(|l| (l["n"].clone(), l["status"].clone())).collect()
    };
    assert_eq!(verdicts(&e), verdicts(&whole));
    assert_eq!(e["best_params"], whole["best_params"]);
}

/// The pids of a process's children (Linux: /proc/PID/stat, whose fourth field is the
/// parent's pid).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid ...": comm may hold spaces, so read after its ')'.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// `tune` with these whole arguments: (exit code, final tune event, stderr).
fn tune_args(args: &[String]) -> (i32, Value, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = cli_command(&a).output().expect("the CLI runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut all = events(&String::from_utf8_lossy(&out.stdout), "tune");
    assert!(!all.is_empty(), "no tune event: {stderr}");
    (out.status.code().unwrap_or(-1), all.pop().unwrap(), stderr)
}
