//! `cargo neuron-tune` end to end: the real binary, real cargo builds of the fixture crates,
//! real harness worker processes.

use neuron_tune_tests::{
    broken_manifest, cli, cli_json, events, root, scratch_dir, test_target_dir,
};
use serde_json::Value;

#[test]
fn list_names_every_fixture_kernel_and_model() {
    let (code, out, err) = cli_json(&["list", "--workspace"]);
    assert_eq!(code, 0, "{err}");
    let lists = events(&out, "list");
    let kernels: Vec<&str> = lists
        .iter()
        .flat_map(|l| l["kernels"].as_array().unwrap())
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    for k in [
        "gemm",
        "rmsnorm",
        "softmax",
        "attention_naive",
        "attention_flash",
        "swiglu",
        "rope",
        "add",
    ] {
        assert!(kernels.contains(&k), "{k} missing from {kernels:?}");
    }
    let models: Vec<&str> = lists
        .iter()
        .flat_map(|l| l["models"].as_array().unwrap())
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["qwen3_naive", "qwen3"]);
}

#[test]
fn check_passes_on_the_fixtures() {
    let (code, out, err) = cli_json(&[
        "check",
        "-p",
        "neuron-fixtures-kernels",
        "--cases",
        "2",
        "--seed",
        "3",
        "--kernel",
        "rmsnorm",
        "--kernel",
        "softmax",
        "--kernel",
        "add",
        "--kernel",
        "rope",
    ]);
    assert_eq!(code, 0, "{err}");
    let checks = events(&out, "check");
    assert_eq!(checks.len(), 4);
    assert!(
        checks.iter().all(|c| c["passed"] == true && c["seed"] == 3 && c["cases"] == 2),
        "{checks:?}"
    );
}

#[test]
fn a_second_bench_simulates_nothing_and_reports_the_same_cycles() {
    let args = [
        "bench",
        "-p",
        "neuron-fixtures-kernels",
        "--shape",
        "small",
        "--kernel",
        "rmsnorm",
        "--kernel",
        "softmax",
        "--kernel",
        "add",
        "--all-variants",
    ];
    let (code, first, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    let (code, second, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    // Events stream in completion order: compare them by variant.
    let by_variant = |out: &str| {
        let mut v = events(out, "bench");
        v.sort_by_key(|e| {
            (e["kernel"].to_string(), e["shape"].to_string(), e["params"].to_string())
        });
        v
    };
    let (a, b) = (by_variant(&first), by_variant(&second));
    assert!(a.len() >= 10, "{}", a.len());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (&x["kernel"], &x["params"], &x["cycles"]),
            (&y["kernel"], &y["params"], &y["cycles"])
        );
        assert!(x["cycles"].as_u64().unwrap() > 0);
        assert_eq!(y["cached"], true);
    }
    // The fastest variant per kernel is named with its chip, as every variant's event is,
    // and is the fastest of that kernel's measured variants: its time is their minimum and
    // it is one of them, with that time. `evaluations` counts them.
    let best = events(&second, "best");
    assert_eq!(best.len(), 3, "{second}");
    assert!(best.iter().all(|e| e["chip"] == "trn2"), "{second}");
    for e in &best {
        let mine: Vec<&Value> = b.iter().filter(|v| v["kernel"] == e["kernel"]).collect();
        let fastest = mine.iter().filter_map(|v| v["time_us"].as_f64()).fold(f64::MAX, f64::min);
        assert_eq!(e["best_time"].as_f64(), Some(fastest), "{e}");
        assert!(
            mine.iter().any(|v| v["params"] == e["best_params"] && v["time_us"] == e["best_time"]),
            "{e}"
        );
        assert_eq!(e["evaluations"].as_u64(), Some(mine.len() as u64), "{e}");
    }
    let summary = &events(&second, "summary")[0];
    assert_eq!(summary["simulated"], 0);
    assert_eq!(summary["cached"].as_u64().unwrap() as usize, b.len());
}

#[test]
fn changing_one_kernel_re_simulates_only_its_variants() {
    // Multipliers no earlier run used (k and k + 0.5), so the store cannot already hold the
    // changed program: 2^20 values from the clock (a process id repeats too often in a store
    // that many test runs shared), exact in f32 (3 + a multiple of 2^-21).
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let k = 3.0 + (nanos % (1 << 20)) as f32 / (1u32 << 21) as f32;
    let dir = neuron_tune_tests::two_kernel_crate("resim", k);
    let manifest = dir.join("Cargo.toml");
    let bench = |m: &std::path::Path| {
        cli_json(&["bench", "--manifest-path", m.to_str().unwrap(), "--all-variants"])
    };
    // --force: simulate everything now, whatever an earlier test run left in the store.
    let (code, out, err) = cli_json(&[
        "bench",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--all-variants",
        "--force",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&out, "summary")[0]["cached"], 0);
    assert_eq!(events(&out, "summary")[0]["simulated"], 4);
    // Change `triple` so its program changes (another multiplier); `double` is untouched.
    let src = dir.join("src/main.rs");
    let text = std::fs::read_to_string(&src).unwrap();
    assert!(text.contains(&format!("{k:?}")));
    std::fs::write(&src, text.replace(&format!("{k:?}"), &format!("{:?}", k + 0.5))).unwrap();
    let (code, out, err) = bench(&manifest);
    assert_eq!(code, 0, "{err}");
    for e in events(&out, "bench") {
        let expect_cached = e["kernel"] == "double";
        assert_eq!(e["cached"], expect_cached, "{e}");
    }
    // A comment-only edit changes no program: nothing is re-simulated.
    std::fs::write(&src, std::fs::read_to_string(&src).unwrap() + "\n// a comment\n").unwrap();
    let (_, out, _) = bench(&manifest);
    assert_eq!(events(&out, "summary")[0]["simulated"], 0);
}

