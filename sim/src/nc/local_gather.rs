//! GpSimd's `local_gather` (nki.isa.local_gather; neuroncore.md §2.3): a gather within
//! groups of 16 partitions, through indices read from the same 16 partitions.
//!
//! GpSimd has eight cores, core `g` connected to SBUF partitions `16g..16g+16`. Each core
//! reads the indices held in its 16 partitions of `index`, flattened partition first (the
//! index in partition `q`, free element `c` of the group is the `16c + q`-th), keeps the
//! first `num_valid_indices` of them, and gathers with them from its 16 partitions of
//! `src_buffer`: an index `i` is an element offset into a partition's free elements (read as
//! one row), from which `num_elem_per_idx` contiguous elements are copied, in every one of
//! the group's partitions. So for `p` in group `g`, valid index `k` and `j < e`:
//!
//! ```text
//! dst[p, k·e + j] = src_buffer[p, indices_g[k] + j]
//! ```
//!
//! This is the page's NumPy reference ("`local_gather` effectively performs"): it feeds the
//! hardware `index · num_elem_per_idx` and takes `src_buffer[16g..16g+16]` along its free axis
//! in blocks of `num_elem_per_idx`, the same partition in and out. The page's prose calls the
//! indices "partition offsets"; the reference, the only exact statement, reads them as
//! offsets within each partition, and that is what is simulated.
//!
//! What the simulator adds, each said where it is checked:
//! * an index whose `e` elements do not fit in `src_buffer`'s partition is an error (the page:
//!   "undefined"), found from values, so only by a run with the functional model;
//! * only the indices and the source elements the gather reads must have been written: the
//!   index entries past `num_valid_indices` (padding) and the source elements no index
//!   reaches may be fresh memory;
//! * `dst` covers the same partitions as `src_buffer` (core `g` writes its own 16
//!   partitions), `index` too (the page: a core's indices "should also come from the same 16
//!   connected SBUF partitions").
//!
//! For the affine-loop check and the timing model, the instruction reads the whole
//! `src_buffer` and `index` views and writes the whole `dst` view: which source elements it
//! reads depends on values, which a timing run does not have, so a write by another
//! iteration to any part of the source is a dependency.

