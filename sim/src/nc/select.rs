//! VectorE's selection instructions: the top-k steps `max8`, `nc_find_index8` and
//! `nc_match_replace8`, the predicated copy `tensor_copy_predicated`, and the selects
//! with a max reduction `range_select` (by free index) and `select_reduce` (by predicate).
//!
//! They live apart from [`vector`](super::vector)'s element-wise family because what they
//! write depends on *which* elements of a partition they pick — by rank, by value or by
//! predicate — not on each element alone: a partition's free elements are searched as one
//! flattened row. NKI takes the top k of a row with them, 8 at a time: `max8` gives the 8
//! largest values, `nc_find_index8` their positions, and `nc_match_replace8` overwrites them
//! (with -inf, say) so that the next `max8` finds the next 8. Costs are neuroncore.md §2.3's
//! rows ([`cost`]); no performance mode is documented for any of them, so none applies.

use super::{CopySrc, Nc, Scalar, VResult};
use crate::cost;
use crate::dtype::Dtype;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::{Alu, Cmp, Engine};
use crate::timing::Region;
use crate::view::*;
use std::panic::Location;

/// The elements per partition `max8` and `nc_find_index8` read at least: the 8 they rank or
/// look up (nki.isa.max8, nki.isa.nc_find_index8; neuroncore.md §2.3).
const MIN_ELEMS: u64 = 8;
/// The elements per partition the selection instructions read at most (neuroncore.md §2.3).
const MAX_ELEMS: u64 = 16_384;
/// What `nc_find_index8` (and `nc_match_replace8`'s `dst_idx`) writes into a uint32 index for
/// a value the data does not hold. NKI writes all ones, 0xFFFFFFFF (SDK 2.32 page); the
/// functional model stores values as `f32`, which cannot hold 2^32 − 1, so this is the
/// value a uint32 write of 0xFFFFFFFF stores, its saturated maximum 2^32 (= `u32::MAX as
/// f32`, `Dtype::U32.round` of 2^32 − 1; neuroncore.md §2.2). It is above every position
/// (at most 16,383), so a kernel testing `index >= rows` sees it as not found, and it reaches
/// HBM as 2^32, what an fp32 reading of NKI's uint32 sentinel gives too.
pub const INDEX_NOT_FOUND_U32: f32 = u32::MAX as f32;
/// What `nc_find_index8` writes into a uint16 index for a value the data does not hold: all
/// ones, 0xFFFF = 65,535 (SDK 2.32 page), exact in `f32`.
pub const INDEX_NOT_FOUND_U16: f32 = u16::MAX as f32;
/// What `range_select` writes where it does not select: FP32_MIN, whatever
/// `on_false_value` NKI is given (nki.isa.range_select, SDK 2.32).
const RANGE_SELECT_FILL: f32 = f32::MIN;
/// `range_select` compares `range_start + index` in fp32, exact up to 2^24.
const FP32_EXACT: u64 = 1 << 24;

impl Nc {
    /// `max8` on VectorE: the 8 largest of each partition's free elements of `src` (8 to
    /// 16,384 of them, any free shape, read as one row in fp32), in descending order, into
    /// `dst` `[P, 8]` (any dtype, rounded on write). Equal values each take a place, so a
    /// value held three times fills three; NaN ranks below every number, -inf included, as
    /// the simulator's max drops NaN (`f32::max`) **(assumed: NKI does not say)**. Cost `N`
    /// (nki.isa.max8; neuroncore.md §2.3).
    #[track_caller]
    pub fn max8(&mut self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("max8", |nc, loc| nc.exec_max8(d, s, loc))
    }

