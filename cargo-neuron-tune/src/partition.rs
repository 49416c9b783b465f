//! `--partition k/n`: which share of a command's work items this run takes.
//!
//! An item belongs to partition `hash(name) mod n + 1`, where the name says what the item
//! is (`kernel@shape@dims` for `bench` and `tune`, `model@shape@chip` for `gate`) and the hash is
//! xxh3-64 of it. So the assignment depends on the item alone, never on its position:
//! adding or removing items moves no other item between partitions, and the `n` partitions
//! of one set of items are disjoint and together cover it (`merge` checks that it has all
//! of them).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Partition `k` of `n` (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub k: u32,
    pub n: u32,
}

impl Partition {
    /// Whether the item named `name` is this partition's.
    pub fn contains(&self, name: &str) -> bool {
        Partition::of(name, self.n) == self.k
    }

    /// The partition (1-based) of the item named `name` among `n`.
    pub fn of(name: &str, n: u32) -> u32 {
        (xxhash_rust::xxh3::xxh3_64(name.as_bytes()) % u64::from(n.max(1))) as u32 + 1
    }
}

/// Whether `name` is in `partition` (everything is when there is none).
pub fn keeps(partition: Option<Partition>, name: &str) -> bool {
    partition.is_none_or(|p| p.contains(name))
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Partition, String> {
        let bad = || format!("`{s}`: a partition is K/N with 1 <= K <= N (e.g. 2/3)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) =
            (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Partition { k, n })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_k_of_n_and_refuses_the_rest() {
        assert_eq!("2/3".parse::<Partition>(), Ok(Partition { k: 2, n: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
        }
        assert_eq!(Partition { k: 1, n: 4 }.to_string(), "1/4");
    }

    #[test]
    fn partitions_are_disjoint_cover_everything_and_share_it_fairly() {
        let names: Vec<String> = (0..200).map(|i| format!("kernel{i}@small")).collect();
        let parts: Vec<Partition> = (1..=3).map(|k| Partition { k, n: 3 }).collect();
        for name in &names {
            assert_eq!(parts.iter().filter(|p| p.contains(name)).count(), 1, "{name}");
        }
        // Every partition gets a fair share.
        for p in &parts {
            let n = names.iter().filter(|x| p.contains(x)).count();
            assert!((40..=95).contains(&n), "{p}: {n}");
        }
        assert!(keeps(None, "anything"));
    }

    /// CI partitions run on different machines and `merge` joins them: every machine must
    /// assign an item to the same partition, whatever the platform or toolchain. The
    /// assignment is xxh3-64 of the name mod n, pinned here by XXH3's published test
    /// vector: xxh3_64("") = 0x2D06800538D394C2 (xxHash's `sanity_test_vectors`, len 0,
    /// seed 0), so "" is in partition 0x2D06800538D394C2 mod n + 1.
    #[test]
    fn the_assignment_is_xxh3_of_the_name_on_every_machine() {
        const XXH3_64_OF_EMPTY: u64 = 0x2D06_8005_38D3_94C2;
        for n in [1u32, 2, 3, 7, 64] {
            let want = (XXH3_64_OF_EMPTY % u64::from(n)) as u32 + 1;
            assert_eq!(Partition::of("", n), want, "n = {n}");
        }
    }
}
