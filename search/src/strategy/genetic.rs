//! A steady-state genetic algorithm, valid only.
//!
//! The first `population` proposals are uniform random valid configurations. After that the
//! population is the `population` best configurations told so far (elitist replacement), and
//! each proposal is a child of two parents chosen by tournament selection (the best of
//! `tournament` random members): uniform crossover, then mutation of each gene with
//! probability `1 / dims` (for ordinal dimensions usually to an adjacent level). A child that
//! was proposed before or that the oracle rejects is bred again, up to a bound, after which a
//! random valid configuration is proposed instead. Being steady-state (one child per ask), it
//! needs no generation barrier, so batched asks work.

use crate::rng::Rng;
use crate::space::{Config, Space};
use crate::strategy::{Ctx, FreshSampler, Memory, Outcome, Strategy};
use crate::SearchError;

/// The `genetic` strategy.
#[derive(Clone, Debug)]
pub struct Genetic {
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
    /// Population size.
    pub population: usize,
    /// Tournament size.
    pub tournament: usize,
}

impl Genetic {
    /// A GA with default settings, seeded.
    pub fn new(seed: u64) -> Self {
        Genetic {
            rng: Rng::new(seed),
            sampler: FreshSampler::new(),
            memory: Memory::default(),
            population: 16,
            tournament: 3,
        }
    }

    fn select<'a>(&mut self, pop: &'a [(Config, f64)]) -> &'a Config {
        // Population is sorted best first, so the smallest index drawn wins.
        let k = self.tournament.max(1);
        let winner = (0..k).map(|_| self.rng.index(pop.len())).min().expect("k >= 1");
        &pop[winner].0
    }

    fn mutate(&mut self, space: &Space, child: &mut Config, rate: f64) {
        for (d, dim) in space.dims().iter().enumerate() {
            if dim.len() < 2 || !self.rng.chance(rate) {
                continue;
            }
            let here = child.0[d];
            child.0[d] = if dim.is_ordinal() && self.rng.chance(0.7) {
                let r = dim.rank(here) as i64 + if self.rng.chance(0.5) { -1 } else { 1 };
                dim.level_at_rank(r.clamp(0, dim.len() as i64 - 1) as u32)
            } else {
                let other = self.rng.index(dim.len() - 1) as u32;
                if other >= here {
                    other + 1
                } else {
                    other
                }
            };
        }
    }

    fn breed(&mut self, ctx: &mut Ctx<'_>) -> Option<Config> {
        let mut pop = self.memory.ranked();
        pop.truncate(self.population);
        if pop.len() < 2 {
            return None;
        }
        let dims = ctx.space.dims().len() as f64;
        for attempt in 0..64 {
            let a = self.select(&pop).clone();
            let b = self.select(&pop).clone();
            let mut child = Config(
                a.0.iter()
                    .zip(&b.0)
                    .map(|(&x, &y)| if self.rng.chance(0.5) { x } else { y })
                    .collect(),
            );
            // Mutate harder the more often breeding has produced nothing new.
            let rate = (1.0 + attempt as f64 / 8.0) / dims;
            self.mutate(ctx.space, &mut child, rate);
            if !self.memory.seen(&child) && ctx.valid(&child) {
                return Some(child);
            }
        }
        None
    }
}

impl Strategy for Genetic {
    fn name(&self) -> &str {
        "genetic"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let c = if self.memory.proposed.len() >= self.population { self.breed(ctx) } else { None };
        let c = c.or_else(|| self.sampler.next(&self.memory, ctx, &mut self.rng));
        if let Some(c) = &c {
            self.memory.propose(c);
        }
        Ok(c)
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.memory.tell(config, outcome);
    }
}
