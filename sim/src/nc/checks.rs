//! The hardware's rules for operands (neuroncore.md §1.8, §2.1–2.4), checked when an
//! instruction uses a view: liveness of the tile, partitions, start partition, bounds, free
//! size, shapes, memories per engine. A check of a view also gives its region (partitions ×
//! bytes of its buffer), which the timing model tracks dependencies by; an HBM access's
//! region is computed here too.

use super::{Nc, VResult};
use crate::error::{Extent, ViolationKind as V};
use crate::isa::{Alu, Engine};
use crate::timing::Region;
use crate::view::*;

impl Nc {
    /// The rule a float operand of a bitwise operator breaks, naming the operator.
    pub(super) fn bitwise_rule(op: Alu) -> &'static str {
        match op {
            Alu::BitwiseAnd => "bitwise_and takes integer operands (neuroncore.md §2.2)",
            Alu::BitwiseOr => "bitwise_or takes integer operands (neuroncore.md §2.2)",
            Alu::BitwiseXor => "bitwise_xor takes integer operands (neuroncore.md §2.2)",
            Alu::LeftShift => "left_shift takes integer operands (neuroncore.md §2.2)",
            Alu::RightShift => "right_shift takes integer operands (neuroncore.md §2.2)",
            _ => "invert takes integer operands (neuroncore.md §2.2)",
        }
    }

    /// A bitwise operator among `ops` (and, or, xor, the shifts, invert) takes integer operands:
    /// the first of `inputs` with a float dtype is refused, by name (neuroncore.md §2.2).
    pub(super) fn check_bitwise_inputs(
        eng: Engine,
        ops: &[Alu],
        inputs: &[(&'static str, &TileView)],
    ) -> VResult<()> {
        let Some(op) = ops.iter().find(|op| op.is_bitwise()) else { return Ok(()) };
        match inputs.iter().find(|(_, v)| v.tile.dtype.is_float()) {
            Some((name, v)) => Err(V::DtypeNotAllowed {
                engine: eng.doc_name(),
                operand: name,
                dtype: v.tile.dtype,
                rule: Self::bitwise_rule(*op),
            }),
            None => Ok(()),
        }
    }

    /// The scalar of a bitwise operator is an integer, as its data is: an immediate is a
    /// whole number, a `[P,1]` column has an integer dtype (neuroncore.md §2.2). Other
    /// operators' scalars pass.
    pub(super) fn check_bitwise_scalar(
        eng: Engine,
        name: &'static str,
        op: Alu,
        scalar: &super::Scalar,
    ) -> VResult<()> {
        if !op.is_bitwise() {
            return Ok(());
        }
        match scalar {
            super::Scalar::Imm(x) if x.fract() != 0.0 || !x.is_finite() => {
                Err(V::Invalid(format!(
                    "{name} is {x}, but {}: the immediate must be a whole number",
                    Self::bitwise_rule(op)
                )))
            }
            super::Scalar::Col(c) if c.tile.dtype.is_float() => Err(V::DtypeNotAllowed {
                engine: eng.doc_name(),
                operand: name,
                dtype: c.tile.dtype,
                rule: Self::bitwise_rule(op),
            }),
            _ => Ok(()),
        }
    }

    /// Check a view used by a compute engine (all rules, including §1.8 start partitions).
    #[inline(always)]
    pub(super) fn check_tile(&self, operand: &'static str, v: &TileView) -> VResult<Region> {
        self.check_view(operand, v, true)
    }

    /// Check a view; DMA descriptors address any partition, so `engine_access = false`
    /// skips the start-partition rule, which is about engine access patterns (§1.8).
    /// Returns the view's region for the timing model (its span is needed here anyway).
    #[inline(always)]
    fn check_view(
        &self,
        operand: &'static str,
        v: &TileView,
        engine_access: bool,
    ) -> VResult<Region> {
        self.check_view_elems(operand, v, engine_access).map(|(region, _)| region)
    }

    /// [`Nc::check_view`], also giving the view's free elements (computed with its span).
    #[inline(always)]
    pub(super) fn check_view_elems(
        &self,
        operand: &'static str,
        v: &TileView,
        engine_access: bool,
    ) -> VResult<(Region, u64)> {
        if !v.fault.is_none() {
            return Err(self.tile_fault(operand, v));
        }
        let b = &self.bufs[v.tile.buf as usize];
        if b.gen != v.tile.gen {
            let lt = &self.logicals[b.logical as usize];
            let p = &self.pools[lt.pool as usize];
            return Err(V::StaleTile {
                tile: lt.name.clone(),
                pool: p.name.clone(),
                bufs: p.bufs,
                released: p.released,
            });
        }
        let max = self.chip.memory.partitions as u64;
        if v.np as u64 > max {
            return Err(V::PartitionOverflow { operand, partitions: v.np as u64, max });
        }
        // `span` is None when a dim is empty.
        let (Some((lo, hi, elems)), true) = (v.free.span_elems(), v.np > 0) else {
            return Err(V::BadAccessPattern(format!("{operand} is empty")));
        };
        if v.p0 + v.np > v.tile.parts {
            return Err(V::BadAccessPattern(format!(
                "{operand} uses partitions {}..{} of a tile with {} partitions",
                v.p0,
                v.p0 + v.np,
                v.tile.parts
            )));
        }
        let (p0, np) = (v.p0 as u64, v.np as u64);
        let ok = !engine_access
            || if np > 64 {
                p0 == 0
            } else if np > 32 {
                p0 == 0 || p0 == 64
            } else {
                p0 % 32 == 0
            };
        if !ok {
            return Err(V::BadStartPartition { operand, start: p0, partitions: np });
        }
        if v.offset + lo < 0 || (v.offset + hi) as u64 >= v.tile.elems {
            return Err(V::BadAccessPattern(format!(
                "{operand} reaches free elements {}..={} of a tile with {} free elements",
                v.offset + lo,
                v.offset + hi,
                v.tile.elems
            )));
        }
        let size = v.tile.dtype.size() as u64;
        let region = Region {
            id: b.tid,
            p0: v.p0,
            p1: v.p0 + v.np,
            b0: (v.offset + lo) as u64 * size,
            b1: (v.offset + hi + 1) as u64 * size,
        };
        Ok((region, elems))
    }

    /// The error of a tile view a helper marked (see [`Fault`]), naming the tile.
    #[cold]
    fn tile_fault(&self, operand: &'static str, v: &TileView) -> V {
        let b = &self.bufs[v.tile.buf as usize];
        let tile = self.logicals[b.logical as usize].name.clone();
        match v.fault.get() {
            Fault::OutOfBounds { dim, index, start, end, size, .. } => V::TileOutOfBounds {
                operand,
                tile,
                dim: (dim != PARTS).then_some(dim),
                extent: extent(index, start, end),
                size,
            },
            f => V::BadView { operand, of: format!("(tile `{tile}`)"), problem: f.problem(false) },
        }
    }

    pub(super) fn check_hbm(&self, operand: &'static str, v: &HbmView) -> VResult<()> {
        let t = &self.hbm[v.tensor.id as usize];
        match v.fault.get() {
            Fault::None => {}
            Fault::OutOfBounds { dim, index, own, start, end, size } => {
                return Err(V::HbmOutOfBounds {
                    operand,
                    tensor: t.name.clone(),
                    dim,
                    extent: extent(index, start, end),
                    size,
                    tensor_rank: own.then_some(v.tensor.shape.n),
                });
            }
            f => {
                let (of, problem) = (t.name.clone(), f.problem(true));
                return Err(V::BadView { operand, of, problem });
            }
        }
        let elems: u64 = t.shape.iter().product();
        let Some((lo, hi)) = v.dims.span() else {
            return Err(V::BadAccessPattern(format!("{operand} (HBM `{}`) is empty", t.name)));
        };
        // Each helper keeps its range in the view it restricts, so a view reaches past the
        // tensor only if its handle is another `Nc`'s: say which elements, as no dim is to
        // blame.
        if v.offset + lo < 0 || (v.offset + hi) as u64 >= elems {
            return Err(V::BadAccessPattern(format!(
                "{operand} reaches elements {}..={} of HBM tensor `{}`, which has {elems} \
                 (shape {:?})",
                v.offset + lo,
                v.offset + hi,
                t.name,
                t.shape
            )));
        }
        Ok(())
    }

    pub(super) fn check_free_size(&self, operand: &'static str, v: &TileView) -> VResult<()> {
        let (max, memory) = match v.tile.mem {
            Mem::Sbuf => (self.chip.memory.max_free_elems_sbuf, "SBUF"),
            Mem::Psum => (self.chip.memory.max_free_elems_psum, "PSUM"),
        };
        let elems = v.free.elems();
        if elems > max {
            return Err(V::FreeSizeTooLarge { operand, elems, memory, max });
        }
        Ok(())
    }

    pub(super) fn same_shape(
        &self,
        a_name: &str,
        a: &TileView,
        b_name: &str,
        b: &TileView,
    ) -> VResult<()> {
        if a.np != b.np || a.free.elems() != b.free.elems() {
            return Err(V::ShapeMismatch(format!(
                "{a_name} is [{} x {:?}] but {b_name} is [{} x {:?}] (partitions x free)",
                a.np,
                a.free.shape(),
                b.np,
                b.free.shape()
            )));
        }
        Ok(())
    }

    /// Check a `[np, 1]` column operand (a per-partition scalar, bias or reduce result):
    /// the tile rules, then its shape. Returns its region.
    pub(super) fn check_column(
        &self,
        operand: &'static str,
        c: &TileView,
        np: u32,
    ) -> VResult<Region> {
        let region = self.check_tile(operand, c)?;
        if c.np != np || c.free.elems() != 1 {
            return Err(V::ShapeMismatch(format!(
                "{operand} must be [{np} x 1], is [{} x {}]",
                c.np,
                c.free.elems()
            )));
        }
        Ok(region)
    }

    /// Two inputs of one instruction may not both be in PSUM (neuroncore.md §2.3).
    pub(super) fn not_both_psum(
        b_name: &'static str,
        a: &TileView,
        b: &TileView,
        rule: &'static str,
    ) -> VResult<()> {
        if a.tile.mem == Mem::Psum && b.tile.mem == Mem::Psum {
            return Err(V::MemoryNotAllowed { operand: b_name, memory: "PSUM", rule });
        }
        Ok(())
    }

    /// Rows × byte-columns bounding box of an HBM access (exact for blocks of a row-major
    /// tensor; the whole row width when the pattern wraps rows).
    pub(super) fn hbm_region(&self, v: &HbmView) -> Region {
        let t = &self.hbm[v.tensor.id as usize];
        let row = t.row_elems.max(1) as i64;
        // Integer divisions cost tens of cycles; rows are mostly a power of two long, and
        // then shifts and masks give the same numbers (floor division and its remainder).
        let pow2 = (row as u64).is_power_of_two();
        let shift = row.trailing_zeros();
        let div = |x: i64| if pow2 { x >> shift } else { x.div_euclid(row) };
        let rem = |x: i64| if pow2 { x & (row - 1) } else { x.rem_euclid(row) };
        let size = t.dtype.size() as u64;
        let o = v.offset;
        let (mut r_lo, mut r_hi) = (div(o), div(o));
        let c0 = rem(o);
        let (mut c_lo, mut c_hi) = (c0, c0);
        for &(s, n) in v.dims.as_slice() {
            if n <= 1 {
                continue;
            }
            let ext = s * (n as i64 - 1);
            if rem(s) == 0 {
                // Exact: `ext` is a multiple of `row` here.
                let re = div(ext);
                if re < 0 {
                    r_lo += re
                } else {
                    r_hi += re
                }
            } else if ext < 0 {
                c_lo += ext
            } else {
                c_hi += ext
            }
        }
        if c_lo < 0 || c_hi >= row {
            let (lo, hi) = v.dims.span().unwrap_or((0, 0));
            r_lo = div(o + lo);
            r_hi = div(o + hi);
            c_lo = 0;
            c_hi = row - 1;
        }
        Region {
            id: t.tid,
            p0: r_lo as u32,
            p1: r_hi as u32 + 1,
            b0: c_lo as u64 * size,
            b1: (c_hi + 1) as u64 * size,
        }
    }

    pub(super) fn check_engine_mem(
        eng: Engine,
        operand: &'static str,
        v: &TileView,
    ) -> VResult<()> {
        if eng == Engine::GpSimd && v.tile.mem == Mem::Psum {
            return Err(V::MemoryNotAllowed {
                operand,
                memory: "PSUM",
                rule: "GpSimd cannot access PSUM (neuroncore.md §1.5)",
            });
        }
        Ok(())
    }
}

/// A fault's range or index as the error states it.
fn extent(index: bool, start: u64, end: u64) -> Extent {
    if index {
        Extent::Index(start)
    } else {
        Extent::Range { start, end }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Chip, Dtype, ExecMode};

    /// The region of an HBM block (rows x columns of a row-major tensor, transposed or not) is
    /// exactly the bounding box of the elements it touches, for rows of a power-of-two length
    /// (shifts and masks) and of another length (divisions) alike.
    #[test]
    fn hbm_region_of_a_block_is_its_bounding_box() {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        for cols in [64u64, 48] {
            let t = nc.hbm(&format!("t{cols}"), Dtype::Bf16, &[16, cols]).unwrap();
            for _ in 0..200 {
                let (r0, c0) = (next(16), next(cols));
                let (r1, c1) = (r0 + 1 + next(16 - r0), c0 + 1 + next(cols - c0));
                let mut v = t.slice(&[r0..r1, c0..c1]);
                if next(2) == 0 {
                    v = v.t();
                }
                let mut offsets = Vec::new();
                v.dims.offsets(v.offset, &mut offsets);
                let row = |o: &i64| o.div_euclid(cols as i64) as u32;
                let col = |o: &i64| o.rem_euclid(cols as i64) as u64;
                let expected = Region {
                    id: nc.hbm[t.id as usize].tid,
                    p0: offsets.iter().map(row).min().unwrap(),
                    p1: offsets.iter().map(row).max().unwrap() + 1,
                    b0: offsets.iter().map(col).min().unwrap() * 2,
                    b1: (offsets.iter().map(col).max().unwrap() + 1) * 2,
                };
                assert_eq!(nc.hbm_region(&v), expected, "{v:?}");
            }
        }
    }
}
