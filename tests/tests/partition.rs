//! `--partition 1/3`, `2/3`, `3/3` and `merge` give what one unpartitioned run gives: the
//! gate's verdicts, reports and exit code; bench's results and tables; tune's tuned
//! database. On a scratch copy of the fixture workspace.

use neuron_tune_tests::{cli, events, fixture_workspace};
use serde_json::Value;
use std::path::Path;

fn run(ws: &Path, args: &[&str], json: bool) -> (i32, String, String) {
    let manifest = ws.join("Cargo.toml");
    let mut a = args.to_vec();
    a.extend(["--manifest-path", manifest.to_str().unwrap()]);
    if json {
        a.extend(["--message-format", "json"]);
    }
    cli(&a)
}

fn path(ws: &Path, name: &str) -> String {
    ws.join(name).to_str().unwrap().to_string()
}

/// Every partition of a command, then their merge; returns the merge's exit code, stdout
/// (human or JSON) and stderr.
fn partitions_then_merge(
    ws: &Path,
    what: &str,
    args: &[&str],
    extra: &dyn Fn(&str) -> Vec<String>,
    json: bool,
    before_each: &dyn Fn(),
) -> (i32, String, String) {
    let mut files = Vec::new();
    for k in 1..=3 {
        before_each();
        let results = path(ws, &format!("{what}-{k}.json"));
        let part = format!("{k}/3");
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.extend(["--partition".into(), part.clone(), "--results".into(), results.clone()]);
        a.extend(extra(&format!("{what}-{k}")));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (code, out, err) = run(ws, &a, false);
        assert!(code == 0 || code == 5, "{a:?}: {code}\n{out}\n{err}");
        files.push(results);
    }
    before_each();
    let mut a = vec!["merge".to_string()];
    a.extend(files);
    a.extend(extra(&format!("{what}-merged")));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, out, err) = run(ws, &a, json);
    assert!(code == 0 || code == 5, "{a:?}: {code}\n{out}\n{err}");
    (code, out, err)
}

/// The gate events without what depends on the store's history (calls served from it).
fn verdicts(out: &str) -> Vec<Value> {
    events(out, "gate")
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().remove("cached_calls");
            e
        })
        .collect()
}

/// JUnit XML with every `time="…"` attribute's value blanked.
fn without_times(xml: &str) -> String {
    let mut out = String::new();
    let mut rest = xml;
    while let Some(i) = rest.find(" time=\"") {
        let value = &rest[i + 7..];
        let end = value.find('"').expect("a closing quote");
        assert!(value[..end].parse::<f64>().is_ok_and(|t| t >= 0.0), "{xml}");
        out.push_str(&rest[..i + 7]);
        out.push('"');
        rest = &value[end + 1..];
    }
    out.push_str(rest);
    out
}

fn reports(ws: &Path, name: &str) -> Vec<String> {
    vec![
        "--markdown".into(),
        path(ws, &format!("{name}.md")),
        "--junit".into(),
        path(ws, &format!("{name}.xml")),
    ]
}

