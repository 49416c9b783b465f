//! `tune` runs stopped and continued: killed, interrupted (SIGINT, SIGTERM, SIGHUP, a stop
//! delivered twice), resumed with and without their seed, and the journals `--resume`
//! refuses (another build of the kernel, an edited chip file).

use cargo_neuron_tune::exit::Exit;
use neuron_tune_tests::{
    broken_manifest, cli, cli_command, cli_env, events, final_event, journal_lines, params_text,
    root, tune_args,
};
use serde_json::Value;
use std::time::{Duration, Instant};

#[test]
fn a_killed_tuning_run_resumes_without_repeating_an_evaluation() {
    let whole = tuned("4242", &[]);
    assert_eq!(whole["evaluations"], 24);
    assert_eq!((whole["seed"].as_u64(), whole["strategy"].as_str()), (Some(4242), Some("default")));
    let journal = whole["journal"].as_str().unwrap().to_string();

    // The same run, slowed down and killed (SIGKILL) once a few evaluations are journaled.
    assert_eq!(journal, journal_of("4242"));
    let mut child = slowed_run("4242", 5, false);
    child.kill().unwrap();
    child.wait().unwrap();
    let before = journal_lines(&journal).len();
    assert!(before < 24, "killed mid-way ({before} evaluations)");

    let resumed = tuned("4242", &["--resume"]);
    for field in ["best_params", "best_time", "evaluations", "best_so_far"] {
        assert_eq!(resumed[field], whole[field], "{field}");
    }
    // Every evaluation is in the journal exactly once.
    let lines = journal_lines(&journal);
    let mut ns: Vec<u64> = lines.iter().map(|l| l["n"].as_u64().unwrap()).collect();
    ns.sort();
    assert_eq!(ns, (0..24).collect::<Vec<u64>>(), "no evaluation repeated or lost");

    // The winner is in the crate's tuned database.
    let db = root().join("fixtures/broken/noisy/neuron-tune.tuned.toml");
    let text = std::fs::read_to_string(&db).unwrap();
    assert!(text.contains("kernel = \"many\""), "{text}");
}

#[test]
fn ctrl_c_stops_a_tuning_run_keeps_its_journal_and_says_how_to_resume() {
    stopped_by_a_signal_keeps_its_journal_and_resumes(&[libc::SIGINT], "77");
}

/// GNU `timeout` and CI runners signal the process and then its process group: the same
/// stop arrives twice within milliseconds. It is one clean stop (the journal kept, how to
/// resume said), not "Ctrl-C again", which quits at once without a word.
///
/// The second signal must come after the first is handled and before the tool has
/// finished stopping on its own. Sent one after the other to a running tool, it often did
/// not (taken with the first while that was still pending, or after the clean stop was
/// printed), and the test passed without the debounce. So the tool and its workers are
/// held stopped (SIGSTOP to their process group) while two stop signals are sent, and then
/// continued: the tool handles both at once, before anything (a worker's answer) wakes it
/// to finish stopping. They are SIGINT and SIGTERM, since a process holds one pending
/// signal of each kind (two SIGINTs would be one); the tool takes all three as the stop.
#[test]
fn a_stop_delivered_twice_at_once_is_one_clean_stop() {
    stopped_by_a_signal_keeps_its_journal_and_resumes(&[libc::SIGINT, libc::SIGTERM], "79");
}

/// SIGTERM is how CI cancels a job (and `timeout` stops a command): the same clean stop.
#[test]
fn sigterm_stops_a_tuning_run_as_ctrl_c_does() {
    stopped_by_a_signal_keeps_its_journal_and_resumes(&[libc::SIGTERM], "78");
}

