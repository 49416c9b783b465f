//! A worker's memory of check cases: the inputs and reference outputs of the cases it ran.
//!
//! A case's inputs are a function of the kernel, the shape, the input seed and the
//! distribution (`Kernel::inputs`, deterministic in its seed), and its reference outputs a
//! function of the shape and those inputs (`Kernel::reference`): neither depends on the
//! variant. `tune` checks each would-be winner with the same seeds, so the variants of one
//! run draw many of the same cases (the README's main job: GEMM's 80 cases are 17 distinct
//! ones, flash attention's 48 are 8), and drawing inputs and computing the reference were
//! most of a check's time at small shapes (docs/performance.md). A worker keeps them here,
//! keyed by kernel name (unique in a harness), shape, seed and distribution, and the next
//! check that draws the case takes them instead of calling the kernel's code again.
//!
//! Only what the kernel's code returned is kept: a panicking generator or reference is
//! called again, and panics again, each time. The memory is bounded ([`Cases::LIMIT`] values,
//! least recently used dropped first); a case larger than a quarter of it is never kept.
//! What a generator or reference prints is printed when it runs, so the first check of a
//! case in a worker shows it, later ones do not.

use crate::params::Shape;
use neuron_tune_protocol::Distribution;
use std::sync::Arc;

/// Tensors of one case, in order (inputs, or reference outputs).
pub type Values = Arc<Vec<Vec<f32>>>;

/// One case's key: kernel name, shape, input seed, distribution.
type Key = (String, Shape, u64, Distribution);

struct Entry {
    key: Key,
    inputs: Values,
    reference: Option<Values>,
}

impl Entry {
    fn values(&self) -> usize {
        let n = |v: &Values| v.iter().map(Vec::len).sum::<usize>();
        n(&self.inputs) + self.reference.as_ref().map_or(0, n)
    }
}

/// The cases a worker remembers, least recently used first. `Cases::default()` remembers
/// nothing (every case is computed, as a single check in a test or an example wants).
#[derive(Default)]
pub struct Cases {
    entries: Vec<Entry>,
    limit: usize,
}

impl Cases {
    /// The worker's bound: 32 Mi values (128 MiB of f32) of inputs and references.
    pub const LIMIT: usize = 32 << 20;

    /// Remember cases up to `limit` values in all.
    pub fn new(limit: usize) -> Cases {
        Cases { entries: Vec::new(), limit }
    }

    /// The entry of `key`, made the most recently used.
    ///
    /// A scan, not a hash map with an LRU list (the `lru` crate): a worker holds tens of
    /// cases (a check draws the same few seeds per kernel and shape: in the README's main
    /// job GEMM's 80 cases are 17 distinct ones), so the scan and the `remove`/`push` cost
    /// well under a microsecond, against the milliseconds of the check that asked.
    fn find(&mut self, key: &Key) -> Option<&mut Entry> {
        let i = self.entries.iter().position(|e| e.key == *key)?;
        // Most recently used last.
        let e = self.entries.remove(i);
        self.entries.push(e);
        self.entries.last_mut()
    }

    /// The case's inputs: remembered, or `make()`'s (kept when it returns them).
    pub fn inputs<E>(
        &mut self,
        key: (&str, &Shape, u64, Distribution),
        make: impl FnOnce() -> Result<Vec<Vec<f32>>, E>,
    ) -> Result<Values, E> {
        let key = (key.0.to_string(), key.1.clone(), key.2, key.3);
        if let Some(e) = self.find(&key) {
            return Ok(e.inputs.clone());
        }
        let inputs = Arc::new(make()?);
        self.keep(Entry { key, inputs: inputs.clone(), reference: None });
        Ok(inputs)
    }

