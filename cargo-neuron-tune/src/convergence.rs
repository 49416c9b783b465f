//! How a tuning run converged, and what went wrong with it: pure functions of the run's
//! evaluations, so `tune` can print them with every result and tests can pin them.
//!
//! A run that stopped while its best was still falling, or that spent most of its budget on
//! invalid variants, reports the same best time as one that converged; without this
//! analysis the user cannot tell a trustworthy winner from a lucky or starved one.
//! docs/tuning-loop.md states each figure and each rule.

use neuron_tune_protocol::{ErrorKind, ParamValue, Params};
use serde::Serialize;

/// A fraction of the final best a run must reach to count as "there" (95 %).
pub const NEAR: f64 = 0.95;
/// An improvement over the last window above this share means "still improving".
pub const STILL_IMPROVING: f64 = 0.01;
/// More than this share of invalid evaluations makes a run invalid-heavy.
pub const INVALID_HEAVY: f64 = 0.5;
/// A winner slower than this factor times another shape's own winner there is over-fitted.
pub const OVER_FITTED: f64 = 1.05;
/// A run shorter than this (seconds) is never called slow, whatever dominates it.
pub const SLOW_MIN_S: f64 = 5.0;

/// The convergence figures of one run (times: lower is better).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Convergence {
    /// The first evaluation (1-based) whose best so far is within 95 % of the final best's
    /// speed (`best_so_far ≤ final / 0.95`); `None` when nothing valid was found.
    pub evaluations_to_95: Option<usize>,
    /// N: the last fifth of the run, at least 4 evaluations (all of a shorter run).
    pub window: usize,
    /// How much the best fell over the last N evaluations, as a fraction of the best before
    /// them; `None` when nothing valid was found before the window (the whole search
    /// happened inside it).
    pub improvement_in_window: Option<f64>,
    /// The run is no longer than its window (so `improvement_in_window` is `None`).
    pub whole_run_in_window: bool,
    pub pruned_fraction: f64,
    /// Refused configurations: the kernel's rule or a hardware rule refused them, their
    /// correctness check failed, or their validation rolled them back.
    pub invalid_fraction: f64,
    /// Faults: the kernel code panicked, crashed or hung ([`is_fault`]); not in
    /// `invalid_fraction`.
    pub fault_fraction: f64,
    /// The default configuration itself was refused (a hardware rule, the kernel's own
    /// rule or error). It is no evaluation of the search, so `invalid_fraction` does not
    /// count it, and a bare "0 % invalid" would hide it: [`describe`] says it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub default_invalid: bool,
    /// The size of the space when the search tried all of it (every configuration
    /// evaluated, or refused by the kernel's rule before evaluation): its best is the
    /// space's best, so the figures above judge nothing ([`describe`] leaves them out and
    /// [`not_converged`] never fires). Absent otherwise (and in `report`, for a run whose
    /// meta file was written before `tune` recorded it there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whole_space: Option<u64>,
}

/// The window of "the last N evaluations" for a run of `n`.
pub fn window(n: usize) -> usize {
    n.div_ceil(5).max(4).min(n)
}

/// The convergence figures of a best-so-far curve and its pruned, invalid and fault counts.
pub fn analyze(
    best_so_far: &[Option<f64>],
    pruned: usize,
    invalid: usize,
    faults: usize,
) -> Convergence {
    let n = best_so_far.len();
    let last = best_so_far.last().copied().flatten();
    let evaluations_to_95 = last
        .and_then(|f| best_so_far.iter().position(|b| b.is_some_and(|b| b * NEAR <= f)))
        .map(|i| i + 1);
    let w = window(n);
    let before = if n > w { best_so_far[n - w - 1] } else { None };
    let improvement_in_window = match (before, last) {
        (Some(b), Some(f)) if b > 0.0 => Some((b - f) / b),
        (Some(_), Some(_)) => Some(0.0),
        _ => None,
    };
    let share = |k: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    Convergence {
        evaluations_to_95,
        window: w,
        improvement_in_window,
        whole_run_in_window: n <= w,
        pruned_fraction: share(pruned),
        invalid_fraction: share(invalid),
        fault_fraction: share(faults),
        default_invalid: false,
        whole_space: None,
    }
}

/// An evaluation that counts as invalid in a run's figures: refused when measured
/// (`invalid`: the kernel's rule or a hardware rule), by its property check when the
/// kernel's rule refused it at every small shape the check drew (`failed_check` without a
/// failing case) or by validation (`rolled_back`) — but not a fault of the kernel
/// ([`is_fault`]), journaled `invalid` or `failed_check` too and counted apart. `tune` and
/// `report` count with these, so they agree.
pub fn is_invalid(status: &str, error: Option<&str>) -> bool {
    matches!(status, "invalid" | "failed_check" | "rolled_back") && !is_fault(status, error)
}

/// How the journal's `error` of a `failed_check` evaluation starts when the check found a
/// failing case (a wrong result, a panic in a case…): a fault of the kernel.
pub const CHECK_FAILED: &str = "check failed: ";