    /// `nc_find_index8` on VectorE: for each partition, the position (from 0, in `data`'s
    /// free elements read as one row) of the first occurrence of each of the 8 values of
    /// `vals` `[P, 8]`, into `dst` `[P, 8]` of uint32 or uint16 (NKI's two index dtypes; any
    /// other is refused). A value repeated in `vals` takes successive occurrences, in
    /// ascending order across its columns, so the 8 values `max8` gave map to 8 distinct
    /// positions; a value not in the data (NaN never is) gives the all-ones sentinel,
    /// [`INDEX_NOT_FOUND_U32`] or [`INDEX_NOT_FOUND_U16`] (as stored in `f32`). `data`
    /// has 8 to 16,384 elements per partition. Values compare in fp32, as stored. Cost `N`
    /// (nki.isa.nc_find_index8; neuroncore.md §2.3).
    #[track_caller]
    pub fn find_index8(
        &mut self,
        dst: impl Into<TileView>,
        data: impl Into<TileView>,
        vals: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, a, v) = (dst.into(), data.into(), vals.into());
        self.issue("nc_find_index8", |nc, loc| nc.exec_match8(d, a, v, None, loc))
    }

    /// `nc_match_replace8` on VectorE: `dst` is `data` (at most 16,384 elements per
    /// partition) with the first occurrence of each of the 8 values of `vals` `[P, 8]`
    /// replaced by `imm`, and, given `dst_idx` `[P, 8]` (uint32 or uint16), the positions
    /// replaced. A value repeated in `vals` replaces as many occurrences, each column pairing
    /// with its own: `vals` is walked from column 7 down to 0, so the first occurrence goes to
    /// the last of the duplicates' columns (SDK 2.32 page). A value not found replaces
    /// nothing and its index is `nc_find_index8`'s all-ones sentinel for `dst_idx`'s dtype
    /// **(assumed: NKI leaves it undefined)**.
    /// `dst` may be `data` itself. Cost `max(MIN_II, N)`: the reference prints
    /// `min(MIN_II, N)`, taken as a typo (neuroncore.md §2.3).
    #[track_caller]
    pub fn match_replace8(
        &mut self,
        dst: impl Into<TileView>,
        data: impl Into<TileView>,
        vals: impl Into<TileView>,
        imm: f32,
        dst_idx: Option<TileView>,
    ) -> SimResult<()> {
        let (d, a, v) = (dst.into(), data.into(), vals.into());
        self.issue("nc_match_replace8", |nc, loc| {
            nc.exec_match8(d, a, v, Some((imm, dst_idx)), loc)
        })
    }

    /// `tensor_copy_predicated` on VectorE: `dst = src` where `predicate` is nonzero (zero
    /// with `reverse_pred`); elsewhere `dst` keeps what it held (and stays unwritten if it
    /// was). `src` is a tile ([`CopySrc::Tile`]) or a scalar ([`CopySrc::Float`] for a
    /// float `dst`, [`CopySrc::Int`] for an integer one), written in `dst`'s dtype.
    /// `predicate`, `dst` and a tile `src` have one shape, at most three free dims; `src` and
    /// `dst` one dtype; `predicate` uint8, uint16 or uint32, as NKI requires (int32, the
    /// signed and the float dtypes are refused); `src` and `predicate` may not both be in
    /// PSUM; `reverse_pred` takes a scalar `src` only (SDK 2.33 page). Cost `max(MIN_II, N)`
    /// when `src` and `predicate` are split between SBUF and PSUM, `max(MIN_II, 2N)` when
    /// both are in SBUF (nki.isa.tensor_copy_predicated; neuroncore.md §2.3); with a scalar
    /// `src` the predicate is the one tensor read: `max(MIN_II, N)` **(assumed**: no row
    /// for it).
    #[track_caller]
    pub fn tensor_copy_predicated(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<CopySrc>,
        predicate: impl Into<TileView>,
        reverse_pred: bool,
    ) -> SimResult<()> {
        let (d, s, p) = (dst.into(), src.into(), predicate.into());
        self.issue("tensor_copy_predicated", |nc, loc| {
            nc.exec_copy_predicated(d, s, p, reverse_pred, loc)
        })
    }

    /// Executes `tensor_copy_predicated`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_copy_predicated(
        &mut self,
        d: TileView,
        src: CopySrc,
        p: TileView,
        reverse_pred: bool,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        const INSTRUCTION: &str = "tensor_copy_predicated";
        const RULES: Rules = Rules::CopyPredicated;
        let s = match src {
            CopySrc::Tile(s) => s,
            scalar => return self.exec_copy_predicated_scalar(d, scalar, p, reverse_pred, loc),
        };
        let mut regions = [None; 3];
        for (i, (name, v)) in [("src", &s), ("predicate", &p), ("dst", &d)].into_iter().enumerate()
        {
            regions[i] = Some(self.check_tile(name, v)?);
            self.check_free_size(name, v)?;
            Self::check_copy_predicated_dims(name, v)?;
        }
        let [rs, rp, rd] = regions.map(|r| r.expect("checked above"));
        self.same_shape("predicate", &p, "src", &s)?;
        self.same_shape("dst", &d, "src", &s)?;
        if d.tile.dtype != s.tile.dtype {
            return Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand: "dst",
                dtype: d.tile.dtype,
                rule: "src and dst must share the same data type \
                       (nki.isa.tensor_copy_predicated; neuroncore.md §2.3)",
            });
        }
        Self::check_predicate(RULES, &p)?;
        Self::not_both_psum(
            "predicate",
            &s,
            &p,
            "src and predicate cannot both be in PSUM (nki.isa.tensor_copy_predicated; \
             neuroncore.md §2.3)",
        )?;
        if reverse_pred {
            return Err(V::Invalid(
                "reverse_pred can only be set with a scalar src, not a tile \
                 (nki.isa.tensor_copy_predicated, SDK 2.33; neuroncore.md §2.3)"
                    .into(),
            ));
        }
        self.h_op(&[53], &[&d, &s, &p]);
        if self.mode.functional {
            let (mut x, mut q) = (self.take_vals(), self.take_vals());
            self.gather_tile("src", &s, &mut x)?;
            self.gather_tile("predicate", &p, &mut q)?;
            let keep: Vec<bool> = q.iter().map(|&v| v != 0.0).collect();
            self.scatter_tile_where(&d, &x, &keep);
            self.give_vals([x, q]);
        }
        // §2.3: one pass when the two inputs come from different memories, two when both
        // are in SBUF (no speed-up is documented for it on v3+).
        let split = s.tile.mem != p.tile.mem;
        let n = Self::n_with_stride(&[&s, &p, &d]);
        let cycles = cost::tensor_copy_predicated(self.min_ii(Engine::Vector), n, split);
        let (reads, writes) = ([(&s, rs), (&p, rp)], [(&d, rd)]);
        let loc = SourceLoc::from_location(loc);
        self.schedule(INSTRUCTION, Engine::Vector, cycles, &reads, &writes, loc)
    }

    /// Executes `tensor_copy_predicated` with a scalar `src` (`CopySrc::Float` or `Int`).
    fn exec_copy_predicated_scalar(
        &mut self,
        d: TileView,
        src: CopySrc,
        p: TileView,
        reverse_pred: bool,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        const INSTRUCTION: &str = "tensor_copy_predicated";
        let mut regions = [Region::default(); 2];
        for (r, (name, v)) in regions.iter_mut().zip([("predicate", &p), ("dst", &d)]) {
            *r = self.check_tile(name, v)?;
            self.check_free_size(name, v)?;
            Self::check_copy_predicated_dims(name, v)?;
        }
        let [rp, rd] = regions;
        self.same_shape("dst", &d, "predicate", &p)?;
        Self::check_predicate(Rules::CopyPredicated, &p)?;
        let (value, kind, bits) = match src {
            CopySrc::Float(x) => (x, 0u8, x.to_bits() as u64),
            CopySrc::Int(i) => (i as f32, 1, i as u64),
            CopySrc::Tile(_) => unreachable!("a tile src takes exec_copy_predicated's path"),
        };
        // Only the kind must match: the scalar is materialized in dst's dtype (SDK 2.33).
        if (kind == 0) != d.tile.dtype.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand: "dst",
                dtype: d.tile.dtype,
                rule: if kind == 0 {
                    "a float scalar src needs a float dst (nki.isa.tensor_copy_predicated, \
                     SDK 2.33; neuroncore.md §2.3)"
                } else {
                    "an int scalar src needs an integer dst (nki.isa.tensor_copy_predicated, \
                     SDK 2.33; neuroncore.md §2.3)"
                },
            });
        }
        // Tag 63: the scalar-source form, apart from the tile form's 53.
        self.h_op(&[63, reverse_pred as u8, kind], &[&d, &p]);
        self.h64(bits);
        if self.mode.functional {
            let (mut x, mut q) = (self.take_vals(), self.take_vals());
            self.gather_tile("predicate", &p, &mut q)?;
            let keep: Vec<bool> = q.iter().map(|&v| (v != 0.0) != reverse_pred).collect();
            x.resize(q.len(), value);
            self.scatter_tile_where(&d, &x, &keep);
            self.give_vals([x, q]);
        }
        // One tensor input, so one pass: §2.3's split row (assumed, see the builder).
        let n = Self::n_with_stride(&[&p, &d]);
        let cycles = cost::tensor_copy_predicated(self.min_ii(Engine::Vector), n, true);
        let (reads, writes) = ([(&p, rp)], [(&d, rd)]);
        let loc = SourceLoc::from_location(loc);
        self.schedule(INSTRUCTION, Engine::Vector, cycles, &reads, &writes, loc)
    }

    /// `tensor_copy_predicated`'s operands have at most three free dims, rank 4 with the
    /// partitions (nki.isa.tensor_copy_predicated, SDK 2.33).
    fn check_copy_predicated_dims(operand: &'static str, v: &TileView) -> VResult<()> {
        if v.free.len() > 3 {
            return Err(V::BadAccessPattern(format!(
                "{operand} has {} free dims {:?}, but tensor_copy_predicated takes at most 3 \
                 (rank 4 with the partitions; nki.isa.tensor_copy_predicated, SDK 2.33; \
                 neuroncore.md §2.3)",
                v.free.len(),
                v.free.shape()
            )));
        }
        Ok(())
    }

    /// `range_select` on VectorE, NeuronCore-v3 and later: for each element of `on_true`
    /// (a floating-point tile), with `i = range_start + ` its position among the partition's
    /// free elements (read as one row), `dst = on_true` where `i cmp0 bound0` and
    /// `i cmp1 bound1` both hold, else FP32_MIN (which a 16-bit or fp8 `dst` rounds to
    /// -inf). `bounds` are `[P, 1]` fp32 columns; the comparison runs in fp32, so every `i`
    /// must lie within ±2^24. With `reduce = Some((Alu::Max, reduce_res))`, `reduce_res`
    /// `[P, 1]` gets each partition's max of the selected values (before `dst`'s rounding);
    /// max is the only reduction. NKI's `on_false_value` and `reduce_cmd` are ignored by the
    /// hardware (always FP32_MIN and reset-then-reduce), so they are not taken. Cost
    /// `max(MIN_II, N)` (nki.isa.range_select; neuroncore.md §2.3).
    #[track_caller]
    pub fn range_select(
        &mut self,
        dst: impl Into<TileView>,
        on_true: impl Into<TileView>,
        bounds: [(Cmp, TileView); 2],
        range_start: i64,
        reduce: Option<(Alu, TileView)>,
    ) -> SimResult<()> {
        let (d, x) = (dst.into(), on_true.into());
        self.issue("range_select", |nc, loc| {
            nc.exec_range_select(d, x, bounds, range_start, reduce, loc)
        })
    }

    /// `select_reduce` on VectorE: `dst = on_true` where `predicate` is nonzero (zero with
    /// `reverse_pred`), else `on_false` — an fp32 immediate or a `[P, 1]` column — and, with
    /// `reduce = Some((Alu::Max, reduce_res))`, each partition's max of the result (before
    /// `dst`'s rounding) into `reduce_res` `[P, 1]` of a float dtype; max is the only
    /// reduction. `dst`, `predicate` and `on_true` have one shape; `on_true` is any dtype but
    /// int32 and uint32 (NKI also excludes tfloat32, which the simulator lacks); `predicate`
    /// is int8, uint8, int16 or uint16, as NKI requires;
    /// `on_true` and `predicate` may not both be in PSUM. NKI's `reduce_cmd` (the
    /// accumulator registers across instructions) is not modelled: each instruction reduces
    /// its own result. Cost `max(MIN_II, N)` (nki.isa.select_reduce; neuroncore.md §2.3).
    #[track_caller]
    pub fn select_reduce(
        &mut self,
        dst: impl Into<TileView>,
        predicate: impl Into<TileView>,
        on_true: impl Into<TileView>,
        on_false: impl Into<Scalar>,
        reverse_pred: bool,
        reduce: Option<(Alu, TileView)>,
    ) -> SimResult<()> {
        let (d, p, x, f) = (dst.into(), predicate.into(), on_true.into(), on_false.into());
        self.issue("select_reduce", |nc, loc| {
            nc.exec_select_reduce(d, p, x, f, reverse_pred, reduce, loc)
        })
    }

    /// Executes `range_select`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_range_select(
        &mut self,
        d: TileView,
        x: TileView,
        [(cmp0, b0), (cmp1, b1)]: [(Cmp, TileView); 2],
        range_start: i64,
        reduce: Option<(Alu, TileView)>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        const INSTRUCTION: &str = "range_select";
        const RULES: Rules = Rules::RangeSelect;
        if self.chip.neuroncore_version < 3 {
            return Err(V::Invalid(format!(
                "range_select is a NeuronCore-v3+ instruction; {} is NeuronCore-v{} \
                 (nki.isa.range_select; neuroncore.md §2.3)",
                self.chip.name, self.chip.neuroncore_version
            )));
        }
        let rx = self.check_tile("on_true", &x)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("on_true", &x)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "on_true", &x)?;
        Self::check_on_true(RULES, "on_true", &x)?;
        let mut rb = [Region::default(); 2];
        for (r, (name, b)) in rb.iter_mut().zip([("bound0", &b0), ("bound1", &b1)]) {
            *r = self.check_column(name, b, x.np)?;
            if b.tile.dtype != crate::Dtype::F32 {
                return Err(V::DtypeNotAllowed {
                    engine: "VectorE",
                    operand: name,
                    dtype: b.tile.dtype,
                    rule: "range_select's bounds are fp32 (nki.isa.range_select; \
                           neuroncore.md §2.3)",
                });
            }
        }
        let n = x.free.elems();
        let last = range_start.checked_add(n as i64 - 1);
        // `unsigned_abs`: `i64::MIN.abs()` overflows.
        let beyond = |i: i64| i.unsigned_abs() > FP32_EXACT;
        if beyond(range_start) || last.is_none_or(beyond) {
            return Err(V::Invalid(format!(
                "range_select compares range_start + index in fp32: range_start {range_start} \
                 with {n} elements per partition leaves ±2^24 (nki.isa.range_select)"
            )));
        }
        let reduce = self.check_reduce(INSTRUCTION, reduce, x.np, false)?;
        self.h_op(&[54, cmp0 as u8, cmp1 as u8, reduce.is_some() as u8], &[&d, &x, &b0, &b1]);
        self.h64(range_start as u64);
        if let Some((r, _)) = &reduce {
            self.h_tile(r);
        }
        if self.mode.functional {
            let (mut v, mut lo, mut hi) = (self.take_vals(), self.take_vals(), self.take_vals());
            self.gather_tile("on_true", &x, &mut v)?;
            self.gather_tile("bound0", &b0, &mut lo)?;
            self.gather_tile("bound1", &b1, &mut hi)?;
            let mut red = Vec::with_capacity(x.np as usize);
            for ((row, &lo), &hi) in v.chunks_mut(n as usize).zip(&lo).zip(&hi) {
                for (j, e) in row.iter_mut().enumerate() {
                    let i = (range_start + j as i64) as f32;
                    if !(holds(cmp0, i, lo) && holds(cmp1, i, hi)) {
                        *e = RANGE_SELECT_FILL;
                    }
                }
                red.push(row_max(row));
            }
            self.scatter_tile(&d, &v);
            if let Some((r, _)) = &reduce {
                self.scatter_tile(r, &red);
            }
            self.give_vals([v, lo, hi]);
        }
        let cycles = cost::select(self.min_ii(Engine::Vector), Self::n_with_stride(&[&x, &d]));
        let reads = [(&x, rx), (&b0, rb[0]), (&b1, rb[1])];
        let mut writes = vec![(&d, rd)];
        writes.extend(reduce.iter().map(|(r, rr)| (r, *rr)));
        let loc = SourceLoc::from_location(loc);
        self.schedule(INSTRUCTION, Engine::Vector, cycles, &reads, &writes, loc)
    }

    /// Executes `select_reduce`: checks, hash, values, schedule (see [`Nc::issue`]).
    #[allow(clippy::too_many_arguments)]
    fn exec_select_reduce(
        &mut self,
        d: TileView,
        p: TileView,
        x: TileView,
        on_false: Scalar,
        reverse_pred: bool,
        reduce: Option<(Alu, TileView)>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        const INSTRUCTION: &str = "select_reduce";
        const RULES: Rules = Rules::SelectReduce;
        let mut regions = [Region::default(); 3];
        for (r, (name, v)) in
            regions.iter_mut().zip([("predicate", &p), ("on_true", &x), ("dst", &d)])
        {
            *r = self.check_tile(name, v)?;
            self.check_free_size(name, v)?;
        }
        let [rp, rx, rd] = regions;
        self.same_shape("predicate", &p, "on_true", &x)?;
        self.same_shape("dst", &d, "on_true", &x)?;
        Self::check_on_true(RULES, "on_true", &x)?;
        Self::check_predicate(RULES, &p)?;
        Self::not_both_psum(
            "predicate",
            &x,
            &p,
            "on_true and predicate cannot both be in PSUM (nki.isa.select_reduce; \
             neuroncore.md §2.3)",
        )?;
        let col = match &on_false {
            Scalar::Imm(_) => None,
            Scalar::Col(c) => Some((*c, self.check_column("on_false", c, x.np)?)),
        };
        let reduce = self.check_reduce(INSTRUCTION, reduce, x.np, true)?;
        self.h_op(&[55, reverse_pred as u8, reduce.is_some() as u8], &[&d, &p, &x]);
        self.h_scalar(&on_false);
        if let Some((r, _)) = &reduce {
            self.h_tile(r);
        }
        if self.mode.functional {
            let (mut v, mut q, mut f) = (self.take_vals(), self.take_vals(), self.take_vals());
            self.gather_tile("predicate", &p, &mut q)?;
            self.gather_tile("on_true", &x, &mut v)?;
            self.gather_scalar("on_false", &on_false, x.np, &mut f)?;
            let n = x.free.elems() as usize;
            let mut red = Vec::with_capacity(x.np as usize);
            for ((row, q), &f) in v.chunks_mut(n).zip(q.chunks(n)).zip(&f) {
                for (e, &q) in row.iter_mut().zip(q) {
                    if (q != 0.0) == reverse_pred {
                        *e = f;
                    }
                }
                red.push(row_max(row));
            }
            self.scatter_tile(&d, &v);
            if let Some((r, _)) = &reduce {
                self.scatter_tile(r, &red);
            }
            self.give_vals([v, q, f]);
        }
        let n = Self::n_with_stride(&[&x, &p, &d]);
        let cycles = cost::select(self.min_ii(Engine::Vector), n);
        let mut reads = vec![(&p, rp), (&x, rx)];
        reads.extend(col.iter().map(|(c, r)| (c, *r)));
        let mut writes = vec![(&d, rd)];
        writes.extend(reduce.iter().map(|(r, rr)| (r, *rr)));
        let loc = SourceLoc::from_location(loc);
        self.schedule(INSTRUCTION, Engine::Vector, cycles, &reads, &writes, loc)
    }

    /// The optional max reduction of `range_select` and `select_reduce`: max only, into a
    /// `[np, 1]` column (of a float dtype for `select_reduce`, `float_res`). Gives the
    /// column and its region.
    fn check_reduce(
        &self,
        instruction: &'static str,
        reduce: Option<(Alu, TileView)>,
        np: u32,
        float_res: bool,
    ) -> VResult<Option<(TileView, Region)>> {
        let Some((op, r)) = reduce else { return Ok(None) };
        if op != Alu::Max {
            return Err(V::ReduceOpNotAllowed {
                instruction,
                engine: "VectorE",
                op,
                rule: "the selects reduce with max only (neuroncore.md §2.3)",
            });
        }
        let region = self.check_column("reduce_res", &r, np)?;
        if float_res && !r.tile.dtype.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand: "reduce_res",
                dtype: r.tile.dtype,
                rule: "select_reduce's reduce_res is of a float type (nki.isa.select_reduce; \
                       neuroncore.md §2.3)",
            });
        }
        Ok(Some((r, region)))
    }

    /// The data the selects copy: `range_select`'s is of a floating-point dtype;
    /// `select_reduce`'s any dtype but int32 and uint32 (and tfloat32, not modelled).
    fn check_on_true(rules: Rules, operand: &'static str, v: &TileView) -> VResult<()> {
        let dt = v.tile.dtype;
        let (ok, rule) = match rules {
            Rules::RangeSelect => (
                dt.is_float(),
                "on_true_tile must be of a floating-point dtype (nki.isa.range_select; \
                 neuroncore.md §2.3)",
            ),
            Rules::SelectReduce | Rules::CopyPredicated => (
                !matches!(dt, Dtype::I32 | Dtype::U32),
                "on_true may be any dtype but int32, uint32 and tfloat32 \
                 (nki.isa.select_reduce; neuroncore.md §2.3)",
            ),
        };
        if !ok {
            return Err(V::DtypeNotAllowed { engine: "VectorE", operand, dtype: dt, rule });
        }
        Ok(())
    }

    /// Executes `max8`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_max8(
        &mut self,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        // §2.1's per-memory limit (4,096 in PSUM) applies within the instruction's own range.
        self.check_free_size("src", &s)?;
        let n = Self::check_elems("max8", "src", &s, MIN_ELEMS)?;
        Self::check_eight("max8", "dst", &d, s.np)?;
        self.h_op(&[50], &[&d, &s]);
        if self.mode.functional {
            let (mut x, mut out) = (self.take_vals(), self.take_vals());
            self.gather_tile("src", &s, &mut x)?;
            for row in x.chunks(n as usize) {
                out.extend(top8(row));
            }
            self.scatter_tile(&d, &out);
            self.give_vals([x, out]);
        }
        let cycles = cost::max8(Self::n_with_stride(&[&s]));
        let loc = SourceLoc::from_location(loc);
        self.schedule("max8", Engine::Vector, cycles, &[(&s, rs)], &[(&d, rd)], loc)
    }

    /// Executes `nc_find_index8` (`replace` None) and `nc_match_replace8` (`replace` its
    /// immediate and `dst_idx`): checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_match8(
        &mut self,
        d: TileView,
        a: TileView,
        v: TileView,
        replace: Option<(f32, Option<TileView>)>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let opcode = if replace.is_some() { "nc_match_replace8" } else { "nc_find_index8" };
        let ra = self.check_tile("data", &a)?;
        let rv = self.check_tile("vals", &v)?;
        let rd = self.check_tile("dst", &d)?;
        for (name, v) in [("data", &a), ("dst", &d)] {
            self.check_free_size(name, v)?;
        }
        // find_index8 needs the 8 values' room; match_replace8 states only the maximum.
        let n =
            Self::check_elems(opcode, "data", &a, if replace.is_some() { 1 } else { MIN_ELEMS })?;
        Self::check_eight(opcode, "vals", &v, a.np)?;
        let mut idx = None;
        // The sentinel of the index output's dtype (none without one).
        let mut not_found = INDEX_NOT_FOUND_U32;
        match &replace {
            None => {
                Self::check_eight(opcode, "dst", &d, a.np)?;
                not_found = Self::check_index_dtype("dst", &d)?;
            }
            Some((_, dst_idx)) => {
                self.same_shape("dst", &d, "data", &a)?;
                if let Some(di) = dst_idx {
                    let r = self.check_tile("dst_idx", di)?;
                    Self::check_eight(opcode, "dst_idx", di, a.np)?;
                    not_found = Self::check_index_dtype("dst_idx", di)?;
                    idx = Some((*di, r));
                }
            }
        }
        match &replace {
            None => self.h_op(&[51], &[&d, &a, &v]),
            Some((imm, _)) => {
                self.h_op(&[52, idx.is_some() as u8], &[&d, &a, &v]);
                self.h64(imm.to_bits() as u64);
                if let Some((di, _)) = &idx {
                    self.h_tile(di);
                }
            }
        }
        if self.mode.functional {
            let (mut x, mut y, mut found) = (self.take_vals(), self.take_vals(), self.take_vals());
            self.gather_tile("data", &a, &mut x)?;
            self.gather_tile("vals", &v, &mut y)?;
            let mut taken = vec![false; n as usize];
            for (row, vals) in x.chunks_mut(n as usize).zip(y.chunks(8)) {
                let vals: &[f32; 8] = vals.try_into().expect("checked: 8 values a partition");
                let at = match replace {
                    None => find8(row, vals, &mut taken),
                    Some((imm, _)) => {
                        let at = match8_reverse(row, vals, &mut taken);
                        for &j in at.iter().flatten() {
                            row[j] = imm;
                        }
                        at
                    }
                };
                found.extend(at.map(|j| j.map_or(not_found, |j| j as f32)));
            }
            match &idx {
                None if replace.is_none() => self.scatter_tile(&d, &found),
                None => self.scatter_tile(&d, &x),
                Some((di, _)) => {
                    self.scatter_tile(&d, &x);
                    self.scatter_tile(di, &found);
                }
            }
            self.give_vals([x, y, found]);
        }
        let reads = [(&a, ra), (&v, rv)];
        let mut writes = vec![(&d, rd)];
        writes.extend(idx.iter().map(|(di, r)| (di, *r)));
        let loc = SourceLoc::from_location(loc);
        let cycles = match replace {
            None => cost::find_index8(Self::n_with_stride(&[&a])),
            Some(_) => {
                cost::match_replace8(self.min_ii(Engine::Vector), Self::n_with_stride(&[&a, &d]))
            }
        };
        self.schedule(opcode, Engine::Vector, cycles, &reads, &writes, loc)
    }

    /// The elements per partition of `v`, which `instruction` takes from `min` to 16,384
    /// (neuroncore.md §2.3).
    fn check_elems(
        instruction: &'static str,
        operand: &'static str,
        v: &TileView,
        min: u64,
    ) -> VResult<u64> {
        let elems = v.free.elems();
        if !(min..=MAX_ELEMS).contains(&elems) {
            return Err(V::FreeSizeOutOfRange { instruction, operand, elems, min, max: MAX_ELEMS });
        }
        Ok(elems)
    }

    /// `v` holds 8 elements in each of `np` partitions (any free shape): the 8 values or
    /// indices of the top-k instructions (neuroncore.md §2.3).
    fn check_eight(
        instruction: &'static str,
        operand: &'static str,
        v: &TileView,
        np: u32,
    ) -> VResult<()> {
        if v.np != np || v.free.elems() != 8 {
            return Err(V::ShapeMismatch(format!(
                "{operand} must be [{np} x 8], 8 values for each partition of the data \
                 ({instruction}, neuroncore.md §2.3), but is [{} x {:?}]",
                v.np,
                v.free.shape()
            )));
        }
        Ok(())
    }

    /// A predicate's dtype, as NKI lists it: uint8, uint16 or uint32 for
    /// `tensor_copy_predicated`; int8, uint8, int16 or uint16 for `select_reduce`. Anything
    /// else — int32, a float, the other widths — is refused, naming the list.
    fn check_predicate(rules: Rules, p: &TileView) -> VResult<()> {
        use Dtype::*;
        let dt = p.tile.dtype;
        let (ok, rule) = match rules {
            Rules::SelectReduce => (
                matches!(dt, I8 | U8 | I16 | U16),
                "a predicate is int8, uint8, int16 or uint16 (nki.isa.select_reduce; \
                 neuroncore.md §2.3)",
            ),
            Rules::CopyPredicated | Rules::RangeSelect => (
                matches!(dt, U8 | U16 | U32),
                "a predicate is uint8, uint16 or uint32 (nki.isa.tensor_copy_predicated; \
                 neuroncore.md §2.3)",
            ),
        };
        if !ok {
            return Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand: "predicate",
                dtype: dt,
                rule,
            });
        }
        Ok(())
    }

    /// The indices of `nc_find_index8` and `nc_match_replace8` are uint32 or uint16, NKI's
    /// index dtypes (nki.isa.nc_find_index8; `dst_idx` is taken to share them). Gives the
    /// all-ones sentinel of the dtype, as the functional model stores it.
    fn check_index_dtype(operand: &'static str, v: &TileView) -> VResult<f32> {
        match v.tile.dtype {
            Dtype::U32 => Ok(INDEX_NOT_FOUND_U32),
            Dtype::U16 => Ok(INDEX_NOT_FOUND_U16),
            dtype => Err(V::DtypeNotAllowed {
                engine: "VectorE",
                operand,
                dtype,
                rule: "the 8 indices are uint32 or uint16 (nki.isa.nc_find_index8; \
                       neuroncore.md §2.3)",
            }),
        }
    }
}

