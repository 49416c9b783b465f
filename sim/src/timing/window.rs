//! The list scheduler of `affine_range` loops (docs/scheduling.md).
//!
//! Outside affine loops every instruction is placed the moment it is issued, so each compute
//! engine runs its instructions in program order. Inside one, instructions are held in a
//! **window** instead and placed by a list scheduler. Placing one is exactly what placing at
//! issue does ([`Timing::compute`], [`Timing::dma`]): the dependency records, DMA engines and
//! HBM timeline are the same, only the order in which instructions reach them changes.
//!
//! * **Dependencies.** A new instruction takes an edge from every instruction still in the
//!   window that accesses an overlapping region with a conflict (it reads what one writes,
//!   or writes what one reads or writes): RAW, WAR and WAW, including a buffer ring's reuse
//!   (iteration i + bufs writes the buffer iteration i read). Instructions already placed
//!   bind it through the dependency records, as at issue. Placement is therefore always a
//!   topological order of the conflicts in program order, which is what keeps the records'
//!   pruning sound (a record is pruned only by an access that depends on it). An
//!   instruction is *ready* once its predecessors are placed: the time its dependencies let
//!   it start is then known.
//! * **Choice.** Each step places the candidate that can start earliest (ties: program
//!   order). A compute engine's candidate is its oldest held instruction, or a later ready
//!   one that ends before the oldest can start — conservative backfilling: it never delays
//!   what program order would have run first, so a loop of compute instructions never ends
//!   later than in program order. While its oldest instruction waits for a held producer,
//!   the engine offers nothing. The DMAs' candidate is the oldest *ready* DMA, placed as at issue
//!   (docs/dma.md: an idle gap, or sharing a busy engine round-robin with other queues): DMAs keep program order except that a
//!   ready transfer goes ahead of older ones still waiting for their producers (a later
//!   tile's load ahead of an earlier tile's store). On NeuronCore-v2 a shared port is
//!   granted in program order, as at issue.
//! * **Bound.** The window holds the instructions of at most [`WINDOW_ITERATIONS`] iterations
//!   (of any affine loop; the rest of an iteration after a nested loop counts as one more)
//!   and at most [`WINDOW_INSTRUCTIONS`] instructions: when an iteration starts with the
//!   window full, instructions are placed until its oldest iteration has left; when an
//!   instruction arrives with the window at its cap, one is placed. Memory is bounded by the
//!   window, never by the trip count.
//! * **Determinism.** Every choice is a minimum over (time, program order): no clocks, no
//!   hash-map order.

use super::{ComputeOp, Crit, DmaChunk, Region, Slice, Timing};
use crate::error::SourceLoc;
use std::collections::VecDeque;

/// Iterations whose instructions the window holds at once (neuroncore.md gives no figure for
/// the compiler's unrolling; see docs/scheduling.md §3).
pub const WINDOW_ITERATIONS: usize = 8;
/// Instructions the window holds at most, whatever the iterations' length.
pub const WINDOW_INSTRUCTIONS: usize = 1024;

/// The engine work of a held instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    Compute { track: usize, cycles: u64, ghz: f64, latency_cycles: u64, ports: u8 },
    Dma { hbm_sides: u32 },
}

/// What the accounting needs once a held instruction is placed.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    /// The instruction's slot in the per-line statistics (its busy time is added there when
    /// it is known: a DMA's depends on where it is placed).
    pub line: u32,
    pub opcode: &'static str,
    pub loc: SourceLoc,
    /// The trace slice's operand text (empty unless tracing).
    pub args: String,
    /// Loop index of the innermost affine loop's iteration that issued it.
    pub index: u64,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            line: 0,
            opcode: "",
            loc: SourceLoc { file: "", line: 0, column: 0 },
            args: String::new(),
            index: 0,
        }
    }
}

/// A held instruction. Slots are recycled with their vectors (no allocation per instruction
/// once the window has reached its size).
struct Slot {
    seq: u64,
    segment: u64,
    work: Work,
    reads: Vec<Region>,
    writes: Vec<Region>,
    chunks: Vec<DmaChunk>,
    meta: Meta,
    /// Predecessors in the window not placed yet.
    preds: u32,
    /// When its dependencies let it start (once `preds` is 0).
    ready: u64,
    /// A compute instruction's: the critical path of the record that binds `ready` (zero
    /// when none binds after `ready_after`, its engine's free time then), and
    /// [`Timing::merges`] when it was looked up (see [`Timing::make_ready`]).
    ready_crit: Crit,
    ready_after: u64,
    ready_merges: u64,
    /// Its engine time (a compute instruction's).
    dur: u64,
    /// Instructions in the window that wait for this one.
    succs: Vec<u32>,
    /// The program-order number of the last instruction given an edge from this one (one
    /// edge per pair).
    mark: u64,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            // No queue entry matches a free slot.
            seq: u64::MAX,
            segment: 0,
            work: Work::Dma { hbm_sides: 0 },
            reads: Vec::new(),
            writes: Vec::new(),
            chunks: Vec::new(),
            meta: Meta::default(),
            preds: 0,
            ready: 0,
            ready_crit: [0; 10],
            ready_after: 0,
            ready_merges: u64::MAX,
            dur: 0,
            succs: Vec::new(),
            mark: u64::MAX,
        }
    }
}

