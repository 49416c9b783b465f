//! The seam between the tool and the harness: the protocol's own channel, persistent
//! workers, streaming results, protocol errors, and spaces too large to enumerate
//! (`fixtures/broken/noisy` and `fixtures/broken/bad_protocol`).

use neuron_tune_harness::proptest::prelude::{BoxedStrategy, Just, Strategy};
use neuron_tune_protocol::{
    ChipSpec, ParamValue, Params, RequestBody, ResponseBody, Shape, ShapeRef, Space,
};
use neuron_tune_tests::{
    broken_manifest, build_broken, cargo, cli_command, cli_env, double_crate, events, scratch_dir,
    test_target_dir, Worker,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::{Duration, Instant};

fn noisy(args: &[&str]) -> (i32, String, String) {
    noisy_env(args, &[])
}

fn noisy_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let manifest = broken_manifest("noisy");
    // The subcommand first: `--manifest-path` is one of its cargo flags.
    let mut a = args.to_vec();
    a.extend_from_slice(&["--manifest-path", &manifest, "--message-format", "json"]);
    cli_env(&a, env)
}

/// Events of one kernel, by their params' text.
fn by_params<'a>(evs: &'a [Value], kernel: &str) -> BTreeMap<String, &'a Value> {
    evs.iter().filter(|e| e["kernel"] == kernel).map(|e| (e["params"].to_string(), e)).collect()
}

