//! The default strategy: a portfolio of random warm-up, TPE and greedy neighbourhood search.
//!
//! * The first `warmup` proposals are uniform random valid configurations, to seed the model.
//! * After that, proposals alternate between TPE ([`Tpe`], global: where good configurations
//!   are likely) and a greedy neighbourhood search (local: of the unproposed valid Hamming-1
//!   neighbours of the best configuration told so far, the one TPE scores highest; when the
//!   best one's neighbourhood is used up, the second best's, and so on). The local share is
//!   `local_share` of the proposals. Optional knobs, off by default: a uniform-random
//!   exploration share, and a cap on the neighbours tried per incumbent.
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
    /// The TPE settings.
    pub tpe: Tpe,
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
    /// Random proposals first.
    pub warmup: usize,
    /// The share of proposals after warm-up that come from the neighbourhood search.
    pub local_share: f64,
    /// How many of the best configurations' neighbourhoods the local search considers.
    pub local_depth: usize,
    /// How many neighbours of one incumbent the local search tries before it leaves the
    /// rest of that neighbourhood to the model.
    pub local_tries: usize,
    /// The share of proposals after warm-up that are uniform random (exploration).
    pub explore_share: f64,
    local_credit: f64,
    explore_credit: f64,
    /// The incumbent the local search works on, and how many of its neighbours it tried.
    local_from: Option<Config>,
    local_count: usize,
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
            local_tries: usize::MAX,
            explore_share: 0.0,
            local_credit: 0.0,
            explore_credit: 0.0,
            local_from: None,
            local_count: 0,
        }
    }

    /// The most promising (by the TPE model) unproposed valid neighbour of the best
    /// configuration whose neighbourhood is not used up.
    fn local(&mut self, ctx: &mut Ctx<'_>) -> Option<Config> {
        let space = ctx.space;
        let model = self.tpe.model(&self.memory, space)?;
        let incumbent = self.memory.best.as_ref().map(|(c, _)| c.clone());
        if incumbent != self.local_from {
            self.local_from = incumbent;
            self.local_count = 0;
        }
        if self.local_count >= self.local_tries {
            return None;
        }
        self.local_count += 1;
        let ranked = self.memory.ranked();
        for (c, _) in ranked.iter().take(self.local_depth) {
            let best = space
                .neighbours(c)
                .into_iter()
                .filter(|n| !self.memory.seen(n) && ctx.valid(n))
                .map(|n| (model.score(&n), n))
                .reduce(|a, b| if b.0 > a.0 { b } else { a });
            if let Some((_, n)) = best {
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
            self.explore_credit += self.explore_share;
            if c.is_none() && self.explore_credit >= 1.0 {
                self.explore_credit -= 1.0;
                c = self.sampler.next(&self.memory, ctx, &mut self.rng);
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
