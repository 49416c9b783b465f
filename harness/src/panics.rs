//! The worker's panic report: each distinct panic once per request.
//!
//! A check that finds a panicking case shrinks it, and every shrink step panics again at the
//! same place with the same message; the default hook would print the message (and, with
//! `RUST_BACKTRACE`, a backtrace) each time, burying the one report under copies of it.
//! This hook passes the first panic of a request at each (location, message) to the
//! default hook and only counts the repeats; [`end_request`] turns the count into one line.

use std::sync::Mutex;

/// This request's panics so far: (location and message, repeats after the first).
static SEEN: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

thread_local! {
    /// Where this thread last panicked (`file:line:col`), for the message a caught panic
    /// becomes ([`crate::kernel::catch_panic`]): the payload alone does not say.
    static LAST_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Where the current thread last panicked, taken (so a later panic without a location is
/// not given this one's).
pub fn take_last_location() -> Option<String> {
    LAST_AT.with(|l| l.borrow_mut().take())
}

/// Install the hook (once, in the worker's `main`).
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        LAST_AT.with(|l| *l.borrow_mut() = at.clone());
        let key = format!("{}: {message}", at.unwrap_or_default());
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, repeats)) => *repeats += 1,
            None => {
                seen.push((key, 0));
                drop(seen);
                default(info);
            }
        }
    }));
}

/// Forget this request's panics, printing (on stderr, so into the request's captured
/// output) how often each one repeated.
pub fn end_request() {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for (key, repeats) in seen.drain(..).filter(|(_, r)| *r > 0) {
        let times = if repeats == 1 { "once more" } else { &format!("{repeats} more times") };
        eprintln!("(the same panic {times}, not shown: {key})");
    }
}
