//! The kernel builder: the NKI-like API a kernel is written against, and its execution.
//!
//! A kernel is an ordinary Rust function that takes `&mut Nc` and its HBM tensors and issues
//! instructions. Each call is checked against the hardware's rules (neuroncore.md §1.8,
//! §2.1–2.4), then executed at once by the models the run asked for: the functional model
//! computes values, the timing model schedules the instruction (see [`crate::timing`]).
//! Nothing is buffered, so a program of any length runs in constant memory (unless a trace is
//! requested) — except inside an [`Nc::affine_range`] loop, where the timing model holds the
//! instructions of a bounded window of iterations for its list scheduler. Every method that issues an instruction is `#[track_caller]`: errors and
//! profiles name the kernel's own source line.
//!
//! The builder is split by concern, each file one `impl Nc` block (or the types it needs):
//!
//! * [`affine`] — `affine_range` loops: their structure, the check that their iterations
//!   are independent, and handing their instructions to the timing model's list scheduler;
//! * [`operands`] — the operand types instructions take besides tiles (scalars, activation
//!   options, affine expressions, DMA sides);
//! * [`memory`] — HBM tensors, SBUF/PSUM pools and their tile rings, capacity;
//! * [`checks`] — the hardware's rules for operands, and the regions the timing model uses;
//! * [`hash`] — the program hash;
//! * [`values`] — the functional model's reads and writes of tiles and tensors;
//! * [`schedule`] — the timing front end: engine constants, cost inputs, per-line counters;
//! * one file per engine family of instructions: [`dma`], [`indirect`] (gather and scatter
//!   DMAs), [`tensor`] (TensorE),
//!   [`scalar`] (ScalarE), [`vector`] (VectorE, some also on ScalarE or GpSimd), [`select`]
//!   (VectorE's selections: top-k steps, predicated and bounded copies), [`shuffle`]
//!   (VectorE's cross-partition movement), [`gpsimd`], [`local_gather`] (GpSimd's gather
//!   within groups of 16 partitions);
//! * [`spmd`] — launches over the physical cores of a logical core (`nl.program_id`).

mod affine;
mod checks;
mod dma;
mod dma_transpose;
mod gpsimd;
mod hash;
mod indirect;
mod local_gather;
mod memory;
mod operands;
mod scalar;
mod schedule;
mod select;
mod shuffle;
mod spmd;
mod spmd_marks;
mod tensor;
mod values;
mod vector;

use crate::error::{SimError, SimResult, SourceLoc, ViolationKind as V};
use crate::isa::Engine;
use crate::timing::{DmaChunk, Timing};
use crate::Chip;
use hash::{chip_toml, ProgramHasher};
use memory::{Buf, HbmTensor, Logical, PoolState, TileKey};
pub use operands::{Access, Act2Args, ActArgs, Affine, CopySrc, Scalar};
use rustc_hash::FxHashMap;
pub(crate) use schedule::Stats;
pub use select::{INDEX_NOT_FOUND_U16, INDEX_NOT_FOUND_U32};
pub use shuffle::SHUFFLE_KEEP;
pub(crate) use spmd::CoreTrace;
use std::panic::Location;

/// Which models run. Values and times are independent: the functional model never looks at
/// time and the timing model never looks at values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecMode {
    /// Compute every value (for correctness checks).
    pub functional: bool,
    /// Compute time (for benchmarks and profiles).
    pub timing: bool,
    /// Record a Perfetto trace (needs `timing`; memory grows with the instruction count).
    pub trace: bool,
}

impl ExecMode {
    /// Values only, no time: what a correctness check runs (`check`).
    pub const FUNCTIONAL: ExecMode = ExecMode { functional: true, timing: false, trace: false };
    /// Time only, no values: what a benchmark runs (`bench`, `tune`), so inputs need no data.
    pub const TIMING: ExecMode = ExecMode { functional: false, timing: true, trace: false };
    /// Values and time in one run (tests that check both).
    pub const BOTH: ExecMode = ExecMode { functional: true, timing: true, trace: false };
    /// Time and a Perfetto trace of every instruction (`profile --trace`, `report`).
    pub const TRACE: ExecMode = ExecMode { functional: false, timing: true, trace: true };
}