/// SIGHUP (the terminal closed: a dropped ssh session) is the same clean stop, from the
/// first evaluation on: the interrupted exit code, the evaluations finished kept in the
/// journal, and `--resume` ends where an uninterrupted run does, evaluating nothing twice.
#[test]
fn sighup_stops_a_tuning_run_that_resumes_as_if_never_stopped() {
    let seed = "83";
    let journal = journal_of(seed);
    let _ = std::fs::remove_file(&journal);
    let whole = tuned(seed, &[]);
    assert_eq!(whole["journal"].as_str(), Some(journal.as_str()));
    // Each line is an evaluation's number, parameters and results (no clock): the same
    // evaluation gives the same line in every run of the seed.
    let uninterrupted = journal_lines(&journal);
    assert_eq!(uninterrupted.len(), 24);
    let numbers = |lines: &[Value]| -> Vec<u64> {
        let mut ns: Vec<u64> = lines.iter().map(|l| l["n"].as_u64().unwrap()).collect();
        ns.sort();
        ns
    };

    let child = slowed_run(seed, 1, false);
    send(child.id() as libc::pid_t, libc::SIGHUP);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(Exit::Interrupted.code().into()), "{err}");
    assert!(err.contains("interrupted") && err.contains("--resume"), "{err}");
    // The command that continues it is the run's own, with --resume (its seed given).
    let resume = err.lines().find(|l| l.trim_start().starts_with("cargo neuron-tune tune"));
    let resume = resume.unwrap_or_else(|| panic!("no resume command in: {err}"));
    assert!(
        resume.contains(&format!("--seed {seed}")) && resume.ends_with(" --resume"),
        "{resume}"
    );
    let kept = journal_lines(&journal);
    assert!((1..24).contains(&kept.len()), "{} evaluations kept", kept.len());
    let mut distinct = numbers(&kept);
    distinct.dedup();
    assert_eq!(distinct.len(), kept.len(), "each evaluation journaled once: {kept:?}");
    for line in &kept {
        assert!(uninterrupted.contains(line), "not an evaluation of the uninterrupted run: {line}");
    }

    let resumed = tuned(seed, &["--resume"]);
    for field in ["best_params", "best_time", "evaluations", "best_so_far"] {
        assert_eq!(resumed[field], whole[field], "{field}");
    }
    // The evaluations kept were not run again (each number once), and the journal ends as
    // the uninterrupted run's, the kept lines first, as they were.
    let lines = journal_lines(&journal);
    assert_eq!(numbers(&lines), (0..24).collect::<Vec<u64>>(), "nothing repeated, nothing lost");
    assert_eq!(lines[..kept.len()], kept[..]);
    for line in &lines {
        assert!(uninterrupted.contains(line), "not an evaluation of the uninterrupted run: {line}");
    }
}

/// `tune_args(seed, extra)` run to its end (exit 0): its final event.
fn tuned(seed: &str, extra: &[&str]) -> Value {
    let args = tune_args(seed, extra);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = cli_env(&a, &[]);
    assert_eq!(code, 0, "{err}");
    final_event(&out)
}

/// The journal of `tune_args(seed)`'s run.
fn journal_of(seed: &str) -> String {
    let journal = root().join(format!(
        "target/e2e/neuron-tune/journals/tune-broken-noisy.many-small-cols512-rows256-trn2-default-{seed}.jsonl"
    ));
    journal.to_str().unwrap().to_string()
}

