//! Cross-partition data movement on VectorE: `nc_stream_shuffle`, and the partition
//! broadcast NKI builds from it. Every other compute instruction keeps lane *i* on partition
//! *i*; this one is how a value in one partition reaches others without TensorE or a DMA
//! (VectorE's reshape stage can shuffle the 32 partitions of a quadrant, neuroncore.md §1.5).

use super::{Nc, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::Engine;
use crate::view::*;
use std::panic::Location;

/// A `shuffle_mask` entry that leaves its destination partition unmodified.
pub const SHUFFLE_KEEP: u8 = 255;

impl Nc {
    /// `nc_stream_shuffle` on VectorE: within each quadrant of 32 partitions, destination
    /// partition `i` copies source partition `mask[i]` of the same quadrant (partitions counted
    /// from each view's start); [`SHUFFLE_KEEP`] (255) leaves partition `i` unmodified. The
    /// same mask applies to every quadrant. src and dst have one dtype and as many elements per
    /// partition; they may sit in SBUF or PSUM and may be the same tile. The start partitions
    /// follow the active partition count `ceil(max(src, dst partitions) / 32) * 32`: 0 for
    /// 96 or 128, 0 or 64 for 64, a multiple of 32 for 32. Cost `max(MIN_II, N)`, N the
    /// source's elements per partition (nki.isa.nc_stream_shuffle; neuroncore.md §2.3).
    #[track_caller]
    pub fn stream_shuffle(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        mask: [u8; 32],
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("nc_stream_shuffle", |nc, loc| nc.exec_stream_shuffle(d, s, mask, loc))
    }

    /// Broadcast the first partition of `src` to every partition of `dst`, as the NKI
    /// library's `stream_shuffle_broadcast` does: one [`Nc::stream_shuffle`] with an all-zero
    /// mask per quadrant of 32 destination partitions, each `max(MIN_II, N)` on VectorE.
    /// (A TensorE matmul by a row of ones is the other documented way, §2.4; write it with
    /// [`Nc::matmul`].) `dst` must start at a multiple of 32.
    #[track_caller]
    pub fn partition_broadcast(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        let s0 = s.parts(0..1.min(s.np));
        // `max(1)`: an empty dst still issues one shuffle, which reports it.
        for q0 in (0..d.np.max(1)).step_by(32) {
            self.stream_shuffle(d.parts(q0..(q0 + 32).min(d.np)), s0, [0; 32])?;
        }
        Ok(())
    }

    /// Executes `nc_stream_shuffle`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_stream_shuffle(
        &mut self,
        d: TileView,
        s: TileView,
        mask: [u8; 32],
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        if d.tile.dtype != s.tile.dtype {
            return Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand: "dst",
                dtype: d.tile.dtype,
                rule: "a stream shuffle keeps the dtype: dst must match src \
                       (nki.isa.nc_stream_shuffle)",
            });
        }
        let f = s.free.elems();
        if d.free.elems() != f {
            return Err(V::ShapeMismatch(format!(
                "nc_stream_shuffle moves whole partitions: src has {f} elements per partition, \
                 dst {}",
                d.free.elems()
            )));
        }
        let active = (s.np.max(d.np) as u64).div_ceil(32) * 32;
        for (operand, v) in [("src", &s), ("dst", &d)] {
            let p0 = v.p0 as u64;
            let ok = match active {
                96 | 128 => p0 == 0,
                64 => p0 == 0 || p0 == 64,
                _ => p0.is_multiple_of(32),
            };
            if !ok {
                return Err(V::BadStartPartition { operand, start: p0, partitions: active });
            }
        }
        // Which source partition (relative to src's start) each written destination
        // partition copies.
        let mut from = Vec::with_capacity(d.np as usize);
        for q in 0..active / 32 {
            for (i, &m) in mask.iter().enumerate() {
                let dp = q * 32 + i as u64;
                if dp >= d.np as u64 || m == SHUFFLE_KEEP {
                    continue;
                }
                if m >= 32 {
                    return Err(V::Invalid(format!(
                        "shuffle_mask[{i}] is {m}: a mask entry is a partition of the quadrant \
                         (0 to 31) or 255 to keep the destination partition"
                    )));
                }
                let sp = q * 32 + m as u64;
                if sp >= s.np as u64 {
                    return Err(V::ShapeMismatch(format!(
                        "shuffle_mask[{i}] = {m} makes dst partition {dp} copy src partition \
                         {sp}, but src has {} partitions",
                        s.np
                    )));
                }
                from.push((dp as u32, sp as usize));
            }
        }
        self.h_op(&[41], &[&d, &s]);
        for word in mask.chunks(8) {
            self.h64(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        }
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            let f = f as usize;
            for &(dp, sp) in &from {
                self.scatter_tile(&d.parts(dp..dp + 1), &x[sp * f..(sp + 1) * f]);
            }
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let cycles = cost::stream_shuffle(self.min_ii(Engine::Vector), n);
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule(
            "nc_stream_shuffle",
            Engine::Vector,
            cycles,
            &reads,
            &writes,
            SourceLoc::from_location(loc),
        )
    }
}
