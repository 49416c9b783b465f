//! The core's shared HBM bandwidth, as a timeline of fixed-width buckets.
//!
//! Every DMA side in HBM fills this timeline, so concurrent transfers never move more bytes
//! in any bucket than the chip's per-core bandwidth allows, while a transfer issued later in
//! program order can still use bandwidth left idle earlier in time.

use super::ceil_u64;

/// Shared HBM bandwidth as a timeline of buckets, each holding at most
/// `bandwidth × width` bytes. A transfer fills buckets from its start at up to its engine's
/// rate, taking only what earlier transfers left, so the sum over any interval never exceeds
/// the core's bandwidth and transfers issued later in program order can still use idle
/// bandwidth earlier in time. Buckets older than the window are dropped (a transfer that
/// would start there is moved to the window's start: conservative, never optimistic).
pub(crate) struct HbmTimeline {
    width_ps: u64,
    cap: f64,
    base: u64,
    /// Bytes used per bucket from `base` on (a `Vec` compacted in halves: cheaper indexing
    /// than a deque on the hot path).
    used: Vec<f64>,
    /// Every bucket before this one is full: transfers skip straight past them.
    first_open: u64,
}

const HBM_BUCKET_PS: u64 = 512_000;
const HBM_WINDOW_BUCKETS: usize = 1 << 16; // ≈ 34–67 ms of simulated time (one to two windows)

impl HbmTimeline {
    pub(super) fn new(gbps: f64) -> Self {
        // GB/s = bytes per ns; a bucket of 512 ns holds gbps × 512 bytes.
        HbmTimeline {
            width_ps: HBM_BUCKET_PS,
            cap: gbps * HBM_BUCKET_PS as f64 / 1000.0,
            base: 0,
            used: Vec::new(),
            first_open: 0,
        }
    }

    /// Move `bytes` starting at `start` at most `rate` bytes/ps; returns the end time.
    pub(super) fn transfer(&mut self, start: u64, bytes: f64, rate: f64) -> u64 {
        self.fill(start, bytes, rate, true)
    }

    /// When a transfer starting at `start` would end, without reserving anything.
    pub(super) fn query(&mut self, start: u64, bytes: f64, rate: f64) -> u64 {
        self.fill(start, bytes, rate, false)
    }

    fn fill(&mut self, start: u64, bytes: f64, rate: f64, commit: bool) -> u64 {
        // The constant, not the field: division by a constant compiles to a multiply, and
        // this divides once per bucket visited.
        let w = HBM_BUCKET_PS;
        debug_assert_eq!(w, self.width_ps);
        let mut t = start.max(self.base * w).max(self.first_open * w);
        let mut remaining = bytes;
        if remaining <= 0.0 {
            return t;
        }
        loop {
            let idx = t / w;
            let slot = (idx - self.base) as usize;
            let used = self.used.get(slot).copied().unwrap_or(0.0);
            let bucket_end = (idx + 1) * w;
            let engine_cap = rate * (bucket_end - t) as f64;
            let avail = (self.cap - used).max(0.0);
            let take =
                if remaining <= engine_cap.min(avail) { remaining } else { engine_cap.min(avail) };
            if commit && take > 0.0 {
                if self.used.len() <= slot {
                    self.used.resize(slot + 1, 0.0);
                }
                self.used[slot] += take;
            }
            if take >= remaining {
                let end = t + ceil_u64(remaining / rate);
                if commit {
                    self.advance_open();
                    self.trim();
                }
                return end.max(t + 1).min(bucket_end);
            }
            remaining -= take;
            t = bucket_end;
        }
    }

    fn advance_open(&mut self) {
        while let Some(&u) = self.used.get((self.first_open.max(self.base) - self.base) as usize) {
            if self.cap - u >= 1.0 {
                break;
            }
            self.first_open = self.first_open.max(self.base) + 1;
        }
    }

