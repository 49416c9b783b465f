//! SPMD launches over the physical NeuronCores of a logical core: NKI's `kernel[2](…)` with
//! `nl.program_id(0)` and `nl.num_programs(0)` (neuroncore.md §2.1 [LNC, LNCK]).
//!
//! [`Nc::spmd`] runs a kernel body once per program. Each program runs on its own physical
//! core: its own engines, DMA engines and queues, HBM bandwidth share (the chip's per-core
//! figure, `memory.hbm_gbps_per_core`), SBUF and PSUM. The programs share the HBM tensors.
//!
//! * **Values** are computed program after program, so they are exactly those of running
//!   the bodies one after another. Two programs touching one HBM element, at least one
//!   writing it, would race on the hardware (no barrier is modelled): the functional model
//!   reports it, exactly, element by element
//!   ([`ViolationKind::SpmdConflict`](crate::ViolationKind::SpmdConflict), naming both
//!   instructions), as it reports reads of unwritten memory — so `check` finds it, and a
//!   timing-only run (`bench`) does not look. The marks it keeps (`nc/spmd_marks.rs`) are
//!   runs of elements with the site of their first writer and first reader, per tensor and
//!   for the earlier programs and the running one: their memory grows with the number of
//!   maximal runs of one first site (one for a program's block of rows written from one
//!   source line, at most one per element; the bound is in that module), not with the
//!   tensors' sizes, and checking or marking a run costs O(log n) in the runs kept.
//! * **Time.** The caller's core state (timing, released-memory times, SBUF/PSUM peaks,
//!   the lower bound's work, the SBUF counter) is set aside, and each program gets a fresh
//!   one whose clock starts at the caller's end `T0`: its compute engines are busy until
//!   then, and every buffer it touches (HBM tensors, new tiles) starts behind a record at
//!   `T0`. A program's HBM accesses never wait for another program's (they would conflict).
//!   The launch ends at the latest program end, where the caller's core continues (the
//!   same records), so whatever follows (a model's next kernel) starts behind it. At
//!   `T0 = 0` (a kernel whose body is the launch) a program is timed exactly as a fresh
//!   [`Nc`] running its body.
//! * **Memory.** Pools and tiles keep one id space: every pool must be released when the
//!   launch starts (the caller's SBUF is not a program's), and each program's pools are
//!   released when it ends, so a tile kept from another program or from before is stale.
//! * **Profile** (`profile.rs`): the kernel time is the latest end; FLOPs, bytes,
//!   instruction counts and each engine's busy time are summed over the cores, and the
//!   utilizations, MFU, MBU and roofline are against `cores` × the per-core figures (the
//!   most programs of any launch). **Lower bound**: the largest program's bound after the
//!   caller's (`SerialWork::after`). **Trace**: one process per physical core.
//! * **Hash**: the launch (tag 64, with its program count), each program's start (65, with
//!   its id) and the launch's end (66) are in the program hash.
//!
//! A panic inside a body leaves the [`Nc`] inside its launch (the caller's core set
//! aside): drop it, as the harness does with an `Nc` whose kernel panicked. An error
//! returned by a body ends the launch cleanly.
//!
//! Not modelled: barriers and messages between programs (`core_barrier`, `sendrecv`:
//! no published cost, docs/instructions.md §3), and contention between the two cores of
//! an HBM bank (each core has its own bandwidth share; neuroncore.md §1.1 has the banks
//! shared by 2 physical cores, with no figure for what sharing costs).

use super::spmd_marks::Marks;
use super::{Nc, VResult};
use crate::error::{SimError, SimResult, SourceLoc, SpmdConflict, ViolationKind as V};
use crate::timing::{Crit, SchedCounters, SerialWork, Slice, Timing, Track, CRIT_CATEGORIES};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::panic::Location;

