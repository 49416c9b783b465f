//! The timing model: per-engine in-order streams, region dependencies, shared HBM.
//!
//! Instructions arrive in program order and are scheduled at once (list scheduling), so the
//! model streams: its memory depends on the number of live buffers and a bounded window of
//! HBM time, never on the instruction count.
//!
//! * Each track (Tensor, Vector, Scalar, GpSimd, 16 DMA queues) runs its instructions in
//!   program order: an instruction starts when its track is free and its dependencies are
//!   done (ARCHITECTURE.md, `sim/`). Inside an `affine_range` loop, instructions are held in
//!   a bounded window and placed by a list scheduler instead ([`window`],
//!   docs/scheduling.md); placing one is the same code as placing at issue.
//! * Dependencies are tracked per **region** (partition range × byte range of a buffer):
//!   a read waits for overlapping earlier writes (RAW); a write waits for overlapping earlier
//!   reads (WAR) and writes (WAW). A result is visible `latency` cycles after the producing
//!   instruction ends (pipeline depth + semaphore); the engine itself is free for the next
//!   independent instruction as soon as its initiation interval has passed.
//! * DMA transfers split across engines by partition, pay a fixed latency and a cost per
//!   descriptor, stream at the engine rate, and share the core's HBM bandwidth through a
//!   timeline of fixed-width buckets ([`HbmTimeline`]); an engine serves its queues
//!   round-robin, so a transfer on one queue shares an engine busy with others' (docs/dma.md).
//! * On NeuronCore-v2, VectorE and GpSimdE share the SBUF ports and VectorE and ScalarE share
//!   PSUM (neuroncore.md §1.8): such instructions are serialized through a port resource,
//!   granted in program order.
//! * Every scheduled time carries its **critical path**: the time along the longest chain of
//!   constraints that led to it, split by category, so the profile can say where the time
//!   went without keeping the program.
//!
//! The model is split by what it keeps:
//!
//! * [`deps`] — access records per buffer region, and the dependency wait they give;
//! * [`dma`] — the DMA engines' busy intervals and the placement of a transfer's chunks,
//!   whole or shared round-robin;
//! * [`hbm`] — the shared HBM bandwidth timeline;
//! * [`window`] — the list scheduler of affine loops;
//! * [`bound`] — the work of each resource the model never overlaps with itself, summed at
//!   issue: a lower bound of the kernel time that needs no timing;
//! * this module — the clock conversions, the critical-path categories, the compute
//!   engines' in-order streams and the shared ports, and [`Timing`], which owns it all.

use crate::error::SourceLoc;

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

mod bound;
mod deps;
mod dma;
mod hbm;
mod window;

pub(crate) use bound::SerialWork;
use deps::Binned;
pub(crate) use deps::Region;
use dma::DmaEngine;
pub(crate) use dma::{DmaChunk, FULL_RATE};
use hbm::HbmTimeline;
pub(crate) use window::{Meta, SchedCounters, Window, Work};
pub use window::{WINDOW_INSTRUCTIONS, WINDOW_ITERATIONS};

/// Categories of critical-path time.
/// Waiting is charged to what was waited for: a DMA engine busy with other transfers
/// (`dma_queue_wait`), the core's shared HBM bandwidth (`hbm_bandwidth`), or a NeuronCore-v2
/// shared SBUF/PSUM port (`port_contention`).
pub const CRIT_CATEGORIES: [&str; 10] = [
    "tensor",
    "vector",
    "scalar",
    "gpsimd",
    "dma_transfer",
    "dma_fixed",
    "dependency_latency",
    "dma_queue_wait",
    "hbm_bandwidth",
    "port_contention",
];
pub(crate) const CAT_DMA: usize = 4;
pub(crate) const CAT_DMA_FIXED: usize = 5;
pub(crate) const CAT_LATENCY: usize = 6;
pub(crate) const CAT_QUEUE: usize = 7;
pub(crate) const CAT_HBM: usize = 8;
pub(crate) const CAT_PORT: usize = 9;

/// Time along a critical path, nanoseconds per category (u32 keeps access records small;
/// 4.29 s per category is far beyond any kernel).
pub(crate) type Crit = [u32; 10];

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
    /// The engine time the last [`Timing::dma`] took, summed over its chunks (less than
    /// their spans when a chunk shared its engine with other queues).
    pub dma_busy: u64,
    pub trace: Option<Vec<Slice>>,
    /// Bytes moved per microsecond window (for the trace's HBM counter).
    pub hbm_counter: Option<std::collections::BTreeMap<u64, u64>>,
    /// Instructions of affine loops held for the list scheduler ([`window`]).
    pub window: Window,
    /// Record merges so far (a merged record may bind accesses its parts did not): the list
    /// scheduler reuses a dependency lookup only while none happened since ([`window`]).
    merges: u64,
    /// Tests set this to take the general path where there is a fast one (uniform DMAs,
    /// repeated writes), to compare the two; it does not exist outside tests.
    #[cfg(test)]
    general_only: bool,
    /// Repeated writes updated in place (the fast path of `record`), for the tests that
    /// must see the fast path taken.
    #[cfg(test)]
    in_place_writes: u64,
}