use super::{Nc, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::Engine;
use crate::timing::Region;
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

/// The partitions one GpSimd core is connected to (nki.isa.local_gather).
const LOCAL_GATHER_GROUP: u64 = 16;
/// The most indices one GpSimd core gathers with in one instruction (nki.isa.local_gather).
const LOCAL_GATHER_MAX_INDICES: u64 = 4096;
/// The elements per index `local_gather` takes (nki.isa.local_gather: `[1, 2, 4, 8, 16, 32]`).
const ELEMS_PER_IDX: [u64; 6] = [1, 2, 4, 8, 16, 32];

impl Nc {
    /// `local_gather` on GpSimd: within each group of 16 partitions (one GpSimd core's),
    /// gather `num_elem_per_idx` contiguous elements of `src_buffer` at each of the group's
    /// indices, into the same partitions of `dst`:
    /// `dst[p, k·e + j] = src_buffer[p, indices_g[k] + j]`, with `indices_g` the group's
    /// `index` entries flattened partition first, `k < num_valid_indices`, `j < e` (the
    /// page's NumPy reference; `sim/src/nc/local_gather.rs` says how it reads the page).
    /// Only the valid indices and the source elements they reach need to have been written.
    ///
    /// * `src_buffer`, `index` and `dst`: SBUF, the same partitions (a multiple of 16);
    ///   `index` uint16, its values element offsets into a partition's free elements of
    ///   `src_buffer` (read as one row); `dst` of `src_buffer`'s dtype (no cast) with
    ///   `num_valid_indices · num_elem_per_idx` elements per partition.
    /// * `num_elem_per_idx` `e`: 1, 2, 4, 8, 16 or 32.
    /// * `num_valid_indices`: the indices each core uses, 1 to the `16 · F` its slice of
    ///   `index` (`F` free elements) holds, and at most 4096; `None` is all `16 · F`.
    /// * An index with `index + e` past the source's elements per partition is refused
    ///   (undefined on the hardware).
    ///
    /// Cost `150 + (N · e) / C` GpSimd cycles with `C = ((28 + 4e)/(4e)) / min(4/dtype_size,
    /// e)`, `N` the valid indices per core, rounded up (see [`cost::local_gather`]).
    ///
    /// ```
    /// use neuron_sim::{Chip, Dtype, ExecMode, Nc};
    /// let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    /// let src: Vec<f32> = (0..16 * 8).map(|x| x as f32).collect(); // 16 partitions of 8
    /// let src = nc.hbm_input("src", Dtype::F32, &[16, 8], &src)?;
    /// // One index column: partition q holds 7 - q % 8, so the flattened indices are
    /// // 7, 6, ..., 0, 7, ..., 0; the first 3 of them are used.
    /// let idx: Vec<f32> = (0..16).map(|q| (7 - q % 8) as f32).collect();
    /// let idx = nc.hbm_input("idx", Dtype::U16, &[16, 1], &idx)?;
    /// let pool = nc.sbuf_pool("sb", 1);
    /// let (s, i) = (nc.tile(pool, Dtype::F32, &[16, 8])?, nc.tile(pool, Dtype::U16, &[16, 1])?);
    /// nc.dma(s, src)?;
    /// nc.dma(i, idx)?;
    /// let d = nc.tile(pool, Dtype::F32, &[16, 3])?;
    /// nc.local_gather(d, s, i, 1, Some(3))?;
    /// let out = nc.hbm("out", Dtype::F32, &[16, 3])?;
    /// nc.dma(out, d)?;
    /// // Partition 1 reads its own elements 7, 6 and 5.
    /// assert_eq!(&nc.read_hbm(out).unwrap()[3..6], &[15., 14., 13.]);
    /// # Ok::<(), neuron_sim::SimError>(())
    /// ```
    #[track_caller]
    pub fn local_gather(
        &mut self,
        dst: impl Into<TileView>,
        src_buffer: impl Into<TileView>,
        index: impl Into<TileView>,
        num_elem_per_idx: u64,
        num_valid_indices: Option<u64>,
    ) -> SimResult<()> {
        let (d, s, ix) = (dst.into(), src_buffer.into(), index.into());
        self.issue("local_gather", |nc, loc| {
            nc.exec_local_gather(d, s, ix, num_elem_per_idx, num_valid_indices, loc)
        })
    }

    /// Executes `local_gather`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_local_gather(
        &mut self,
        d: TileView,
        s: TileView,
        ix: TileView,
        e: u64,
        valid: Option<u64>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let (rd, rs, ri, nv) = self.check_local_gather(&d, &s, &ix, e, valid)?;
        self.h_op(&[62, e as u8], &[&d, &s, &ix]);
        self.h64(nv);
        if self.mode.functional {
            self.local_gather_values(&d, &s, &ix, e, nv)?;
        }
        let cycles =
            cost::local_gather(self.chip.gpsimd.start_cycles, nv, e, s.tile.dtype.size() as u64);
        let (reads, writes) = ([(&s, rs), (&ix, ri)], [(&d, rd)]);
        let loc = SourceLoc::from_location(loc);
        self.schedule("local_gather", Engine::GpSimd, cycles, &reads, &writes, loc)
    }

    /// The rules of nki.isa.local_gather (and the simulator's, see the module doc), in the
    /// order a kernel most likely breaks them; gives the operands' regions (dst, src_buffer,
    /// index) and the valid indices per core.
    fn check_local_gather(
        &self,
        d: &TileView,
        s: &TileView,
        ix: &TileView,
        e: u64,
        valid: Option<u64>,
    ) -> VResult<(Region, Region, Region, u64)> {
        const PAGE: &str = "nki.isa.local_gather; neuroncore.md §2.3";
        let rd = self.check_tile("dst", d)?;
        let rs = self.check_tile("src_buffer", s)?;
        let ri = self.check_tile("index", ix)?;
        for (name, v) in [("src_buffer", s), ("index", ix), ("dst", d)] {
            if v.tile.mem != Mem::Sbuf {
                return Err(V::MemoryNotAllowed {
                    operand: name,
                    memory: v.tile.mem.name(),
                    rule: "local_gather reads and writes SBUF only: GpSimd cannot access PSUM \
                           (nki.isa.local_gather; neuroncore.md §1.5, §2.3)",
                });
            }
            self.check_free_size(name, v)?;
        }
        if ix.tile.dtype != Dtype::U16 {
            return Err(V::DtypeNotAllowed {
                engine: "GpSimd",
                operand: "index",
                dtype: ix.tile.dtype,
                rule: "local_gather's indices must be uint16 (nki.isa.local_gather; \
                       neuroncore.md §2.3)",
            });
        }
        if d.tile.dtype != s.tile.dtype {
            return Err(V::DtypeNotAllowed {
                engine: "GpSimd",
                operand: "dst",
                dtype: d.tile.dtype,
                rule: "local_gather keeps src_buffer's dtype, no cast: dst must have the same \
                       dtype (nki.isa.local_gather; neuroncore.md §2.3)",
            });
        }
        let np = s.np as u64;
        // Groups are the cores' own 16 partitions (core 0 wired to partitions 0..16, …): a
        // view's start is always a multiple of 16, since every engine access of 32 or fewer
        // partitions starts at 0, 32, 64 or 96, and a larger one at 0 or 64 (the start rule
        // of `check_tile`, which refuses a view from partition 8 before this).
        if !np.is_multiple_of(LOCAL_GATHER_GROUP) {
            return Err(V::ShapeMismatch(format!(
                "src_buffer has {np} partitions, but local_gather works on whole groups of \
                 {LOCAL_GATHER_GROUP} (one GpSimd core each): its partitions must be a multiple \
                 of {LOCAL_GATHER_GROUP} ({PAGE})"
            )));
        }
        for (name, v) in [("index", ix), ("dst", d)] {
            if v.np != s.np || v.p0 != s.p0 {
                return Err(V::ShapeMismatch(format!(
                    "{name} uses partitions {}..{} but src_buffer {}..{}: each GpSimd core \
                     reads its indices from and writes into the {LOCAL_GATHER_GROUP} partitions \
                     it gathers from, so src_buffer, index and dst must cover the same \
                     partitions ({PAGE})",
                    v.p0,
                    v.p0 + v.np,
                    s.p0,
                    s.p0 + s.np
                )));
            }
        }
        if !ELEMS_PER_IDX.contains(&e) {
            return Err(V::Invalid(format!(
                "num_elem_per_idx is {e}, but local_gather gathers 1, 2, 4, 8, 16 or 32 \
                 contiguous elements per index ({PAGE})"
            )));
        }
        let per_core = LOCAL_GATHER_GROUP * ix.free.elems();
        let nv = valid.unwrap_or(per_core);
        if nv == 0 || nv > per_core {
            return Err(V::Invalid(format!(
                "num_valid_indices is {nv}, but each GpSimd core's slice of index holds \
                 {per_core} ({LOCAL_GATHER_GROUP} partitions x {} elements): it must be 1 to \
                 {per_core} ({PAGE})",
                ix.free.elems()
            )));
        }
        if nv > LOCAL_GATHER_MAX_INDICES {
            let what = match valid {
                Some(_) => format!("num_valid_indices is {nv}"),
                None => format!(
                    "index gives each GpSimd core {nv} indices ({LOCAL_GATHER_GROUP} partitions \
                     x {} elements; num_valid_indices not given)",
                    ix.free.elems()
                ),
            };
            return Err(V::Invalid(format!(
                "{what}, but a GpSimd core gathers with at most {LOCAL_GATHER_MAX_INDICES} \
                 indices per instruction ({PAGE})"
            )));
        }
        let want = nv * e;
        if d.free.elems() != want {
            return Err(V::ShapeMismatch(format!(
                "dst has {} elements per partition, but local_gather writes num_valid_indices \
                 x num_elem_per_idx = {nv} x {e} = {want} ({PAGE})",
                d.free.elems()
            )));
        }
        Ok((rd, rs, ri, nv))
    }

    /// The functional model of `local_gather` (checked operands): reads only the valid
    /// indices and the source elements they reach, each of which must have been written.
    fn local_gather_values(
        &mut self,
        d: &TileView,
        s: &TileView,
        ix: &TileView,
        e: u64,
        nv: u64,
    ) -> VResult<()> {
        // Each view's element offsets within a partition, in row-major order.
        let (mut src_off, mut idx_off) =
            (std::mem::take(&mut self.scratch), std::mem::take(&mut self.scratch2));
        s.free.offsets(s.offset, &mut src_off);
        ix.free.offsets(ix.offset, &mut idx_off);
        let mut out = self.take_vals();
        let result = self.local_gather_into(s, ix, e, nv, &src_off, &idx_off, &mut out);
        self.scratch = src_off;
        self.scratch2 = idx_off;
        if result.is_ok() {
            self.scatter_tile(d, &out);
        }
        self.give_vals([out]);
        result
    }

    /// Fills `out` (`[np][nv · e]`) for [`Nc::local_gather_values`].
    #[allow(clippy::too_many_arguments)]
    fn local_gather_into(
        &self,
        s: &TileView,
        ix: &TileView,
        e: u64,
        nv: u64,
        src_off: &[i64],
        idx_off: &[i64],
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        const G: u64 = LOCAL_GATHER_GROUP;
        let (sb, ib) = (&self.bufs[s.tile.buf as usize], &self.bufs[ix.tile.buf as usize]);
        let row = (nv * e) as usize;
        let f = src_off.len() as u64;
        let unwritten =
            |operand: &'static str, b: &super::memory::Buf, p: u64, o: i64| V::UnwrittenRead {
                operand,
                what: format!("tile `{}`", self.logicals[b.logical as usize].name),
                partition: p,
                element: o as u64,
            };
        out.clear();
        out.resize(s.np as usize * row, 0.0);
        for g in 0..s.np as u64 / G {
            for k in 0..nv {
                // The k-th index of the group, flattened partition first.
                let (q, c) = (ix.p0 as u64 + g * G + k % G, (k / G) as usize);
                let at = q * ib.pstride + idx_off[c] as u64;
                if ib.written.first_unwritten(at, at + 1).is_some() {
                    return Err(unwritten("index", ib, q, idx_off[c]));
                }
                let i = ib.data[at as usize] as u64;
                if i + e > f {
                    return Err(V::Invalid(format!(
                        "index {k} of GpSimd core {g} (index partition {q}, element {c}) is {i}, \
                         but {i} + num_elem_per_idx ({e}) = {} is past the {f} elements per \
                         partition of src_buffer: an out-of-bounds index is undefined on the \
                         hardware (nki.isa.local_gather; neuroncore.md §2.3)",
                        i + e
                    )));
                }
                for p in s.p0 as u64 + g * G..s.p0 as u64 + (g + 1) * G {
                    let base = (p - s.p0 as u64) as usize * row + (k * e) as usize;
                    for j in 0..e {
                        let o = src_off[(i + j) as usize];
                        let at = p * sb.pstride + o as u64;
                        if sb.written.first_unwritten(at, at + 1).is_some() {
                            return Err(unwritten("src_buffer", sb, p, o));
                        }
                        out[base + j as usize] = sb.data[at as usize];
                    }
                }
            }
        }
        Ok(())
    }
}
