//! `dma_copy`: moves between HBM and SBUF (and SBUF↔SBUF, HBM↔HBM), split into one chunk
//! per DMA queue it uses, with its descriptor count, bytes and HBM traffic.

use super::affine::Kind;
use super::schedule::describe;
use super::{Access, Nc, VResult};
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::timing::{DmaChunk, Meta, Region, Slice, FULL_RATE};
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

impl Nc {
    /// `dma_copy`: copy between HBM and SBUF, SBUF and SBUF, or HBM and HBM, casting through
    /// fp32 when the dtypes differ (neuroncore.md §1.7, §2.3).
    #[track_caller]
    pub fn dma(&mut self, dst: impl Into<Access>, src: impl Into<Access>) -> SimResult<()> {
        let (dst, src) = (dst.into(), src.into());
        self.issue("dma_copy", |nc, loc| nc.exec_dma(dst, src, loc))
    }

    /// (partitions, free elements, dtype, contiguous run in elements, and for a tile its
    /// region — the check computes it anyway; an HBM region is only needed when timing).
    pub(super) fn access_shape(
        &self,
        operand: &'static str,
        a: &Access,
    ) -> VResult<(u64, u64, Dtype, u64, Option<Region>)> {
        match a {
            Access::Tile(v) => {
                if v.tile.mem == Mem::Psum {
                    return Err(V::MemoryNotAllowed {
                        operand,
                        memory: "PSUM",
                        rule: "DMA accesses HBM and SBUF only (HBM↔SBUF, SBUF↔SBUF, HBM↔HBM): \
                               evacuate PSUM to SBUF with tensor_copy on VectorE/ScalarE first \
                               (neuroncore.md §2.3 dma_copy)",
                    });
                }
                let (region, elems) = self.check_view_elems(operand, v, false)?;
                Ok((v.np as u64, elems, v.tile.dtype, v.free.contiguous_run(), Some(region)))
            }
            Access::Hbm(v) => {
                self.check_hbm(operand, v)?;
                let d = v.dims.as_slice();
                let parts = d.first().map_or(1, |x| x.1);
                let free = Dims::<MAX_HBM_DIMS> {
                    n: d.len().saturating_sub(1) as u8,
                    d: shift_dims(&v.dims),
                };
                Ok((parts, free.elems(), v.tensor.dtype, free.contiguous_run(), None))
            }
        }
    }

