//! DMA transfers: the engines' busy intervals and where a transfer's chunks go.
//!
//! A transfer is split into chunks, one per queue it uses; each chunk takes the earliest
//! idle gap of its engine that fits it (an engine serves its queues round-robin but moves
//! one transfer at a time), paying a fixed latency, a cost per descriptor and its share of
//! HBM bandwidth ([`super::hbm`]). Chunks that stream together are placed as one transfer,
//! and a *uniform* transfer (equal chunks on distinct engines in one state) is placed once:
//! fast paths that must give exactly what the general path gives (tests compare the two).

use super::{
    add_crit, ceil_u64, round_u64, Crit, Region, Timing, CAT_DMA, CAT_DMA_FIXED, CAT_HBM, CAT_QUEUE,
};

/// Busy intervals of one DMA engine. Each engine serves 16 queues round-robin
/// (neuroncore.md §1.7), so a transfer waiting on a semaphore does not hold up a later,
/// ready transfer on the same engine: a transfer takes the earliest idle gap that fits it.
/// The engine still moves one transfer at a time, so intervals never overlap.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct DmaEngine {
    /// Sorted, disjoint; at most `DMA_WINDOW` long.
    busy: Intervals,
    /// Nothing is placed before this time (intervals older than the window were dropped;
    /// conservative: it can only delay a transfer, never speed one up).
    floor: u64,
    /// Engines with the same stamp have the same `busy` and `floor` (a copy keeps the
    /// stamp, any other change takes a fresh one), so equal state is usually one compare.
    stamp: u64,
}

/// Busy intervals kept per DMA engine before the oldest are folded into `floor`.
const DMA_WINDOW: usize = 8;

/// Up to `DMA_WINDOW + 1` intervals held in place. Written here rather than taken from a
/// crate: engines in one state copy it to each other on every uniform DMA, and a plain array
/// makes that one fixed-size move (a `Vec`'s `clone_from` checks lengths and capacity first;
/// an `ArrayVec` is not `Copy`).
#[derive(Clone, Copy, Debug, Default)]
struct Intervals {
    len: usize,
    items: [(u64, u64); DMA_WINDOW + 1],
}

impl Intervals {
    fn push(&mut self, x: (u64, u64)) {
        self.items[self.len] = x;
        self.len += 1;
    }
    fn insert(&mut self, pos: usize, x: (u64, u64)) {
        self.items.copy_within(pos..self.len, pos + 1);
        self.items[pos] = x;
        self.len += 1;
    }
    fn remove(&mut self, pos: usize) -> (u64, u64) {
        let x = self.items[pos];
        self.items.copy_within(pos + 1..self.len, pos);
        self.len -= 1;
        x
    }
}

impl std::ops::Deref for Intervals {
    type Target = [(u64, u64)];
    fn deref(&self) -> &[(u64, u64)] {
        &self.items[..self.len]
    }
}

impl std::ops::DerefMut for Intervals {
    fn deref_mut(&mut self) -> &mut [(u64, u64)] {
        &mut self.items[..self.len]
    }
}

impl PartialEq for Intervals {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl DmaEngine {
    fn same_state(&self, other: &DmaEngine) -> bool {
        let equal = || self.floor == other.floor && self.busy == other.busy;
        debug_assert!(self.stamp != other.stamp || equal(), "one stamp, two states");
        self.stamp == other.stamp || equal()
    }

    /// Earliest start >= `ready` of an idle gap that fits a transfer; `end_of(start)` gives
    /// its end (only asked for gaps, as it costs a look at the HBM timeline) and `min_dur`
    /// is a lower bound of its duration, to skip short gaps cheaply. Past the last busy
    /// interval anything fits.
    fn place(&self, ready: u64, min_dur: u64, mut end_of: impl FnMut(u64) -> u64) -> u64 {
        let mut s = ready.max(self.floor);
        // Intervals are sorted and disjoint, so their ends are sorted too.
        let first = self.busy.partition_point(|&(_, b1)| b1 <= s);
        for &(b0, b1) in &self.busy[first..] {
            if s + min_dur <= b0 && end_of(s) <= b0 {
                return s;
            }
            s = s.max(b1);
        }
        s
    }

