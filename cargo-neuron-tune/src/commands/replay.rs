//! `replay`: run a search strategy on a recorded landscape (a Kernel Tuner cache or T4
//! results file) instead of the simulator: the same strategies, evaluated by lookup, so a
//! strategy can be judged on real measured spaces in seconds.

use super::{default_seed, seed_words};
use crate::cli::SearchOpts;
use crate::exit::{fail, Exit, Failure};
use crate::output::{Event, Reporter};
use neuron_tune_search::{builtin, run, Budget, Landscape, BUILTIN};
use std::path::Path;
use std::time::Duration;

pub fn run_replay(cache: &Path, opts: &SearchOpts, out: &Reporter) -> Result<Exit, Failure> {
    if opts.objective == crate::cli::Objective::Pareto {
        return Err(fail(
            Exit::Config,
            "--objective pareto: a recorded landscape has times only (no SBUF footprint or energy)",
        ));
    }
    // Flags `tune` takes that mean nothing here are refused, not ignored.
    for (given, flag, why) in [
        (opts.proposer.is_some(), "--proposer", "a replay runs the built-in strategies only"),
        (opts.resume, "--resume", "a replay keeps no journal: it takes seconds, run it again"),
    ] {
        if given {
            return Err(fail(Exit::Config, format!("{flag}: not for `replay` ({why})")));
        }
    }
    // The error names the file.
    let landscape = Landscape::load(cache).map_err(|e| fail(Exit::Config, e.to_string()))?;
    if let Some(dropped) = landscape.unterminated() {
        let partial = if dropped > 0 { ", its last partial entry dropped" } else { "" };
        out.note(format!(
            "warning: {} is an unterminated Kernel Tuner cache (its run was interrupted{partial}): \
             the configurations it never reached count as absent (invalid), and the optimum \
             is the best of what it recorded",
            cache.display()
        ));
    }
    let seed = opts.seed.unwrap_or_else(default_seed);
    let mut strategy = builtin(&opts.strategy, seed).ok_or_else(|| {
        fail(
            Exit::Config,
            format!("--strategy {}: unknown (built in: {})", opts.strategy, BUILTIN.join(", ")),
        )
    })?;
    out.status(format!(
        "   Replaying {} ({} configurations, {} valid) with `{}`, {}",
        landscape.name(),
        landscape.space().len(),
        landscape.valid_values().len(),
        opts.strategy,
        seed_words(seed, opts.seed.is_none())
    ));
    let budget = Budget {
        evaluations: Some(opts.budget),
        wall_time: opts.time.map(Duration::from_secs_f64),
    };
    let mut oracle = landscape.oracle();
    let mut evaluator = |c: &neuron_tune_search::Config| landscape.outcome(c);
    let result = run(
        &mut *strategy,
        landscape.space(),
        &mut oracle,
        &mut evaluator,
        budget,
        opts.early_stop,
    )
    .map_err(|e| fail(Exit::Internal, e.to_string()))?;
    let (optimum_config, optimum) = landscape.optimum();
    let Some((best, best_time)) = &result.best else {
        // Nothing valid to run, as `bench` says of a grid its rules refuse (exit 2): a
        // landscape holds no correctness check to fail.
        return Err(fail(
            Exit::Config,
            format!(
                "no valid configuration was found within the budget ({} of the landscape's {} \
                 configurations are valid; raise --budget)",
                landscape.valid_values().len(),
                landscape.space().len()
            ),
        ));
    };
    let best_params = landscape.space().to_json(best);
    let invalid = result.history.iter().filter(|t| t.outcome.value().is_none()).count();
    // A landscape runs no kernel code: nothing in it is a fault.
    let convergence = crate::convergence::Convergence {
        whole_space: whole_space(&landscape, &result.history),
        ..crate::convergence::analyze(&result.best_so_far, 0, invalid, 0)
    };
    // A strategy that proposed the whole space has nothing left to find.
    let exhausted = result.stop == neuron_tune_search::Stop::Exhausted;
    let diagnoses: Vec<_> = crate::convergence::not_converged(
        &convergence,
        result.history.len(),
        exhausted,
        crate::convergence::GoOn::Replay,
    )
    .into_iter()
    .collect();
    let stopped_by = match result.stop {
        neuron_tune_search::Stop::EarlyStop => Some("early_stop"),
        neuron_tune_search::Stop::WallTime => Some("time"),
        _ => None,
    };
    out.event(&Event::Tune {
        kernel: landscape.name().to_string(),
        shape: None,
        dims: None,
        chip: None,
        best_params: best_params.clone(),
        best_time: *best_time,
        default_time: None,
        evaluations: result.history.len(),
        pruned: 0,
        invalid,
        faults: 0,
        seed,
        strategy: opts.strategy.clone(),
        best_so_far: result.best_so_far.clone(),
        journal: None,
        pareto: None,
        convergence: Box::new(convergence.clone()),
        diagnoses: diagnoses.clone(),
        rounds: vec![],
        goal: None,
        validated: None,
        kept: None,
        kept_record: None,
        stopped_by,
    });
    let unit = landscape.unit();
    out.result(format!(
        "  best {} {unit} after {}{}: {}",
        significant(*best_time),
        crate::convergence::count(result.history.len(), "evaluation"),
        super::stop_note(stopped_by, opts),
        landscape.space().describe(best)
    ));
    // optimum ≤ best: a best of 0 is the optimum itself (not 0/0).
    let reached = if *best_time == optimum { 100.0 } else { 100.0 * optimum / best_time };
    out.result(format!(
        "  the landscape's optimum is {} {unit} ({}): this run reached {reached:.1} % of it",
        significant(optimum),
        landscape.space().describe(optimum_config),
    ));
    out.result(format!("  convergence (best so far, {unit}): {}", curve(&result.best_so_far)));
    out.result(format!("  {}", crate::convergence::describe(&convergence)));
    if let Some(note) = valid_share_note(&landscape, convergence.whole_space) {
        out.result(format!("  {note}"));
    }
    for d in &diagnoses {
        for line in crate::convergence::diagnosis_lines(d) {
            out.result(format!("  {line}"));
        }
    }
    Ok(Exit::Ok)
}

