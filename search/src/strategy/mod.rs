//! Search strategies as ask/tell objects.
//!
//! A [`Strategy`] proposes configurations one at a time ([`Strategy::ask`]) and learns from
//! their measured [`Outcome`]s ([`Strategy::tell`]). It never proposes a configuration twice,
//! and the built-in ones never propose one the [`Oracle`] rejects ("valid only"). Asks may run
//! ahead of tells, so a caller can take a batch of `n` proposals, evaluate them in parallel,
//! and tell the outcomes afterwards: proposals that are still pending count as taken.
//!
//! Determinism: every strategy draws from its own [`Rng`] seeded by the `u64` it was built
//! with, and keeps no state that depends on hashing order or time. The same seed and the same
//! sequence of asks and tells (with the same outcomes) give the same proposals, byte for byte,
//! batched or not.
//!
//! Built-in strategies, by name ([`builtin`]):
//! * `grid`    — index order, skipping configurations the oracle rejects.
//! * `random`  — uniform without replacement among valid configurations.
//! * `bayes`   — a multivariate tree-structured Parzen estimator ([`bayes::Tpe`]).
//! * `anneal`  — simulated annealing over Hamming-1 neighbours.
//! * `genetic` — a steady-state genetic algorithm (tournament selection, uniform crossover,
//!   ordinal-aware mutation).
//! * `default` — a portfolio: a short random warm-up, then an iterated local search (first
//!   improvement over neighbours ranked by TPE for adjacent moves and by a main-effects model,
//!   [`additive::Additive`], for far ones; moves told worse one parameter away last;
//!   two-dimension kicks at confirmed local optima),
//!   with TPE proposing when the local search has nothing to offer.

use std::collections::HashSet;

use crate::rng::Rng;
use crate::space::{Config, Oracle, Space, UniformSampler, DEFAULT_MAX_REJECTIONS};
use crate::SearchError;

pub mod additive;
pub mod anneal;
pub mod bayes;
pub mod genetic;
pub mod portfolio;

/// What evaluating a configuration gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// A measured value; lower is better.
    Value(f64),
    /// It failed to compile, run or pass its check.
    Invalid,
}

impl Outcome {
    /// The value, if valid and finite.
    pub fn value(self) -> Option<f64> {
        match self {
            Outcome::Value(v) if v.is_finite() => Some(v),
            _ => None,
        }
    }
}

/// What a strategy may consult while proposing: the space and the validity oracle.
pub struct Ctx<'a> {
    /// The space searched.
    pub space: &'a Space,
    /// The validity oracle.
    pub oracle: &'a mut dyn Oracle,
}

impl<'a> Ctx<'a> {
    /// A context over `space` with `oracle`.
    pub fn new(space: &'a Space, oracle: &'a mut dyn Oracle) -> Self {
        Ctx { space, oracle }
    }

    /// Whether the oracle accepts `config`.
    pub fn valid(&mut self, config: &Config) -> bool {
        self.oracle.is_valid(config)
    }
}

/// An ask/tell search strategy.
pub trait Strategy {
    /// The strategy's name (as given to [`builtin`]).
    fn name(&self) -> &str;

    /// The next configuration to evaluate, `Ok(None)` when the strategy has nothing left to
    /// propose (the valid space is exhausted, or a proposer said it is done). Never a
    /// configuration proposed before. Built-in strategies never fail; an external proposer
    /// can.
    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError>;

    /// The outcome of a configuration this strategy proposed.
    fn tell(&mut self, config: &Config, outcome: Outcome);
}

/// The names [`builtin`] accepts.
pub const BUILTIN: [&str; 6] = ["default", "grid", "random", "bayes", "anneal", "genetic"];

/// A built-in strategy by name, seeded; `None` for an unknown name.
pub fn builtin(name: &str, seed: u64) -> Option<Box<dyn Strategy>> {
    Some(match name {
        "default" => Box::new(portfolio::Portfolio::new(seed)),
        "grid" => Box::new(Grid::new()),
        "random" => Box::new(Random::new(seed)),
        "bayes" => Box::new(bayes::Bayes::new(seed)),
        "anneal" => Box::new(anneal::Anneal::new(seed)),
        "genetic" => Box::new(genetic::Genetic::new(seed)),
        _ => return None,
    })
}