/// A fault of the kernel rather than a configuration it refuses: its code panicked,
/// crashed or hung (journaled `invalid`, the strategy is told so and searches on, with the
/// harness's error, which says which: [`fault_of`]), or it failed its correctness check
/// with a failing case (`failed_check` whose error starts with [`CHECK_FAILED`], or the
/// check itself panicked, crashed or hung). A failed check journaled before its case was
/// (no error) reads as invalid, as it did.
pub fn is_fault(status: &str, error: Option<&str>) -> bool {
    match (status, error) {
        ("invalid", Some(e)) => fault_of(e).is_some(),
        ("failed_check", Some(e)) => e.starts_with(CHECK_FAILED) || fault_of(e).is_some(),
        _ => false,
    }
}

/// `n` and the noun, plural unless `n` is 1 (`1 evaluation`, `3 evaluations`).
pub fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// The figures in one human line. A search that tried its whole space has no convergence
/// to judge: the line says so, with the shares of pruned, invalid and faults.
pub fn describe(c: &Convergence) -> String {
    let evaluations = |k: usize| count(k, "evaluation");
    let improvement = match c.improvement_in_window {
        Some(i) => {
            format!("its best improved {:.1} % over the last {}", 100.0 * i, evaluations(c.window))
        }
        // The window is the whole run: there is no "before" to improve on.
        None if c.whole_run_in_window => {
            format!("the run is no longer than its {}-evaluation window", c.window)
        }
        None => format!("nothing valid before the last {}", evaluations(c.window)),
    };
    // Faults only when there are any: most runs have none, and a reader of a run that has
    // some must not take them for refused configurations.
    let faults = match c.fault_fraction {
        f if f > 0.0 => format!(
            ", {:.0} % faults (kernel code panicked, crashed or hung, or failed its correctness \
             check)",
            100.0 * f
        ),
        _ => String::new(),
    };
    // The default is no evaluation of the search: when it was refused, the share of
    // invalid evaluations alone (0 % when nothing else was) would say nothing was.
    let invalid = match (c.default_invalid, c.invalid_fraction) {
        (false, f) => format!("{:.0} % invalid", 100.0 * f),
        (true, 0.0) => "none invalid but the default itself".to_string(),
        (true, f) => format!("{:.0} % invalid and the default itself", 100.0 * f),
    };
    let shares = format!("{:.0} % pruned, {invalid}{faults}", 100.0 * c.pruned_fraction);
    if let Some(n) = c.whole_space {
        return format!("searched the whole space ({}); {shares}", count(n as usize, "variant"));
    }
    format!(
        "95 % of the final best after {}; {improvement}; {shares}",
        c.evaluations_to_95.map_or("—".to_string(), evaluations),
    )
}

/// A diagnosis as human lines: the summary, then its evidence and advice indented.
pub fn diagnosis_lines(d: &Diagnosis) -> Vec<String> {
    let mut out = vec![format!("diagnosis {}", d.summary)];
    out.extend(d.evidence.iter().map(|e| format!("  evidence: {e}")));
    out.extend(d.advice.iter().map(|a| format!("  advice: {a}")));
    out
}

/// One diagnosis rule that fired: what, the evidence, what to do.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Diagnosis {
    /// `not_converged`, `invalid_heavy`, `slow` or `over_fitted`.
    pub rule: String,
    pub summary: String,
    pub evidence: Vec<String>,
    pub advice: Vec<String>,
}

/// One evaluation as the rules see it.
#[derive(Clone, Debug)]
pub struct Eval<'a> {
    pub params: &'a Params,
    /// `measured`, `pruned`, `invalid`, `failed_check`, `rolled_back`, or `refused` (an
    /// external proposer's proposal the validity rule refused before evaluation).
    pub status: &'a str,
    /// Why an invalid variant was refused (the harness's error message).
    pub error: Option<&'a str>,
}

/// How a run that stopped too early can go on: the advice of [`not_converged`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GoOn {
    /// A `tune` run: a larger budget, or `--resume` (and with `--goal`, `--max-rounds`).
    Tune { goal: bool },
    /// A `replay`: only the budget (no journal, no rounds).
    Replay,
}

/// Not converged: the best still fell by more than 1 % over the last N evaluations (or was
/// first found inside them). A run no longer than its window cannot be judged, and one whose
/// strategy `exhausted` the space (proposed everything), or that tried the whole space, has
/// nothing left to improve.
pub fn not_converged(
    c: &Convergence,
    evaluations: usize,
    exhausted: bool,
    go_on: GoOn,
) -> Option<Diagnosis> {
    if evaluations <= c.window || exhausted || c.whole_space.is_some() {
        return None;
    }
    let evidence = match c.improvement_in_window {
        Some(i) if i > STILL_IMPROVING => format!(
            "the best improved {:.1} % over the last {} of {} evaluations",
            100.0 * i,
            c.window,
            evaluations
        ),
        None if c.evaluations_to_95.is_some() => format!(
            "the first valid variant came within the last {} of {} evaluations",
            c.window, evaluations
        ),
        _ => return None,
    };
    Some(Diagnosis {
        rule: "not_converged".into(),
        summary: "not converged: the search was still improving when it stopped".into(),
        evidence: vec![evidence],
        advice: vec![match go_on {
            GoOn::Tune { goal: true } => {
                "raise --budget (or --max-rounds), or continue this run with --resume and a \
                 larger budget"
            }
            GoOn::Tune { goal: false } => {
                "raise --budget, or continue this run with --resume and a larger budget"
            }
            GoOn::Replay => "raise --budget (a replay costs no simulation)",
        }
        .into()],
    })
}