/// A held instruction's access to a region of a buffer, for the edges of later ones.
#[derive(Clone, Copy, Debug)]
struct Pend {
    slot: u32,
    /// Its instruction's program-order number: the access is *dead* once the instruction
    /// is placed (its slot's `seq` differs from then on). Dead accesses are not removed at
    /// placement but skipped, and dropped when a scan finds many or a write prunes.
    seq: u64,
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
}

impl Pend {
    #[inline]
    fn live(&self, slots: &[Slot]) -> bool {
        slots[self.slot as usize].seq == self.seq
    }
    #[inline]
    fn overlaps(&self, r: &Region) -> bool {
        r.p0 < self.p1 && self.p0 < r.p1 && r.b0 < self.b1 && self.b0 < r.b1
    }
    #[inline]
    fn covered_by(&self, r: &Region) -> bool {
        r.p0 <= self.p0 && self.p1 <= r.p1 && r.b0 <= self.b0 && self.b1 <= r.b1
    }
}

/// Slots of the segments' ring of counts: more than the segments open at once.
const SEGMENT_RING: usize = 16;
const _: () = assert!(SEGMENT_RING > WINDOW_ITERATIONS);

/// The least length at which a list of held accesses is cleared of dead ones when it grows
/// (a shorter one was cleared so often that the clearing showed in profiles).
const PEND_COMPACT: usize = 64;

/// Counters of what the scheduler did, for the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchedCounters {
    /// Instructions placed by the list scheduler (issued inside affine loops).
    pub scheduled: u64,
    /// Of those, the ones that started on their engine after an instruction issued later
    /// had started there (overtaken: the schedule differs from program order).
    pub reordered: u64,
}

/// The window of held instructions and the list scheduler's state.
#[derive(Default)]
pub(crate) struct Window {
    /// Open affine loops (nested ones share the outermost one's window).
    depth: u32,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    held: usize,
    next_seq: u64,
    /// Per buffer id: held accesses, reads [0] and writes [1], dead ones among them
    /// ([`Pend`]).
    by_buf: Vec<[Vec<Pend>; 2]>,
    /// Per compute engine, its held instructions in program order, as (seq, slot); entries
    /// of instructions placed out of order stay until they reach the front (a slot whose
    /// `seq` differs is gone).
    order: [VecDeque<(u64, u32)>; 4],
    /// Per NeuronCore-v2 shared port, the held instructions using it, in program order.
    port_order: [VecDeque<(u64, u32)>; 2],
    /// Per compute engine, its held instructions whose predecessors are all placed.
    ready: [Vec<u32>; 4],
    /// Held DMAs whose predecessors are all placed.
    dma_ready: Vec<u32>,
    /// The open segments (a segment is an iteration) are the numbers `oldest..next_segment`,
    /// at most [`WINDOW_ITERATIONS`]; `held_in[i % SEGMENT_RING]` counts segment `i`'s held
    /// instructions.
    oldest: u64,
    next_segment: u64,
    held_in: [u32; SEGMENT_RING],
    /// Per track, the latest program-order number placed there (to count reorderings).
    last_seq: Vec<u64>,
    pub counters: SchedCounters,
    /// (line slot, busy ps) of DMAs placed since the builder last looked.
    pub line_busy: Vec<(u32, u64)>,
    out: Vec<(usize, u64, u64)>,
}

/// The first live entry of a program-order queue (dropping entries of placed instructions).
fn front(q: &mut VecDeque<(u64, u32)>, slots: &[Slot]) -> Option<u32> {
    while let Some(&(seq, n)) = q.front() {
        if slots[n as usize].seq == seq {
            return Some(n);
        }
        q.pop_front();
    }
    None
}

impl Window {
    /// Segments open.
    #[inline]
    fn segments(&self) -> usize {
        (self.next_segment - self.oldest) as usize
    }

    /// Held instructions of segment `i` (an open one).
    #[inline]
    fn held_in(&mut self, i: u64) -> &mut u32 {
        debug_assert!((self.oldest..self.next_segment).contains(&i), "segment {i} is not open");
        &mut self.held_in[i as usize % SEGMENT_RING]
    }

    /// Open the next segment.
    #[inline]
    fn open_segment(&mut self) {
        let i = self.next_segment;
        self.next_segment += 1;
        *self.held_in(i) = 0;
    }

