//! DMA transfers: the engines' busy intervals and where a transfer's chunks go.
//!
//! A transfer is split into chunks, one per DMA engine it uses, all on one of each engine's
//! 16 queues; it pays a fixed latency, a cost per descriptor and its share of HBM bandwidth
//! ([`super::hbm`]). An engine serves its queues round-robin at descriptor granularity
//! (docs/dma.md §3): a chunk takes the earliest idle gap that fits it whole, or, meeting
//! first a block of other queues' work, interleaves with it and has its engine time charged
//! after the block. Placement is final when it happens (dependents are timed at once), so the
//! block's transfers keep their ends: the approximation docs/dma.md states and bounds.
//! Chunks that stream together are placed as one transfer, and a *uniform* transfer (equal
//! chunks on distinct engines in one state) is placed once: fast paths that must give
//! exactly what the general path gives (tests compare the two), whole or shared.

use super::{
    add_crit, ceil_u64, round_u64, Crit, Region, Timing, CAT_DMA, CAT_DMA_FIXED, CAT_HBM, CAT_QUEUE,
};

/// Queues per DMA engine (neuroncore.md §1.7: IDs 0–15 on every engine).
pub(crate) const DMA_QUEUES: usize = 16;

/// Busy intervals of one DMA engine. Each engine serves its 16 queues round-robin at
/// descriptor granularity (neuroncore.md §1.7, docs/dma.md): work of one queue completes in
/// order, and a transfer arriving on one queue while the engine is busy with other queues'
/// work interleaves its descriptors with theirs instead of waiting for them to finish
/// ([`Slot::Shared`]). A transfer that fits an idle gap takes it whole, so a transfer whose
/// producer is late does not hold up a later, ready one. Intervals never overlap: they are
/// the engine's time, and a shared transfer's time is charged after the block it shared.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct DmaEngine {
    /// Sorted, disjoint; at most `DMA_WINDOW` long.
    busy: Intervals,
    /// Nothing is placed before this time (intervals older than the window were dropped;
    /// conservative: it can only delay a transfer, never speed one up).
    floor: u64,
    /// Per queue, when its latest transfer on this engine ends: a queue's work completes in
    /// order, so a transfer shares the engine only once its own queue has nothing in flight.
    queue_free: [u64; DMA_QUEUES],
    /// Engines with the same stamp have the same `busy`, `floor` and `queue_free` (a copy
    /// keeps the stamp, any other change takes a fresh one), so equal state is usually one
    /// compare.
    stamp: u64,
}

/// Busy intervals kept per DMA engine before the oldest are folded into `floor`.
const DMA_WINDOW: usize = 8;

/// Up to `DMA_WINDOW + 1` intervals held in place, each with the set of queues whose work
/// it holds (bit q: queue q). Written here rather than taken from a crate: engines in one
/// state copy it to each other on every uniform DMA, and a plain array makes that one
/// fixed-size move (a `Vec`'s `clone_from` checks lengths and capacity first; an
/// `ArrayVec` is not `Copy`).
#[derive(Clone, Copy, Debug, Default)]
struct Intervals {
    len: usize,
    items: [(u64, u64); DMA_WINDOW + 1],
    queues: [u16; DMA_WINDOW + 1],
}

impl Intervals {
    fn push(&mut self, x: (u64, u64), queues: u16) {
        self.items[self.len] = x;
        self.queues[self.len] = queues;
        self.len += 1;
    }
    fn insert(&mut self, pos: usize, x: (u64, u64), queues: u16) {
        self.items.copy_within(pos..self.len, pos + 1);
        self.queues.copy_within(pos..self.len, pos + 1);
        self.items[pos] = x;
        self.queues[pos] = queues;
        self.len += 1;
    }
    fn remove(&mut self, pos: usize) -> ((u64, u64), u16) {
        let x = (self.items[pos], self.queues[pos]);
        self.items.copy_within(pos + 1..self.len, pos);
        self.queues.copy_within(pos + 1..self.len, pos);
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
        **self == **other && self.queues[..self.len] == other.queues[..other.len]
    }
}

