//! Bayesian optimisation with a multivariate tree-structured Parzen estimator (TPE).
//!
//! TPE (Bergstra et al., 2011) splits the told results into a *good* group (the best
//! `gamma` fraction) and a *bad* group (the rest, plus every invalid result), fits a Parzen
//! (kernel) density to each, `l(x)` and `g(x)`, draws candidates from `l`, and proposes the
//! candidate maximising `l(x) / g(x)`, which is proportional to expected improvement.
//!
//! The densities here are *multivariate* (Falkner et al., 2018): each observation contributes
//! one product kernel over all dimensions, so interactions between parameters (a tile size
//! that is only good with a certain block size) are modelled. Kernels are discrete:
//! * ordinal dimensions: a Gaussian over value *ranks* (so 1, 2, 4, 8 are evenly spaced),
//!   normalised over the dimension's levels, with a bandwidth that shrinks as the group grows;
//! * categorical dimensions: Aitchison–Aitken, keeping the observed level with high
//!   probability and spreading the rest evenly.
//!
//! A uniform prior component keeps every configuration reachable. Constraints are handled
//! through the oracle: candidates the oracle rejects are never scored or proposed, and
//! configurations that were told invalid weigh in the bad group.

use crate::rng::Rng;
use crate::space::{Config, Space};
use crate::strategy::{Ctx, FreshSampler, Memory, Outcome, Strategy};
use crate::SearchError;

/// TPE's settings and proposal step, reusable by other strategies.
#[derive(Clone, Debug)]
pub struct Tpe {
    /// The good group's share of the told results.
    pub gamma: f64,
    /// The good group's largest size.
    pub max_good: usize,
    /// How many valid candidates are drawn from `l(x)` and scored per proposal.
    pub candidates: usize,
    /// The uniform prior's weight, in observations.
    pub prior_weight: f64,
    /// Ordinal kernel bandwidth, as a fraction of the dimension's rank range.
    pub bandwidth: f64,
    /// One product kernel per observation (true), or independent per-dimension densities.
    pub multivariate: bool,
}

impl Default for Tpe {
    fn default() -> Self {
        Tpe {
            gamma: 0.15,
            max_good: 20,
            candidates: 48,
            prior_weight: 1.0,
            bandwidth: 0.05,
            multivariate: true,
        }
    }
}

/// Discrete kernel tables for one group: `table[d][centre][level]`.
struct Kernels {
    table: Vec<Vec<Vec<f64>>>,
}

impl Kernels {
    fn new(space: &Space, tpe: &Tpe, group: usize) -> Kernels {
        let n = group.max(1) as f64;
        let table = space
            .dims()
            .iter()
            .map(|dim| {
                let l = dim.len();
                (0..l as u32)
                    .map(|centre| {
                        let mut row: Vec<f64> = if dim.is_ordinal() {
                            let span = (l - 1).max(1) as f64;
                            let sigma = (tpe.bandwidth * span * n.powf(-0.2)).max(0.5);
                            let rc = dim.rank(centre) as f64;
                            (0..l as u32)
                                .map(|x| {
                                    let z = (dim.rank(x) as f64 - rc) / sigma;
                                    (-0.5 * z * z).exp()
                                })
                                .collect()
                        } else {
                            let keep = if l == 1 { 1.0 } else { 1.0 - 0.5 / n.sqrt().max(1.0) };
                            let other = if l == 1 { 0.0 } else { (1.0 - keep) / (l - 1) as f64 };
                            (0..l as u32).map(|x| if x == centre { keep } else { other }).collect()
                        };
                        let total: f64 = row.iter().sum();
                        row.iter_mut().for_each(|p| *p /= total);
                        row
                    })
                    .collect()
            })
            .collect();
        Kernels { table }
    }

    /// The mixture density at `x` of kernels centred on `centres`, plus the uniform prior.
    fn density(&self, x: &Config, centres: &[&Config], prior: f64, uniform: f64) -> f64 {
        let mut sum = prior * uniform;
        for c in centres {
            let mut p = 1.0;
            for (d, t) in self.table.iter().enumerate() {
                p *= t[c.0[d] as usize][x.0[d] as usize];
            }
            sum += p;
        }
        sum / (prior + centres.len() as f64)
    }

    /// The product over dimensions of per-dimension mixtures (the univariate TPE density).
    fn density_independent(&self, x: &Config, centres: &[&Config], prior: f64) -> f64 {
        let mut p = 1.0;
        for (d, t) in self.table.iter().enumerate() {
            let l = t.len() as f64;
            let sum: f64 = centres.iter().map(|c| t[c.0[d] as usize][x.0[d] as usize]).sum();
            p *= (prior / l + sum) / (prior + centres.len() as f64);
        }
        p
    }

    /// A draw from the kernel centred on `centre`.
    fn sample(&self, centre: &Config, rng: &mut Rng) -> Config {
        Config(
            self.table
                .iter()
                .enumerate()
                .map(|(d, t)| {
                    let row = &t[centre.0[d] as usize];
                    let mut u = rng.unit();
                    for (x, p) in row.iter().enumerate() {
                        if u < *p {
                            return x as u32;
                        }
                        u -= p;
                    }
                    row.len() as u32 - 1
                })
                .collect(),
        )
    }
}

