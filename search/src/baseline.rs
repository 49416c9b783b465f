//! The exact random-search baseline, from order statistics.
//!
//! Valid-only random search without replacement draws `k` distinct configurations uniformly
//! from the `N` valid ones. With their values sorted ascending, `v_1 <= ... <= v_N`, the best
//! of the `k` draws is `v_i` with probability
//!
//! ```text
//! P(min = v_i) = C(N - i, k - 1) / C(N, k)
//! ```
//!
//! (the draw includes position `i` and its other `k - 1` members all come from the `N - i`
//! positions after it). The probabilities are computed by the ratio recurrence
//! `p_1 = k / N`, `p_{i+1} = p_i (N - i - k + 1) / (N - i)`, every factor at most 1, so there
//! is no overflow and nothing larger than a probability is ever formed. Ties need no special
//! care: positions, not values, are what is drawn.

/// `E[f(best of k)]` for valid-only random search without replacement over `sorted` (the
/// valid values, ascending). `k` is clamped to `1..=N`; `None` if there are no values.
pub fn expected_of_best(sorted: &[f64], k: usize, f: impl Fn(f64) -> f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "values must be sorted");
    let k = k.clamp(1, n);
    let mut p = k as f64 / n as f64;
    let mut sum = 0.0;
    for i in 1..=n - k + 1 {
        sum += p * f(sorted[i - 1]);
        // p_{i+1} = p_i * (N - i - k + 1) / (N - i)
        if i < n {
            p *= (n - i + 1 - k) as f64 / (n - i) as f64;
        }
        if p == 0.0 {
            break;
        }
    }
    Some(sum)
}

/// The expected best value after `k` evaluations of random search.
pub fn expected_best(sorted: &[f64], k: usize) -> Option<f64> {
    expected_of_best(sorted, k, |v| v)
}

/// The expected fraction of the optimum reached, `E[v_1 / best]`, after `k` evaluations.
pub fn expected_fraction_of_optimum(sorted: &[f64], k: usize) -> Option<f64> {
    let opt = *sorted.first()?;
    expected_of_best(sorted, k, |v| opt / v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every k-subset of 0..n, by recursion.
    fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
        if k == 0 {
            return vec![vec![]];
        }
        if n < k {
            return vec![];
        }
        let mut out = subsets(n - 1, k);
        for mut s in subsets(n - 1, k - 1) {
            s.push(n - 1);
            out.push(s);
        }
        out
    }

    #[test]
    fn matches_brute_force_on_a_tiny_landscape() {
        let values = [1.0, 1.5, 1.5, 2.0, 3.5, 7.0, 9.0];
        for k in 1..=values.len() {
            let all = subsets(values.len(), k);
            let brute_best: f64 = all
                .iter()
                .map(|s| s.iter().map(|&i| values[i]).fold(f64::INFINITY, f64::min))
                .sum::<f64>()
                / all.len() as f64;
            let brute_frac: f64 = all
                .iter()
                .map(|s| 1.0 / s.iter().map(|&i| values[i]).fold(f64::INFINITY, f64::min))
                .sum::<f64>()
                / all.len() as f64;
            let exact = expected_best(&values, k).unwrap();
            let frac = expected_fraction_of_optimum(&values, k).unwrap();
            assert!((exact - brute_best).abs() < 1e-12, "k={k}: {exact} vs {brute_best}");
            assert!((frac - brute_frac).abs() < 1e-12, "k={k}: {frac} vs {brute_frac}");
        }
        assert_eq!(expected_best(&values, values.len()), Some(1.0));
        assert_eq!(expected_best(&[], 3), None);
    }

    #[test]
    fn probabilities_sum_to_one_on_large_inputs() {
        let values: Vec<f64> = (0..20_000).map(|i| i as f64).collect();
        for k in [1, 25, 200, 19_999, 20_000] {
            let total = expected_of_best(&values, k, |_| 1.0).unwrap();
            assert!((total - 1.0).abs() < 1e-9, "k={k}: {total}");
        }
        // E[min of 1 draw] is the mean.
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((expected_best(&values, 1).unwrap() - mean).abs() < 1e-6);
    }
}
