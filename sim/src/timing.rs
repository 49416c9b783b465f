//! The timing model: per-engine in-order streams, region dependencies, shared HBM.
//!
//! Instructions arrive in program order and are scheduled at once (list scheduling), so the
//! model streams: its memory depends on the number of live buffers and a bounded window of
//! HBM time, never on the instruction count.
//!
//! * Each track (Tensor, Vector, Scalar, GpSimd, 16 DMA queues) runs its instructions in
//!   program order: an instruction starts when its track is free and its dependencies are
//!   done (DESIGN.md §4 "Execution").
//! * Dependencies are tracked per **region** (partition range × byte range of a buffer):
//!   a read waits for overlapping earlier writes (RAW); a write waits for overlapping earlier
//!   reads (WAR) and writes (WAW). A result is visible `latency` cycles after the producing
//!   instruction ends (pipeline depth + semaphore); the engine itself is free for the next
//!   independent instruction as soon as its initiation interval has passed.
//! * DMA transfers split across queues by partition, pay a fixed latency and a cost per
//!   descriptor, stream at the engine rate, and share the core's HBM bandwidth through a
//!   timeline of fixed-width buckets ([`HbmTimeline`]).
//! * On NeuronCore-v2, VectorE and GpSimdE share the SBUF ports and VectorE and ScalarE share
//!   PSUM (neuroncore.md §1.8): such instructions are serialized through a port resource,
//!   granted in program order.
//! * Every scheduled time carries its **critical path**: the time along the longest chain of
//!   constraints that led to it, split by category, so the profile can say where the time
//!   went without keeping the program.

use crate::error::SourceLoc;

/// Categories of critical-path time.
pub const CRIT_CATEGORIES: [&str; 8] = [
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "dma_transfer",
    "dma_fixed",
    "dependency_latency",
    "contention",
];
pub(crate) const CAT_DMA: usize = 4;
pub(crate) const CAT_DMA_FIXED: usize = 5;
pub(crate) const CAT_LATENCY: usize = 6;
pub(crate) const CAT_WAIT: usize = 7;

/// Time along a critical path, nanoseconds per category (u32 keeps access records small;
/// 4.29 s per category is far beyond any kernel).
pub(crate) type Crit = [u32; 8];

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
/// writes). 64 bytes, aligned to a cache line: records are copied and scanned constantly.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Rec {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
    /// When a dependent may start: end (+ latency for writes).
    time: u64,
    crit: Crit,
}
const _: () = assert!(std::mem::size_of::<Rec>() == 64);

/// A buffer's access records, binned by byte range so a lookup only scans records near the
/// accessed bytes (tiles are mostly accessed in sub-blocks). A record spanning several bins
/// is kept in each; per bin, reads and writes are separate lists (a read only checks writes).
#[derive(Clone, Debug, Default)]
struct Binned {
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

/// One track: a compute engine (strictly in program order) or a DMA engine.
#[derive(Clone, Debug, Default)]
pub(crate) struct Track {
    /// End of the last busy interval.
    pub free: u64,
    /// The critical path to `free`, for a compute engine (the next instruction on it starts
    /// from there); a DMA queue's is not kept: its transfers start from their dependencies.
    pub crit: Crit,
    pub busy_ps: u64,
    pub busy_cycles: u64,
    pub count: u64,
}

/// Busy intervals of one DMA engine. Each engine serves 16 queues round-robin
/// (neuroncore.md §1.7), so a transfer waiting on a semaphore does not hold up a later,
/// ready transfer on the same engine: a transfer takes the earliest idle gap that fits it.
/// The engine still moves one transfer at a time, so intervals never overlap.
#[derive(Clone, Copy, Debug, Default)]
struct DmaEngine {
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

/// One slice of the trace.
#[derive(Clone, Debug)]
pub(crate) struct Slice {
    pub track: u16,
    pub start: u64,
    pub dur: u64,
    pub name: &'static str,
    pub loc: SourceLoc,
    pub args: String,
    pub bytes: u64,
}

/// A compute instruction to schedule.
pub(crate) struct ComputeOp<'a, R: Operand> {
    pub track: usize,
    pub cycles: u64,
    pub ghz: f64,
    pub latency_cycles: u64,
    pub reads: &'a [R],
    pub writes: &'a [R],
    /// NeuronCore-v2 shared port resources this instruction occupies (bit 0: SBUF
    /// Vector/GpSimd, bit 1: PSUM Vector/Scalar).
    pub ports: u8,
}

/// An instruction operand as the timing model sees it: the region it accesses. Implemented
/// for the builder's (view, region) pairs too, so they need not be copied into region arrays.
pub(crate) trait Operand {
    fn region(&self) -> &Region;
}

impl Operand for Region {
    #[inline]
    fn region(&self) -> &Region {
        self
    }
}

impl<T> Operand for (T, Region) {
    #[inline]
    fn region(&self) -> &Region {
        &self.1
    }
}

/// One queue's share of a DMA transfer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DmaChunk {
    pub queue: usize,
    pub descriptors: u64,
    pub bytes: u64,
}

