//! Every kind of bad input and fault, one after another on one store: each must end with
//! its documented exit code and a message that says what went wrong, and must never lose a
//! result that was finished before it.
//!
//! Data-driven like `bad_input.rs`, but each case also proves the store kept what it held:
//! the entries of a seed run, read before the case, are byte-identical after it (an entry
//! the case damaged on purpose must come back repaired, byte-identical too), and a run that
//! failed part-way kept the results it finished (rerun, they are served from the store).
//! The cases run in sequence in one test: several share files (the seed's entries, the
//! scratch crate) and two mount or lock the store.

use neuron_tune_tests::{
    broken_manifest, cli_command, cli_env, events, root, scratch_dir, test_target_dir,
    two_kernel_crate,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The store entry file of a `bench` event (built-in chip trn2).
fn entry_of(bench: &Value) -> PathBuf {
    let hash = bench["program_hash"].as_str().expect("bench events name their program");
    assert_eq!(bench["chip"], "trn2");
    let key = cargo_neuron_tune::store::Store::key(hash, "trn2", "bench");
    test_target_dir().join("neuron-tune/bench").join(&key[..2]).join(format!("{key}.json"))
}

/// The entry files of every `bench` event of a JSON stdout, with their bytes.
fn entries(stdout: &str) -> BTreeMap<PathBuf, Vec<u8>> {
    events(stdout, "bench")
        .iter()
        .map(|b| {
            let p = entry_of(b);
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

/// Every entry of `kept` is still there, byte for byte.
fn assert_kept(what: &str, kept: &BTreeMap<PathBuf, Vec<u8>>) {
    for (path, bytes) in kept {
        let now = std::fs::read(path)
            .unwrap_or_else(|e| panic!("{what}: lost store entry {}: {e}", path.display()));
        assert!(&now == bytes, "{what}: store entry {} changed", path.display());
    }
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--message-format", "json"]);
    cli_env(&a, env)
}

/// Run a case: exit code and words (on stderr), then the seed's entries still there.
#[track_caller]
fn case(
    what: &str,
    args: &[&str],
    env: &[(&str, &str)],
    code: i32,
    words: &[&str],
    kept: &BTreeMap<PathBuf, Vec<u8>>,
) -> (String, String) {
    let (got, out, err) = run(args, env);
    assert_eq!(got, code, "{what}: exit code\nstderr:\n{err}");
    // Errors are on stderr; a failed check's verdict, shrunk case and message are results,
    // on stdout (here its JSON event), and so is a variant's failure in a bench (its
    // `variant_failed` event: in JSON mode stderr has no human lines).
    let results = matches!(args.first(), Some(&"check") | Some(&"bench"));
    let said = if results && code == 4 { &out } else { &err };
    for w in words {
        assert!(said.contains(w), "{what}: output lacks {w:?}\nstdout:\n{out}\nstderr:\n{err}");
    }
    assert_kept(what, kept);
    (out, err)
}

/// A crate whose `triple` kernel's reference is rewritten by `edit` (its own workspace).
fn crate_with_reference(name: &str, reference: &str) -> String {
    let dir = two_kernel_crate(name, 3.0);
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let original = "{ vec![i[0].iter().map(|v| 3.0 * v).collect()] }";
    assert!(src.contains(original), "the scratch crate's reference changed shape");
    std::fs::write(&main, src.replace(original, reference)).unwrap();
    dir.join("Cargo.toml").to_string_lossy().into_owned()
}

/// A tmpfs mounted over a directory for the life of the guard (needs root).
struct Mount(PathBuf);

impl Mount {
    fn full_tmpfs(dir: &Path) -> Option<Mount> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4k", "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let m = Mount(dir.to_path_buf());
        // Fill it: the next write finds no space, as on a full disk.
        let _ = std::fs::write(dir.join("fill"), vec![0u8; 64 * 1024]);
        Some(m)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn every_fault_exits_with_its_code_says_why_and_keeps_what_was_stored() {
    let noisy = broken_manifest("noisy");
    let n = noisy.as_str();
    let k = "neuron-fixtures-kernels";

    // The seed: results finished before any of the faults below.
    let (code, seed_out, err) =
        run(&["bench", "--manifest-path", n, "--kernel", "double", "--all-variants"], &[]);
    assert_eq!(code, 0, "{err}");
    let seed = entries(&seed_out);
    assert_eq!(seed.len(), 4, "double has 4 variants");
    let mut kinds = 0;

    // Bad command lines and configuration: exit 2, nothing measured, nothing lost.
    let scratch = scratch_dir("faults");
    let bad_chip = scratch.join("bad-chip.toml");
    let (_, chip_toml, _) = cli_env(&["chip", "trn2"], &[]);
    std::fs::write(&bad_chip, chip_toml.replace("[dma]\n", "[dma]\nqueues_per_engine = 16\n"))
        .unwrap();
    let bad_chip = bad_chip.to_str().unwrap();
    let bad_toml = broken_manifest("bad_toml");
    let config_cases: &[(&str, Vec<&str>, Vec<&str>)] = &[
        (
            "a shape no kernel has",
            vec!["bench", "-p", k, "--shape", "nosuch"],
            vec!["--shape nosuch", "gemm: qwen3_mlp_up, small, medium"],
        ),
        ("an unknown kernel", vec!["bench", "-p", k, "--kernel", "gemmm"], vec!["no such kernel"]),
        ("zero property cases", vec!["check", "-p", k, "--cases", "0"], vec!["--cases"]),
        ("a zero timeout", vec!["bench", "-p", k, "--timeout", "0"], vec!["--timeout"]),
        ("a zero budget", vec!["tune", "-p", k, "--budget", "0"], vec!["--budget"]),
        ("zero jobs", vec!["bench", "-p", k, "-j", "0"], vec!["--jobs"]),
        (
            // (A missing directory is made, as for every output file.)
            "a trace under a file",
            vec!["profile", "-p", k, "add", "--shape", "small", "--trace", "Cargo.toml/t.json"],
            vec!["--trace", "Cargo.toml/t.json", "parent Cargo.toml is not a directory"],
        ),
        (
            "an undeclared parameter",
            vec!["bench", "-p", k, "--kernel", "add", "--shape", "small", "--params", "nope=1"],
            vec!["--params for `add`", "nope"],
        ),
        ("an unknown chip", vec!["bench", "-p", k, "--chip", "trn9"], vec!["--chip trn9"]),
        (
            "a chip file with a field the simulator does not have",
            vec!["bench", "-p", k, "--kernel", "add", "--chip", bad_chip],
            vec![bad_chip, "queues_per_engine"],
        ),
        (
            "a bad TOML search space",
            vec!["list", "--manifest-path", &bad_toml],
            vec!["bad_toml/Cargo.toml:22:", "no parameter `tile_rows`"],
        ),
        (
            "an unknown model",
            vec!["bench", "-p", "neuron-fixtures-qwen3", "--model", "gpt5"],
            vec!["gpt5"],
        ),
    ];
    for (what, args, words) in config_cases {
        case(what, args, &[], 2, words, &seed);
        kinds += 1;
    }

    // A kernel that does not compile: exit 3 with cargo's message.
    case(
        "a compile error",
        &["bench", "--manifest-path", &broken_manifest("compile_error")],
        &[],
        3,
        &["error"],
        &seed,
    );
    kinds += 1;

    // Wrong answers that could look right: exit 4, saying exactly what is wrong.
    case(
        "a wrong result",
        &["check", "--manifest-path", &broken_manifest("wrong_result"), "--cases", "8"],
        &[],
        4,
        &["\"failure\"", "elements outside |err|"],
        &seed,
    );
    let empty_ref = crate_with_reference("faults-empty-ref", "{ let _ = i; vec![] }");
    case(
        "a reference that returns no outputs",
        &["check", "--manifest-path", &empty_ref, "--kernel", "triple", "--cases", "4"],
        &[],
        4,
        &["the reference returned 0 outputs; the kernel writes 1"],
        &seed,
    );
    let short_ref = crate_with_reference(
        "faults-short-ref",
        "{ vec![i[0].iter().skip(1).map(|v| 3.0 * v).collect()] }",
    );
    // The shrunk shape depends on proptest's shrinking and on the failures it persisted in
    // the target directory (replayed first), so the words are checked, and that the counts
    // differ by the one element the reference skips.
    let (out, _) = case(
        "a reference with a short output",
        &["check", "--manifest-path", &short_ref, "--kernel", "triple", "--cases", "4"],
        &[],
        4,
        &["the reference's output `y` has ", " elements; the tensor ["],
        &seed,
    );
    let check = events(&out, "check").pop().expect("a check event");
    let line = check["failure"]["message"].as_str().unwrap().to_string();
    let count = |after: &str| -> u64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split(' ').next().unwrap().parse().unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    assert_eq!(count("`y` has ") + 1, count("] has "), "one element short: {line}");
    kinds += 3;

    // Variants that panic, hang or kill their worker: the others finish and are kept.
    for (krate, what, words) in [
        ("panic", "a panicking variant", &["index out of bounds"][..]),
        ("hang", "a hanging variant", &["timed out after 5 s"][..]),
    ] {
        let m = broken_manifest(krate);
        let args = ["bench", "--manifest-path", &m, "--all-variants", "--timeout", "5"];
        let (out, _) = case(what, &args, &[], 4, words, &seed);
        let finished = entries(&out);
        assert_eq!(finished.len(), 1, "{what}: the other variant finished");
        assert_kept(what, &finished);
        kinds += 1;
    }
    // Tracing alone (`build`) judges a panicking variant as bench does: exit 4, the other
    // variant traced.
    let m = broken_manifest("panic");
    let args = ["build", "--manifest-path", &m, "--all-variants"];
    let (out, _) = case("a variant panicking at trace time", &args, &[], 4, &[], &seed);
    assert_eq!(events(&out, "build").len(), 1, "{out}");
    let failed = events(&out, "variant_failed");
    assert!(failed.len() == 1 && failed[0]["kind"] == "panic", "{out}");
    // A harness whose start-up code hangs: killed after --timeout (not a fixed wait) like a
    // hung request, started once more, and the kernel code's failure is exit 4, not a
    // configuration error.
    let started = std::time::Instant::now();
    case(
        "a harness that hangs at start-up",
        &["list", "--manifest-path", &broken_manifest("hang"), "--timeout", "3", "-j", "1"],
        &[("BROKEN_HANG_AT_START", "1")],
        4,
        &["broken-hang: the harness failed twice while starting up (timeout: timed out after 3 s"],
        &seed,
    );
    let waited = started.elapsed();
    assert!(waited >= std::time::Duration::from_secs(6), "two starts of 3 s: {waited:?}");
    assert!(waited < std::time::Duration::from_secs(40), "--timeout 3 bounds it: {waited:?}");
    kinds += 1;
    let many = ["bench", "--manifest-path", n, "--kernel", "many", "--all-variants", "-j", "2"];
    let (out, _) = case(
        "a worker killed by a signal",
        &many,
        &[("NOISY_ABORT_AT", "3")],
        4,
        &["killed by signal 6 (SIGABRT"],
        &seed,
    );
    assert_eq!(events(&out, "bench").len(), 499, "every other variant finished");
    // `many`'s parameters change nothing of its program: its 499 results are one entry.
    let finished = entries(&out);
    assert_eq!(finished.len(), 1);
    let (code, again, err) = run(&many, &[]);
    assert_eq!(code, 0, "{err}");
    let summary = &events(&again, "summary")[0];
    assert_eq!(
        (&summary["simulated"], &summary["cached"]),
        (&Value::from(0), &Value::from(500)),
        "what finished before the crash is served from the store: {summary}"
    );
    assert_kept("a worker killed by a signal", &finished);
    kinds += 1;
    case(
        "a worker that breaks the protocol",
        &["bench", "--force", "--manifest-path", &broken_manifest("bad_protocol")],
        &[("BAD_PROTOCOL", "wrong_id")],
        1,
        &["protocol error", "harness-bad-protocol"],
        &seed,
    );
    kinds += 1;

    // Damaged files are never used.
    let victim = seed.keys().next().unwrap().clone();
    let text = std::fs::read_to_string(&victim).unwrap();
    let edited = text.replacen("\"checksum\": \"", "\"checksum\": \"0", 1);
    assert_ne!(edited, text);
    std::fs::write(&victim, edited).unwrap();
    let double = ["bench", "--manifest-path", n, "--kernel", "double", "--all-variants"];
    let (out, _) = case(
        "a store entry edited into other valid JSON",
        &double,
        &[],
        0,
        &[victim.to_str().unwrap(), "measuring again"],
        &BTreeMap::new(),
    );
    assert_eq!(events(&out, "summary")[0]["simulated"], 1);
    assert_kept("the damaged entry is rewritten as it was", &seed);
    kinds += 1;

    match Mount::full_tmpfs(victim.parent().unwrap()) {
        Some(mount) => {
            let mut forced = double.to_vec();
            forced.push("--force");
            case(
                "a full disk under the store",
                &forced,
                &[],
                1,
                &["writing the store", "No space left on device"],
                &BTreeMap::new(),
            );
            drop(mount);
            assert_kept("a full disk under the store", &seed);
            kinds += 1;
        }
        None => eprintln!("SKIPPED the full-disk case: mounting a tmpfs needs root"),
    }

    // A store whose lock cannot be opened for writing (here a directory stands where the
    // lock file goes; a read-only target directory fails the same call) is a file that
    // could not be written: exit 1, as the full disk above, not a configuration error. In a
    // target directory of its own, so the shared store is never touched: `gate` opens the
    // store before it builds anything, so nothing is built there.
    let own = scratch_dir("faults-lock").join("target");
    let lock = own.join("neuron-tune/lock");
    std::fs::create_dir_all(&lock).unwrap();
    let baseline = root().join("fixtures/neuron-tune.baseline.toml");
    let out = std::process::Command::new(neuron_tune_tests::cli_exe())
        .args(["neuron-tune", "gate", "--baseline", baseline.to_str().unwrap(), "--target-dir"])
        .arg(&own)
        .current_dir(root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a store lock that cannot be opened: {err}");
    assert!(err.contains(&format!("opening {}", lock.display())), "{err}");
    assert_kept("a store lock that cannot be opened", &seed);
    kinds += 1;

    // A tuned database and a journal, made by a real run, then damaged.
    let mine = two_kernel_crate("faults-tuned", 3.0).join("Cargo.toml");
    let mine = mine.to_str().unwrap();
    let tune =
        ["tune", "--manifest-path", mine, "--kernel", "double", "--budget", "3", "--seed", "7"];
    let (code, tuned_out, err) = run(&tune, &[]);
    assert_eq!(code, 0, "{err}");
    let result = events(&tuned_out, "tune").pop().expect("a tune result");
    let journal = PathBuf::from(result["journal"].as_str().unwrap());
    let lines: Vec<String> =
        std::fs::read_to_string(&journal).unwrap().lines().map(String::from).collect();
    assert!(lines.len() >= 2, "{lines:?}");
    let damaged =
        lines[1].replacen("\"n\":1", "\"n\":1 ", 1).replacen("\"status\":\"", "\"status\":\"x", 1);
    assert_ne!(damaged, lines[1]);
    let mut text = lines.clone();
    text[1] = damaged;
    std::fs::write(&journal, text.join("\n") + "\n").unwrap();
    // Set-aside lines are appended (nothing is lost), so one left by an earlier run of this
    // test in the same target directory would be counted below: start without it.
    let aside = PathBuf::from(format!("{}.rejected", journal.display()));
    let _ = std::fs::remove_file(&aside);
    let mut resume = tune.to_vec();
    resume.push("--resume");
    let (out, _) = case(
        "a damaged journal line",
        &resume,
        &[],
        0,
        &[&format!("{}:2: not used", journal.display()), "made again"],
        &seed,
    );
    let resumed = events(&out, "tune").pop().unwrap();
    assert_eq!(
        (&resumed["best_params"], &resumed["best_time"]),
        (&result["best_params"], &result["best_time"]),
        "the damaged evaluation was made again, to the same end"
    );
    // The damaged line was set aside, not lost: the journal no longer holds it (a second
    // resume does not warn again), the `.rejected` file does.
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), format!("{}\n", text[1]));
    let (code, _, err) = run(&resume, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("not used"), "warned again: {err}");
    kinds += 1;

    let db = Path::new(mine).with_file_name("neuron-tune.tuned.toml");
    let text = std::fs::read_to_string(&db).unwrap();
    std::fs::write(&db, text.replacen("time_us = ", "time_us = 1", 1)).unwrap();
    case(
        "an edited tuned database",
        &["list", "--manifest-path", mine],
        &[],
        2,
        &["neuron-tune.tuned.toml", "tuned #1 (double/trn2/", "checksum does not match"],
        &seed,
    );
    case(
        "tune with an edited tuned database: refused before it searches",
        &["tune", "--manifest-path", mine, "--budget", "2"],
        &[],
        2,
        &["tuned #1 (double/trn2/", "A damaged record is never used"],
        &seed,
    );
    // A command that never reads the tuned database is not blocked by it.
    let (code, _, err) = run(&["check", "--manifest-path", mine, "--cases", "2"], &[]);
    assert_eq!(code, 0, "check does not read tuned records: {err}");
    kinds += 1;

    let baseline = scratch.join("neuron-tune.baseline.toml");
    let committed =
        std::fs::read_to_string(root().join("fixtures/neuron-tune.baseline.toml")).unwrap();
    std::fs::write(&baseline, committed.replacen("tokens_per_s = ", "tokens_per_s = 1", 1))
        .unwrap();
    case(
        "an edited baseline",
        &["baseline", "show", "--baseline", baseline.to_str().unwrap()],
        &[],
        2,
        &["neuron-tune.baseline.toml", "model #1 (", "checksum does not match"],
        &seed,
    );
    // Saving repairs a damaged entry by measuring it again; a save that would not is
    // refused before it simulates, rather than drop the entry (or every entry).
    let save = ["baseline", "save", "-p", "neuron-fixtures-qwen3", "--baseline"];
    let mut args = save.to_vec();
    args.extend([baseline.to_str().unwrap(), "--model", "qwen3_naive", "--shape", "tiny"]);
    case(
        "a baseline save that would lose a damaged entry",
        &args,
        &[],
        2,
        &[
            "model #1 (qwen3/tiny/trn2)",
            "include it (`cargo neuron-tune baseline save --model qwen3 --shape tiny --chip trn2`)",
        ],
        &seed,
    );
    std::fs::write(&baseline, format!("{committed}<<<<<<< HEAD\n")).unwrap();
    case(
        "a baseline save over a file that is not TOML (a merge conflict)",
        &args,
        &[],
        2,
        &["not replaced, so that its entries are not lost"],
        &seed,
    );
    assert_eq!(
        std::fs::read_to_string(&baseline).unwrap(),
        format!("{committed}<<<<<<< HEAD\n"),
        "left as it was"
    );
    kinds += 1;

    // Ctrl-C: finished variants are kept and the message says how to continue. The
    // entries of `many` are removed first, so that what is there after was written by this
    // run before it was interrupted.
    for path in finished.keys() {
        std::fs::remove_file(path).unwrap();
    }
    let slow =
        ["bench", "--manifest-path", n, "--kernel", "many", "--all-variants", "-j", "1", "--force"];
    let mut child = cli_command(&[&slow[..], &["--message-format", "json"]].concat())
        .env("NOISY_SLEEP_MS", "40")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once its first variant is finished (its `bench` event printed), however
    // long the build and the start took; the rest of its output read after.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut out = String::new();
    loop {
        let mut line = String::new();
        let read = stdout.read_line(&mut line).unwrap();
        assert!(read > 0, "the run ended before its first result:\n{out}");
        out.push_str(&line);
        if serde_json::from_str::<Value>(&line).is_ok_and(|v| v["event"] == "bench") {
            break;
        }
    }
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    stdout.read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    let err = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "Ctrl-C: {err}");
    assert!(err.contains("run the same command again to continue"), "{err}");
    let finished = entries(&out);
    let done = events(&out, "bench").len();
    assert!(done > 0 && done < 500, "interrupted after {done} of 500 variants");
    assert_eq!(finished.len(), 1, "written before the interrupt");
    assert_kept("Ctrl-C", &finished);
    assert_kept("Ctrl-C", &seed);
    kinds += 1;

    // Two runs on one target directory: the second waits, naming the first.
    let mut first = cli_command(&[&slow[..], &["--message-format", "json"]].concat())
        .env("NOISY_SLEEP_MS", "10")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let lock = test_target_dir().join("neuron-tune/lock");
    while !std::fs::read_to_string(&lock).unwrap_or_default().contains(&first.id().to_string()) {
        assert!(started.elapsed() < Duration::from_secs(60), "the first run never took the lock");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, err) = case(
        "a second run on the same target directory",
        &double,
        &[],
        0,
        &["Blocking waiting for pid", &first.id().to_string()],
        &seed,
    );
    assert!(err.contains("cargo-neuron-tune"), "the holder's command line: {err}");
    assert!(first.wait().unwrap().success());
    kinds += 1;

    assert!(kinds >= 20, "{kinds} kinds");
    eprintln!("{kinds} kinds of bad input and fault checked");
}