    /// Add a busy interval, merging it with neighbours it touches (back-to-back transfers
    /// form one interval, which keeps `place` short).
    fn insert(&mut self, start: u64, end: u64) {
        // Fast path: at or past the last interval (transfers issued ahead of compute).
        match self.busy.last_mut() {
            None => return self.push_back(start, end),
            Some(last) if last.1 < start => return self.push_back(start, end),
            Some(last) if last.1 == start => {
                last.1 = end;
                return;
            }
            _ => {}
        }
        let (mut start, mut end) = (start, end);
        let mut pos = self.busy.partition_point(|&(b0, _)| b0 <= start);
        if pos > 0 && self.busy[pos - 1].1 >= start {
            pos -= 1;
            start = self.busy[pos].0;
            end = end.max(self.busy[pos].1);
            self.busy.remove(pos);
        }
        while pos < self.busy.len() && self.busy[pos].0 <= end {
            end = end.max(self.busy[pos].1);
            self.busy.remove(pos);
        }
        self.busy.insert(pos, (start, end));
        self.fold_window();
    }

    fn push_back(&mut self, start: u64, end: u64) {
        self.busy.push((start, end));
        self.fold_window();
    }

    /// Fold intervals older than the window into `floor`.
    #[inline]
    fn fold_window(&mut self) {
        // One interval is added at a time, so one removal keeps the window.
        if self.busy.len() > DMA_WINDOW {
            let (_, e) = self.busy.remove(0);
            self.floor = self.floor.max(e);
        }
        debug_assert!(self.busy.len() <= DMA_WINDOW);
    }
}

/// One queue's share of a DMA transfer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DmaChunk {
    pub queue: usize,
    pub descriptors: u64,
    pub bytes: u64,
}

impl Timing {
    /// Schedule a DMA transfer split into `chunks`; `hbm_sides` is how many of its two
    /// sides are in HBM (each HBM side consumes HBM bandwidth). Returns per-chunk
    /// (queue, start, end) through `out`.
    pub fn dma(
        &mut self,
        chunks: &[DmaChunk],
        hbm_sides: u32,
        reads: &[Region],
        writes: &[Region],
        out: &mut Vec<(usize, u64, u64)>,
    ) -> u64 {
        out.clear();
        let (dep_t, dep_crit) = self.deps(reads, writes, 0);
        let ready = dep_t + self.dma_fixed_ps;
        let mut ready_crit = dep_crit;
        add_crit(&mut ready_crit, CAT_DMA_FIXED, self.dma_fixed_ps);
        let uniform = if general_only!(self) { None } else { self.uniform_engine(chunks) };
        let (end, crit) = match uniform {
            Some(proto) => self.place_uniform(chunks, proto, hbm_sides, ready, ready_crit, out),
            None => self.place_chunks(chunks, hbm_sides, ready, ready_crit, out),
        };
        for r in reads {
            self.record(r, false, end, &crit);
        }
        for w in writes {
            self.record(w, true, end, &crit);
        }
        self.bump_end(end, crit);
        end
    }

    /// The engine of the first chunk when the DMA is **uniform**: every chunk moves the same
    /// bytes with the same descriptors, on its own engine, and all those engines are in one
    /// state (the common case: a tile split evenly over the queues). Such chunks are placed
    /// alike, so one placement serves all (see [`Timing::place_uniform`]).
    #[inline]
    fn uniform_engine(&self, chunks: &[DmaChunk]) -> Option<usize> {
        let first = chunks.first()?;
        let proto = first.queue - 4;
        let stamp = self.dma_engines[proto].stamp;
        let mut engines = 0u64;
        for c in chunks {
            let q = c.queue - 4;
            let bit = 1u64 << q;
            if (c.descriptors, c.bytes) != (first.descriptors, first.bytes)
                || engines & bit != 0
                || self.dma_engines[q].stamp != stamp
            {
                return None;
            }
            engines |= bit;
        }
        Some(proto)
    }