/// One physical core's timing state, set aside while another core runs a program.
struct CoreState {
    timing: Option<Timing>,
    freed: [(u64, Crit); 2],
    sbuf_reserved: u64,
    psum_reserved_banks: u64,
    sbuf_counter: Vec<(u64, u64)>,
    serial: SerialWork,
}

/// What the programs run on one physical core leave for the trace.
#[derive(Default)]
pub(crate) struct CoreTrace {
    pub slices: Vec<Slice>,
    pub sbuf_counter: Vec<(u64, u64)>,
    pub hbm_counter: BTreeMap<u64, u64>,
}

/// The SPMD state of an [`Nc`].
pub(crate) struct Spmd {
    /// The running program and its launch's count (0 and 1 outside a launch).
    program: u32,
    programs: u32,
    /// Inside a program's body.
    running: bool,
    /// The most programs of any launch so far, at least 1: the cores the profile counts.
    pub cores: u32,
    /// Per physical core, what its programs traced (the caller's own slices are its core
    /// 0's, kept in its timing).
    pub traces: Vec<CoreTrace>,
    /// The programs' tracks' busy time, cycles and instruction counts, summed.
    pub tracks: Vec<Track>,
    /// The programs' list-scheduler counters, summed.
    pub sched: SchedCounters,
    /// The instruction being issued and its source line (set by `Nc::issue` inside a launch
    /// of two programs or more, where HBM accesses are marked; stale outside one): a
    /// conflict names it as the earlier access of a later one.
    pub current: Option<(&'static str, &'static Location<'static>)>,
    /// Instruction sites of the launch's HBM accesses (program, instruction, line), which
    /// the marks name by index: bounded by the source, not by the run.
    sites: Vec<(u32, &'static str, SourceLoc)>,
    site_index: FxHashMap<(u32, usize, usize), u32>,
    /// Per HBM tensor, its marks in the current launch (functional runs only).
    marks: Vec<Option<Marks>>,
    /// The launch's largest SBUF (bytes per partition) and PSUM (banks) peaks of a program.
    peaks: (u64, u64),
    /// The launch's largest lower bound of a program (ps).
    bound: u64,
    /// When the running program's core started, and its critical path.
    start: (u64, Crit),
}

impl Default for Spmd {
    fn default() -> Self {
        Spmd {
            program: 0,
            programs: 1,
            running: false,
            cores: 1,
            traces: Vec::new(),
            tracks: Vec::new(),
            sched: SchedCounters::default(),
            current: None,
            sites: Vec::new(),
            site_index: FxHashMap::default(),
            marks: Vec::new(),
            peaks: (0, 0),
            bound: 0,
            start: (0, [0; CRIT_CATEGORIES.len()]),
        }
    }
}

impl Spmd {
    /// Whether a launch of two programs or more is running (where `Nc::issue` keeps the
    /// current instruction for the conflict check; outside one it stores nothing).
    #[inline(always)]
    pub(super) fn launched(&self) -> bool {
        self.programs > 1
    }

    /// Whether HBM accesses are checked for cross-program conflicts (inside a launch of two
    /// programs or more, in a functional run).
    #[inline(always)]
    pub(super) fn checking(&self) -> bool {
        self.running && self.programs > 1
    }

    /// The site of the instruction being issued, in the current program.
    fn site(&mut self) -> u32 {
        let (instruction, loc) = self.current.expect("an HBM access is issued by an instruction");
        let key = (self.program, instruction.as_ptr() as usize, loc as *const _ as usize);
        let next = self.sites.len() as u32;
        let id = *self.site_index.entry(key).or_insert(next);
        if id == next {
            self.sites.push((self.program, instruction, SourceLoc::from_location(loc)));
        }
        id
    }
}

impl Nc {
    /// Which program of an [`Nc::spmd`] launch is running (NKI `nl.program_id(0)`); 0
    /// outside one.
    pub fn program_id(&self) -> u32 {
        self.spmd.program
    }

    /// How many programs the running [`Nc::spmd`] launch has (NKI `nl.num_programs(0)`);
    /// 1 outside one.
    pub fn num_programs(&self) -> u32 {
        self.spmd.programs
    }

    /// Launch `body` as `programs` programs, one per physical NeuronCore of the logical core
    /// (NKI `kernel[programs](…)`, each copy asking `nl.program_id(0)`): `body(nc,
    /// program_id)` issues one program's instructions, which run on that program's own
    /// engines, DMA queues, HBM bandwidth share, SBUF and PSUM, all starting together; the
    /// HBM tensors are shared. The launch ends when its last program does. See the module
    /// docs of `nc/spmd.rs` for the model; [`Nc::program_id`] and [`Nc::num_programs`]
    /// answer inside the body too.
    ///
    /// ```
    /// # use neuron_sim::{Chip, Dtype, ExecMode, Nc};
    /// let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
    /// let x = nc.hbm_input("x", Dtype::F32, &[256, 64], &[1.0; 256 * 64])?;
    /// let y = nc.hbm("y", Dtype::F32, &[256, 64])?;
    /// nc.spmd(2, |nc, pid| {
    ///     let rows = 128 * pid as u64..128 * (pid as u64 + 1);
    ///     let pool = nc.sbuf_pool("io", 1);
    ///     let t = nc.tile(pool, Dtype::F32, &[128, 64])?;
    ///     nc.dma(t, x.rows(rows.clone()))?;
    ///     nc.dma(y.rows(rows), t)
    /// })?;
    /// assert_eq!(nc.read_hbm(y).unwrap()[255 * 64], 1.0);
    /// # Ok::<(), neuron_sim::SimError>(())
    /// ```
    ///
    /// Errors: more programs than the chip's physical cores per logical core
    /// ([`ViolationKind::TooManyPrograms`](crate::ViolationKind::TooManyPrograms)), none, a
    /// launch inside a program or an affine loop, or with a pool not released (a program's
    /// SBUF is its own); an instruction of a program touching an HBM element another
    /// program wrote, or writing one another read
    /// ([`ViolationKind::SpmdConflict`](crate::ViolationKind::SpmdConflict), naming both
    /// instructions); and whatever the body returns.
    #[track_caller]
    pub fn spmd<F>(&mut self, programs: u32, mut body: F) -> SimResult<()>
    where
        F: FnMut(&mut Nc, u32) -> SimResult<()>,
    {
        let loc = Location::caller();
        let err = |kind| SimError { instruction: "spmd", loc: SourceLoc::from_location(loc), kind };
        self.spmd_refusal(programs).map_err(err)?;
        self.h(&[64]);
        self.h64(programs as u64);
        let (t0, crit0) = self.core_end();
        let caller = self.take_core();
        let hbm_before = self.hbm.len();
        self.spmd.programs = programs;
        self.spmd.cores = self.spmd.cores.max(programs);
        let mut latest: (u64, Crit) = (t0, crit0);
        let mut result = Ok(());
        for pid in 0..programs {
            self.h(&[65]);
            self.h64(pid as u64);
            self.start_program(t0, crit0);
            self.spmd.program = pid;
            self.spmd.running = true;
            let pools = self.pools.len();
            let r = body(self, pid);
            self.spmd.running = false;
            // The program's SBUF and PSUM end with it: its tiles are stale from here on.
            for p in pools..self.pools.len() {
                if !self.pools[p].released {
                    self.free_pool(p as u32);
                }
            }
            let end = self.end_program(pid);
            if end.0 > latest.0 {
                latest = end;
            }
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        self.put_core(caller);
        self.continue_after(latest, hbm_before);
        self.spmd.program = 0;
        self.spmd.programs = 1;
        self.spmd.sites.clear();
        self.spmd.site_index.clear();
        self.spmd.marks.clear();
        // `issue` sets the instruction only inside a launch: one kept past it could name a
        // later launch's access that did not come through `issue` (it panics instead).
        self.spmd.current = None;
        self.h(&[66]);
        result
    }

    /// Why a launch of `programs` cannot start here, if it cannot.
    fn spmd_refusal(&self, programs: u32) -> VResult<()> {
        let max = self.chip.max_programs();
        if programs == 0 {
            return Err(V::Invalid("spmd with 0 programs: launch at least 1".into()));
        }
        if programs > max {
            return Err(V::TooManyPrograms { programs, max, chip: self.chip.name.clone() });
        }
        if self.spmd.running {
            return Err(V::Invalid(format!(
                "spmd inside program {} of another launch: a launch runs on the physical cores \
                 of one logical core, and there are no more (launch once, at the kernel's top)",
                self.spmd.program
            )));
        }
        if self.loops.active() || self.timing.as_ref().is_some_and(|t| t.window_open()) {
            return Err(V::Invalid(
                "spmd inside an affine_range loop: launch the programs at the kernel's top and \
                 loop inside the body"
                    .into(),
            ));
        }
        if let Some(p) = self.pools.iter().find(|p| !p.released) {
            return Err(V::Invalid(format!(
                "spmd with pool `{}` not released: each program has its own SBUF and PSUM, so \
                 release the caller's pools first (release_pools) and make the pools inside the \
                 body",
                p.name
            )));
        }
        Ok(())
    }

    /// When the current core's work so far has ended: its latest instruction, or the last
    /// access to memory it released if later (as a new buffer would wait for it).
    fn core_end(&self) -> (u64, Crit) {
        let mut end = match &self.timing {
            Some(t) => (t.end, t.end_crit),
            None => (0, [0; CRIT_CATEGORIES.len()]),
        };
        for f in self.freed {
            if f.0 > end.0 {
                end = f;
            }
        }
        end
    }

    fn take_core(&mut self) -> CoreState {
        CoreState {
            timing: self.timing.take(),
            freed: self.freed,
            sbuf_reserved: self.sbuf_reserved,
            psum_reserved_banks: self.psum_reserved_banks,
            sbuf_counter: std::mem::take(&mut self.sbuf_counter),
            serial: std::mem::take(&mut self.stats.serial),
        }
    }

    fn put_core(&mut self, core: CoreState) {
        self.timing = core.timing;
        self.freed = core.freed;
        self.sbuf_reserved = core.sbuf_reserved;
        self.psum_reserved_banks = core.psum_reserved_banks;
        self.sbuf_counter = core.sbuf_counter;
        self.stats.serial = core.serial;
    }

    /// A fresh physical core whose clock starts at `t0`: its engines busy until then, every
    /// HBM tensor and every buffer it makes behind a record at `t0` (none at 0).
    fn start_program(&mut self, t0: u64, crit0: Crit) {
        self.timing = self.mode.timing.then(|| {
            let mut t = Timing::new(&self.chip, self.chip.dma.engines as usize, self.mode.trace);
            for h in &self.hbm {
                t.ensure_buffer(h.tid, h.row_elems * h.dtype.size() as u64);
                if t0 > 0 {
                    t.inherit(h.tid, t0, &crit0);
                }
            }
            t.start_at(t0, crit0);
            t
        });
        self.freed = [(t0, crit0); 2];
        self.spmd.start = (t0, crit0);
        self.sbuf_reserved = 0;
        self.psum_reserved_banks = 0;
        self.sbuf_counter.clear();
        self.stats.serial = SerialWork::default();
    }

    /// An HBM tensor made inside a program (buffer `tid`) starts behind the program's start,
    /// as the tensors made before it do.
    pub(super) fn spmd_new_buffer(&mut self, tid: u32) {
        let (t0, crit0) = self.spmd.start;
        if let (true, true, Some(t)) = (self.spmd.running, t0 > 0, &mut self.timing) {
            t.inherit(tid, t0, &crit0);
        }
    }

    /// Set the program's core aside into the launch's records (profile sums, trace, peaks
    /// and bound); returns when it ended.
    fn end_program(&mut self, pid: u32) -> (u64, Crit) {
        let core = self.take_core();
        self.spmd.peaks.0 = self.spmd.peaks.0.max(core.sbuf_reserved);
        self.spmd.peaks.1 = self.spmd.peaks.1.max(core.psum_reserved_banks);
        self.spmd.bound = self.spmd.bound.max(core.serial.bound_ps());
        let pid = pid as usize;
        if self.spmd.traces.len() <= pid {
            self.spmd.traces.resize_with(pid + 1, Default::default);
        }
        let trace = &mut self.spmd.traces[pid];
        trace.sbuf_counter.extend(core.sbuf_counter);
        let Some(mut t) = core.timing else {
            return (0, [0; CRIT_CATEGORIES.len()]);
        };
        if self.spmd.tracks.len() < t.tracks.len() {
            self.spmd.tracks.resize_with(t.tracks.len(), Default::default);
        }
        for (sum, track) in self.spmd.tracks.iter_mut().zip(&t.tracks) {
            sum.busy_ps += track.busy_ps;
            sum.busy_cycles += track.busy_cycles;
            sum.count += track.count;
        }
        self.spmd.sched.scheduled += t.window.counters.scheduled;
        self.spmd.sched.reordered += t.window.counters.reordered;
        if let Some(slices) = t.trace.take() {
            trace.slices.extend(slices);
        }
        if let Some(counter) = t.hbm_counter.take() {
            for (w, b) in counter {
                *trace.hbm_counter.entry(w).or_default() += b;
            }
        }
        (t.end, t.end_crit)
    }

    /// The caller's core continues from the launch's end: its engines busy until then, the
    /// HBM tensors (and any buffer it makes) behind it; the launch's peaks and lower bound
    /// taken in.
    fn continue_after(&mut self, (end, crit): (u64, Crit), hbm_before: usize) {
        if let Some(t) = &mut self.timing {
            for (i, h) in self.hbm.iter().enumerate() {
                if i >= hbm_before {
                    t.ensure_buffer(h.tid, h.row_elems * h.dtype.size() as u64);
                }
                if end > 0 {
                    t.inherit(h.tid, end, &crit);
                }
            }
            t.start_at(end, crit);
        }
        for f in &mut self.freed {
            if end > f.0 {
                *f = (end, crit);
            }
        }
        let (sbuf, psum) = std::mem::take(&mut self.spmd.peaks);
        self.sbuf_reserved = self.sbuf_reserved.max(sbuf);
        self.psum_reserved_banks = self.psum_reserved_banks.max(psum);
        let programs = std::mem::take(&mut self.spmd.bound);
        self.stats.serial = SerialWork::after(self.stats.serial.bound_ps() + programs);
    }

    /// Check a program's access to HBM tensor `tensor`'s elements `o..o + run` for each `o`
    /// of `starts` against the other programs' of the launch, and mark them.
    #[inline(never)]
    pub(super) fn spmd_touch(
        &mut self,
        tensor: u32,
        starts: &[i64],
        run: u64,
        write: bool,
    ) -> VResult<()> {
        let site = self.spmd.site();
        let program = self.spmd.program;
        let ti = tensor as usize;
        if self.spmd.marks.len() <= ti {
            self.spmd.marks.resize_with(ti + 1, || None);
        }
        let Spmd { marks, sites, .. } = &mut self.spmd;
        let m = marks[ti].get_or_insert_with(|| Marks::new(program));
        let Some((hazard, e, earlier)) = m.touch(program, site, starts, run, write) else {
            return Ok(());
        };
        let (earlier_program, earlier_instruction, earlier_loc) = sites[earlier as usize];
        let t = &self.hbm[ti];
        let row = t.row_elems.max(1);
        Err(V::SpmdConflict(Box::new(SpmdConflict {
            hazard,
            tensor: t.name.clone(),
            row: e / row,
            element: e % row,
            program,
            earlier_program,
            earlier_instruction,
            earlier_loc,
        })))
    }
}
