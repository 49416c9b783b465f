//! Dependencies between instructions, tracked per region of a buffer.
//!
//! Every access leaves a record (region, the time a dependent may start, the critical path
//! to it) in its buffer's lists, binned by byte range; a later access scans only the records
//! near its bytes that could bind it: a read waits for overlapping writes (RAW), a write for
//! overlapping reads and writes (WAR, WAW). Records an access dominates are pruned (a write
//! drops every record it covers; a read drops the earlier reads it covers, which bind no
//! later than it does), and a full list merges its oldest half into one conservative
//! record, so memory stays bounded and no simplification ever removes a wait.

use super::{Crit, Operand, Timing};

/// A region of a buffer: partitions `[p0, p1)` × bytes `[b0, b1)`. For HBM tensors the
/// "partition" axis is the tensor's first dim and the byte axis is the byte range within a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Region {
    pub id: u32,
    pub p0: u32,
    pub p1: u32,
    pub b0: u64,
    pub b1: u64,
}

impl Region {
    #[inline]
    fn overlaps(&self, r: &Rec) -> bool {
        self.p0 < r.p1 && r.p0 < self.p1 && self.b0 < r.b1 && r.b0 < self.b1
    }
    #[inline]
    fn covers(&self, r: &Rec) -> bool {
        self.p0 <= r.p0 && r.p1 <= self.p1 && self.b0 <= r.b0 && r.b1 <= self.b1
    }
}

/// An earlier access to a region, kept for dependency checks (in a list of reads or of
/// writes). 72 bytes (the critical path's 10 categories take 40): records are copied and
/// scanned constantly, so it is kept that small and unpadded.
#[derive(Clone, Copy, Debug)]
struct Rec {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
    /// When a dependent may start: end (+ latency for writes).
    time: u64,
    crit: Crit,
}
const _: () = assert!(std::mem::size_of::<Rec>() == 72);

/// A buffer's access records, binned by byte range so a lookup only scans records near the
/// accessed bytes (tiles are mostly accessed in sub-blocks). A record spanning several bins
/// is kept in each; per bin, reads and writes are separate lists (a read only checks writes).
#[derive(Clone, Debug, Default)]
pub(super) struct Binned {
    shift: u32,
    bins: Vec<[Vec<Rec>; 2]>,
    /// Records spanning more than `WIDE_BINS` bins: kept once, checked by every access.
    wide: [Vec<Rec>; 2],
    /// Latest time of any read [0] and write [1] recorded here (kept when records are
    /// pruned): an access that cannot start before it needs no scan at all.
    latest: [u64; 2],
    /// The region (p0, p1, b0, b1) of the newest record here, when it is a write. Another
    /// write of exactly that region (a matmul accumulating into its PSUM tile) would prune
    /// just that record, the newest in its lists (the first write pruned all else it covers
    /// and nothing was recorded since), and push its own: it updates the record in place.
    last_write: Option<(u32, u32, u64, u64)>,
}

/// A record spanning more bins than this goes to the `wide` lists instead.
const WIDE_BINS: usize = 4;

/// Bins per buffer (a buffer's bytes per partition / 16 per bin, at least 1 KiB).
const BINS: u64 = 16;

impl Binned {
    #[inline]
    fn range(&self, r: &Region) -> std::ops::Range<usize> {
        let lo = (r.b0 >> self.shift) as usize;
        let hi = ((r.b1.max(r.b0 + 1) - 1) >> self.shift) as usize;
        lo..hi + 1
    }
}

/// Records kept per bin list before the oldest are merged into one conservative record.
/// Merging can only add waits (a bounding box with the latest time), never remove one.
const MAX_RECS: usize = 32;

impl Timing {
    /// Make room for buffer `id`'s records.
    pub fn ensure_buffer(&mut self, id: u32, bytes: u64) {
        let need = id as usize + 1;
        if self.recs.len() < need {
            self.recs.resize_with(need, Default::default);
        }
        let per_bin = (bytes / BINS).max(1024);
        let b = &mut self.recs[id as usize];
        // Records are binned by `shift`: it is set once, before the buffer has any.
        debug_assert!(b.bins.is_empty() && b.wide.iter().all(Vec::is_empty), "buffer {id} again");
        b.shift = 64 - (per_bin - 1).leading_zeros();
        b.last_write = None;
    }

    /// Forget every record of buffer `id` (its memory is gone; used when a buffer is freed).
    /// Not called for ring buffers: their reuse must wait for the readers of what they held.
    #[allow(dead_code)]
    pub fn clear_buffer(&mut self, id: u32) {
        if let Some(v) = self.recs.get_mut(id as usize) {
            v.bins.clear();
            v.wide = Default::default();
            v.latest = [0; 2];
            v.last_write = None;
        }
    }

