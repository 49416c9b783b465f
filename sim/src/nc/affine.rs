//! Loops whose iterations are independent: NKI's `affine_range` (docs/scheduling.md).
//!
//! `nc.affine_range(0..n, |nc, i| { … })` runs the body for each index like a plain loop —
//! values are computed in program order, exactly as a plain loop computes them — and
//! declares that its iterations carry no dependency, so the timing model may reorder and
//! pipeline them (the list scheduler of [`crate::timing`]'s window). A plain Rust loop (or
//! [`Nc::sequential_range`]) keeps program order.
//!
//! The declaration is checked: an access in one iteration that conflicts with an access of an
//! earlier iteration of the same loop (it reads what that one wrote, or writes what it read
//! or wrote) is a [`ViolationKind::LoopCarriedDependency`](crate::ViolationKind), naming both
//! instructions. Two exceptions, as in NKI: matmuls accumulating into the same PSUM tile
//! (an associative reduction; the accumulation group's first matmul included), and a tile
//! allocated inside the loop, whose ring buffer a later iteration reuses (a new allocation,
//! not the same tile: the scheduler orders the reuse, it is no error).
//!
//! A tile allocated during an iteration is that iteration's own: no other iteration of the
//! loop has touched it, so its accesses are neither checked nor recorded at that level
//! (most of a kernel's accesses; a handle kept into a later iteration is checked from that
//! iteration on). Other accesses are tracked per loop level and buffer as rectangles
//! (partitions × bytes, the regions the timing model uses), the current iteration's apart
//! from the earlier ones'. Rectangles from the same source line that form a larger rectangle
//! merge, so the common patterns (each iteration its own rows, columns or block of one
//! tensor) keep one rectangle per line whatever the trip count. Accesses are logged and
//! merged only when a check needs the rectangles or the level's log is full, so an inner
//! loop that ends first (the matmuls of a K loop) never pays for merging ([`BufRects::log`]).
//!
//! A rectangle is the exact set of a dense access's elements, and only a bounding box of a
//! strided one's, which therefore keeps its access pattern beside it, in a list of its own
//! (`affine_exact.rs`): an overlap of two rectangles, one of them strided, is a conflict only
//! if the patterns share an element. Each list holds [`MAX_RECTS`] entries; what a full list
//! moves out goes to the buffer's spill, a map of the bytes touched that stays exact, so no
//! access is ever dropped. Only an indirect copy's indexed side, whose rows come from values,
//! is neither checked nor recorded.

use super::{Nc, VResult};
use crate::error::{Hazard, LoopCarried, SimResult, SourceLoc, ViolationKind as V};
use crate::timing::Region;
use crate::view::*;
pub(super) use exact::Pattern;
use exact::{meet, spill_rect, Extra, Strided};
use std::cell::RefCell;
use std::panic::Location;

#[path = "affine_exact.rs"]
mod exact;

/// Rectangles kept per buffer and loop level, for the current iteration and for the earlier
/// ones each, dense and strided apart; what a full list moves out is spilled (`Spill`).
const MAX_RECTS: usize = 32;

/// How an instruction touches an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Read,
    Write,
    /// A matmul's PSUM destination (accumulating, or starting the accumulation group).
    Accumulate,
}

/// What an operand is, for messages.
#[derive(Clone, Copy, Debug)]
pub(super) enum Target {
    Tile(u32),
    Hbm(u32),
}

/// One operand access of an instruction issued in an affine loop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Touch {
    pub region: Region,
    /// The buffer's allocation (a ring buffer reused by a later allocation is a new one).
    pub gen: u32,
    /// [`DENSE`] when the access touches every element of `region`, [`UNKNOWN`] when which
    /// elements it touches is not known (an indirect copy's indexed side), else the index of
    /// its pattern in the instruction's list of them ([`Nc::check_loop_carried`]).
    pub pat: u8,
    pub kind: Kind,
    pub target: Target,
    /// For a tile, the iteration serial of its allocation (0 for HBM, like a tile allocated
    /// before any loop: never an iteration's own, since iterations' serials start at 1).
    pub alloc_serial: u64,
}

/// [`Touch::pat`] of a dense access.
pub(super) const DENSE: u8 = u8::MAX;
/// [`Touch::pat`] of an access whose elements are not known: neither checked nor recorded.
pub(super) const UNKNOWN: u8 = u8::MAX - 1;
/// [`Touch::pat`] from this on (below [`UNKNOWN`]): a strided operand of a compute
/// instruction, its index among the instruction's operands added, whose pattern is made only
/// when the check needs it ([`Ops`]), so that listing the operands calls nothing.
const OPERAND: u8 = 128;

