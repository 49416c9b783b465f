//! Ctrl-C: stop cleanly, keep everything finished, say how to continue.
//!
//! SIGTERM (how CI cancels a job, and how `timeout` stops a command) and SIGHUP are taken
//! as Ctrl-C is (ctrlc's `termination` feature); the exit code is 130 for all three.
//!
//! The first Ctrl-C sets a flag: the pool stops waiting for answers and the command ends
//! with [`Exit::Interrupted`] (130, as shells report SIGINT). Every result finished by then
//! is already in the store (written atomically as it arrives) and every evaluation of a
//! search in its journal, so rerunning the command continues. Workers and cargo, in the same
//! process group, get the same SIGINT from the terminal and die of it, possibly before this
//! process's handler runs: a child's death by SIGINT is itself the interruption, so its
//! failure is never taken for a crash, a failed check or a failed build. A second Ctrl-C
//! exits at once (unless it comes within 0.5 s of the first: see [`SAME_STOP`]).

use crate::exit::{fail, Exit, Failure};
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// A child (a worker, cargo) ended by SIGINT. The terminal's Ctrl-C reaches the whole
/// process group, and a child can die of it before this process's handler has run; its
/// failure must then be taken for the interruption it is, never for a crash or a failed
/// check. Kept apart from [`INTERRUPTED`] so that it does not count as a first Ctrl-C.
static CHILD_INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// When the first signal arrived.
static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// A second signal this soon after the first is the same stop delivered twice, not a second
/// Ctrl-C: GNU `timeout` (and CI runners cancelling a job) signal the process and then its
/// process group, which holds it too. A person's second Ctrl-C comes later than this.
const SAME_STOP: std::time::Duration = std::time::Duration::from_millis(500);

/// Install the handler (once per process; a second call is ignored).
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        let first = *FIRST.get_or_init(std::time::Instant::now);
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            if first.elapsed() < SAME_STOP {
                return;
            }
            std::process::exit(Exit::Interrupted.code().into());
        }
        eprintln!("\nnote: interrupted: stopping (Ctrl-C again to quit at once)");
    });
}

/// Whether the user asked to stop (or a child died of the same Ctrl-C).
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst) || CHILD_INTERRUPTED.load(Ordering::SeqCst)
}

/// Note that a child process ended by SIGINT: from here on the command is interrupted.
pub fn child_interrupted() {
    CHILD_INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether a child's exit status is death by SIGINT, SIGTERM or SIGHUP, the signals that
/// stop this process too (noting it if so).
pub fn note_child_exit(status: std::process::ExitStatus) -> bool {
    let stopped = stopped_by_our_signals(status);
    if stopped {
        child_interrupted();
    }
    stopped
}

/// Death by SIGHUP (1), SIGINT (2) or SIGTERM (15); never on other platforms.
fn stopped_by_our_signals(status: std::process::ExitStatus) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        matches!(status.signal(), Some(1 | 2 | 15))
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        false
    }
}

/// The failure an interrupted command ends with.
pub fn failure() -> Failure {
    fail(
        Exit::Interrupted,
        "interrupted: every result finished so far is kept in the store and the journals; \
         run the same command again to continue (for `tune`, add --resume and the --seed it \
         printed)",
    )
}

/// The command line that continues this `tune` run: its own arguments, as typed after
/// `cargo neuron-tune`, with `--resume` and the run's `--seed` added where missing (a shell
/// word quoted where it needs it).
pub fn resume_command(seed: u64) -> String {
    // `args_os`: an argument that is not UTF-8 (a path) must not panic the interrupted run.
    let args: Vec<String> =
        std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    resume_command_of(&args, seed)
}

fn resume_command_of(args: &[String], seed: u64) -> String {
    // cargo runs `cargo-neuron-tune neuron-tune …`; run directly, the binary has no such word.
    let args = match args.first() {
        Some(a) if a == "neuron-tune" => &args[1..],
        _ => args,
    };
    let has = |flag: &str| {
        args.iter().any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
    };
    let mut words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    if !has("--resume") {
        words.push("--resume".into());
    }
    if !has("--seed") {
        words.extend(["--seed".into(), seed.to_string()]);
    }
    format!("cargo neuron-tune {}", words.join(" "))
}

/// `w` as one shell word: as is when it holds only characters no shell treats specially,
/// else single-quoted.
fn shell_word(w: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-=,./:@%+".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod resume_tests {
    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_resume_command_is_the_run_s_own_with_resume_and_its_seed() {
        let cmd = |a: &[&str]| super::resume_command_of(&args(a), 42);
        assert_eq!(
            cmd(&["neuron-tune", "tune", "-k", "gemm", "--shape", "small"]),
            "cargo neuron-tune tune -k gemm --shape small --resume --seed 42"
        );
        // Run as the binary itself; a seed and --resume already given are kept as given.
        assert_eq!(
            cmd(&["tune", "--seed=7", "--resume", "-k", "gemm"]),
            "cargo neuron-tune tune --seed=7 --resume -k gemm"
        );
        assert_eq!(
            cmd(&["neuron-tune", "tune", "--proposer", "python3 p.py", "--seed", "9"]),
            "cargo neuron-tune tune --proposer 'python3 p.py' --seed 9 --resume"
        );
        assert_eq!(
            cmd(&["tune", "--params", "a='x'"]),
            "cargo neuron-tune tune --params 'a='\\''x'\\''' --resume --seed 42"
        );
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    /// The three signals that stop this process stop the command when they kill a child; a
    /// crash (SIGABRT 6, SIGSEGV 11), SIGKILL (9, the tool's own timeout kill) and an exit
    /// code are the child's failure, never an interruption. (A wait status holds the signal
    /// in its low 7 bits and an exit code in bits 8–15.)
    #[test]
    fn only_hup_int_and_term_deaths_are_the_interruption() {
        let signal = |n: i32| super::stopped_by_our_signals(ExitStatus::from_raw(n));
        assert!(signal(1) && signal(2) && signal(15));
        assert!(!signal(6) && !signal(9) && !signal(11));
        assert!(!super::stopped_by_our_signals(ExitStatus::from_raw(2 << 8)), "exit code 2");
        assert!(!super::stopped_by_our_signals(ExitStatus::from_raw(0)));
    }
}