    /// Place a uniform DMA (see [`Timing::uniform_engine`]): what [`Timing::place_chunks`]
    /// computes for it, computed once. Its group covers every chunk (one engine state, so
    /// idle on all or on none), and without HBM every chunk finds the same gap on its
    /// identical engine; so each chunk gets the same (start, end) and critical path, and
    /// every engine the same new state, inserted once and copied.
    fn place_uniform(
        &mut self,
        chunks: &[DmaChunk],
        proto: usize,
        hbm_sides: u32,
        ready: u64,
        ready_crit: Crit,
        out: &mut Vec<(usize, u64, u64)>,
    ) -> (u64, Crit) {
        let c0 = chunks[0];
        let desc = round_u64(c0.descriptors as f64 * self.dma_desc_ps);
        let own = ceil_u64(c0.bytes as f64 / self.dma_rate);
        let e = &self.dma_engines[proto];
        let (start, end) = if hbm_sides > 0 {
            // Summed chunk by chunk, as the general path does, for bit-identical rates.
            let sides = hbm_sides as u64;
            let (mut bytes, mut rate) = (0f64, 0f64);
            for _ in chunks {
                bytes += (c0.bytes * sides) as f64;
                rate += self.dma_rate * sides as f64;
            }
            let s0 = ready.max(e.floor);
            let start = if e.busy.last().is_none_or(|&(_, b1)| b1 <= s0) {
                s0
            } else {
                let hbm = &mut self.hbm;
                e.place(ready, desc + own, |s| hbm.query(s + desc, bytes, rate).max(s + 1))
            };
            (start, self.hbm.transfer(start + desc, bytes, rate).max(start + 1))
        } else {
            let start = e.place(ready, desc + own, |s| (s + desc + own).max(s + 1));
            (start, (start + desc + own).max(start + 1))
        };
        self.insert_dma(proto, start, end);
        let state = self.dma_engines[proto];
        let crit = chunk_crit(ready_crit, ready, (start, end), desc + own);
        for c in chunks {
            self.dma_engines[c.queue - 4] = state;
            self.book_chunk(c, (start, end), start + desc, hbm_sides, out);
        }
        (end, crit)
    }

    /// Account for a placed chunk: its queue's busy time and count, the caller's list and
    /// the trace's HBM counter (its bytes counted when its data starts to move).
    #[inline(always)]
    fn book_chunk(
        &mut self,
        c: &DmaChunk,
        (start, end): (u64, u64),
        data_start: u64,
        hbm_sides: u32,
        out: &mut Vec<(usize, u64, u64)>,
    ) {
        let track = &mut self.tracks[c.queue];
        track.free = track.free.max(end);
        track.busy_ps += end - start;
        track.count += 1;
        out.push((c.queue, start, end));
        if let Some(counter) = &mut self.hbm_counter {
            if hbm_sides > 0 {
                *counter.entry(data_start / 1_000_000).or_default() += c.bytes;
            }
        }
    }

    /// Place the chunks of a DMA that is not uniform, each on its engine (grouping those that
    /// can share one HBM fill, see [`Timing::place_dma`]); returns the end and critical path
    /// of the chunk that ends last.
    fn place_chunks(
        &mut self,
        chunks: &[DmaChunk],
        hbm_sides: u32,
        ready: u64,
        ready_crit: Crit,
        out: &mut Vec<(usize, u64, u64)>,
    ) -> (u64, Crit) {
        let (mut end, mut crit) = (0u64, [0u32; 10]);
        // (descriptor time, own streaming time) per chunk; chunks are mostly alike.
        let mut costs = [(0u64, 0u64); 64];
        for (i, c) in chunks.iter().enumerate() {
            costs[i] = match i.checked_sub(1).map(|p| &chunks[p]) {
                Some(p) if (p.descriptors, p.bytes) == (c.descriptors, c.bytes) => costs[i - 1],
                _ => (
                    round_u64(c.descriptors as f64 * self.dma_desc_ps),
                    ceil_u64(c.bytes as f64 / self.dma_rate),
                ),
            };
        }
        let placed = self.place_dma(chunks, &costs, hbm_sides, ready);
        let mut ccrit = ready_crit;
        for (i, c) in chunks.iter().enumerate() {
            let (desc_ps, own_ps) = costs[i];
            let (start, chunk_end) = placed[i];
            // A chunk placed and costed like the one before has its critical path too.
            if i == 0 || (placed[i], costs[i]) != (placed[i - 1], costs[i - 1]) {
                ccrit = chunk_crit(ready_crit, ready, placed[i], desc_ps + own_ps);
            }
            if chunk_end > end {
                end = chunk_end;
                crit = ccrit;
            }
            self.book_chunk(c, (start, chunk_end), start + desc_ps, hbm_sides, out);
        }
        (end, crit)
    }