#[test]
fn partitions_merged_give_the_result_of_one_run() {
    let ws = fixture_workspace("partition");

    // gate: a baseline in which qwen3 was 1 % faster, so one model regresses.
    let (code, _, err) = run(&ws, &["baseline", "save", "--shape", "tiny"], false);
    assert_eq!(code, 0, "{err}");
    let file = ws.join("neuron-tune.baseline.toml");
    // Edited through the tool's own reader and writer: a hand edit breaks the entry's seal.
    let mut baseline = cargo_neuron_tune::baseline::Baseline::load(&file).unwrap();
    let mut first = baseline.entries()[0].clone();
    first.tokens_per_s *= 1.01;
    baseline.record(first);
    baseline.save().unwrap();
    let gate = ["gate", "--shape", "tiny"];
    let one = |name: &str| -> (i32, String) {
        let mut a: Vec<String> = gate.iter().map(|s| s.to_string()).collect();
        a.extend(["--results".into(), path(&ws, &format!("{name}.json"))]);
        a.extend(reports(&ws, name));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (code, out, err) = run(&ws, &a, true);
        assert!(code == 0 || code == 5, "{err}");
        (code, out)
    };
    let (code, whole) = one("gate-whole");
    assert_eq!(code, 5, "{whole}");
    let extra = |name: &str| reports(&ws, name);
    let (merged_code, merged, _) = partitions_then_merge(&ws, "gate", &gate, &extra, true, &|| {});
    assert_eq!(merged_code, code);
    assert_eq!(verdicts(&merged), verdicts(&whole));
    assert_eq!(verdicts(&whole).len(), 2);
    let read = |name: &str| std::fs::read_to_string(ws.join(name)).unwrap();
    assert_eq!(read("gate-merged.md"), read("gate-whole.md"));
    // The JUnit `time`s are wall times, each run's own: the rest is the same.
    assert_eq!(without_times(&read("gate-merged.xml")), without_times(&read("gate-whole.xml")));
    let summary = |out: &str| {
        let mut s = events(out, "gate_summary").pop().unwrap();
        for k in ["markdown", "junit"] {
            s.as_object_mut().unwrap().remove(k);
        }
        s
    };
    assert_eq!(summary(&merged), summary(&whole));

    // The gate history (the report's throughput chart) has one run per logical gate: the
    // partitions add nothing, their merge adds the run, and merging the same files again —
    // in any order — or merging one run's own results adds nothing more. Each line says
    // what the run was compared against.
    let history = || -> Vec<Value> {
        let path =
            neuron_tune_tests::test_target_dir().join("neuron-tune/journals/gate-history.jsonl");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    let run_id = |file: &str| -> String {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        v["run_id"].as_str().unwrap_or_else(|| panic!("no run_id in {file}")).to_string()
    };
    let lines_of =
        |run: &str| -> Vec<Value> { history().into_iter().filter(|l| l["run"] == run).collect() };
    for k in 1..=3 {
        let id = run_id(&path(&ws, &format!("gate-{k}.json")));
        assert_eq!(lines_of(&id), Vec::<Value>::new(), "partition {k}/3 recorded a run");
    }
    let remerged = path(&ws, "gate-remerged.json");
    let mut a = vec!["merge".to_string()];
    a.extend((1..=3).rev().map(|k| path(&ws, &format!("gate-{k}.json"))));
    a.extend(["--results".into(), remerged.clone()]);
    a.extend(reports(&ws, "gate-remerged"));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, _, err) = run(&ws, &a, false);
    assert_eq!(code, 5, "{err}");
    let merged_run = lines_of(&run_id(&remerged));
    assert_eq!(merged_run.len(), 2, "one line per model, from the first merge: {merged_run:?}");
    for l in &merged_run {
        assert_eq!(l["against"]["kind"], "baseline_file", "{l}");
        assert_eq!(l["against"]["path"], file.to_str().unwrap(), "{l}");
    }
    let whole_file = path(&ws, "gate-whole.json");
    let whole_run = lines_of(&run_id(&whole_file));
    assert_eq!(whole_run.len(), 2, "the unpartitioned gate's own run: {whole_run:?}");
    let mut a = vec!["merge".to_string(), whole_file.clone()];
    a.extend(reports(&ws, "gate-whole-merged"));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let before = history().len();
    assert_eq!(run(&ws, &a, false).0, 5);
    assert_eq!(history().len(), before, "merging a run's own results records nothing");

    // Partitions gated with other settings are not joined: the refusal names the setting
    // that differs, with both values (docs/ci.md: "for gate naming each setting
    // that differs, with both values").
    let (strict, lax) = (path(&ws, "strict-1.json"), path(&ws, "lax-2.json"));
    for (part, file, flags) in [("1/2", &strict, &["--strict"][..]), ("2/2", &lax, &[])] {
        let mut a = gate.to_vec();
        a.extend(flags);
        a.extend(["--partition", part, "--results", file]);
        let (code, _, err) = run(&ws, &a, false);
        assert!(code == 0 || code == 5, "{a:?}: {err}");
    }
    let (code, _, err) = run(&ws, &["merge", &strict, &lax], false);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the partitions were gated differently (partition 1/2 vs partition 2/2): --strict on vs off"),
        "{err}"
    );

    // bench: the kernels at their small shapes (10 work items).
    let bench = ["bench", "-p", "neuron-fixtures-kernels", "--shape", "small"];
    let mut a = bench.to_vec();
    let whole_results = path(&ws, "bench-whole.json");
    a.extend(["--results", &whole_results]);
    let (code, whole_bench, err) = run(&ws, &a, false);
    assert_eq!(code, 0, "{err}");
    let none = |_: &str| Vec::new();
    let (code, merged_table, _) = partitions_then_merge(&ws, "bench", &bench, &none, false, &|| {});
    assert_eq!(code, 0);
    let (code, whole_table, _) = run(&ws, &["merge", &whole_results], false);
    assert_eq!(code, 0);
    // The same table, but for which results the store served (the first run simulated).
    let table = |t: &str| -> Vec<String> {
        t.lines().map(|l| l.replace("(cached)", "").trim_end().to_string()).collect()
    };
    // In the order of the unpartitioned run itself: the kernels as the crate lists them
    // (gemm first), not by name.
    assert_eq!(table(&merged_table), table(&whole_bench));
    let kernels = |t: &str| -> Vec<String> {
        let rows = t.lines().skip(2).filter_map(|l| l.split_whitespace().next());
        rows.map(String::from).collect()
    };
    let listed = kernels(&whole_bench);
    assert_eq!(listed[0], "gemm", "{whole_bench}");
    // Every variant of two kernels: each kernel's parameters in grid order, and the fastest
    // per kernel and shape after them in the same order.
    let grid = [
        "bench",
        "-p",
        "neuron-fixtures-kernels",
        "--shape",
        "small",
        "--kernel",
        "softmax",
        "--kernel",
        "add",
        "--all-variants",
    ];
    let (code, whole_grid, err) = run(&ws, &grid, false);
    assert_eq!(code, 0, "{err}");
    assert!(whole_grid.contains("fastest variant per kernel and shape"), "{whole_grid}");
    let params: Vec<&str> = whole_grid
        .lines()
        .filter(|l| l.trim_start().starts_with("add "))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let mut by_name = params.clone();
    by_name.sort();
    assert_ne!(params, by_name, "the grid's order is not the names' order: {whole_grid}");
    let (code, merged_grid, _) =
        partitions_then_merge(&ws, "bench-grid", &grid, &none, false, &|| {});
    assert_eq!(code, 0);
    assert_eq!(table(&merged_grid), table(&whole_grid));
    // A merge in JSON gives each variant's event, as the run itself did.
    let (code, merged_json, _) = run(&ws, &["merge", &whole_results], true);
    assert_eq!(code, 0);
    assert_eq!(events(&merged_json, "bench").len(), 10, "{merged_json}");
    assert_eq!(table(&merged_table), table(&whole_table));
    assert_eq!(table(&whole_table).len(), 12, "header and 10 variants: {whole_table}");
    let rows = |file: &str| -> Vec<Value> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r[1].as_object_mut().unwrap().remove("cached");
                r
            })
            .collect()
    };
    let parts: Vec<Vec<Value>> =
        (1..=3).map(|k| rows(&path(&ws, &format!("bench-{k}.json")))).collect();
    assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 10, "each item in one partition");
    let mut joined: Vec<Value> = parts.concat();
    let key = |r: &Value| format!("{}{}", r[0]["kernel"], r[0]["params"]);
    joined.sort_by_key(key);
    let mut whole_rows = rows(&whole_results);
    whole_rows.sort_by_key(key);
    assert_eq!(joined, whole_rows);

    // tune: each partition in a fresh checkout (no tuned database), merged into one.
    let db = ws.join("kernels/neuron-tune.tuned.toml");
    let tune = [
        "tune",
        "-p",
        "neuron-fixtures-kernels",
        "--shape",
        "small",
        "--kernel",
        "add",
        "--kernel",
        "rmsnorm",
        "--kernel",
        "softmax",
        "--budget",
        "3",
        "--seed",
        "1",
    ];
    let mut a = tune.to_vec();
    let whole_results = path(&ws, "tune-whole.json");
    a.extend(["--results", &whole_results]);
    let (code, _, err) = run(&ws, &a, false);
    assert_eq!(code, 0, "{err}");
    let whole_db = std::fs::read_to_string(&db).unwrap();
    assert_eq!(whole_db.matches("[[tuned]]").count(), 3, "{whole_db}");
    let fresh = || {
        let _ = std::fs::remove_file(&db);
    };
    let (code, _, err) = partitions_then_merge(&ws, "tune", &tune, &none, false, &fresh);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&db).unwrap(), whole_db);
    // Said as `tune` says what it did to the file (docs/ci.md: merge reports as one run).
    assert!(
        err.contains(&format!("Wrote {} (3 records of this run, all new)", db.display())),
        "{err}"
    );

    // A merge keeps a faster record the merging checkout has over a partition's slower
    // winner, as one run keeps it: after a longer run, merging the short runs' partitions
    // changes nothing.
    let longer: Vec<&str> = tune.iter().map(|a| if *a == "3" { "12" } else { a }).collect();
    let (code, _, err) = run(&ws, &longer, false);
    assert_eq!(code, 0, "{err}");
    let longer_db = std::fs::read_to_string(&db).unwrap();
    assert_ne!(longer_db, whole_db, "the longer run found something faster");
    let parts: Vec<String> = (1..=3).map(|k| path(&ws, &format!("tune-{k}.json"))).collect();
    let mut a = vec!["merge"];
    a.extend(parts.iter().map(String::as_str));
    let (code, out, err) = run(&ws, &a, false);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kept the recorded"), "{out}");
    assert_eq!(std::fs::read_to_string(&db).unwrap(), longer_db);
    // Every record kept: the file is unchanged, and said to be, as `tune` says it.
    let unchanged = format!("{} unchanged (this run's 3 records already there)", db.display());
    assert!(err.contains(&unchanged) && !err.contains("Wrote"), "{err}");

    // A goal no partition meets: each partition that tuned something exits 6 yet writes
    // its results (its winners are recorded), and the merge ends as one run would: 6.
    let mut goal = tune.to_vec();
    // 12 µs: above the 11 µs launch overhead (so searched), below any of these kernels.
    goal.extend(["--goal", "12us", "--max-rounds", "1"]);
    let mut files = Vec::new();
    let mut codes = Vec::new();
    for k in 1..=3 {
        let results = path(&ws, &format!("goal-{k}.json"));
        let part = format!("{k}/3");
        let mut a = goal.clone();
        a.extend(["--partition", &part, "--results", &results]);
        let (code, _, err) = run(&ws, &a, false);
        assert!(code == 0 || code == 6, "{a:?}: {code}\n{err}");
        assert!(Path::new(&results).is_file(), "partition {part} wrote its results: {err}");
        codes.push(code);
        files.push(results);
    }
    assert!(codes.contains(&6), "{codes:?}");
    let mut a = vec!["merge"];
    a.extend(files.iter().map(String::as_str));
    let (code, _, err) = run(&ws, &a, false);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("goal"), "{err}");

    // Partitions of different runs (another chip) are not joined into one table.
    let bench = ["bench", "-p", "neuron-fixtures-kernels", "--shape", "small"];
    let (one, two) = (path(&ws, "mixed-1.json"), path(&ws, "mixed-2.json"));
    let mut a = bench.to_vec();
    a.extend(["--partition", "1/2", "--results", &one]);
    assert_eq!(run(&ws, &a, false).0, 0);
    let mut a = bench.to_vec();
    a.extend(["--chip", "trn1", "--partition", "2/2", "--results", &two]);
    assert_eq!(run(&ws, &a, false).0, 0);
    let (code, _, err) = run(&ws, &["merge", &one, &two], false);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the partitions were benchmarked differently (chip trn2"), "{err}");

    // A results file is sealed: one edited by hand (a faster time) is refused, not merged.
    let mut edited: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    assert_eq!(edited["schema"], 1);
    edited["rows"][0][1]["bench"]["time_us"] = 0.5.into();
    std::fs::write(&one, serde_json::to_string_pretty(&edited).unwrap()).unwrap();
    let (code, _, err) = run(&ws, &["merge", &one], false);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mixed-1.json: not used: its checksum does not match"), "{err}");
}

