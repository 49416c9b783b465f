//! The proposer protocol's error handling, with `sh` one-liners as proposers.

use neuron_tune_search::proposer::{parse_proposal, Proposer};
use neuron_tune_search::{Config, Ctx, Level, Outcome, SearchError, Space, Strategy};

fn space() -> Space {
    Space::from_levels([
        ("tile", vec![Level::Int(1), Level::Int(2), Level::Int(4)]),
        ("layout", vec![Level::Str("row".into()), Level::Str("col".into())]),
    ])
    .unwrap()
}

fn ask(
    p: &mut Proposer,
    mut oracle: impl FnMut(&Config) -> bool,
) -> Result<Option<Config>, SearchError> {
    let space = space();
    p.ask(&mut Ctx::new(&space, &mut oracle))
}

fn reply(json: &str) -> Proposer {
    Proposer::new(format!("cat >/dev/null; printf '%s' '{json}'"))
}

fn error(p: &mut Proposer) -> String {
    match ask(p, |_: &Config| true) {
        Err(e) => e.to_string(),
        Ok(c) => panic!("expected an error, got {c:?}"),
    }
}

#[test]
fn a_good_reply_is_used_in_order_and_an_empty_one_ends_the_search() {
    let mut p =
        reply(r#"{"proposals": [{"tile": 2, "layout": "col"}, {"tile": 4.0, "layout": "row"}]}"#);
    assert_eq!(ask(&mut p, |_: &Config| true).unwrap(), Some(Config(vec![1, 1])));
    assert_eq!(ask(&mut p, |_: &Config| true).unwrap(), Some(Config(vec![2, 0])));
    let mut done = reply(r#"{"proposals": []}"#);
    assert_eq!(ask(&mut done, |_: &Config| true).unwrap(), None);
}

#[test]
fn bad_proposals_are_named() {
    let e = error(&mut reply(r#"{"proposals": [{"tile": 2, "layout": "col", "warp": 4}]}"#));
    assert!(e.contains("unknown parameter `warp`") && e.contains("proposal 0"), "{e}");
    let e = error(&mut reply(
        r#"{"proposals": [{"tile": 1, "layout": "row"}, {"tile": 3, "layout": "row"}]}"#,
    ));
    assert!(e.contains("proposal 1") && e.contains("`tile` = 3 is not one of its levels"), "{e}");
    let e = error(&mut reply(r#"{"proposals": [{"tile": 1}]}"#));
    assert!(e.contains("missing parameter `layout`"), "{e}");
    let e = error(&mut reply(r#"{"answer": 42}"#));
    assert!(e.contains("without a `proposals` list"), "{e}");
}

#[test]
fn already_evaluated_configurations_are_rejected() {
    let mut p = reply(r#"{"proposals": [{"tile": 1, "layout": "row"}]}"#);
    let c = ask(&mut p, |_: &Config| true).unwrap().unwrap();
    p.tell(&c, Outcome::Value(1.0));
    let e = error(&mut p);
    assert!(e.contains("already proposed") && e.contains("\"tile\":1"), "{e}");
}

#[test]
fn failing_or_silent_proposers_report_their_stderr() {
    let e = error(&mut Proposer::new("cat >/dev/null; echo 'out of tokens' >&2; exit 3"));
    assert!(e.contains("exit status: 3") && e.contains("out of tokens"), "{e}");
    let e = error(&mut Proposer::new("cat >/dev/null; echo 'thinking...' >&2"));
    assert!(e.contains("no JSON") && e.contains("thinking..."), "{e}");
}

#[test]
fn oracle_rejections_go_to_the_history_not_the_evaluator() {
    // The proposer echoes the history length into its reply file so the test can read the
    // request it was sent.
    let dir = std::env::temp_dir().join(format!("proposer-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let req = dir.join("request.json");
    let cmd = format!(
        "cat > {}; printf '%s' '{{\"proposals\": [{{\"tile\": 4, \"layout\": \"row\"}}, {{\"tile\": 1, \"layout\": \"col\"}}]}}'",
        req.display()
    );
    let mut p = Proposer::new(cmd);
    p.batch = 2;
    p.set_last_profile(serde_json::json!({"engine": "pe", "busy": 0.5}));
    // The oracle rejects tile 4.
    let got = ask(&mut p, |c: &Config| c.0[0] != 2).unwrap();
    assert_eq!(got, Some(Config(vec![0, 1])));
    p.tell(&Config(vec![0, 1]), Outcome::Value(2.5));
    let e = error(&mut p); // the same reply again: both already proposed
    assert!(e.contains("already proposed"), "{e}");
    let sent: serde_json::Value = serde_json::from_slice(&std::fs::read(&req).unwrap()).unwrap();
    assert_eq!(sent["protocol"], 1);
    assert_eq!(sent["want"], 2);
    assert_eq!(sent["last_profile"]["engine"], "pe");
    assert_eq!(sent["space"]["dims"][0]["kind"], "ordinal");
    assert_eq!(sent["space"]["dims"][1]["levels"][1], "col");
    let h = sent["history"].as_array().unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(
        h[0],
        serde_json::json!({"params": {"tile": 4, "layout": "row"}, "value": null, "invalid": true})
    );
    assert_eq!(
        h[1],
        serde_json::json!({"params": {"tile": 1, "layout": "col"}, "value": 2.5, "invalid": false})
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn parse_proposal_matches_numbers_numerically() {
    let s = space();
    let c = parse_proposal(&s, &serde_json::json!({"tile": 2.0, "layout": "row"})).unwrap();
    assert_eq!(c, Config(vec![1, 0]));
    assert!(parse_proposal(&s, &serde_json::json!([1, 2])).is_err());
}