/// Kernel code that panicked, crashed or hung, as a search records it (the error as
/// `ErrorInfo` prints it, kind first): its kind and message. Such a variant is told to the
/// strategy as invalid and the search goes on, but it is a bug to fix, not a rule that
/// refused it: its figures count it as a fault ([`is_fault`]), apart from invalid.
pub fn fault_of(error: &str) -> Option<(ErrorKind, &str)> {
    [ErrorKind::Panic, ErrorKind::Crashed, ErrorKind::Timeout].into_iter().find_map(|k| {
        let message = error.strip_prefix(format!("{k}: ").as_str())?;
        Some((k, message))
    })
}

/// Which limit refused an invalid variant, from the harness's message.
pub fn limit_of(status: &str, error: Option<&str>) -> &'static str {
    if status == "failed_check" {
        return "correctness check";
    }
    if status == "refused" {
        return "the kernel's validity rule";
    }
    if status == "rolled_back" {
        return "validation: another shape of the key set or a model using the kernel";
    }
    let e = error.unwrap_or("");
    // Kernel code that failed is a bug in the kernel, whatever its message mentions: never
    // a rule that refused the variant.
    if fault_of(e).is_some() {
        return "kernel code that panicked, crashed or hung";
    }
    if e.contains("SBUF") || e.contains("sbuf") {
        "SBUF capacity"
    } else if e.contains("PSUM") || e.contains("psum") {
        "PSUM capacity"
    } else if e.contains("invalid") || e.contains("valid") {
        "the kernel's validity rule"
    } else if e.is_empty() {
        "unknown"
    } else {
        "a hardware rule"
    }
}

/// Invalid-heavy: more than half the proposals were invalid (the evaluations, and an
/// external proposer's proposals refused before evaluation). Evidence: which limits, and
/// the parameter values where most proposals were invalid (at least 2 proposals with the
/// value, at least 75 % of them invalid), worst first. Faults of the kernel code are not
/// invalid ([`is_fault`]): `tune` warns of each with the command that reproduces it.
pub fn invalid_heavy(evals: &[Eval]) -> Option<Diagnosis> {
    let n = evals.len();
    let bad = |e: &Eval| is_invalid(e.status, e.error) || e.status == "refused";
    let refused = evals.iter().filter(|e| e.status == "refused").count();
    // Without refused proposals every proposal was an evaluation: say so.
    let what = if refused > 0 { "proposals" } else { "evaluations" };
    let invalid = evals.iter().filter(|e| bad(e)).count();
    if n == 0 || invalid as f64 / n as f64 <= INVALID_HEAVY {
        return None;
    }
    let mut limits: Vec<(&str, usize)> = Vec::new();
    for e in evals.iter().filter(|e| bad(e)) {
        let l = limit_of(e.status, e.error);
        match limits.iter_mut().find(|(k, _)| *k == l) {
            Some((_, c)) => *c += 1,
            None => limits.push((l, 1)),
        }
    }
    limits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut evidence = vec![format!("{invalid} of {n} {what} were invalid")];
    evidence.extend(limits.iter().map(|(l, c)| format!("{c} refused by {l}")));
    // (name, value) → (proposals, invalid), in first-seen order.
    let mut by_value: Vec<(String, String, usize, usize)> = Vec::new();
    for e in evals {
        for (name, value) in &e.params.0 {
            let v = show(value);
            let i = match by_value.iter().position(|(n2, v2, _, _)| n2 == name && *v2 == v) {
                Some(i) => i,
                None => {
                    by_value.push((name.clone(), v, 0, 0));
                    by_value.len() - 1
                }
            };
            by_value[i].2 += 1;
            by_value[i].3 += usize::from(bad(e));
        }
    }
    let mut culprits: Vec<&(String, String, usize, usize)> =
        by_value.iter().filter(|(_, _, t, b)| *t >= 2 && 4 * b >= 3 * t).collect();
    // Worst share first, then most proposals, then by name and value: deterministic.
    culprits.sort_by(|a, b| {
        (b.3 * a.2).cmp(&(a.3 * b.2)).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1))
    });
    evidence
        .extend(culprits.iter().take(5).map(|(n, v, t, b)| format!("{n}={v}: {b} of {t} invalid")));
    let mut advice = Vec::new();
    // A wrong answer is not a limit of the space: it is a bug to fix, first.
    let wrong = evals.iter().filter(|e| e.status == "failed_check").count();
    if wrong > 0 {
        advice.push(format!(
            "{} computed a wrong result (failed its correctness check): a bug in the kernel \
             at those parameters, not a limit of the space; `cargo neuron-tune check \
             --params …` with one of them shows the shrunk failing case",
            count(wrong, "variant")
        ));
    }
    if let Some((n, v, _, _)) = culprits.first() {
        let only_wrong = evals
            .iter()
            .filter(|e| bad(e) && e.params.get(n).is_some_and(|x| show(x) == *v))
            .all(|e| e.status == "failed_check");
        advice.push(if only_wrong {
            format!(
                "every invalid variant with {n}={v} computed a wrong result: fix the kernel \
                 for {n}={v}, or drop it from the space until it is fixed"
            )
        } else {
            format!(
                "drop {n}={v} from the space, or let the kernel's validate() refuse it up \
                 front (the search then never spends an evaluation on it)"
            )
        });
    }
    if refused > 0 {
        advice.push(format!(
            "{} {} refused by the kernel's validate() before evaluation: \
             they cost no simulation but the proposer's rounds; have the proposer respect the \
             rule (each refused proposal is in its history with `invalid: true`, \
             search/PROPOSER.md)",
            count(refused, "proposal"),
            if refused == 1 { "was" } else { "were" }
        ));
    }
    if limits.iter().any(|(l, _)| l.contains("SBUF") || l.contains("PSUM")) {
        advice.push(
            "count the kernel's SBUF bytes and PSUM banks in validate() so the strategy's \
             oracle refuses what cannot fit"
                .into(),
        );
    }
    Some(Diagnosis {
        rule: "invalid_heavy".into(),
        summary: format!(
            "invalid-heavy: {:.0} % of the {what} were invalid",
            100.0 * invalid as f64 / n as f64
        ),
        evidence,
        advice,
    })
}

