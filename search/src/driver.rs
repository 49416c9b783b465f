//! A small synchronous driver: ask, evaluate, tell, until a budget or early stop.
//!
//! [`run`] is what replays and benchmarks need. It is deliberately thin: a parallel or
//! journaled driver uses the same [`Strategy`] ask/tell calls directly (ask `n` times, evaluate
//! in parallel, tell the outcomes in proposal order to stay deterministic).

use std::time::{Duration, Instant};

use crate::space::{Config, Oracle, Space};
use crate::strategy::{Ctx, Outcome, Strategy};
use crate::SearchError;

/// Measures configurations.
pub trait Evaluator {
    /// The outcome of `config`.
    fn evaluate(&mut self, config: &Config) -> Outcome;
}

impl<F: FnMut(&Config) -> Outcome> Evaluator for F {
    fn evaluate(&mut self, config: &Config) -> Outcome {
        self(config)
    }
}

/// When to stop. Unset limits do not apply; with neither set, the run goes until the strategy
/// is exhausted (or the early stop fires).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Budget {
    /// At most this many evaluations.
    pub evaluations: Option<usize>,
    /// No new evaluation starts after this much wall time.
    pub wall_time: Option<Duration>,
}

impl Budget {
    /// A budget of `n` evaluations.
    pub fn evaluations(n: usize) -> Self {
        Budget { evaluations: Some(n), wall_time: None }
    }
}

/// One evaluated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Trial {
    /// What was evaluated.
    pub config: Config,
    /// What it gave.
    pub outcome: Outcome,
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The evaluation budget was used.
    Evaluations,
    /// The wall-time budget was used.
    WallTime,
    /// No improvement within the early-stop window.
    EarlyStop,
    /// The strategy had nothing left to propose.
    Exhausted,
}

/// A run's record.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// Every evaluation, in order.
    pub history: Vec<Trial>,
    /// `best_so_far[i]`: the best value among the first `i + 1` evaluations (`None` while
    /// every one was invalid).
    pub best_so_far: Vec<Option<f64>>,
    /// The best configuration and its value.
    pub best: Option<(Config, f64)>,
    /// Why the run stopped.
    pub stop: Stop,
}

/// Run `strategy` against `evaluator` until the budget is spent, the strategy is exhausted,
/// or (with `early_stop = Some(w)`) `w` evaluations in a row bring no improvement. The seed
/// is the strategy's own (given when it was built), so a run is deterministic whenever the
/// evaluator is.
pub fn run(
    strategy: &mut dyn Strategy,
    space: &Space,
    oracle: &mut dyn Oracle,
    evaluator: &mut dyn Evaluator,
    budget: Budget,
    early_stop: Option<usize>,
) -> Result<RunResult, SearchError> {
    let start = Instant::now();
    let mut result = RunResult {
        history: Vec::new(),
        best_so_far: Vec::new(),
        best: None,
        stop: Stop::Exhausted,
    };
    let mut since_improvement = 0;
    loop {
        if budget.evaluations.is_some_and(|n| result.history.len() >= n) {
            result.stop = Stop::Evaluations;
            break;
        }
        if budget.wall_time.is_some_and(|t| start.elapsed() >= t) {
            result.stop = Stop::WallTime;
            break;
        }
        if early_stop.is_some_and(|w| since_improvement >= w) {
            result.stop = Stop::EarlyStop;
            break;
        }
        let Some(config) = strategy.ask(&mut Ctx::new(space, oracle))? else {
            result.stop = Stop::Exhausted;
            break;
        };
        let outcome = evaluator.evaluate(&config);
        strategy.tell(&config, outcome);
        match outcome.value() {
            Some(v) if result.best.as_ref().is_none_or(|(_, b)| v < *b) => {
                result.best = Some((config.clone(), v));
                since_improvement = 0;
            }
            _ => since_improvement += 1,
        }
        result.best_so_far.push(result.best.as_ref().map(|(_, v)| *v));
        result.history.push(Trial { config, outcome });
    }
    Ok(result)
}