    fn slot_for(&mut self) -> u32 {
        match self.free_slots.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn buf(&mut self, id: u32) -> &mut [Vec<Pend>; 2] {
        let i = id as usize;
        if self.by_buf.len() <= i {
            self.by_buf.resize_with(i + 1, Default::default);
        }
        &mut self.by_buf[i]
    }

    /// Give the new instruction in `n` an edge from every held instruction it conflicts
    /// with, then hold its own accesses (module docs). Inlined, as [`Timing::make_ready`]
    /// is: both run for every held instruction, and their calls showed in the counts
    /// (docs/scheduling.md §3).
    #[inline(always)]
    fn link(&mut self, n: u32) {
        let seq = self.slots[n as usize].seq;
        let (reads, writes) = {
            let s = &mut self.slots[n as usize];
            (std::mem::take(&mut s.reads), std::mem::take(&mut s.writes))
        };
        let mut preds = 0;
        for r in &reads {
            self.buf(r.id);
            let Window { by_buf, slots, .. } = self;
            let list = &mut by_buf[r.id as usize][1];
            let mut dead = 0;
            for p in list.iter() {
                if !p.live(slots) {
                    dead += 1;
                } else if p.overlaps(r) {
                    preds += edge(slots, p.slot, n, seq);
                }
            }
            // Drop the dead ones once they are half the list: each is dropped once, by a
            // scan no longer than twice the accesses it drops.
            if 2 * dead > list.len() {
                list.retain(|p| p.live(slots));
            }
        }
        for w in &writes {
            self.buf(w.id);
            let Window { by_buf, slots, .. } = self;
            for list in &mut by_buf[w.id as usize] {
                // One pass, in order: an edge from every live access it overlaps. What it
                // covers is ordered before it (later accesses that conflict with those
                // conflict with this write too, and wait for it), so it goes, and so do dead
                // ones.
                list.retain(|p| {
                    if !p.live(slots) {
                        return false;
                    }
                    if p.overlaps(w) {
                        preds += edge(slots, p.slot, n, seq);
                    }
                    !p.covered_by(w)
                });
            }
        }
        for (list, regions) in [(0, &reads), (1, &writes)] {
            for r in regions {
                let pend = Pend { slot: n, seq, p0: r.p0, p1: r.p1, b0: r.b0, b1: r.b1 };
                let Window { by_buf, slots, held, .. } = self;
                let l = &mut by_buf[r.id as usize][list];
                // A list that is not scanned (the reads of a buffer that only reads access)
                // is cleared of dead ones as it grows: at twice the held instructions, or
                // `PEND_COMPACT`.
                if l.len() >= (2 * *held).max(PEND_COMPACT) {
                    l.retain(|p| p.live(slots));
                }
                l.push(pend);
            }
        }
        let s = &mut self.slots[n as usize];
        (s.reads, s.writes) = (reads, writes);
        s.preds = preds;
    }
}

/// An edge `from → to` unless there is one already; returns 1 for a new one.
#[inline]
fn edge(slots: &mut [Slot], from: u32, to: u32, to_seq: u64) -> u32 {
    let f = &mut slots[from as usize];
    if f.mark == to_seq {
        return 0;
    }
    f.mark = to_seq;
    f.succs.push(to);
    1
}

impl Timing {
    /// Whether instructions are being held (inside an affine loop).
    #[inline]
    pub fn window_open(&self) -> bool {
        self.window.depth > 0
    }

    /// An affine loop starts (nested ones share the outermost one's window).
    pub fn open_window(&mut self) {
        self.window.depth += 1;
    }

    /// An affine loop ends: the outermost one places everything it holds; a nested one ends
    /// its iteration's segment (the rest of the enclosing iteration is a new one).
    pub fn close_window(&mut self) {
        self.window.depth -= 1;
        if self.window.depth == 0 {
            while self.window.held > 0 {
                self.step();
            }
            self.window.oldest = self.window.next_segment;
            // Every held access is dead now (one pass over the buffers per outermost loop).
            for lists in &mut self.window.by_buf {
                lists.iter_mut().for_each(Vec::clear);
            }
        } else {
            self.next_segment();
        }
    }

    /// An iteration starts: with the window full, place instructions until its oldest
    /// iteration has left it.
    pub fn next_segment(&mut self) {
        loop {
            let w = &mut self.window;
            while w.segments() > 0 && *w.held_in(w.oldest) == 0 {
                w.oldest += 1;
            }
            if w.segments() < WINDOW_ITERATIONS {
                break;
            }
            while *self.window.held_in(self.window.oldest) > 0 {
                self.step();
            }
        }
        self.window.open_segment();
    }

    /// Hold a compute instruction (see [`Timing::compute`] for what it costs).
    pub fn hold_compute(
        &mut self,
        work: Work,
        reads: impl Iterator<Item = Region>,
        writes: impl Iterator<Item = Region>,
        meta: Meta,
    ) {
        self.hold(work, reads, writes, &[], meta);
    }