/// `a cmp b`, in fp32 (`range_select`'s index against a bound).
fn holds(cmp: Cmp, a: f32, b: f32) -> bool {
    match cmp {
        Cmp::Ge => a >= b,
        Cmp::Gt => a > b,
        Cmp::Le => a <= b,
        Cmp::Lt => a < b,
        Cmp::Eq => a == b,
    }
}

/// A row's max as the VectorE max folds it (NaN dropped, -inf for a row of NaN).
fn row_max(row: &[f32]) -> f32 {
    row.iter().fold(Alu::Max.reduce_init(), |m, &v| Alu::Max.apply(m, v))
}

/// The 8 largest of `row` in descending order; of equal values the earlier comes first. NaN
/// ranks below every number and fills the places only a row of fewer than 8 numbers leaves.
fn top8(row: &[f32]) -> [f32; 8] {
    let mut top = [f32::NAN; 8];
    let mut len = 0;
    for &x in row.iter().filter(|x| !x.is_nan()) {
        if len == 8 && x <= top[7] {
            continue;
        }
        // Insert after every kept value >= x (ties keep their order), dropping the 8th.
        let at = top[..len].iter().position(|&t| t < x).unwrap_or(len);
        len = (len + 1).min(8);
        top.copy_within(at..len - 1, at + 1);
        top[at] = x;
    }
    top
}