impl Timing {
    pub fn new(chip: &crate::Chip, dma_queues: usize, trace: bool) -> Self {
        Timing {
            tracks: vec![Track::default(); 4 + dma_queues],
            recs: Vec::new(),
            dma_engines: vec![DmaEngine::default(); dma_queues],
            next_stamp: 0,
            hbm: HbmTimeline::new(chip.memory.hbm_gbps_per_core),
            ports: [(0, [0u32; 10]); 2],
            end: 0,
            end_crit: [0; 10],
            dma_fixed_ps: ns_to_ps(chip.dma.fixed_ns),
            dma_desc_ps: chip.dma.descriptor_ns * 1000.0,
            dma_rate: chip.dma.engine_gbps / 1000.0,
            dma_busy: 0,
            trace: trace.then(Vec::new),
            hbm_counter: trace.then(Default::default),
            window: Window::default(),
            merges: 0,
            #[cfg(test)]
            general_only: false,
            #[cfg(test)]
            in_place_writes: 0,
        }
    }

    /// For the tests that compare a fast path with the general one: two timings alike but
    /// for the second being held to the general path, each with buffers `0..buffers` of
    /// `bytes` bytes.
    #[cfg(test)]
    pub(crate) fn fast_and_general(
        chip: &crate::Chip,
        trace: bool,
        buffers: u32,
        bytes: u64,
    ) -> (Timing, Timing) {
        let (mut fast, mut general) = (Timing::new(chip, 16, trace), Timing::new(chip, 16, trace));
        general.general_only = true;
        for t in [&mut fast, &mut general] {
            for id in 0..buffers {
                t.ensure_buffer(id, bytes);
            }
        }
        (fast, general)
    }

    fn bump_end(&mut self, end: u64, crit: Crit) {
        if end > self.end {
            self.end = end;
            self.end_crit = crit;
        }
    }

    /// Schedule a compute instruction; returns (start, end) in picoseconds.
    pub fn compute<R: Operand>(&mut self, op: &ComputeOp<'_, R>) -> (u64, u64) {
        self.compute_after(op, None, cycles_to_ps(op.cycles, op.ghz))
    }

    /// [`Timing::compute`], given what [`Timing::deps`] returns for the instruction's
    /// accesses from an `after` no later than its engine's free time, when the caller knows
    /// it is still current (the list scheduler, [`window`]); `None` looks it up. `dur` is
    /// its engine time, `cycles_to_ps(op.cycles, op.ghz)` (which the list scheduler has).
    /// Inlined into both callers, as it was into the one it had (docs/scheduling.md §3).
    #[inline(always)]
    pub(crate) fn compute_after<R: Operand>(
        &mut self,
        op: &ComputeOp<'_, R>,
        known: Option<(u64, Crit)>,
        dur: u64,
    ) -> (u64, u64) {
        debug_assert_eq!(dur, cycles_to_ps(op.cycles, op.ghz));
        let track = &self.tracks[op.track];
        let (mut start, mut crit) = (track.free, track.crit);
        // From any `after` ≤ `start`, the binding record is the first one found with the
        // latest time, the one a lookup from `start` finds when that time is later than
        // `start`; when it is not, neither lookup changes `start`.
        let (dep_t, dep_crit) = match known {
            Some(k) => k,
            None => self.deps(op.reads, op.writes, start),
        };
        if dep_t > start {
            start = dep_t;
            crit = dep_crit;
        }
        // Most instructions use no shared port (TensorE never does).
        let ports = op.ports != 0;
        if ports {
            for (bit, port) in self.ports.iter().enumerate() {
                if op.ports & (1 << bit) != 0 && port.0 > start {
                    add_crit(&mut crit, CAT_PORT, port.0 - start);
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
    /// Nothing of this timing runs before `t` (reached along `crit`): the compute engines are
    /// busy until then and the kernel has lasted that long. With the buffers' records
    /// (`inherit`), this is how a core starts an `Nc::spmd` program, and continues after
    /// one, at a time other than 0 (`nc/spmd.rs`). A `t` of 0 changes nothing.
    pub(crate) fn start_at(&mut self, t: u64, crit: Crit) {
        for track in &mut self.tracks[..4] {
            if t > track.free {
                track.free = t;
                track.crit = crit;
            }
        }
        self.bump_end(t, crit);
    }

    /// The latest time any track is busy until (the program's frontier).
    pub fn frontier(&self) -> u64 {
        self.tracks.iter().map(|t| t.free).max().unwrap_or(0)
    }
}
