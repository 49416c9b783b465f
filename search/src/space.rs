//! The search space: named dimensions of levels, never expanded.
//!
//! A [`Space`] is the Cartesian product of its [`Dim`]s. A [`Config`] holds one level index
//! per dimension. Configurations are numbered by mixed radix, the last dimension fastest
//! (the order of nested loops and of Kernel Tuner's cache), in a `u128`, so spaces far
//! larger than memory (10^12 and beyond) are handled without enumeration: [`Space::config`]
//! and [`Space::index`] convert, [`Space::iter`] walks lazily in index order,
//! [`UniformSampler`] draws distinct configurations uniformly without replacement, and
//! [`Space::neighbours`] lists the Hamming-1 moves of a configuration.
//!
//! A dimension is *ordinal* when every level is a number (its levels are then ordered by
//! value, whatever order they were given in); otherwise it is *categorical*.
//!
//! Validity is not the space's business: an [`Oracle`] supplied by the caller says whether a
//! configuration may be proposed (constraints, a replay cache's coverage). It is expected to
//! be cheap, and it is separate from evaluation.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;
use crate::SearchError;

/// One value a dimension can take.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Level {
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string (always categorical).
    Str(String),
    /// A boolean (categorical).
    Bool(bool),
}

impl Level {
    /// The level as a number, for ints and floats.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Level::Int(i) => Some(i as f64),
            Level::Float(f) => Some(f),
            _ => None,
        }
    }

    /// The level as JSON (ints stay integers).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Level::Int(i) => (*i).into(),
            Level::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Level::Str(s) => s.clone().into(),
            Level::Bool(b) => (*b).into(),
        }
    }

    /// The level a JSON value denotes, if it is a scalar (`null`, arrays and objects are not).
    pub fn from_json(v: &serde_json::Value) -> Option<Level> {
        match v {
            serde_json::Value::Bool(b) => Some(Level::Bool(*b)),
            serde_json::Value::Number(n) => {
                n.as_i64().map(Level::Int).or_else(|| n.as_f64().map(Level::Float))
            }
            serde_json::Value::String(s) => Some(Level::Str(s.clone())),
            _ => None,
        }
    }

    /// Whether two levels denote the same value (an int and a float of equal value match).
    pub fn same(&self, other: &Level) -> bool {
        match (self.as_f64(), other.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Level::Int(i) => write!(f, "{i}"),
            Level::Float(x) => write!(f, "{x}"),
            Level::Str(s) => write!(f, "{s}"),
            Level::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A named dimension and its levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    name: String,
    levels: Vec<Level>,
    /// For ordinal dims, `rank[i]` is level `i`'s position in ascending value order, and
    /// `by_rank` the inverse; for categorical dims both are the identity.
    rank: Vec<u32>,
    by_rank: Vec<u32>,
    ordinal: bool,
}

impl Dim {
    /// A dimension; fails on no levels or a repeated level.
    pub fn new(name: impl Into<String>, levels: Vec<Level>) -> Result<Dim, SearchError> {
        let name = name.into();
        if levels.is_empty() {
            return Err(SearchError::Space(format!("dimension `{name}` has no levels")));
        }
        if levels.len() > u32::MAX as usize {
            return Err(SearchError::Space(format!("dimension `{name}` has too many levels")));
        }
        for (i, a) in levels.iter().enumerate() {
            if levels[..i].iter().any(|b| a.same(b)) {
                return Err(SearchError::Space(format!("dimension `{name}` repeats level {a}")));
            }
            if matches!(a, Level::Float(f) if !f.is_finite()) {
                return Err(SearchError::Space(format!("dimension `{name}` has level {a}")));
            }
        }
        let ordinal = levels.iter().all(|l| l.as_f64().is_some());
        let mut by_rank: Vec<u32> = (0..levels.len() as u32).collect();
        if ordinal {
            by_rank.sort_by(|&a, &b| {
                let (x, y) = (levels[a as usize].as_f64(), levels[b as usize].as_f64());
                x.partial_cmp(&y).expect("finite levels")
            });
        }
        let mut rank = vec![0; levels.len()];
        for (r, &i) in by_rank.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        Ok(Dim { name, levels, rank, by_rank, ordinal })
    }

    /// The dimension's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its levels, in the order given.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// The number of levels.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Never true (a dimension has at least one level); here for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// Whether every level is a number (levels ordered by value).
    pub fn is_ordinal(&self) -> bool {
        self.ordinal
    }

    /// Level `level`'s position in value order (its index for categorical dims).
    pub fn rank(&self, level: u32) -> u32 {
        self.rank[level as usize]
    }

    /// The level at position `rank` in value order.
    pub fn level_at_rank(&self, rank: u32) -> u32 {
        self.by_rank[rank as usize]
    }

    /// The index of the level equal to `value`, if any.
    pub fn find(&self, value: &Level) -> Option<u32> {
        self.levels.iter().position(|l| l.same(value)).map(|i| i as u32)
    }
}

/// A configuration: one level index per dimension of its space.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Config(pub Vec<u32>);

impl Config {
    /// The level indices.
    pub fn levels(&self) -> &[u32] {
        &self.0
    }
}

/// Says whether a configuration may be proposed. Must be deterministic and cheap.
pub trait Oracle {
    /// True if `config` is valid.
    fn is_valid(&mut self, config: &Config) -> bool;
}

impl<F: FnMut(&Config) -> bool> Oracle for F {
    fn is_valid(&mut self, config: &Config) -> bool {
        self(config)
    }
}

/// The oracle that accepts everything.
pub fn always_valid(_: &Config) -> bool {
    true
}

/// The product of named dimensions.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    dims: Vec<Dim>,
    /// `strides[d]`: the index weight of dimension `d` (the last dimension's is 1).
    strides: Vec<u128>,
    len: u128,
}