    /// When the last access recorded for buffer `id` ends, with its critical path: from then
    /// on its memory may hold another buffer (a pool released between phases of a kernel).
    pub fn buffer_done(&self, id: u32) -> (u64, Crit) {
        let all = Region { id, p0: 0, p1: u32::MAX, b0: 0, b1: u64::MAX };
        self.deps::<Region>(&[], &[all], 0)
    }

    /// Start buffer `id` behind a write of all of it that ends at `time`: its memory held
    /// released buffers until then, so its first accesses wait for their last (WAR/WAW across
    /// the release). One record in the wide list; no bins are made for it.
    pub fn inherit(&mut self, id: u32, time: u64, crit: &Crit) {
        let b = &mut self.recs[id as usize];
        b.latest[1] = b.latest[1].max(time);
        b.last_write = None;
        b.wide[1].push(Rec { p0: 0, p1: u32::MAX, b0: 0, b1: u64::MAX, time, crit: *crit });
    }

    /// Earliest time the accesses may start, with the critical path of the binding constraint;
    /// `after` is a start the caller already has (its track's free time): only records later
    /// than it can bind, and a buffer with none is not scanned. Returns (`after`, zero path)
    /// when nothing binds. Inlined: the list scheduler looks up every held instruction's
    /// readiness, and as a call it cost more than at issue (docs/scheduling.md §3).
    #[inline(always)]
    pub(super) fn deps<R: Operand>(&self, reads: &[R], writes: &[R], after: u64) -> (u64, Crit) {
        let mut t = after;
        let mut binding: Option<&Rec> = None;
        for r in reads {
            self.latest_overlap(r.region(), false, &mut t, &mut binding);
        }
        for w in writes {
            self.latest_overlap(w.region(), true, &mut t, &mut binding);
        }
        (t, binding.map_or([0; 10], |rec| rec.crit))
    }

    /// Raise `t` to the latest record an access to `r` depends on (writes; for a `write`,
    /// reads too), remembering that record.
    #[inline(always)]
    fn latest_overlap<'a>(
        &'a self,
        r: &Region,
        write: bool,
        t: &mut u64,
        binding: &mut Option<&'a Rec>,
    ) {
        let b = &self.recs[r.id as usize];
        let latest = if write { b.latest[0].max(b.latest[1]) } else { b.latest[1] };
        if latest <= *t {
            return;
        }
        let mut check = |list: &'a [Rec]| {
            for rec in list {
                if rec.time > *t && r.overlaps(rec) {
                    *t = rec.time;
                    *binding = Some(rec);
                }
            }
        };
        // Reads before writes: on equal times the first found binds (its critical path).
        if write {
            check(&b.wide[0]);
        }
        check(&b.wide[1]);
        let range = b.range(r);
        for bin in b.bins.get(range.start..range.end.min(b.bins.len())).unwrap_or(&[]) {
            if write {
                check(&bin[0]);
            }
            check(&bin[1]);
        }
    }

    #[inline(always)]
    pub(super) fn record(&mut self, r: &Region, write: bool, time: u64, crit: &Crit) {
        let b = &mut self.recs[r.id as usize];
        b.latest[write as usize] = b.latest[write as usize].max(time);
        let range = b.range(r);
        let key = (r.p0, r.p1, r.b0, r.b1);
        if write && b.last_write == Some(key) && !general_only!(self) {
            let newest = |list: &mut Vec<Rec>| {
                let rec = list.last_mut().expect("the repeated write's record");
                debug_assert_eq!((rec.p0, rec.p1, rec.b0, rec.b1), key);
                (rec.time, rec.crit) = (time, *crit);
            };
            if range.len() > WIDE_BINS {
                newest(&mut b.wide[1]);
            } else {
                b.bins[range].iter_mut().for_each(|bin| newest(&mut bin[1]));
            }
            #[cfg(test)]
            {
                self.in_place_writes += 1;
            }
            return;
        }
        b.last_write = write.then_some(key);
        if b.bins.len() < range.end {
            b.bins.resize_with(range.end, Default::default);
        }
        let wide = range.len() > WIDE_BINS;
        let merges = &mut self.merges;
        prune(&mut b.wide, r, write, time);
        for bin in &mut b.bins[range] {
            prune(bin, r, write, time);
            if !wide {
                push_rec(&mut bin[write as usize], r, time, crit, merges);
            }
        }
        if wide {
            push_rec(&mut b.wide[write as usize], r, time, crit, merges);
        }
    }
}

/// Remove the records `dominated` picks, keeping the others in order (oldest first, which
/// [`merge_oldest`] relies on). Written out rather than `Vec::retain`: lists are short and this
/// runs several times per instruction, where `retain`'s set-up costs more than the scan.
#[inline(always)]
fn remove_where(list: &mut Vec<Rec>, dominated: impl Fn(&Rec) -> bool) {
    let Some(first) = list.iter().position(&dominated) else { return };
    let mut kept = first;
    for i in first + 1..list.len() {
        if !dominated(&list[i]) {
            list[kept] = list[i];
            kept += 1;
        }
    }
    list.truncate(kept);
}