#[test]
fn profile_writes_a_perfetto_trace_and_names_a_dma_bound_gemm() {
    let trace = neuron_tune_tests::scratch_dir("profile").join("gemm.json");
    let mut args = neuron_tune_tests::PROFILE_DMA_BOUND_GEMM.to_vec();
    args.extend_from_slice(&["--trace", trace.to_str().unwrap()]);
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    let p = &events(&out, "profile")[0];
    assert_eq!(p["bottleneck"], "DMA-bound", "{}", p["profile"]["bottleneck"]);
    assert!(p["profile"]["bottleneck"]["advice"].as_array().is_some_and(|a| !a.is_empty()));
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let ev = t["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    // One track per engine and per DMA queue, then a lane for each transfer that overlaps
    // another on its queue (a DMA engine serves its queues round-robin, docs/dma.md).
    assert_eq!(&names[..4], ["TensorE", "VectorE", "ScalarE", "GpSimdE"], "{names:?}");
    assert!(names[4..20].iter().enumerate().all(|(i, n)| *n == format!("DMA queue {i}")));
    assert!(names[20..].iter().all(|n| n.starts_with("DMA queue ") && n.contains("(overlap ")));
    assert!(names.len() > 20, "a DMA-bound GEMM overlaps transfers on a queue: {names:?}");
    // The trace format wants one thread's slices nested; Perfetto drops those that are not.
    let mut by_tid: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    for e in ev.iter().filter(|e| e["ph"] == "X") {
        let span = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        by_tid.entry(e["tid"].as_u64().unwrap()).or_default().push(span);
    }
    assert!(by_tid.len() > 4);
    for (tid, mut s) in by_tid {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in s.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0 + 1e-6, "tid {tid}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
}

#[test]
fn bench_names_the_fastest_of_every_kernel_once_variants_are_compared() {
    // `triple` has one variant, `double` two: both are in the "fastest" list (the only
    // variant is its kernel's fastest); a bench of one variant per kernel compares nothing
    // and lists nothing.
    let dir = neuron_tune_tests::two_kernel_crate("bench-single", 3.0);
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let i = text.find("[package.metadata.neuron-tune.kernels.triple]").unwrap();
    let (head, tail) = text.split_at(i);
    let tail = tail.replacen("space = { bufs = [1, 2] }", "space = { bufs = [2] }", 1);
    std::fs::write(&manifest, format!("{head}{tail}")).unwrap();
    let m = manifest.to_str().unwrap();
    let (code, out, err) = cli_json(&["bench", "--manifest-path", m, "--all-variants"]);
    assert_eq!(code, 0, "{err}");
    let mut best: Vec<(String, u64)> = events(&out, "best")
        .iter()
        .map(|e| (e["kernel"].as_str().unwrap().into(), e["evaluations"].as_u64().unwrap()))
        .collect();
    best.sort();
    assert_eq!(best, [("double".to_string(), 2), ("triple".to_string(), 1)], "{out}");
    let (code, out, err) = cli_json(&["bench", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&out, "bench").len(), 2, "{out}");
    assert!(events(&out, "best").is_empty(), "{out}");
}

#[test]
fn bench_names_the_default_as_fastest_when_it_ties() {
    // `double`'s space lists bufs 3 before the default 2: at 256 rows (two row tiles) both
    // overlap every load with the previous tile's work, so they tie, and grid order alone
    // would name bufs=3 "faster than the default". `tune` keeps the default on a tie; so does
    // bench's "fastest variant".
    let dir = neuron_tune_tests::two_kernel_crate("bench-tie", 3.0);
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replacen("space = { bufs = [1, 2] }", "space = { bufs = [3, 2] }", 1);
    std::fs::write(&manifest, text).unwrap();
    let (code, out, err) = cli_json(&[
        "bench",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--all-variants",
        "--kernel",
        "double",
    ]);
    assert_eq!(code, 0, "{err}");
    // (Events come in the order the workers finish; the grid order is the space's.)
    let mut times: Vec<(u64, f64)> = events(&out, "bench")
        .iter()
        .map(|e| (e["params"]["bufs"].as_u64().unwrap(), e["time_us"].as_f64().unwrap()))
        .collect();
    times.sort_by_key(|t| t.0);
    assert_eq!(times.iter().map(|t| t.0).collect::<Vec<_>>(), [2, 3], "{out}");
    assert_eq!(times[0].1, times[1].1, "the premise: the two variants tie: {times:?}");
    let best = &events(&out, "best")[0];
    assert_eq!(best["best_params"]["bufs"], 2, "{best}");
    assert_eq!(best["best_time"], best["default_time"], "{best}");
}

#[test]
fn a_compile_error_exits_3_with_cargos_message() {
    let m = root().join("fixtures/broken/compile_error/Cargo.toml");
    let (code, _, err) = cli(&["check", "--manifest-path", m.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("mismatched types")
            && err.contains("building the harness of `broken-compile-error` failed"),
        "{err}"
    );
}

#[test]
fn a_wrong_result_exits_4_with_the_shrunk_case() {
    let m = root().join("fixtures/broken/wrong_result/Cargo.toml");
    // No saved failing case yet, so this check saves one (quietly: proptest's advice to a
    // test suite's author is not for this tool's users).
    let _ = std::fs::remove_dir_all(test_target_dir().join("neuron-tune/regressions"));
    let (code, out, err) = cli_json(&[
        "check",
        "--manifest-path",
        m.to_str().unwrap(),
        "--cases",
        "16",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 4, "{err}");
    let c = &events(&out, "check")[0];
    assert_eq!(c["passed"], false);
    assert!(c["failure"]["shape"]["rows"].as_u64().unwrap() < 128, "{c}");
    // In JSON mode the failure is the check event's (its human lines are not printed).
    assert!(c["failure"]["message"].as_str().unwrap().contains("elements outside"), "{c}");
    assert!(!out.contains("proptest") && !err.contains("proptest"), "{out}\n{err}");
    let saved = std::fs::read_dir(test_target_dir().join("neuron-tune/regressions")).unwrap();
    let saved: Vec<String> = saved
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().starts_with("double-"))
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .collect();
    assert!(saved.iter().any(|t| t.contains("\ncc ")), "the failing case was saved: {saved:?}");
}

/// `check --shape` checks at that named shape, not at random small ones: the off-by-one
/// kernel above skips a partial last tile of rows, which the random shapes have and the
/// named `small` shape (256 rows, two whole tiles) does not. So it passes there, one
/// seeded case per variant, and the event names the shape.
#[test]
fn check_at_a_named_shape_checks_that_shape() {
    let m = root().join("fixtures/broken/wrong_result/Cargo.toml");
    let m = m.to_str().unwrap();
    let args = ["check", "--manifest-path", m, "--seed", "1", "--shape", "small"];
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    let c = &events(&out, "check")[0];
    assert_eq!(
        (&c["passed"], &c["cases"], &c["shape"]),
        (&true.into(), &1.into(), &"small".into())
    );
    assert!(!err.contains("--cases"), "no --cases given, nothing to say of it: {err}");
    // Human lines carry the shape column; the status line says what is checked.
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("  ok     double  small  ")), "{out}");
    assert!(
        err.contains("Checking one case per variant at each named shape (full size), seed "),
        "{err}"
    );
    assert!(!err.contains("32 cases"), "{err}");
    // A --cases that does not apply is said not to.
    let mut with_cases = args.to_vec();
    with_cases.extend(["--cases", "5"]);
    let (code, _, err) = cli(&with_cases);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note: --cases 5 does not apply with --shape"), "{err}");
}

/// At a named shape a variant the kernel's rule refuses there is invalid, as `bench` says
/// of it (exit 2 when nothing else is selected), not a failed check: rmsnorm with 4 buffers
/// of 8 rows per partition needs more SBUF than trn2 has at `small` (hidden 1024).
#[test]
fn check_at_a_named_shape_calls_a_variant_refused_there_invalid() {
    let args = [
        "check",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "rmsnorm",
        "--shape",
        "small",
        "--params",
        "bufs=4,rows_per_partition=8",
    ];
    let (code, out, err) = cli(&args);
    assert_eq!(code, 2, "{out}\n{err}");
    // A refused variant is a status line (stderr), as in `bench`; no result was made.
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("invalid  rmsnorm bufs=4,rows_per_partition=8"), "{err}");
    assert!(err.contains("more than trn2's 229376"), "{err}");
    assert!(err.contains("no valid variant to check"), "{err}");
}