impl Space {
    /// A space; fails if it has no dimension, two with one name, or more than `u128::MAX`
    /// configurations.
    pub fn new(dims: Vec<Dim>) -> Result<Space, SearchError> {
        if dims.is_empty() {
            return Err(SearchError::Space("a space needs at least one dimension".into()));
        }
        for (i, d) in dims.iter().enumerate() {
            if dims[..i].iter().any(|e| e.name == d.name) {
                return Err(SearchError::Space(format!("dimension `{}` appears twice", d.name)));
            }
        }
        let mut strides = vec![0u128; dims.len()];
        let mut len: u128 = 1;
        for (d, dim) in dims.iter().enumerate().rev() {
            strides[d] = len;
            len = len
                .checked_mul(dim.len() as u128)
                .ok_or_else(|| SearchError::Space("the space has more than 2^128 points".into()))?;
        }
        Ok(Space { dims, strides, len })
    }

    /// A space from `(name, levels)` pairs.
    pub fn from_levels<S: Into<String>>(
        dims: impl IntoIterator<Item = (S, Vec<Level>)>,
    ) -> Result<Space, SearchError> {
        Space::new(dims.into_iter().map(|(n, l)| Dim::new(n, l)).collect::<Result<_, _>>()?)
    }

    /// The dimensions.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// The number of configurations.
    pub fn len(&self) -> u128 {
        self.len
    }

    /// Never true: every dimension has a level.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The configuration with index `index` (< `len()`).
    pub fn config(&self, index: u128) -> Config {
        assert!(index < self.len, "index {index} out of a space of {}", self.len);
        let mut rest = index;
        Config(
            self.dims
                .iter()
                .zip(&self.strides)
                .map(|(_, &s)| {
                    let l = rest / s;
                    rest %= s;
                    l as u32
                })
                .collect(),
        )
    }

    /// The index of `config`, which must belong to this space.
    pub fn index(&self, config: &Config) -> u128 {
        assert!(self.contains(config), "configuration {config:?} is not in the space");
        config.0.iter().zip(&self.strides).map(|(&l, &s)| l as u128 * s).sum()
    }

    /// Whether `config` has one in-range level per dimension.
    pub fn contains(&self, config: &Config) -> bool {
        config.0.len() == self.dims.len()
            && config.0.iter().zip(&self.dims).all(|(&l, d)| (l as usize) < d.len())
    }

