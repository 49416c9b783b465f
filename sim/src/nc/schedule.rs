//! The timing front end: what an instruction costs on its engine (clocks, latencies,
//! initiation intervals, stride and performance-mode factors), handing it to the timing
//! model, the per-line counters the profile is built from, and the trace's slices.

use super::{Nc, VResult};
use crate::cost;
use crate::error::SourceLoc;
use crate::isa::Engine;
use crate::timing::{cycles_to_ps, ComputeOp, Meta, Region, Slice, Work};
use crate::view::*;
use rustc_hash::FxHashMap;

/// Counters the profile is built from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub instructions: u64,
    pub matmuls: u64,
    pub matmul_flops: f64,
    pub hardware_flops: f64,
    pub transpose_flops: f64,
    pub hbm_read_bytes: u64,
    pub hbm_write_bytes: u64,
    pub sbuf_dma_bytes: u64,
    pub dma_transfers: u64,
    pub dma_bytes: u64,
    pub dma_descriptors: u64,
    pub dma_partition_rows: u64,
    pub dma_bytes_per_partition_sum: f64,
    /// Bytes moved in contiguous runs shorter than 2 KiB, and the sum of run size × bytes
    /// over them (the verdict's measure of short transfers, `profile.rs`).
    pub dma_short_run_bytes: u64,
    pub dma_short_run_weighted: f64,
    /// Work per engine, port and DMA queue, for the lower bound (timing on or off).
    pub serial: crate::timing::SerialWork,
    /// Per source line: time and instruction count, in first-seen order.
    pub lines: Vec<LineStat>,
    line_index: FxHashMap<(usize, u32, u32), usize>,
    last_line: Option<((usize, u32, u32), usize)>,
}

impl Stats {
    /// Attribute `busy_ps` to the source line `loc`. Consecutive instructions usually come
    /// from the same line (a loop body), so the last line's slot is remembered.
    /// Returns the line's slot (an instruction whose busy time is known only later adds it
    /// there).
    #[inline(always)]
    pub(super) fn add_line(&mut self, loc: SourceLoc, opcode: &'static str, busy_ps: u64) -> usize {
        let key = (loc.file.as_ptr() as usize, loc.line, loc.column);
        let idx = match self.last_line {
            Some((k, i)) if k == key => i,
            _ => self.line_slot(key, loc, opcode),
        };
        let line = &mut self.lines[idx];
        line.busy_ps += busy_ps;
        line.count += 1;
        idx
    }

    /// The slot of a line other than the last one seen (found or added).
    #[inline(never)]
    fn line_slot(&mut self, key: (usize, u32, u32), loc: SourceLoc, opcode: &'static str) -> usize {
        let next = self.lines.len();
        let i = *self.line_index.entry(key).or_insert(next);
        if i == next {
            self.lines.push(LineStat { loc, busy_ps: 0, count: 0, opcode });
        }
        self.last_line = Some((key, i));
        i
    }
}

#[derive(Clone, Debug)]
pub(crate) struct LineStat {
    pub loc: SourceLoc,
    pub busy_ps: u64,
    pub count: u64,
    pub opcode: &'static str,
}

impl Nc {
    fn engine_clock(&self, e: Engine) -> f64 {
        match e {
            Engine::Tensor => self.chip.clocks.tensor_ghz,
            Engine::Vector => self.chip.clocks.vector_ghz,
            Engine::Scalar => self.chip.clocks.scalar_ghz,
            Engine::GpSimd => self.chip.clocks.gpsimd_ghz,
        }
    }

    fn engine_latency(&self, e: Engine) -> u64 {
        match e {
            Engine::Tensor => self.chip.tensor.latency_cycles,
            Engine::Vector => self.chip.vector.latency_cycles,
            Engine::Scalar => self.chip.scalar.latency_cycles,
            Engine::GpSimd => self.chip.gpsimd.latency_cycles,
        }
    }

    pub(super) fn min_ii(&self, e: Engine) -> u64 {
        match e {
            Engine::Tensor => self.chip.tensor.mm_min_cycles,
            Engine::Vector => self.chip.vector.min_ii_cycles,
            Engine::Scalar => self.chip.scalar.min_ii_cycles,
            Engine::GpSimd => self.chip.gpsimd.min_ii_cycles,
        }
    }

    /// Fixed cycles an instruction of `e` pays besides its cost formula (the §1.8 access
    /// start, `Chip` `fixed_cycles`; VectorE and ScalarE, whose busy times calibrate it).
    pub(super) fn fixed_cycles(&self, e: Engine) -> u64 {
        match e {
            Engine::Vector => self.chip.vector.fixed_cycles,
            Engine::Scalar => self.chip.scalar.fixed_cycles,
            Engine::Tensor | Engine::GpSimd => 0,
        }
    }