/// `tune_args(seed)`'s run started afresh and slowed down (150 ms a variant), once it has
/// journaled `evaluations`. `own_group`: in a process group of its own, which its workers
/// join (to stop them all at once).
fn slowed_run(seed: &str, evaluations: usize, own_group: bool) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let args = tune_args(seed, &[]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let journal = journal_of(seed);
    // Removed before the run starts: removed after, it could take lines the run wrote.
    let _ = std::fs::remove_file(&journal);
    let mut command = cli_command(&a);
    if own_group {
        command.process_group(0);
    }
    let child = command
        .env("NOISY_SLEEP_MS", "150")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while journal_lines(&journal).len() < evaluations {
        assert!(start.elapsed() < Duration::from_secs(120), "the run never journaled");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Send `signal` to `pid` (a process group: `-pgid`).
fn send(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of this process.
    let sent = unsafe { libc::kill(pid, signal) };
    assert_eq!(sent, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
}

fn stopped_by_a_signal_keeps_its_journal_and_resumes(signals: &[libc::c_int], seed: &str) {
    let journal = journal_of(seed);
    let child = slowed_run(seed, 5, signals.len() > 1);
    let pid = child.id() as libc::pid_t;
    // The signals to the tool alone (a terminal would send SIGINT to the workers too).
    let signalled = Instant::now();
    if let [signal] = signals {
        send(pid, *signal);
    } else {
        send(-pid, libc::SIGSTOP);
        let mut status = 0;
        // SAFETY: waitpid(2) writes the one c_int it is given; the child is not reaped
        // (WUNTRACED: it returns when the child stops), so `wait_with_output` still can.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        assert_eq!(waited, pid, "{}", std::io::Error::last_os_error());
        assert!(libc::WIFSTOPPED(status), "the run ended instead of stopping: {status:#x}");
        // Held pending, all of them, until the group continues.
        for &signal in signals {
            send(pid, signal);
        }
        send(-pid, libc::SIGCONT);
    }
    let out = child.wait_with_output().unwrap();
    // From the signal to the exit (not the build and the evaluations before it): the
    // requests in flight (one 150 ms variant per worker) are abandoned. Generous, for a
    // loaded machine; a stop that waits on something (its workers, a timeout) exceeds it.
    // A run that went on to its budget instead is the journal's count below.
    let stopping = signalled.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(Exit::Interrupted.code().into()), "{err}");
    assert!(err.contains("interrupted") && err.contains("--resume"), "{err}");
    assert!(stopping < Duration::from_secs(20), "stopped promptly: {stopping:?} after the signal");
    let kept = journal_lines(&journal).len();
    assert!((5..24).contains(&kept), "{kept} evaluations kept");

    assert_eq!(tuned(seed, &["--resume"])["evaluations"], 24);
    let mut ns: Vec<u64> =
        journal_lines(&journal).iter().map(|l| l["n"].as_u64().unwrap()).collect();
    ns.sort();
    assert_eq!(ns, (0..24).collect::<Vec<u64>>(), "nothing repeated, nothing lost");
    if signals.len() > 1 {
        return;
    }
    // Resumed with a smaller budget: the start of the journal is replayed, and the status
    // says so, and which budget continues it.
    let args: Vec<String> = tune_args(seed, &["--resume"])
        .into_iter()
        .map(|a| if a == "24" { "10".into() } else { a })
        .filter(|a| a != "--message-format" && a != "json") // status lines say it
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = cli_env(&a, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("--budget 10 replays only their start"), "{err}");
    assert!(err.contains("(--budget 24 or more continues the journal)"), "{err}");
}

#[test]
fn resume_without_a_seed_continues_the_latest_journal_of_the_run() {
    // `--strategy random` on `many`: no other test here journals that run.
    let run = |extra: &[&str]| {
        let manifest = broken_manifest("noisy");
        let mut a = vec!["tune", "--kernel", "many", "--strategy", "random", "--budget", "6"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--manifest-path", &manifest, "--message-format", "json"]);
        let (code, out, err) = cli_env(&a, &[]);
        assert_eq!(code, 0, "{err}");
        (final_event(&out), err)
    };
    let (older, _) = run(&["--seed", "31"]);
    std::thread::sleep(Duration::from_millis(20));
    let (latest, _) = run(&["--seed", "32"]);
    let lines = journal_lines(latest["journal"].as_str().unwrap()).len();
    let (resumed, _) = run(&["--resume"]);
    assert_eq!(resumed["seed"], 32, "the latest journal's seed, not {older}");
    assert_eq!(resumed["journal"], latest["journal"]);
    for field in ["best_params", "best_time", "best_so_far"] {
        assert_eq!(resumed[field], latest[field], "{field}");
    }
    // Everything came from the journal: nothing was evaluated (or journaled) again.
    assert_eq!(journal_lines(resumed["journal"].as_str().unwrap()).len(), lines);
}

#[test]
fn a_journal_of_another_build_of_the_kernel_is_not_resumed() {
    // Interrupt, edit the kernel, resume: the journal's times are the old program's. They
    // must not be replayed as this build's (the winner would be recorded at a time it no
    // longer has); the run starts afresh and says why.
    let dir = neuron_tune_tests::two_kernel_crate("resume-edit", 3.0);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let tune = |extra: &[&str]| {
        let mut a = vec!["tune", "--manifest-path", m, "--kernel", "triple", "--budget", "2"];
        a.extend_from_slice(&["--seed", "5", "--message-format", "json"]);
        a.extend_from_slice(extra);
        cli(&a)
    };
    let (code, out, err) = tune(&[]);
    assert_eq!(code, 0, "{err}");
    let before = final_event(&out)["best_time"].as_f64().unwrap();
    // The edit: each tile is also multiplied by 1 (the same values; a slower program).
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let once = "nc.tensor_scalar(v, v, (Alu::Multiply, k), None)?;";
    assert!(src.contains(once), "the scratch crate's body changed shape");
    let by_one = "nc.tensor_scalar(v, v, (Alu::Multiply, Scalar::Imm(1.0)), None)?;";
    std::fs::write(&main, src.replace(once, &format!("{once} {by_one}"))).unwrap();
    let (code, out, err) = tune(&["--resume"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("written by another build of the kernel crate"), "{err}");
    assert!(!err.contains("Resuming"), "{err}");
    let after = final_event(&out);
    let best = after["best_time"].as_f64().unwrap();
    assert!(best > before, "the edited kernel is slower: {before} µs then {best} µs");
    // The time recorded is the edited program's, as a bench of the winner measures it.
    let params = params_text(&after["best_params"]);
    let (code, bench, err) = cli(&[
        "bench",
        "--manifest-path",
        m,
        "--kernel",
        "triple",
        "--params",
        &params,
        "--message-format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(events(&bench, "bench")[0]["time_us"].as_f64().unwrap(), best, "{bench}");
}

#[test]
fn a_journal_of_an_edited_chip_file_is_not_resumed() {
    // The journal is named by the chip's name; a chip TOML edited since is another chip,
    // whose times the journal does not hold. The resumed run must measure again.
    let file = neuron_tune_tests::scratch_dir("resume-chip").join("slowvec.toml");
    let (code, toml, err) = cli(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let toml = toml.replace("name = \"trn2\"", "name = \"slowvec\"");
    std::fs::write(&file, &toml).unwrap();
    let manifest = broken_manifest("noisy");
    let tune = |extra: &[&str]| {
        let mut a = vec!["tune", "--manifest-path", &manifest, "--kernel", "many"];
        a.extend_from_slice(&["--strategy", "random", "--budget", "3", "--seed", "43"]);
        a.extend_from_slice(&["--chip", file.to_str().unwrap(), "--message-format", "json"]);
        a.extend_from_slice(extra);
        let (code, out, err) = cli(&a);
        assert_eq!(code, 0, "{err}");
        (final_event(&out), err)
    };
    let (first, _) = tune(&[]);
    // The same file: resumed, nothing measured again.
    // (A run that started afresh would delete the journal and write it again.)
    let written =
        |e: &Value| std::fs::metadata(e["journal"].as_str().unwrap()).unwrap().modified().unwrap();
    let first_written = written(&first);
    let (again, err) = tune(&["--resume"]);
    assert!(!err.contains("not resumed"), "{err}");
    assert_eq!(written(&again), first_written, "the journal was resumed, not written again");
    assert_eq!((&again["best_time"], &again["journal"]), (&first["best_time"], &first["journal"]));
    // VectorE at half its clock: the same name, another chip.
    let slower = toml.replace("vector_ghz = 0.96", "vector_ghz = 0.48");
    assert_ne!(slower, toml, "the chip TOML names VectorE's clock where this test expects");
    std::fs::write(&file, slower).unwrap();
    let (edited, err) = tune(&["--resume"]);
    assert!(err.contains("another kernel, shape, chip (or chip file content)"), "{err}");
    assert_eq!(edited["journal"], first["journal"], "the same journal, replaced");
    // Every time in the replaced journal is the slower chip's: none equals a first-run one.
    let times = |e: &Value| -> Vec<f64> {
        journal_lines(e["journal"].as_str().unwrap())
            .iter()
            .filter_map(|l| l["time_us"].as_f64())
            .collect()
    };
    let (now, before) = (times(&edited), first["best_time"].as_f64().unwrap());
    assert!(!now.is_empty());
    assert!(now.iter().all(|&t| t > before), "{now:?} vs {before}");
}

#[test]
fn sigterm_to_the_tool_alone_stops_the_harness_build_at_once() {
    // CI cancelling a job (or `timeout`) signals the tool, not cargo: the tool must stop
    // cargo rather than wait for a long build to end. A stand-in for cargo whose builds
    // take a minute (everything else goes to the real cargo).
    use std::os::unix::fs::PermissionsExt;
    let dir = neuron_tune_tests::scratch_dir("slow-cargo");
    let real = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let script = dir.join("cargo");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = build ]; then touch '{}'; exec sleep 60; fi\nexec '{real}' \"$@\"\n",
            dir.join("building").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args = tune_args("3", &[]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = cli_command(&a)
        .env("CARGO", &script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !dir.join("building").exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no build started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(start.elapsed() < Duration::from_secs(20), "waited {:?}: {err}", start.elapsed());
    assert_eq!(out.status.code(), Some(130), "{err}");
}

/// Ctrl-C (SIGINT to the tool's process group, its workers included, as a terminal sends
/// it) while `tune` is on its second kernel, after the first finished: the first kernel's
/// winner stays in the crate's tuned database, its write is said (`Wrote …`) with the table
/// of what finished, and the command that continues the run is printed; pasted into a
/// shell, it resumes the first kernel from its journal and tunes the second.
#[test]
fn ctrl_c_on_the_second_kernel_keeps_the_first_kernels_winner_and_says_how_to_resume() {
    use std::os::unix::process::CommandExt;
    let dir = neuron_tune_tests::two_kernel_crate("interrupt-two-kernels", 3.0);
    // `triple` sleeps in its body when told to, so the run is surely in it when stopped.
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let run = "{ scaled(nc, p, s, t[0], t[1], Scalar::Imm(3.0)) }";
    assert!(src.contains(run), "the scratch crate's `triple` changed shape");
    let sleepy = "{ if let Some(ms) = std::env::var(\"TRIPLE_SLEEP_MS\").ok().and_then(|v| \
                  v.parse().ok()) { std::thread::sleep(std::time::Duration::from_millis(ms)); } \
                  scaled(nc, p, s, t[0], t[1], Scalar::Imm(3.0)) }";
    std::fs::write(&main, src.replace(run, sleepy)).unwrap();
    let manifest = dir.join("Cargo.toml");
    let db = dir.join("neuron-tune.tuned.toml");
    let args = ["tune", "--manifest-path", manifest.to_str().unwrap(), "--shape", "small"];
    let args = [&args[..], &["--budget", "2", "--seed", "7", "-j", "1"]].concat();
    let child = cli_command(&args)
        .process_group(0)
        .env("TRIPLE_SLEEP_MS", "5000")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `double` comes first (the harness registers it first); its winner is saved before
    // `triple` starts.
    let start = Instant::now();
    while !std::fs::read_to_string(&db).is_ok_and(|t| t.contains("kernel = \"double\"")) {
        assert!(start.elapsed() < Duration::from_secs(300), "double was never recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    send(-(child.id() as libc::pid_t), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let (stdout, err) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(Exit::Interrupted.code().into()), "{stdout}\n{err}");
    assert!(err.contains(&format!("   Wrote {} (1 record of this run", db.display())), "{err}");
    assert!(err.contains("the winners of the 1 kernel shape finished are recorded"), "{err}");
    let table: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  double ")).collect();
    assert!(!table.is_empty(), "the finished kernel's row: {stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("  triple ")), "{stdout}");
    let text = std::fs::read_to_string(&db).unwrap();
    assert!(text.contains("kernel = \"double\"") && !text.contains("kernel = \"triple\""));
    // The command that continues it: the run's own, with --resume.
    let resume = err.lines().map(str::trim).find(|l| l.starts_with("cargo neuron-tune tune"));
    let resume = resume.unwrap_or_else(|| panic!("no resume command in: {err}"));
    assert!(resume.contains("--seed 7") && resume.ends_with(" --resume"), "{resume}");
    let (code, _, err) = neuron_tune_tests::run_printed(resume);
    assert_eq!(code, 0, "{resume}\n{err}");
    assert!(err.contains("Resuming double from "), "double's journal continues: {err}");
    let text = std::fs::read_to_string(&db).unwrap();
    assert!(text.contains("kernel = \"double\"") && text.contains("kernel = \"triple\""), "{text}");
}