    /// Executes `dma_copy`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_dma(
        &mut self,
        dst: Access,
        src: Access,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let (dp, df, ddt, drun, mut dst_region) = self.access_shape("dst", &dst)?;
        let (sp, sf, sdt, srun, mut src_region) = self.access_shape("src", &src)?;
        if dp != sp || df != sf {
            return Err(V::ShapeMismatch(format!(
                "dma_copy dst is [{dp} x {df}] but src is [{sp} x {sf}] (partitions x free elements)"
            )));
        }
        if self.loops.active() {
            let (sr, dr) =
                (self.access_region(src_region, &src), self.access_region(dst_region, &dst));
            let touches =
                [self.dma_touch(&src, sr, Kind::Read), self.dma_touch(&dst, dr, Kind::Write)];
            // The timing model's regions below are these (an HBM side's is computed once).
            (src_region, dst_region) = (Some(sr), Some(dr));
            self.check_dma_touches("dma_copy", touches, loc)?;
        }
        // Program hash.
        self.h(&[5]);
        self.h_access(&dst);
        self.h_access(&src);
        if self.mode.functional {
            let mut vals = self.take_vals();
            self.gather_access("src", &src, &mut vals)?;
            self.scatter_access(&dst, &vals)?;
            self.give_vals([vals]);
        }
        let (rr, wr) = if self.timing.is_some() {
            ([self.access_region(src_region, &src)], [self.access_region(dst_region, &dst)])
        } else {
            Default::default()
        };
        let contiguous = |a: &Access| match a {
            Access::Hbm(v) => v.dims.contiguous_run() == v.dims.elems(),
            Access::Tile(_) => false,
        };
        let is_hbm = |a: &Access| matches!(a, Access::Hbm(_));
        let transfer = Transfer {
            partitions: dp,
            free: df,
            dst_dtype: ddt,
            src_dtype: sdt,
            run: drun.min(srun),
            p_base: match (&dst, &src) {
                (Access::Tile(v), _) | (_, Access::Tile(v)) => v.p0 as u64,
                _ => 0,
            },
            src_hbm: is_hbm(&src),
            dst_hbm: is_hbm(&dst),
            // HBM to HBM with both sides contiguous throughout: consecutive rows are one run,
            // so each engine's block of rows (up to 8, dma.md §1) is one run, not one per row.
            flat: is_hbm(&src) && is_hbm(&dst) && contiguous(&src) && contiguous(&dst),
            rate_permille: FULL_RATE,
        };
        let args = move |nc: &Nc| {
            format!("dst={} src={}", nc.describe_access(&dst), nc.describe_access(&src))
        };
        self.transfer("dma_copy", transfer, &rr, &wr, SourceLoc::from_location(loc), args)
    }

    /// The timing model's region of a DMA side: a tile's, which [`Nc::access_shape`]
    /// computed as it checked it (`checked`), or an HBM view's.
    pub(super) fn access_region(&self, checked: Option<Region>, a: &Access) -> Region {
        match (checked, a) {
            (Some(r), _) => r,
            (None, Access::Hbm(v)) => self.hbm_region(v),
            (None, Access::Tile(_)) => unreachable!("access_shape gives every tile its region"),
        }
    }

    /// The affine loop check of a DMA's accesses (those [`Nc::dma_touch`] gave), in the
    /// buffer the builder keeps for it.
    pub(super) fn check_dma_touches<const N: usize>(
        &mut self,
        instruction: &'static str,
        touches: [Option<super::affine::Touch>; N],
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let mut list = std::mem::take(&mut self.touches);
        list.clear();
        list.extend(touches.into_iter().flatten());
        let loc = SourceLoc::from_location(loc);
        let checked = self.check_loop_carried(instruction, &list, (&[], &[]), loc);
        self.touches = list;
        checked
    }

    /// An access as traces name it: a tile view, or `hbm:name[shape]@offset`.
    pub(super) fn describe_access(&self, a: &Access) -> String {
        match a {
            Access::Tile(v) => describe(v),
            Access::Hbm(v) => format!(
                "hbm:{}{:?}@{}",
                self.hbm[v.tensor.id as usize].name,
                v.dims.shape(),
                v.offset
            ),
        }
    }

    /// The part of a DMA that follows from its shape alone, shared by `dma_copy` and the
    /// indirect copies: counters, descriptors, the chunk per DMA engine, and the timing
    /// model's placement of them (held in an affine loop's window, or placed at once),
    /// reading `reads` and writing `writes`. `args` gives the trace's operand text.
    pub(super) fn transfer(
        &mut self,
        opcode: &'static str,
        t: Transfer,
        reads: &[Region],
        writes: &[Region],
        sloc: SourceLoc,
        args: impl FnOnce(&Nc) -> String,
    ) -> VResult<()> {
        let (dp, df) = (t.partitions, t.free);
        self.stats.instructions += 1;
        let elem = t.dst_dtype.size().max(t.src_dtype.size()) as u64;
        let bytes_pp = df * elem;
        let total = dp * bytes_pp;
        let hbm_sides = t.src_hbm as u32 + t.dst_hbm as u32;
        if t.src_hbm {
            self.stats.hbm_read_bytes += dp * df * t.src_dtype.size() as u64;
        }
        if t.dst_hbm {
            self.stats.hbm_write_bytes += dp * df * t.dst_dtype.size() as u64;
        }
        if hbm_sides == 0 {
            self.stats.sbuf_dma_bytes += total;
        }
        self.stats.dma_transfers += 1;
        self.stats.dma_bytes += total;
        self.stats.dma_partition_rows += dp;
        self.stats.dma_bytes_per_partition_sum += bytes_pp as f64;
        // Descriptors: one per contiguous run (the less contiguous side decides), split at
        // the largest descriptor size (neuroncore.md §1.7).
        let run = t.run.max(1).min(df.max(1));
        let run_bytes = run * elem;
        let per_run = run_bytes.div_ceil(self.chip.dma.max_descriptor_bytes).max(1);
        let desc_pp = df.div_ceil(run) * per_run;
        let flat = t.flat;
        // A flat HBM-to-HBM copy's runs are its engine blocks (below), not its rows.
        let block_rows = dp.min(self.chip.dma.partitions_per_engine as u64);
        let run_moved = if flat { block_rows * bytes_pp } else { run_bytes };
        if run_moved < SHORT_RUN_BYTES {
            self.stats.dma_short_run_bytes += total;
            self.stats.dma_short_run_weighted += (run_moved * total) as f64;
        }
        let max_desc = self.chip.dma.max_descriptor_bytes;
        let block_descriptors = |rows: u64| {
            if flat {
                (rows * bytes_pp).div_ceil(max_desc).max(1)
            } else {
                rows * desc_pp
            }
        };
        let queues = self.chip.dma.engines as u64;
        let ppe = self.chip.dma.partitions_per_engine as u64;
        self.stats.dma_descriptors += if flat {
            // (An HBM-to-HBM copy's rows start at engine 0.)
            engine_blocks(0, dp, ppe, queues).map(|(_, rows)| block_descriptors(rows)).sum()
        } else {
            desc_pp * dp
        };
        let p_base = t.p_base;
        // Which of each engine's 16 queues it goes on: one per direction (docs/dma.md §2:
        // the builder has no trigger engine, so loads, stores, SBUF copies and HBM copies
        // stand for the instruction streams that would trigger them).
        let engine_queue = match (t.src_hbm, t.dst_hbm) {
            (true, false) => 0,
            (false, true) => 1,
            (false, false) => 2,
            (true, true) => 3,
        };
        let mut chunks = std::mem::take(&mut self.dma_chunks);
        chunks.clear();
        // Each engine the rows touch ([`engine_blocks`]) gets one chunk of all its rows, the
        // chunks in the order of their first row: 12 rows from partition 0 are 8 rows on
        // engine 0 and 4 on engine 1.
        let pow2 = ppe.is_power_of_two() && queues.is_power_of_two();
        let ppe_shift = ppe.trailing_zeros();
        let groups = dp / ppe;
        if pow2 && dp > 0 && (p_base | dp) & (ppe - 1) == 0 && groups <= queues {
            // The common case, whole groups (a tile of 128, 64, 32 … partitions): one chunk
            // of `ppe` rows per engine from the first row's, as the general path gives.
            let first = p_base >> ppe_shift;
            for g in 0..groups {
                chunks.push(DmaChunk {
                    queue: 4 + ((first + g) & (queues - 1)) as usize,
                    engine_queue,
                    descriptors: block_descriptors(ppe),
                    bytes: ppe * bytes_pp,
                    rate_permille: t.rate_permille,
                });
            }
        } else {
            let mut rows_of = [0u64; 64];
            let mut descriptors_of = [0u64; 64];
            let mut order = [0u8; 64];
            let mut used = 0;
            for (e, rows) in engine_blocks(p_base, dp, ppe, queues) {
                if rows_of[e] == 0 {
                    order[used] = e as u8;
                    used += 1;
                }
                rows_of[e] += rows;
                descriptors_of[e] += block_descriptors(rows);
            }
            if used == 0 {
                // No rows: one empty chunk on the first row's engine (its fixed cost only).
                order[0] = ((p_base / ppe) % queues) as u8;
                used = 1;
            }
            for &e in &order[..used] {
                let rows = rows_of[e as usize];
                chunks.push(DmaChunk {
                    queue: 4 + e as usize,
                    engine_queue,
                    descriptors: descriptors_of[e as usize],
                    bytes: rows * bytes_pp,
                    rate_permille: t.rate_permille,
                });
            }
        }
        // The chunks are the lower bound's work (timing on or off, `timing::bound`).
        if self.count_serial {
            self.stats.serial.dma(&self.chip, &chunks);
        }
        if self.timing.is_none() {
            self.dma_chunks = chunks;
            return Ok(());
        }
        let args = move |nc: &Nc| format!("{} bytes_per_partition={bytes_pp}", args(nc));
        if self.timing.as_ref().is_some_and(|t| t.window_open()) {
            let line = self.stats.add_line(sloc, opcode, 0);
            let meta = Meta {
                line: line as u32,
                opcode,
                loc: sloc,
                args: if self.mode.trace { args(self) } else { String::new() },
                index: self.loops.index(),
            };
            let timing = self.timing.as_mut().expect("checked above");
            timing.hold_dma(
                &chunks,
                hbm_sides,
                reads.iter().copied(),
                writes.iter().copied(),
                meta,
            );
            self.take_line_busy();
            self.dma_chunks = chunks;
            return Ok(());
        }
        let mut out = std::mem::take(&mut self.dma_out);
        let timing = self.timing.as_mut().expect("checked above");
        timing.dma(&chunks, hbm_sides, reads, writes, &mut out);
        let busy = timing.dma_busy;
        self.stats.add_line(sloc, opcode, busy);
        if self.mode.trace {
            let args = args(self);
            let timing = self.timing.as_mut().expect("checked above");
            if let Some(tr) = &mut timing.trace {
                for (i, &(q, s, e)) in out.iter().enumerate() {
                    tr.push(Slice {
                        track: q as u16,
                        start: s,
                        dur: e - s,
                        name: opcode,
                        loc: sloc,
                        args: args.clone(),
                        bytes: chunks[i].bytes,
                    });
                }
            }
        }
        self.dma_out = out;
        self.dma_chunks = chunks;
        Ok(())
    }
}