/// `nc_find_index8`'s positions: for each value of `vals` in column order, the first
/// element of `row` equal to it that no earlier column took (`taken`, cleared here).
fn find8(row: &[f32], vals: &[f32; 8], taken: &mut [bool]) -> [Option<usize>; 8] {
    taken.fill(false);
    let mut at = [None; 8];
    for (slot, &v) in at.iter_mut().zip(vals) {
        *slot = take_first(row, v, taken);
    }
    at
}

/// `nc_match_replace8`'s positions: as [`find8`], walking `vals` from column 7 down to 0.
fn match8_reverse(row: &[f32], vals: &[f32; 8], taken: &mut [bool]) -> [Option<usize>; 8] {
    taken.fill(false);
    let mut at = [None; 8];
    for i in (0..8).rev() {
        at[i] = take_first(row, vals[i], taken);
    }
    at
}

/// The first element of `row` equal to `v` (in fp32: NaN matches nothing) and not yet
/// taken, which it marks taken.
fn take_first(row: &[f32], v: f32, taken: &mut [bool]) -> Option<usize> {
    let j = row.iter().zip(taken.iter()).position(|(&x, &t)| !t && x == v)?;
    taken[j] = true;
    Some(j)
}

/// Whose dtype rules a predicate or `on_true` operand follows: each instruction's own NKI
/// page (a match on this, not on the instruction's name, so a rename cannot swap them).
#[derive(Clone, Copy)]
enum Rules {
    CopyPredicated,
    RangeSelect,
    SelectReduce,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top8_ranks_ties_in_order_and_nan_last() {
        let row = [1.0, 5.0, f32::NAN, 5.0, -1.0, 3.0, f32::NEG_INFINITY, 2.0, 0.0, 4.0];
        assert_eq!(top8(&row), [5.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0]);
        let short = [f32::NEG_INFINITY, f32::NAN, 2.0];
        let t = top8(&short);
        assert_eq!(t[..2], [2.0, f32::NEG_INFINITY]);
        assert!(t[2..].iter().all(|x| x.is_nan()));
    }

    #[test]
    fn duplicates_pair_with_successive_occurrences_in_opposite_orders() {
        // The SDK 2.32 pages' example: data [1, 2, 3, 4, 8 x 7], vals [3, 8 x 7].
        let row = [1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
        let vals = [3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
        let mut taken = vec![false; row.len()];
        let up = find8(&row, &vals, &mut taken).map(Option::unwrap);
        assert_eq!(up, [2, 4, 5, 6, 7, 8, 9, 10]);
        let down = match8_reverse(&row, &vals, &mut taken).map(Option::unwrap);
        assert_eq!(down, [2, 10, 9, 8, 7, 6, 5, 4]);
    }
}
