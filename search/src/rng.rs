//! The one seedable random number generator every strategy uses.
//!
//! ChaCha8 (from `rand_chacha`) produces a documented, version-stable stream. The derived
//! draws (uniform integers below a bound, floats in `[0, 1)`) are implemented here on top of
//! the raw 64-bit words rather than taken from a distribution crate, so a given seed yields
//! the same proposals byte for byte whatever version of `rand` the rest of the build uses.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng as _, SeedableRng};

/// A deterministic random number generator seeded from a `u64`.
#[derive(Clone, Debug)]
pub struct Rng(ChaCha8Rng);

impl Rng {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A generator derived from this one's seed and a stream label, so independent
    /// components (warm-up sampling, a model, a local search) draw independent streams
    /// without consuming each other's numbers.
    pub fn derive(seed: u64, label: u64) -> Self {
        // SplitMix64-style mixing of the pair into one seed.
        let mut z = seed ^ label.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng::new(z ^ (z >> 31))
    }

    /// A raw 64-bit word.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let zone = u64::MAX - (u64::MAX - n + 1) % n;
        loop {
            let x = self.next_u64();
            if x <= zone {
                return x % n;
            }
        }
    }

    /// Uniform in `0..n` (`n > 0`) for 128-bit bounds.
    pub fn below_u128(&mut self, n: u128) -> u128 {
        assert!(n > 0, "below_u128(0)");
        if n <= u64::MAX as u128 {
            return self.below(n as u64) as u128;
        }
        let zone = u128::MAX - (u128::MAX - n + 1) % n;
        loop {
            let x = ((self.next_u64() as u128) << 64) | self.next_u64() as u128;
            if x <= zone {
                return x % n;
            }
        }
    }

    /// Uniform in `0..n` as a `usize`.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_bounds_hold() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for n in 1..200u64 {
            let x = a.below(n);
            assert_eq!(x, b.below(n));
            assert!(x < n);
        }
        let big = 10u128.pow(30) + 7;
        for _ in 0..100 {
            assert!(a.below_u128(big) < big);
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_ne!(Rng::derive(1, 2).next_u64(), Rng::derive(1, 3).next_u64());
    }

    #[test]
    fn stream_is_pinned() {
        // A change here changes every seeded proposal: update only on purpose.
        let mut r = Rng::new(42);
        let first: Vec<u64> = (0..3).map(|_| r.below(1000)).collect();
        assert_eq!(first, PINNED);
    }
    const PINNED: [u64; 3] = [737, 312, 20];
}