impl Tpe {
    /// The size of the good group among `n` told values.
    pub fn good_count(&self, n: usize) -> usize {
        ((self.gamma * n as f64).ceil() as usize).clamp(1, self.max_good)
    }

    /// The good/bad densities fitted to `memory`'s told results; `None` before any value.
    pub fn model<'m>(&self, memory: &'m Memory, space: &Space) -> Option<Model<'m>> {
        let ranked = memory.ranked();
        if ranked.is_empty() {
            return None;
        }
        let n_good = self.good_count(ranked.len());
        let (good, bad): (Vec<_>, Vec<_>) =
            ranked.into_iter().enumerate().partition(|(i, _)| *i < n_good);
        // Map back to references into `memory` so the model borrows, not clones.
        let find =
            |c: &Config| memory.values.iter().find(|(m, _)| m == c).map(|(m, _)| m).expect("told");
        let good: Vec<&Config> = good.iter().map(|(_, (c, _))| find(c)).collect();
        let bad: Vec<&Config> =
            bad.iter().map(|(_, (c, _))| find(c)).chain(memory.invalid.iter()).collect();
        Some(Model {
            kl: Kernels::new(space, self, good.len()),
            kg: Kernels::new(space, self, bad.len()),
            good,
            bad,
            prior: self.prior_weight,
            multivariate: self.multivariate,
            uniform: 1.0 / space.len() as f64,
        })
    }

    /// Propose an unproposed valid configuration by maximising `l(x) / g(x)` over candidates
    /// drawn from `l`, or `None` if no valid fresh candidate turned up (the caller then falls
    /// back to random sampling) or nothing was told yet.
    pub fn propose(&self, memory: &Memory, ctx: &mut Ctx<'_>, rng: &mut Rng) -> Option<Config> {
        let space = ctx.space;
        let model = self.model(memory, space)?;
        let prior_share = self.prior_weight / (self.prior_weight + model.good.len() as f64);
        let mut best: Option<(f64, Config)> = None;
        let mut scored = 0;
        let mut tries = 0;
        while scored < self.candidates && tries < self.candidates * 20 {
            tries += 1;
            let x = if rng.chance(prior_share) { space.random(rng) } else { model.sample(rng) };
            if memory.seen(&x) || !ctx.valid(&x) {
                continue;
            }
            scored += 1;
            let score = model.score(&x);
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, x));
            }
        }
        best.map(|(_, c)| c)
    }
}

/// TPE's fitted densities: `l` over the good results, `g` over the rest.
pub struct Model<'m> {
    kl: Kernels,
    kg: Kernels,
    good: Vec<&'m Config>,
    bad: Vec<&'m Config>,
    prior: f64,
    multivariate: bool,
    uniform: f64,
}

impl Model<'_> {
    /// A draw from `l` (without its prior component).
    fn sample(&self, rng: &mut Rng) -> Config {
        if self.multivariate {
            return self.kl.sample(self.good[rng.index(self.good.len())], rng);
        }
        // Independent dimensions: each from its own randomly chosen centre.
        let mut x = self.kl.sample(self.good[rng.index(self.good.len())], rng);
        for d in 1..x.0.len() {
            let other = self.kl.sample(self.good[rng.index(self.good.len())], rng);
            x.0[d] = other.0[d];
        }
        x
    }

    /// `log l(x) - log g(x)`: higher is more promising.
    pub fn score(&self, x: &Config) -> f64 {
        if !self.multivariate {
            let l = self.kl.density_independent(x, &self.good, self.prior);
            let g = self.kg.density_independent(x, &self.bad, self.prior);
            return l.ln() - g.ln();
        }
        let l = self.kl.density(x, &self.good, self.prior, self.uniform);
        let g = self.kg.density(x, &self.bad, self.prior, self.uniform);
        l.ln() - g.ln()
    }
}

/// The `bayes` strategy: random warm-up, then TPE proposals.
#[derive(Clone, Debug)]
pub struct Bayes {
    rng: Rng,
    sampler: FreshSampler,
    memory: Memory,
    tpe: Tpe,
    /// Random proposals before the model is used.
    pub warmup: usize,
}

impl Bayes {
    /// TPE with default settings, seeded.
    pub fn new(seed: u64) -> Self {
        Bayes::with(seed, Tpe::default(), 10)
    }

    /// TPE with the given settings and warm-up length.
    pub fn with(seed: u64, tpe: Tpe, warmup: usize) -> Self {
        Bayes {
            rng: Rng::new(seed),
            sampler: FreshSampler::new(),
            memory: Memory::default(),
            tpe,
            warmup,
        }
    }
}

impl Strategy for Bayes {
    fn name(&self) -> &str {
        "bayes"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let modelled = self.memory.proposed.len() >= self.warmup && !self.memory.values.is_empty();
        let c = modelled
            .then(|| self.tpe.propose(&self.memory, ctx, &mut self.rng))
            .flatten()
            .or_else(|| self.sampler.next(&self.memory, ctx, &mut self.rng));
        if let Some(c) = &c {
            self.memory.propose(c);
        }
        Ok(c)
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.memory.tell(config, outcome);
    }
}
