//! The Pareto front of points with several objectives, all minimised.
//!
//! A point *dominates* another when it is no worse in every objective and better in at least
//! one. The front is the set of points no other point dominates; equal points are all kept.
//! `NaN` counts as worse than any number.

use std::cmp::Ordering;

fn key(x: f64) -> f64 {
    if x.is_nan() {
        f64::INFINITY
    } else {
        x
    }
}

/// Whether `a` dominates `b` (same length; minimisation).
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    let mut better = false;
    for (&x, &y) in a.iter().zip(b) {
        match key(x).total_cmp(&key(y)) {
            Ordering::Greater => return false,
            Ordering::Less => better = true,
            Ordering::Equal => {}
        }
    }
    better
}

/// The indices of the non-dominated points, ascending. All points must have the same number
/// of objectives.
pub fn pareto_front(points: &[Vec<f64>]) -> Vec<usize> {
    // Sort by the objectives' sum (NaN last): a point can only be dominated by one with a
    // smaller or equal sum, so each point is checked against the front found so far.
    let mut order: Vec<usize> = (0..points.len()).collect();
    let sum = |i: usize| points[i].iter().map(|&x| key(x)).sum::<f64>();
    order.sort_by(|&a, &b| sum(a).total_cmp(&sum(b)).then(a.cmp(&b)));
    let mut front: Vec<usize> = Vec::new();
    for i in order {
        if !front.iter().any(|&f| dominates(&points[f], &points[i])) {
            front.push(i);
        }
    }
    front.sort_unstable();
    front
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_example() {
        let pts =
            vec![vec![1.0, 5.0], vec![2.0, 2.0], vec![3.0, 3.0], vec![5.0, 1.0], vec![2.0, 2.0]];
        assert_eq!(pareto_front(&pts), vec![0, 1, 3, 4]);
        assert!(dominates(&[1.0, 1.0], &[1.0, 2.0]));
        assert!(!dominates(&[1.0, 1.0], &[1.0, 1.0]));
        assert!(dominates(&[1.0], &[f64::NAN]));
    }

    proptest! {
        #[test]
        fn front_is_exactly_the_non_dominated_set(
            pts in prop::collection::vec(prop::collection::vec(0u8..6, 3), 0..40)
        ) {
            let pts: Vec<Vec<f64>> =
                pts.into_iter().map(|p| p.into_iter().map(f64::from).collect()).collect();
            let front = pareto_front(&pts);
            for &f in &front {
                prop_assert!(pts.iter().all(|p| !dominates(p, &pts[f])));
            }
            for (i, p) in pts.iter().enumerate() {
                prop_assert!(
                    front.iter().any(|&f| f == i || dominates(&pts[f], p) || pts[f] == *p),
                    "point {} is neither on the front nor covered", i
                );
                if !front.contains(&i) {
                    prop_assert!(pts.iter().any(|q| dominates(q, p)));
                }
            }
        }
    }
}
