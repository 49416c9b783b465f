//! A main-effects surrogate: ridge regression of log value on one-hot (dimension, level).
//!
//! The `default` strategy's local search ranks an *adjacent* move with TPE, whose product
//! kernels say what is good near where good results were. A *far* move (one parameter jumped
//! several levels, e.g. a block size from 8 to 2) lands where TPE has no nearby evidence, so
//! its density ratio is mostly the prior; what the results do say about such a move is how
//! the jumped parameter's levels compare *on average over everything told*. That is a
//! main-effects model: `ln value ≈ μ + Σ_d w[d][level_d]`, fitted by ridge regression
//! (Hoerl & Kennard, 1970), whose prediction for a one-parameter move is exactly the
//! difference of that parameter's two level effects. Levels never told shrink to 0 (the
//! average), so an untried level is neither favoured nor shunned.
//!
//! Values are modelled as logarithms (run times matter by ratio); a configuration told
//! invalid counts as the worst value told, so levels that fail weigh as bad. The normal
//! equations are small (one unknown per level of the space) and solved by a Cholesky
//! factorisation in a fixed order: the fit is deterministic.

use crate::space::{Config, Space};
use crate::strategy::Memory;

/// A fitted main-effects model.
#[derive(Clone, Debug)]
pub struct Additive {
    /// First weight of each dimension in `weights`.
    offsets: Vec<usize>,
    /// One effect per (dimension, level), in log units.
    weights: Vec<f64>,
    /// The mean log value the effects are relative to.
    mean: f64,
}

impl Additive {
    /// The model fitted to `memory`'s told results with ridge penalty `lambda` (> 0, in
    /// observations: a level's effect is shrunk as if `lambda` extra results at the mean had
    /// it); `None` before any value.
    pub fn fit(memory: &Memory, space: &Space, lambda: f64) -> Option<Additive> {
        if memory.values.is_empty() {
            return None;
        }
        let mut offsets = Vec::with_capacity(space.dims().len());
        let mut p = 0;
        for d in space.dims() {
            offsets.push(p);
            p += d.len();
        }
        let logs: Vec<f64> =
            memory.values.iter().map(|(_, v)| v.max(f64::MIN_POSITIVE).ln()).collect();
        let worst = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let rows: Vec<(&Config, f64)> = memory
            .values
            .iter()
            .map(|(c, _)| c)
            .zip(logs.iter().copied())
            .chain(memory.invalid.iter().map(|c| (c, worst)))
            .collect();
        let mean = rows.iter().map(|(_, y)| y).sum::<f64>() / rows.len() as f64;
        // Normal equations (XᵀX + λI) w = Xᵀ(y - mean), X one-hot per dimension.
        let mut a = vec![0.0; p * p];
        let mut b = vec![0.0; p];
        let mut active = Vec::with_capacity(offsets.len());
        for (c, y) in &rows {
            active.clear();
            active.extend(c.0.iter().zip(&offsets).map(|(&l, &o)| o + l as usize));
            for &i in &active {
                b[i] += y - mean;
                for &j in &active {
                    a[i * p + j] += 1.0;
                }
            }
        }
        for i in 0..p {
            a[i * p + i] += lambda;
        }
        let weights = solve_spd(&mut a, &b, p)?;
        Some(Additive { offsets, weights, mean })
    }

    /// The predicted log value of `config`.
    pub fn predict(&self, config: &Config) -> f64 {
        self.mean
            + config
                .0
                .iter()
                .zip(&self.offsets)
                .map(|(&l, &o)| self.weights[o + l as usize])
                .sum::<f64>()
    }
}

