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
