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
//! tensor) keep one rectangle per line whatever the trip count; a list that still grows past
//! [`MAX_RECTS`] drops its oldest rectangle (that part is no longer checked). Accesses are
//! logged and merged only when a check needs the rectangles or the level's log is full, so
//! an inner loop that ends first (the matmuls of a K loop) never pays for merging
//! ([`BufRects::log`]). A rectangle is *exact* when its access touched every element in it;
//! an overlap is reported only between exact rectangles, so a strided access (a bounding box
//! with holes) never gives a false error — it is only kept in order by the scheduler.

use super::{Nc, VResult};
use crate::error::{Hazard, LoopCarried, SimResult, SourceLoc, ViolationKind as V};
use crate::timing::Region;
use crate::view::*;
use std::panic::Location;

/// Rectangles kept per buffer and loop level, for the current iteration and for the earlier
/// ones each.
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
    /// Whether the access touches every element of `region`.
    pub exact: bool,
    pub kind: Kind,
    pub target: Target,
    /// For a tile, the iteration serial of its allocation (0 for HBM, like a tile allocated
    /// before any loop: never an iteration's own, since iterations' serials start at 1).
    pub alloc_serial: u64,
}

/// An access recorded for the conflict check: a rectangle of one buffer.
#[derive(Clone, Copy, Debug)]
struct Rect {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
    exact: bool,
    kind: Kind,
    /// The instruction and source line, as an index into [`Loops::sites`]: rectangles are
    /// compared, merged and moved at every access and iteration, and a site's 40 bytes
    /// (name and location) made that cost more than the rest.
    site: u32,
    first_index: u64,
    last_index: u64,
}

impl Rect {
    fn overlaps(&self, r: &Region) -> bool {
        r.p0 < self.p1 && self.p0 < r.p1 && r.b0 < self.b1 && self.b0 < r.b1
    }

