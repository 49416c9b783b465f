//! VectorE instructions: element-wise `tensor_tensor`, `tensor_scalar`, `tensor_copy`,
//! `memset`, `reciprocal` (several also on ScalarE or GpSimd through [`Nc::on`]),
//! `scalar_tensor_tensor`, `tensor_scalar_reduce`, the scan `tensor_tensor_scan`,
//! `tensor_reduce`, and the batch-norm statistics `bn_stats` / `bn_aggr`.

use super::{Nc, On, Scalar, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::{Alu, Engine};
use crate::timing::Region;
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

impl Nc {
    /// `tensor_tensor`: `dst = a op b` element-wise on VectorE (GpSimd via [`Nc::on`]).
    #[track_caller]
    pub fn tensor_tensor(
        &mut self,
        dst: impl Into<TileView>,
        a: impl Into<TileView>,
        b: impl Into<TileView>,
        op: Alu,
    ) -> SimResult<()> {
        self.on(Engine::Vector).tensor_tensor(dst, a, b, op)
    }

    /// Executes `tensor_tensor`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_tensor_tensor(
        &mut self,
        eng: Engine,
        d: TileView,
        a: TileView,
        b: TileView,
        op: Alu,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !matches!(eng, Engine::Vector | Engine::GpSimd) {
            return Err(V::Invalid(format!(
                "tensor_tensor runs on VectorE or GpSimd, not {}",
                eng.doc_name()
            )));
        }
        let regions = self.check_binary(
            eng,
            [("a", &a), ("b", &b), ("dst", &d)],
            "tensor_tensor inputs cannot both be in PSUM (neuroncore.md §2.3)",
        )?;
        Self::check_bitwise_inputs(eng, &[op], &[("a", &a), ("b", &b)])?;
        if eng == Engine::Vector {
            for (name, v) in [("a", &a), ("b", &b), ("dst", &d)] {
                // 32-bit integers: int32 as §2.3 says, uint32 assumed alike.
                if matches!(v.tile.dtype, Dtype::I32 | Dtype::U32) {
                    return Err(V::DtypeNotAllowed {
                        engine: "VectorE",
                        operand: name,
                        dtype: v.tile.dtype,
                        rule: "32-bit integer tensor_tensor runs on GpSimd (neuroncore.md §2.3)",
                    });
                }
            }
            if op == Alu::Pow {
                return Err(V::Invalid(
                    "tensor_tensor `power` runs on GpSimd (neuroncore.md §2.3)".into(),
                ));
            }
        }
        self.h_op(&[10, eng as u8, op.code()], &[&d, &a, &b]);
        if self.mode.functional {
            let (mut x, mut y) = (self.take_vals(), self.take_vals());
            self.gather_tile("a", &a, &mut x)?;
            self.gather_tile("b", &b, &mut y)?;
            let dt = a.tile.dtype;
            for (u, v) in x.iter_mut().zip(&y) {
                *u = op.apply_as(*u, *v, dt);
            }
            self.scatter_tile(&d, &x);
            self.give_vals([x, y]);
        }
        let n = Self::n_with_stride(&[&a, &b, &d]);
        let sb = |v: &TileView| v.tile.mem == Mem::Sbuf;
        let bf = |v: &TileView| v.tile.dtype == Dtype::Bf16;
        let split = sb(&a) != sb(&b);
        let bf16_fast = [&a, &b, &d].iter().all(|v| sb(v) && bf(v) && Self::is_contig(v))
            && matches!(op, Alu::Add | Alu::Multiply | Alu::Subtract);
        let sixteen = [&a, &b, &d].iter().all(|v| v.tile.dtype.is_16bit_float());
        // NeuronCore-v3+ VectorE performance mode: 2x with both inputs in SBUF, all 16-bit (§1.5).
        let speedup = if eng == Engine::Vector
            && self.chip.vector.perf_mode_16bit > 1
            && sb(&a)
            && sb(&b)
            && sixteen
        {
            2
        } else {
            1
        };
        let cycles = cost::tensor_tensor(self.min_ii(eng), n, split || bf16_fast, speedup);
        self.schedule(
            "tensor_tensor",
            eng,
            cycles,
            &[(&a, regions[0]), (&b, regions[1])],
            &[(&d, regions[2])],
            SourceLoc::from_location(loc),
        )
    }

    /// `tensor_scalar`: `dst = (src op0 s0) op1 s1` with immediates or `[P,1]` columns, on
    /// VectorE (ScalarE via [`Nc::on`], which supports only multiply and add).
    #[track_caller]
    pub fn tensor_scalar(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
    ) -> SimResult<()> {
        self.on(Engine::Vector).tensor_scalar(dst, src, op0, op1)
    }

    /// `tensor_scalar_reduce` on VectorE: `dst = src op0 s0` as [`Nc::tensor_scalar`] with
    /// one arithmetic (not bitwise) operator, and `reduce_res[p] = reduce_op` over all free
    /// elements of partition `p` of the result, into a `[P,1]` tile; `reduce_op` is add,
    /// subtract, multiply, max or min (neuroncore.md §2.3).
    #[track_caller]
    pub fn tensor_scalar_reduce(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op0: (Alu, Scalar),
        reduce_op: Alu,
        reduce_res: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, s, r) = (dst.into(), src.into(), reduce_res.into());
        self.issue("tensor_scalar_reduce", |nc, loc| {
            nc.exec_tensor_scalar(Engine::Vector, d, s, op0, None, Some((reduce_op, r)), loc)
        })
    }

    /// Executes `tensor_scalar` and, with `reduce`, `tensor_scalar_reduce`: checks, hash,
    /// values, schedule (see [`Nc::issue`]).
    #[allow(clippy::too_many_arguments)]
    fn exec_tensor_scalar(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
        reduce: Option<(Alu, TileView)>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        match eng {
            Engine::Vector => {}
            Engine::Scalar => {
                // The activation datapath: `(x · scale) + bias`, so multiply, add, or
                // multiply then add (neuroncore.md §2.3).
                let ops = (op0.0, op1.as_ref().map(|o| o.0));
                let accepted = matches!(
                    ops,
                    (Alu::Multiply | Alu::Add, None) | (Alu::Multiply, Some(Alu::Add))
                );
                if !accepted {
                    let given = match ops {
                        (a, Some(b)) => format!("({a:?}, {b:?})"),
                        (a, None) => format!("({a:?})"),
                    };
                    return Err(V::Invalid(format!(
                        "ScalarE tensor_scalar accepts only (multiply, add), (multiply) or (add), \
                         not {given} (neuroncore.md §2.3); run it on VectorE"
                    )));
                }
            }
            _ => {
                return Err(V::Invalid(format!(
                    "tensor_scalar runs on VectorE or ScalarE, not {}",
                    eng.doc_name()
                )))
            }
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "src", &s)?;
        Self::check_bitwise_inputs(
            eng,
            &[op0.0, op1.map_or(Alu::Bypass, |o| o.0)],
            &[("src", &s)],
        )?;
        let mut cols: Vec<(TileView, Region)> = Vec::new();
        for (name, (op, sc)) in
            [("scalar0", &op0)].into_iter().chain(op1.as_ref().map(|o| ("scalar1", o)))
        {
            // A bitwise operator's scalar is an integer like its data (neuroncore.md §2.2);
            // every other operator's is fp32 (§2.3).
            Self::check_bitwise_scalar(eng, name, *op, sc)?;
            if let Some((c, rc)) = self.check_scalar_col(name, sc, s.np)? {
                if !op.is_bitwise() && c.tile.dtype != Dtype::F32 {
                    return Err(V::DtypeNotAllowed {
                        engine: eng.doc_name(),
                        operand: name,
                        dtype: c.tile.dtype,
                        rule: "tensor_scalar operands are fp32 (neuroncore.md §2.3)",
                    });
                }
                cols.push((c, rc));
            }
        }
        let reduce = match reduce {
            Some((op, r)) => {
                // One arithmetic operator, then the reduce (neuroncore.md §2.3).
                if op0.0.is_bitwise() {
                    return Err(V::Invalid(format!(
                        "tensor_scalar_reduce takes one arithmetic operator, not {:?} \
                         (neuroncore.md §2.3)",
                        op0.0
                    )));
                }
                if !op.is_reduction() {
                    return Err(V::Invalid(format!(
                        "{op:?} is not a reduction operator (neuroncore.md §2.2)"
                    )));
                }
                // Its page lists the arithmetic five, not the bitwise or logical reductions.
                if !op.is_arithmetic_reduction() {
                    return Err(V::Invalid(format!(
                        "tensor_scalar_reduce reduces with add, subtract, multiply, max or min, \
                         not {op:?} (nki.isa.tensor_scalar_reduce; neuroncore.md §2.3)"
                    )));
                }
                Some((op, r, self.check_column("reduce_res", &r, s.np)?))
            }
            None => None,
        };
        let opcode = if reduce.is_some() { 17 } else { 11 };
        self.h(&[opcode, eng as u8, op0.0.code(), op1.map_or(255, |o| o.0.code())]);
        self.h_tile(&d);
        self.h_tile(&s);
        for sc in std::iter::once(&op0.1).chain(op1.as_ref().map(|o| &o.1)) {
            self.h_scalar(sc);
        }
        if let Some((op, r, _)) = &reduce {
            self.h_op(&[op.code()], &[r]);
        }
        if self.mode.functional {
            let (mut x, mut s0, mut s1) = (Vec::new(), Vec::new(), Vec::new());
            self.gather_tile("src", &s, &mut x)?;
            self.gather_scalar("scalar0", &op0.1, s.np, &mut s0)?;
            if let Some((_, sc)) = &op1 {
                self.gather_scalar("scalar1", sc, s.np, &mut s1)?;
            }
            let (f, dt) = (s.free.elems() as usize, s.tile.dtype);
            for p in 0..s.np as usize {
                for v in &mut x[p * f..(p + 1) * f] {
                    *v = op0.0.apply_as(*v, s0[p], dt);
                    if let Some((op, _)) = &op1 {
                        *v = op.apply_as(*v, s1[p], dt);
                    }
                }
            }
            self.scatter_tile(&d, &x);
            if let Some((op, r, _)) = &reduce {
                let red: Vec<f32> = x
                    .chunks(f)
                    .map(|row| row.iter().fold(op.reduce_init(), |acc, &v| op.apply(acc, v)))
                    .collect();
                self.scatter_tile(r, &red);
            }
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let mut reads = vec![(&s, rs)];
        reads.extend(cols.iter().map(|(c, r)| (c, *r)));
        let loc = SourceLoc::from_location(loc);
        if let Some((_, r, rr)) = &reduce {
            // §2.3: no performance-mode speed-up is documented for tensor_scalar_reduce.
            let cycles = cost::tensor_scalar_reduce(self.min_ii(eng), n);
            let writes = [(&d, rd), (r, *rr)];
            return self.schedule("tensor_scalar_reduce", eng, cycles, &reads, &writes, loc);
        }
        let speedup = self.copy_speedup(eng, &s, &d);
        let cycles = cost::tensor_scalar(self.min_ii(eng), n, speedup);
        let writes = [(&d, rd)];
        self.schedule("tensor_scalar", eng, cycles, &reads, &writes, loc)
    }

    /// `tensor_reduce` on VectorE: reduce the last free dim of `src` into `dst`
    /// (`[P, N] → [P, 1]`, `[P, B, N] → [P, B]`), optionally negated. `op` is a legal
    /// reduction ([`Alu::is_reduction`]): add, subtract, multiply, max, min, the logical
    /// and/or/xor, or the bitwise and/or/xor, which need integer `src` and `dst` and take no
    /// `negate` (nki.isa.tensor_reduce; neuroncore.md §2.2).
    #[track_caller]
    pub fn tensor_reduce(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op: Alu,
        negate: bool,
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("tensor_reduce", |nc, loc| nc.exec_tensor_reduce(d, s, op, negate, loc))
    }

    /// Executes `tensor_reduce`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_tensor_reduce(
        &mut self,
        d: TileView,
        s: TileView,
        op: Alu,
        negate: bool,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        if !op.is_reduction() {
            return Err(V::Invalid(format!(
                "{op:?} is not a reduction operator (neuroncore.md §2.2)"
            )));
        }
        if op.is_bitwise() {
            // Bitvec reductions read and write bit patterns: integer types on both sides,
            // and no negation, which is for arithmetic reductions (nki.isa.tensor_reduce).
            Self::check_bitwise_inputs(Engine::Vector, &[op], &[("src", &s), ("dst", &d)])?;
            if negate {
                return Err(V::Invalid(format!(
                    "tensor_reduce negates arithmetic reductions only, not {op:?} \
                     (nki.isa.tensor_reduce; neuroncore.md §2.3)"
                )));
            }
        }
        let inner = *s.free.as_slice().last().map(|(_, n)| n).unwrap_or(&1);
        let outer = s.free.elems() / inner;
        if d.np != s.np || d.free.elems() != outer {
            let across = if d.np != s.np {
                "; reductions run along the free axis, each partition on its own: to reduce \
                 across partitions, use a matmul against a ones vector (nc_matmul with a [P, 1] \
                 ones tile as stationary gives the [1, N] sums in PSUM) or transpose first"
            } else {
                ""
            };
            return Err(V::ShapeMismatch(format!(
                "reducing the last free dim of [{} x {:?}] gives [{} x {outer}], dst is [{} x \
                 {}]{across}",
                s.np,
                s.free.shape(),
                s.np,
                d.np,
                d.free.elems()
            )));
        }
        self.h_op(&[12, op.code(), negate as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            let out: Vec<f32> = x
                .chunks(inner as usize)
                .map(|c| {
                    let r = c.iter().fold(op.reduce_init(), |acc, &v| op.apply(acc, v));
                    if negate {
                        -r
                    } else {
                        r
                    }
                })
                .collect();
            self.scatter_tile(&d, &out);
        }
        let bf = s.tile.dtype == Dtype::Bf16
            && d.tile.dtype == Dtype::Bf16
            && matches!(op, Alu::Add | Alu::Max);
        let cycles = cost::tensor_reduce(Self::n_with_stride(&[&s]), bf);
        self.schedule(
            "tensor_reduce",
            Engine::Vector,
            cycles,
            &[(&s, rs)],
            &[(&d, rd)],
            SourceLoc::from_location(loc),
        )
    }

    /// `tensor_copy` on VectorE (ScalarE or GpSimd via [`Nc::on`]), casting to dst's dtype.
    #[track_caller]
    pub fn tensor_copy(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        self.on(Engine::Vector).tensor_copy(dst, src)
    }

    /// Executes `tensor_copy`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_tensor_copy(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if eng == Engine::Tensor {
            return Err(V::Invalid(
                "tensor_copy runs on VectorE, ScalarE or GpSimd, not TensorE".into(),
            ));
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "src", &s)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "src", &s)?;
        self.h_op(&[13, eng as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = self.take_vals();
            self.gather_tile("src", &s, &mut x)?;
            self.scatter_tile(&d, &x);
            self.give_vals([x]);
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let cycles = cost::tensor_copy(self.min_ii(eng), n, self.copy_speedup(eng, &s, &d));
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule("tensor_copy", eng, cycles, &reads, &writes, SourceLoc::from_location(loc))
    }

    /// `memset` on VectorE (GpSimd via [`Nc::on`]).
    #[track_caller]
    pub fn memset(&mut self, dst: impl Into<TileView>, value: f32) -> SimResult<()> {
        self.on(Engine::Vector).memset(dst, value)
    }

    /// Executes `memset`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_memset(
        &mut self,
        eng: Engine,
        d: TileView,
        value: f32,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !matches!(eng, Engine::Vector | Engine::GpSimd) {
            return Err(V::Invalid(format!(
                "memset runs on VectorE or GpSimd, not {}",
                eng.doc_name()
            )));
        }
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("dst", &d)?;
        self.h(&[14, eng as u8]);
        self.h_tile(&d);
        self.h64(value.to_bits() as u64);
        if self.mode.functional {
            let vals = vec![value; (d.np as u64 * d.free.elems()) as usize];
            self.scatter_tile(&d, &vals);
        }
        let zero16 = value == 0.0 && matches!(d.tile.dtype, Dtype::Bf16 | Dtype::F16);
        let cycles = cost::memset(self.min_ii(eng), Self::n_with_stride(&[&d]), zero16);
        self.schedule("memset", eng, cycles, &[], &[(&d, rd)], SourceLoc::from_location(loc))
    }

    /// `bn_stats` on VectorE: per partition, for the even and the odd elements of `src`
    /// (N ≤ 512), the triple (count, mean, variance) → `dst` `[P, 6]`.
    #[track_caller]
    pub fn bn_stats(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("bn_stats", |nc, loc| nc.exec_bn(true, d, s, loc))
    }

    /// `bn_aggr` on VectorE: combine `k` (count, mean, variance) triples of `src` `[P, 3k]`
    /// into (mean, variance) in `dst` `[P, 2]`.
    #[track_caller]
    pub fn bn_aggr(&mut self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("bn_aggr", |nc, loc| nc.exec_bn(false, d, s, loc))
    }

    /// Executes `bn_stats` (`stats`) and `bn_aggr`: checks, hash, values, schedule
    /// (see [`Nc::issue`]).
    fn exec_bn(
        &mut self,
        stats: bool,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        let n = s.free.elems();
        let want = if stats { 6 } else { 2 };
        if d.np != s.np || d.free.elems() != want {
            return Err(V::ShapeMismatch(format!(
                "dst must be [{} x {want}], is [{} x {}]",
                s.np,
                d.np,
                d.free.elems()
            )));
        }
        if stats && n > 512 {
            return Err(V::FreeSizeTooLarge {
                operand: "src",
                elems: n,
                memory: "bn_stats",
                max: 512,
            });
        }
        if !stats && !n.is_multiple_of(3) {
            return Err(V::ShapeMismatch(format!(
                "bn_aggr takes (count, mean, var) triples, src has {n} elements"
            )));
        }
        self.h_op(&[16, stats as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            let mut out = Vec::new();
            for row in x.chunks(n as usize) {
                if stats {
                    for parity in 0..2 {
                        let v: Vec<f64> =
                            row.iter().skip(parity).step_by(2).map(|&v| v as f64).collect();
                        let c = v.len() as f64;
                        let mean = if c > 0.0 { v.iter().sum::<f64>() / c } else { 0.0 };
                        let var = if c > 0.0 {
                            v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / c
                        } else {
                            0.0
                        };
                        out.extend([c as f32, mean as f32, var as f32]);
                    }
                } else {
                    let (mut c, mut mean, mut m2) = (0f64, 0f64, 0f64);
                    for t in row.chunks(3) {
                        let (cb, mb, vb) = (t[0] as f64, t[1] as f64, t[2] as f64);
                        if cb == 0.0 {
                            continue;
                        }
                        let tot = c + cb;
                        let delta = mb - mean;
                        mean += delta * cb / tot;
                        m2 += vb * cb + delta * delta * c * cb / tot;
                        c = tot;
                    }
                    out.extend([mean as f32, if c > 0.0 { (m2 / c) as f32 } else { 0.0 }]);
                }
            }
            self.scatter_tile(&d, &out);
        }
        let min_ii = self.chip.vector.min_ii_cycles;
        let cycles = if stats { cost::bn_stats(min_ii, n) } else { cost::bn_aggr(min_ii, n) };
        let opcode = if stats { "bn_stats" } else { "bn_aggr" };
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule(
            opcode,
            Engine::Vector,
            cycles,
            &reads,
            &writes,
            SourceLoc::from_location(loc),
        )
    }

    /// The operand rules of an element-wise instruction with two tensor inputs and an
    /// output (`tensor_tensor`, `scalar_tensor_tensor`, `tensor_tensor_scan`): each a valid
    /// view the engine may access, within the free size; all three of one shape; the inputs
    /// not both in PSUM (`rule`). Returns the regions of the inputs and the output.
    fn check_binary(
        &self,
        eng: Engine,
        [(a_name, a), (b_name, b), (d_name, d)]: [(&'static str, &TileView); 3],
        rule: &'static str,
    ) -> VResult<[Region; 3]> {
        let mut regions = [Region::default(); 3];
        for (i, (name, v)) in [(a_name, a), (b_name, b), (d_name, d)].into_iter().enumerate() {
            regions[i] = self.check_tile(name, v)?;
            Self::check_engine_mem(eng, name, v)?;
            self.check_free_size(name, v)?;
        }
        self.same_shape(a_name, a, b_name, b)?;
        self.same_shape(d_name, d, a_name, a)?;
        Self::not_both_psum(b_name, a, b, rule)?;
        Ok(regions)
    }

    /// A scalar operand's column, if it is one, checked as `[np, 1]` with its region.
    fn check_scalar_col(
        &self,
        operand: &'static str,
        sc: &Scalar,
        np: u32,
    ) -> VResult<Option<(TileView, Region)>> {
        match sc {
            Scalar::Imm(_) => Ok(None),
            Scalar::Col(c) => Ok(Some((*c, self.check_column(operand, c, np)?))),
        }
    }

    /// `scalar_tensor_tensor` on VectorE: `dst = (data op0 s0) op1 in1` element-wise, with
    /// `s0` an immediate or a `[P,1]` column and `in1` the shape of `data` (neuroncore.md
    /// §2.3).
    #[track_caller]
    pub fn scalar_tensor_tensor(
        &mut self,
        dst: impl Into<TileView>,
        data: impl Into<TileView>,
        op0: (Alu, Scalar),
        op1: Alu,
        in1: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, a, b) = (dst.into(), data.into(), in1.into());
        self.issue("scalar_tensor_tensor", |nc, loc| {
            nc.exec_scalar_tensor_tensor(d, a, op0, op1, b, loc)
        })
    }

    /// Executes `scalar_tensor_tensor`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_scalar_tensor_tensor(
        &mut self,
        d: TileView,
        a: TileView,
        op0: (Alu, Scalar),
        op1: Alu,
        b: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let eng = Engine::Vector;
        let [ra, rb, rd] = self.check_binary(
            eng,
            [("data", &a), ("in1", &b), ("dst", &d)],
            "scalar_tensor_tensor's data and in1 cannot both be in PSUM (neuroncore.md §2.3)",
        )?;
        Self::check_bitwise_inputs(eng, &[op0.0, op1], &[("data", &a), ("in1", &b)])?;
        Self::check_bitwise_scalar(eng, "scalar0", op0.0, &op0.1)?;
        let col = self.check_scalar_col("scalar0", &op0.1, a.np)?;
        self.h_op(&[18, op0.0.code(), op1.code()], &[&d, &a, &b]);
        self.h_scalar(&op0.1);
        if self.mode.functional {
            let (mut x, mut y, mut s0) = (Vec::new(), Vec::new(), Vec::new());
            self.gather_tile("data", &a, &mut x)?;
            self.gather_tile("in1", &b, &mut y)?;
            self.gather_scalar("scalar0", &op0.1, a.np, &mut s0)?;
            let (f, dt) = (a.free.elems() as usize, a.tile.dtype);
            for (i, (u, v)) in x.iter_mut().zip(&y).enumerate() {
                *u = op1.apply_as(op0.0.apply_as(*u, s0[i / f], dt), *v, dt);
            }
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&a, &b, &d]);
        let bf = |v: &TileView| v.tile.dtype == Dtype::Bf16;
        let one_pass = bf(&a)
            && bf(&b)
            && op0.0 == Alu::Subtract
            && op1 == Alu::Multiply
            && a.free.elems().is_multiple_of(2);
        let cycles = cost::scalar_tensor_tensor(n, one_pass);
        let mut reads = vec![(&a, ra), (&b, rb)];
        reads.extend(col.iter().map(|(c, r)| (c, *r)));
        let loc = SourceLoc::from_location(loc);
        self.schedule("scalar_tensor_tensor", eng, cycles, &reads, &[(&d, rd)], loc)
    }

    /// `tensor_tensor_scan` on VectorE: per partition, along the free elements in order,
    /// `dst[i] = (data0[i] op0 dst[i-1]) op1 data1[i]` with `dst[-1] = initial` (an
    /// immediate or a `[P,1]` column) (neuroncore.md §2.3).
    #[track_caller]
    pub fn tensor_tensor_scan(
        &mut self,
        dst: impl Into<TileView>,
        data0: impl Into<TileView>,
        data1: impl Into<TileView>,
        initial: impl Into<Scalar>,
        op0: Alu,
        op1: Alu,
    ) -> SimResult<()> {
        let (d, a, b, init) = (dst.into(), data0.into(), data1.into(), initial.into());
        self.issue("tensor_tensor_scan", |nc, loc| {
            nc.exec_tensor_tensor_scan(d, a, b, init, op0, op1, loc)
        })
    }

    /// Executes `tensor_tensor_scan`: checks, hash, values, schedule (see [`Nc::issue`]).
    #[allow(clippy::too_many_arguments)]
    fn exec_tensor_tensor_scan(
        &mut self,
        d: TileView,
        a: TileView,
        b: TileView,
        init: Scalar,
        op0: Alu,
        op1: Alu,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let eng = Engine::Vector;
        let [ra, rb, rd] = self.check_binary(
            eng,
            [("data0", &a), ("data1", &b), ("dst", &d)],
            "tensor_tensor_scan's data0 and data1 cannot both be in PSUM (neuroncore.md §2.3)",
        )?;
        // "op0 and op1 are any arithmetic operators" (neuroncore.md §2.3): not bitwise ones.
        if let Some(op) = [op0, op1].into_iter().find(|op| op.is_bitwise()) {
            return Err(V::Invalid(format!(
                "tensor_tensor_scan's op0 and op1 are arithmetic operators, not {op:?} \
                 (neuroncore.md §2.3)"
            )));
        }
        let col = self.check_scalar_col("initial", &init, a.np)?;
        self.h_op(&[19, op0.code(), op1.code()], &[&d, &a, &b]);
        self.h_scalar(&init);
        if self.mode.functional {
            let (mut x, mut y, mut r0) = (Vec::new(), Vec::new(), Vec::new());
            self.gather_tile("data0", &a, &mut x)?;
            self.gather_tile("data1", &b, &mut y)?;
            self.gather_scalar("initial", &init, a.np, &mut r0)?;
            let f = a.free.elems() as usize;
            for ((row, y), &r0) in x.chunks_mut(f).zip(y.chunks(f)).zip(&r0) {
                let mut r = r0;
                for (u, &v) in row.iter_mut().zip(y) {
                    r = op1.apply(op0.apply(*u, r), v);
                    *u = r;
                }
            }
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&a, &b, &d]);
        let cycles = cost::tensor_tensor_scan(self.min_ii(eng), n);
        let mut reads = vec![(&a, ra), (&b, rb)];
        reads.extend(col.iter().map(|(c, r)| (c, *r)));
        let loc = SourceLoc::from_location(loc);
        self.schedule("tensor_tensor_scan", eng, cycles, &reads, &[(&d, rd)], loc)
    }

    /// `reciprocal` on VectorE (ScalarE via [`Nc::on`]): `dst = 1 / src` element-wise.
    #[track_caller]
    pub fn reciprocal(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        self.on(Engine::Vector).reciprocal(dst, src)
    }

    /// Executes `reciprocal`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_reciprocal(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !matches!(eng, Engine::Vector | Engine::Scalar) {
            return Err(V::Invalid(format!(
                "reciprocal runs on VectorE or ScalarE, not {}",
                eng.doc_name()
            )));
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "src", &s)?;
        self.h_op(&[21, eng as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            for v in &mut x {
                *v = 1.0 / *v;
            }
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let per_elem =
            if eng == Engine::Vector { self.chip.vector.reciprocal_cycles_per_elem } else { 1 };
        let cycles = cost::reciprocal(self.min_ii(eng), n, per_elem);
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule("reciprocal", eng, cycles, &reads, &writes, SourceLoc::from_location(loc))
    }
}

