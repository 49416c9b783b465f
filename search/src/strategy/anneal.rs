//! Simulated annealing over Hamming-1 neighbours.
//!
//! The walk holds a *current* configuration. Each proposal is a random unproposed valid
//! neighbour of it (one dimension changed; for ordinal dimensions an adjacent level with
//! probability 3/4, any other level otherwise). When its outcome is told, the move is
//! accepted by the Metropolis rule on the *relative* change, `exp(-(v - v_cur) / (T v_cur))`,
//! so the temperature `T` means the same on every landscape; `T` decays geometrically with
//! each told result. A current configuration without fresh valid neighbours, or a walk that
//! has not improved for a while, restarts from the best configuration found or, half the time,
//! from a fresh random one.

use crate::rng::Rng;
use crate::space::Config;
use crate::strategy::{Ctx, FreshSampler, Memory, Outcome, Strategy};
use crate::SearchError;

/// The `anneal` strategy.
#[derive(Clone, Debug)]
pub struct Anneal {
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
    current: Option<(Config, f64)>,
    temperature: f64,
    /// The temperature's factor per told result.
    pub cooling: f64,
    /// Told results without a new best before a restart.
    pub patience: usize,
    since_best: usize,
}

impl Anneal {
    /// Annealing with default settings, seeded.
    pub fn new(seed: u64) -> Self {
        Anneal {
            rng: Rng::new(seed),
            sampler: FreshSampler::new(),
            memory: Memory::default(),
            current: None,
            temperature: 0.1,
            cooling: 0.98,
            patience: 40,
            since_best: 0,
        }
    }

    fn neighbour(&mut self, from: &Config, ctx: &mut Ctx<'_>) -> Option<Config> {
        let space = ctx.space;
        // A few random moves first (cheap), then every neighbour in a random order.
        for _ in 0..16 {
            let d = self.rng.index(space.dims().len());
            let dim = &space.dims()[d];
            if dim.len() < 2 {
                continue;
            }
            let mut c = from.clone();
            c.0[d] = if dim.is_ordinal() && self.rng.chance(0.75) {
                let r = dim.rank(from.0[d]) as i64;
                let step = if self.rng.chance(0.5) { -1 } else { 1 };
                let r = (r + step).clamp(0, dim.len() as i64 - 1);
                dim.level_at_rank(r as u32)
            } else {
                let other = self.rng.index(dim.len() - 1) as u32;
                if other >= from.0[d] {
                    other + 1
                } else {
                    other
                }
            };
            if c != *from && !self.memory.seen(&c) && ctx.valid(&c) {
                return Some(c);
            }
        }
        let mut all = space.neighbours(from);
        for i in (1..all.len()).rev() {
            all.swap(i, self.rng.index(i + 1));
        }
        self.memory.first_fresh(all, ctx)
    }
}

impl Strategy for Anneal {
    fn name(&self) -> &str {
        "anneal"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let mut proposal = None;
        if let Some((cur, _)) = self.current.clone() {
            proposal = self.neighbour(&cur, ctx);
            if proposal.is_none() {
                // Stuck: restart from the best, or from a random point.
                self.current = None;
                if let Some((best, _)) = self.memory.best.clone() {
                    if best != cur && self.rng.chance(0.5) {
                        proposal = self.neighbour(&best, ctx);
                    }
                }
            }
        }
        let c = proposal.or_else(|| self.sampler.next(&self.memory, ctx, &mut self.rng));
        if let Some(c) = &c {
            self.memory.propose(c);
        }
        Ok(c)
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        let improved_best =
            outcome.value().is_some_and(|v| self.memory.best.as_ref().is_none_or(|(_, b)| v < *b));
        self.memory.tell(config, outcome);
        self.since_best = if improved_best { 0 } else { self.since_best + 1 };
        self.temperature *= self.cooling;
        let Some(v) = outcome.value() else { return };
        let accept = match &self.current {
            None => true,
            Some((_, cur)) => {
                let delta = (v - cur) / cur.abs().max(f64::MIN_POSITIVE);
                delta <= 0.0 || self.rng.chance((-delta / self.temperature.max(1e-12)).exp())
            }
        };
        if accept {
            self.current = Some((config.clone(), v));
        }
        if self.since_best >= self.patience {
            self.since_best = 0;
            self.temperature = 0.1;
            self.current = match (&self.memory.best, self.rng.chance(0.5)) {
                (Some(best), true) => Some(best.clone()),
                _ => None,
            };
        }
    }
}