/// Where a transfer goes on its engine ([`DmaEngine::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// Whole, in the idle gap that starts here.
    Whole(u64),
    /// Round-robin with other queues' work: alone from `start` until `block` (an idle gap
    /// too short for it; `block == start` when the engine is busy at `start`), then
    /// interleaved with the busy block `[block, block_end)`, which holds work of `others`
    /// other queues.
    Shared { start: u64, block: u64, block_end: u64, others: u32 },
}

impl Slot {
    /// The engine time a shared transfer of engine time `own` takes from its start to its
    /// end, and the part of `own` it spends inside the busy block (charged after it).
    ///
    /// Round-robin gives each active queue one descriptor in turn; with equal descriptor
    /// times that is an equal share of the engine, so the transfer moves at 1 / (others + 1)
    /// of the engine's rate while the block lasts and alone after it: it ends at
    /// `block + min((others + 1) × rest, (block_end − block) + rest)`.
    #[inline]
    fn shared_span(start: u64, block: u64, block_end: u64, others: u32, own: u64) -> (u64, u64) {
        let alone = (block - start).min(own);
        let rest = own - alone;
        if rest == 0 {
            return (own.max(1), 0);
        }
        let shared = ((others as u64 + 1) * rest).min(block_end - block + rest);
        (block - start + shared, rest)
    }
}

impl DmaEngine {
    fn same_state(&self, other: &DmaEngine) -> bool {
        let equal = || {
            self.floor == other.floor
                && self.busy == other.busy
                && self.queue_free == other.queue_free
        };
        debug_assert!(self.stamp != other.stamp || equal(), "one stamp, two states");
        self.stamp == other.stamp || equal()
    }

    /// Where a transfer of `queue` ready at `ready` goes: the earliest idle gap from `ready`
    /// on that fits it whole, unless before that gap the engine is busy with other queues'
    /// work while its own queue has nothing in flight — then it shares that busy block
    /// round-robin ([`Slot::Shared`]). `end_of(start)` gives a whole transfer's end (only
    /// asked for gaps, as it costs a look at the HBM timeline) and `min_dur` is a lower bound
    /// of its duration, to skip short gaps cheaply. Past the last busy interval anything fits.
    fn place(
        &self,
        ready: u64,
        queue: usize,
        min_dur: u64,
        mut end_of: impl FnMut(u64) -> u64,
    ) -> Slot {
        let mut s = ready.max(self.floor);
        // Intervals are sorted and disjoint, so their ends are sorted too.
        let first = self.busy.partition_point(|&(_, b1)| b1 <= s);
        for i in first..self.busy.len() {
            let (b0, b1) = self.busy[i];
            if s + min_dur <= b0 && end_of(s) <= b0 {
                return Slot::Whole(s);
            }
            // Work of this queue completes in order: while it has a transfer in flight, the
            // new one waits behind it (and behind the block) as before.
            if self.queue_free[queue] <= s {
                let others = (self.busy.queues[i] & !(1u16 << queue)).count_ones().max(1);
                return Slot::Shared { start: s, block: s.max(b0), block_end: b1, others };
            }
            s = s.max(b1);
        }
        Slot::Whole(s)
    }

    /// Add a busy interval of `queues`' work, merging it with neighbours it touches
    /// (back-to-back transfers form one interval, which keeps `place` short).
    fn insert(&mut self, start: u64, end: u64, queues: u16) {
        // Fast path: at or past the last interval (transfers issued ahead of compute).
        let n = self.busy.len;
        match self.busy.last_mut() {
            None => return self.push_back(start, end, queues),
            Some(last) if last.1 < start => return self.push_back(start, end, queues),
            Some(last) if last.1 == start => {
                last.1 = end;
                self.busy.queues[n - 1] |= queues;
                return;
            }
            _ => {}
        }
        let (mut start, mut end, mut queues) = (start, end, queues);
        let mut pos = self.busy.partition_point(|&(b0, _)| b0 <= start);
        if pos > 0 && self.busy[pos - 1].1 >= start {
            pos -= 1;
            start = self.busy[pos].0;
            end = end.max(self.busy[pos].1);
            queues |= self.busy.remove(pos).1;
        }
        while pos < self.busy.len() && self.busy[pos].0 <= end {
            end = end.max(self.busy[pos].1);
            queues |= self.busy.remove(pos).1;
        }
        self.busy.insert(pos, (start, end), queues);
        self.fold_window();
    }

