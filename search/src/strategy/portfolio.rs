//! The default strategy: a portfolio of random warm-up, TPE and greedy neighbourhood search.
//!
//! * The first `warmup` proposals are uniform random valid configurations, to seed the model.
//! * After that, proposals alternate between TPE ([`Tpe`], global: where good configurations
//!   are likely) and a greedy neighbourhood search (local: the unproposed valid Hamming-1
//!   neighbours of the best configuration told so far, adjacent ordinal levels first; when
//!   the best one's neighbourhood is used up, the second best's, and so on). The local share
//!   is `local_share` of the proposals.
//! * If neither produces anything, a random valid configuration is proposed, so the
//!   strategy only runs dry when the valid space is exhausted.
//!
//! The neighbourhood search turns a good region found by the model into its local optimum in
//! a few evaluations, which TPE's sampling alone does slowly on spaces with many dimensions;
//! TPE in turn moves the search to new regions when the neighbourhoods run out.

use crate::rng::Rng;
use crate::space::Config;
use crate::strategy::bayes::Tpe;
use crate::strategy::{Ctx, FreshSampler, Memory, Outcome, Strategy};
use crate::SearchError;

/// The `default` strategy.
#[derive(Clone, Debug)]
pub struct Portfolio {
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
    tpe: Tpe,
    /// Random proposals first.
    pub warmup: usize,
    /// The share of proposals after warm-up that come from the neighbourhood search.
    pub local_share: f64,
    /// How many of the best configurations' neighbourhoods the local search considers.
    pub local_depth: usize,
    local_credit: f64,
}

impl Portfolio {
    /// The default portfolio, seeded.
    pub fn new(seed: u64) -> Self {
        Portfolio {
            rng: Rng::new(seed),
            sampler: FreshSampler::new(),
            memory: Memory::default(),
            tpe: Tpe::default(),
            warmup: 10,
            local_share: 0.5,
            local_depth: 5,
            local_credit: 0.0,
        }
    }

    fn local(&mut self, ctx: &mut Ctx<'_>) -> Option<Config> {
        let ranked = self.memory.ranked();
        for (c, _) in ranked.iter().take(self.local_depth) {
            if let Some(n) = self.memory.first_fresh(ctx.space.neighbours(c), ctx) {
                return Some(n);
            }
        }
        None
    }
}

impl Strategy for Portfolio {
    fn name(&self) -> &str {
        "default"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let mut c = None;
        if self.memory.proposed.len() >= self.warmup && !self.memory.values.is_empty() {
            // Deterministic interleaving: local search takes `local_share` of the turns.
            self.local_credit += self.local_share;
            if self.local_credit >= 1.0 {
                self.local_credit -= 1.0;
                c = self.local(ctx);
            }
            if c.is_none() {
                c = self.tpe.propose(&self.memory, ctx, &mut self.rng);
            }
        }
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