/// Contiguous runs shorter than this pay mostly their per-descriptor cost (neuroncore.md
/// §1.7 [DMABW]: 2 KiB per partition is the recommended minimum); the verdict advises
/// longer runs when a quarter of the bytes move in such runs (`profile.rs`).
pub(crate) const SHORT_RUN_BYTES: u64 = 2048;

/// A DMA's shape, as [`Nc::transfer`] costs it: `partitions` rows of `free` elements on
/// either side (a copy's sides have the same shape), the contiguous `run` in elements of
/// the less contiguous side, the first partition of its tile side (which DMA engines it
/// uses), which sides are HBM, and whether an HBM-to-HBM copy is contiguous throughout.
#[derive(Clone, Copy, Debug)]
pub(super) struct Transfer {
    pub partitions: u64,
    pub free: u64,
    pub dst_dtype: Dtype,
    pub src_dtype: Dtype,
    pub run: u64,
    pub p_base: u64,
    pub src_hbm: bool,
    pub dst_hbm: bool,
    pub flat: bool,
    /// The engines' streaming rate for it, in thousandths ([`FULL_RATE`] but for a DMA
    /// transpose).
    pub rate_permille: u16,
}

pub(super) fn shift_dims(d: &Dims<MAX_HBM_DIMS>) -> [(i64, u64); MAX_HBM_DIMS] {
    let mut out = [(0, 1); MAX_HBM_DIMS];
    let n = d.len();
    if n > 1 {
        out[..n - 1].copy_from_slice(&d.as_slice()[1..]);
    }
    out
}

/// The blocks of consecutive rows `p_base .. p_base + dp` that one DMA engine moves, as
/// (engine, rows), in row order: engine `e` owns partitions `e·ppe … e·ppe + ppe − 1`, and
/// rows past the last engine's wrap around (dma.md §1). The one place that walks them, for
/// a transfer's chunks and for a flat HBM-to-HBM copy's descriptor count.
fn engine_blocks(
    p_base: u64,
    dp: u64,
    ppe: u64,
    engines: u64,
) -> impl Iterator<Item = (usize, u64)> {
    let end = p_base + dp;
    let mut p = p_base;
    std::iter::from_fn(move || {
        (p < end).then(|| {
            let group = p / ppe;
            let next = ((group + 1) * ppe).min(end);
            let block = ((group % engines) as usize, next - p);
            p = next;
            block
        })
    })
}