    /// Hold a DMA transfer (see [`Timing::dma`]).
    pub fn hold_dma(
        &mut self,
        chunks: &[DmaChunk],
        hbm_sides: u32,
        reads: impl Iterator<Item = Region>,
        writes: impl Iterator<Item = Region>,
        meta: Meta,
    ) {
        self.hold(Work::Dma { hbm_sides }, reads, writes, chunks, meta);
    }

    fn hold(
        &mut self,
        work: Work,
        reads: impl Iterator<Item = Region>,
        writes: impl Iterator<Item = Region>,
        chunks: &[DmaChunk],
        meta: Meta,
    ) {
        debug_assert!(self.window_open(), "held outside an affine loop");
        let w = &mut self.window;
        if w.segments() == 0 {
            // Issued in an affine loop but before its first iteration (not reachable through
            // `affine_range`); a segment of its own keeps the accounting whole.
            w.open_segment();
        }
        let n = w.slot_for();
        let seq = w.next_seq;
        w.next_seq += 1;
        let segment = w.next_segment - 1;
        *w.held_in(segment) += 1;
        let s = &mut w.slots[n as usize];
        s.seq = seq;
        s.segment = segment;
        s.work = work;
        s.reads.extend(reads);
        s.writes.extend(writes);
        s.chunks.extend_from_slice(chunks);
        s.meta = meta;
        s.mark = u64::MAX;
        match work {
            Work::Compute { track, cycles, ghz, ports, .. } => {
                s.dur = super::cycles_to_ps(cycles, ghz);
                w.order[track].push_back((seq, n));
                if ports != 0 {
                    for (bit, q) in w.port_order.iter_mut().enumerate() {
                        if ports & (1 << bit) != 0 {
                            q.push_back((seq, n));
                        }
                    }
                }
            }
            Work::Dma { .. } => {}
        }
        w.link(n);
        w.held += 1;
        if w.slots[n as usize].preds == 0 {
            self.make_ready(n);
        }
        while self.window.held > WINDOW_INSTRUCTIONS {
            self.step();
        }
    }

    /// Note that a held instruction's predecessors are all placed: the time its dependencies
    /// let it start is now known.
    ///
    /// For a compute instruction the lookup is kept for its placement, which uses it instead
    /// of looking again while no record has been merged since. Until it is placed, only
    /// instructions it does not conflict with are placed (the ones it conflicts with are its
    /// predecessors, placed already, or its successors, waiting for it): their records do
    /// not overlap its accesses, and what they prune, they cover, so it overlapped none of
    /// it either. Only a merge (a bounding box over records) can add a binding record.
    ///
    /// A compute instruction never starts before its engine is free, and an engine's free
    /// time only grows, so its lookup starts from its engine's free time now (records that
    /// end earlier cannot bind it; `ready` is only used as `max(ready, free)`).
    #[inline(always)]
    fn make_ready(&mut self, n: u32) {
        let s = &self.window.slots[n as usize];
        let work = s.work;
        let after = match work {
            Work::Compute { track, .. } => self.tracks[track].free,
            Work::Dma { .. } => 0,
        };
        let (dep, crit) = self.deps(&s.reads, &s.writes, after);
        let merges = self.merges;
        let w = &mut self.window;
        match work {
            Work::Compute { track, .. } => {
                let s = &mut w.slots[n as usize];
                (s.ready, s.ready_crit, s.ready_after, s.ready_merges) = (dep, crit, after, merges);
                w.ready[track].push(n);
            }
            Work::Dma { .. } => {
                w.slots[n as usize].ready = dep + self.dma_fixed_ps;
                w.dma_ready.push(n);
            }
        }
    }

    /// When a ready compute instruction could start: its dependencies, its engine, and on
    /// NeuronCore-v2 the shared ports it uses.
    fn start_of(&self, n: u32) -> u64 {
        let s = &self.window.slots[n as usize];
        let Work::Compute { track, ports, .. } = s.work else { unreachable!("a compute slot") };
        let mut t = s.ready.max(self.tracks[track].free);
        for (bit, port) in self.ports.iter().enumerate() {
            if ports & (1 << bit) != 0 {
                t = t.max(port.0);
            }
        }
        t
    }

