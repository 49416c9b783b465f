//! `neuron-sim`: a cycle-approximate model of one AWS NeuronCore.
//!
//! Kernel authors program it with an NKI-like builder ([`Nc`]): HBM tensors, SBUF/PSUM pools
//! of multi-buffered tiles, and the `nki.isa` instructions on their engines. Each instruction
//! is checked against the hardware's rules and executed at once by the models a run asks for:
//!
//! * the **functional** model computes every value (fp32 arithmetic, rounding to the
//!   destination dtype, NaN-filled fresh memory, a fast CPU GEMM for `matmul`);
//! * the **timing** model schedules it on its engine's in-order stream with region-granular
//!   dependencies, the documented cost formulas and a DMA/HBM model, in constant memory;
//!   inside an [`Nc::affine_range`] loop, whose iterations are declared independent, it
//!   list-schedules a bounded window of iterations instead (docs/scheduling.md).
//!
//! On chips whose logical core is two physical ones (trn2, trn3 at LNC=2), [`Nc::spmd`] runs a
//! kernel body once per program, each on its own simulated physical core sharing the HBM
//! tensors (NKI `kernel[2](…)` with `nl.program_id(0)`).
//!
//! A run ends with a [`Profile`] (times, utilizations, roofline, critical path, top source
//! lines, a bottleneck verdict) and, on request, a Perfetto trace.
//!
//! This crate is a library with no knowledge of cargo, files, processes or tuning: program
//! in, results out. It is deterministic: the same program, chip and inputs give bit-identical
//! values and cycles. Every number it uses comes from `docs/neuroncore.md` through [`Chip`].
//!
//! ```
//! use neuron_sim::{Chip, Dtype, ExecMode, Nc, Alu};
//! let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
//! let x = nc.hbm_input("x", Dtype::F32, &[128, 4], &[1.0; 512])?;
//! let y = nc.hbm("y", Dtype::F32, &[128, 4])?;
//! let pool = nc.sbuf_pool("io", 2);
//! let t = nc.tile(pool, Dtype::F32, &[128, 4])?;
//! nc.dma(t, x)?;
//! nc.tensor_tensor(t, t, t, Alu::Add)?;
//! nc.dma(y, t)?;
//! assert_eq!(nc.read_hbm(y).unwrap()[0], 2.0);
//! let profile = nc.profile();
//! assert!(profile.kernel_time_us > 0.0);
//! # Ok::<(), neuron_sim::SimError>(())
//! ```

mod chip;
pub mod cost;
mod dtype;
mod error;
mod isa;
mod nc;
mod profile;
mod timing;
mod trace;
mod view;

/// A fixed-seed xorshift generator for the unit tests' random streams: `next(n)` is a
/// number in `0..n`; the same seed gives the same stream on every run.
#[cfg(test)]
pub(crate) fn test_rng(mut state: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    }
}

pub use chip::{Chip, ChipError, Clocks, ComputeEngine, Dma, GpSimdEngine, Memory, TensorEngine};
pub use dtype::Dtype;
pub use error::{
    Extent, Hazard, LoopCarried, PoolUse, SimError, SimResult, SourceLoc, SpmdConflict, TileUse,
    ViolationKind,
};
pub use isa::{Act, Alu, Cmp, Engine};
pub use nc::{
    Access, Act2Args, ActArgs, Affine, CopySrc, ExecMode, Nc, On, Scalar, INDEX_NOT_FOUND_U16,
    INDEX_NOT_FOUND_U32, SHUFFLE_KEEP,
};
pub use profile::{EngineProfile, LineProfile, LowerBound, Profile, Scheduling, Verdict};
pub use timing::{CRIT_CATEGORIES, WINDOW_INSTRUCTIONS, WINDOW_ITERATIONS};
pub use view::{Hbm, HbmView, Mem, Pool, Tile, TileView, MAX_FREE_DIMS, MAX_HBM_DIMS};

/// Version of the simulator's model; part of every cached result's key, so a change to the
/// model invalidates what an older one measured. Bump it with every change to simulated
/// times (model2: a DMA issued behind others places its chunks as one group; model3: an fp32
/// TensorE transpose costs an fp32 matmul; model4: DMA engines at their practical peak,
/// VectorE/ScalarE fixed cycles, TensorE transposes priced and counted as matmuls; model5: a
/// DMA engine serves its queues round-robin, docs/dma.md; model6: a transfer's rows go to the
/// engines owning their partitions, 8 each, and chunks of unequal size are not pooled; the
/// bf16 performance mode needs only the innermost dimension contiguous; a contiguous
/// HBM-to-HBM copy takes a descriptor per engine block, not per row; model7, no time
/// changed: the verdict judges short DMA runs by the share of bytes they move and names DMA
/// start latency on a DMA-bound critical path, and stored profiles hold the verdict).
pub const SIM_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+model7");
