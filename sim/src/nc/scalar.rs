//! ScalarE instructions: `activation` (`func(src * scale + bias)` with an optional add
//! reduction along the free axis; also on GpSimd from NeuronCore-v4) and NeuronCore-v4's
//! `activate2` (a tensor-scalar stage, the function, and a reduction by add, max, min or
//! absmax).

use super::{Act2Args, ActArgs, Nc, On, Scalar, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::{Act, Alu, Engine};
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

impl Nc {
    /// `activation` on ScalarE: `dst = func(src * scale + bias)`, optionally reducing the
    /// result along the free axis into `args.reduce` (neuroncore.md §1.5, §2.3).
    #[track_caller]
    pub fn activation(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        func: Act,
        args: ActArgs,
    ) -> SimResult<()> {
        self.on(Engine::Scalar).activation(dst, src, func, args)
    }

    /// Executes `activation`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_activation(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        func: Act,
        args: ActArgs,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        match eng {
            Engine::Scalar => {}
            Engine::GpSimd if self.chip.neuroncore_version >= 4 => {}
            _ => {
                return Err(V::Invalid(format!(
                    "activation runs on ScalarE (and GpSimd from NeuronCore-v4), not {}",
                    eng.doc_name()
                )))
            }
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "src", &s)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "src", &s)?;
        if !s.tile.dtype.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: eng.doc_name(),
                operand: "src",
                dtype: s.tile.dtype,
                rule: "the activation table takes floating-point inputs (neuroncore.md §2.2)",
            });
        }
        let (mut bias_region, mut scale_region, mut reduce_region) = (None, None, None);
        if let Some(b) = &args.bias {
            bias_region = Some((b, self.check_column("bias", b, s.np)?));
            if !matches!(b.tile.dtype, Dtype::F32 | Dtype::Bf16 | Dtype::F16) {
                return Err(V::DtypeNotAllowed {
                    engine: eng.doc_name(),
                    operand: "bias",
                    dtype: b.tile.dtype,
                    rule: "bias is a [P,1] fp32, fp16 or bf16 tile (neuroncore.md §2.3)",
                });
            }
        }
        if let Scalar::Col(c) = &args.scale {
            scale_region = Some((c, self.check_column("scale", c, s.np)?));
        }
        if let Some(r) = &args.reduce {
            reduce_region = Some((r, self.check_column("reduce", r, s.np)?));
        }
        if args.reduce_op != Alu::Add {
            // SDK 2.33's activation page: "reduce_op must be nl.add" on every NeuronCore; a
            // max/min takes a separate tensor_reduce (or activate2 on NeuronCore-v4).
            return Err(V::ReduceOpNotAllowed {
                instruction: "activation",
                engine: eng.doc_name(),
                op: args.reduce_op,
                rule: "the accumulator registers only add (neuroncore.md §2.3); reduce with \
                       max/min through a separate tensor_reduce of the activation's output",
            });
        }
        self.h(&[8, eng as u8, func.code()]);
        self.h_tile(&d);
        self.h_tile(&s);
        self.h_scalar(&args.scale);
        if let Some(b) = &args.bias {
            self.h_tile(b);
        }
        if let Some(r) = &args.reduce {
            self.h(&[9]);
            self.h_tile(r);
        }
        if self.mode.functional {
            let (mut x, mut sc, mut bi) = (self.take_vals(), self.take_vals(), self.take_vals());
            self.gather_tile("src", &s, &mut x)?;
            self.gather_scalar("scale", &args.scale, s.np, &mut sc)?;
            match &args.bias {
                Some(b) => self.gather_tile("bias", b, &mut bi)?,
                None => bi.resize(s.np as usize, 0.0),
            }
            let f = s.free.elems() as usize;
            let mut red = vec![0f32; s.np as usize];
            for p in 0..s.np as usize {
                for v in &mut x[p * f..(p + 1) * f] {
                    *v = func.apply(*v * sc[p] + bi[p]);
                    red[p] += *v;
                }
            }
            self.scatter_tile(&d, &x);
            if let Some(r) = &args.reduce {
                self.scatter_tile(r, &red);
            }
            self.give_vals([x, sc, bi]);
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let cycles = cost::activation(self.min_ii(eng), n, args.reduce.is_some(), 1);
        let mut reads = [(&s, rs); 3];
        let mut nr = 1;
        for r in [scale_region, bias_region].into_iter().flatten() {
            reads[nr] = r;
            nr += 1;
        }
        let mut writes = [(&d, rd); 2];
        let mut nw = 1;
        if let Some(r) = reduce_region {
            writes[nw] = r;
            nw += 1;
        }
        let (reads, writes) = (&reads[..nr], &writes[..nw]);
        self.schedule("activation", eng, cycles, reads, writes, SourceLoc::from_location(loc))
    }
}

