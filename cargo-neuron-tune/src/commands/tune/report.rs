//! What one tuned (kernel, shape) says: its event, status and result lines, diagnoses,
//! Pareto front and row of the final table, and the faults of its kernel code.

use super::*;
use crate::command_line::CommandLine;

/// What a printed reproducer carries of the run, so that pasted into a shell where the run
/// was started it runs the same kernel on the same build: the run's `--manifest-path` and
/// build flags, the package of the target's kernel (`-p`: another package may have a kernel
/// of that name) and the run's `--chip` as given (left out when it is the default). Of a
/// model's call, `bench` also selects the model's package (when another), which its
/// `--shape model@shape{dims}` needs.
pub(super) struct Replay<'a> {
    pub cargo: &'a CargoFlags,
    pub package: &'a str,
    pub model_package: Option<&'a str>,
    pub chip: &'a str,
}

impl Replay<'_> {
    /// `cargo neuron-tune SUBCOMMAND` of the package, then `args`, the chip and the build flags.
    fn command(
        &self,
        subcommand: &'static str,
        args: impl FnOnce(CommandLine) -> CommandLine,
    ) -> String {
        args(CommandLine::new(subcommand).package(self.cargo, self.package))
            .opt_flag("--chip", (self.chip != "trn2").then_some(self.chip))
            .build_flags(self.cargo)
            .to_string()
    }

    /// `check` of a variant: with a seed, the failing part of a check (its
    /// [`CHECK_CASES_PER_PART`] cases); without, its own random cases.
    pub fn check(&self, kernel: &str, params: &Params, seed: Option<u64>) -> String {
        self.command("check", |c| {
            c.flag("--kernel", kernel)
                .flag("--params", params)
                .opt_flag("--cases", seed.map(|_| CHECK_CASES_PER_PART))
                .opt_flag("--seed", seed)
        })
    }

    /// `bench` of a variant at the target's shape: a named shape, or a model's call as
    /// `--shape model@shape{dims}` (the call at those dims alone: a model may call the
    /// kernel at several at one shape) with the model's package selected too.
    pub fn bench(&self, t: &Target, params: &Params) -> String {
        let shape = match t.model_krate {
            Some(_) => format!("{}{}", t.shape_name, crate::model_calls::dims_label(&t.shape)),
            None => t.shape_name.clone(),
        };
        self.command("bench", |c| {
            c.opt_flag("-p", self.model_package)
                .flag("--kernel", &t.kernel.name)
                .flag("--shape", shape)
                .flag("--params", params)
        })
    }
}

/// Kernel code that panicked, crashed or hung is a bug to fix, not a variant its rules
/// refuse: the search goes on (the strategy hears it as invalid), but it is counted as a
/// fault, apart from the invalid ones, and each distinct error is told, with the command
/// that reproduces it.
pub(super) fn warn_faults(
    out: &crate::output::Reporter,
    t: &Target,
    chip: &str,
    replay: &Replay,
    result: &TuneResult,
) {
    let mut told = std::collections::BTreeSet::new();
    let k = &t.kernel.name;
    // (Failed checks are [`warn_failed_checks`]'.)
    let code = |e: &&Entry| e.status == "invalid" && conv::is_fault(&e.status, e.error.as_deref());
    for e in result.history.iter().filter(code) {
        let err = e.error.as_deref().unwrap_or_default();
        let Some((kind, message)) = conv::fault_of(err) else { continue };
        // Every one to a script (as `bench` reports them); to a reader, each distinct
        // failure once.
        out.event(&crate::output::Event::VariantFailed {
            kernel: k.clone(),
            shape: t.shape_name.clone(),
            params: e.params.clone(),
            chip: chip.to_string(),
            kind: kind.to_string(),
            message: message.to_string(),
        });
        if told.insert(err) {
            out.note(format!(
                "warning: {k} {} {}: {err} (a fault of the kernel code, counted apart from \
                 invalid configurations; `{}` reproduces it)",
                t.shape_name,
                e.params,
                replay.bench(t, &e.params)
            ));
        }
    }
}