/// Every variant of the kernel, its default included, fails the check (the bug does not
/// depend on the parameters): `tune` has nothing correct to record, so it records nothing
/// and fails, rather than keep the default as the winner.
#[test]
fn a_tune_where_even_the_default_fails_its_check_records_nothing_and_exits_4() {
    let m = root().join("fixtures/broken/wrong_result/Cargo.toml");
    let tuned = root().join("fixtures/broken/wrong_result/neuron-tune.tuned.toml");
    let _ = std::fs::remove_file(&tuned);
    let (code, _, err) =
        cli(&["tune", "--manifest-path", m.to_str().unwrap(), "--budget", "4", "--seed", "1"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("the default parameters fail their correctness check"), "{err}");
    assert!(err.contains("no variant passed its correctness check"), "{err}");
    assert!(!tuned.exists(), "nothing is recorded: {}", std::fs::read_to_string(&tuned).unwrap());
}

/// A search goes on past a variant whose kernel code panics (a fault, not invalid), but
/// says so, with the command that reproduces it, and ends with exit 4 as `bench` does: a
/// panic is a bug, not a refused variant. The winner among the others is still recorded.
#[test]
fn a_tune_says_which_variant_panicked_and_how_to_reproduce_it() {
    let m = broken_manifest("panic");
    let tuned = root().join("fixtures/broken/panic/neuron-tune.tuned.toml");
    let _ = std::fs::remove_file(&tuned);
    let args =
        ["tune", "--manifest-path", &m, "--budget", "8", "--seed", "1", "--strategy", "grid"];
    let (code, _, err) = cli(&args);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("variant panicked, crashed or hung"), "{err}");
    assert!(err.contains("the winners found are recorded"), "{err}");
    let text = std::fs::read_to_string(&tuned).unwrap_or_default();
    assert!(text.contains("cols_per_tile = 512"), "the other variant won: {text}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("warning: double ") && l.contains("panic: "))
        .collect();
    assert!(!warnings.is_empty(), "{err}");
    assert!(warnings.iter().all(|w| w.contains("cols_per_tile=128")), "{warnings:?}");
    let command = format!("`cargo neuron-tune bench --manifest-path {m} -p broken-panic --kernel");
    assert!(warnings[0].contains(&format!("{command} double --shape ")), "{err}");
    // A script is told each one, as `bench` tells it.
    let _ = std::fs::remove_file(&tuned);
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 4, "{err}");
    let failed = events(&out, "variant_failed");
    assert!(!failed.is_empty(), "{out}");
    for f in &failed {
        assert_eq!(
            (&f["kernel"], &f["kind"], &f["chip"]),
            (&"double".into(), &"panic".into(), &"trn2".into()),
            "{f}"
        );
        assert_eq!(f["params"]["cols_per_tile"], 128, "{f}");
    }
    // The run ends with its summary, as every command that runs variants does, then the
    // error that gives the exit code.
    let tail: Vec<Value> =
        out.lines().rev().take(2).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(tail[0]["event"], "error", "{out}");
    let summary = &tail[1];
    assert_eq!((&summary["event"], &summary["command"]), (&"summary".into(), &"tune".into()));
    assert_eq!((&summary["failed"], &summary["seed"]), (&1.into(), &1.into()), "{summary}");
    let _ = std::fs::remove_file(root().join("fixtures/broken/panic/neuron-tune.tuned.toml"));
}