    /// Place each chunk of a DMA on its engine and the HBM timeline; returns (start, end)
    /// per chunk, already inserted into the engines' busy lists.
    ///
    /// Chunks that stream together share HBM, so they are filled as one transfer (their
    /// bytes and engine rates summed, the longest descriptor time): one pass over the HBM
    /// timeline instead of one per queue. Two kinds of group, each with one chunk per
    /// engine at most (an engine moves one transfer at a time):
    /// * engines idle from `max(ready, floor)` on with the same such start (the common case
    ///   when transfers are issued ahead of compute);
    /// * otherwise, engines whose busy intervals are identical (a transfer symmetric over
    ///   the queues, issued behind others): the earliest gap that fits on one fits on all.
    ///
    /// Other chunks are placed one by one, each in the earliest gap of its engine.
    fn place_dma(
        &mut self,
        chunks: &[DmaChunk],
        costs: &[(u64, u64); 64],
        hbm_sides: u32,
        ready: u64,
    ) -> [(u64, u64); 64] {
        let mut placed = [(0u64, 0u64); 64];
        let mut grouped = [false; 64];
        let sides = hbm_sides as u64;
        if hbm_sides > 0 {
            // (start, longest descriptor time, longest own time, bytes, rate)
            let mut group: Option<(u64, u64, u64, f64, f64)> = None;
            let mut engines = 0u64;
            let rate = self.dma_rate;
            let add = |g: &mut (u64, u64, u64, f64, f64), c: &DmaChunk, (desc, own): (u64, u64)| {
                g.1 = g.1.max(desc);
                g.2 = g.2.max(own);
                g.3 += (c.bytes * sides) as f64;
                g.4 += rate * sides as f64;
            };
            for (i, c) in chunks.iter().enumerate() {
                let e = &self.dma_engines[c.queue - 4];
                let s0 = ready.max(e.floor);
                let idle_after = e.busy.last().is_none_or(|&(_, b1)| b1 <= s0);
                let bit = 1u64 << (c.queue - 4);
                if idle_after && engines & bit == 0 && group.is_none_or(|g| g.0 == s0) {
                    add(group.get_or_insert((s0, 0, 0, 0.0, 0.0)), c, costs[i]);
                    grouped[i] = true;
                    engines |= bit;
                }
            }
            // `identical`: the grouped engines had equal busy lists, so they still do after
            // the insertion, which is done once and copied.
            let (start, end, identical) = if let Some((s0, desc, _, bytes, rate)) = group {
                let mut stamps = chunks.iter().zip(&grouped).filter(|(_, &g)| g);
                let stamp = |c: &DmaChunk| self.dma_engines[c.queue - 4].stamp;
                let first = stamps.next().map(|(c, _)| stamp(c));
                let identical = stamps.all(|(c, _)| Some(stamp(c)) == first);
                (s0, self.hbm.transfer(s0 + desc, bytes, rate).max(s0 + 1), identical)
            } else {
                let first = chunks[0].queue - 4;
                let mut g = (0, 0, 0, 0.0, 0.0);
                for (i, c) in chunks.iter().enumerate() {
                    let bit = 1u64 << (c.queue - 4);
                    let (e, e0) = (&self.dma_engines[c.queue - 4], &self.dma_engines[first]);
                    if engines & bit == 0 && e.same_state(e0) {
                        add(&mut g, c, costs[i]);
                        grouped[i] = true;
                        engines |= bit;
                    }
                }
                let (_, desc, own, bytes, rate) = g;
                let hbm = &mut self.hbm;
                let start = self.dma_engines[first]
                    .place(ready, desc + own, |s| hbm.query(s + desc, bytes, rate).max(s + 1));
                (start, self.hbm.transfer(start + desc, bytes, rate).max(start + 1), true)
            };
            let mut inserted: Option<usize> = None;
            for (i, c) in chunks.iter().enumerate() {
                if !grouped[i] {
                    continue;
                }
                placed[i] = (start, end);
                let q = c.queue - 4;
                match inserted {
                    Some(done) if identical => self.dma_engines[q] = self.dma_engines[done],
                    _ => {
                        self.insert_dma(q, start, end);
                        inserted = Some(q);
                    }
                }
            }
        }
        for (i, c) in chunks.iter().enumerate() {
            if grouped[i] {
                continue;
            }
            let (desc_ps, own_ps) = costs[i];
            let (bytes, rate) = ((c.bytes * sides) as f64, self.dma_rate * sides as f64);
            let engine = &self.dma_engines[c.queue - 4];
            let hbm = &mut self.hbm;
            let end_of = |start: u64| -> u64 {
                let data_end = if hbm_sides > 0 {
                    hbm.query(start + desc_ps, bytes, rate)
                } else {
                    start + desc_ps + own_ps
                };
                data_end.max(start + 1)
            };
            let start = engine.place(ready, desc_ps + own_ps, end_of);
            let data_end = if hbm_sides > 0 {
                self.hbm.transfer(start + desc_ps, bytes, rate)
            } else {
                start + desc_ps + own_ps
            };
            placed[i] = (start, data_end.max(start + 1));
            self.insert_dma(c.queue - 4, placed[i].0, placed[i].1);
        }
        placed
    }

