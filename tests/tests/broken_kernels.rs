//! The harness on deliberately broken kernel crates (each its own workspace, built with the
//! real cargo): the worker protocol reports what went wrong, precisely.

use neuron_tune_protocol::{ChipSpec, Params, RequestBody, ResponseBody};
use neuron_tune_tests::{broken_manifest, build_broken, cli, cli_json, events, Worker};

#[test]
fn an_off_by_one_is_caught_shrunk_and_replayable() {
    let exe = build_broken("wrong_result").unwrap();
    let mut w = Worker::start(&exe);
    let regressions = neuron_tune_tests::scratch_dir("regressions").join("double.txt");
    let req = RequestBody::Check {
        kernel: "double".into(),
        params: Params::new().with("bufs", 2).with("cols_per_tile", 512),
        cases: 32,
        seed: 2024,
        chip: ChipSpec::builtin("trn2"),
        regressions: Some(regressions.clone()),
    };
    let ResponseBody::Check(report) = w.result(1, req.clone()) else { panic!("not a check") };
    assert!(!report.passed);
    assert_eq!(report.seed, 2024, "the seed is reported for replay");
    let f = report.failure.clone().expect("a failing case");
    // The bug skips the last partial tile of rows: the smallest failing shape has fewer
    // than 128 rows (proptest shrinks it toward 1 row, 1 column).
    let (rows, cols) = (f.shape.0["rows"], f.shape.0["cols"]);
    assert!(rows < 128 && cols <= 8, "shrunk to {rows} x {cols}");
    assert!(f.message.contains("elements outside |err| ≤"), "{}", f.message);
    assert!(f.metrics.is_some());
    // The failing case was persisted for the next run (proptest's regression file)...
    let persisted = std::fs::read_to_string(&regressions).unwrap();
    assert!(persisted.lines().any(|l| l.starts_with("cc ")), "{persisted}");
    // ...and replaying the seed gives the same report.
    let ResponseBody::Check(again) = w.result(2, req) else { panic!("not a check") };
    assert_eq!(again.failure, report.failure);
    assert_eq!(again.seed, report.seed);
}

/// A check that breaks a hardware rule (SBUF over capacity at any shape and input) says so:
/// the rule, the instruction and its line as fields of the JSON failure, no error figures
/// where the outputs were never compared, and a human line naming the rule rather than a
/// "smallest failing shape" and its inputs, which have nothing to do with it.
#[test]
fn a_hardware_rule_broken_in_check_is_named_with_its_rule_and_no_error_figures() {
    let m = broken_manifest("sbuf_overflow");
    let args = ["check", "--manifest-path", &m, "--params", "cols_per_tile=512", "--cases", "4"];
    let args = [&args[..], &["--seed", "7071"]].concat();
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 4, "a failed check, as documented: {err}");
    let c = &events(&out, "check")[0];
    assert_eq!(c["passed"], false, "{c}");
    let f = &c["failure"];
    assert_eq!(f["rule"], "over_capacity", "{c}");
    assert!(f["instruction"].as_str().is_some_and(|i| !i.is_empty()), "{c}");
    assert!(f["location"].as_str().is_some_and(|l| l.starts_with("src/main.rs:")), "{c}");
    assert!(f["message"].as_str().unwrap().contains("SBUF over capacity"), "{c}");
    // Nothing was compared: no figures, rather than f64::MAX and a cosine of 0.
    assert!(f["metrics"].is_null(), "{c}");
    for key in ["max_abs_err", "max_rel_err", "mse", "cosine"] {
        assert!(c[key].is_null(), "{key}: {c}");
    }

    let (code, out, err) = cli(&args);
    assert_eq!(code, 4, "{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("hardware-rule violation (`over_capacity`"), "{all}");
    assert!(!all.contains("smallest failing shape") && !all.contains("inputs)"), "{all}");
    // What replays it stays.
    assert!(all.contains("(seed 7071)"), "{all}");
}