    /// The case's reference outputs for `inputs` (what [`Cases::inputs`] gave for the same
    /// key): remembered, or `make()`'s (kept when it returns them).
    pub fn reference<E>(
        &mut self,
        key: (&str, &Shape, u64, Distribution),
        inputs: &Values,
        make: impl FnOnce() -> Result<Vec<Vec<f32>>, E>,
    ) -> Result<Values, E> {
        let key = (key.0.to_string(), key.1.clone(), key.2, key.3);
        // Only for the inputs remembered with it (the very vectors, not equal ones).
        if let Some(e) = self.find(&key).filter(|e| Arc::ptr_eq(&e.inputs, inputs)) {
            if let Some(r) = &e.reference {
                return Ok(r.clone());
            }
            let r = Arc::new(make()?);
            e.reference = Some(r.clone());
            self.trim();
            return Ok(r);
        }
        Ok(Arc::new(make()?))
    }

    fn keep(&mut self, entry: Entry) {
        if entry.values() > self.limit / 4 {
            return;
        }
        self.entries.push(entry);
        self.trim();
    }

    /// Drop the least recently used cases until the rest fit the limit (an entry that grew
    /// past a quarter of it with its reference goes too).
    fn trim(&mut self) {
        self.entries.retain(|e| e.values() <= self.limit / 4);
        let mut total: usize = self.entries.iter().map(Entry::values).sum();
        while total > self.limit {
            total -= self.entries.remove(0).values();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u64) -> (&'static str, &'static Shape, u64, Distribution) {
        static SHAPE: std::sync::OnceLock<Shape> = std::sync::OnceLock::new();
        ("k", SHAPE.get_or_init(|| Shape::new(&[("n", 4)])), seed, Distribution::Normal)
    }

    fn ok(v: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, ()> {
        Ok(v)
    }

    #[test]
    fn a_case_is_computed_once_and_a_failure_never_kept() {
        let mut cases = Cases::new(1000);
        let calls = std::cell::Cell::new(0);
        let make = || {
            calls.set(calls.get() + 1);
            ok(vec![vec![1.0; 4]])
        };
        let a = cases.inputs(key(1), make).unwrap();
        let b = cases.inputs(key(1), make).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(calls.get(), 1);
        assert!(cases.reference(key(1), &a, || Err::<Vec<Vec<f32>>, _>("panicked")).is_err());
        let r = cases.reference(key(1), &a, || ok(vec![vec![2.0; 4]])).unwrap();
        let again = cases.reference(key(1), &a, || ok(vec![vec![3.0; 4]])).unwrap();
        assert_eq!(*again, *r);
        // Another seed is another case.
        cases.inputs(key(2), make).unwrap();
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn nothing_is_remembered_without_room() {
        let mut cases = Cases::default();
        let a = cases.inputs(key(1), || ok(vec![vec![1.0; 4]])).unwrap();
        let b = cases.inputs(key(1), || ok(vec![vec![1.0; 4]])).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        let r = cases.reference(key(1), &b, || ok(vec![vec![2.0]])).unwrap();
        assert_eq!(*r, vec![vec![2.0]]);
    }

    #[test]
    fn the_least_recently_used_case_goes_first() {
        // Room for four cases of 4 values (none larger than a quarter of it).
        let mut cases = Cases::new(16);
        let four = || ok(vec![vec![0.0; 4]]);
        let first = cases.inputs(key(1), four).unwrap();
        for seed in 2..=4 {
            cases.inputs(key(seed), four).unwrap();
        }
        // Case 1 used again: case 2 is now the oldest, and goes when case 5 comes.
        assert!(Arc::ptr_eq(&first, &cases.inputs(key(1), four).unwrap()));
        cases.inputs(key(5), four).unwrap();
        let seeds: Vec<u64> = cases.entries.iter().map(|e| e.key.2).collect();
        assert_eq!(seeds, [3, 4, 1, 5]);
        // A reference that makes an entry too large drops it.
        let big = cases.inputs(key(5), four).unwrap();
        cases.reference(key(5), &big, || ok(vec![vec![0.0; 8]])).unwrap();
        assert!(cases.entries.iter().all(|e| e.key.2 != 5));
    }
}