#[test]
fn panicking_and_hanging_variants_are_reported_and_the_others_finish() {
    for (krate, bad_kind, bad_param, good) in [
        ("panic", "panic", ("cols_per_tile", 128), ("cols_per_tile", 512)),
        ("hang", "timeout", ("bufs", 1), ("bufs", 2)),
    ] {
        let m = root().join("fixtures/broken").join(krate).join("Cargo.toml");
        let (code, out, err) = cli_json(&[
            "bench",
            "--manifest-path",
            m.to_str().unwrap(),
            "--all-variants",
            "--timeout",
            "5",
            "--jobs",
            "2",
        ]);
        assert_eq!(code, 4, "{krate}: {err}");
        let failed = events(&out, "variant_failed");
        assert_eq!(failed.len(), 1, "{krate}: {failed:?}");
        assert_eq!(failed[0]["kind"], bad_kind);
        assert_eq!(failed[0]["params"][bad_param.0], bad_param.1);
        if bad_kind == "panic" {
            // The kernel's own panic message, not a placeholder.
            let msg = failed[0]["message"].as_str().unwrap();
            assert!(msg.contains("index out of bounds"), "{msg}");
            // And where: the kernel's line, not the harness's.
            assert!(msg.ends_with("(at src/main.rs:16:28)"), "{msg}");
        }
        let ok = events(&out, "bench");
        assert_eq!(ok.len(), 1, "{krate}: the other variant finished");
        assert_eq!(ok[0]["params"][good.0], good.1);
    }
}