    /// Keep between one and two windows of buckets: past two, drop the oldest down to one.
    fn trim(&mut self) {
        if self.used.len() > 2 * HBM_WINDOW_BUCKETS {
            let drop = self.used.len() - HBM_WINDOW_BUCKETS;
            self.used.drain(..drop);
            self.base += drop as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbm_timeline_never_exceeds_bandwidth() {
        // 100 B/ns bandwidth: a 512 ns bucket holds 51,200 B (docs/dma.md §1). Two engines at
        // 80 B/ns (40,960 B per bucket) each move 64 KiB = 65,536 B from time 0, the first
        // placed first:
        // * a: bucket 0 takes 40,960 B (its engine's rate), bucket 1 the other 24,576 B at
        //   80 B/ns: 512 + 24,576 / 80 = 819.2 ns — what it takes alone.
        // * b: bucket 0 has 51,200 − 40,960 = 10,240 B left, bucket 1 51,200 − 24,576
        //   = 26,624 B; the remaining 65,536 − 10,240 − 26,624 = 28,672 B go in bucket 2 at
        //   80 B/ns: 1,024 + 28,672 / 80 = 1,382.4 ns. Not before 128 KiB / 100 B/ns =
        //   1,310.72 ns, the bandwidth's bound, and later than it by the bucket granularity.
        let mut h = HbmTimeline::new(100.0);
        let a = h.transfer(0, 65536.0, 0.08);
        let b = h.transfer(0, 65536.0, 0.08);
        assert!((819_200..=819_201).contains(&a), "{a}");
        assert!((1_382_400..=1_382_401).contains(&b), "{b}");
        assert!(b >= 1_310_720);
        let full = h.used.iter().map(|u| (u - h.cap).abs() < 1e-6).collect::<Vec<_>>();
        assert_eq!(full, [true, true, false], "{:?}", h.used);
        // Alone, one engine is engine-bound: 65536 / 80 B/ns = 819.2 ns.
        let mut h = HbmTimeline::new(100.0);
        let a = h.transfer(0, 65536.0, 0.08);
        assert!((819_200..=819_201).contains(&a), "{a}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// Over random transfers at random times, rates and sizes: no bucket ever holds more
        /// than the bandwidth allows, no transfer ends before its engine could move its
        /// bytes (`start + bytes / rate`), every byte is accounted once, and `query`
        /// foretells what `transfer` then does.
        #[test]
        fn no_bucket_exceeds_the_cap_and_no_transfer_outruns_its_engine(
            gbps in 20.0f64..1000.0,
            transfers in proptest::collection::vec(
                (0u64..20_000_000, 1.0f64..400_000.0, 0.005f64..0.8), 1..40),
        ) {
            let mut h = HbmTimeline::new(gbps);
            let cap = gbps * 512.0;
            let mut total = 0.0;
            for &(start, bytes, rate) in &transfers {
                let foretold = h.query(start, bytes, rate);
                let end = h.transfer(start, bytes, rate);
                proptest::prop_assert_eq!(foretold, end);
                proptest::prop_assert!(
                    end as f64 >= start as f64 + bytes / rate - 1e-6,
                    "{} B at {} B/ps from {} ended at {}", bytes, rate, start, end
                );
                total += bytes;
                for (i, u) in h.used.iter().enumerate() {
                    proptest::prop_assert!(*u <= cap * (1.0 + 1e-12), "bucket {}: {} > {}", i, u, cap);
                }
            }
            let used: f64 = h.used.iter().sum();
            proptest::prop_assert!((used - total).abs() <= 1e-9 * total, "{} B held, {} moved", used, total);
        }
    }

    #[test]
    fn later_transfer_uses_idle_earlier_bandwidth() {
        let mut h = HbmTimeline::new(100.0);
        // A transfer far in the future does not delay one that starts now.
        let late = h.transfer(10_000_000, 1000.0, 0.05);
        let now = h.transfer(0, 1000.0, 0.05);
        assert_eq!(now, 20_000);
        assert_eq!(late, 10_020_000);
    }
}