    /// Mark engine `q` busy over [start, end); its state is now its own (a fresh stamp).
    fn insert_dma(&mut self, q: usize, start: u64, end: u64) {
        self.next_stamp += 1;
        let e = &mut self.dma_engines[q];
        e.insert(start, end);
        e.stamp = self.next_stamp;
    }
}

#[inline]
/// A chunk's critical path: from `ready`, the wait for a gap on its busy engine
/// (`dma_queue_wait`), its own descriptors and streaming (`dma_transfer`), and whatever the
/// shared HBM bandwidth stretched it by (`hbm_bandwidth`); `own` is its descriptors and
/// streaming alone.
fn chunk_crit(ready_crit: Crit, ready: u64, (start, end): (u64, u64), own: u64) -> Crit {
    let (mut crit, busy) = (ready_crit, end - start);
    add_crit(&mut crit, CAT_QUEUE, start - ready);
    add_crit(&mut crit, CAT_DMA, busy.min(own));
    add_crit(&mut crit, CAT_HBM, busy.saturating_sub(own));
    crit
}

#[cfg(test)]
mod tests {
    use super::super::ComputeOp;
    use super::*;

    /// Two chunks of one DMA on the same queue, and a load issued while other engines are
    /// busy: an engine still moves one transfer at a time.
    #[test]
    fn dma_chunks_on_one_engine_never_overlap() {
        let chip = crate::Chip::trn2();
        let mut t = Timing::new(&chip, 16, false);
        t.ensure_buffer(0, 1 << 20);
        t.ensure_buffer(1, 1 << 20);
        let region = |id, p0, p1| Region { id, p0, p1, b0: 0, b1: 4096 };
        let chunk = |queue| DmaChunk { queue, descriptors: 8, bytes: 32 * 1024 };
        let mut out = Vec::new();
        let mut intervals: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 20];
        // Idle engines, chunks 0 and 1 both on queue 4.
        t.dma(
            &[chunk(4), chunk(4), chunk(5)],
            1,
            &[region(0, 0, 24)],
            &[region(1, 0, 24)],
            &mut out,
        );
        assert_eq!(out.len(), 3);
        for &(q, s, e) in &out {
            intervals[q].push((s, e));
        }
        // A later load waiting for nothing lands in the same engines (gap or after).
        let late: Vec<_> = (4..20).map(chunk).collect();
        t.dma(&late, 1, &[region(0, 24, 128)], &[region(1, 24, 128)], &mut out);
        for &(q, s, e) in &out {
            intervals[q].push((s, e));
        }
        for (q, list) in intervals.iter_mut().enumerate() {
            list.sort();
            for w in list.windows(2) {
                assert!(w[0].1 <= w[1].0, "queue {q}: {:?} overlaps {:?}", w[0], w[1]);
            }
        }
        assert_eq!(intervals[4].len(), 3, "queue 4 moved its three chunks");
    }

    /// A load issued behind a store that waits on compute fills the idle gap before the
    /// store on all 16 engines at once (their busy lists are identical), sharing HBM.
    #[test]
    fn dma_behind_a_waiting_store_fills_the_gap_on_every_engine() {
        let chip = crate::Chip::trn2();
        let mut t = Timing::new(&chip, 16, false);
        for id in 0..4 {
            t.ensure_buffer(id, 1 << 16);
        }
        let whole = |id| Region { id, p0: 0, p1: 128, b0: 0, b1: 4096 };
        let chunks: Vec<_> =
            (4..20).map(|queue| DmaChunk { queue, descriptors: 8, bytes: 8 * 4096 }).collect();
        let mut out = Vec::new();
        // A load, then a long computation on what it loaded, then a store of the result.
        let load_end = t.dma(&chunks, 1, &[whole(0)], &[whole(1)], &mut out);
        let op = ComputeOp {
            track: 1,
            cycles: 100_000,
            ghz: 1.0,
            latency_cycles: 0,
            reads: &[whole(1)],
            writes: &[whole(2)],
            ports: 0,
        };
        let (_, compute_end) = t.compute(&op);
        t.dma(&chunks, 1, &[whole(2)], &[whole(0)], &mut out);
        let store_start = out.iter().map(|o| o.1).min().unwrap();
        assert!(store_start >= compute_end, "the store waits for the computation");
        // An independent load: ready right away, the engines are free until the store.
        let end = t.dma(&chunks, 1, &[whole(3)], &[whole(3)], &mut out);
        let (s0, e0) = (out[0].1, out[0].2);
        assert!(out.iter().all(|o| (o.1, o.2) == (s0, e0)), "one group: {out:?}");
        assert_eq!(s0, load_end, "starts in the first gap: right after the first load");
        assert!(end <= store_start, "fits before the store: {end} > {store_start}");
        // The same bytes as the first load, over the same engines: the same duration.
        assert_eq!(e0 - s0, load_end - t.dma_fixed_ps);
    }

    /// The O(1) paths of `DmaEngine::insert` keep exactly what sorting and merging every
    /// interval would (touching intervals merge; the oldest fold into `floor`).
    #[test]
    fn dma_engine_insert_matches_sort_and_merge() {
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..200 {
            let (mut engine, mut all, mut floor) = (DmaEngine::default(), Vec::new(), 0u64);
            let mut t = 0;
            for _ in 0..40 {
                // Mostly appends (some touching the last interval), sometimes into the past.
                t += next(4) * 10;
                let start = if next(4) == 0 { t.saturating_sub(next(200)) } else { t };
                let end = start + 1 + next(30);
                engine.insert(start, end);
                all.push((start, end));
                all.sort();
                let mut merged: Vec<(u64, u64)> = Vec::new();
                for &(s, e) in &all {
                    match merged.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => merged.push((s, e)),
                    }
                }
                while merged.len() > DMA_WINDOW {
                    floor = floor.max(merged.remove(0).1);
                }
                all = merged.clone();
                assert_eq!((&engine.busy[..], engine.floor), (&merged[..], floor));
            }
        }
    }

    /// The uniform-DMA fast path places every transfer exactly as the general path does:
    /// random streams of loads, stores and SBUF copies (even and uneven splits, engines left
    /// in equal and in different states) give the same chunk times, ends and critical paths.
    #[test]
    fn uniform_dma_fast_path_matches_the_general_path() {
        let chip = crate::Chip::trn2();
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        let mut uniform_seen = 0;
        for _ in 0..60 {
            let (mut fast, mut general) =
                (Timing::new(&chip, 16, true), Timing::new(&chip, 16, true));
            general.general_only = true;
            for t in [&mut fast, &mut general] {
                for id in 0..4 {
                    t.ensure_buffer(id, 1 << 16);
                }
            }
            for i in 0..30 {
                // The first ten over all 16 queues (uniform while the engines stay alike),
                // then half so, half 1-16 chunks from a random first queue (which leaves the
                // engines in different states); sometimes one odd chunk.
                let all = i < 10 || next(2) == 0;
                let n = if all { 16 } else { 1 + next(16) as usize };
                let q0 = if all { 0 } else { next(16) as usize };
                let (desc, bytes) = (1 + next(4), 512 * (1 + next(8)));
                let mut chunks: Vec<DmaChunk> = (0..n)
                    .map(|i| DmaChunk { queue: 4 + (q0 + i) % 16, descriptors: desc, bytes })
                    .collect();
                if i >= 10 && next(4) == 0 {
                    chunks[n - 1].bytes += 64;
                }
                let mut region = || Region {
                    id: next(4) as u32,
                    p0: 0,
                    p1: 128,
                    b0: next(8) * 1024,
                    b1: 8192 + next(8) * 1024,
                };
                let (src, dst) = (region(), region());
                let sides = next(3) as u32;
                uniform_seen += fast.uniform_engine(&chunks).is_some() as u32;
                let (mut out_f, mut out_g) = (Vec::new(), Vec::new());
                let end_f = fast.dma(&chunks, sides, &[src], &[dst], &mut out_f);
                let end_g = general.dma(&chunks, sides, &[src], &[dst], &mut out_g);
                assert_eq!((end_f, &out_f), (end_g, &out_g));
                assert_eq!((fast.end, fast.end_crit), (general.end, general.end_crit));
                for (a, b) in fast.tracks.iter().zip(&general.tracks) {
                    assert_eq!(
                        (a.free, a.crit, a.busy_ps, a.count),
                        (b.free, b.crit, b.busy_ps, b.count)
                    );
                }
            }
            assert_eq!(fast.hbm_counter, general.hbm_counter);
        }
        assert!(uniform_seen >= 600, "the fast path ran {uniform_seen} times");
    }
}