    /// All configurations in index order, lazily.
    pub fn iter(&self) -> impl Iterator<Item = Config> + '_ {
        let mut next = Some(Config(vec![0; self.dims.len()]));
        std::iter::from_fn(move || {
            let current = next.take()?;
            let mut succ = current.clone();
            for d in (0..self.dims.len()).rev() {
                succ.0[d] += 1;
                if (succ.0[d] as usize) < self.dims[d].len() {
                    next = Some(succ);
                    break;
                }
                succ.0[d] = 0;
            }
            Some(current)
        })
    }

    /// A uniformly random configuration (with replacement).
    pub fn random(&self, rng: &mut Rng) -> Config {
        Config(self.dims.iter().map(|d| rng.index(d.len()) as u32).collect())
    }

    /// The level values of `config`.
    pub fn values<'a>(&'a self, config: &'a Config) -> impl Iterator<Item = &'a Level> + 'a {
        config.0.iter().zip(&self.dims).map(|(&l, d)| &d.levels[l as usize])
    }

    /// `config` as a JSON object `{name: value}`.
    pub fn to_json(&self, config: &Config) -> serde_json::Value {
        serde_json::Value::Object(
            self.dims
                .iter()
                .zip(self.values(config))
                .map(|(d, v)| (d.name.clone(), v.to_json()))
                .collect(),
        )
    }

    /// `config` as `name=value` pairs, for messages.
    pub fn describe(&self, config: &Config) -> String {
        let parts: Vec<String> = self
            .dims
            .iter()
            .zip(self.values(config))
            .map(|(d, v)| format!("{}={v}", d.name))
            .collect();
        parts.join(", ")
    }

    /// The Hamming-1 neighbours of `config`: first, for each ordinal dimension, the levels
    /// adjacent in value order (lower, then higher); then every other single-dimension change
    /// (ordinal dims by increasing distance in value order, categorical dims in level order).
    pub fn neighbours(&self, config: &Config) -> Vec<Config> {
        let (mut near, far) = self.neighbours_by_distance(config);
        near.extend(far);
        near
    }

    /// [`Space::neighbours`] in two parts: the adjacent ordinal moves, and all the others.
    pub fn neighbours_by_distance(&self, config: &Config) -> (Vec<Config>, Vec<Config>) {
        let mut near = Vec::new();
        let mut far = Vec::new();
        for (d, dim) in self.dims.iter().enumerate() {
            let here = config.0[d];
            let with = |l: u32| {
                let mut c = config.clone();
                c.0[d] = l;
                c
            };
            if dim.ordinal {
                let r = dim.rank(here) as i64;
                for dist in 1..dim.len() as i64 {
                    for rr in [r - dist, r + dist] {
                        if (0..dim.len() as i64).contains(&rr) {
                            let c = with(dim.level_at_rank(rr as u32));
                            if dist == 1 {
                                near.push(c)
                            } else {
                                far.push(c)
                            }
                        }
                    }
                }
            } else {
                far.extend((0..dim.len() as u32).filter(|&l| l != here).map(with));
            }
        }
        (near, far)
    }

    /// Up to `n` distinct configurations the oracle accepts, uniformly without replacement
    /// (see [`UniformSampler`]).
    pub fn sample_valid(&self, n: usize, rng: &mut Rng, oracle: &mut dyn Oracle) -> Vec<Config> {
        let mut sampler = UniformSampler::new(self.len);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match sampler.next_valid(self, rng, oracle, DEFAULT_MAX_REJECTIONS) {
                Some(c) => out.push(c),
                None => break,
            }
        }
        out
    }
}

/// How many oracle rejections in a row a sampler accepts before it gives up on finding a
/// valid configuration by sampling.
pub const DEFAULT_MAX_REJECTIONS: u64 = 1_000_000;

/// Uniform sampling of indices `0..n` without replacement, in memory proportional to the
/// number drawn, not to `n`: a Fisher–Yates shuffle whose swapped positions live in a hash
/// map (a "sparse" shuffle). Each draw is exactly uniform over the indices not yet drawn,
/// and the sampler knows when the space is exhausted.
#[derive(Clone, Debug)]
pub struct UniformSampler {
    n: u128,
    drawn: u128,
    swapped: HashMap<u128, u128>,
}

impl UniformSampler {
    /// A sampler over `0..n`.
    pub fn new(n: u128) -> Self {
        UniformSampler { n, drawn: 0, swapped: HashMap::new() }
    }

    /// How many indices are left.
    pub fn remaining(&self) -> u128 {
        self.n - self.drawn
    }

    /// The next index, or `None` once all are drawn.
    pub fn next_index(&mut self, rng: &mut Rng) -> Option<u128> {
        if self.drawn == self.n {
            return None;
        }
        let i = self.drawn;
        let j = i + rng.below_u128(self.n - i);
        let at_j = self.swapped.get(&j).copied().unwrap_or(j);
        let at_i = self.swapped.remove(&i).unwrap_or(i);
        if j != i {
            self.swapped.insert(j, at_i);
        }
        self.drawn += 1;
        Some(at_j)
    }