/// Drop the records of one bin (its reads and writes) that an access to `r` ending at `time`
/// dominates: anything a write covers, and a read covered by a later read (module docs).
#[inline(always)]
fn prune([reads, writes]: &mut [Vec<Rec>; 2], r: &Region, write: bool, time: u64) {
    if write {
        remove_where(reads, |old| r.covers(old));
        remove_where(writes, |old| r.covers(old));
    } else {
        remove_where(reads, |old| old.time <= time && r.covers(old));
    }
}

/// Append a record, merging the oldest half when the list is full (counted in `merges`).
#[inline(always)]
fn push_rec(list: &mut Vec<Rec>, r: &Region, time: u64, crit: &Crit, merges: &mut u64) {
    list.push(Rec { p0: r.p0, p1: r.p1, b0: r.b0, b1: r.b1, time, crit: *crit });
    if list.len() > MAX_RECS {
        merge_oldest(list);
        *merges += 1;
    }
}

/// Merge the older half of a record list into one bounding record with the latest time.
fn merge_oldest(list: &mut Vec<Rec>) {
    let half = list.len() / 2;
    let merged = list.drain(..half).reduce(|m, r| Rec {
        p0: m.p0.min(r.p0),
        p1: m.p1.max(r.p1),
        b0: m.b0.min(r.b0),
        b1: m.b1.max(r.b1),
        time: m.time.max(r.time),
        crit: if r.time > m.time { r.crit } else { m.crit },
    });
    if let Some(m) = merged {
        list.insert(0, m);
    }
}

#[cfg(test)]
mod tests {
    use super::super::ComputeOp;
    use super::*;

    /// Updating a repeated write's record in place gives what pruning and pushing give:
    /// random compute streams (accumulation chains into one region, reads of it and of
    /// neighbouring regions, one-bin, two-bin and wide regions) end with the same times and
    /// critical paths either way.
    #[test]
    fn repeated_write_fast_path_matches_the_general_path() {
        let chip = crate::Chip::trn2();
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        let mut in_place = 0;
        for _ in 0..100 {
            let (mut fast, mut general) = Timing::fast_and_general(&chip, false, 2, 1 << 15);
            // A few regions of buffer 0 (one bin, two bins, wide) and one of buffer 1.
            let regions = [
                Region { id: 0, p0: 0, p1: 128, b0: 0, b1: 2048 },
                Region { id: 0, p0: 0, p1: 64, b0: 1024, b1: 3072 },
                Region { id: 0, p0: 0, p1: 128, b0: 0, b1: 1 << 15 },
                Region { id: 1, p0: 0, p1: 128, b0: 512, b1: 1024 },
            ];
            for _ in 0..200 {
                let (dst, src) = (regions[next(4) as usize], regions[next(4) as usize]);
                // Mostly writes of the last destination again (accumulation chains).
                let repeats = 1 + next(6);
                for _ in 0..repeats {
                    let op = ComputeOp {
                        track: next(4) as usize,
                        cycles: 1 + next(500),
                        ghz: 1.4,
                        latency_cycles: next(80),
                        reads: &[src],
                        writes: &[dst],
                        ports: 0,
                    };
                    assert_eq!(fast.compute(&op), general.compute(&op));
                }
            }
            assert_eq!((fast.end, fast.end_crit), (general.end, general.end_crit));
            assert_eq!(general.in_place_writes, 0);
            in_place += fast.in_place_writes;
        }
        // A read of the written buffer ends a run of repeats (the newest record is no longer
        // the write), so only groups reading another buffer take the fast path: 6 of the 16
        // (source, destination) pairs, of 20,000 groups, each 2.5 repeats after its first
        // write on average, about 18,750 (21,799 with this seed: a group's first write can
        // repeat the last group's too).
        assert!(in_place > 15_000, "the fast path ran {in_place} times");
    }

    #[test]
    fn merging_records_only_adds_waits() {
        let mut list: Vec<Rec> = (0..10)
            .map(|i| Rec { p0: 0, p1: 1, b0: i * 8, b1: i * 8 + 8, time: i * 100, crit: [0; 10] })
            .collect();
        merge_oldest(&mut list);
        // Every byte range of the first five is inside a merged record with time >= its own;
        // the newer five are kept as they were.
        for i in 0..10u64 {
            assert!(list.iter().any(|r| r.b0 <= i * 8 && r.b1 >= i * 8 + 8 && r.time >= i * 100));
        }
        assert_eq!(list.len(), 6);
        assert_eq!((list[0].b0, list[0].b1, list[0].time), (0, 40, 400));
    }
}
