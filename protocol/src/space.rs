//! A search space that is never expanded: configurations by index.
//!
//! A kernel's space is a list of values per parameter; its size is the product of the list
//! lengths, which for a real kernel is easily 10¹² or more. [`Space`] numbers the
//! configurations in mixed radix (the last parameter, in name order, varies fastest), so a
//! configuration is a `u64` index: listing counts, iterating, sampling and neighbours all
//! work without enumerating. Validity (the kernel's rule) is not known here; it is the
//! harness's answer about a configuration.

use crate::params::{ParamValue, Params};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Values each parameter may take, in the stable order of parameter names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Space(pub BTreeMap<String, Vec<ParamValue>>);

impl Space {
    pub fn new(values: BTreeMap<String, Vec<ParamValue>>) -> Space {
        Space(values)
    }

    /// Number of configurations, saturating at `u64::MAX` (a parameter with no values makes
    /// the space empty).
    pub fn len(&self) -> u64 {
        self.0.values().fold(1u64, |n, v| n.saturating_mul(v.len() as u64))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`Space::len`] is exact (the product did not overflow).
    pub fn len_is_exact(&self) -> bool {
        self.0.values().try_fold(1u64, |n, v| n.checked_mul(v.len() as u64)).is_some()
    }

    /// The configuration at `index` (`None` past the end).
    pub fn get(&self, index: u64) -> Option<Params> {
        // A saturated `len` is u64::MAX, so every index below it exists.
        if index >= self.len() {
            return None;
        }
        let mut rest = index;
        let mut out = BTreeMap::new();
        for (name, values) in self.0.iter().rev() {
            let n = values.len() as u64;
            out.insert(name.clone(), values[(rest % n) as usize].clone());
            rest /= n;
        }
        Some(Params(out))
    }

    /// The index of `params` (`None` when a parameter is missing, unknown, or has a value
    /// outside the space).
    pub fn index_of(&self, params: &Params) -> Option<u64> {
        if params.0.len() != self.0.len() {
            return None;
        }
        let mut index = 0u64;
        for (name, values) in &self.0 {
            let v = params.0.get(name)?;
            let pos = values.iter().position(|x| x == v)? as u64;
            index = index.checked_mul(values.len() as u64)?.checked_add(pos)?;
        }
        Some(index)
    }

    /// Every configuration in index order, lazily.
    pub fn iter(&self) -> impl Iterator<Item = Params> + '_ {
        (0..self.len()).map_while(move |i| self.get(i))
    }

    /// The configurations that differ from `params` in exactly one parameter: for each
    /// parameter in name order, its other values nearest first in the list's order
    /// (adjacent tile sizes before distant ones).
    pub fn neighbours(&self, params: &Params) -> Vec<Params> {
        let mut out = Vec::new();
        for (name, values) in &self.0 {
            let Some(pos) = params.0.get(name).and_then(|v| values.iter().position(|x| x == v))
            else {
                continue;
            };
            let mut order: Vec<usize> = (0..values.len()).filter(|&i| i != pos).collect();
            order.sort_by_key(|&i| (i.abs_diff(pos), i));
            for i in order {
                let mut p = params.clone();
                p.0.insert(name.clone(), values[i].clone());
                out.push(p);
            }
        }
        out
    }

    /// Parameters with more than one value (the ones a search can change).
    pub fn free_dims(&self) -> usize {
        self.0.values().filter(|v| v.len() > 1).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn space(sizes: &[usize]) -> Space {
        Space(
            sizes
                .iter()
                .enumerate()
                .map(|(d, &n)| {
                    (format!("p{d:02}"), (0..n as i64).map(|v| ParamValue::Int(v * 16)).collect())
                })
                .collect(),
        )
    }

    #[test]
    fn indices_follow_mixed_radix_with_the_last_name_fastest() {
        let s = space(&[2, 3]);
        assert_eq!(s.len(), 6);
        // index = i0 * 3 + i1
        let p = s.get(5).unwrap();
        assert_eq!(p.get("p00"), Some(&ParamValue::Int(16)));
        assert_eq!(p.get("p01"), Some(&ParamValue::Int(32)));
        assert_eq!(s.get(6), None);
        let all: Vec<Params> = s.iter().collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[1].get("p01"), Some(&ParamValue::Int(16)));
    }

    #[test]
    fn a_space_of_ten_to_the_twelve_is_indexed_without_enumerating() {
        let s = space(&[10; 12]);
        assert_eq!(s.len(), 1_000_000_000_000);
        let last = s.get(s.len() - 1).unwrap();
        assert!(last.0.values().all(|v| *v == ParamValue::Int(9 * 16)));
        assert_eq!(s.index_of(&last), Some(s.len() - 1));
        assert_eq!(s.iter().take(3).count(), 3);
    }

    #[test]
    fn overflowing_spaces_saturate_and_say_so() {
        let s = space(&[1000; 8]);
        assert_eq!(s.len(), u64::MAX);
        assert!(!s.len_is_exact());
        assert!(space(&[3, 0]).is_empty());
    }

    #[test]
    fn neighbours_change_one_parameter_nearest_value_first() {
        let s = space(&[4, 2]);
        let p = s.get(4).unwrap(); // p00 = 32 (pos 2), p01 = 0
        let n = s.neighbours(&p);
        assert_eq!(n.len(), 3 + 1);
        let firsts: Vec<&ParamValue> = n[..3].iter().map(|q| q.get("p00").unwrap()).collect();
        assert_eq!(firsts, [&ParamValue::Int(16), &ParamValue::Int(48), &ParamValue::Int(0)]);
        assert!(n.iter().all(|q| q.0.iter().filter(|(k, v)| p.get(k) != Some(v)).count() == 1));
    }

    proptest! {
        #[test]
        fn index_and_configuration_are_inverse(sizes in prop::collection::vec(1usize..6, 1..6), seed in any::<u64>()) {
            let s = space(&sizes);
            let i = seed % s.len();
            let p = s.get(i).unwrap();
            prop_assert_eq!(s.index_of(&p), Some(i));
        }
    }
}