/// A would-be winner (or the default) that failed its correctness check is never kept, and
/// never silently: each is told — the variant, its time, the shrunk failing case and the
/// `check` command that replays it ([`Replay`]) — as a
/// warning, and as a `variant_failed` event (`failed_check`; `invalid` when the kernel's
/// rule refused it at every small shape the check drew, so nothing could be checked).
pub(super) fn warn_failed_checks(
    out: &crate::output::Reporter,
    t: &Target,
    chip: &str,
    replay: &Replay,
    result: &TuneResult,
) {
    let k = &t.kernel.name;
    let label = target_label(t);
    let event = |params: &Params, fault: bool, message: String| {
        out.event(&crate::output::Event::VariantFailed {
            kernel: k.clone(),
            shape: t.shape_name.clone(),
            params: params.clone(),
            chip: chip.to_string(),
            kind: if fault { "failed_check" } else { "invalid" }.into(),
            message,
        })
    };
    // The default is said when its check failed with a case, or when it would have been
    // kept: a default the rule refuses at the check's small shapes, beaten anyway, is not.
    let default_told = result.default_check.as_ref().filter(|f| {
        result.default_fails_check || conv::is_fault("failed_check", Some(&f.journal_error()))
    });
    if let Some(f) = default_told {
        let params = &t.kernel.defaults;
        event(params, conv::is_fault("failed_check", Some(&f.journal_error())), f.case_words());
        out.note(format!(
            "warning: {k} {label}: the default parameters fail their correctness check{} \
             ({params}): {}; `{}` reproduces it",
            if result.default_fails_check { ", so they are not kept" } else { "" },
            f.case_words(),
            f.command(k, params, replay)
        ));
    }
    let best = result.best.as_ref().map(|b| b.time_us);
    // The default proposed again fails as it did: told once.
    let mut told: Vec<&Params> = Vec::new();
    if default_told.is_some() {
        told.push(&t.kernel.defaults);
    }
    for e in result.history.iter().filter(|e| e.status == "failed_check") {
        if told.contains(&&e.params) {
            continue;
        }
        told.push(&e.params);
        let fault = conv::is_fault(&e.status, e.error.as_deref());
        let (case, command) = match &e.check {
            Some(f) => (f.case_words(), f.command(k, &e.params, replay)),
            // Journaled before failed checks kept their case.
            None => (
                e.error.clone().unwrap_or_else(|| "its failing case was not journaled".into()),
                replay.check(k, &e.params, None),
            ),
        };
        event(&e.params, fault, case.clone());
        let time = match (e.time_us, best) {
            (Some(t), Some(b)) if t < b => {
                format!(" ({t:.1} µs, faster than the result's {b:.1} µs)")
            }
            (Some(t), _) => format!(" ({t:.1} µs)"),
            _ => String::new(),
        };
        let what = if fault {
            "failed its correctness check (a fault of the kernel, counted apart from invalid \
             configurations)"
        } else {
            "could not be checked, so it is invalid"
        };
        out.note(format!(
            "warning: {k} {label} {}{time}: {what}: {case}; `{command}` reproduces it",
            e.params
        ));
    }
}

/// How many of the most common refusals [`nothing_valid`] names.
const REASONS: usize = 3;

/// When the default and every variant the search tried were refused — by a hardware rule
/// (a chip too small for the kernel's tiles…) or the kernel's own error —, why, as `bench`
/// says it of such variants: the most common reasons, each with a variant it refused, and
/// whether the space holds anything else. `None` when anything measured, failed otherwise
/// (a failed check, a fault: those are said apart) or nothing was refused.
pub(super) fn nothing_valid(t: &Target, chip: &str, result: &TuneResult) -> Option<String> {
    let refused =
        |e: &Entry| e.status == "invalid" && conv::is_invalid(&e.status, e.error.as_deref());
    let default_why = result.default_refused.as_deref()?;
    if !result.history.iter().all(refused) {
        return None;
    }
    // (reason, count, a variant it refused), in first-seen order, the default first.
    let mut reasons: Vec<(&str, usize, &Params)> = vec![(default_why, 1, &t.kernel.defaults)];
    for e in &result.history {
        let why = e.error.as_deref().unwrap_or_default();
        match reasons.iter_mut().find(|r| r.0 == why) {
            Some(r) => r.1 += 1,
            None => reasons.push((why, 1, &e.params)),
        }
    }
    // Most common first (a stable sort: ties in first-seen order).
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut said: Vec<String> =
        reasons.iter().take(REASONS).map(|(why, n, p)| format!("{n} × {why} (e.g. {p})")).collect();
    if reasons.len() > REASONS {
        said.push(format!("and {}", conv::count(reasons.len() - REASONS, "other reason")));
    }
    let tried = match result.evaluations {
        0 => "the default is".to_string(),
        n => format!("the default and the {} tried are all", conv::count(n, "variant")),
    };
    let rest = if result.exhausted || result.whole_space.is_some() {
        "nothing else in its space is valid there"
    } else {
        "the search stopped at its budget (a larger --budget may find a valid variant, though \
         a rule that refuses every one tried usually refuses the chip or the shape)"
    };
    Some(format!(
        "{} at {}: no valid variant on {chip}: {tried} refused: {}; {rest}; nothing recorded",
        t.kernel.name,
        target_label(t),
        said.join("; ")
    ))
}

