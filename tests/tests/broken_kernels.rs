//! The harness on deliberately broken kernel crates (each its own workspace, built with the
//! real cargo): the worker protocol reports what went wrong, precisely.

use neuron_tune_protocol::{ChipSpec, Params, RequestBody, ResponseBody};
use neuron_tune_tests::{build_broken, Worker};

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