    /// The first idle time from `from` on (where [`DmaEngine::charge`] starts).
    fn first_idle(&self, from: u64) -> u64 {
        let s = from.max(self.floor);
        let i = self.busy.partition_point(|&(_, b1)| b1 <= s);
        match self.busy.get(i) {
            Some(&(b0, b1)) if b0 <= s => self.first_idle(b1),
            _ => s,
        }
    }

    /// Charge `dur` of engine time to the earliest idle time from `from` on, in as many
    /// pieces as the gaps take (the engine time a shared transfer took from the block it
    /// shared: the block's own work is pushed back by as much).
    fn charge(&mut self, from: u64, dur: u64, queues: u16) {
        let (mut s, mut left) = (from.max(self.floor), dur);
        while left > 0 {
            let i = self.busy.partition_point(|&(_, b1)| b1 <= s);
            if i < self.busy.len() && self.busy[i].0 <= s {
                s = self.busy[i].1;
                continue;
            }
            let gap_end = if i < self.busy.len() { self.busy[i].0 } else { u64::MAX };
            let piece = left.min(gap_end - s);
            debug_assert!(!self.overlaps(s, s + piece), "a charge into busy time");
            self.insert(s, s + piece, queues);
            s += piece;
            left -= piece;
            s = s.max(self.floor);
        }
    }

    /// Whether [start, end) overlaps engine time already taken (touching is not overlap):
    /// placement never does that (debug check).
    fn overlaps(&self, start: u64, end: u64) -> bool {
        start < self.floor || self.busy.iter().any(|&(b0, b1)| start < b1 && b0 < end)
    }

    fn push_back(&mut self, start: u64, end: u64, queues: u16) {
        self.busy.push((start, end), queues);
        self.fold_window();
    }

    /// Fold intervals older than the window into `floor`.
    #[inline]
    fn fold_window(&mut self) {
        // One interval is added at a time, so one removal keeps the window.
        if self.busy.len() > DMA_WINDOW {
            let ((_, e), _) = self.busy.remove(0);
            self.floor = self.floor.max(e);
        }
        debug_assert!(self.busy.len() <= DMA_WINDOW);
    }
}

/// One DMA engine's share of a DMA transfer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DmaChunk {
    /// The engine's track: 4 + the engine's index (the trace calls it a DMA queue).
    pub queue: usize,
    /// Which of the engine's [`DMA_QUEUES`] queues the transfer is on (every chunk of one
    /// transfer is on the same one; nc/dma.rs says which).
    pub engine_queue: u8,
    pub descriptors: u64,
    pub bytes: u64,
    /// The engine's streaming rate for this transfer, in thousandths of its full rate
    /// ([`FULL_RATE`]); lower for a DMA transpose (nc/dma_transpose.rs).
    pub rate_permille: u16,
}

/// [`DmaChunk::rate_permille`] of an ordinary copy: the engine's whole rate.
pub(crate) const FULL_RATE: u16 = 1000;

impl DmaChunk {
    /// The chunk's streaming rate on an engine whose own rate is `engine_rate`: scaled for
    /// a transfer that streams slower (a DMA transpose). The full rate is the engine's
    /// exactly, not a product, so ordinary copies time bit-identically. The one place the
    /// placement, its tests and the lower bound (`bound.rs`) take a chunk's rate from.
    #[inline]
    pub(crate) fn rate(&self, engine_rate: f64) -> f64 {
        if self.rate_permille == FULL_RATE {
            engine_rate
        } else {
            engine_rate * self.rate_permille as f64 / FULL_RATE as f64
        }
    }
}