    /// Schedule a compute instruction on the timing model and account for it: `cycles` is
    /// its cost formula, to which the engine's fixed cycles are added here. Inside an
    /// affine loop it is first checked against the loop's earlier iterations, then held for
    /// the list scheduler instead of placed at once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn schedule(
        &mut self,
        opcode: &'static str,
        engine: Engine,
        cycles: u64,
        reads: &[(&TileView, Region)],
        writes: &[(&TileView, Region)],
        loc: SourceLoc,
    ) -> VResult<()> {
        if self.loops.active() {
            let mut touches = std::mem::take(&mut self.touches);
            self.compute_touches(opcode, reads, writes, &mut touches);
            let checked = self.check_loop_carried(opcode, &touches, (reads, writes), loc);
            self.touches = touches;
            checked?;
        }
        self.stats.instructions += 1;
        let cycles = cycles + self.fixed_cycles(engine);
        let (mut sbuf, mut psum) = (false, false);
        // Two loops, not `chain`: this runs for every compute instruction.
        for (v, _) in reads {
            sbuf |= v.tile.mem == Mem::Sbuf;
            psum |= v.tile.mem == Mem::Psum;
        }
        for (v, _) in writes {
            sbuf |= v.tile.mem == Mem::Sbuf;
            psum |= v.tile.mem == Mem::Psum;
        }
        // NeuronCore-v2 port sharing (neuroncore.md §1.8); lifted on v3+ (§1.8, [A2]).
        let mut ports = 0u8;
        if self.chip.neuroncore_version == 2 {
            if sbuf && matches!(engine, Engine::Vector | Engine::GpSimd) {
                ports |= 1;
            }
            if psum && matches!(engine, Engine::Vector | Engine::Scalar) {
                ports |= 2;
            }
        }
        let ghz = self.engine_clock(engine);
        if self.count_serial {
            self.stats.serial.compute(engine.index(), cycles, ghz, ports);
        }
        if self.timing.is_none() {
            return Ok(());
        }
        let latency_cycles = self.engine_latency(engine);
        let args = || {
            let args = reads
                .iter()
                .map(|(v, _)| format!("src={}", describe(v)))
                .chain(writes.iter().map(|(v, _)| format!("dst={}", describe(v))))
                .collect::<Vec<_>>()
                .join(" ");
            format!("{args} cycles={cycles}")
        };
        let timing = self.timing.as_mut().expect("checked above");
        if timing.window_open() {
            let line = self.stats.add_line(loc, opcode, cycles_to_ps(cycles, ghz));
            let meta = Meta {
                line: line as u32,
                opcode,
                loc,
                args: if self.mode.trace { args() } else { String::new() },
                index: self.loops.index(),
            };
            let work = Work::Compute { track: engine.index(), cycles, ghz, latency_cycles, ports };
            let (r, w) = (reads.iter().map(|x| x.1), writes.iter().map(|x| x.1));
            self.timing.as_mut().expect("checked above").hold_compute(work, r, w, meta);
            self.take_line_busy();
            return Ok(());
        }
        let op =
            ComputeOp { track: engine.index(), cycles, ghz, latency_cycles, reads, writes, ports };
        let (start, end) = timing.compute(&op);
        self.stats.add_line(loc, opcode, end - start);
        if self.mode.trace {
            let args = args();
            if let Some(tr) = &mut self.timing.as_mut().unwrap().trace {
                tr.push(Slice {
                    track: engine.index() as u16,
                    start,
                    dur: end - start,
                    name: opcode,
                    loc,
                    args,
                    bytes: 0,
                });
            }
        }
        Ok(())
    }

    /// Free elements per partition of the main input, with the strided-access penalty of
    /// neuroncore.md §1.8 when any operand's inner stride exceeds 16 bytes.
    pub(super) fn n_with_stride(views: &[&TileView]) -> u64 {
        let n = views[0].free.elems();
        let strided = views
            .iter()
            .any(|v| (v.free.inner_stride().unsigned_abs()) * v.tile.dtype.size() as u64 > 16);
        if strided {
            cost::strided_n(n)
        } else {
            n
        }
    }

    pub(super) fn is_contig(v: &TileView) -> bool {
        v.free.contiguous_run() == v.free.elems()
    }

    /// Performance-mode speed-up for copies and tensor_scalar (neuroncore.md §1.5): VectorE
    /// on v3+ 4x when both sides are 16-bit, SBUF and contiguous in their innermost dim, 2x
    /// when one side is PSUM or strided there; ScalarE on v4 2x for 16-bit.
    pub(super) fn copy_speedup(&self, eng: Engine, s: &TileView, d: &TileView) -> u64 {
        let sixteen = s.tile.dtype.is_16bit_float() && d.tile.dtype.is_16bit_float();
        if !sixteen {
            return 1;
        }
        match eng {
            Engine::Vector if self.chip.vector.perf_mode_16bit > 1 => {
                // "the innermost dimension is contiguous" (§1.5): a view of every other
                // column's block, say, still streams each row at full rate.
                if s.tile.mem == Mem::Sbuf
                    && d.tile.mem == Mem::Sbuf
                    && s.free.inner_stride() == 1
                    && d.free.inner_stride() == 1
                {
                    self.chip.vector.perf_mode_16bit
                } else {
                    2
                }
            }
            Engine::Scalar => self.chip.scalar.perf_mode_16bit,
            _ => 1,
        }
    }
}

pub(super) fn describe(v: &TileView) -> String {
    format!(
        "{}:b{}[{}:{}]{:?}+{} {}",
        v.tile.mem.name().to_lowercase(),
        v.tile.buf,
        v.p0,
        v.p0 + v.np,
        v.free.shape(),
        v.offset,
        v.tile.dtype
    )
}