/// A compute instruction's operands, read and written ([`Nc::compute_touches`]), for the
/// patterns of its strided ones; empty for a DMA, whose patterns are made when listed.
pub(super) type Ops<'a> = (&'a [(&'a TileView, Region)], &'a [(&'a TileView, Region)]);

/// An access recorded for the conflict check: a rectangle of one buffer, every element of
/// which it touched (a strided access's is its bounding box, kept beside its [`Pattern`]).
#[derive(Clone, Copy, Debug)]
struct Rect {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
    kind: Kind,
    /// The instruction and source line, as an index into [`Loops::sites`]: rectangles are
    /// compared, merged and moved at every access and iteration, and a site's 40 bytes
    /// (name and location) made that cost more than the rest.
    site: u32,
    first_index: u64,
    last_index: u64,
}

impl Rect {
    /// Access `t`'s rectangle, by `site` in the iteration numbered `index`.
    #[inline(always)]
    fn of(t: &Touch, site: u32, index: u64) -> Rect {
        let r = t.region;
        Rect {
            p0: r.p0,
            p1: r.p1,
            b0: r.b0,
            b1: r.b1,
            kind: t.kind,
            site,
            first_index: index,
            last_index: index,
        }
    }

    fn overlaps(&self, r: &Region) -> bool {
        r.p0 < self.p1 && self.p0 < r.p1 && r.b0 < self.b1 && self.b0 < r.b1
    }

    /// Absorb `o` if both came from the same instruction site with the same kind and their
    /// union is a rectangle (same partitions and touching bytes, or same bytes and touching
    /// partitions).
    fn absorb(&mut self, o: &Rect) -> bool {
        if (self.site, self.kind) != (o.site, o.kind) {
            return false;
        }
        let same_p = (self.p0, self.p1) == (o.p0, o.p1);
        let same_b = (self.b0, self.b1) == (o.b0, o.b1);
        let touch_b = self.b0 <= o.b1 && o.b0 <= self.b1;
        let touch_p = self.p0 <= o.p1 && o.p0 <= self.p1;
        if !(same_p && touch_b || same_b && touch_p) {
            return false;
        }
        self.p0 = self.p0.min(o.p0);
        self.p1 = self.p1.max(o.p1);
        self.b0 = self.b0.min(o.b0);
        self.b1 = self.b1.max(o.b1);
        self.join(o);
        true
    }

    /// Take `o`'s bounding box and iterations in.
    fn join(&mut self, o: &Rect) {
        self.p0 = self.p0.min(o.p0);
        self.p1 = self.p1.max(o.p1);
        self.b0 = self.b0.min(o.b0);
        self.b1 = self.b1.max(o.b1);
        self.first_index = self.first_index.min(o.first_index);
        self.last_index = self.last_index.max(o.last_index);
    }

    /// The hazard of an access of kind `later` after this one, if they conflict.
    #[inline]
    fn hazard(&self, later: Kind) -> Option<Hazard> {
        // Which kinds conflict is `Kind::conflicts`' table; this only names the hazard.
        if later.conflicts() & self.kind.bit() == 0 {
            return None;
        }
        Some(match (later, self.kind) {
            (Kind::Read, _) => Hazard::Raw,
            (_, Kind::Read) => Hazard::War,
            _ => Hazard::Waw,
        })
    }
}

/// Add `r` to `list`, merged into a rectangle it extends, or appended; at the cap the oldest
/// moves to the spill, with `tag` ([`Who::tag`]).
fn add_rect(list: &mut Vec<Rect>, r: Rect, extra: &mut Option<Box<Extra>>, tag: u64) {
    if list.iter_mut().rev().any(|x| x.absorb(&r)) {
        return;
    }
    if list.len() >= MAX_RECTS {
        spill_rect(extra, &list.remove(0), tag);
    }
    list.push(r);
}

/// Accesses the logs of one loop level hold at most ([`BufRects::log`]): when they reach it,
/// every buffer's log at that level is merged into its rectangles. 4096 entries of 56 bytes
/// (224 KiB) per level: the benchmark GEMM's row-block loop logs about 1 100 (one A panel per
/// row block) or 2 100 (one DMA per A tile) accesses per run at 4096³ (docs/scheduling.md §3).
/// Small in unit tests, so that logs merge part-way.
#[cfg(not(test))]
const LOG_CAP: usize = 4096;
#[cfg(test)]
const LOG_CAP: usize = 64;

/// An access recorded at a loop level and not yet merged ([`BufRects::log`]): its rectangle
/// and the level's iteration counter ([`Level::iter`]) when it was recorded. (Packed in
/// 48 bytes, it cost more to pack and unpack than it saved.)
#[derive(Clone, Copy, Debug)]
struct Logged {
    rect: Rect,
    iter: u64,
}
const _: () = assert!(std::mem::size_of::<Logged>() == 56);

#[derive(Default)]
struct BufRects {
    gen: u32,
    /// Whether the buffer is in its level's `used` list.
    used: bool,
    /// The kinds of the accesses recorded in iterations before `kinds_iter` ([`Kind::bit`]):
    /// an access whose conflicting kinds are neither among them nor, once another iteration
    /// has started, among `iter_kinds`, has nothing to scan.
    earlier_kinds: u8,
    /// The kinds of the accesses recorded in iteration `kinds_iter`.
    iter_kinds: u8,
    kinds_iter: u64,
    earlier: Vec<Rect>,
    /// Rectangles of iteration `iter` of the level ([`Level::iter`]): the current one's, or,
    /// when an iteration has started since, earlier ones not yet moved to `earlier`.
    current: Vec<Rect>,
    iter: u64,
    /// The accesses recorded since the rectangles were last brought up to date, in order.
    /// Merging is what recording costs, and most levels' rectangles are never scanned (no
    /// access of a conflicting kind comes): they are merged only when a scan needs them or
    /// when [`LOG_CAP`] accesses have piled up at the level, by the same steps in the same
    /// order as merging each access when it came ([`BufRects::merge_log`]), so the
    /// rectangles a scan sees are the same; a loop that ends first drops its log unmerged.
    log: Vec<Logged>,
    /// Strided accesses and spilled ones, if any ([`Extra`]).
    extra: Option<Box<Extra>>,
}

impl BufRects {
    /// Move the rectangles of `current` (of iteration `self.iter`) to `earlier`.
    fn move_current(&mut self) {
        for i in 0..self.current.len() {
            let r = self.current[i];
            add_rect(&mut self.earlier, r, &mut self.extra, 0);
        }
        self.current.clear();
    }

    /// Merge the logged accesses into the rectangles, in order: each of a later iteration
    /// than `current`'s first moves `current` to `earlier`.
    fn merge_log(&mut self) {
        for i in 0..self.log.len() {
            let Logged { rect, iter } = self.log[i];
            if self.iter != iter {
                self.move_current();
                self.iter = iter;
            }
            add_rect(&mut self.current, rect, &mut self.extra, iter);
        }
        self.log.clear();
    }

    /// [`Level::conflict`] of a strided access `t`, its pattern `pat`, in iteration `iter`.
    #[cold]
    #[inline(never)]
    fn conflict_strided(&mut self, t: &Touch, pat: &Pattern, iter: u64) -> Option<(Hazard, Rect)> {
        let found = self.earlier.iter().filter(|e| e.overlaps(&t.region)).find_map(|e| {
            let hazard = e.hazard(t.kind)?;
            meet(pat, &pat.rect(e.p0, e.p1, e.b0, e.b1)).then_some((hazard, *e))
        });
        if found.is_some() {
            return found;
        }
        self.extra.as_deref_mut()?.conflict(t.kind, &t.region, Some(pat), iter)
    }

    /// Record strided access `t` with pattern `pat` (see [`Level::record`]).
    #[cold]
    #[inline(never)]
    fn record_strided(&mut self, t: &Touch, pat: Pattern, site: u32, index: u64, iter: u64) {
        let rect = Rect::of(t, site, index);
        self.extra.get_or_insert_with(Default::default).record(Strided { rect, pat }, iter);
    }

    /// Forget everything recorded (a new allocation of the buffer, or the loop ended).
    fn clear(&mut self) {
        self.earlier_kinds = 0;
        self.iter_kinds = 0;
        self.earlier.clear();
        self.current.clear();
        self.log.clear();
        if self.extra.is_some() {
            self.extra = None;
        }
    }
}

impl Kind {
    /// The kind's spill map (`Spill`).
    fn index(self) -> usize {
        match self {
            Kind::Read => 0,
            Kind::Write => 1,
            Kind::Accumulate => 2,
        }
    }

    #[inline]
    fn bit(self) -> u8 {
        match self {
            Kind::Read => 1,
            Kind::Write => 2,
            Kind::Accumulate => 4,
        }
    }

    /// The kinds of earlier accesses an access of this kind conflicts with: a read with
    /// writes (RAW), an accumulation with reads and writes (not with accumulations), a write
    /// with everything.
    #[inline]
    fn conflicts(self) -> u8 {
        match self {
            Kind::Read => 2 | 4,
            Kind::Accumulate => 1 | 2,
            Kind::Write => 1 | 2 | 4,
        }
    }
}

/// The entry of `t`'s buffer in a level's `bufs`, brought up to date for recording `t`
/// (`used`, `logged` and `iter` the level's): listed as used, cleared for a new allocation of
/// the buffer, `t`'s kind noted.
#[inline(always)]
fn entry<'a>(
    bufs: &'a mut Vec<BufRects>,
    used: &mut Vec<u32>,
    logged: &mut usize,
    iter: u64,
    t: &Touch,
) -> &'a mut BufRects {
    let id = t.region.id as usize;
    if bufs.len() <= id {
        bufs.resize_with(id + 1, Default::default);
    }
    let b = &mut bufs[id];
    if !b.used {
        b.used = true;
        used.push(t.region.id);
    }
    if b.gen != t.gen {
        // A new allocation of a ring buffer: what the old one held is not this tile.
        b.gen = t.gen;
        *logged -= b.log.len();
        b.clear();
    }
    if b.kinds_iter != iter {
        b.earlier_kinds |= b.iter_kinds;
        b.iter_kinds = 0;
        b.kinds_iter = iter;
    }
    b.iter_kinds |= t.kind.bit();
    b
}

/// One open `affine_range` loop.
#[derive(Default)]
struct Level {
    loc: Option<SourceLoc>,
    index: u64,
    /// The iteration serial of the current iteration: a tile allocated at or after it is
    /// this iteration's own, which no other iteration of this loop has touched.
    iter_serial: u64,
    /// Per buffer (the timing model's ids, which are dense), its rectangles at this level:
    /// indexed rather than hashed, since every access of the loop looks its buffer up.
    bufs: Vec<BufRects>,
    /// Buffers with an entry in use at this level (reset when the loop ends).
    used: Vec<u32>,
    /// Counts the iterations started at this level (never reset): a buffer's `current`
    /// rectangles and logged accesses of an older iteration are earlier ones, moved there
    /// when they are next looked at ([`Level::conflict`], [`BufRects::merge_log`]) rather
    /// than for every buffer when an iteration starts.
    iter: u64,
    /// Accesses in the logs of this level's buffers ([`LOG_CAP`]).
    logged: usize,
    /// Tests set this to merge every access into the rectangles when it is recorded, as
    /// before logs existed (see [`BufRects::log`]); it does not exist outside tests.
    #[cfg(test)]
    eager: bool,
}

impl Level {
    /// Whether `t` is to a tile allocated in this loop's current iteration: nothing to check
    /// or record at this level (another iteration reaching it would have to keep its handle
    /// across iterations; that is checked from then on, see `record`).
    #[inline]
    fn own(&self, t: &Touch) -> bool {
        t.alloc_serial >= self.iter_serial
    }

    /// The first conflict of `t` with an earlier iteration's access (`t` not this
    /// iteration's own, [`Level::own`]; `pats` the patterns of the instruction's strided
    /// accesses): with a rectangle, then a strided access, then a spilled one. The buffer's
    /// log is merged first when its kinds say there may be one, and its rectangles of an
    /// earlier iteration are moved to the earlier ones: what `earlier` then holds is what
    /// merging every access when it came, and moving `current` when an iteration started,
    /// would have left there.
    fn conflict(&mut self, t: &Touch, pat: &dyn Fn(&Touch) -> Pattern) -> Option<(Hazard, Rect)> {
        let iter = self.iter;
        let b = self.bufs.get_mut(t.region.id as usize)?;
        let before = if b.kinds_iter == iter { 0 } else { b.iter_kinds };
        if (b.earlier_kinds | before) & t.kind.conflicts() == 0
            || b.gen != t.gen
            || t.pat == UNKNOWN
        {
            return None;
        }
        self.logged -= b.log.len();
        b.merge_log();
        if b.iter != iter {
            b.move_current();
        }
        if t.pat != DENSE {
            return b.conflict_strided(t, &pat(t), iter);
        }
        let found = b
            .earlier
            .iter()
            .filter(|e| e.overlaps(&t.region))
            .find_map(|e| Some((e.hazard(t.kind)?, *e)));
        if found.is_some() {
            return found;
        }
        b.extra.as_deref_mut()?.conflict(t.kind, &t.region, None, iter)
    }

    /// Merge buffer `id`'s log into its rectangles, as [`Level::conflict`] does first.
    #[cfg(test)]
    fn merge_log(&mut self, id: usize) {
        let b = &mut self.bufs[id];
        self.logged -= b.log.len();
        b.merge_log();
    }

    /// Record dense access `t` (not this iteration's own): logged, merged later
    /// ([`BufRects::log`]). A strided one is merged at once ([`Level::record_strided`]).
    fn record(&mut self, t: &Touch, site: u32) {
        let b = entry(&mut self.bufs, &mut self.used, &mut self.logged, self.iter, t);
        let rect = Rect::of(t, site, self.index);
        #[cfg(test)]
        if self.eager {
            // Merged at once, as before logs existed: what the log must give.
            if b.iter != self.iter {
                b.move_current();
            }
            b.iter = self.iter;
            add_rect(&mut b.current, rect, &mut b.extra, self.iter);
            return;
        }
        b.log.push(Logged { rect, iter: self.iter });
        self.logged += 1;
        if self.logged >= LOG_CAP {
            for &id in &self.used {
                self.bufs[id as usize].merge_log();
            }
            self.logged = 0;
        }
    }

    /// Record strided access `t` (not this iteration's own), its pattern `pat`: merged at
    /// once with the buffer's strided accesses ([`Extra`]).
    fn record_strided(&mut self, t: &Touch, pat: Pattern, site: u32) {
        let (index, iter) = (self.index, self.iter);
        let b = entry(&mut self.bufs, &mut self.used, &mut self.logged, iter, t);
        b.record_strided(t, pat, site, index, iter);
    }

    /// The next iteration (serial `serial`) starts: the current one's accesses become
    /// earlier ones (moved when they are next looked at, see [`Level::iter`]).
    fn next_iteration(&mut self, index: u64, serial: u64) {
        self.iter_serial = serial;
        self.iter += 1;
        self.index = index;
    }

    /// The loop ended: forget every buffer's rectangles (keeping the vectors for the next
    /// loop that reuses this level), and their kinds ([`Loops::kinds`]: what the `open`
    /// levels recorded remains).
    fn reset(&mut self, kinds: &mut [u8], open: &[Level]) {
        for id in self.used.drain(..) {
            let b = &mut self.bufs[id as usize];
            b.used = false;
            b.gen = 0;
            b.clear();
            if let Some(k) = kinds.get_mut(id as usize) {
                let at = |l: &Level| {
                    l.bufs.get(id as usize).map_or(0, |b| b.earlier_kinds | b.iter_kinds)
                };
                *k = open.iter().map(at).fold(0, |k, x| k | x);
            }
        }
        self.logged = 0;
        self.index = 0;
    }
}

/// The affine loops open on a core, innermost last, with counters for the profile.
#[derive(Default)]
pub(crate) struct Loops {
    levels: Vec<Level>,
    /// Counts iteration starts of every affine loop on this core (the serial of the latest):
    /// tiles record it when allocated.
    pub serial: u64,
    /// Levels of loops that ended, kept to reuse their maps.
    spare: Vec<Level>,
    /// Makes new levels merge at once ([`Level::eager`]; tests only).
    #[cfg(test)]
    eager: bool,
    pub loops: u64,
    pub iterations: u64,
    /// The instruction sites (name, source location) seen in affine loops, which rectangles
    /// name by index: bounded by the program's source, not by its run.
    sites: Vec<(&'static str, SourceLoc)>,
    /// The index of the last site looked up (most instructions of a loop body repeat the
    /// previous one's site: the innermost loop's single instruction).
    last_site: usize,
    /// Per buffer, the kinds of the accesses recorded at the open levels ([`Kind::bit`]; a
    /// level's cleared ones may stay set until it ends): an
    /// access whose conflicting kinds are not among them has nothing to scan at any level,
    /// which is most accesses, so it is not looked up level by level.
    kinds: Vec<u8>,
    /// The patterns of the strided accesses of the DMA being checked ([`Touch::pat`]):
    /// pushed to while its accesses are listed from `&Nc` (rarely: most accesses are dense),
    /// emptied by the check. A compute instruction's are made from its operands ([`Ops`]).
    pats: RefCell<Vec<Pattern>>,
}

impl Loops {
    #[inline]
    pub(super) fn active(&self) -> bool {
        !self.levels.is_empty()
    }

    /// The index of an instruction site in [`Loops::sites`], added if new. Sites are
    /// compared by address (a string compare costs more than the rest of the check): one
    /// site always has the same addresses; were one site to have two, its rectangles would
    /// only merge less.
    fn site(&mut self, instruction: &'static str, loc: SourceLoc) -> u32 {
        let same = |s: &(&'static str, SourceLoc)| {
            (s.0.as_ptr(), s.0.len(), s.1.file.as_ptr(), s.1.line, s.1.column)
                == (
                    instruction.as_ptr(),
                    instruction.len(),
                    loc.file.as_ptr(),
                    loc.line,
                    loc.column,
                )
        };
        if !self.sites.get(self.last_site).is_some_and(same) {
            self.last_site = match self.sites.iter().rposition(same) {
                Some(i) => i,
                None => {
                    self.sites.push((instruction, loc));
                    self.sites.len() - 1
                }
            };
        }
        self.last_site as u32
    }

    /// The innermost loop's current index (for the trace).
    pub(super) fn index(&self) -> u64 {
        self.levels.last().map_or(0, |l| l.index)
    }
}

impl Nc {
    /// Run `body` for every index of `range` as the iterations of an NKI `affine_range` loop:
    /// iterations without loop-carried dependencies, which the compiler may reorder and
    /// pipeline across engines. Values are computed exactly as by a plain loop; the timing
    /// model list-schedules the iterations' instructions (docs/scheduling.md), so the loop
    /// takes about the time of its busiest engine instead of the sum of its iterations.
    ///
    /// Allowed across iterations: reading the same data, and matmuls accumulating into the
    /// same PSUM tile (`nc.matmul(acc, a, b, k > 0)` over `k`). Anything else one iteration
    /// reads or writes that another wrote or read is an error
    /// ([`ViolationKind::LoopCarriedDependency`](crate::ViolationKind)) — use a plain loop
    /// there, as NKI's `sequential_range`. Tiles allocated inside the body get a buffer of
    /// their pool's ring per iteration, as in a plain loop; with `bufs` buffers, iteration
    /// `i + bufs` waits for iteration `i` to be done with the buffer.
    ///
    /// ```
    /// use neuron_sim::{Act, ActArgs, Chip, Dtype, ExecMode, Nc};
    /// let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
    /// let x = nc.hbm_input("x", Dtype::F32, &[512, 64], &vec![0.5; 512 * 64])?;
    /// let y = nc.hbm("y", Dtype::F32, &[512, 64])?;
    /// let pool = nc.sbuf_pool("io", 2);
    /// nc.affine_range((0..512).step_by(128), |nc, r| {
    ///     let t = nc.tile(pool, Dtype::F32, &[128, 64])?;
    ///     nc.dma(t, x.rows(r..r + 128))?;
    ///     nc.activation(t, t, Act::Exp, ActArgs::default())?;
    ///     nc.dma(y.rows(r..r + 128), t)
    /// })?;
    /// assert_eq!(nc.read_hbm(y).unwrap()[0], 0.5f32.exp());
    /// # Ok::<(), neuron_sim::SimError>(())
    /// ```
    #[track_caller]
    pub fn affine_range<I, F>(&mut self, range: I, mut body: F) -> SimResult<()>
    where
        I: IntoIterator<Item = u64>,
        F: FnMut(&mut Nc, u64) -> SimResult<()>,
    {
        let loc = SourceLoc::from_location(Location::caller());
        // The loop structure is part of the program: the same instructions in a plain loop
        // are another program (another schedule).
        self.h(&[30]);
        let mut level = self.loops.spare.pop().unwrap_or_default();
        level.loc = Some(loc);
        #[cfg(test)]
        {
            level.eager = self.loops.eager;
        }
        self.loops.levels.push(level);
        self.loops.loops += 1;
        if let Some(t) = &mut self.timing {
            t.open_window();
        }
        let mut result = Ok(());
        for i in range {
            self.h(&[31]);
            self.loops.iterations += 1;
            self.loops.serial += 1;
            let serial = self.loops.serial;
            self.loops.levels.last_mut().expect("this loop's level").next_iteration(i, serial);
            if let Some(t) = &mut self.timing {
                t.next_segment();
            }
            self.take_line_busy();
            if let Err(e) = body(self, i) {
                result = Err(e);
                break;
            }
        }
        self.h(&[32]);
        let mut level = self.loops.levels.pop().expect("this loop's level");
        level.reset(&mut self.loops.kinds, &self.loops.levels);
        self.loops.spare.push(level);
        if let Some(t) = &mut self.timing {
            t.close_window();
        }
        self.take_line_busy();
        result
    }

    /// Run `body` for every index of `range` in program order: NKI's `sequential_range`,
    /// the same as a plain Rust loop (which is what it is here; it exists so that kernels
    /// written after NKI code can say so). Inside an affine loop its iterations are part of
    /// the enclosing iteration.
    pub fn sequential_range<I, F>(&mut self, range: I, mut body: F) -> SimResult<()>
    where
        I: IntoIterator<Item = u64>,
        F: FnMut(&mut Nc, u64) -> SimResult<()>,
    {
        for i in range {
            body(self, i)?;
        }
        Ok(())
    }

    /// Move the busy time of DMAs the list scheduler placed into their lines' counters.
    pub(super) fn take_line_busy(&mut self) {
        // Most calls find nothing (only placed DMAs leave busy time here).
        if let Some(t) = self.timing.as_mut().filter(|t| !t.window.line_busy.is_empty()) {
            for (line, busy) in t.window.line_busy.drain(..) {
                self.stats.lines[line as usize].busy_ps += busy;
            }
        }
    }

    /// Check an instruction of an affine loop against the earlier iterations of every open
    /// loop, then record its accesses. The patterns of its strided ones are a compute
    /// instruction's operands' (`ops`) or a DMA's in [`Loops::pats`], which is emptied here
    /// when used ([`Touch::pat`]).
    pub(super) fn check_loop_carried(
        &mut self,
        instruction: &'static str,
        touches: &[Touch],
        ops: Ops,
        loc: SourceLoc,
    ) -> VResult<()> {
        // Every level is checked before any records (an instruction does not conflict with
        // itself). Most instructions have no operand whose conflicting kinds any open level
        // recorded for its buffer ([`Loops::kinds`]): nothing to scan at any level.
        let Loops { levels, kinds, pats, .. } = &mut self.loops;
        let pat = |t: &Touch| pattern(t, &pats.borrow(), ops);
        let maybe = |t: &Touch| {
            t.pat != UNKNOWN
                && kinds.get(t.region.id as usize).is_some_and(|&k| k & t.kind.conflicts() != 0)
        };
        let levels = if touches.iter().any(maybe) { &mut levels[..] } else { &mut [] };
        let mut found = None;
        'levels: for level in levels {
            for t in touches {
                if level.own(t) {
                    continue;
                }
                if let Some((hazard, e)) = level.conflict(t, &pat) {
                    found = Some((t, hazard, e, level.index, level.loc));
                    break 'levels;
                }
            }
        }
        if let Some((t, hazard, e, index, loop_loc)) = found {
            self.loops.pats.get_mut().clear();
            let what = match t.target {
                Target::Tile(buf) => {
                    let lt = &self.logicals[self.bufs[buf as usize].logical as usize];
                    format!("tile `{}`", lt.name)
                }
                Target::Hbm(id) => format!("HBM tensor `{}`", self.hbm[id as usize].name),
            };
            let (earlier_instruction, earlier_loc) = self.loops.sites[e.site as usize];
            return Err(V::LoopCarriedDependency(Box::new(LoopCarried {
                hazard,
                what,
                index,
                earlier_instruction,
                earlier_loc,
                earlier_accumulated: e.kind == Kind::Accumulate,
                earlier_first_index: e.first_index,
                earlier_last_index: e.last_index,
                loop_loc: loop_loc.expect("an open loop has its call site"),
            })));
        }
        if touches.is_empty() {
            return Ok(());
        }
        let site = self.loops.site(instruction, loc);
        let Loops { levels, kinds, .. } = &mut self.loops;
        let mut strided = false;
        for t in touches {
            if t.pat != DENSE {
                strided = true;
                continue;
            }
            // The levels where `t` is not its iteration's own are the innermost ones (an
            // inner level's iteration started after its enclosing level's).
            for level in levels.iter_mut().rev().take_while(|l| !l.own(t)) {
                level.record(t, site);
            }
            let id = t.region.id as usize;
            if kinds.len() <= id {
                kinds.resize(id + 1, 0);
            }
            kinds[id] |= t.kind.bit();
        }
        if strided {
            self.record_strided(touches, ops, site);
        }
        Ok(())
    }

    /// The recording of [`Nc::check_loop_carried`] for the strided accesses among `touches`
    /// (and none for those of unknown elements), which empties the list of patterns (an
    /// access made unknown may have left one there).
    #[cold]
    #[inline(never)]
    fn record_strided(&mut self, touches: &[Touch], ops: Ops, site: u32) {
        let Loops { levels, kinds, pats, .. } = &mut self.loops;
        let pats = pats.get_mut();
        for t in touches.iter().filter(|t| t.pat != DENSE && t.pat != UNKNOWN) {
            let pat = pattern(t, pats, ops);
            for level in levels.iter_mut().rev().take_while(|l| !l.own(t)) {
                level.record_strided(t, pat, site);
            }
            let id = t.region.id as usize;
            if kinds.len() <= id {
                kinds.resize(id + 1, 0);
            }
            kinds[id] |= t.kind.bit();
        }
        pats.clear();
    }

    /// The accesses of a compute instruction (its views and their regions), for
    /// [`Nc::check_loop_carried`], a strided one marked with its operand's index ([`OPERAND`]);
    /// a matmul's destination accumulates.
    pub(super) fn compute_touches(
        &self,
        opcode: &'static str,
        reads: &[(&TileView, Region)],
        writes: &[(&TileView, Region)],
        out: &mut Vec<Touch>,
    ) {
        out.clear();
        // A tile allocated in the innermost loop's current iteration is every open loop's
        // iteration's own (`Level::own`): nothing to check or record, so not even listed.
        let innermost = self.loops.levels.last().map_or(u64::MAX, |l| l.iter_serial);
        let wkind = if opcode == "nc_matmul" { Kind::Accumulate } else { Kind::Write };
        let all = reads.iter().map(|x| (x, Kind::Read)).chain(writes.iter().map(|x| (x, wkind)));
        for (i, ((v, r), kind)) in all.enumerate() {
            let alloc_serial = self.bufs[v.tile.buf as usize].alloc_serial;
            if alloc_serial >= innermost {
                continue;
            }
            out.push(Touch {
                region: *r,
                gen: v.tile.gen,
                pat: if dense(v.free.as_slice(), 1) { DENSE } else { OPERAND + i as u8 },
                kind,
                target: Target::Tile(v.tile.buf),
                alloc_serial,
            });
        }
    }

    /// The access of one side of a DMA, for [`Nc::check_loop_carried`] (`None` for a tile
    /// that is the innermost iteration's own, see [`Nc::compute_touches`]).
    pub(super) fn dma_touch(&self, a: &super::Access, region: Region, kind: Kind) -> Option<Touch> {
        Some(match a {
            super::Access::Tile(v) => {
                let alloc_serial = self.bufs[v.tile.buf as usize].alloc_serial;
                if self.loops.levels.last().is_some_and(|l| alloc_serial >= l.iter_serial) {
                    return None;
                }
                Touch {
                    region,
                    gen: v.tile.gen,
                    pat: self.tile_pat(v),
                    kind,
                    target: Target::Tile(v.tile.buf),
                    alloc_serial,
                }
            }
            super::Access::Hbm(v) => Touch {
                region,
                gen: 0,
                pat: if self.hbm_exact(v) {
                    DENSE
                } else {
                    let t = &self.hbm[v.tensor.id as usize];
                    let size = t.dtype.size() as u64;
                    self.add_pat(Pattern::new(v.offset, v.dims.as_slice(), t.row_elems, size))
                },
                kind,
                target: Target::Hbm(v.tensor.id),
                alloc_serial: 0,
            },
        })
    }

    /// [`Touch::pat`] of a tile view: [`DENSE`], or its pattern's index ([`Nc::add_pat`]).
    #[inline(always)]
    fn tile_pat(&self, v: &TileView) -> u8 {
        if dense(v.free.as_slice(), 1) {
            return DENSE;
        }
        self.tile_pattern(v)
    }

    #[cold]
    fn tile_pattern(&self, v: &TileView) -> u8 {
        self.add_pat(view_pattern(v))
    }

    /// Keep `p` for the check of the instruction whose accesses are being listed, which
    /// empties the list: its index there.
    #[cold]
    #[inline(never)]
    fn add_pat(&self, p: Pattern) -> u8 {
        let mut pats = self.loops.pats.borrow_mut();
        pats.push(p);
        debug_assert!(pats.len() < OPERAND as usize, "an instruction has a few operands");
        (pats.len() - 1) as u8
    }

    /// Whether an HBM access touches every element of its region (rows × columns of the
    /// tensor): its dims split into whole-row strides, dense in rows, and in-row strides,
    /// dense in elements and not wrapping a row.
    fn hbm_exact(&self, v: &HbmView) -> bool {
        let t = &self.hbm[v.tensor.id as usize];
        let row = t.row_elems.max(1) as i64;
        let (mut rows, mut cols) = ([(0i64, 0u64); MAX_HBM_DIMS], [(0i64, 0u64); MAX_HBM_DIMS]);
        let (mut nr, mut nc) = (0, 0);
        for &(s, n) in v.dims.as_slice() {
            if n <= 1 {
                continue;
            }
            if s != 0 && s % row == 0 {
                rows[nr] = (s / row, n);
                nr += 1;
            } else {
                cols[nc] = (s, n);
                nc += 1;
            }
        }
        if !dense(&rows[..nr], 1) || !dense(&cols[..nc], 1) {
            return false;
        }
        // The columns stay inside one row.
        let ext: i64 = cols[..nc].iter().map(|&(s, n)| s.abs() * (n as i64 - 1)).sum();
        let lo: i64 = cols[..nc].iter().map(|&(s, n)| (s * (n as i64 - 1)).min(0)).sum();
        let c0 = v.offset.rem_euclid(row) + lo;
        c0 >= 0 && c0 + ext < row
    }
}

/// The pattern of tile view `v`.
fn view_pattern(v: &TileView) -> Pattern {
    let row = v.tile.elems as i64;
    let mut dims = [(row, v.np as u64); 1 + MAX_FREE_DIMS];
    let free = v.free.as_slice();
    dims[1..1 + free.len()].copy_from_slice(free);
    let off = v.p0 as i64 * row + v.offset;
    let size = v.tile.dtype.size() as u64;
    Pattern::new(off, &dims[..1 + free.len()], row as u64, size)
}

/// The pattern of strided access `t`: made from its compute operand in `ops`, or listed in
/// `pats` ([`Touch::pat`]).
#[cold]
fn pattern(t: &Touch, pats: &[Pattern], ops: Ops) -> Pattern {
    if t.pat >= OPERAND {
        let (v, _) = ops.0.iter().chain(ops.1).nth((t.pat - OPERAND) as usize).expect("an operand");
        view_pattern(v)
    } else {
        pats[t.pat as usize]
    }
}

/// Whether `(stride, size)` dims visit a dense block: sorted by stride, each stride is the
/// product of the sizes below it (starting at `unit`), so no element is skipped or repeated.
#[inline(always)]
fn dense(dims: &[(i64, u64)], unit: i64) -> bool {
    // Most views have one dim or none: no sort needed, and no call (this runs for every
    // operand of an affine loop's instructions).
    match dims {
        [] => true,
        &[(s, size)] => size <= 1 || s.abs() == unit,
        _ => dense_sorted(dims, unit),
    }
}

/// [`dense`] for two dims or more.
fn dense_sorted(dims: &[(i64, u64)], unit: i64) -> bool {
    let mut d: [(i64, u64); MAX_HBM_DIMS] = [(0, 1); MAX_HBM_DIMS];
    let mut n = 0;
    for &(s, size) in dims {
        if size > 1 {
            d[n] = (s.abs(), size);
            n += 1;
        }
    }
    d[..n].sort_unstable();
    let mut expect = unit;
    for &(s, size) in &d[..n] {
        if s != expect {
            return false;
        }
        expect *= size as i64;
    }
    true
}

#[cfg(test)]
#[path = "affine_tests.rs"]
mod tests;