/// The line under a run's figures when its kernel failed: how many evaluations, that they
/// are a bug in the kernel rather than configurations it refuses (code that panicked,
/// crashed or hung; a failed correctness check), and where to see them: the command that
/// reproduces the first ([`Replay`]), and the journal that holds every one.
fn faults_line(t: &Target, replay: &Replay, result: &TuneResult) -> Option<String> {
    let fault = |e: &&Entry| conv::is_fault(&e.status, e.error.as_deref());
    let first = result.history.iter().find(fault)?;
    let wrong = result.history.iter().filter(fault).filter(|e| e.status == "failed_check").count();
    let k = &t.kernel.name;
    let what = match (result.faults - wrong, wrong) {
        (_, 0) => "the kernel code panicked, crashed or hung".to_string(),
        (0, _) => "the kernel failed its correctness check".to_string(),
        (code, wrong) => format!(
            "the kernel code panicked, crashed or hung ({code}) or failed its correctness \
             check ({wrong})"
        ),
    };
    let command = match &first.check {
        Some(f) => f.command(k, &first.params, replay),
        None => replay.bench(t, &first.params),
    };
    Some(format!(
        "    faults: {} of {}: {what} (a bug in the kernel, not a configuration it refuses); \
         `{command}` reproduces the first, and the journal {} has every one with its error",
        result.faults,
        conv::count(result.evaluations, "evaluation"),
        result.journal.display()
    ))
}