/// A shape's winner measured at another shape of its key set.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossShape {
    /// The other shape.
    pub shape: String,
    /// The winner's time there, and that shape's own winner's time, µs.
    pub time_us: f64,
    pub own_best_us: f64,
    /// The other shape has a tuned record of its own (for its dimensions, written by its
    /// own search): it runs that, never this winner.
    pub own_record: bool,
}

/// Over-fitted: the winner loses more than 5 % against another shape's own winner there —
/// at a shape that would run it, having no tuned record of its own. Where every shape has
/// its own record, as a run that tunes each leaves them, a winner fast at its own shape
/// only is no fault: each shape runs its own.
pub fn over_fitted(params: &Params, cross: &[CrossShape]) -> Option<Diagnosis> {
    let losses: Vec<String> = cross
        .iter()
        .filter(|c| !c.own_record)
        .filter(|c| c.time_us > OVER_FITTED * c.own_best_us)
        .map(|c| {
            format!(
                "at {}, which has no tuned record of its own, it runs {:.2} µs, {:.1} % slower \
                 than that shape's winner ({:.2} µs)",
                c.shape,
                c.time_us,
                100.0 * (c.time_us / c.own_best_us - 1.0),
                c.own_best_us
            )
        })
        .collect();
    if losses.is_empty() {
        return None;
    }
    Some(Diagnosis {
        rule: "over_fitted".into(),
        summary: format!("over-fitted: the winner {params} is fast at its own shape only"),
        evidence: losses,
        advice: vec![
            "the winners differ by shape: give each of these shapes a tuned record of its own \
             (tune it, alone or with `tune --model`, which tunes every call) rather than \
             run this winner there"
                .into(),
        ],
    })
}

/// Where a run's wall time went (seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spent {
    /// Building the harnesses before tuning.
    pub build_s: f64,
    /// Correctness checks of would-be winners.
    pub check_s: f64,
    /// Everything of the search itself (validate, trace, simulate, the strategy).
    pub total_s: f64,
}

/// The seconds judged and the evidence line both `slow` rules ([`slow_checks`],
/// [`slow_build`]) give: a run of at least 5 s, or `None`.
fn spent_evidence(s: &Spent) -> Option<(f64, Vec<String>)> {
    let whole = s.build_s + s.total_s;
    if whole < SLOW_MIN_S {
        return None;
    }
    let checks =
        format!("correctness checks {:.1} s ({:.0} %)", s.check_s, 100.0 * s.check_s / whole);
    // One (kernel, shape)'s time has no build of its own: the build is judged over the run.
    let line = match s.build_s {
        0.0 => format!("of {whole:.1} s: {checks}"),
        b => format!(
            "of {whole:.1} s: harness builds {b:.1} s ({:.0} %), {checks}",
            100.0 * b / whole
        ),
    };
    Some((whole, vec![line]))
}

/// Slow because correctness checks took more than half of a run of at least 5 s: a
/// property of one kernel's search, diagnosed per (kernel, shape).
pub fn slow_checks(s: &Spent) -> Option<Diagnosis> {
    let (whole, evidence) = spent_evidence(s)?;
    (s.check_s > 0.5 * whole).then(|| Diagnosis {
        rule: "slow".into(),
        summary: "slow: correctness checks took most of the run".into(),
        evidence,
        advice: vec!["make the kernel's check strategy draw smaller shapes (its small-shape \
             strategy), or its reference cheaper: every would-be winner is checked"
            .into()],
    })
}

