//! The functional model's memory access: gathering a view's values (reporting reads of
//! elements nothing wrote) and scattering results into a view, rounded to its dtype.
//!
//! Both walk a view as contiguous runs ([`runs`]): the inner dims that are dense in memory
//! form one run, copied, checked and marked written as a range (a tile row of a matmul
//! operand is one run of 128 to 512 elements), so the per-element work is a copy and a
//! rounding that vectorize. The elements are visited in the same order as one at a time —
//! row-major over the view's dims, partition by partition — so the first unwritten element
//! a read reports, and the value a repeated element (a stride-0 dim) ends with, are the
//! ones the element-by-element walk gives; `tests` compares the two on random views.

use super::{Nc, Scalar, VResult};
use crate::error::ViolationKind as V;
use crate::view::*;

/// The element offsets of `dims` from `base` as runs of consecutive elements: `starts`
/// gets each run's first offset, in the order a row-major walk over the dims meets them,
/// and the run length is returned (0 when the view has no element). The run is the inner
/// dims merged while each one's stride is the size of the dims inside it (dims of one
/// element skipped), as [`Dims::contiguous_run`] counts it.
pub(super) fn runs<const N: usize>(dims: &Dims<N>, base: i64, starts: &mut Vec<i64>) -> u64 {
    let d = dims.as_slice();
    if d.iter().any(|&(_, n)| n == 0) {
        starts.clear();
        return 0;
    }
    let (mut run, mut outer) = (1u64, d.len());
    while outer > 0 {
        let (s, n) = d[outer - 1];
        if n != 1 && s != run as i64 {
            break;
        }
        run *= n;
        outer -= 1;
    }
    Dims::<N> { n: outer as u8, d: dims.d }.offsets(base, starts);
    run
}

/// Value buffers kept for reuse: more than an instruction takes at once.
const KEPT_VALS: usize = 8;

/// `t[j·p + i] = a[i·f + j]`: the `[f, p]` transpose of `a`'s `p` rows of `f` values, into
/// `t`. The source is walked eight rows at a time, so each output row is written in runs
/// and the eight source rows stay in cache.
pub(super) fn transpose_into(a: &[f32], p: usize, f: usize, t: &mut Vec<f32>) {
    t.clear();
    t.resize(a.len(), 0.0);
    for i0 in (0..p).step_by(8) {
        let i1 = (i0 + 8).min(p);
        for j in 0..f {
            for (k, y) in t[j * p + i0..j * p + i1].iter_mut().enumerate() {
                *y = a[(i0 + k) * f + j];
            }
        }
    }
}

impl Nc {
    /// An empty value buffer, with the capacity of one an earlier instruction gave back
    /// ([`Nc::give_vals`]): the operands' values of a functional instruction are gathered
    /// into these rather than into fresh allocations (megabytes per DMA or matmul).
    pub(super) fn take_vals(&mut self) -> Vec<f32> {
        self.vals.pop().unwrap_or_default()
    }

    /// Give value buffers back for the next instructions.
    pub(super) fn give_vals<const N: usize>(&mut self, bufs: [Vec<f32>; N]) {
        for mut b in bufs {
            if self.vals.len() < KEPT_VALS {
                b.clear();
                self.vals.push(b);
            }
        }
    }

    /// Read a tile view as `[np][free]` values (row-major), checking for unwritten elements.
    pub(super) fn gather_tile(
        &mut self,
        operand: &'static str,
        v: &TileView,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        out.clear();
        let mut starts = std::mem::take(&mut self.scratch);
        let run = runs(&v.free, v.offset, &mut starts);
        let b = &self.bufs[v.tile.buf as usize];
        out.reserve(v.np as usize * starts.len() * run as usize);
        for p in v.p0..v.p0 + v.np {
            let base = p as u64 * b.pstride;
            for &o in &starts {
                let i = base + o as u64;
                if let Some(j) = b.written.first_unwritten(i, i + run) {
                    let lt = &self.logicals[b.logical as usize];
                    self.scratch = starts;
                    return Err(V::UnwrittenRead {
                        operand,
                        what: format!("tile `{}`", lt.name),
                        partition: p as u64,
                        element: o as u64 + (j - i),
                    });
                }
                out.extend_from_slice(&b.data[i as usize..(i + run) as usize]);
            }
        }
        self.scratch = starts;
        Ok(())
    }

    /// Read either side of a DMA as `[rows][free]` values ([`Nc::gather_tile`],
    /// [`Nc::gather_hbm`]).
    pub(super) fn gather_access(
        &mut self,
        operand: &'static str,
        a: &super::Access,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        match a {
            super::Access::Tile(v) => self.gather_tile(operand, v, out),
            super::Access::Hbm(v) => self.gather_hbm(operand, v, out),
        }
    }