impl On<'_> {
    /// `tensor_tensor` on the chosen engine: VectorE or GpSimd (int32 and `power` only
    /// there).
    #[track_caller]
    pub fn tensor_tensor(
        self,
        dst: impl Into<TileView>,
        a: impl Into<TileView>,
        b: impl Into<TileView>,
        op: Alu,
    ) -> SimResult<()> {
        let (d, a, b, engine) = (dst.into(), a.into(), b.into(), self.engine);
        self.nc.issue("tensor_tensor", |nc, loc| nc.exec_tensor_tensor(engine, d, a, b, op, loc))
    }

    /// `tensor_scalar` on the chosen engine: VectorE, or ScalarE (multiply and add only).
    #[track_caller]
    pub fn tensor_scalar(
        self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
    ) -> SimResult<()> {
        let (d, s, engine) = (dst.into(), src.into(), self.engine);
        self.nc.issue("tensor_scalar", |nc, loc| {
            nc.exec_tensor_scalar(engine, d, s, op0, op1, None, loc)
        })
    }

    /// `tensor_copy` on the chosen engine: VectorE, ScalarE or GpSimd.
    #[track_caller]
    pub fn tensor_copy(self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let (d, s, engine) = (dst.into(), src.into(), self.engine);
        self.nc.issue("tensor_copy", |nc, loc| nc.exec_tensor_copy(engine, d, s, loc))
    }

    /// `memset` on the chosen engine: VectorE or GpSimd.
    #[track_caller]
    pub fn memset(self, dst: impl Into<TileView>, value: f32) -> SimResult<()> {
        let (d, engine) = (dst.into(), self.engine);
        self.nc.issue("memset", |nc, loc| nc.exec_memset(engine, d, value, loc))
    }

    /// `reciprocal` on the chosen engine: VectorE (more precise, `max(MIN_II, k·N)` with the
    /// chip's `reciprocal_cycles_per_elem` k) or
    /// ScalarE (`max(MIN_II, N)`).
    #[track_caller]
    pub fn reciprocal(self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let (d, s, engine) = (dst.into(), src.into(), self.engine);
        self.nc.issue("reciprocal", |nc, loc| nc.exec_reciprocal(engine, d, s, loc))
    }
}