/// Slow because building the harnesses took more than half of a run of at least 5 s. The
/// build is shared by every (kernel, shape) of a run, so `tune` judges it once, over the
/// whole run, rather than charging it to each.
pub fn slow_build(s: &Spent, targets: usize) -> Option<Diagnosis> {
    let (whole, evidence) = spent_evidence(s)?;
    let mut advice = vec!["the build is paid once: keep the target dir and the next runs \
                           reuse it (only a changed kernel crate is rebuilt)"
        .to_string()];
    // Advice the run has not already followed.
    if targets == 1 {
        advice.push(
            "tune several kernels or shapes in one run (they share the build); a larger \
             --budget also costs little next to it"
                .into(),
        );
    }
    (s.build_s > 0.5 * whole).then(|| Diagnosis {
        rule: "slow".into(),
        summary: "slow: building the harness took most of the run".into(),
        evidence,
        advice,
    })
}

/// One round of `tune --goal` as its decision log says it (a journal line with
/// `"line": "round"`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Round {
    /// Always `round`: tells these journal lines from evaluations.
    pub line: String,
    /// 1-based.
    pub round: usize,
    /// Proposals evaluated in the round.
    pub proposals: usize,
    /// The best after the round (the default included), µs.
    pub best_time_us: Option<f64>,
    pub best_params: Option<Params>,
    /// `kept` (a new best), `rolled_back` (the round's winner was wrong on a shape of its
    /// key set, lowered a model using the kernel, or every would-be winner failed its
    /// property check: the round's next best or the previous best stands),
    /// `no_improvement`.
    pub decision: String,
    pub reason: String,
    /// The goal is met after this round.
    pub goal_met: bool,
}

impl Round {
    /// The human line of the decision log.
    pub fn line(&self) -> String {
        format!(
            "round {}: {}, best {}: {} — {}{}",
            self.round,
            count(self.proposals, "proposal"),
            self.best_time_us.map_or("none".to_string(), |t| format!("{t:.2} µs")),
            self.decision.replace('_', " "),
            self.reason,
            if self.goal_met { "; goal met" } else { "" }
        )
    }
}

/// How a `tune --goal` ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalReport {
    /// As given (`20%`, `5ms`).
    pub goal: String,
    /// The time that meets it, µs.
    pub target_us: f64,
    pub met: bool,
    /// Met by the tuned record the run keeps (measured again today, faster than the run's
    /// own best), not by the run's best: the file, which the models read, holds a variant
    /// that meets the goal.
    pub met_by_record: bool,
    pub rounds: usize,
    /// The best's speed-up over the default (`default / best`), when the default measured.
    pub speedup: Option<f64>,
    /// What limits the best variant: its profile's verdict kind, summary and evidence.
    pub limit: Option<Limit>,
    /// A throughput goal's rate and unit (`TFLOP/s`, `GB/s`): the rate reached follows.
    #[serde(skip)]
    pub goal_rate: Option<(f64, &'static str)>,
}

/// The profile verdict of the best variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Limit {
    pub kind: String,
    pub summary: String,
    pub evidence: Vec<String>,
    pub advice: Vec<String>,
}