    /// The next configuration the oracle accepts, skipping rejected ones (each index is
    /// tried once). `None` when the space is exhausted or after `max_rejections` rejections
    /// in a row.
    pub fn next_valid(
        &mut self,
        space: &Space,
        rng: &mut Rng,
        oracle: &mut dyn Oracle,
        max_rejections: u64,
    ) -> Option<Config> {
        let mut rejected = 0;
        while rejected <= max_rejections {
            let c = space.config(self.next_index(rng)?);
            if oracle.is_valid(&c) {
                return Some(c);
            }
            rejected += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn ints(v: &[i64]) -> Vec<Level> {
        v.iter().map(|&i| Level::Int(i)).collect()
    }

    fn small() -> Space {
        Space::from_levels([
            ("a", ints(&[4, 1, 2])),
            ("b", vec![Level::Str("x".into()), Level::Str("y".into())]),
            ("c", vec![Level::Float(0.5), Level::Int(3)]),
        ])
        .unwrap()
    }

    #[test]
    fn mixed_radix_round_trips_in_index_order() {
        let s = small();
        assert_eq!(s.len(), 12);
        let all: Vec<Config> = s.iter().collect();
        assert_eq!(all.len(), 12);
        for (i, c) in all.iter().enumerate() {
            assert_eq!(s.index(c), i as u128);
            assert_eq!(&s.config(i as u128), c);
        }
        assert_eq!(all[1], Config(vec![0, 0, 1]), "last dimension is fastest");
        assert_eq!(all[2], Config(vec![0, 1, 0]));
    }

    #[test]
    fn kinds_and_ranks() {
        let s = small();
        let [a, b, c] = s.dims() else { panic!() };
        assert!(a.is_ordinal() && !b.is_ordinal() && c.is_ordinal());
        assert_eq!((0..3).map(|l| a.rank(l)).collect::<Vec<_>>(), vec![2, 0, 1]);
        assert_eq!(a.level_at_rank(0), 1);
        assert_eq!(a.find(&Level::Float(2.0)), Some(2));
        assert!(Dim::new("d", ints(&[1, 1])).is_err());
        assert!(Dim::new("d", vec![]).is_err());
    }

    #[test]
    fn neighbours_put_adjacent_ordinal_levels_first() {
        let s = small();
        // a = 1 (rank 0 of values 1 < 2 < 4), b = x, c = 0.5
        let n = s.neighbours(&Config(vec![1, 0, 0]));
        assert_eq!(n.len(), 2 + 1 + 1);
        assert_eq!(n[0], Config(vec![2, 0, 0]), "a: 1 -> 2, adjacent in value");
        assert_eq!(n[1], Config(vec![1, 0, 1]), "c: 0.5 -> 3");
        assert!(n[2..].contains(&Config(vec![0, 0, 0])), "a: 1 -> 4, two steps");
        assert!(n[2..].contains(&Config(vec![1, 1, 0])), "b categorical");
        let set: HashSet<_> = n.iter().collect();
        assert_eq!(set.len(), n.len());
    }

    #[test]
    fn sampler_exhausts_exactly_once_each() {
        let mut rng = Rng::new(3);
        let mut s = UniformSampler::new(50);
        let mut seen: Vec<u128> = std::iter::from_fn(|| s.next_index(&mut rng)).collect();
        seen.sort();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn sampler_is_uniform_on_first_draw() {
        let mut counts = [0u32; 5];
        for seed in 0..5000 {
            let mut s = UniformSampler::new(5);
            counts[s.next_index(&mut Rng::new(seed)).unwrap() as usize] += 1;
        }
        for c in counts {
            assert!((850..1150).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn huge_space_samples_distinct_valid_without_enumerating() {
        // 10 dims of 16 levels: 16^10 ≈ 1.1e12 configurations.
        let space = Space::from_levels(
            (0..10).map(|d| (format!("d{d}"), ints(&(0..16).collect::<Vec<_>>()))),
        )
        .unwrap();
        assert!(space.len() >= 1_000_000_000_000);
        let mut calls = 0u64;
        // Rejects half the space: configurations whose level sum is odd.
        let mut oracle = |c: &Config| {
            calls += 1;
            c.0.iter().sum::<u32>() % 2 == 0
        };
        let got = space.sample_valid(1000, &mut Rng::new(9), &mut oracle);
        assert_eq!(got.len(), 1000);
        assert!(got.iter().all(|c| c.0.iter().sum::<u32>() % 2 == 0));
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), 1000);
        // The work, counted rather than timed: a rejection sampler asks the oracle about
        // 1000 / 0.5 = 2000 times (±45 for 1000 geometric draws); anything that walked the
        // space, or retried far too often, would ask orders of magnitude more.
        assert!((1000..3000).contains(&calls), "{calls} oracle calls for 1000 valid draws");
    }
}