/// `bench > results.txt` keeps the variants that panicked: they are rows of the results
/// table on stdout (kind and reason), in grid order among the others, as `check` prints
/// its failures; the warning on stderr stays. So does a merge of partitions' results.
#[test]
fn a_panicking_variant_is_a_row_of_the_results_on_stdout() {
    let m = broken_manifest("panic");
    let results = scratch_dir("bench-failed-row").join("part.json");
    let r = results.to_str().unwrap();
    let args = ["bench", "--manifest-path", &m, "--all-variants", "--partition", "1/1"];
    let (code, out, err) = cli(&[&args[..], &["--results", r]].concat());
    assert_eq!(code, 4, "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("double ")).collect();
    assert_eq!(rows.len(), 2, "both variants on stdout: {out}");
    let failed = rows[0];
    assert!(failed.contains("cols_per_tile=128"), "grid order: {out}");
    assert!(failed.contains("panic: index out of bounds: the len is 0"), "{failed}");
    assert!(rows[1].contains("cols_per_tile=512"), "{out}");
    assert!(err.contains("  panic    double bufs=2,cols_per_tile=128 at small: "), "{err}");
    // The merge of that partition reports the same rows, and the event, as the run did.
    let (code, merged, err) = cli(&["merge", r]);
    assert_eq!(code, 4, "{err}");
    assert_eq!(merged.lines().filter(|l| l.contains("double ")).count(), 2, "{merged}");
    assert!(merged.lines().any(|l| l == failed), "{merged}");
    let (_, json, _) = cli_json(&["merge", r]);
    assert_eq!(events(&json, "variant_failed")[0]["kind"], "panic", "{json}");
}

#[test]
fn a_panic_repeated_by_shrinking_is_shown_once_with_its_count() {
    let m = broken_manifest("panic");
    let (code, out, err) =
        cli(&["check", "--manifest-path", &m, "--all-variants", "--cases", "8", "--seed", "1"]);
    assert_eq!(code, 4, "{err}");
    let all = format!("{out}{err}");
    // The failing case is shrunk, each step panicking again at the same line.
    assert!(all.contains("smallest failing shape {cols=1, rows=1}"), "{all}");
    assert_eq!(all.matches("panicked at src/main.rs:16").count(), 1, "{all}");
    let repeats = all
        .lines()
        .find_map(|l| l.split("(the same panic ").nth(1))
        .unwrap_or_else(|| panic!("no count of the repeats: {all}"));
    assert!(
        repeats.ends_with(
            "not shown: src/main.rs:16:28: index out of bounds: the len is 0 but the index is 0)"
        ),
        "{repeats}"
    );
}

#[test]
fn an_sbuf_overflow_is_an_invalid_variant_with_the_pool_breakdown() {
    let m = root().join("fixtures/broken/sbuf_overflow/Cargo.toml");
    let (code, out, err) =
        cli_json(&["bench", "--manifest-path", m.to_str().unwrap(), "--all-variants"]);
    assert_eq!(code, 0, "invalid variants are part of a space, not a crash: {err}");
    let failed = events(&out, "variant_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["kind"], "invalid");
    let msg = failed[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("SBUF over capacity")
            && msg.contains("pool `scratch` (bufs=4)")
            && msg.contains("pool `io`"),
        "{msg}"
    );
    assert_eq!(events(&out, "bench").len(), 1);
}

#[test]
fn a_bad_toml_space_exits_2_naming_file_and_line() {
    let m = root().join("fixtures/broken/bad_toml/Cargo.toml");
    let (code, _, err) = cli(&["list", "--manifest-path", m.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("fixtures/broken/bad_toml/Cargo.toml:22:")
            && err.contains("no parameter `tile_rows`"),
        "{err}"
    );
}

#[test]
fn new_kernels_from_every_template_pass_check() {
    let dir = neuron_tune_tests::empty_kernel_crate("scaffold");
    let manifest = dir.join("Cargo.toml");
    let mut next = Vec::new();
    for (name, t) in [
        ("my_scale", "elementwise"),
        ("my_sum", "reduction"),
        ("my_gemm", "gemm"),
        ("my_attn", "attention"),
    ] {
        let (code, out, err) =
            cli(&["new", name, "--template", t, "--manifest-path", manifest.to_str().unwrap()]);
        assert_eq!(code, 0, "{t}: {err}");
        let line = out.lines().find_map(|l| l.trim_start().strip_prefix("next: "));
        next.push(line.unwrap_or_else(|| panic!("no next step: {out}")).to_string());
    }
    // The next step names the crate as `new` was given it, and its package.
    let m = manifest.to_str().unwrap();
    let check =
        format!("cargo neuron-tune check --manifest-path {m} -p scaffold --kernel my_scale");
    assert_eq!(next[0], check);
    // Registered in the order they were made, as a list a person would write.
    let harness = std::fs::read_to_string(dir.join("src/bin/harness.rs")).unwrap();
    let at = |m: &str| harness.find(&format!("::{m}::")).unwrap_or_else(|| panic!("{harness}"));
    assert!(at("my_scale") < at("my_sum") && at("my_sum") < at("my_gemm"), "{harness}");
    assert!(at("my_gemm") < at("my_attn") && !harness.contains(", ]"), "{harness}");
    let (code, out, err) = cli_json(&[
        "check",
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--cases",
        "3",
        "--seed",
        "9",
    ]);
    assert_eq!(code, 0, "{err}");
    let checks = events(&out, "check");
    assert_eq!(checks.len(), 4, "{out}");
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    // Pasted into a shell (with the tests' build flags), the next step checks that kernel.
    let td = neuron_tune_tests::test_target_dir();
    let build = format!(" --target-dir {} --profile dev --cases 3 --seed 9", td.display());
    let (code, out, err) = neuron_tune_tests::run_printed(&format!("{}{build}", next[0]));
    assert_eq!(code, 0, "{}\n{out}\n{err}", next[0]);
    assert!(out.contains("my_scale") && !out.contains("my_sum"), "{out}");
    // Scaffolding twice refuses to overwrite.
    let (code, _, err) = cli(&[
        "new",
        "my_sum",
        "--template",
        "reduction",
        "--manifest-path",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn list_kernel_shows_only_the_kernels_it_names_with_their_defaults() {
    let (code, out, err) = cli_json(&[
        "list",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "gemm",
        "--kernel",
        "rms*",
    ]);
    assert_eq!(code, 0, "{err}");
    let lists = events(&out, "list");
    assert_eq!(lists.len(), 1, "one kernel crate has them: {out}");
    let names: Vec<&str> = lists[0]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gemm", "rmsnorm"]);
    // The human listing says each one's defaults.
    let (code, out, err) = cli(&["list", "-p", "neuron-fixtures-kernels", "--kernel", "gemm"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("default: accumulate=")), "{out}");
    assert!(!out.contains("rmsnorm"), "{out}");
}

#[test]
fn a_chip_file_from_chip_is_named_by_its_file_and_simulated_as_written() {
    let (code, trn2, err) = cli(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    assert!(trn2.contains("name = \"trn2\"\n"), "{trn2}");
    // What its numbers mean, on stderr (stdout stays a chip file): trn2's TensorE at 2.4 GHz
    // peaks at 128 × 128 PEs × 2 FLOP × 2.4 GHz = 78.6 TFLOP/s, and its 16 DMA engines at
    // 23 GB/s move 368 GB/s.
    let peak = 128.0 * 128.0 * 2.0 * 2.4e9 / 1e12;
    assert!(err.contains(&format!("TensorE peak {peak:.1} TFLOP/s bf16")), "{err}");
    assert!(err.contains("DMA 16 engines × 23 GB/s = 368 GB/s"), "{err}");
    assert!(trn2.parse::<toml::Table>().is_ok(), "{trn2}");
    let dir = scratch_dir("chip-file");
    // A what-if chip: trn2 with a 1 µs kernel launch instead of 11 µs.
    let launch = "launch_overhead_ns = 11000.0\n";
    assert!(trn2.contains(launch), "{trn2}");
    let faster = trn2.replace(launch, "launch_overhead_ns = 1000.0\n");
    let bench = |chip: &str| {
        let args =
            ["bench", "-p", "neuron-fixtures-kernels", "--kernel", "add", "--shape", "small"];
        let (code, out, err) = cli_json(&[&args[..], &["--chip", chip]].concat());
        (code, events(&out, "bench"), err)
    };

    // Still called trn2: its profiles would say trn2. Refused, naming both names.
    let copy = dir.join("quick-launch.toml");
    std::fs::write(&copy, &faster).unwrap();
    let (code, _, err) = bench(copy.to_str().unwrap());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("name = \"trn2\" but the file is named `quick-launch`"), "{err}");
    // Named trn2 throughout, file and field: its results would replace the built-in trn2's
    // records and resume its journals. Refused too.
    let clash = dir.join("trn2.toml");
    std::fs::write(&clash, &faster).unwrap();
    let (code, _, err) = bench(clash.to_str().unwrap());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("may not be named like the built-in chip `trn2`"), "{err}");

    // Named as its file: results carry that name, and the file's launch overhead is the one
    // simulated: the same kernel time, 10 µs less per call.
    std::fs::write(&copy, faster.replace("name = \"trn2\"", "name = \"quick-launch\"")).unwrap();
    let (code, fast, err) = bench(copy.to_str().unwrap());
    assert_eq!(code, 0, "{err}");
    let (code, base, err) = bench("trn2");
    assert_eq!(code, 0, "{err}");
    assert_eq!(fast[0]["chip"], "quick-launch");
    assert_eq!(base[0]["chip"], "trn2");
    let us = |e: &Value, what: &str| e[what].as_f64().unwrap();
    let (fast, base) = (&fast[0], &base[0]);
    assert_eq!(us(fast, "kernel_time_us"), us(base, "kernel_time_us"), "{fast} vs {base}");
    let saved = us(base, "time_us") - us(fast, "time_us");
    assert!((saved - 10.0).abs() < 1e-9, "{fast} vs {base}");
}

#[test]
fn check_lines_keep_their_columns_for_long_parameter_sets() {
    // rmsnorm's parameter set is 83 characters, add's 26: the columns after them line up.
    let (code, out, err) = cli(&[
        "check",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "rmsnorm",
        "--kernel",
        "add",
        "--cases",
        "1",
        "--seed",
        "5",
    ]);
    assert_eq!(code, 0, "{err}");
    let ok: Vec<&str> = out.lines().filter(|l| l.starts_with("  ok ")).collect();
    assert_eq!(ok.len(), 2, "{out}");
    let at: Vec<usize> = ok.iter().map(|l| l.find("  cases ").unwrap()).collect();
    assert_eq!(at[0], at[1], "{out}");
    assert!(ok.iter().all(|l| l.contains("bufs=")), "{out}");
}

#[test]
fn profile_without_a_shape_takes_the_kernels_smallest_and_says_so() {
    // gemm's shapes (fixtures/kernels/Cargo.toml): qwen3_mlp_up 4096·8192·8192, small
    // 512·1024·1024, medium 1024·2048·2048 elements over (m, k, n): `small` is the least.
    let (code, out, err) = cli(&["profile", "-p", "neuron-fixtures-kernels", "gemm"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "Profiling at `small`, the smallest of gemm's shapes (qwen3_mlp_up, small, medium); \
             --shape picks another"
        ),
        "{err}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("  gemm ") && l.contains(" at small on trn2")),
        "{out}"
    );
    // The source lines come under a header that names the columns and what the time is.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines.iter().position(|l| l.contains("top source lines by busy time")).unwrap();
    let head: Vec<&str> = lines[at + 1].split_whitespace().collect();
    assert_eq!(head, ["busy", "count", "instruction", "line"], "{out}");
    assert!(lines[at + 2].contains("µs") && lines[at + 2].contains("gemm.rs:"), "{out}");
}

#[test]
fn a_closed_stdout_ends_nothing_in_a_panic() {
    // `cargo neuron-tune list | head -0`: the reader is gone before the first result line.
    let mut child = neuron_tune_tests::cli_command(&["list", "-p", "neuron-fixtures-kernels"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the CLI runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// `profile` takes its kernel as the other commands do too (`--kernel`), and a glob that
/// matches one kernel.
#[test]
fn profile_takes_kernel_as_a_flag_or_a_glob_of_one() {
    for kernel in [&["--kernel", "add"][..], &["ad*"]] {
        let mut a = vec!["profile", "-p", "neuron-fixtures-kernels", "--shape", "small"];
        a.extend_from_slice(kernel);
        let (code, out, err) = cli_json(&a);
        assert_eq!(code, 0, "{a:?}: {err}");
        assert_eq!(events(&out, "profile")[0]["kernel"], "add", "{a:?}");
    }
}

/// `list --kernel` says how many of the crate's kernels it shows.
#[test]
fn list_of_one_kernel_counts_it_among_the_crates() {
    let (code, out, err) = cli(&["list", "-p", "neuron-fixtures-kernels", "--kernel", "gemm"]);
    assert_eq!(code, 0, "{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(first.starts_with("neuron-fixtures-kernels (1 of "), "{out}");
    assert!(out.lines().any(|l| l.starts_with("  gemm ")), "{out}");
}

/// A damaged tuned database is refused in one readable block: `error: path:line:column:
/// what the parser says`, then advice that fits the damage. A file that does not parse has
/// no record to delete: restore it or delete it. A record whose seal does not hold is named,
/// with the command that tunes it again.
#[test]
fn a_damaged_tuned_database_is_one_block_with_advice_that_fits_the_damage() {
    let dir = neuron_tune_tests::two_kernel_crate("tuned-damaged", 3.0);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let db = dir.join("neuron-tune.tuned.toml");
    std::fs::write(&db, "garbage [[[\n").unwrap();
    let (code, _, err) = cli(&["list", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    let error = err.lines().position(|l| l.starts_with("error: ")).expect("an error line");
    let lines: Vec<&str> = err.lines().skip(error).collect();
    assert!(lines[0].starts_with(&format!("error: {}:1:9: ", db.display())), "{err}");
    assert!(lines[1].starts_with("  The tuned database cannot be read"), "{err}");
    assert!(lines[1].contains("restore it from version control"), "{err}");
    assert_eq!(lines.len(), 2, "one block: {err}");
    assert!(!err.contains("delete the record"), "there is no record to delete: {err}");

    std::fs::remove_file(&db).unwrap();
    let (code, _, err) =
        cli(&["tune", "--manifest-path", m, "--kernel", "double", "--budget", "2", "--seed", "3"]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&db).unwrap();
    std::fs::write(&db, text.replacen("time_us = ", "time_us = 1", 1)).unwrap();
    let (code, _, err) = cli(&["list", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    let header = text.lines().position(|l| l == "[[tuned]]").unwrap() + 1;
    let first = format!("error: {}:{header}: tuned #1 (double/trn2/small): ", db.display());
    assert!(err.contains(&first), "{first}\n{err}");
    let advice = "delete that record (its `[[tuned]]` table) and tune it again (`cargo \
                  neuron-tune tune --kernel double --shape small --chip trn2`)";
    assert!(err.contains(advice), "{err}");
}

/// `profile` (which names the tuned winner beside the default it profiles) and `bench`
/// (which never runs tuned parameters) go on with a damaged tuned database, but never
/// silently: a warning gives the refusal and what was left out. The commands that apply
/// tuned parameters refuse it (exit 2).
#[test]
fn profile_and_bench_say_loudly_that_a_damaged_tuned_database_was_ignored() {
    let dir = neuron_tune_tests::two_kernel_crate("tuned-ignored", 3.0);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let db = dir.join("neuron-tune.tuned.toml");
    std::fs::write(&db, "garbage [[[\n").unwrap();
    let warning = format!("warning: {}:1:9: ", db.display());
    for (args, left_out) in [
        (
            &["profile", "double", "--manifest-path", m][..],
            "a winner it records at this shape is not named",
        ),
        (&["bench", "--kernel", "double", "--manifest-path", m][..], "never the tuned ones"),
    ] {
        for json in [false, true] {
            let (code, out, err) = if json { cli_json(args) } else { cli(args) };
            assert_eq!(code, 0, "{args:?}: {err}");
            assert!(err.contains(&warning), "{args:?}, json {json}: {err}");
            assert!(err.contains("restore it from version control"), "{err}");
            assert!(err.contains(&format!("  Ignored: {}", args[0])), "{err}");
            assert!(err.contains(left_out), "{args:?}: {err}");
            assert!(!out.contains("garbage"), "results on stdout, status on stderr: {out}");
        }
    }
    let (code, _, err) =
        cli(&["tune", "--kernel", "double", "--budget", "1", "--manifest-path", m]);
    assert_eq!(code, 2, "tune applies tuned records: it refuses the file: {err}");
    assert!(err.contains(&format!("error: {}:1:9: ", db.display())), "{err}");
}

/// `build` prints its grid in a fixed order — kernel, shape, then the space's order, as
/// `bench` does — whatever order the traces finish in (it printed them as they finished),
/// with the SBUF footprint its help promises in a column, and ends with a one-line summary
/// on stderr.
#[test]
fn build_prints_its_grid_in_order_with_the_sbuf_footprint_and_a_summary() {
    let sel = ["-p", "neuron-fixtures-kernels", "--kernel", "add", "--kernel", "softmax"];
    let (code, out, err) = cli_json(&[&["list"][..], &sel].concat());
    assert_eq!(code, 0, "{err}");
    let list = events(&out, "list").pop().unwrap();
    let mut expected = Vec::new();
    for k in list["kernels"].as_array().unwrap() {
        let k: neuron_tune_protocol::KernelInfo = serde_json::from_value(k.clone()).unwrap();
        for (shape, _) in k.shapes.iter().filter(|(s, _)| s == "small") {
            for p in k.space.iter() {
                expected.push(format!("{} {shape} {p}", k.name));
            }
        }
    }
    assert_eq!(expected.len(), 54, "softmax's 36 and add's 18: {expected:?}");
    let build = [&["build"][..], &sel, &["--all-variants", "--shape", "small", "--jobs", "4"]];
    let (code, out, err) = cli(&build.concat());
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or_else(|| panic!("{out}"));
    assert!(header.contains("SBUF KiB/partition"), "{header}");
    let rows: Vec<&str> = lines.collect();
    let got: Vec<String> =
        rows.iter().map(|r| r.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).collect();
    // Every variant built (none of these is invalid at `small`), in grid order.
    assert_eq!(got, expected, "{out}");
    // The footprint column holds each one's KiB per partition, as the JSON's bytes say.
    let (_, json, _) = cli_json(&build.concat());
    let sbuf = events(&json, "build")
        .into_iter()
        .find(|b| {
            let p = &b["params"];
            b["kernel"] == "add" && p["bufs"] == 1 && p["cols_per_tile"] == 256 && p["spmd"] == 1
        })
        .map(|b| b["sbuf_bytes_per_partition"].as_f64().unwrap())
        .unwrap();
    // The same variant's row: JSON events come as builds finish (`--jobs 4`), not in grid
    // order, so the first `bufs=1` event need not be the first `bufs=1` row.
    let row = rows
        .iter()
        .find(|r| r.contains("add") && r.contains("bufs=1,cols_per_tile=256,spmd=1"))
        .unwrap();
    assert!(row.contains(&format!(" {:.1} ", sbuf / 1024.0)), "{sbuf} bytes in {row}");
    let summary = err.lines().last().unwrap_or_default();
    assert_eq!(summary.trim(), "54 variants built, 0 invalid", "{err}");
}

/// A manifest cargo cannot find is said once, in cargo's words, without guessing.
#[test]
fn a_missing_manifest_is_one_error_in_cargos_words() {
    let (code, _, err) = cli(&["list", "--manifest-path", "/nonexistent/Cargo.toml"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.trim(),
        "error: `cargo metadata` failed: manifest path `/nonexistent/Cargo.toml` does not exist",
    );
}

/// In a plain library crate, `list` and `tune` say how to make it a kernel crate.
#[test]
fn a_workspace_without_kernel_crates_says_init_makes_one() {
    let dir = scratch_dir("plainlib");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"plainlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), "").unwrap();
    let m = dir.join("Cargo.toml");
    for command in ["list", "tune"] {
        let (code, _, err) = cli(&[command, "--manifest-path", m.to_str().unwrap()]);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(err.contains("no kernel crates in"), "{command}: {err}");
        assert!(
            err.contains("`cargo neuron-tune init` makes a library crate a kernel crate"),
            "{err}"
        );
    }
}