impl Nc {
    /// `activate2` on ScalarE, NeuronCore-v4 only: `dst = func((src op0 imm0) op1 imm1)`,
    /// optionally reducing each partition's results with `reduce_op` into `args.reduce`. The
    /// tensor-scalar stage takes six (op0, op1) pairs: (multiply, add), (multiply, subtract),
    /// (multiply, bypass), (add, bypass), (subtract, bypass), (bypass, bypass); the reduction
    /// add, max, min or absmax (nki.isa.activate2, SDK 2.33; neuroncore.md §2.3). Its cost is
    /// not published: the simulator charges `activation`'s, `max(MIN_II, N)` plus `MIN_II`
    /// with a reduction **(assumed)**.
    #[track_caller]
    pub fn activate2(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        func: Act,
        args: Act2Args,
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), src.into());
        self.issue("activate2", |nc, loc| nc.exec_activate2(d, s, func, args, loc))
    }

    /// Executes `activate2`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_activate2(
        &mut self,
        d: TileView,
        s: TileView,
        func: Act,
        args: Act2Args,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let eng = Engine::Scalar;
        if self.chip.neuroncore_version < 4 {
            return Err(V::Invalid(format!(
                "activate2 is a NeuronCore-v4 instruction; {} is NeuronCore-v{} (reduce with \
                 max/min through a tensor_reduce of an activation's output there)",
                self.chip.name, self.chip.neuroncore_version
            )));
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.check_free_size("dst", &d)?;
        self.same_shape("dst", &d, "src", &s)?;
        if !s.tile.dtype.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: eng.doc_name(),
                operand: "src",
                dtype: s.tile.dtype,
                rule: "the activation table takes floating-point inputs (neuroncore.md §2.2)",
            });
        }
        use Alu::*;
        if !matches!(
            (args.op0, args.op1),
            (Multiply, Add)
                | (Multiply, Subtract)
                | (Multiply, Bypass)
                | (Add, Bypass)
                | (Subtract, Bypass)
                | (Bypass, Bypass)
        ) {
            return Err(V::Invalid(format!(
                "activate2 takes (op0, op1) = (multiply, add | subtract | bypass), (add, bypass), \
                 (subtract, bypass) or (bypass, bypass), not ({:?}, {:?})",
                args.op0, args.op1
            )));
        }
        let mut imm_regions = [None, None];
        for (i, (name, imm)) in [("imm0", &args.imm0), ("imm1", &args.imm1)].into_iter().enumerate()
        {
            if let Scalar::Col(c) = imm {
                imm_regions[i] = Some((c, self.check_column(name, c, s.np)?));
            }
        }
        let mut reduce_region = None;
        if let Some(r) = &args.reduce {
            if !matches!(args.reduce_op, Add | Max | Min | AbsMax) {
                return Err(V::ReduceOpNotAllowed {
                    instruction: "activate2",
                    engine: eng.doc_name(),
                    op: args.reduce_op,
                    rule: "activate2 reduces with add, max, min or absmax (neuroncore.md §2.3)",
                });
            }
            reduce_region = Some((r, self.check_column("reduce", r, s.np)?));
        }
        self.h(&[43, func.code(), args.op0.code(), args.op1.code()]);
        self.h(&[args.reverse0 as u8, args.reverse1 as u8, args.reduce_op.code()]);
        self.h_tile(&d);
        self.h_tile(&s);
        self.h_scalar(&args.imm0);
        self.h_scalar(&args.imm1);
        if let Some(r) = &args.reduce {
            self.h(&[9]);
            self.h_tile(r);
        }
        if self.mode.functional {
            let (mut x, mut i0, mut i1) = (Vec::new(), Vec::new(), Vec::new());
            self.gather_tile("src", &s, &mut x)?;
            self.gather_scalar("imm0", &args.imm0, s.np, &mut i0)?;
            self.gather_scalar("imm1", &args.imm1, s.np, &mut i1)?;
            let stage = |op: Alu, reverse: bool, v: f32, imm: f32| match (op, reverse) {
                (Bypass, _) => v,
                (_, false) => op.apply(v, imm),
                (_, true) => op.apply(imm, v),
            };
            let f = s.free.elems() as usize;
            let mut red = vec![args.reduce_op.reduce_init(); s.np as usize];
            for p in 0..s.np as usize {
                for v in &mut x[p * f..(p + 1) * f] {
                    let t = stage(args.op0, args.reverse0, *v, i0[p]);
                    *v = func.apply(stage(args.op1, args.reverse1, t, i1[p]));
                    red[p] = args.reduce_op.apply(red[p], *v);
                }
            }
            self.scatter_tile(&d, &x);
            if let Some(r) = &args.reduce {
                self.scatter_tile(r, &red);
            }
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let cycles = cost::activation(self.min_ii(eng), n, args.reduce.is_some(), 1);
        let mut reads = [(&s, rs); 3];
        let mut nr = 1;
        for r in imm_regions.into_iter().flatten() {
            reads[nr] = r;
            nr += 1;
        }
        let mut writes = [(&d, rd); 2];
        let mut nw = 1;
        if let Some(r) = reduce_region {
            writes[nw] = r;
            nw += 1;
        }
        let (reads, writes) = (&reads[..nr], &writes[..nw]);
        self.schedule("activate2", eng, cycles, reads, writes, SourceLoc::from_location(loc))
    }
}

impl On<'_> {
    /// `activation` on the chosen engine: ScalarE, or GpSimd from NeuronCore-v4.
    #[track_caller]
    pub fn activation(
        self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        func: Act,
        args: ActArgs,
    ) -> SimResult<()> {
        let (d, s, engine) = (dst.into(), src.into(), self.engine);
        self.nc.issue("activation", |nc, loc| nc.exec_activation(engine, d, s, func, args, loc))
    }
}