    /// Write either side of a DMA ([`Nc::scatter_tile`], [`Nc::scatter_hbm`]).
    pub(super) fn scatter_access(&mut self, a: &super::Access, vals: &[f32]) -> VResult<()> {
        match a {
            super::Access::Tile(v) => {
                self.scatter_tile(v, vals);
                Ok(())
            }
            super::Access::Hbm(v) => self.scatter_hbm(v, vals),
        }
    }

    /// Write `[np][free]` values into a tile view, rounding to its dtype.
    pub(super) fn scatter_tile(&mut self, v: &TileView, vals: &[f32]) {
        let mut starts = std::mem::take(&mut self.scratch);
        let run = runs(&v.free, v.offset, &mut starts);
        let dt = v.tile.dtype;
        let b = &mut self.bufs[v.tile.buf as usize];
        let mut k = 0;
        for p in v.p0..v.p0 + v.np {
            let base = p as u64 * b.pstride;
            for &o in &starts {
                let i = base + o as u64;
                let r = run as usize;
                dt.round_slice(&vals[k..k + r], &mut b.data[i as usize..i as usize + r]);
                b.written.set_range(i, i + run);
                k += r;
            }
        }
        self.scratch = starts;
    }

    /// Write the values of `[np][free]` `vals` whose `keep` flag is set into a tile view,
    /// rounding to its dtype, in [`Nc::scatter_tile`]'s order; the other elements keep their
    /// contents, and stay unwritten if they were (a predicated copy writes only where its
    /// predicate holds).
    pub(super) fn scatter_tile_where(&mut self, v: &TileView, vals: &[f32], keep: &[bool]) {
        let mut starts = std::mem::take(&mut self.scratch);
        let run = runs(&v.free, v.offset, &mut starts) as usize;
        let dt = v.tile.dtype;
        let b = &mut self.bufs[v.tile.buf as usize];
        let mut k = 0;
        for p in v.p0..v.p0 + v.np {
            let base = p as u64 * b.pstride;
            for &o in &starts {
                let i = (base + o as u64) as usize;
                for j in 0..run {
                    if keep[k + j] {
                        b.data[i + j] = dt.round(vals[k + j]);
                        b.written.set_range((i + j) as u64, (i + j) as u64 + 1);
                    }
                }
                k += run;
            }
        }
        self.scratch = starts;
    }

    pub(super) fn gather_hbm(
        &mut self,
        operand: &'static str,
        v: &HbmView,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        let mut starts = std::mem::take(&mut self.scratch2);
        let run = runs(&v.dims, v.offset, &mut starts);
        if self.spmd.checking() {
            if let Err(e) = self.spmd_touch(v.tensor.id, &starts, run, false) {
                self.scratch2 = starts;
                return Err(e);
            }
        }
        let t = &self.hbm[v.tensor.id as usize];
        out.clear();
        out.reserve(starts.len() * run as usize);
        for &o in &starts {
            let i = o as u64;
            if let Some(j) = t.written.first_unwritten(i, i + run) {
                let (name, row) = (t.name.clone(), t.row_elems.max(1));
                self.scratch2 = starts;
                return Err(V::UnwrittenRead {
                    operand,
                    what: format!("HBM tensor `{name}`"),
                    partition: j / row,
                    element: j % row,
                });
            }
            out.extend_from_slice(&t.data[i as usize..(i + run) as usize]);
        }
        self.scratch2 = starts;
        Ok(())
    }

    /// Write `[rows][free]` values into an HBM view, rounding to its dtype (refused only for
    /// a write another program of an spmd launch conflicts with, `nc/spmd.rs`).
    pub(super) fn scatter_hbm(&mut self, v: &HbmView, vals: &[f32]) -> VResult<()> {
        let mut starts = std::mem::take(&mut self.scratch2);
        let run = runs(&v.dims, v.offset, &mut starts);
        if self.spmd.checking() {
            if let Err(e) = self.spmd_touch(v.tensor.id, &starts, run, true) {
                self.scratch2 = starts;
                return Err(e);
            }
        }
        let t = &mut self.hbm[v.tensor.id as usize];
        let dt = t.dtype;
        let r = run as usize;
        for (k, &o) in starts.iter().enumerate() {
            let i = o as usize;
            dt.round_slice(&vals[k * r..(k + 1) * r], &mut t.data[i..i + r]);
            t.written.set_range(o as u64, o as u64 + run);
        }
        self.scratch2 = starts;
        Ok(())
    }