impl Timing {
    /// The streaming rate (bytes/ps) of chunk `c` on its engine ([`DmaChunk::rate`]).
    #[inline]
    pub(crate) fn chunk_rate(&self, c: &DmaChunk) -> f64 {
        c.rate(self.dma_rate)
    }

    /// Schedule a DMA transfer split into `chunks`; `hbm_sides` is how many of its two
    /// sides are in HBM (each HBM side consumes HBM bandwidth). Returns per-chunk
    /// (queue, start, end) through `out`, and the engine time it took in `dma_busy`.
    pub fn dma(
        &mut self,
        chunks: &[DmaChunk],
        hbm_sides: u32,
        reads: &[Region],
        writes: &[Region],
        out: &mut Vec<(usize, u64, u64)>,
    ) -> u64 {
        out.clear();
        self.dma_busy = 0;
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
            if (c.descriptors, c.bytes, c.engine_queue, c.rate_permille)
                != (first.descriptors, first.bytes, first.engine_queue, first.rate_permille)
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
    /// every engine the same new state, inserted once and copied (whole or shared alike).
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
        let eq = c0.engine_queue as usize;
        let desc = round_u64(c0.descriptors as f64 * self.dma_desc_ps);
        let chunk_rate = self.chunk_rate(&c0);
        let own = ceil_u64(c0.bytes as f64 / chunk_rate);
        let e = &self.dma_engines[proto];
        // Summed chunk by chunk, as the general path does, for bit-identical rates (only
        // a transfer touching HBM uses them).
        let (mut bytes, mut rate) = (0f64, 0f64);
        if hbm_sides > 0 {
            let sides = hbm_sides as u64;
            for _ in chunks {
                bytes += (c0.bytes * sides) as f64;
                rate += chunk_rate * sides as f64;
            }
        }
        let slot = if hbm_sides > 0 {
            let s0 = ready.max(e.floor);
            if e.busy.last().is_none_or(|&(_, b1)| b1 <= s0) {
                Slot::Whole(s0)
            } else {
                let hbm = &mut self.hbm;
                e.place(ready, eq, desc + own, |s| hbm.query(s + desc, bytes, rate).max(s + 1))
            }
        } else {
            e.place(ready, eq, desc + own, |s| (s + desc + own).max(s + 1))
        };
        let (start, end, wait, busy) = match slot {
            Slot::Whole(start) => {
                let end = if hbm_sides > 0 {
                    self.hbm.transfer(start + desc, bytes, rate).max(start + 1)
                } else {
                    (start + desc + own).max(start + 1)
                };
                self.insert_dma(proto, start, end, eq);
                (start, end, 0, end - start)
            }
            shared => self.share_dma(proto, eq, shared, desc + own, hbm_sides, (bytes, rate)),
        };
        let state = self.dma_engines[proto];
        let crit = chunk_crit(ready_crit, ready, (start, end, wait), desc + own);
        for c in chunks {
            self.dma_engines[c.queue - 4] = state;
            self.book_chunk(c, (start, end), busy, start + desc, hbm_sides, out);
        }
        (end, crit)
    }