#[test]
fn what_kernel_code_prints_never_changes_a_result_and_is_shown_with_its_variant() {
    let (code, out, err) = noisy(&[
        "bench",
        "--kernel",
        "double",
        "--kernel",
        "noisy",
        "--all-variants",
        "--force",
        "-j",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let benches = events(&out, "bench");
    let (quiet, loud) = (by_params(&benches, "double"), by_params(&benches, "noisy"));
    assert_eq!(quiet.len(), 4, "{out}");
    assert_eq!(quiet.keys().collect::<Vec<_>>(), loud.keys().collect::<Vec<_>>());
    for (params, q) in &quiet {
        let l = loud[params];
        assert_eq!(q["cycles"], l["cycles"], "{params}");
        assert_eq!(q["program_hash"], l["program_hash"], "{params}");
        assert_eq!(q["cached"], false);
        assert_eq!(l["cached"], false);
    }
    let outputs = events(&out, "output");
    // `(list)`: the validity rule printed while `list` counted valid variants.
    assert!(
        outputs.iter().all(|o| o["kernel"] == "noisy" || o["kernel"] == "(list)"),
        "{outputs:?}"
    );
    assert!(outputs.iter().any(|o| o["kernel"] == "noisy"), "{outputs:?}");
    let text: String = outputs.iter().map(|o| o["text"].as_str().unwrap()).collect();
    for printed in [
        "a body printing JSON",
        "no newline at the end",
        "body on stderr",
        "validity rule looked at",
    ] {
        assert!(text.contains(printed), "`{printed}` missing from {text}");
    }
    // Nothing of it reached stdout outside the events.
    assert!(
        out.lines().all(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["event"].is_string())),
        "{out}"
    );

    let (code, out, err) = noisy(&[
        "check",
        "--kernel",
        "double",
        "--kernel",
        "noisy",
        "--all-variants",
        "--cases",
        "3",
        "--seed",
        "9",
    ]);
    assert_eq!(code, 0, "{err}");
    let checks = events(&out, "check");
    let (quiet, loud) = (by_params(&checks, "double"), by_params(&checks, "noisy"));
    assert_eq!(quiet.len(), 4, "each parameter set is checked once: {out}");
    for (params, q) in &quiet {
        let l = loud[params];
        for field in ["passed", "cases", "max_abs_err", "mse", "cosine"] {
            assert_eq!(q[field], l[field], "{field} of {params}");
        }
        assert_eq!(q["passed"], true);
    }
    let text: String =
        events(&out, "output").iter().map(|o| o["text"].as_str().unwrap().to_string()).collect();
    assert!(text.contains("reference says hello"), "{text}");
}

#[test]
fn workers_start_once_per_job_slot_and_once_more_per_crash() {
    let (code, out, err) = noisy(&["bench", "--kernel", "many", "--all-variants", "-j", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&out, "bench").len(), 500);
    assert_eq!(events(&out, "worker_started").len(), 2, "{err}");

    // Variant a=3,b=0 aborts its worker, and again on the retry: two crashed workers, each
    // replaced by one.
    let (code, out, err) = noisy_env(
        &["bench", "--kernel", "many", "--all-variants", "-j", "2"],
        &[("NOISY_ABORT_AT", "3")],
    );
    assert_eq!(code, 4, "a crash fails the run: {err}");
    assert_eq!(events(&out, "bench").len(), 499);
    let failed = events(&out, "variant_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        (failed[0]["kind"].as_str(), &failed[0]["params"]["a"]),
        (Some("crashed"), &Value::from(3))
    );
    // The reason names how the worker died.
    let message = failed[0]["message"].as_str().unwrap();
    assert!(message.contains("killed by signal 6 (SIGABRT"), "{message}");
    assert_eq!(events(&out, "worker_started").len(), 4, "{err}");
}

#[test]
fn bench_events_stream_before_the_last_variant_is_simulated() {
    let manifest = broken_manifest("noisy");
    let mut child = cli_command(&[
        "bench",
        "--kernel",
        "sleepy",
        "--all-variants",
        "--force",
        "-j",
        "1",
        "--manifest-path",
        &manifest,
        "--message-format",
        "json",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::inherit())
    .spawn()
    .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first_bench = None;
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["event"] == "bench" && first_bench.is_none() {
            assert_eq!(v["params"]["sleep_ms"], 0, "the fast variant comes first");
            first_bench = Some(Instant::now());
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    let first = first_bench.expect("a bench event");
    // The slow variant sleeps 1.5 s in its bench after the first event was printed.
    assert!(
        first.elapsed() >= Duration::from_millis(1200),
        "the first event came {:?} before the end",
        first.elapsed()
    );
}

/// A worker that breaks the protocol — a wrong id, a truncated line, plain text instead of
/// its handshake, another protocol version — stops the command with exit 1 and a message
/// that says what it did: nothing it says can be trusted, so no result is taken from it
/// and it is not started again.
#[test]
fn a_worker_that_breaks_the_protocol_is_an_internal_error_naming_it() {
    let manifest = broken_manifest("bad_protocol");
    let starts = std::env::temp_dir()
        .join(format!("neuron-tune-bad-protocol-starts-{}.log", std::process::id()));
    let version = neuron_tune_protocol::PROTOCOL_VERSION;
    let mismatch =
        format!("speaks worker protocol {}, this cargo-neuron-tune speaks {version}", version + 1);
    let modes: [(&str, &[&str], bool); 4] = [
        ("wrong_id", &["with the response to request"], true),
        ("truncated", &["truncated response"], true),
        (
            "foreign",
            &["starting up", "not a protocol response", "usage: harness-bad-protocol"],
            true,
        ),
        ("version", &[&mismatch], false),
    ];
    for (mode, says, names_the_worker) in modes {
        let _ = std::fs::remove_file(&starts);
        // One worker (`-j 1`): a second start would be a retry.
        let (code, out, err) = cli_env(
            &[
                "bench",
                "--force",
                "-j",
                "1",
                "--manifest-path",
                &manifest,
                "--message-format",
                "json",
            ],
            &[("BAD_PROTOCOL", mode), ("BAD_PROTOCOL_STARTS", starts.to_str().unwrap())],
        );
        assert_eq!(code, 1, "{mode}: {err}");
        assert!(events(&out, "bench").is_empty(), "{mode}: no result from a broken answer: {out}");
        let error = &events(&out, "error")[0]["message"];
        let msg = error.as_str().unwrap();
        assert!(msg.contains("protocol error"), "{mode}: {msg}");
        for words in says {
            assert!(msg.contains(words), "{mode}: {words:?} in {msg}");
        }
        if names_the_worker {
            assert!(
                msg.contains("worker ") && msg.contains("harness-bad-protocol"),
                "{mode}: names the worker: {msg}"
            );
        }
        let started = std::fs::read_to_string(&starts).unwrap_or_default().lines().count();
        assert_eq!(started, 1, "{mode}: started once, never again: {msg}");
    }
    let _ = std::fs::remove_file(&starts);
}

/// xorshift64*: the test's own random indices, so a seed means the same draws everywhere.
fn draws(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed;
    std::iter::repeat_with(move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// `fixtures/broken/noisy`'s `huge` as the harness sees it (its 12 knobs, valid when they
/// sum to an even number), counting its validity rule's calls.
struct Huge(std::sync::atomic::AtomicU64);

impl neuron_tune_harness::Kernel for Huge {
    fn name(&self) -> &str {
        "huge"
    }
    fn params(&self) -> Vec<neuron_tune_harness::ParamSpec> {
        (0..12).map(|i| neuron_tune_harness::ParamSpec::int(&format!("p{i:02}"), 0, "")).collect()
    }
    fn validate(&self, p: &Params, _: &Shape, _: &neuron_sim::Chip) -> Result<(), String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (knob_sum(p) % 2 == 0).then_some(()).ok_or_else(|| "odd".into())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        Just(Shape::new(&[])).boxed()
    }
    fn tensors(&self, _: &Shape) -> Vec<neuron_tune_harness::TensorSpec> {
        vec![]
    }
    fn run(
        &self,
        _: &mut neuron_sim::Nc,
        _: &Params,
        _: &Shape,
        _: &[neuron_sim::Hbm],
    ) -> neuron_sim::SimResult<()> {
        Ok(())
    }
    fn reference(&self, _: &Shape, _: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![]
    }
    fn work(&self, _: &Shape) -> neuron_tune_harness::Work {
        neuron_tune_harness::Work::default()
    }
}

/// The sum of a configuration's integer values (`huge`'s knobs).
fn knob_sum(p: &Params) -> i64 {
    p.0.values().map(|v| if let ParamValue::Int(i) = v { *i } else { 0 }).sum()
}

/// A space too large to enumerate is never walked: `list` counts its valid variants from a
/// bounded sample, `bench --params` measures one variant of it, and configurations drawn
/// by index are validated by the harness. (Bounded in calls, not in seconds: a walk of
/// 10¹² configurations would never end, and a test's wall time is the machine's.)
#[test]
fn a_space_of_ten_to_the_twelve_lists_samples_and_benches_at_once() {
    let (code, out, err) = noisy(&["list"]);
    assert_eq!(code, 0, "{err}");
    let huge = events(&out, "list")[0]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "huge")
        .cloned()
        .unwrap();
    let space: Space = serde_json::from_value(huge["space"].clone()).unwrap();
    assert_eq!(space.len(), 1_000_000_000_000);
    let count = &huge["valid_variants"]["small"];
    assert_eq!(count["exact"], false);
    let valid = count["valid"].as_u64().unwrap();
    assert!((valid as f64 / 1e12 - 0.5).abs() < 0.05, "about half are valid: {count}");
    // The count is, to the configuration, the harness's estimate for this space and rule,
    // and that estimate asks the rule at most `COUNT_LIMIT` + 1 times (counted here, in this
    // process, on the same rule).
    let kernel = Huge(Default::default());
    let mut config = neuron_tune_harness::space::KernelConfig::of(&kernel);
    config.space = space.0.clone();
    let small = Shape::new(&[("rows", 256), ("cols", 512)]);
    let estimate = config.count_valid(&kernel, &small, &neuron_sim::Chip::trn2());
    let calls = kernel.0.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((estimate.valid, estimate.exact), (valid, false), "list's count: {count}");
    // The sample, and one more for whether the default is valid (`default_valid`).
    let limit = neuron_tune_harness::space::COUNT_LIMIT + 1;
    assert!(calls <= limit, "{calls} validity calls to count a space of 10^12 (at most {limit})");

    // One variant of it, by its parameters (the others at their defaults).
    let (code, out, err) = noisy(&["bench", "--kernel", "huge", "--params", "p00=3,p01=1"]);
    assert_eq!(code, 0, "{err}");
    let benched = events(&out, "bench");
    assert_eq!(benched.len(), 1, "{out}");
    let params: Params = serde_json::from_value(benched[0]["params"].clone()).unwrap();
    let mut expected = Params::new().with("p00", 3).with("p01", 1);
    for i in 2..12 {
        expected = expected.with(&format!("p{i:02}"), 0);
    }
    assert_eq!(params, expected);

    // 1 000 distinct valid configurations drawn uniformly, validated by the harness: each
    // verdict is the rule's, accepted or refused.
    let exe = build_broken("noisy").unwrap();
    let mut w = Worker::start(&exe);
    let mut seen = std::collections::BTreeSet::new();
    let mut valid: Vec<Params> = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    let mut indices = draws(7).map(|r| r % space.len());
    let mut id = 1;
    while valid.len() < 1000 {
        let batch: Vec<Params> = indices
            .by_ref()
            .filter(|i| seen.insert(*i))
            .take(256)
            .map(|i| space.get(i).unwrap())
            .collect();
        let req = RequestBody::Validate {
            kernel: "huge".into(),
            shape: ShapeRef::Named("small".into()),
            configs: batch.clone(),
            chip: ChipSpec::builtin("trn2"),
        };
        let ResponseBody::Validate { verdicts } = w.result(id, req) else { panic!() };
        id += 1;
        assert_eq!(verdicts.len(), batch.len(), "a verdict per configuration");
        for (p, v) in batch.iter().zip(&verdicts) {
            assert_eq!(v.is_none(), knob_sum(p) % 2 == 0, "{p}: {v:?}");
            if v.is_none() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        valid.extend(batch.into_iter().zip(verdicts).filter(|(_, v)| v.is_none()).map(|(p, _)| p));
    }
    assert!(accepted > 0 && refused > 0, "{accepted} accepted, {refused} refused");
    valid.truncate(1000);
    let distinct: std::collections::BTreeSet<String> =
        valid.iter().map(|p| p.to_string()).collect();
    assert_eq!(distinct.len(), 1000);
}

/// A harness that crashes while starting up (before its handshake) is started once more,
/// like a request that crashes is retried; one that crashes twice stops the command with
/// exit 4, and is never an answer about the request that started it: a tuning run keeps
/// no evaluation of it and resumes to the result of a run that never crashed.
#[test]
fn a_harness_crashing_at_start_up_is_started_again_then_stops_the_command() {
    let log = std::env::temp_dir().join(format!("neuron-tune-starts-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let log_s = log.to_str().unwrap();
    let starts = || std::fs::read_to_string(&log).unwrap_or_default().lines().count();
    let crashing =
        |which: &'static str| [("NOISY_START_LOG", log_s), ("NOISY_CRASH_STARTS", which)];

    // One worker (`-j 1`): its first start crashes, the second serves; the command never
    // notices.
    let (code, out, err) = noisy_env(&["list", "--kernel", "many", "-j", "1"], &crashing("1"));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"many\""), "{out}");
    assert_eq!(starts(), 2, "started again once");

    // Both crash: exit 4, the harness's failure in words, and no third start.
    std::fs::remove_file(&log).unwrap();
    let (code, _, err) = noisy_env(&["list", "--kernel", "many", "-j", "1"], &crashing("1,2"));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("failed twice while starting up"), "{err}");
    assert!(err.contains("SIGABRT"), "how it died is said: {err}");
    assert_eq!(starts(), 2);

    // In a tuning run the second job slot's worker starts with the run's first proposals
    // (slowed, so both slots take one): both of its starts crash. The run stops with exit 4
    // and journals nothing about the proposal that was waiting for it.
    std::fs::remove_file(&log).unwrap();
    let seed = "5151";
    let journal = neuron_tune_tests::root().join(format!(
        "target/e2e/neuron-tune/journals/tune-broken-noisy.many-small-cols512-rows256-trn2-default-{seed}.jsonl"
    ));
    let _ = std::fs::remove_file(&journal);
    let tune = ["tune", "--kernel", "many", "--budget", "12", "--seed", seed, "-j", "2"];
    let mut env = crashing("2,3").to_vec();
    env.push(("NOISY_SLEEP_MS", "200"));
    let (code, _, err) = noisy_env(&tune, &env);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("failed twice while starting up"), "{err}");
    assert_eq!(starts(), 3, "the first worker, and the second slot's two tries");
    let journaled = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(
        !journaled.contains("crash") && !journaled.contains("starting up"),
        "a start-up crash is no evaluation: {journaled}"
    );

    // Resumed, it ends where a run that never crashed ends.
    let mut resume = tune.to_vec();
    resume.push("--resume");
    let (code, out, err) = noisy_env(&resume, &[]);
    assert_eq!(code, 0, "{err}");
    let resumed = events(&out, "tune").pop().unwrap();
    std::fs::remove_file(&journal).unwrap();
    let (code, out, err) = noisy_env(&tune, &[]);
    assert_eq!(code, 0, "{err}");
    let whole = events(&out, "tune").pop().unwrap();
    for field in ["best_params", "best_time", "evaluations", "best_so_far"] {
        assert_eq!(resumed[field], whole[field], "{field}");
    }
    let _ = std::fs::remove_file(&log);
}

/// A kernel that says it started (a file `started` in `$SHARED_PATH_SIGNALS`), waits for
/// the test's `go` there, then aborts its worker: on the retry too.
const STARTS_WAITS_ABORTS: &str = r#"
fn body(_: &mut Nc, _: &Params, _: &Shape, _: Hbm, _: Hbm) -> SimResult<()> {
    let dir = std::path::PathBuf::from(std::env::var_os("SHARED_PATH_SIGNALS").unwrap());
    std::fs::write(dir.join("started"), "").unwrap();
    let start = std::time::Instant::now();
    while !dir.join("go").exists() && start.elapsed() < std::time::Duration::from_secs(600) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::process::abort()
}
"#;

const CORRECT: &str = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let pool = nc.sbuf_pool("io", p.uint("bufs")? as u32);
    correct(nc, p, sh, x, y, pool)
}
"#;

/// cargo puts the harness of every workspace built into one target dir at one path
/// (`<target-dir>/debug/<bin>`), and a build of another workspace puts its binary there.
/// A command's workers run what its own build produced, for as long as it runs: here the
/// worker that replaces a crashed one starts after another crate's harness of the same name
/// was built, and still runs the crashing kernel. (It used to start the other crate's
/// binary and take its answer: the tests' copies of the fixture workspace, built in
/// parallel, ran each other's kernels.)
#[test]
fn a_worker_started_after_another_workspace_s_build_runs_this_workspace_s_harness() {
    const BIN: &str = "harness-shared-path";
    let kernel_crate = |name: &str, body: &str| {
        let dir = scratch_dir(name);
        double_crate(&dir, name, "{ bufs = [1, 2] }", body, true);
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(&manifest, text.replace(&format!("harness-{name}"), BIN)).unwrap();
        manifest
    };
    let aborts = kernel_crate("shared-path-aborts", STARTS_WAITS_ABORTS);
    let other = kernel_crate("shared-path-other", CORRECT);
    // Puts the other crate's binary at cargo's path (the first time, its build).
    let build_other = || {
        let status = cargo()
            .args(["build", "-q", "--bin", BIN, "--profile", "dev", "--manifest-path"])
            .arg(&other)
            .arg("--target-dir")
            .arg(test_target_dir())
            .status()
            .unwrap();
        assert!(status.success());
    };
    build_other();
    let signals = scratch_dir("shared-path-signals");
    let file = |name: &str| std::fs::File::create(signals.join(name)).unwrap();
    let bench = [
        "bench",
        "--kernel",
        "double",
        "--shape",
        "small",
        "-j",
        "1",
        "--timeout",
        "600",
        "--message-format",
        "json",
        "--manifest-path",
        aborts.to_str().unwrap(),
    ];
    let mut child = cli_command(&bench)
        .env("SHARED_PATH_SIGNALS", &signals)
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(signals.join(name)).unwrap_or_default();
    // Its one worker runs the kernel, which waits.
    let deadline = Instant::now() + Duration::from_secs(600);
    while !signals.join("started").exists() {
        let exited = child.try_wait().unwrap();
        assert!(exited.is_none() && Instant::now() < deadline, "{exited:?}\n{}", read("stderr"));
        std::thread::sleep(Duration::from_millis(20));
    }
    build_other();
    std::fs::write(signals.join("go"), "").unwrap();
    let code = child.wait().unwrap().code();
    let (out, err) = (read("stdout"), read("stderr"));
    // The worker started for the retry ran the same kernel: a crash again, reported.
    assert_eq!(code, Some(4), "{out}\n{err}");
    assert!(events(&out, "bench").is_empty(), "{out}");
    let failed = events(&out, "variant_failed");
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(failed[0]["kind"], "crashed", "{out}");
    assert_eq!(events(&out, "worker_started").len(), 2, "{out}");
}