    pub(super) fn gather_scalar(
        &mut self,
        operand: &'static str,
        s: &Scalar,
        np: u32,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        match s {
            Scalar::Imm(x) => {
                out.clear();
                out.resize(np as usize, *x);
                Ok(())
            }
            Scalar::Col(v) => self.gather_tile(operand, v, out),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The run-wise gathers and scatters against the element-by-element walk they replaced
    //! (kept here as the specification), on random views of random partly written buffers.

    use super::*;
    use crate::nc::memory::Written;
    use crate::{Chip, Dtype, ExecMode};
    use proptest::prelude::*;

    /// The element-by-element gather: every offset of the view in row-major order.
    fn gather_each(nc: &Nc, operand: &'static str, v: &TileView) -> VResult<Vec<f32>> {
        let mut offs = Vec::new();
        v.free.offsets(v.offset, &mut offs);
        let b = &nc.bufs[v.tile.buf as usize];
        let mut out = Vec::new();
        for p in v.p0..v.p0 + v.np {
            for &o in &offs {
                let i = p as u64 * b.pstride + o as u64;
                if !b.written.get(i) {
                    return Err(V::UnwrittenRead {
                        operand,
                        what: format!("tile `{}`", nc.logicals[b.logical as usize].name),
                        partition: p as u64,
                        element: o as u64,
                    });
                }
                out.push(b.data[i as usize]);
            }
        }
        Ok(out)
    }

    /// The element-by-element scatter.
    fn scatter_each(nc: &mut Nc, v: &TileView, vals: &[f32]) {
        let mut offs = Vec::new();
        v.free.offsets(v.offset, &mut offs);
        let b = &mut nc.bufs[v.tile.buf as usize];
        let mut k = 0;
        for p in v.p0..v.p0 + v.np {
            for &o in &offs {
                let i = p as u64 * b.pstride + o as u64;
                b.data[i as usize] = v.tile.dtype.round(vals[k]);
                b.written.set(i);
                k += 1;
            }
        }
    }

    /// A functional core with one `[8, 96]` tile of `dtype`, whose elements are written
    /// where `pattern`'s bits say (bit `i % 64` of word `i / 64 % len`) with distinct values.
    fn core(dtype: Dtype, pattern: &[u64]) -> (Nc, TileView) {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
        let pool = nc.sbuf_pool("p", 1);
        let t = nc.tile(pool, dtype, &[8, 96]).expect("a tile");
        let b = &mut nc.bufs[t.view().tile.buf as usize];
        for i in 0..b.data.len() as u64 {
            if pattern[(i / 64) as usize % pattern.len()] >> (i % 64) & 1 == 1 {
                b.data[i as usize] = dtype.round(i as f32 * 0.37 - 50.0);
                b.written.set(i);
            }
        }
        (nc, t.view())
    }

    /// A view of the `[8, 96]` tile: partitions `p0..p0 + np`, and up to four free dims
    /// (stride, size), the base offset chosen so every element is inside the row.
    fn view(whole: TileView, parts: (u32, u32), dims: &[(i64, u64)]) -> Option<TileView> {
        let (p0, np) = (parts.0 % 8, parts.1 % 8 + 1);
        let np = np.min(8 - p0);
        let free = Dims::<MAX_FREE_DIMS> {
            n: dims.len() as u8,
            d: std::array::from_fn(|i| dims.get(i).copied().unwrap_or((0, 1))),
        };
        let (lo, hi) = free.span().unwrap_or((0, 0));
        (hi - lo < 96).then_some(TileView { p0, np, offset: -lo, free, ..whole })
    }

    fn dims() -> impl Strategy<Value = Vec<(i64, u64)>> {
        // Strides near the sizes, so dense, padded, overlapping (stride 0) and reversed
        // dims all occur, and the sizes include one-element and empty dims.
        prop::collection::vec((prop_oneof![Just(1i64), -3i64..=24], 0u64..=6), 0..=4)
    }

    fn dtypes() -> impl Strategy<Value = Dtype> {
        prop::sample::select(vec![Dtype::F32, Dtype::Bf16, Dtype::F16, Dtype::Fp8E4m3])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A gather reads the same values, or reports the same first unwritten element.
        #[test]
        fn gather_is_the_element_walk(
            dtype in dtypes(),
            all_written in any::<bool>(),
            pattern in prop::collection::vec(
                prop_oneof![Just(u64::MAX), Just(0u64), any::<u64>()], 1..6),
            parts in any::<(u32, u32)>(),
            dims in dims(),
        ) {
            let pattern = if all_written { vec![u64::MAX] } else { pattern };
            let (mut nc, whole) = core(dtype, &pattern);
            let Some(v) = view(whole, parts, &dims) else { return Ok(()) };
            let expected = gather_each(&nc, "src", &v);
            let mut got = vec![1.0; 3];
            let result = nc.gather_tile("src", &v, &mut got).map(|()| got);
            prop_assert_eq!(
                result.map(|g| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                expected.map(|g| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            );
        }

        /// A scatter leaves the same values (rounded to the dtype) and the same elements
        /// written, repeated elements ending with the last value written to them.
        #[test]
        fn scatter_is_the_element_walk(
            dtype in dtypes(),
            pattern in prop::collection::vec(any::<u64>(), 1..4),
            parts in any::<(u32, u32)>(),
            dims in dims(),
            seed in any::<u32>(),
        ) {
            let (mut nc, whole) = core(dtype, &pattern);
            let Some(v) = view(whole, parts, &dims) else { return Ok(()) };
            let n = v.np as usize * v.free.elems() as usize;
            let vals: Vec<f32> =
                (0..n).map(|i| f32::from_bits((i as u32 ^ seed).wrapping_mul(0x9E37_79B9))).collect();
            let buf = v.tile.buf as usize;
            let (data, written) = (nc.bufs[buf].data.clone(), nc.bufs[buf].written.clone());
            scatter_each(&mut nc, &v, &vals);
            let expected = std::mem::take(&mut nc.bufs[buf].data);
            let expected_written = std::mem::take(&mut nc.bufs[buf].written);
            (nc.bufs[buf].data, nc.bufs[buf].written) = (data, written);
            nc.scatter_tile(&v, &vals);
            let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&nc.bufs[buf].data), bits(&expected));
            let len = expected.len() as u64;
            let marks = |w: &Written| (0..len).map(|i| w.get(i)).collect::<Vec<_>>();
            prop_assert_eq!(marks(&nc.bufs[buf].written), marks(&expected_written));
        }

        /// `first_unwritten` and `set_range` are the per-element test and mark over a range.
        #[test]
        fn written_ranges_are_per_element(
            len in 0u64..300,
            marks in prop::collection::vec((0u64..300, 0u64..80), 0..6),
            probes in prop::collection::vec((0u64..300, 0u64..130), 1..8),
        ) {
            let (mut ranges, mut each) = (Written::new(len, false), Written::new(len, false));
            for (lo, n) in marks {
                let (lo, hi) = (lo.min(len), (lo + n).min(len));
                ranges.set_range(lo, hi);
                for i in lo..hi {
                    each.set(i);
                }
                for &(lo, n) in &probes {
                    let (lo, hi) = (lo.min(len), (lo + n).min(len));
                    let expected = (lo..hi).find(|&i| !each.get(i));
                    prop_assert_eq!(ranges.first_unwritten(lo, hi), expected);
                }
            }
            // The count decides when every element is written: a whole-range probe sees it.
            prop_assert_eq!(ranges.first_unwritten(0, len), (0..len).find(|&i| !each.get(i)));
        }
    }

    #[test]
    fn transpose_into_is_the_element_loop() {
        for (p, f) in [(1, 1), (3, 5), (8, 8), (9, 17), (128, 128), (128, 32), (20, 1)] {
            let a: Vec<f32> = (0..p * f).map(|i| i as f32 * 0.5 - 7.0).collect();
            let mut expected = vec![0f32; p * f];
            for i in 0..p {
                for j in 0..f {
                    expected[j * p + i] = a[i * f + j];
                }
            }
            let mut t = vec![1.0; 3];
            transpose_into(&a, p, f, &mut t);
            assert_eq!(t, expected, "{p} x {f}");
        }
    }

    #[test]
    fn runs_merge_dense_inner_dims() {
        let mut starts = Vec::new();
        // [4, 3, 8] dense: one run of 96.
        let d = Dims::<MAX_FREE_DIMS>::contiguous(&[4, 3, 8]);
        assert_eq!(runs(&d, 5, &mut starts), 96);
        assert_eq!(starts, [5]);
        // Columns 2..6 of rows of 10: runs of 4 at each row.
        let d = Dims::<MAX_FREE_DIMS> { n: 2, d: [(10, 3), (1, 4), (0, 1), (0, 1)] };
        assert_eq!(runs(&d, 2, &mut starts), 4);
        assert_eq!(starts, [2, 12, 22]);
        // A transposed walk: runs of one.
        let d = Dims::<MAX_FREE_DIMS> { n: 2, d: [(1, 2), (4, 3), (0, 1), (0, 1)] };
        assert_eq!(runs(&d, 0, &mut starts), 1);
        assert_eq!(starts, [0, 4, 8, 1, 5, 9]);
        // An empty dim: nothing.
        let d = Dims::<MAX_FREE_DIMS> { n: 2, d: [(8, 0), (1, 8), (0, 1), (0, 1)] };
        assert_eq!(runs(&d, 0, &mut starts), 0);
        assert!(starts.is_empty());
    }
}