    /// Account for a placed chunk: its engine's busy time (`busy`: the engine time it took,
    /// less than `end - start` when it shared the engine) and count, the caller's list and
    /// the trace's HBM counter (its bytes counted when its data starts to move).
    #[inline(always)]
    fn book_chunk(
        &mut self,
        c: &DmaChunk,
        (start, end): (u64, u64),
        busy: u64,
        data_start: u64,
        hbm_sides: u32,
        out: &mut Vec<(usize, u64, u64)>,
    ) {
        let track = &mut self.tracks[c.queue];
        track.free = track.free.max(end);
        track.busy_ps += busy;
        track.count += 1;
        self.dma_busy += busy;
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
                Some(p)
                    if (p.descriptors, p.bytes, p.rate_permille)
                        == (c.descriptors, c.bytes, c.rate_permille) =>
                {
                    costs[i - 1]
                }
                _ => (
                    round_u64(c.descriptors as f64 * self.dma_desc_ps),
                    ceil_u64(c.bytes as f64 / self.chunk_rate(c)),
                ),
            };
        }
        let placed = self.place_dma(chunks, &costs, hbm_sides, ready);
        let mut ccrit = ready_crit;
        for (i, c) in chunks.iter().enumerate() {
            let (desc_ps, own_ps) = costs[i];
            let (start, chunk_end, wait, busy) = placed[i];
            // A chunk placed and costed like the one before has its critical path too.
            if i == 0 || (placed[i], costs[i]) != (placed[i - 1], costs[i - 1]) {
                ccrit = chunk_crit(ready_crit, ready, (start, chunk_end, wait), desc_ps + own_ps);
            }
            if chunk_end > end {
                end = chunk_end;
                crit = ccrit;
            }
            self.book_chunk(c, (start, chunk_end), busy, start + desc_ps, hbm_sides, out);
        }
        (end, crit)
    }

    /// Place each chunk of a DMA on its engine and the HBM timeline, already inserted into
    /// the engines' busy lists.
    ///
    /// Chunks that stream together share HBM, so chunks that cost alike (the same bytes
    /// and descriptors) are filled as one transfer (their bytes and engine rates summed):
    /// one pass over the HBM timeline instead of one per engine. Two kinds of group, each
    /// with one chunk per engine at most (two chunks of one transfer are on one queue, so
    /// in order):
    /// * engines idle from `max(ready, floor)` on with the same such start (the common case
    ///   when transfers are issued ahead of compute);
    /// * otherwise, engines whose busy intervals are identical (a transfer symmetric over
    ///   the queues, issued behind others): the earliest gap that fits on one fits on all.
    ///
    /// A group of the second kind that meets a busy block of other queues shares it as one
    /// ([`Timing::share_dma`] on its first engine, the state copied to the others). Other
    /// chunks are placed one by one, each in the earliest gap of its engine or sharing a
    /// busy block ([`Timing::place_one`]).
    ///
    /// Returns (start, end, wait, busy) per chunk: `wait` is the time it lost to the other
    /// queues it shared its engine with (0 when placed whole), `busy` the engine time it is
    /// charged (`end - start` when placed whole).
    fn place_dma(
        &mut self,
        chunks: &[DmaChunk],
        costs: &[(u64, u64); 64],
        hbm_sides: u32,
        ready: u64,
    ) -> [(u64, u64, u64, u64); 64] {
        let mut placed = [(0u64, 0u64, 0u64, 0u64); 64];
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
                g.4 += c.rate(rate) * sides as f64;
            };
            for (i, c) in chunks.iter().enumerate() {
                let e = &self.dma_engines[c.queue - 4];
                let s0 = ready.max(e.floor);
                let idle_after = e.busy.last().is_none_or(|&(_, b1)| b1 <= s0);
                let bit = 1u64 << (c.queue - 4);
                // Only chunks that cost alike: the group's bytes go through HBM at the
                // engines' summed rate, which ends a larger chunk too early (8 rows and 4
                // rows would each take 6 rows' time).
                let alike = group.is_none_or(|g| g.0 == s0 && (g.1, g.2) == costs[i]);
                if idle_after && engines & bit == 0 && alike {
                    add(group.get_or_insert((s0, 0, 0, 0.0, 0.0)), c, costs[i]);
                    grouped[i] = true;
                    engines |= bit;
                }
            }
            // `identical`: the grouped engines had equal busy lists, so they still do after
            // the insertion, which is done once and copied.
            let whole = if let Some((s0, desc, _, bytes, rate)) = group {
                let mut stamps = chunks.iter().zip(&grouped).filter(|(_, &g)| g);
                let stamp = |c: &DmaChunk| self.dma_engines[c.queue - 4].stamp;
                let first = stamps.next().map(|(c, _)| stamp(c));
                let identical = stamps.all(|(c, _)| Some(stamp(c)) == first);
                Some((s0, self.hbm.transfer(s0 + desc, bytes, rate).max(s0 + 1), identical))
            } else {
                let first = chunks[0].queue - 4;
                let mut g = (0, 0, 0, 0.0, 0.0);
                for (i, c) in chunks.iter().enumerate() {
                    let bit = 1u64 << (c.queue - 4);
                    let (e, e0) = (&self.dma_engines[c.queue - 4], &self.dma_engines[first]);
                    if engines & bit == 0 && e.same_state(e0) && costs[i] == costs[0] {
                        add(&mut g, c, costs[i]);
                        grouped[i] = true;
                        engines |= bit;
                    }
                }
                let (_, desc, own, bytes, rate) = g;
                let hbm = &mut self.hbm;
                let eq = chunks[0].engine_queue as usize;
                match self.dma_engines[first]
                    .place(ready, eq, desc + own, |s| hbm.query(s + desc, bytes, rate).max(s + 1))
                {
                    Slot::Whole(start) => {
                        let end = self.hbm.transfer(start + desc, bytes, rate).max(start + 1);
                        Some((start, end, true))
                    }
                    shared => {
                        // Identical engines share alike: placed once on the first, copied.
                        let placed_shared =
                            self.share_dma(first, eq, shared, desc + own, hbm_sides, (bytes, rate));
                        for (i, c) in chunks.iter().enumerate() {
                            if grouped[i] {
                                placed[i] = placed_shared;
                                self.dma_engines[c.queue - 4] = self.dma_engines[first];
                            }
                        }
                        None
                    }
                }
            };
            if let Some((start, end, identical)) = whole {
                let mut inserted: Option<usize> = None;
                for (i, c) in chunks.iter().enumerate() {
                    if !grouped[i] {
                        continue;
                    }
                    placed[i] = (start, end, 0, end - start);
                    let q = c.queue - 4;
                    match inserted {
                        Some(done) if identical => self.dma_engines[q] = self.dma_engines[done],
                        _ => {
                            self.insert_dma(q, start, end, c.engine_queue as usize);
                            inserted = Some(q);
                        }
                    }
                }
            }
        }
        for (i, c) in chunks.iter().enumerate() {
            if !grouped[i] {
                placed[i] = self.place_one(c, costs[i], hbm_sides, ready);
            }
        }
        placed
    }

    /// Place one chunk on its engine: whole in the earliest gap that fits it, or sharing a
    /// busy block round-robin ([`Slot::Shared`]); returns (start, end, wait, busy) as
    /// [`Timing::place_dma`] does.
    ///
    /// A shared chunk moves its bytes through HBM at its average rate over its span; its
    /// engine time is marked busy where it ran alone and charged after the block it shared
    /// (the block's own transfers keep their end times: they are already timed).
    fn place_one(
        &mut self,
        c: &DmaChunk,
        (desc_ps, own_ps): (u64, u64),
        hbm_sides: u32,
        ready: u64,
    ) -> (u64, u64, u64, u64) {
        let sides = hbm_sides as u64;
        let (bytes, rate) = ((c.bytes * sides) as f64, self.chunk_rate(c) * sides as f64);
        let (q, eq) = (c.queue - 4, c.engine_queue as usize);
        let engine = &self.dma_engines[q];
        let hbm = &mut self.hbm;
        let end_of = |start: u64| -> u64 {
            let data_end = if hbm_sides > 0 {
                hbm.query(start + desc_ps, bytes, rate)
            } else {
                start + desc_ps + own_ps
            };
            data_end.max(start + 1)
        };
        let own = desc_ps + own_ps;
        match engine.place(ready, eq, own, end_of) {
            Slot::Whole(start) => {
                let data_end = if hbm_sides > 0 {
                    self.hbm.transfer(start + desc_ps, bytes, rate)
                } else {
                    start + desc_ps + own_ps
                };
                let end = data_end.max(start + 1);
                self.insert_dma(q, start, end, eq);
                (start, end, 0, end - start)
            }
            shared => self.share_dma(q, eq, shared, own, hbm_sides, (bytes, rate)),
        }
    }

    /// Place a transfer that shares a busy block ([`Slot::Shared`]) on engine `q`, queue
    /// `eq`, with engine time `own`, and `bytes` to move through HBM at up to `rate` (its
    /// sides counted; unused without HBM); returns (start, end, wait, busy) as
    /// [`Timing::place_dma`] does.
    ///
    /// Alone before the block, it moves its bytes there, through HBM. Inside the block it
    /// takes a share of the block's engine time and so of the HBM bandwidth the block already
    /// holds; what it takes is the block's work pushed back, so that engine time is charged
    /// after the block and the same bytes go through HBM there, at the engine's rate (HBM
    /// congestion there lengthens the charge, as it would a transfer placed there). The
    /// block's own transfers keep their end times: they are already timed (docs/dma.md §3).
    fn share_dma(
        &mut self,
        q: usize,
        eq: usize,
        slot: Slot,
        own: u64,
        hbm_sides: u32,
        (bytes, rate): (f64, f64),
    ) -> (u64, u64, u64, u64) {
        let Slot::Shared { start, block, block_end, others } = slot else {
            unreachable!("a shared slot")
        };
        let (span, rest) = Slot::shared_span(start, block, block_end, others, own);
        let alone = own - rest;
        let mut end = start + span;
        let mut charge = rest;
        if hbm_sides > 0 {
            let alone_bytes = bytes * alone as f64 / own.max(1) as f64;
            if alone > 0 {
                end = end.max(self.hbm.transfer(start, alone_bytes, rate));
            }
            if rest > 0 {
                let from = self.dma_engines[q].first_idle(block_end);
                let data_end = self.hbm.transfer(from, bytes - alone_bytes, rate);
                charge = charge.max(data_end.saturating_sub(from));
            }
        }
        let (next, e) = (self.next_stamp + 1, &mut self.dma_engines[q]);
        let bit = 1u16 << eq;
        if alone > 0 {
            debug_assert!(!e.overlaps(start, start + alone), "shared start into busy time");
            e.insert(start, start + alone, bit);
        }
        e.charge(block_end, charge, bit);
        e.queue_free[eq] = e.queue_free[eq].max(end);
        e.stamp = next;
        self.next_stamp = next;
        (start, end, span.saturating_sub(own), alone + charge)
    }

    /// Mark engine `q` busy over [start, end) with a transfer of its queue `eq`; its state is
    /// now its own (a fresh stamp).
    fn insert_dma(&mut self, q: usize, start: u64, end: u64, eq: usize) {
        self.next_stamp += 1;
        let e = &mut self.dma_engines[q];
        debug_assert!(!e.overlaps(start, end), "a whole transfer into busy time");
        e.insert(start, end, 1 << eq);
        e.queue_free[eq] = e.queue_free[eq].max(end);
        e.stamp = self.next_stamp;
    }
}

#[inline]
/// A chunk's critical path: from `ready`, the wait for a gap on its busy engine and the time
/// lost to other queues sharing it (`wait`) (`dma_queue_wait`), its own descriptors and
/// streaming (`dma_transfer`), and whatever the shared HBM bandwidth stretched it by
/// (`hbm_bandwidth`); `own` is its descriptors and streaming alone.
fn chunk_crit(ready_crit: Crit, ready: u64, (start, end, wait): (u64, u64, u64), own: u64) -> Crit {
    let (mut crit, busy) = (ready_crit, end - start - wait);
    add_crit(&mut crit, CAT_QUEUE, start - ready + wait);
    add_crit(&mut crit, CAT_DMA, busy.min(own));
    add_crit(&mut crit, CAT_HBM, busy.saturating_sub(own));
    crit
}

#[cfg(test)]
#[path = "dma_tests.rs"]
mod tests;