/// A partition of tune that ends with exit 4 (a wrong result, kernel code that panicked)
/// keeps in its results what the run said of each failure: the merge, which shows none of
/// the partition's warnings, gives each distinct failing variant with the command that
/// reproduces it, says which partition it was and that its paths are that machine's, and
/// never points at warnings it does not show.
#[test]
fn a_merge_of_failed_tune_partitions_gives_the_commands_that_reproduce_the_failures() {
    let dir = neuron_tune_tests::scratch_dir("partition-failures");
    let root = neuron_tune_tests::root();
    let cases = [
        ("wrong_result", &["--budget", "4", "--seed", "1"][..]),
        ("panic", &["--budget", "8", "--seed", "1", "--strategy", "grid"][..]),
    ];
    for (fixture, flags) in cases {
        let manifest = root.join(format!("fixtures/broken/{fixture}/Cargo.toml"));
        let _ = std::fs::remove_file(manifest.with_file_name("neuron-tune.tuned.toml"));
        let (mut files, mut commands): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for k in 1..=2 {
            let results = dir.join(format!("{fixture}-{k}.json")).to_str().unwrap().to_string();
            let part = format!("{k}/2");
            let mut a = vec!["tune", "--manifest-path", manifest.to_str().unwrap()];
            a.extend(flags);
            a.extend(["--partition", &part, "--results", &results]);
            let (code, _, err) = cli(&a);
            assert!(code == 0 || code == 4, "{a:?}: {code}\n{err}");
            // The commands the partition's warnings give, each `...` before "reproduces it".
            for w in err.lines().filter(|l| l.starts_with("warning: ")) {
                let mut pieces = w.split('`');
                while let (Some(_), Some(command), Some(after)) =
                    (pieces.next(), pieces.next(), pieces.clone().next())
                {
                    if after.starts_with(" reproduces it") && !commands.iter().any(|c| c == command)
                    {
                        commands.push(command.to_string());
                    }
                }
            }
            files.push(results);
        }
        assert!(!commands.is_empty(), "{fixture}: the partitions warned of no failure");
        let mut a = vec!["merge", "--manifest-path", manifest.to_str().unwrap()];
        a.extend(files.iter().map(String::as_str));
        let (code, _, err) = cli(&a);
        assert_eq!(code, 4, "{fixture}: {err}");
        assert!(
            err.contains("each distinct failure, with the command that reproduces it:"),
            "{err}"
        );
        for c in &commands {
            assert!(err.contains(&format!("`{c}` reproduces it")), "{fixture}: {c}\n{err}");
        }
        assert!(!err.contains("warnings above"), "{fixture}: {err}");
        assert!(err.contains("(its paths are on the machine that ran it):"), "{fixture}: {err}");
    }
}