/// `x.round()` for non-negative `x`, without the libm call `f64::round` is on baseline
/// x86-64 (no SSE4.1): this runs several times per instruction.
#[inline]
fn round_u64(x: f64) -> u64 {
    (x + 0.5) as u64
}

/// `x.ceil()` for non-negative `x`, without the libm call (see [`round_u64`]).
#[inline]
fn ceil_u64(x: f64) -> u64 {
    let t = x as u64;
    if (t as f64) < x {
        t + 1
    } else {
        t
    }
}

/// Converts engine cycles to picoseconds (rounded to the nearest picosecond).
#[inline]
pub(crate) fn cycles_to_ps(cycles: u64, ghz: f64) -> u64 {
    round_u64(cycles as f64 * 1000.0 / ghz)
}

#[inline]
fn ns_to_ps(ns: f64) -> u64 {
    round_u64(ns * 1000.0)
}

#[inline]
fn add_crit(c: &mut Crit, cat: usize, ps: u64) {
    c[cat] = c[cat].saturating_add(((ps + 500) / 1000) as u32);
}

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
    fn new(gbps: f64) -> Self {
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
    fn transfer(&mut self, start: u64, bytes: f64, rate: f64) -> u64 {
        self.fill(start, bytes, rate, true)
    }

    /// When a transfer starting at `start` would end, without reserving anything.
    fn query(&mut self, start: u64, bytes: f64, rate: f64) -> u64 {
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

/// Whether the tests asked for the general path only (see `Timing::general_only`); always
/// false outside tests, so the fast paths carry no switch.
macro_rules! general_only {
    ($timing:expr) => {{
        #[cfg(test)]
        let only = $timing.general_only;
        #[cfg(not(test))]
        let only = false;
        only
    }};
}

/// The timing state of one run.
pub(crate) struct Timing {
    pub tracks: Vec<Track>,
    recs: Vec<Binned>,
    dma_engines: Vec<DmaEngine>,
    /// Last stamp handed out (see [`DmaEngine::stamp`]).
    next_stamp: u64,
    hbm: HbmTimeline,
    ports: [(u64, Crit); 2],
    /// Latest end of any instruction, with its critical path.
    pub end: u64,
    pub end_crit: Crit,
    dma_fixed_ps: u64,
    dma_desc_ps: f64,
    /// Engine rate in bytes per picosecond.
    dma_rate: f64,
    pub trace: Option<Vec<Slice>>,
    /// Bytes moved per microsecond window (for the trace's HBM counter).
    pub hbm_counter: Option<std::collections::BTreeMap<u64, u64>>,
    /// Tests set this to take the general path where there is a fast one (uniform DMAs,
    /// repeated writes), to compare the two; it does not exist outside tests.
    #[cfg(test)]
    general_only: bool,
}

impl Timing {
    pub fn new(chip: &crate::Chip, dma_queues: usize, trace: bool) -> Self {
        Timing {
            tracks: vec![Track::default(); 4 + dma_queues],
            recs: Vec::new(),
            dma_engines: vec![DmaEngine::default(); dma_queues],
            next_stamp: 0,
            hbm: HbmTimeline::new(chip.memory.hbm_gbps_per_core),
            ports: [(0, [0u32; 8]); 2],
            end: 0,
            end_crit: [0; 8],
            dma_fixed_ps: ns_to_ps(chip.dma.fixed_ns),
            dma_desc_ps: chip.dma.descriptor_ns * 1000.0,
            dma_rate: chip.dma.engine_gbps / 1000.0,
            trace: trace.then(Vec::new),
            hbm_counter: trace.then(Default::default),
            #[cfg(test)]
            general_only: false,
        }
    }

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

    /// Earliest time the accesses may start, with the critical path of the binding constraint;
    /// `after` is a start the caller already has (its track's free time): only records later
    /// than it can bind, and a buffer with none is not scanned. Returns (`after`, zero path)
    /// when nothing binds.
    fn deps<R: Operand>(&self, reads: &[R], writes: &[R], after: u64) -> (u64, Crit) {
        let mut t = after;
        let mut binding: Option<&Rec> = None;
        for r in reads {
            self.latest_overlap(r.region(), false, &mut t, &mut binding);
        }
        for w in writes {
            self.latest_overlap(w.region(), true, &mut t, &mut binding);
        }
        (t, binding.map_or([0; 8], |rec| rec.crit))
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
    fn record(&mut self, r: &Region, write: bool, time: u64, crit: &Crit) {
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
            return;
        }
        b.last_write = write.then_some(key);
        if b.bins.len() < range.end {
            b.bins.resize_with(range.end, Default::default);
        }
        let wide = range.len() > WIDE_BINS;
        prune(&mut b.wide, r, write, time);
        for bin in &mut b.bins[range] {
            prune(bin, r, write, time);
            if !wide {
                push_rec(&mut bin[write as usize], r, time, crit);
            }
        }
        if wide {
            push_rec(&mut b.wide[write as usize], r, time, crit);
        }
    }

    fn bump_end(&mut self, end: u64, crit: Crit) {
        if end > self.end {
            self.end = end;
            self.end_crit = crit;
        }
    }

    /// Schedule a compute instruction; returns (start, end) in picoseconds.
    pub fn compute<R: Operand>(&mut self, op: &ComputeOp<'_, R>) -> (u64, u64) {
        let dur = cycles_to_ps(op.cycles, op.ghz);
        let track = &self.tracks[op.track];
        let (mut start, mut crit) = (track.free, track.crit);
        let (dep_t, dep_crit) = self.deps(op.reads, op.writes, start);
        if dep_t > start {
            start = dep_t;
            crit = dep_crit;
        }
        // Most instructions use no shared port (TensorE never does).
        let ports = op.ports != 0;
        if ports {
            for (bit, port) in self.ports.iter().enumerate() {
                if op.ports & (1 << bit) != 0 && port.0 > start {
                    add_crit(&mut crit, CAT_WAIT, port.0 - start);
                    start = port.0;
                }
            }
        }
        let end = start + dur;
        add_crit(&mut crit, op.track, dur);
        if ports {
            for (bit, port) in self.ports.iter_mut().enumerate() {
                if op.ports & (1 << bit) != 0 {
                    *port = (end, crit);
                }
            }
        }
        let track = &mut self.tracks[op.track];
        track.free = end;
        track.crit = crit;
        track.busy_ps += dur;
        track.busy_cycles += op.cycles;
        track.count += 1;
        for r in op.reads {
            self.record(r.region(), false, end, &crit);
        }
        let lat = cycles_to_ps(op.latency_cycles, op.ghz);
        let mut wcrit = crit;
        add_crit(&mut wcrit, CAT_LATENCY, lat);
        for w in op.writes {
            self.record(w.region(), true, end + lat, &wcrit);
        }
        self.bump_end(end, crit);
        (start, end)
    }

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
        let (mut end, mut crit) = (0u64, [0u32; 8]);
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

    /// The latest time any track is busy until (the program's frontier).
    pub fn frontier(&self) -> u64 {
        self.tracks.iter().map(|t| t.free).max().unwrap_or(0)
    }
}

/// The critical path of a chunk ready at `ready` and placed at (start, end) whose own work
/// (descriptors and streaming) takes `own`: waiting for its engine or for HBM, before or
/// during the transfer, is contention.
#[inline]
fn chunk_crit(ready_crit: Crit, ready: u64, (start, end): (u64, u64), own: u64) -> Crit {
    let (mut crit, busy) = (ready_crit, end - start);
    add_crit(&mut crit, CAT_WAIT, start - ready);
    add_crit(&mut crit, CAT_DMA, busy.min(own));
    add_crit(&mut crit, CAT_WAIT, busy.saturating_sub(own));
    crit
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

/// Append a record, merging the oldest half when the list is full.
#[inline(always)]
fn push_rec(list: &mut Vec<Rec>, r: &Region, time: u64, crit: &Crit) {
    list.push(Rec { p0: r.p0, p1: r.p1, b0: r.b0, b1: r.b1, time, crit: *crit });
    if list.len() > MAX_RECS {
        merge_oldest(list);
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
    use super::*;

    #[test]
    fn hbm_timeline_never_exceeds_bandwidth() {
        // 100 B/ns bandwidth; two engines at 80 B/ns each start together with 64 KB each:
        // together they need 128 KB / 100 B/ns = 1310.72 ns at least.
        let mut h = HbmTimeline::new(100.0);
        let a = h.transfer(0, 65536.0, 0.08);
        let b = h.transfer(0, 65536.0, 0.08);
        assert!(a.max(b) >= 1_310_720, "{a} {b}");
        // Alone, one engine is engine-bound: 65536 / 80 B/ns = 819.2 ns.
        let mut h = HbmTimeline::new(100.0);
        let a = h.transfer(0, 65536.0, 0.08);
        assert!((819_200..=819_201).contains(&a), "{a}");
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

    /// Updating a repeated write's record in place gives what pruning and pushing give:
    /// random compute streams (accumulation chains into one region, reads of it and of
    /// neighbouring regions, one-bin, two-bin and wide regions) end with the same times and
    /// critical paths either way.
    #[test]
    fn repeated_write_fast_path_matches_the_general_path() {
        let chip = crate::Chip::trn2();
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..100 {
            let (mut fast, mut general) =
                (Timing::new(&chip, 16, false), Timing::new(&chip, 16, false));
            general.general_only = true;
            for t in [&mut fast, &mut general] {
                t.ensure_buffer(0, 1 << 15);
                t.ensure_buffer(1, 1 << 15);
            }
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
        }
    }

    #[test]
    fn merging_records_only_adds_waits() {
        let mut list: Vec<Rec> = (0..10)
            .map(|i| Rec { p0: 0, p1: 1, b0: i * 8, b1: i * 8 + 8, time: i * 100, crit: [0; 8] })
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