fn show(v: &ParamValue) -> String {
    match v {
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Bool(b) => b.to_string(),
        ParamValue::Str(s) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neuron_tune_protocol::ErrorInfo;

    /// A plain `tune` run's advice.
    const T: GoOn = GoOn::Tune { goal: false };
    use proptest::prelude::*;

    #[test]
    fn the_window_is_a_fifth_of_the_run_at_least_four() {
        assert_eq!(window(0), 0);
        assert_eq!(window(3), 3);
        assert_eq!(window(10), 4);
        assert_eq!(window(20), 4);
        assert_eq!(window(21), 5);
        assert_eq!(window(100), 20);
    }

    #[test]
    fn figures_of_a_hand_made_curve() {
        // 10 evaluations: best 100 → 50 at eval 3 → 49 at eval 7 → 48 at eval 8. Final 48;
        // 95 % of its speed is a time ≤ 48 / 0.95 = 50.53, first reached at eval 3.
        let c: Vec<Option<f64>> = [None, Some(100.0), Some(50.0), Some(50.0), Some(50.0)]
            .into_iter()
            .chain([Some(50.0), Some(49.0), Some(48.0), Some(48.0), Some(48.0)])
            .collect();
        let a = analyze(&c, 2, 1, 0);
        assert_eq!(a.evaluations_to_95, Some(3));
        // Window max(⌈10 / 5⌉, 4) = 4, evals 7–10: the best before it (eval 6) was 50, now
        // 48: fell 4 % (from eval 7's 49, one too late, it would be 2.04 %).
        assert_eq!(a.window, 4);
        assert!((a.improvement_in_window.unwrap() - 0.04).abs() < 1e-12);
        assert_eq!((a.pruned_fraction, a.invalid_fraction), (0.2, 0.1));
        assert!(not_converged(&a, 10, false, T).unwrap().evidence[0].contains("improved 4.0 %"));
        // The advice offers only what the run can do: --max-rounds is --goal's, and a
        // replay has neither a journal to resume nor rounds.
        let advice = |go_on| not_converged(&a, 10, false, go_on).unwrap().advice[0].clone();
        assert!(!advice(T).contains("--max-rounds") && advice(T).contains("--resume"));
        assert!(advice(GoOn::Tune { goal: true }).contains("--max-rounds"));
        assert_eq!(advice(GoOn::Replay), "raise --budget (a replay costs no simulation)");
        assert_eq!(
            describe(&a),
            "95 % of the final best after 3 evaluations; its best improved 4.0 % over the last \
             4 evaluations; 20 % pruned, 10 % invalid"
        );
        // Faults are counted apart from invalid, and named only when there are some.
        let faulty = analyze(&c, 2, 1, 3);
        assert_eq!((faulty.invalid_fraction, faulty.fault_fraction), (0.1, 0.3));
        assert!(describe(&faulty).ends_with(
            "20 % pruned, 10 % invalid, 30 % faults (kernel code panicked, crashed or hung, or \
             failed its correctness check)"
        ));
        // The same run over a space the strategy exhausted: nothing left to find.
        assert_eq!(not_converged(&a, 10, true, T), None);
        // One that tried every variant of its space: no figure to judge it by, and said so.
        let whole = Convergence { whole_space: Some(9), ..a.clone() };
        assert_eq!(not_converged(&whole, 10, false, T), None);
        assert_eq!(
            describe(&whole),
            "searched the whole space (9 variants); 20 % pruned, 10 % invalid"
        );
        // A default that was itself refused is no evaluation of the search, so it is not in
        // the share; it is said rather than hidden behind "0 % invalid".
        let clean = analyze(&c, 2, 0, 0);
        assert!(describe(&clean).ends_with("20 % pruned, 0 % invalid"), "{}", describe(&clean));
        let refused_default = Convergence { default_invalid: true, ..clean };
        assert!(
            describe(&refused_default)
                .ends_with("20 % pruned, none invalid but the default itself"),
            "{}",
            describe(&refused_default)
        );
        assert!(!describe(&refused_default).contains("0 % invalid"));
        let both = Convergence { default_invalid: true, ..a.clone() };
        assert!(describe(&both).ends_with("20 % pruned, 10 % invalid and the default itself"));
        // Flat over the window: converged.
        let mut flat = c.clone();
        flat[6] = Some(50.0);
        flat[7] = Some(50.0);
        flat[8] = Some(50.0);
        flat[9] = Some(50.0);
        let f = analyze(&flat, 0, 0, 0);
        assert_eq!(f.improvement_in_window, Some(0.0));
        assert_eq!(not_converged(&f, 10, false, T), None);
    }

    #[test]
    fn a_first_valid_variant_inside_the_window_is_not_converged() {
        let c = vec![None, None, None, None, None, Some(3.0)];
        let a = analyze(&c, 0, 5, 0);
        assert_eq!((a.evaluations_to_95, a.improvement_in_window), (Some(6), None));
        assert_eq!(not_converged(&a, 6, false, T).unwrap().rule, "not_converged");
        // A run no longer than its window has no "before" to compare with.
        let short = analyze(&c[2..], 0, 3, 0);
        assert_eq!((short.window, not_converged(&short, 4, false, T)), (4, None));
        // The two "no improvement figure" cases read differently, and one is singular.
        assert!(describe(&a).contains("; nothing valid before the last 4 evaluations;"));
        assert!(describe(&short).contains("; the run is no longer than its 4-evaluation window;"));
        let one = analyze(&[Some(2.0)], 0, 0, 0);
        assert!(describe(&one).starts_with("95 % of the final best after 1 evaluation;"));
        // Nothing valid at all: no convergence figures, and nothing to say about it here.
        let none = analyze(&[None, None], 0, 2, 0);
        assert_eq!(none.evaluations_to_95, None);
        assert_eq!(not_converged(&none, 2, false, T), None);
    }

    fn p(a: i64, b: i64) -> Params {
        Params(
            [("a".into(), ParamValue::Int(a)), ("b".into(), ParamValue::Int(b))]
                .into_iter()
                .collect(),
        )
    }

    #[test]
    fn invalid_heavy_names_the_limit_and_the_values_that_cause_it() {
        // a=2 is always refused by SBUF, one check fails at a=1; 4 of 6 invalid.
        let ps = [p(2, 0), p(2, 1), p(2, 2), p(1, 0), p(1, 1), p(0, 2)];
        let sbuf = Some("hardware rule SbufCapacity: SBUF tile pool needs 300000 bytes");
        let evals: Vec<Eval> = ps
            .iter()
            .enumerate()
            .map(|(i, params)| Eval {
                params,
                status: match i {
                    0..=2 => "invalid",
                    3 => "failed_check",
                    _ => "measured",
                },
                error: if i < 3 { sbuf } else { None },
            })
            .collect();
        let d = invalid_heavy(&evals).unwrap();
        assert_eq!(d.rule, "invalid_heavy");
        assert_eq!(d.evidence[0], "4 of 6 evaluations were invalid");
        // An external proposer's refused proposals count as invalid proposals, limited by
        // the validity rule; with them the figures are of proposals, not evaluations.
        let mut with_refused = evals.clone();
        let refused = [p(9, 9), p(9, 8)];
        with_refused.extend(refused.iter().map(|params| Eval {
            params,
            status: "refused",
            error: Some("a = 9: out of range"),
        }));
        let r = invalid_heavy(&with_refused).unwrap();
        assert_eq!(r.evidence[0], "6 of 8 proposals were invalid");
        assert!(r.evidence.contains(&"2 refused by the kernel's validity rule".to_string()));
        assert!(r.evidence.contains(&"a=9: 2 of 2 invalid".to_string()), "{:?}", r.evidence);
        assert!(r.summary.ends_with("75 % of the proposals were invalid"));
        assert!(r.advice.iter().any(|a| a.starts_with("2 proposals were refused")));
        assert_eq!(d.evidence[1], "3 refused by SBUF capacity");
        assert_eq!(d.evidence[2], "1 refused by correctness check");
        // a=2: 3 of 3 invalid. a=1 (1 of 2) and every b value (≤ 2 of 2 but mixed) …
        // b=0: 2 of 2 invalid (a=2 and the failed check) also qualifies.
        assert_eq!(d.evidence[3], "a=2: 3 of 3 invalid");
        assert_eq!(d.evidence[4], "b=0: 2 of 2 invalid");
        assert_eq!(d.evidence.len(), 5);
        // The wrong result first, as a bug; then the value the hardware refuses.
        assert!(d.advice[0].starts_with("1 variant computed a wrong result"), "{:?}", d.advice);
        assert!(d.advice[1].starts_with("drop a=2 from the space"), "{:?}", d.advice);
        // A value whose every invalid variant is a wrong answer is a bug to fix, not a
        // value to refuse in validate().
        let wrong: Vec<Eval> = evals
            .iter()
            .map(|e| Eval {
                status: if e.status == "invalid" { "failed_check" } else { e.status },
                error: None,
                ..*e
            })
            .collect();
        let w = invalid_heavy(&wrong).unwrap();
        assert!(w.advice[1].starts_with("every invalid variant with a=2 computed a wrong result"));
        assert!(!w.advice.iter().any(|a| a.contains("validate()")), "{:?}", w.advice);
        // Half invalid is not more than half.
        let half: Vec<Eval> = evals
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, mut e)| {
                if i == 3 {
                    e.status = "measured";
                }
                e
            })
            .collect();
        assert_eq!(invalid_heavy(&half), None);
        // Kernel code that panicked is a fault, not an invalid configuration: four faults
        // and one refusal of six evaluations are not invalid-heavy.
        let panic = ErrorInfo { kind: ErrorKind::Panic, message: "index out of bounds".into() };
        let panic = panic.to_string();
        let faulty: Vec<Eval> = evals
            .iter()
            .enumerate()
            .map(|(i, e)| match i {
                0..=3 => Eval { status: "invalid", error: Some(&panic), ..*e },
                4 => Eval { status: "invalid", error: sbuf, ..*e },
                _ => e.clone(),
            })
            .collect();
        assert!(faulty.iter().take(4).all(|e| is_fault(e.status, e.error)));
        assert!(!is_invalid(faulty[0].status, faulty[0].error));
        assert!(is_invalid(faulty[4].status, faulty[4].error));
        assert_eq!(invalid_heavy(&faulty), None);
    }

    #[test]
    fn a_failed_check_with_a_failing_case_is_a_fault_of_the_kernel() {
        let wrong = format!("{CHECK_FAILED}smallest failing shape cols=1,rows=1: 2 != 1");
        assert!(is_fault("failed_check", Some(&wrong)));
        assert!(!is_invalid("failed_check", Some(&wrong)));
        // A check that crashed is the kernel's fault too.
        assert!(is_fault("failed_check", Some("crashed: signal 11")));
        // Refused at every small shape the check drew: a configuration the rule refuses.
        let refused = "invalid: the kernel's rule refuses these parameters at every small shape";
        assert!(!is_fault("failed_check", Some(refused)));
        assert!(is_invalid("failed_check", Some(refused)));
        // Journaled before failed checks kept their case: invalid, as they were read then.
        assert!(!is_fault("failed_check", None) && is_invalid("failed_check", None));
        // The same words in a refused configuration's error are no failed check.
        assert!(!is_fault("invalid", Some(&wrong)));
    }

    #[test]
    fn limits_are_read_from_the_harness_message() {
        assert_eq!(limit_of("invalid", Some("PSUM has 8 banks")), "PSUM capacity");
        assert_eq!(limit_of("invalid", Some("the SBUF is full")), "SBUF capacity");
        assert_eq!(limit_of("invalid", Some("invalid: tile > cols")), "the kernel's validity rule");
        assert_eq!(limit_of("invalid", Some("partition 129 out of range")), "a hardware rule");
        assert_eq!(limit_of("failed_check", None), "correctness check");
        // A kernel-code fault, as the search records it (`ErrorInfo`'s text), even one whose
        // message names a hardware resource.
        let fault = "kernel code that panicked, crashed or hung";
        for kind in [ErrorKind::Panic, ErrorKind::Crashed, ErrorKind::Timeout] {
            let e = ErrorInfo { kind, message: "index 9 out of range for the SBUF tile".into() };
            assert_eq!(limit_of("invalid", Some(&e.to_string())), fault, "{e}");
        }
    }

    #[test]
    fn slow_names_what_dominates() {
        let checks = Spent { build_s: 1.0, check_s: 8.0, total_s: 10.0 };
        assert!(slow_checks(&checks).unwrap().summary.contains("correctness checks"));
        let builds = Spent { build_s: 30.0, check_s: 1.0, total_s: 10.0 };
        assert!(slow_build(&builds, 1).unwrap().summary.contains("building"));
        // Advice to tune several kernels in one run goes only to a run that did not.
        let several =
            |n| slow_build(&builds, n).unwrap().advice.iter().any(|a| a.contains("several"));
        assert!(several(1) && !several(8));
        // Each rule names only its own cause.
        assert_eq!(slow_checks(&builds), None);
        assert_eq!(slow_build(&checks, 1), None);
        let neither = Spent { build_s: 2.0, check_s: 2.0, total_s: 10.0 };
        assert_eq!((slow_checks(&neither), slow_build(&neither, 1)), (None, None));
        // Dominated by checks, but too short to matter.
        assert_eq!(slow_checks(&Spent { build_s: 0.5, check_s: 3.0, total_s: 4.0 }), None);
    }

    #[test]
    fn over_fitted_fires_above_five_percent_only() {
        let p = Params::default();
        let at = |t: f64| CrossShape {
            shape: "wide".into(),
            time_us: t,
            own_best_us: 100.0,
            own_record: false,
        };
        assert_eq!(over_fitted(&p, &[at(105.0)]), None, "5 % is not more than 5 %");
        let d = over_fitted(&p, &[at(105.0), at(150.0)]).unwrap();
        assert_eq!(d.rule, "over_fitted");
        assert_eq!(
            d.evidence,
            ["at wide, which has no tuned record of its own, it runs 150.00 µs, 50.0 % slower \
              than that shape's winner (100.00 µs)"]
        );
    }

    #[test]
    fn over_fitted_is_silent_where_the_other_shape_runs_its_own_record() {
        // However much slower the winner is there, a shape with its own record never runs it.
        let p = Params::default();
        let own = CrossShape {
            shape: "wide".into(),
            time_us: 700.0,
            own_best_us: 100.0,
            own_record: true,
        };
        assert_eq!(over_fitted(&p, std::slice::from_ref(&own)), None);
        let bare = CrossShape { shape: "narrow".into(), own_record: false, ..own.clone() };
        let d = over_fitted(&p, &[own, bare]).unwrap();
        assert_eq!(d.evidence.len(), 1);
        assert!(d.evidence[0].starts_with("at narrow, which has no tuned record"), "{d:?}");
    }

    proptest! {
        /// On any monotone best-so-far curve: the 95 % point is an evaluation of the run
        /// whose value is within 95 % and every earlier one is not; the improvement over the
        /// window is in [0, 1); the fractions are the counts over the length.
        #[test]
        fn figures_agree_with_their_definitions(
            steps in proptest::collection::vec((any::<bool>(), 0.0f64..0.5), 1..80),
            start in 1.0f64..1e6,
            pruned_share in 0.0f64..0.5,
        ) {
            let mut curve = Vec::new();
            let mut best: Option<f64> = None;
            for (found, drop) in &steps {
                if *found {
                    best = Some(best.map_or(start, |b| b * (1.0 - drop)));
                }
                curve.push(best);
            }
            let n = curve.len();
            let pruned = (pruned_share * n as f64) as usize;
            let a = analyze(&curve, pruned, n - pruned, 0);
            prop_assert_eq!(a.pruned_fraction, pruned as f64 / n as f64);
            prop_assert!((a.pruned_fraction + a.invalid_fraction - 1.0).abs() < 1e-12);
            // "The last N evaluations": a fifth of the run, rounded up, at least 4, at most all.
            prop_assert_eq!(a.window, n.div_ceil(5).clamp(4.min(n), n));
            match best {
                None => prop_assert_eq!(a.evaluations_to_95, None),
                Some(f) => {
                    let k = a.evaluations_to_95.unwrap();
                    prop_assert!(k >= 1 && k <= n);
                    prop_assert!(curve[k - 1].unwrap() * NEAR <= f);
                    for b in &curve[..k - 1] {
                        prop_assert!(b.is_none_or(|b| b * NEAR > f));
                    }
                }
            }
            if let Some(i) = a.improvement_in_window {
                prop_assert!((0.0..1.0).contains(&i), "{}", i);
            }
            // The improvement is measured from the best just before the window's first
            // evaluation to the last best.
            let w = a.window;
            match (n > w).then(|| curve[n - w - 1]).flatten() {
                Some(before) => {
                    let want = (before - best.unwrap()) / before;
                    prop_assert!((a.improvement_in_window.unwrap() - want).abs() < 1e-12);
                }
                None => prop_assert_eq!(a.improvement_in_window, None),
            }
        }
    }
}
