//! The failures that end a `tune` run with exit 4, as its error says them: each distinct
//! failing variant with the command that reproduces it. The error is what a `tune --results`
//! file keeps of how a partition ended, so `merge` shows them too — the warnings the run
//! printed as it went (`report.rs`) are not in the file.

use super::report::Replay;
use super::{Target, TuneResult};
use crate::convergence as conv;
use neuron_tune_protocol::{ErrorKind, Params};

/// Failures named per kernel shape; the journal has every one.
const SHOWN: usize = 5;

/// Of one target: the default's failed check (when it failed with a case, or was the best
/// and so not kept), each variant that failed its check with a case (once per parameters),
/// and kernel code that panicked, crashed or hung (once per error, as `tune` warns of them),
/// each a line `<kernel> at <shape> <params>: <what>; `<command>` reproduces it`, at most
/// [`SHOWN`].
pub(super) fn failures(t: &Target, replay: &Replay, result: &TuneResult) -> Vec<String> {
    let k = &t.kernel.name;
    let at = format!("{k} at {}", super::target_label(t));
    let mut told: Vec<&Params> = Vec::new();
    let mut errors: Vec<&str> = Vec::new();
    let mut lines = Vec::new();
    let default = result.default_check.as_ref().filter(|f| {
        result.default_fails_check || conv::is_fault("failed_check", Some(&f.journal_error()))
    });
    if let Some(f) = default {
        let params = &t.kernel.defaults;
        told.push(params);
        lines.push(format!(
            "{at} {params} (the default): failed its correctness check; `{}` reproduces it",
            f.command(k, params, replay)
        ));
    }
    for e in &result.history {
        if told.contains(&&e.params) || !conv::is_fault(&e.status, e.error.as_deref()) {
            continue;
        }
        let err = e.error.as_deref().unwrap_or_default();
        let (what, command) = match (e.status.as_str(), &e.check) {
            ("failed_check", Some(f)) => {
                ("failed its correctness check", f.command(k, &e.params, replay))
            }
            ("failed_check", None) => {
                ("failed its correctness check", replay.check(k, &e.params, None))
            }
            _ if errors.contains(&err) => continue,
            _ => {
                errors.push(err);
                let what = match conv::fault_of(err).map(|(kind, _)| kind) {
                    Some(ErrorKind::Panic) => "its kernel code panicked",
                    Some(ErrorKind::Timeout) => "its kernel code hung",
                    _ => "its kernel code crashed",
                };
                (what, replay.bench(t, &e.params))
            }
        };
        told.push(&e.params);
        lines.push(format!("{at} {}: {what}; `{command}` reproduces it", e.params));
    }
    if lines.len() > SHOWN {
        let more = lines.len() - SHOWN;
        lines.truncate(SHOWN);
        lines.push(format!(
            "{at}: {} more (the journal {} has every one)",
            more,
            result.journal.display()
        ));
    }
    lines
}