    /// The instruction compute engine `e` would run next, with its start: its oldest held
    /// instruction, or a later ready one that ends before that one can start (so it delays
    /// nothing that program order would have run first). `None` while the oldest one waits
    /// for a held predecessor (its start is not known yet) and nothing is known to fit.
    fn engine_candidate(&mut self, e: usize) -> Option<(u64, u64, u32)> {
        let head = front(&mut self.window.order[e], &self.window.slots)?;
        if self.window.slots[head as usize].preds > 0 {
            return None;
        }
        let head_start = self.start_of(head);
        let slots = &self.window.slots;
        // On NeuronCore-v2 a port is granted in program order, as outside affine loops: an
        // instruction using one runs when it is also the oldest user of that port.
        let ports_free = |n: u32, q: &mut [VecDeque<(u64, u32)>; 2]| {
            let Work::Compute { ports, .. } = slots[n as usize].work else { return true };
            (0..2).all(|bit| ports & (1 << bit) == 0 || front(&mut q[bit], slots) == Some(n))
        };
        let mut best = ports_free(head, &mut self.window.port_order)
            .then(|| (head_start, slots[head as usize].seq, head));
        let free = self.tracks[e].free;
        for &y in &self.window.ready[e] {
            let s = &slots[y as usize];
            let Work::Compute { ports, .. } = s.work else { continue };
            if y == head || ports != 0 {
                continue;
            }
            let start = s.ready.max(free);
            if start + s.dur <= head_start && best.is_none_or(|b| (start, s.seq) < (b.0, b.1)) {
                best = Some((start, s.seq, y));
            }
        }
        best
    }

    /// The DMA to place next, with its ready time: the oldest held DMA whose predecessors
    /// are all placed. Older held DMAs still wait for a held producer (when they can start
    /// is not known yet); going ahead of them is where the scheduler leaves program order
    /// on the DMA queues. Otherwise DMAs are placed in program order, each in the earliest
    /// idle gap of its queues, as at issue.
    fn dma_candidate(&mut self) -> Option<(u64, u64, u32)> {
        let slots = &self.window.slots;
        let x = *self.window.dma_ready.iter().min_by_key(|&&x| slots[x as usize].seq)?;
        let s = &slots[x as usize];
        Some((s.ready, s.seq, x))
    }

    /// The choice of a step when exactly one held instruction is ready, taken out of its
    /// ready list: it is the oldest held one (a held instruction waits only for older ones,
    /// so the oldest is ready), hence its engine's oldest and its ports' oldest user, so its
    /// engine offers it and no other engine or the DMAs offer anything (their oldest wait
    /// for held producers). The step's choice without the candidates' bookkeeping, which in
    /// a chain of dependent instructions (a K loop's matmuls) is most steps.
    #[inline(always)]
    fn only_ready(&mut self) -> Option<u32> {
        let w = &mut self.window;
        let [r0, r1, r2, r3] = &w.ready;
        if r0.len() + r1.len() + r2.len() + r3.len() + w.dma_ready.len() != 1 {
            return None;
        }
        let n = match w.dma_ready.pop() {
            Some(n) => n,
            None => {
                let e = w.ready.iter().position(|r| !r.is_empty())?;
                let n = w.ready[e].pop()?;
                // Its queue's placed entries ahead of it go now, as a step's look would
                // drop them (the queues stay bounded by the window).
                let head = front(&mut w.order[e], &w.slots);
                debug_assert_eq!(
                    head,
                    Some(n),
                    "the only ready instruction is its engine's oldest"
                );
                let Work::Compute { ports, .. } = w.slots[n as usize].work else {
                    unreachable!("a compute slot")
                };
                for (bit, q) in w.port_order.iter_mut().enumerate() {
                    if ports & (1 << bit) != 0 {
                        let head = front(q, &w.slots);
                        debug_assert_eq!(
                            head,
                            Some(n),
                            "the only ready instruction is its ports' oldest"
                        );
                    }
                }
                n
            }
        };
        Some(n)
    }

    /// Place the instruction that can start earliest among each compute engine's candidate
    /// ([`Timing::engine_candidate`]) and the DMAs' ([`Timing::dma_candidate`]); ties go to
    /// program order. When only one held instruction is ready it is that choice, placed
    /// without looking at the candidates ([`Timing::only_ready`]; debug builds look too, and
    /// check).
    fn step(&mut self) {
        #[cfg(debug_assertions)]
        let chosen = self.choose();
        let n = match self.only_ready() {
            Some(n) => n,
            None => {
                #[cfg(not(debug_assertions))]
                let chosen = self.choose();
                let r = match self.window.slots[chosen as usize].work {
                    Work::Dma { .. } => &mut self.window.dma_ready,
                    Work::Compute { track, .. } => &mut self.window.ready[track],
                };
                let i = r.iter().position(|&x| x == chosen).expect("a ready instruction");
                r.swap_remove(i);
                chosen
            }
        };
        #[cfg(debug_assertions)]
        assert_eq!(n, chosen, "the only ready instruction is the step's choice");
        self.place(n);
    }