/// The size of the landscape's space when the run tried all of it, as `tune` says it
/// (`Convergence::whole_space`): every configuration the landscape records as valid was
/// evaluated; the others are refused by its oracle before evaluation, as the kernel's rule
/// refuses them in `tune`. Its best is then the landscape's optimum.
fn whole_space(landscape: &Landscape, history: &[neuron_tune_search::Trial]) -> Option<u64> {
    let tried: std::collections::HashSet<&neuron_tune_search::Config> =
        history.iter().map(|t| &t.config).filter(|c| landscape.is_valid(c)).collect();
    (tried.len() == landscape.valid_values().len()).then(|| landscape.space().len() as u64)
}

/// When a run tried the whole space of a landscape most of which is invalid (a truncated
/// cache's unreached configurations, or a space mostly refused by its restrictions), how
/// few were valid: "the whole space" alone would read as 10,240 configurations measured.
fn valid_share_note(landscape: &Landscape, whole_space: Option<u64>) -> Option<String> {
    let space = whole_space?;
    let valid = landscape.valid_values().len() as u64;
    (valid > 0 && valid < space).then(|| {
        format!(
            "{valid} of the {space} configurations are valid ({:.2} %); the landscape refuses \
             the rest before evaluation, so the run evaluated only those {valid}",
            100.0 * valid as f64 / space as f64
        )
    })
}

/// `v` to 5 significant digits, whatever its scale (a landscape's unit may be seconds or
/// nanoseconds).
fn significant(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (4 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{v:.decimals$}")
}

/// The best-so-far curve at a few points, for a human.
pub fn curve(best_so_far: &[Option<f64>]) -> String {
    let n = best_so_far.len();
    let mut marks: Vec<usize> =
        [1, 5, 10, 25, 50, 100, 200, 500].into_iter().filter(|&m| m < n).collect();
    marks.push(n);
    marks
        .iter()
        .filter_map(|&m| {
            best_so_far.get(m - 1).copied().flatten().map(|v| format!("@{m} {}", significant(v)))
        })
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use neuron_tune_search::{builtin, run, Budget, Landscape};

    #[test]
    fn a_grid_over_the_whole_landscape_searched_the_whole_space() {
        // Four configurations: three measured, one that failed (refused by the oracle).
        let doc = serde_json::json!({
            "tune_params": {"a": [1, 2], "b": [1, 2]},
            "tune_params_keys": ["a", "b"],
            "cache": {
                "1,1": {"a": 1, "b": 1, "time": 3.0},
                "1,2": {"a": 1, "b": 2, "time": 2.0},
                "2,1": {"a": 2, "b": 1, "time": "RuntimeFailedConfig"},
                "2,2": {"a": 2, "b": 2, "time": 1.5},
            },
        });
        let landscape = Landscape::from_kernel_tuner(&doc, "t").unwrap();
        let replay = |budget: usize| {
            let mut strategy = builtin("grid", 1).unwrap();
            let mut oracle = landscape.oracle();
            let mut evaluate = |c: &neuron_tune_search::Config| landscape.outcome(c);
            let budget = Budget::evaluations(budget);
            run(&mut *strategy, landscape.space(), &mut oracle, &mut evaluate, budget, None)
                .unwrap()
                .history
        };
        // Every valid configuration evaluated: the whole space of 4, as `tune` says it.
        let all = replay(10);
        assert_eq!(super::whole_space(&landscape, &all), Some(4));
        let c = crate::convergence::Convergence {
            whole_space: super::whole_space(&landscape, &all),
            ..crate::convergence::analyze(&[Some(3.0), Some(2.0), Some(1.5)], 0, 0, 0)
        };
        assert!(crate::convergence::describe(&c).starts_with("searched the whole space (4 "));
        // Of the 4, 3 are valid: said, since "the whole space" alone reads as 4 measured.
        let note = super::valid_share_note(&landscape, c.whole_space).unwrap();
        assert!(note.starts_with("3 of the 4 configurations are valid (75.00 %)"), "{note}");
        assert_eq!(super::valid_share_note(&landscape, None), None);
        // Stopped before the last valid one: not the whole space.
        let two = replay(2);
        assert_eq!(two.len(), 2);
        assert_eq!(super::whole_space(&landscape, &two), None);
    }

    #[test]
    fn values_keep_five_significant_digits_at_any_scale() {
        assert_eq!(super::significant(1234.5678), "1234.6");
        assert_eq!(super::significant(1.2345678), "1.2346");
        assert_eq!(super::significant(0.00123456), "0.0012346");
        assert_eq!(super::significant(98765432.1), "98765432");
        assert_eq!(super::significant(0.0), "0");
    }
}