/// The event of one tuned (kernel, shape), its status line, its Pareto front (results)
/// and its row of the final table.
#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    out: &crate::output::Reporter,
    t: &Target,
    chip: &ChipSpec,
    replay: &Replay,
    result: &TuneResult,
    best: &Best,
    seed: u64,
    opts: &SearchOpts,
    table: &mut crate::output::Table,
) {
    let k = &t.kernel;
    let convergence = conv::Convergence {
        whole_space: result.whole_space,
        default_invalid: result.default_refused.is_some(),
        ..conv::analyze(&result.best_so_far, result.pruned, result.invalid, result.faults)
    };
    // A space of one configuration, the default: there was nothing to search.
    let only_default = result.whole_space == Some(1) && k.space.index_of(&k.defaults).is_some();
    let evals: Vec<conv::Eval> = result
        .history
        .iter()
        .map(|e| conv::Eval { params: &e.params, status: &e.status, error: e.error.as_deref() })
        .chain(result.refused.iter().map(|(params, why)| conv::Eval {
            params,
            status: "refused",
            error: Some(why),
        }))
        .collect();
    // One target's own time: the shared harness build is judged once, over the run.
    let spent = conv::Spent { build_s: 0.0, check_s: result.check_s, total_s: result.total_s };
    debug_assert!(spent.check_s <= spent.total_s, "the checks are part of the run: {spent:?}");
    // A goal met is the run's end, not a search cut short.
    let goal_met = result.goal.as_ref().is_some_and(|g| g.met);
    let diagnoses: Vec<conv::Diagnosis> = [
        conv::not_converged(
            &convergence,
            result.evaluations,
            result.exhausted,
            conv::GoOn::Tune { goal: result.goal.is_some() },
        )
        .filter(|_| !goal_met)
        .map(|mut d| {
            // Its figures are the search's own, which never beat the default: slower than
            // it, or (the default itself found, or a tie) as fast.
            if result.kept_default {
                let searched = result.best_so_far.iter().rev().find_map(|b| *b);
                let slower = matches!((searched, result.default_time), (Some(s), Some(d)) if s > d);
                d.summary = match slower {
                    true => {
                        "not converged: the search's own best, still slower than the \
                             default, was improving when it stopped"
                    }
                    false => {
                        "not converged: the search's own best, which only reached the \
                              default's time, was improving when it stopped"
                    }
                }
                .into();
            }
            d
        }),
        conv::invalid_heavy(&evals),
        conv::slow_checks(&spent),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Kept with the journal for `report`; failing to is only a note (the result stands).
    let meta = JournalMeta { diagnoses: diagnoses.clone(), ..result.meta.clone() };
    if write_meta(&result.journal, &meta).is_err() {
        let path = meta_path(&result.journal);
        out.note(format!("warning: {}: the diagnoses were not stored", path.display()));
    }
    out.event(&Event::Tune {
        kernel: k.name.clone(),
        shape: Some(t.shape_name.clone()),
        dims: Some(t.shape.clone()),
        chip: Some(chip.name.clone()),
        best_params: serde_json::to_value(&best.params).expect("params serialize"),
        best_time: best.time_us,
        default_time: result.default_time,
        evaluations: result.evaluations,
        pruned: result.pruned,
        invalid: result.invalid,
        faults: result.faults,
        seed,
        strategy: opts.proposer.as_ref().map_or(opts.strategy.clone(), |_| "proposer".into()),
        best_so_far: result.best_so_far.clone(),
        journal: Some(result.journal.clone()),
        pareto: result.front.as_ref().map(|f| serde_json::to_value(f).expect("points serialize")),
        convergence: Box::new(convergence.clone()),
        diagnoses: diagnoses.clone(),
        rounds: result.rounds.clone(),
        goal: result.goal.clone().map(Box::new),
        validated: result.validated.as_ref().map(|(shapes, models)| {
            Box::new(serde_json::json!({"shapes": shapes, "models": models}))
        }),
        kept: result.kept_default.then_some("default"),
        kept_record: result
            .record
            .as_ref()
            .map(|(r, _)| Box::new(serde_json::json!({"params": r.params, "time_us": r.time_us}))),
        stopped_by: result.stopped_by,
    });
    let label = target_label(t);
    // `--budget` counts simulations: say how many of the evaluations were pruned instead.
    let pruned_note = match result.pruned {
        0 => String::new(),
        n => format!(" ({n} pruned without simulating)"),
    };
    let stop_note = crate::commands::stop_note(result.stopped_by, opts);
    if result.evaluations == 0 {
        out.status(format!(
            "   Tuned {} {label}: {:.1} µs, the default's: nothing searched{}",
            k.name,
            best.time_us,
            if goal_met { " (it already meets the goal)" } else { "" }
        ));
    } else if only_default {
        out.status(format!(
            "   Tuned {} {label}: {:.1} µs, the default's: its space holds nothing else",
            k.name, best.time_us,
        ));
    } else {
        // Fewer evaluations than `--budget` asked for, when the space had no more.
        let whole = if result.whole_space.is_some() { " (the whole space)" } else { "" };
        out.status(format!(
            "   Tuned {} {label}: {:.1} µs after {}{whole}{pruned_note}{stop_note}; convergence \
             (best so far, µs): {}",
            k.name,
            best.time_us,
            conv::count(result.evaluations, "evaluation"),
            crate::commands::replay::curve(&result.best_so_far)
        ));
    }
    // The table says what the tuned file now holds: a record that stands (this run found
    // nothing faster) is shown, marked, rather than the run's own best — unless the record
    // lies outside the space searched (`--params` pins, a narrowed space): then the row is
    // the run's own best against its own default, and a note names the record.
    let (shown, record_shown) = match &result.record {
        Some((r, _)) if t.kernel.space.index_of(&r.params).is_some() => (r, true),
        Some((r, _)) => {
            out.note(format!(
                "note: {} {label}: the tuned record {} ({:.1} µs) is faster and stays in the \
                 file; it lies outside the space searched, so the table shows this run's best",
                k.name, r.params, r.time_us
            ));
            (best, false)
        }
        None => (best, false),
    };
    table.row(vec![
        k.name.clone(),
        label.clone(),
        format!("{:.1}", shown.time_us),
        result.default_time.map_or("-".into(), |d| format!("{d:.1}")),
        match result.default_time.map(|d| d / shown.time_us) {
            _ if result.kept_default && result.record.is_none() => "default".into(),
            Some(g) => format!("{g:.2}x"),
            None => "-".into(),
        },
        result.evaluations.to_string(),
        result.pruned.to_string(),
        result.invalid.to_string(),
        result.faults.to_string(),
        format!("{}{}", shown.params, if record_shown { " (recorded winner kept)" } else { "" }),
    ]);
    // How the run went, under the kernel's name (its row is in the table at the end). The
    // convergence figures are the search's; when the default stands, they are said to be.
    let how = match result.evaluations {
        0 if goal_met => "nothing searched: the default already meets the goal".to_string(),
        0 => "nothing searched".to_string(),
        _ if only_default => "its space holds only the default: nothing to search".to_string(),
        _ => conv::describe(&convergence),
    };
    // A recorded winner the file keeps (and the table shows) comes first in the verdict,
    // then what this run found.
    let record = result.record.as_ref().map(|(r, _)| r).filter(|_| record_shown);
    let kept = |d: f64| match record {
        Some(r) => format!(
            "kept the recorded winner {}, {:.1} µs; this run kept the default, {d:.1} µs",
            r.params, r.time_us
        ),
        None => format!("kept the default, {d:.1} µs"),
    };
    let mut record_said = false;
    match (result.kept_default, result.default_time) {
        (true, Some(d)) if only_default => {
            record_said = record.is_some();
            out.result(format!("  {} {label}: {}: {how}", k.name, kept(d)))
        }
        (true, Some(d)) if result.evaluations > 0 => {
            let searched = result.best_so_far.iter().rev().find_map(|b| *b);
            let slower = match searched {
                Some(s) if s > d => {
                    format!(
                        " (the search's best: {s:.1} µs, {:.1} % slower)",
                        100.0 * (s / d - 1.0)
                    )
                }
                _ => String::new(),
            };
            // `--params` whose pins exclude the kernel's default: the default is still what
            // runs without a record, so nothing slower than it is recorded, and it is said.
            let pinned = t.kernel.space.index_of(&best.params).is_none();
            // A faster variant that failed its check is no winner: it is warned about.
            let wrong = result.history.iter().any(|e| {
                e.status == "failed_check" && conv::is_fault(&e.status, e.error.as_deref())
            });
            let what = match (pinned, wrong) {
                (true, _) => "nothing in the space pinned by --params beat it",
                (false, true) => "no correct variant beat it",
                (false, false) => "no variant beat it",
            };
            // A search of the whole space has no figures of its own to give, just that.
            let how = match result.whole_space {
                Some(_) => how.clone(),
                None => format!("the search: {how}"),
            };
            record_said = record.is_some();
            out.result(format!("  {} {label}: {}: {what}{slower}; {how}", k.name, kept(d)));
            if let (true, Some(s)) = (pinned, searched_best(result)) {
                out.note(format!(
                    "warning: {} {label}: the kernel's default {} ({d:.1} µs) lies outside the \
                     space pinned by --params, and nothing in that space is faster (its best, \
                     {}, takes {:.1} µs): the default is kept, not a variant slower than it",
                    k.name,
                    best.params,
                    s.params,
                    s.time_us.unwrap_or_default()
                ));
            }
        }
        _ => out.result(format!("  {} {label}: {how}", k.name)),
    }
    if let Some(line) = faults_line(t, replay, result) {
        out.result(line);
    }
    // The result above is the run's own; the file keeps a faster record (the table's row).
    // (A tie keeps the record too: no churn in the file.)
    if let Some((r, _)) = result.record.as_ref().filter(|_| !record_said) {
        let why = match r.time_us < best.time_us {
            true => format!(
                "faster record {} ({:.1} µs): this run's best is not faster",
                r.params, r.time_us
            ),
            false => format!(
                "record {} ({:.1} µs): this run's best, {}, is exactly as fast",
                r.params, r.time_us, best.params
            ),
        };
        out.result(format!("    the tuned database keeps its {why}"));
    }
    for r in &result.rounds {
        out.result(format!("    {}", r.line()));
    }
    for d in &diagnoses {
        if d.rule == "slow" {
            wall_clock_diagnosis(out, &format!("{} {label}", k.name), d);
            continue;
        }
        for line in conv::diagnosis_lines(d) {
            out.result(format!("    {line}"));
        }
    }
    if let Some(front) = &result.front {
        out.result(format!(
            "  Pareto front of {} {}: {} variants no other beats on time, SBUF and estimated energy",
            k.name,
            label,
            front.len()
        ));
        let mut table = crate::output::Table::new(&[
            ">time µs",
            ">SBUF B/partition",
            ">energy µJ (estimate)",
            "params",
        ]);
        for p in front {
            table.row(vec![
                format!("{:.1}", p.time_us),
                p.sbuf_bytes_per_partition.to_string(),
                format!("{:.1}", p.energy_uj_estimate),
                p.params.to_string(),
            ]);
        }
        out.table(&table, "    ");
    }
}

/// The search's own fastest measured variant (the default's evaluation is not in it).
fn searched_best(result: &TuneResult) -> Option<&Entry> {
    result
        .history
        .iter()
        .filter(|e| e.status == "measured" && e.time_us.is_some())
        .min_by(|a, b| a.time_us.unwrap_or_default().total_cmp(&b.time_us.unwrap_or_default()))
}

/// A diagnosis built on wall-clock figures (`slow`), which differ from run to run: status
/// on stderr, so that the results on stdout are the same every time (the JSON event keeps
/// it whole).
pub(super) fn wall_clock_diagnosis(out: &crate::output::Reporter, whom: &str, d: &conv::Diagnosis) {
    out.status(format!("  {whom}:"));
    for line in conv::diagnosis_lines(d) {
        out.status(format!("    {line}"));
    }
}