    /// The step's choice among the candidates (see [`Timing::step`]).
    #[inline(always)]
    fn choose(&mut self) -> u32 {
        let mut best: Option<(u64, u64, u32)> = None;
        for e in 0..4 {
            // An engine none of whose held instructions is ready offers nothing (its oldest
            // waits for a held producer).
            if self.window.ready[e].is_empty() {
                continue;
            }
            if let Some(c) = self.engine_candidate(e) {
                if best.is_none_or(|b| (c.0, c.1) < (b.0, b.1)) {
                    best = Some(c);
                }
            }
        }
        if let Some(c) = self.dma_candidate() {
            if best.is_none_or(|b| (c.0, c.1) < (b.0, b.1)) {
                best = Some(c);
            }
        }
        best.expect("the oldest held instruction can always be placed").2
    }

    /// Place a held instruction exactly as at issue, then release its successors.
    fn place(&mut self, n: u32) {
        // The slots leave the window while the instruction is placed (placing never looks at
        // the window): its operands are read where they are, not moved out and back (a slot
        // is a few hundred bytes; moving it, or its vectors, showed in profiles).
        let mut slots = std::mem::take(&mut self.window.slots);
        let s = &mut slots[n as usize];
        let (work, seq, segment, index) = (s.work, s.seq, s.segment, s.meta.index);
        let (line, opcode, loc) = (s.meta.line, s.meta.opcode, s.meta.loc);
        let trace_args = |s: &mut Slot| {
            format!("{} affine_index={index} issue={seq}", std::mem::take(&mut s.meta.args))
        };
        let track = match work {
            Work::Compute { track, cycles, ghz, latency_cycles, ports } => {
                let op = ComputeOp {
                    track,
                    cycles,
                    ghz,
                    latency_cycles,
                    reads: &s.reads[..],
                    writes: &s.writes[..],
                    ports,
                };
                let fresh = s.ready_merges == self.merges && !general_only!(self);
                let known = fresh.then_some((s.ready, s.ready_crit));
                debug_assert!(
                    known
                        .is_none_or(|k| k == self.deps(&s.reads[..], &s.writes[..], s.ready_after)),
                    "a kept dependency lookup went stale"
                );
                let (start, end) = self.compute_after(&op, known, s.dur);
                if let Some(tr) = &mut self.trace {
                    let args = trace_args(s);
                    let dur = end - start;
                    let name = opcode;
                    tr.push(Slice { track: track as u16, start, dur, name, loc, args, bytes: 0 });
                }
                track
            }
            Work::Dma { hbm_sides } => {
                let mut out = std::mem::take(&mut self.window.out);
                self.dma(&s.chunks, hbm_sides, &s.reads, &s.writes, &mut out);
                self.window.line_busy.push((line, self.dma_busy));
                if let Some(tr) = &mut self.trace {
                    let args = trace_args(s);
                    for (i, &(q, start, end)) in out.iter().enumerate() {
                        let dur = end - start;
                        let bytes = s.chunks[i].bytes;
                        let args = args.clone();
                        tr.push(Slice {
                            track: q as u16,
                            start,
                            dur,
                            name: opcode,
                            loc,
                            args,
                            bytes,
                        });
                    }
                }
                self.window.out = out;
                s.chunks[0].queue
            }
        };
        // The slot is free from here on: its entries in the program-order queues are stale.
        s.seq = u64::MAX;
        s.meta.args.clear();
        s.reads.clear();
        s.writes.clear();
        s.chunks.clear();
        let succs = std::mem::take(&mut s.succs);
        let w = &mut self.window;
        w.slots = slots;
        w.counters.scheduled += 1;
        if w.last_seq.len() <= track {
            w.last_seq.resize(track + 1, 0);
        }
        if seq < w.last_seq[track] {
            w.counters.reordered += 1;
        } else {
            w.last_seq[track] = seq;
        }
        // A held instruction's segment is open (segments close once empty).
        *w.held_in(segment) -= 1;
        w.held -= 1;
        for &m in &succs {
            let p = &mut self.window.slots[m as usize].preds;
            *p -= 1;
            if *p == 0 {
                self.make_ready(m);
            }
        }
        let s = &mut self.window.slots[n as usize];
        s.succs = succs;
        s.succs.clear();
        self.window.free_slots.push(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::iter::once;

    /// Placing a held compute instruction with the dependency lookup kept from when it
    /// became ready gives what looking again gives: random affine loops (four engines, many
    /// small overlapping regions of three buffers, so that record lists overflow and merge,
    /// DMAs among them) end with the same times and critical paths either way.
    #[test]
    fn a_kept_dependency_lookup_places_as_a_new_one_would() {
        let chip = crate::Chip::trn2();
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1d);
        let mut merged_runs = 0;
        for _ in 0..60 {
            let (mut kept, mut general) = Timing::fast_and_general(&chip, false, 3, 1 << 14);
            kept.open_window();
            general.open_window();
            let region = |next: &mut dyn FnMut(u64) -> u64| {
                // Narrow, scattered regions over few bins: few accesses cover another, so
                // the bins' record lists fill up and merge.
                let (p0, b0) = (next(16) as u32 * 8, next(16) * 256);
                Region { id: next(3) as u32, p0, p1: p0 + 8, b0, b1: b0 + 256 * (1 + next(2)) }
            };
            for _ in 0..600 {
                if next(8) == 0 {
                    for t in [&mut kept, &mut general] {
                        t.next_segment();
                    }
                }
                let (r, w) = (region(&mut next), region(&mut next));
                if next(6) == 0 {
                    let chunks = [DmaChunk {
                        queue: 4 + next(16) as usize,
                        engine_queue: 0,
                        descriptors: 4,
                        bytes: 4096,
                        rate_permille: crate::timing::FULL_RATE,
                    }];
                    for t in [&mut kept, &mut general] {
                        t.hold_dma(&chunks, 1, once(r), once(w), Meta::default());
                    }
                } else {
                    let work = Work::Compute {
                        track: next(4) as usize,
                        cycles: 1 + next(400),
                        ghz: 1.4,
                        latency_cycles: next(64),
                        ports: 0,
                    };
                    for t in [&mut kept, &mut general] {
                        t.hold_compute(work, once(r), once(w), Meta::default());
                    }
                }
            }
            for t in [&mut kept, &mut general] {
                t.close_window();
            }
            merged_runs += (kept.merges > 0) as u32;
            assert_eq!((kept.end, kept.end_crit), (general.end, general.end_crit));
            let frees = |t: &Timing| t.tracks.iter().map(|x| x.free).collect::<Vec<_>>();
            assert_eq!(frees(&kept), frees(&general));
        }
        // The runs exercised both paths: merges happened (lookups not reused) in some.
        assert!(merged_runs > 0, "no run merged records");
    }

    /// The case the merge counter exists for: an instruction becomes ready, then transfers
    /// it does not conflict with are placed before it and their records, merged into one
    /// bounding box, cover its region with a later time. Its placement must see the box (as
    /// a lookup at placement does), not the lookup kept from when it became ready.
    #[test]
    fn a_merge_after_readiness_is_seen_at_placement() {
        let chip = crate::Chip::trn2();
        let run = |general: bool| {
            let mut t = Timing::new(&chip, 16, false);
            t.general_only = general;
            for id in 0..3 {
                t.ensure_buffer(id, 1 << 14);
            }
            let region = |id, b0, b1| Region { id, p0: 0, p1: 8, b0, b1 };
            let vector =
                |cycles| Work::Compute { track: 1, cycles, ghz: 1.0, latency_cycles: 0, ports: 0 };
            t.open_window();
            t.next_segment();
            // VectorE is busy 20 µs, then `y` reads bytes 512..768 of buffer 0.
            t.hold_compute(
                vector(20_000),
                once(region(1, 0, 64)),
                once(region(1, 64, 128)),
                Meta::default(),
            );
            t.hold_compute(
                vector(100),
                once(region(0, 512, 768)),
                once(region(2, 0, 64)),
                Meta::default(),
            );
            // 33 long transfers write 8-byte slices of the same bin around it, the oldest
            // beyond it: the bin's 33rd write record merges the oldest 16 into a box over
            // bytes 0..808, which covers `y`'s region and ends when they do.
            for i in 0..33u64 {
                let (b0, b1) = if i == 0 { (800, 808) } else { ((i - 1) * 8, i * 8) };
                let chunks = [DmaChunk {
                    queue: 4 + (i % 16) as usize,
                    engine_queue: 0,
                    descriptors: 1,
                    bytes: 1 << 22,
                    rate_permille: crate::timing::FULL_RATE,
                }];
                t.hold_dma(
                    &chunks,
                    1,
                    once(region(1, 128, 136)),
                    once(region(0, b0, b1)),
                    Meta::default(),
                );
            }
            t.close_window();
            assert!(t.merges > 0, "the records were merged");
            (t.tracks[1].free, t.end, t.end_crit)
        };
        let (kept, general) = (run(false), run(true));
        assert_eq!(kept, general);
        // The box binds: `y` ends after the transfers, far past VectorE's 20 µs.
        assert!(kept.0 > 40_000_000, "y ends at {} ps", kept.0);
    }

    /// A loop of 100 000 iterations (load a row block into a ring of two buffers, one
    /// instruction on it, store the result): the window never holds more than its iterations
    /// allow, its slots are recycled, and nothing is left held or linked at the end.
    #[test]
    fn the_window_stays_bounded_whatever_the_trip_count() {
        let chip = crate::Chip::trn2();
        let mut t = Timing::new(&chip, 16, false);
        for id in 0..4 {
            t.ensure_buffer(id, 1 << 12);
        }
        let tile = |id, b0| Region { id, p0: 0, p1: 128, b0, b1: b0 + 1024 };
        let rows = |id, i: u64| Region {
            id,
            p0: 128 * i as u32,
            p1: 128 * (i as u32 + 1),
            b0: 0,
            b1: 1024,
        };
        let chunks: Vec<DmaChunk> = (4..20)
            .map(|queue| DmaChunk {
                queue,
                engine_queue: 0,
                descriptors: 8,
                bytes: 8192,
                rate_permille: crate::timing::FULL_RATE,
            })
            .collect();
        let exp = Work::Compute { track: 2, cycles: 512, ghz: 1.2, latency_cycles: 200, ports: 0 };
        let n = 100_000u64;
        t.open_window();
        let (mut max_held, mut max_pends) = (0, 0);
        for i in 0..n {
            t.next_segment();
            let buf = (i % 2) as u32;
            t.hold_dma(&chunks, 1, once(rows(2, i)), once(tile(buf, 0)), Meta::default());
            t.hold_compute(exp, once(tile(buf, 0)), once(tile(buf, 1024)), Meta::default());
            t.hold_dma(&chunks, 1, once(tile(buf, 1024)), once(rows(3, i)), Meta::default());
            t.window.line_busy.clear();
            max_held = max_held.max(t.window.held);
            let pends = t.window.by_buf.iter().flat_map(|b| b.iter().map(Vec::len));
            max_pends = max_pends.max(pends.max().unwrap_or(0));
            assert!(t.window.segments() <= WINDOW_ITERATIONS);
        }
        t.close_window();
        assert!(max_held <= 3 * WINDOW_ITERATIONS, "{max_held} held");
        // Placed instructions' accesses stay in the lists until dropped as the lists grow
        // (at twice the held instructions, or `PEND_COMPACT`) or are scanned: the lists stay
        // bounded too.
        let bound = (2 * 3 * WINDOW_ITERATIONS).max(PEND_COMPACT) + 1;
        assert!(max_pends <= bound, "{max_pends} accesses in a list");
        assert!(t.window.slots.len() <= 3 * WINDOW_ITERATIONS, "{} slots", t.window.slots.len());
        assert_eq!(t.window.held, 0);
        assert!(t.window.by_buf.iter().flatten().all(Vec::is_empty));
        assert!(t.window.order.iter().flatten().count() <= 3 * WINDOW_ITERATIONS);
        assert_eq!(t.window.counters.scheduled, 3 * n);
        // Two buffers: at best two iterations overlap, so the loop takes far less than its
        // iterations one after the other, and no less than the dependencies allow. On trn2,
        // in ns (docs/dma.md §1; the compute instruction's own cycles and latency above):
        // * a transfer: `fixed_ns` = 1,300 before it, then 8 descriptors × 16 ns + 8,192 B /
        //   23 B/ns = 484.2 ns on each of its 16 engines;
        // * the exp: 512 cycles / 1.2 GHz = 426.7 ns, its result 200 / 1.2 = 166.7 ns later.
        // Lower bound, along one buffer: iteration i + 2's exp rewrites what store i reads
        // (WAR), and store i reads exp i's result (RAW), so exp i + 2 ends at least
        // `step` = 166.7 + 1,300 + 484.2 + 426.7 = 2,377.5 ns after exp i; the first exp
        // ends after its load (1,300 + 484.2 + 426.7), the last store after its exp
        // (166.7 + 1,300 + 484.2). Over n / 2 iterations per buffer:
        //   end ≥ first + (n / 2 − 1) · step + last ≈ 118.9 ms.
        // Upper bound: loads and stores share queue 0 of every engine (FIFO), so in a step
        // store i can also wait for the step's three other transfers (load i + 2 and the
        // other buffer's load and store), and exp i + 2 for the other buffer's exp:
        //   step_max = 166.7 + 1,300 + 4 · 484.2 + 2 · 426.7 = 4,256.7 ns, end ≤ n / 2 ·
        //   step_max + first ≈ 212.8 ms.
        // Iterations run one after another would take n × (1,300 + 484.2 + 426.7 + 166.7 +
        // 1,300 + 484.2) = n × 4,161.7 ns ≈ 416 ms.
        let dma_ns = 8.0 * chip.dma.descriptor_ns + 8192.0 / chip.dma.engine_gbps;
        let (exp_ns, lat_ns, fixed) = (512.0 / 1.2, 200.0 / 1.2, chip.dma.fixed_ns);
        let first = fixed + dma_ns + exp_ns;
        let last = lat_ns + fixed + dma_ns;
        let step = lat_ns + fixed + dma_ns + exp_ns;
        let step_max = lat_ns + fixed + 4.0 * dma_ns + 2.0 * exp_ns;
        let half = (n / 2) as f64;
        let lower = first + (half - 1.0) * step + last;
        let upper = first + half * step_max;
        let end_ns = t.end as f64 / 1e3;
        assert!(end_ns >= lower, "{end_ns} ns < the dependency bound {lower} ns");
        assert!(end_ns <= upper, "{end_ns} ns > {upper} ns: iterations not overlapped");
    }
}
