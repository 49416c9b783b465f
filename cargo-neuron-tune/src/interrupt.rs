//! Ctrl-C: stop cleanly, keep everything finished, say how to continue.
//!
//! The first Ctrl-C sets a flag: the pool stops waiting for answers and the command ends
//! with [`Exit::Interrupted`] (130, as shells report SIGINT). Every result finished by then
//! is already in the store (written atomically as it arrives) and every evaluation of a
//! search in its journal, so rerunning the command continues. Workers, in the same process
//! group, get the same SIGINT from the terminal and end with their request. A second
//! Ctrl-C exits at once.

use crate::exit::{fail, Exit, Failure};
use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Install the handler (once per process; a second call is ignored).
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(Exit::Interrupted.code().into());
        }
        eprintln!("\n   Interrupted: stopping (Ctrl-C again to quit at once)");
    });
}

/// Whether the user asked to stop.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
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