/// What every strategy remembers: what it proposed and what it learned.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// Every configuration proposed (pending or told).
    pub proposed: HashSet<Config>,
    /// Told results with a value, in tell order.
    pub values: Vec<(Config, f64)>,
    /// Told results that were invalid, in tell order.
    pub invalid: Vec<Config>,
    /// The best told result.
    pub best: Option<(Config, f64)>,
}

impl Memory {
    /// Record a proposal; false if it was proposed before.
    pub fn propose(&mut self, config: &Config) -> bool {
        self.proposed.insert(config.clone())
    }

    /// Whether `config` was proposed.
    pub fn seen(&self, config: &Config) -> bool {
        self.proposed.contains(config)
    }

    /// Record an outcome.
    pub fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.proposed.insert(config.clone());
        match outcome.value() {
            Some(v) => {
                if self.best.as_ref().is_none_or(|(_, b)| v < *b) {
                    self.best = Some((config.clone(), v));
                }
                self.values.push((config.clone(), v));
            }
            None => self.invalid.push(config.clone()),
        }
    }

    /// Told values sorted best first (ties by tell order).
    pub fn ranked(&self) -> Vec<(Config, f64)> {
        let mut r = self.values.clone();
        r.sort_by(|a, b| a.1.total_cmp(&b.1));
        r
    }

    /// The first of `candidates` that is unproposed and valid.
    pub fn first_fresh(
        &self,
        candidates: impl IntoIterator<Item = Config>,
        ctx: &mut Ctx<'_>,
    ) -> Option<Config> {
        candidates.into_iter().find(|c| !self.seen(c) && ctx.valid(c))
    }
}

/// Uniform valid sampling that skips what a [`Memory`] has seen.
#[derive(Clone, Debug)]
pub struct FreshSampler {
    sampler: Option<UniformSampler>,
}

impl Default for FreshSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl FreshSampler {
    /// A sampler (it learns the space's size on first use).
    pub fn new() -> Self {
        FreshSampler { sampler: None }
    }

    /// A uniformly random valid configuration not yet proposed, or `None` when none is left
    /// (or the oracle rejected [`DEFAULT_MAX_REJECTIONS`] in a row).
    pub fn next(&mut self, memory: &Memory, ctx: &mut Ctx<'_>, rng: &mut Rng) -> Option<Config> {
        let space = ctx.space;
        let sampler = self.sampler.get_or_insert_with(|| UniformSampler::new(space.len()));
        let mut oracle = |c: &Config| !memory.seen(c) && ctx.oracle.is_valid(c);
        sampler.next_valid(space, rng, &mut oracle, DEFAULT_MAX_REJECTIONS)
    }
}

/// Every valid configuration in index order.
#[derive(Clone, Debug, Default)]
pub struct Grid {
    next: u128,
    memory: Memory,
}

impl Grid {
    /// A grid walk from index 0.
    pub fn new() -> Self {
        Grid::default()
    }
}

impl Strategy for Grid {
    fn name(&self) -> &str {
        "grid"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        while self.next < ctx.space.len() {
            let c = ctx.space.config(self.next);
            self.next += 1;
            if !self.memory.seen(&c) && ctx.valid(&c) {
                self.memory.propose(&c);
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.memory.tell(config, outcome);
    }
}

/// Uniform random search among valid configurations, without replacement.
#[derive(Clone, Debug)]
pub struct Random {
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
}

impl Random {
    /// A random search seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Random { rng: Rng::new(seed), sampler: FreshSampler::new(), memory: Memory::default() }
    }
}

impl Strategy for Random {
    fn name(&self) -> &str {
        "random"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let c = self.sampler.next(&self.memory, ctx, &mut self.rng);
        if let Some(c) = &c {
            self.memory.propose(c);
        }
        Ok(c)
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.memory.tell(config, outcome);
    }
}
