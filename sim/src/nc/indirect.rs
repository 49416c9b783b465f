//! Indirect DMA: `dma_copy` whose HBM side is addressed row by row through a tile of
//! indices, the gather and scatter that NKI writes as `nisa.dma_copy` with dynamic indices
//! from SBUF (software descriptor generation, `dge_mode.swdge`; docs/neuroncore.md §1.7,
//! §2.3). It is how an embedding lookup reads its table, a paged KV cache its blocks and a
//! mixture-of-experts layer its tokens: `out[p, :] = table[index[p], :]`.
//!
//! What is modelled, and what is not:
//! * **Values**: each partition's row is read (gather) or written (scatter) as the index
//!   says. An index outside the indexed dim is an error naming the partition, the value and
//!   the bound: NKI's default `oob_mode.error`. A scatter with repeated indices writes in
//!   partition order, so the last partition wins (NKI warns that repeated offsets are a
//!   data hazard the compiler serializes).
//! * **Cost**: the same as a direct copy of the same rows: one descriptor per contiguous run
//!   of a row, the rows split over the DMA engines by partition (docs/dma.md). The index
//!   tile is a read like the copy's own source, so the transfer starts after whatever writes
//!   it. Generating the descriptors on GpSimd has no published cost and is not charged.
//! * **Dependencies**: the indexed side's rows are known only from values, which a run
//!   without the functional model does not have; its region is the whole indexed view, so
//!   the timing model keeps it in order with every access to that view, and the affine
//!   loop check neither checks nor records it (docs/scheduling.md §4).

use super::affine::{Kind, UNKNOWN};
use super::dma::{shift_dims, Transfer};
use super::{Access, Nc, VResult};
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::view::*;
use std::panic::Location;

/// Which side of an indirect copy the index addresses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Indexed {
    /// `dst[p, :] = src[index[p], :]`.
    Src,
    /// `dst[index[p], :] = src[p, :]`.
    Dst,
}

impl Nc {
    /// Indirect load (a gather): `dst[p, …] = src[index[p], …]` for every partition `p` of
    /// `dst`. `src` is an HBM view whose dim 0 is indexed (each index picks one of its rows,
    /// the row being the view's other dims); `dst` is an SBUF tile view, or an HBM view whose
    /// dim 0 has one row per index; `index` is an SBUF `[P, 1]` view holding the row
    /// numbers of `src` (any integer dtype). NKI: `nisa.dma_copy` with dynamic indices
    /// (swdge).
    ///
    /// ```
    /// use neuron_sim::{Chip, Dtype, ExecMode, Nc, Affine};
    /// let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    /// let table: Vec<f32> = (0..40).map(|x| x as f32).collect(); // 10 rows of 4
    /// let table = nc.hbm_input("table", Dtype::F32, &[10, 4], &table)?;
    /// let pool = nc.sbuf_pool("sb", 1);
    /// let idx = nc.tile(pool, Dtype::I32, &[2, 1])?;
    /// nc.iota(idx, Affine::new2(7, -4, 0))?; // rows 7 and 3
    /// let rows = nc.tile(pool, Dtype::F32, &[2, 4])?;
    /// nc.dma_gather(rows, table.view(), idx)?;
    /// let out = nc.hbm("out", Dtype::F32, &[2, 4])?;
    /// nc.dma(out, rows)?;
    /// assert_eq!(nc.read_hbm(out).unwrap(), &[28., 29., 30., 31., 12., 13., 14., 15.]);
    /// # Ok::<(), neuron_sim::SimError>(())
    /// ```
    #[track_caller]
    pub fn dma_gather(
        &mut self,
        dst: impl Into<Access>,
        src: impl Into<HbmView>,
        index: impl Into<TileView>,
    ) -> SimResult<()> {
        let (dst, src, index) = (dst.into(), src.into(), index.into());
        self.issue("dma_copy", |nc, loc| {
            nc.exec_indirect(Indexed::Src, dst, Access::Hbm(src), index, loc)
        })
    }