/// Solve `a x = b` for symmetric positive definite row-major `a` (`n`×`n`, overwritten by its
/// Cholesky factor); `None` if `a` is not positive definite.
fn solve_spd(a: &mut [f64], b: &[f64], n: usize) -> Option<Vec<f64>> {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    let mut x = b.to_vec();
    for i in 0..n {
        for k in 0..i {
            x[i] -= a[i * n + k] * x[k];
        }
        x[i] /= a[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            x[i] -= a[k * n + i] * x[k];
        }
        x[i] /= a[i * n + i];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Outcome;

    fn space() -> Space {
        Space::from_levels(vec![
            ("a", (0..6).map(crate::space::Level::Int).collect()),
            ("b", (0..4).map(crate::space::Level::Int).collect()),
        ])
        .unwrap()
    }

    /// `exp(effect_a + effect_b)`: exactly additive in logs.
    fn value(c: &Config) -> f64 {
        let ea = [0.0, 0.5, 1.0, 0.2, 2.0, 0.1][c.0[0] as usize];
        let eb = [0.3, 0.0, 1.5, 0.7][c.0[1] as usize];
        f64::exp(ea + eb)
    }

    #[test]
    fn solves_a_known_system() {
        // [[4, 2], [2, 3]] x = [2, 5] has x = [-0.5, 2].
        let mut a = vec![4.0, 2.0, 2.0, 3.0];
        let x = solve_spd(&mut a, &[2.0, 5.0], 2).unwrap();
        assert!((x[0] + 0.5).abs() < 1e-12 && (x[1] - 2.0).abs() < 1e-12, "{x:?}");
        assert!(solve_spd(&mut [1.0, 2.0, 2.0, 1.0], &[0.0, 0.0], 2).is_none());
    }

    #[test]
    fn recovers_an_additive_function_from_every_result() {
        let s = space();
        let mut m = Memory::default();
        for c in s.iter() {
            m.tell(&c, Outcome::Value(value(&c)));
        }
        // A tiny penalty: the fit is the least-squares one, exact for an additive function.
        let f = Additive::fit(&m, &s, 1e-9).unwrap();
        for c in s.iter() {
            assert!((f.predict(&c) - value(&c).ln()).abs() < 1e-6, "{c:?}");
        }
    }

    #[test]
    fn ranks_one_dimension_moves_like_the_truth_from_a_sample() {
        let s = space();
        let mut m = Memory::default();
        // A third of the configurations left out, among them the start and two of its
        // neighbours: the model predicts them from the levels' effects elsewhere.
        let told = |c: &Config| !(c.0[0] + c.0[1]).is_multiple_of(3);
        for c in s.iter().filter(told) {
            m.tell(&c, Outcome::Value(value(&c)));
        }
        // A small penalty: an additive truth is recovered (a large one shrinks the effects of
        // rarely told levels more, which can swap close moves).
        let f = Additive::fit(&m, &s, 0.01).unwrap();
        let from = Config(vec![0, 0]);
        assert!(!told(&from) && !told(&Config(vec![3, 0])) && !told(&Config(vec![0, 3])));
        let mut moves: Vec<Config> =
            (1..6).map(|a| Config(vec![a, 0])).chain((1..4).map(|b| Config(vec![0, b]))).collect();
        let mut truth = moves.clone();
        moves.sort_by(|x, y| f.predict(x).total_cmp(&f.predict(y)));
        truth.sort_by(|x, y| value(x).total_cmp(&value(y)));
        assert_eq!(moves, truth, "from {from:?}");
    }

    #[test]
    fn invalid_results_count_as_the_worst_and_unseen_levels_as_average() {
        let s = space();
        let mut m = Memory::default();
        for b in 0..4 {
            m.tell(&Config(vec![0, b]), Outcome::Value(2.0));
            m.tell(&Config(vec![1, b]), Outcome::Value(1.0));
            m.tell(&Config(vec![2, b]), Outcome::Invalid);
        }
        let f = Additive::fit(&m, &s, 1.0).unwrap();
        let p = |a: u32| f.predict(&Config(vec![a, 0]));
        // Level 2 only ever failed: as bad as level 0, the worst value told.
        assert!((p(2) - p(0)).abs() < 1e-12 && p(0) > p(1), "{} {} {}", p(0), p(1), p(2));
        // Level 3 was never told: its effect is 0, the prediction the mean.
        let mean = (4.0 * 2f64.ln() + 4.0 * 1f64.ln() + 4.0 * 2f64.ln()) / 12.0;
        let b0 = f.predict(&Config(vec![3, 0])) - mean;
        assert!((f.weights[f.offsets[1]] - b0).abs() < 1e-12);
        assert!(Additive::fit(&Memory::default(), &s, 1.0).is_none());
    }
}
