//! The gate end to end on a scratch git copy of the fixture workspace: a commit that only
//! edits comments and formatting reuses every stored result and passes; a commit that
//! forces RoPE to one buffer fails (exit 5) naming RoPE and both qwen3 models with their
//! throughput before and after, against the previous revision (`--base-ref HEAD~1`) and
//! against the committed baseline (`--baseline`); reverting it passes again. The Markdown
//! summary and the JUnit XML of the failing run are read back (the XML with quick-xml).
//! Tuned entries made stale by a kernel change are reported, and fail with `--strict`.

use neuron_tune_tests::test_target_dir;
use neuron_tune_tests::{
    cli, cli_env, cli_json, events, fixture_workspace, git, root, scratch_dir,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `gate` (or another command) on the scratch workspace, JSON events, reports in `ws/..`.
fn run(ws: &Path, args: &[&str]) -> (i32, String, String) {
    let manifest = ws.join("Cargo.toml");
    let (md, xml) = reports(ws);
    let mut a = args.to_vec();
    a.extend(["--manifest-path", manifest.to_str().unwrap(), "--message-format", "json"]);
    if args[0] == "gate" {
        a.extend(["--shape", "tiny", "--markdown", md.to_str().unwrap()]);
        a.extend(["--junit", xml.to_str().unwrap()]);
    }
    cli(&a)
}

fn reports(ws: &Path) -> (PathBuf, PathBuf) {
    let dir = ws.parent().unwrap();
    let name = ws.file_name().unwrap().to_string_lossy();
    (dir.join(format!("{name}-summary.md")), dir.join(format!("{name}-junit.xml")))
}

fn commit(ws: &Path, message: &str) {
    git(ws, &["commit", "-q", "-a", "-m", message]);
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The gate's verdict events, its summary and the command summary (calls simulated).
fn gate(ws: &Path, against: &[&str], expect: i32) -> (Vec<Value>, Value, Value) {
    let mut args = vec!["gate"];
    args.extend_from_slice(against);
    let (code, out, err) = run(ws, &args);
    assert_eq!(code, expect, "gate {against:?}\n{out}\n{err}");
    let models = events(&out, "gate");
    assert_eq!(models.len(), 2, "qwen3 and qwen3_naive at tiny: {out}");
    let summary = events(&out, "gate_summary").pop().expect("a gate summary");
    let done = events(&out, "summary").pop().expect("a summary");
    assert_eq!(done["command"], "gate");
    (models, summary, done)
}

fn verdicts(models: &[Value]) -> Vec<(String, String)> {
    models
        .iter()
        .map(|m| (m["model"].as_str().unwrap().into(), m["verdict"].as_str().unwrap().into()))
        .collect()
}

fn all(models: &[Value], verdict: &str) -> Vec<(String, String)> {
    models.iter().map(|m| (m["model"].as_str().unwrap().into(), verdict.into())).collect()
}

/// The slower RoPE is named, with both models, before and after.
fn assert_names_rope(models: &[Value], summary: &Value) {
    for m in models {
        let (before, after) = (f(&m["baseline_tokens_per_s"]), f(&m["tokens_per_s"]));
        assert!(after < before, "{m}");
        assert!(f(&m["change_pct"]) < 0.0, "{m}");
        assert!(m["moved"].as_array().unwrap().iter().all(|c| c["kernel"] == "rope"), "{m}");
    }
    let moved = summary["moved"].as_array().unwrap();
    assert_eq!(moved.len(), 2, "RoPE at its two call shapes moved, nothing else: {summary}");
    for c in moved {
        assert_eq!(c["kernel"], "rope");
        assert!(f(&c["after_us"]) > f(&c["before_us"]), "{c}");
        assert!(f(&c["delta_total_us"]) > 0.0, "{c}");
        assert_eq!(c["after_params"]["bufs"], 1, "{c}");
        assert_eq!(c["before_params"]["bufs"], 2, "{c}");
        let models: Vec<&str> =
            c["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        assert_eq!(models, ["qwen3@tiny", "qwen3_naive@tiny"], "{c}");
    }
}

/// The Markdown table lists each model with baseline, current and change (as the events
/// say) and names RoPE and both models; the JUnit XML parses, has a test case per model and
/// a failure with the numbers for each regression.
fn assert_reports(ws: &Path, models: &[Value]) {
    let (md_path, xml_path) = reports(ws);
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.starts_with("## neuron-tune gate: ❌ 2 regressions of 2 models"), "{md}");
    assert!(
        md.contains("| model | shape | chip | baseline tok/s | current tok/s | change | verdict |")
    );
    let tokens = |v: &Value| {
        let s = format!("{:.0}", f(v));
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    for m in models {
        let name = m["model"].as_str().unwrap();
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {name} | tiny | trn2 |")))
            .unwrap_or_else(|| panic!("no row for {name}: {md}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[4], tokens(&m["baseline_tokens_per_s"]), "{row}");
        assert_eq!(cells[5], tokens(&m["tokens_per_s"]), "{row}");
        assert_eq!(cells[6], format!("{:+.2} %", f(&m["change_pct"])), "{row}");
        assert!(cells[7].contains("regression"), "{row}");
    }
    let rope_rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `rope` |")).collect();
    assert_eq!(rope_rows.len(), 2, "{md}");
    assert!(rope_rows.iter().all(|r| r.contains("qwen3@tiny, qwen3_naive@tiny")), "{md}");

    use quick_xml::events::Event;
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut suites, mut cases, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    // The `time` of the report, the suite and each test case, in seconds.
    let mut times: Vec<f64> = Vec::new();
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("{e}: {xml}")) {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let attr = |k: &str| {
                    e.try_get_attribute(k).unwrap().map(|a| {
                        a.normalized_value(quick_xml::XmlVersion::Explicit1_0).unwrap().into_owned()
                    })
                };
                if ["testsuites", "testsuite", "testcase"].contains(&e.name().0) {
                    let time = attr("time").unwrap_or_else(|| panic!("no time: {xml}"));
                    let time: f64 = time.parse().unwrap_or_else(|_| panic!("time {time}: {xml}"));
                    assert!(time >= 0.0 && time.is_finite(), "{xml}");
                    times.push(time);
                }
                match e.name().0 {
                    "testsuite" => suites.push((attr("name").unwrap(), attr("failures").unwrap())),
                    "testcase" => cases.push(attr("name").unwrap()),
                    "failure" => failures.push(attr("message").unwrap()),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert_eq!(suites, [("neuron-tune gate".to_string(), "2".to_string())]);
    assert_eq!(cases, ["qwen3 at tiny on trn2", "qwen3_naive at tiny on trn2"]);
    for (m, msg) in models.iter().zip(&failures) {
        assert!(msg.contains(&tokens(&m["baseline_tokens_per_s"])), "{msg}");
        assert!(msg.contains(&tokens(&m["tokens_per_s"])), "{msg}");
        assert!(msg.contains('%'), "{msg}");
    }
    assert_eq!(failures.len(), 2);
    // The report's and the suite's time are the sum of the test cases' (to the millisecond
    // each is written with).
    assert_eq!(times.len(), 4, "{xml}");
    let cases_sum: f64 = times[2..].iter().sum();
    assert!((times[0] - cases_sum).abs() < 0.0025 && times[0] == times[1], "{times:?}");
}

#[test]
fn the_gate_fails_a_slower_kernel_naming_it_and_its_models_and_passes_after_the_revert() {
    // An old base worktree's sources would share build units with this run's (same
    // relative paths); without them cargo rebuilds whatever it finds there.
    let _ = std::fs::remove_dir_all(test_target_dir().join("neuron-tune/base"));
    let ws = fixture_workspace("gate");

    // Without a baseline the gate says how to make one.
    let (code, _, err) = run(&ws, &["gate"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("baseline save"), "{err}");

    // The committed baseline.
    let (code, out, err) = run(&ws, &["baseline", "save", "--shape", "tiny"]);
    assert_eq!(code, 0, "{err}");
    let saved = events(&out, "baseline").pop().unwrap();
    assert_eq!(saved["entries"].as_array().unwrap().len(), 2, "{saved}");
    let text = std::fs::read_to_string(ws.join("neuron-tune.baseline.toml")).unwrap();
    assert!(text.contains("schema = 2") && text.contains("program_hash"), "{text}");
    git(&ws, &["add", "neuron-tune.baseline.toml"]);
    commit(&ws, "baseline");
    let (code, out, _) = run(&ws, &["baseline", "show"]);
    assert_eq!(
        (code, events(&out, "baseline").pop().unwrap()["entries"].clone()),
        (0, saved["entries"].clone())
    );

    // Comments and formatting only: every result comes from the store, nothing moved.
    let rope = ws.join("kernels/src/rope.rs");
    let code = std::fs::read_to_string(&rope).unwrap();
    let reformatted = code.replace(
        "let bufs = u(p, \"bufs\") as u32;",
        "// The token tiles' ring.\n    let bufs = u(p,\n        \"bufs\") as u32; // one buffer per tile in flight",
    );
    assert_ne!(code, reformatted, "the fixture's RoPE reads `bufs` where this test expects");
    std::fs::write(&rope, reformatted).unwrap();
    commit(&ws, "rope: comments");
    for against in [&["--base-ref", "HEAD~1"][..], &[]] {
        let (models, summary, done) = gate(&ws, against, 0);
        assert_eq!(verdicts(&models), all(&models, "unchanged"), "{against:?}");
        assert_eq!(done["simulated"], 0, "no simulation for {against:?}: {done}");
        assert!(models.iter().all(|m| m["cached_calls"] == m["calls"]), "{models:?}");
        assert_eq!(summary["moved"].as_array().unwrap().len(), 0, "{summary}");
    }

    // RoPE forced to one buffer: slower, and both models with it.
    let code = std::fs::read_to_string(&rope).unwrap();
    let slower = code.replace(
        "ParamSpec::int(\"bufs\", 2, \"buffers of the token tiles\")",
        "ParamSpec::int(\"bufs\", 1, \"buffers of the token tiles\")",
    );
    assert_ne!(code, slower, "the fixture's RoPE default is where this test expects");
    std::fs::write(&rope, slower).unwrap();
    commit(&ws, "rope: one buffer");
    let (models, summary, _) = gate(&ws, &["--base-ref", "HEAD~1"], 5);
    assert_eq!(verdicts(&models), all(&models, "regression"));
    assert_names_rope(&models, &summary);
    assert_reports(&ws, &models);
    assert_eq!(summary["regressions"], 2);
    let file = ws.join("neuron-tune.baseline.toml");
    let (models, summary, _) = gate(&ws, &["--baseline", file.to_str().unwrap()], 5);
    assert_eq!(verdicts(&models), all(&models, "regression"));
    assert_names_rope(&models, &summary);

    // A threshold above the loss lets it through.
    let (_, _, _) = gate(&ws, &["--base-ref", "HEAD~1", "--threshold", "5"], 0);

    // Reverted: the revision before is the slow one, so this is an improvement.
    git(&ws, &["revert", "--no-edit", "HEAD"]);
    let (models, summary, _) = gate(&ws, &["--base-ref", "HEAD~1"], 0);
    assert_eq!(verdicts(&models), all(&models, "improvement"));
    assert_eq!(summary["improvements"], 2);
    let (models, _, _) = gate(&ws, &[], 0);
    assert_eq!(verdicts(&models), all(&models, "unchanged"));

    // Tune the models' RoPE calls, then change RoPE's program: the tuned entries are stale,
    // which the gate reports, and --strict fails on.
    let (code, _, err) = run(
        &ws,
        &[
            "tune", "--model", "qwen3", "--shape", "tiny", "--kernel", "rope", "--budget", "2",
            "--seed", "1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let code = std::fs::read_to_string(&rope).unwrap();
    let changed =
        code.replace("tensor_tensor(y2, e, f, Alu::Add)", "tensor_tensor(y2, f, e, Alu::Add)");
    assert_ne!(code, changed, "the fixture's RoPE add is where this test expects it");
    std::fs::write(&rope, changed).unwrap();
    git(&ws, &["add", "-A"]);
    commit(&ws, "rope: tuned, then changed");
    // Against the same commit, so nothing but the stale entries can fail it.
    let (models, summary, _) = gate(&ws, &["--base-ref", "HEAD"], 0);
    assert_eq!(verdicts(&models), all(&models, "unchanged"));
    let stale = summary["stale_entries"].as_array().unwrap();
    assert_eq!(stale.len(), 2, "both tuned RoPE calls: {summary}");
    assert_eq!(summary["stale"], 2, "the count beside them: {summary}");
    assert!(models.iter().all(|m| m["stale"].as_array().unwrap().len() == 2), "{models:?}");
    let (_, summary, _) = gate(&ws, &["--base-ref", "HEAD", "--strict"], 5);
    assert_eq!(summary["regressions"], 0, "it fails on the stale entries alone: {summary}");
    let md = std::fs::read_to_string(reports(&ws).0).unwrap();
    assert!(md.contains("Stale tuned entries") && md.contains("--strict"), "{md}");

    // A baselined model renamed away: the gate fails on what it can no longer measure (it
    // must not pass on models it never compared), until `baseline save` drops it.
    let lib = ws.join("qwen3/src/lib.rs");
    let code = std::fs::read_to_string(&lib).unwrap();
    let renamed = code.replace("\"qwen3_naive\"", "\"qwen3_plain\"");
    assert_ne!(code, renamed, "the fixture names its naive model where this test expects");
    std::fs::write(&lib, renamed).unwrap();
    let file = ws.join("neuron-tune.baseline.toml");
    let (code, out, err) = run(&ws, &["gate", "--baseline", file.to_str().unwrap()]);
    assert_eq!(code, 4, "{out}\n{err}");
    let models = events(&out, "gate");
    let gone = models.iter().find(|m| m["model"] == "qwen3_naive").expect("the gone model");
    assert_eq!(gone["verdict"], "failed", "{gone}");
    assert!(gone["note"].as_str().unwrap().contains("no longer in the workspace"), "{gone}");
    assert_eq!(models.iter().find(|m| m["model"] == "qwen3_plain").unwrap()["verdict"], "new");
    // The JSON summary lists the notes the Markdown summary does.
    let summary = events(&out, "gate_summary").pop().unwrap();
    let notes: Vec<&str> =
        summary["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.starts_with("qwen3_naive at tiny on trn2: in ")), "{notes:?}");
    let md = std::fs::read_to_string(reports(&ws).0).unwrap();
    assert!(notes.iter().all(|n| md.contains(n)), "{md}");
    // With -p naming the package that defined it (the entry says which), it is gone all
    // the same.
    let p = ["-p", "neuron-fixtures-qwen3", "--shape", "tiny"];
    let mut gate_p = vec!["gate", "--baseline", file.to_str().unwrap()];
    gate_p.extend_from_slice(&p);
    let (code, out, err) = run(&ws, &gate_p);
    assert_eq!(code, 4, "{out}\n{err}");
    let naive = |out: &str| events(out, "gate").into_iter().find(|m| m["model"] == "qwen3_naive");
    assert_eq!(naive(&out).expect("judged")["verdict"], "failed", "{out}");
    // An entry of a package not selected is out of the selection: neither judged nor
    // dropped. One that does not name its package (saved by an older tool) cannot be told
    // from either under -p: noted, not judged, kept.
    let mut save_p = vec!["baseline", "save"];
    save_p.extend_from_slice(&p);
    let text = std::fs::read_to_string(&file).unwrap();
    for (package, said) in
        [(Some("another-package"), None), (None, Some("not judged: qwen3_naive"))]
    {
        let mut b = cargo_neuron_tune::baseline::Baseline::load(&file).unwrap();
        let mut e = b.find("qwen3_naive", "tiny", "trn2").unwrap().clone();
        e.package = package.map(String::from);
        b.record(e);
        b.save().unwrap();
        let (code, out, err) = run(&ws, &gate_p);
        assert_eq!(code, 0, "{package:?}: {out}\n{err}");
        assert!(naive(&out).is_none(), "{package:?}: {out}");
        assert_eq!(said.is_some_and(|w| err.contains(w)), said.is_some(), "{package:?}: {err}");
        let (code, _, err) = run(&ws, &save_p);
        assert_eq!(code, 0, "{err}");
        assert!(!err.contains("dropping"), "{package:?}: {err}");
        let b = cargo_neuron_tune::baseline::Baseline::load(&file).unwrap();
        assert!(b.find("qwen3_naive", "tiny", "trn2").is_some(), "{package:?}: kept");
    }
    std::fs::write(&file, text).unwrap();
    // Every package selected, the save drops it.
    let (code, _, err) = run(&ws, &["baseline", "save", "--shape", "tiny"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("dropping qwen3_naive at tiny on trn2: no such model"), "{err}");
    let (code, out, err) = run(&ws, &["gate", "--baseline", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");

    // A base revision that does not compile: exit 3, and the error event says which
    // revision and carries the compiler's diagnostics, as a failed build of the current one
    // does.
    let code = std::fs::read_to_string(&rope).unwrap();
    std::fs::write(&rope, format!("{code}\nfn broken() -> u32 {{ \"not a number\" }}\n")).unwrap();
    commit(&ws, "rope: does not compile");
    std::fs::write(&rope, &code).unwrap();
    let (code, out, err) = run(&ws, &["gate", "--base-ref", "HEAD"]);
    assert_eq!(code, 3, "{out}\n{err}");
    let error = events(&out, "error").pop().expect("an error event");
    assert!(
        error["message"].as_str().unwrap().starts_with("at the base revision HEAD ("),
        "{error}"
    );
    let diagnostics = error["diagnostics"].as_array().expect("diagnostics");
    assert!(diagnostics.iter().any(|d| d.as_str().unwrap().contains("E0308")), "{error}");
}

/// On GitHub Actions the Markdown summary is appended to `$GITHUB_STEP_SUMMARY` (after what
/// earlier steps wrote); a variable set but empty is treated as unset, not as a path.
#[test]
fn the_summary_is_appended_to_github_step_summary_and_an_empty_one_is_ignored() {
    let summary = scratch_dir("step-summary").join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let baseline = root().join("fixtures/neuron-tune.baseline.toml");
    let args =
        ["gate", "--baseline", baseline.to_str().unwrap(), "--shape", "tiny", "--model", "qwen3"];
    let (code, _, err) = cli_env(&args, &[("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("earlier step\n## neuron-tune gate: "), "{text}");
    let (code, _, err) = cli_env(&args, &[("GITHUB_STEP_SUMMARY", "")]);
    assert_eq!(code, 0, "an empty variable is no path: {err}");
    // Written to the default place (other tests' gates write that file too, so the run's
    // own status line says where it went), and nothing more appended to the step summary.
    let default = test_target_dir().join("neuron-tune/gate/summary.md");
    assert!(err.contains(&format!("Wrote {} and ", default.display())), "{err}");
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), text);
}

/// A --markdown or --junit file that cannot be written (under a file) is refused before
/// anything is built or simulated, with exit 2 — not after the whole gate, with exit 1.
#[test]
fn an_unwritable_report_path_is_refused_before_the_gate_runs() {
    let dir = scratch_dir("gate-unwritable");
    let afile = dir.join("afile");
    std::fs::write(&afile, "").unwrap();
    let baseline = root().join("fixtures/neuron-tune.baseline.toml");
    for flag in ["--markdown", "--junit"] {
        let bad = afile.join("report");
        let args = [
            "gate",
            "--baseline",
            baseline.to_str().unwrap(),
            "--shape",
            "tiny",
            flag,
            bad.to_str().unwrap(),
            "--message-format",
            "json",
        ];
        let (code, out, err) = cli(&args);
        assert_eq!(code, 2, "{flag}: {out}\n{err}");
        let why = format!("parent {} is not a directory", afile.display());
        assert!(err.contains(flag) && err.contains(&why), "{flag}: {err}");
        // Nothing ran: the error event is the only line, no build, no gate verdict.
        assert_eq!(out.lines().count(), 1, "{flag}: {out}");
        assert_eq!(events(&out, "error")[0]["code"], 2, "{out}");
        assert!(!err.contains("Compiling") && !err.contains("Finished"), "{flag}: {err}");
    }
}

#[test]
fn two_baseline_saves_at_once_keep_both_models() {
    // Each save records its own model; the second must read the file after the first wrote
    // it. The test holds the store's lock until both saves wait for it, so both start
    // together whatever the machine's speed.
    use std::io::{BufRead, BufReader, Read};
    let dir = scratch_dir("baseline-race");
    let file = dir.join("baseline.toml");
    let f = file.to_str().unwrap();
    let lock_path = test_target_dir().join("neuron-tune").join("lock");
    std::fs::create_dir_all(lock_path.parent().unwrap()).unwrap();
    let lock = std::fs::OpenOptions::new().create(true).append(true).open(&lock_path).unwrap();
    lock.lock().unwrap();
    let mut children = Vec::new();
    for model in ["qwen3", "qwen3_naive"] {
        let args = ["baseline", "save", "--baseline", f, "--model", model, "--shape", "tiny"];
        let mut child = neuron_tune_tests::cli_command(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        while !said.contains("Blocking waiting for") {
            assert!(stderr.read_line(&mut said).unwrap() > 0, "{model} never waited:\n{said}");
        }
        children.push((child, stderr, said));
    }
    drop(lock);
    for (mut child, mut stderr, mut said) in children {
        stderr.read_to_string(&mut said).unwrap();
        assert!(child.wait().unwrap().success(), "{said}");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    for model in ["qwen3", "qwen3_naive"] {
        assert!(text.contains(&format!("model = \"{model}\"")), "{model} lost:\n{text}");
    }
}

/// A gate that compared nothing — every model new to the baseline, as a wrong `--chip`,
/// `--shape` or `--baseline` makes it — fails (exit 2) naming what the baseline holds and
/// how to record the selection; it passed with a warning, so such a CI step passed forever.
/// Its reports are written as for any gate, and say the same.
#[test]
fn a_gate_that_compared_nothing_fails_naming_what_the_baseline_holds() {
    let dir = scratch_dir("gate-nothing-compared");
    let (md, xml) = (dir.join("summary.md"), dir.join("junit.xml"));
    let baseline = root().join("fixtures/neuron-tune.baseline.toml");
    let b = baseline.to_str().unwrap();
    let args = [
        "gate",
        "--baseline",
        b,
        "--shape",
        "tiny",
        "--chip",
        "trn1",
        "--markdown",
        md.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
        "--message-format",
        "json",
    ];
    let (code, out, err) = cli(&args);
    assert_eq!(code, 2, "{out}\n{err}");
    let models = events(&out, "gate");
    assert_eq!(models.len(), 2, "{out}");
    assert!(models.iter().all(|m| m["verdict"] == "new"), "{out}");
    let summary = events(&out, "gate_summary").pop().expect("a gate summary");
    assert_eq!(summary["exit_code"], 2, "{summary}");
    let error = events(&out, "error").pop().expect("an error event");
    assert_eq!(error["code"], 2, "{error}");
    let message = error["message"].as_str().unwrap();
    for words in [
        "nothing compared: 2 models without a baseline entry",
        "holds chip trn2 at shape tiny",
        "`cargo neuron-tune baseline save --baseline",
        "--shape tiny --chip trn1`",
    ] {
        assert!(message.contains(words), "{words:?} in {message}");
        assert!(err.contains(words), "{words:?} on stderr: {err}");
    }
    // The reports are written, and the Markdown says the same.
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("## neuron-tune gate: ❌ nothing compared"), "{md}");
    assert!(md.contains("holds chip trn2 at shape tiny"), "{md}");
    assert!(std::fs::read_to_string(&xml).unwrap().contains("<testsuite"));
    // The same baseline at the chip it holds compares both models and passes.
    let (code, out, err) = cli(&[
        "gate",
        "--baseline",
        b,
        "--shape",
        "tiny",
        "--chip",
        "trn2",
        "--message-format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(events(&out, "gate").iter().all(|m| m["verdict"] == "unchanged"), "{out}");
}

/// A workspace whose kernel crates define no models has nothing to gate: the gate says so,
/// with the words `baseline save` says it in (what a model is), and exit 2 — not "no such
/// baseline", whose advice (`baseline save`) would only lead to that same error. Where the
/// selection has models and no baseline was saved, the missing baseline is what is said.
#[test]
fn a_gate_without_models_says_there_is_nothing_to_gate_before_the_missing_baseline() {
    let dir = scratch_dir("gate-no-models");
    let missing = dir.join("none.baseline.toml");
    let m = missing.to_str().unwrap();
    // The fixture kernels' package alone: kernels, no model.
    let kernels_only = ["-p", "neuron-fixtures-kernels", "--baseline", m];
    let (code, out, err) = cli_json(&[&["gate"][..], &kernels_only[..]].concat());
    assert_eq!(code, 2, "{out}\n{err}");
    let gate_says = events(&out, "error").pop().expect("an error event")["message"].clone();
    let (code, out, err) = cli_json(&[&["baseline", "save"][..], &kernels_only[..]].concat());
    assert_eq!(code, 2, "{out}\n{err}");
    let save_says = events(&out, "error").pop().expect("an error event")["message"].clone();
    assert_eq!(gate_says, save_says, "the same explanation as `baseline save`");
    let said = gate_says.as_str().unwrap();
    for words in ["have no models", "`impl Model`", "harness_main!", "fixtures/qwen3"] {
        assert!(said.contains(words), "{words:?} in {said}");
    }
    assert!(!said.contains("no such baseline"), "{said}");
    assert!(!missing.exists(), "nothing written");
    // The whole workspace has models: its missing baseline is the error, with the advice.
    let (code, out, err) = cli_json(&["gate", "--baseline", m, "--shape", "tiny"]);
    assert_eq!(code, 2, "{out}\n{err}");
    let said = events(&out, "error").pop().expect("an error event")["message"].clone();
    let said = said.as_str().unwrap();
    assert!(said.starts_with(&format!("{m}: no such baseline")), "{said}");
    assert!(said.contains("`cargo neuron-tune baseline save`"), "{said}");
    assert!(events(&out, "gate").is_empty(), "nothing gated: {out}");
}