    /// Indirect store (a scatter): `dst[index[p], …] = src[p, …]` for every partition `p` of
    /// `src`. `dst` is an HBM view whose dim 0 is indexed; `src` an SBUF tile view or an HBM
    /// view with one row per index; `index` as for [`Nc::dma_gather`]. Repeated indices
    /// write in partition order (the last one wins).
    #[track_caller]
    pub fn dma_scatter(
        &mut self,
        dst: impl Into<HbmView>,
        src: impl Into<Access>,
        index: impl Into<TileView>,
    ) -> SimResult<()> {
        let (dst, src, index) = (dst.into(), src.into(), index.into());
        self.issue("dma_copy", |nc, loc| {
            nc.exec_indirect(Indexed::Dst, Access::Hbm(dst), src, index, loc)
        })
    }

    /// Executes an indirect `dma_copy`: checks, hash, values, then the transfer's cost as a
    /// direct copy of the same rows ([`Nc::transfer`]).
    fn exec_indirect(
        &mut self,
        indexed: Indexed,
        dst: Access,
        src: Access,
        index: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let (table, table_operand, direct, direct_operand) = match (indexed, &dst, &src) {
            (Indexed::Src, d, Access::Hbm(s)) => (*s, "src", *d, "dst"),
            (Indexed::Dst, Access::Hbm(d), s) => (*d, "dst", *s, "src"),
            _ => unreachable!("the public methods give the indexed side as HBM"),
        };
        // The index: an SBUF [P, 1] column of integers.
        let ri = self.check_tile("index", &index)?;
        if index.tile.mem != Mem::Sbuf {
            return Err(V::MemoryNotAllowed {
                operand: "index",
                memory: index.tile.mem.name(),
                rule: "the indices of an indirect DMA are read from SBUF (neuroncore.md §2.3 \
                       dma_copy)",
            });
        }
        if index.tile.dtype.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: "DMA",
                operand: "index",
                dtype: index.tile.dtype,
                rule: "an indirect DMA's row numbers are an integer tile (int32 in NKI's \
                       examples; neuroncore.md §2.3 dma_copy)",
            });
        }
        if index.free.elems() != 1 {
            return Err(V::ShapeMismatch(format!(
                "index must be one column, [P, 1] (one row number per partition), not [{} x {}] \
                 (neuroncore.md §2.3 dma_copy)",
                index.np,
                index.free.elems()
            )));
        }
        // The indexed HBM view: dim 0 is the index's, the rest one row.
        self.check_hbm(table_operand, &table)?;
        let dims = table.dims.as_slice();
        if dims.len() < 2 {
            return Err(V::ShapeMismatch(format!(
                "{table_operand} is indexed by its dim 0 and needs a row after it: a view of \
                 rank 2 or more, not shape {:?} (neuroncore.md §2.3 dma_copy)",
                table.dims.shape()
            )));
        }
        let table_rows = dims[0].1;
        let row_elems: u64 = dims[1..].iter().map(|d| d.1).product();
        let row_run = row_view(table, 0).dims.contiguous_run();
        // The direct side: P rows of the same length.
        let (dp, df, ddt, drun, dregion) = self.access_shape(direct_operand, &direct)?;
        if dp != index.np as u64 || df != row_elems {
            return Err(V::ShapeMismatch(format!(
                "indirect dma_copy: {direct_operand} is [{dp} x {df}] but the index has {} \
                 partitions and a row of {table_operand} has {row_elems} elements (partitions \
                 x free elements; neuroncore.md §2.3 dma_copy)",
                index.np
            )));
        }
        // The affine loop check: the indexed rows are known only from values (module doc).
        // The regions the check and the timing model use (the HBM ones computed once).
        let needs_regions = self.loops.active() || self.timing.is_some();
        let regions =
            needs_regions.then(|| (self.hbm_region(&table), self.access_region(dregion, &direct)));
        if let (true, Some((table_region, direct_region))) = (self.loops.active(), regions) {
            let (tk, dk) = match indexed {
                Indexed::Src => (Kind::Read, Kind::Write),
                Indexed::Dst => (Kind::Write, Kind::Read),
            };
            let touches = [
                self.dma_touch(&Access::Tile(index), ri, Kind::Read),
                self.dma_touch(&direct, direct_region, dk),
                self.dma_touch(&Access::Hbm(table), table_region, tk).map(|mut t| {
                    t.pat = UNKNOWN;
                    t
                }),
            ];
            self.check_dma_touches("dma_copy", touches, loc)?;
        }
        // Program hash: its own tag (an indirect copy is not a direct one of the same views).
        self.h(&[60, (indexed == Indexed::Dst) as u8]);
        self.h_tile(&index);
        self.h_access(&dst);
        self.h_access(&src);
        if self.mode.functional {
            let mut rows = self.take_vals();
            self.gather_tile("index", &index, &mut rows)?;
            for (p, &r) in rows.iter().enumerate() {
                if !(r >= 0.0 && r < table_rows as f32) {
                    let name = &self.hbm[table.tensor.id as usize].name;
                    let result = Err(V::Invalid(format!(
                        "index of partition {p} is {r}, outside rows 0..{table_rows} of the \
                         indexed {table_operand} (HBM tensor `{name}`); an indirect DMA stops \
                         on an out-of-bounds index (NKI's default oob_mode.error; neuroncore.md §2.3 \
                         dma_copy)"
                    )));
                    self.give_vals([rows]);
                    return result;
                }
            }
            let mut vals = self.take_vals();
            let mut row = self.take_vals();
            match indexed {
                Indexed::Src => {
                    for &r in &rows {
                        self.gather_hbm("src", &row_view(table, r as u64), &mut row)?;
                        vals.extend_from_slice(&row);
                    }
                    self.scatter_access(&dst, &vals)?;
                }
                Indexed::Dst => {
                    self.gather_access("src", &src, &mut vals)?;
                    let n = row_elems as usize;
                    for (p, &r) in rows.iter().enumerate() {
                        self.scatter_hbm(&row_view(table, r as u64), &vals[p * n..(p + 1) * n])?;
                    }
                }
            }
            self.give_vals([rows, vals, row]);
        }
        let (reads, writes) = match regions {
            Some((table_region, direct_region)) if self.timing.is_some() => match indexed {
                Indexed::Src => ([table_region, ri], [direct_region]),
                Indexed::Dst => ([direct_region, ri], [table_region]),
            },
            _ => Default::default(),
        };
        let direct_hbm = matches!(direct, Access::Hbm(_));
        let direct_tile_p0 = match &direct {
            Access::Tile(v) => v.p0 as u64,
            Access::Hbm(_) => 0,
        };
        let transfer = Transfer {
            partitions: dp,
            free: df,
            dst_dtype: if indexed == Indexed::Src { ddt } else { table.tensor.dtype },
            src_dtype: if indexed == Indexed::Src { table.tensor.dtype } else { ddt },
            run: drun.min(row_run),
            p_base: direct_tile_p0,
            src_hbm: indexed == Indexed::Src || direct_hbm,
            dst_hbm: indexed == Indexed::Dst || direct_hbm,
            // Rows anywhere in the table: never one run across rows.
            flat: false,
            rate_permille: crate::timing::FULL_RATE,
        };
        let args = move |nc: &Nc| {
            format!(
                "dst={} src={} index={}",
                nc.describe_access(&dst),
                nc.describe_access(&src),
                super::schedule::describe(&index)
            )
        };
        self.transfer("dma_copy", transfer, &reads, &writes, SourceLoc::from_location(loc), args)
    }
}

/// Row `r` of an HBM view indexed by its dim 0: the view with dim 0 fixed at `r`.
fn row_view(table: HbmView, r: u64) -> HbmView {
    let (stride, _) = table.dims.as_slice()[0];
    HbmView {
        offset: table.offset + stride * r as i64,
        dims: Dims { n: table.dims.n - 1, d: shift_dims(&table.dims) },
        ..table
    }
}