/// The NeuronCore being programmed: builder, functional model and timing model in one.
pub struct Nc {
    pub(crate) chip: Chip,
    pub(crate) mode: ExecMode,
    /// Whether each engine's, port's and DMA queue's work is summed for
    /// [`Nc::lower_bound`]: in a run without the timing model (a trace, where the bound is
    /// the estimate `tune` prunes with), or on request ([`Nc::count_lower_bound_work`]). A
    /// timed run knows its time and skips the sums (+15 % CPU on a DMA-heavy GEMM).
    pub(crate) count_serial: bool,
    hbm: Vec<HbmTensor>,
    bufs: Vec<Buf>,
    pools: Vec<PoolState>,
    logicals: Vec<Logical>,
    tile_index: FxHashMap<(u32, TileKey), u32>,
    next_tid: u32,
    pub(crate) timing: Option<Timing>,
    pub(crate) stats: Stats,
    /// Peak SBUF bytes per partition and PSUM banks reserved (since the last `release_pools`).
    pub(crate) sbuf_reserved: u64,
    pub(crate) psum_reserved_banks: u64,
    /// Per memory (SBUF, PSUM): when the last access to a buffer of a pool released by
    /// [`Nc::release_pool`] ends, and its critical path. Buffers made after a release start
    /// behind it (their memory may be the released one).
    freed: [(u64, crate::timing::Crit); 2],
    /// Streaming hash of the program's encoding.
    hash: ProgramHasher,
    scratch: Vec<i64>,
    scratch2: Vec<i64>,
    /// Value buffers the functional model's instructions reuse (see [`Nc::take_vals`]).
    vals: Vec<Vec<f32>>,
    dma_out: Vec<(usize, u64, u64)>,
    /// The current DMA's chunks (kept to reuse the allocation).
    dma_chunks: Vec<DmaChunk>,
    pub(crate) sbuf_counter: Vec<(u64, u64)>,
    /// The affine loops open, and the accesses their iterations made.
    pub(crate) loops: affine::Loops,
    /// The current instruction's accesses, for the loop-carried check (kept to reuse it).
    touches: Vec<affine::Touch>,
    /// SPMD launches: the running program, the programs' records, the conflict check.
    pub(crate) spmd: spmd::Spmd,
}

type VResult<T> = Result<T, V>;

impl Nc {
    /// A fresh NeuronCore of `chip`, running the models of `mode`.
    ///
    /// Panics if `chip` fails [`Chip::validate`] (chips read with [`Chip::from_toml`] are
    /// validated there, with an error to show).
    pub fn new(chip: Chip, mode: ExecMode) -> Nc {
        if let Err(e) = chip.validate() {
            panic!("Nc::new: invalid chip `{}`: {e}", chip.name);
        }
        let mode = ExecMode { trace: mode.trace && mode.timing, ..mode };
        let timing = mode.timing.then(|| Timing::new(&chip, chip.dma.engines as usize, mode.trace));
        let mut hash = ProgramHasher::new();
        hash.state.update(b"neuron-sim program v2\0");
        chip_toml(&chip, |toml| hash.state.update(toml.as_bytes()));
        Nc {
            count_serial: !mode.timing,
            chip,
            mode,
            hbm: Vec::new(),
            bufs: Vec::new(),
            pools: Vec::new(),
            logicals: Vec::new(),
            tile_index: FxHashMap::default(),
            next_tid: 0,
            timing,
            stats: Stats::default(),
            sbuf_reserved: 0,
            psum_reserved_banks: 0,
            freed: [(0, [0; crate::timing::CRIT_CATEGORIES.len()]); 2],
            hash,
            scratch: Vec::new(),
            scratch2: Vec::new(),
            vals: Vec::new(),
            dma_out: Vec::new(),
            dma_chunks: Vec::new(),
            sbuf_counter: Vec::new(),
            loops: affine::Loops::default(),
            touches: Vec::new(),
            spmd: spmd::Spmd::default(),
        }
    }

    /// The chip the kernel is built for: its memories, engines and limits (where NKI reads
    /// `nl.tile_size.pmax` or `gemm_moving_fmax`, a kernel reads `chip().memory.partitions`
    /// or `chip().tensor.moving_fmax`).
    pub fn chip(&self) -> &Chip {
        &self.chip
    }

    /// Which models this run computes ([`ExecMode`]).
    pub fn mode(&self) -> ExecMode {
        self.mode
    }

    /// The one path from an instruction's public method to its execution: `exec` checks,
    /// hashes, computes and schedules the instruction for the kernel's source line, and a
    /// violation it reports becomes a [`SimError`] naming `instruction` and that line. Every
    /// public method of an instruction is a call of this (through [`On`] when the engine is
    /// a choice), so the source line and error wrapping are written once.
    #[track_caller]
    #[inline(always)]
    fn issue(
        &mut self,
        instruction: &'static str,
        exec: impl FnOnce(&mut Nc, &'static Location<'static>) -> VResult<()>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        if self.spmd.launched() {
            self.spmd.current = Some((instruction, loc));
        }
        exec(self, loc).map_err(|kind| SimError {
            instruction,
            loc: SourceLoc::from_location(loc),
            kind,
        })
    }

    /// Issue the next instruction on a chosen engine, where the hardware allows a choice:
    /// `nc.on(Engine::Scalar).tensor_copy(dst, src)?`.
    pub fn on(&mut self, engine: Engine) -> On<'_> {
        On { nc: self, engine }
    }
}

/// An engine choice for one instruction (see [`Nc::on`]). Its methods are the instructions
/// that run on more than one engine; each is defined beside its engine family's others, and
/// the [`Nc`] method of the same name is the call on its default engine.
pub struct On<'a> {
    nc: &'a mut Nc,
    engine: Engine,
}