    /// Absorb `o` if both came from the same instruction site with the same kind and
    /// exactness and their union is a rectangle (same partitions and touching bytes, or
    /// same bytes and touching partitions).
    fn absorb(&mut self, o: &Rect) -> bool {
        if (self.site, self.kind, self.exact) != (o.site, o.kind, o.exact) {
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
        self.first_index = self.first_index.min(o.first_index);
        self.last_index = self.last_index.max(o.last_index);
        true
    }
}

/// Add `r` to `list`, merged into a rectangle it extends, or appended (dropping the oldest
/// at the cap: that part is no longer checked, never wrongly reported).
fn add_rect(list: &mut Vec<Rect>, r: Rect) {
    if list.iter_mut().rev().any(|x| x.absorb(&r)) {
        return;
    }
    if list.len() >= MAX_RECTS {
        list.remove(0);
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
    /// The kinds of the exact accesses recorded in iterations before `kinds_iter`
    /// ([`Kind::bit`]; a dropped rectangle's kind may stay set): an access whose conflicting
    /// kinds are neither among them nor, once another iteration has started, among
    /// `iter_kinds`, has nothing to scan.
    earlier_kinds: u8,
    /// The kinds of the exact accesses recorded in iteration `kinds_iter`.
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
}

impl BufRects {
    /// Move the rectangles of `current` (of iteration `self.iter`) to `earlier`.
    fn move_current(&mut self) {
        for i in 0..self.current.len() {
            let r = self.current[i];
            add_rect(&mut self.earlier, r);
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
            add_rect(&mut self.current, rect);
        }
        self.log.clear();
    }

    /// Forget everything recorded (a new allocation of the buffer, or the loop ended).
    fn clear(&mut self) {
        self.earlier_kinds = 0;
        self.iter_kinds = 0;
        self.earlier.clear();
        self.current.clear();
        self.log.clear();
    }
}

impl Kind {
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

    /// The first conflict of `t` with an earlier iteration's exact access (`t` not this
    /// iteration's own, [`Level::own`]). The buffer's log is merged first when its kinds say
    /// there may be one, and its rectangles of an earlier iteration are moved to the earlier
    /// ones: what `earlier` then holds is what merging every access when it came, and moving
    /// `current` when an iteration started, would have left there.
    fn conflict(&mut self, t: &Touch) -> Option<(Hazard, Rect)> {
        let iter = self.iter;
        let b = self.bufs.get_mut(t.region.id as usize)?;
        let before = if b.kinds_iter == iter { 0 } else { b.iter_kinds };
        if (b.earlier_kinds | before) & t.kind.conflicts() == 0 || b.gen != t.gen || !t.exact {
            return None;
        }
        self.logged -= b.log.len();
        b.merge_log();
        if b.iter != iter {
            b.move_current();
        }
        b.earlier.iter().filter(|e| e.exact && e.overlaps(&t.region)).find_map(|e| {
            // Which kinds conflict is `Kind::conflicts`' table; this only names the hazard.
            if t.kind.conflicts() & e.kind.bit() == 0 {
                return None;
            }
            let hazard = match (t.kind, e.kind) {
                (Kind::Read, _) => Hazard::Raw,
                (_, Kind::Read) => Hazard::War,
                _ => Hazard::Waw,
            };
            Some((hazard, *e))
        })
    }

    /// Merge buffer `id`'s log into its rectangles, as [`Level::conflict`] does first.
    #[cfg(test)]
    fn merge_log(&mut self, id: usize) {
        let b = &mut self.bufs[id];
        self.logged -= b.log.len();
        b.merge_log();
    }

    /// Record `t` (`t` not this iteration's own): logged, merged later ([`BufRects::log`]).
    fn record(&mut self, t: &Touch, site: u32) {
        let id = t.region.id as usize;
        if self.bufs.len() <= id {
            self.bufs.resize_with(id + 1, Default::default);
        }
        let b = &mut self.bufs[id];
        if !b.used {
            b.used = true;
            self.used.push(t.region.id);
        }
        if b.gen != t.gen {
            // A new allocation of a ring buffer: what the old one held is not this tile.
            b.gen = t.gen;
            self.logged -= b.log.len();
            b.clear();
        }
        if b.kinds_iter != self.iter {
            b.earlier_kinds |= b.iter_kinds;
            b.iter_kinds = 0;
            b.kinds_iter = self.iter;
        }
        if t.exact {
            b.iter_kinds |= t.kind.bit();
        }
        let r = t.region;
        let rect = Rect {
            p0: r.p0,
            p1: r.p1,
            b0: r.b0,
            b1: r.b1,
            exact: t.exact,
            kind: t.kind,
            site,
            first_index: self.index,
            last_index: self.index,
        };
        #[cfg(test)]
        if self.eager {
            // Merged at once, as before logs existed: what the log must give.
            if b.iter != self.iter {
                b.move_current();
            }
            b.iter = self.iter;
            add_rect(&mut b.current, rect);
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
    /// Per buffer, the kinds of the exact accesses recorded at the open levels
    /// ([`Kind::bit`]; a level's cleared or dropped ones may stay set until it ends): an
    /// access whose conflicting kinds are not among them has nothing to scan at any level,
    /// which is most accesses, so it is not looked up level by level.
    kinds: Vec<u8>,
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
    /// loop, then record its accesses.
    pub(super) fn check_loop_carried(
        &mut self,
        instruction: &'static str,
        touches: &[Touch],
        loc: SourceLoc,
    ) -> VResult<()> {
        // Every level is checked before any records (an instruction does not conflict with
        // itself). Most instructions have no operand whose conflicting kinds any open level
        // recorded for its buffer ([`Loops::kinds`]): nothing to scan at any level.
        let Loops { levels, kinds, .. } = &mut self.loops;
        let maybe = |t: &Touch| {
            t.exact && kinds.get(t.region.id as usize).is_some_and(|&k| k & t.kind.conflicts() != 0)
        };
        let levels = if touches.iter().any(maybe) { &mut levels[..] } else { &mut [] };
        let mut found = None;
        'levels: for level in levels {
            for t in touches {
                if level.own(t) {
                    continue;
                }
                if let Some((hazard, e)) = level.conflict(t) {
                    found = Some((t, hazard, e, level.index, level.loc));
                    break 'levels;
                }
            }
        }
        if let Some((t, hazard, e, index, loop_loc)) = found {
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
        for t in touches {
            // The levels where `t` is not its iteration's own are the innermost ones (an
            // inner level's iteration started after its enclosing level's).
            for level in levels.iter_mut().rev().take_while(|l| !l.own(t)) {
                level.record(t, site);
            }
            if t.exact {
                let id = t.region.id as usize;
                if kinds.len() <= id {
                    kinds.resize(id + 1, 0);
                }
                kinds[id] |= t.kind.bit();
            }
        }
        Ok(())
    }

    /// The accesses of a compute instruction (its views and their regions), for
    /// [`Nc::check_loop_carried`]; a matmul's destination accumulates.
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
        for ((v, r), kind) in all {
            let alloc_serial = self.bufs[v.tile.buf as usize].alloc_serial;
            if alloc_serial >= innermost {
                continue;
            }
            out.push(Touch {
                region: *r,
                gen: v.tile.gen,
                exact: dense(v.free.as_slice(), 1),
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
                    exact: dense(v.free.as_slice(), 1),
                    kind,
                    target: Target::Tile(v.tile.buf),
                    alloc_serial,
                }
            }
            super::Access::Hbm(v) => Touch {
                region,
                gen: 0,
                exact: self.hbm_exact(v),
                kind,
                target: Target::Hbm(v.tensor.id),
                alloc_serial: 0,
            },
        })
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
mod tests {
    use super::*;
    use crate::{Chip, Dtype, ExecMode};

    /// Each iteration writes its own rows of one HBM tensor and its own columns of one tile:
    /// the earlier iterations' accesses merge into one rectangle per source line, so the
    /// check's memory does not grow with the trip count.
    #[test]
    fn disjoint_accesses_of_many_iterations_merge_into_one_rectangle() {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let n = 16_000u64;
        let y = nc.hbm("y", Dtype::Bf16, &[n, 4]).unwrap();
        let pool = nc.sbuf_pool("p", 1);
        let wide = nc.tile(pool, Dtype::Bf16, &[1, 4 * n]).unwrap();
        nc.memset(wide, 0.0).unwrap();
        let tids = (nc.hbm[y.id as usize].tid, nc.bufs[wide.view().tile.buf as usize].tid);
        let mut sizes = (0, 0);
        nc.affine_range(0..n, |nc, i| {
            nc.memset(wide.cols(4 * i..4 * i + 4), 1.0)?;
            nc.dma(y.rows(i..i + 1), wide.cols(4 * i..4 * i + 4))?;
            // What a check would see: the log merged (it never holds a full log).
            let level = &mut nc.loops.levels[0];
            for (id, size) in [(tids.0, &mut sizes.0), (tids.1, &mut sizes.1)] {
                level.merge_log(id as usize);
                *size = (*size).max(level.bufs[id as usize].earlier.len());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(sizes, (1, 2), "y: one store rectangle; wide: one memset, one read");
    }

    /// Merging the logged accesses late (when a check needs them, or the log is full) finds
    /// what merging each access when it came finds: random nested affine loops whose
    /// iterations read and write blocks of two tiles and an HBM tensor — mostly their own
    /// blocks, some shared with other iterations at one level or all — end with the same
    /// error, or none, either way. Logs fill up and are merged part-way (up to 16 × 12
    /// iterations of up to 3 accesses per buffer).
    #[test]
    fn merging_the_log_late_finds_what_merging_at_once_finds() {
        // (operation, block mode of its destination, of its source) per access of the body;
        // operation 0: memset, 1: tile copy, 2: store to HBM, 3: load from HBM.
        type Op = (u64, u64, u64);
        let mut next = crate::test_rng(0x0123_4567_89ab_cdef);
        let (mut errors, mut oks) = (0, 0);
        for case in 0..200 {
            let (outer, inner) = (1 + next(16), 1 + next(12));
            let ops: Vec<Op> = (0..1 + next(3))
                .map(|_| {
                    // Block modes: 0 the iteration's own block (index i·inner + j), 1 the
                    // inner index's (shared across outer iterations), 2 the outer index's
                    // (shared across inner ones), 3 block 0 (shared by all). Mostly own.
                    let mode = |next: &mut dyn FnMut(u64) -> u64| {
                        if next(4) > 0 {
                            0
                        } else {
                            next(4)
                        }
                    };
                    (next(4), mode(&mut next), mode(&mut next))
                })
                .collect();
            let run = |eager: bool| {
                let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
                nc.loops.eager = eager;
                let pool = nc.sbuf_pool("p", 1);
                let blocks = 16 * 12;
                let tiles = [
                    nc.tile(pool, Dtype::F32, &[128, 8 * blocks]).unwrap(),
                    nc.tile(pool, Dtype::F32, &[128, 8 * blocks]).unwrap(),
                ];
                let h = nc.hbm("h", Dtype::F32, &[blocks, 8 * 128]).unwrap();
                let result = nc.affine_range(0..outer, |nc, i| {
                    nc.affine_range(0..inner, |nc, j| {
                        for (n, &(op, dm, sm)) in ops.iter().enumerate() {
                            let block = |mode| match mode {
                                0 => i * inner + j,
                                1 => j,
                                2 => i,
                                _ => 0,
                            };
                            let (d, s) = (block(dm), block(sm));
                            let (td, ts) = (tiles[n % 2], tiles[(n + 1) % 2]);
                            match op {
                                0 => nc.memset(td.cols(8 * d..8 * d + 8), 1.0)?,
                                1 => nc.tensor_copy(
                                    td.cols(8 * d..8 * d + 8),
                                    ts.cols(8 * s..8 * s + 8),
                                )?,
                                2 => nc.dma(h.rows(d..d + 1), ts.cols(8 * s..8 * s + 8))?,
                                _ => nc.dma(td.cols(8 * d..8 * d + 8), h.rows(s..s + 1))?,
                            }
                        }
                        Ok(())
                    })
                });
                result.map_err(|e| e.to_string())
            };
            let (late, at_once) = (run(false), run(true));
            assert_eq!(late, at_once, "case {case}: {outer} x {inner}, {ops:?}");
            if late.is_err() {
                errors += 1;
            } else {
                oks += 1;
            }
        }
        // Both outcomes were exercised.
        assert!(errors >= 20 && oks >= 20, "{errors} errors, {oks} without");
    }
}
