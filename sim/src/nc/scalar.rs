//! ScalarE instructions: `activation` (`func(src * scale + bias)` with an optional
//! reduction along the free axis; also on GpSimd from NeuronCore-v4).

use super::{ActArgs, Nc, On, Scalar, VResult};
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
                    "activation runs on Scalar (and GpSimd from NeuronCore-v4), not {eng}"
                )))
            }
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "src", &s)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("src", &s)?;
        self.same_shape("dst", &d, "src", &s)?;
        if s.tile.dtype == Dtype::I32 {
            return Err(V::DtypeNotAllowed {
                engine: eng.name(),
                operand: "src",
                dtype: Dtype::I32,
                rule: "the activation table takes floating-point inputs (neuroncore.md §2.2)",
            });
        }
        let (mut bias_region, mut scale_region, mut reduce_region) = (None, None, None);
        if let Some(b) = &args.bias {
            bias_region = Some((b, self.check_column("bias", b, s.np)?));
            if !matches!(b.tile.dtype, Dtype::F32 | Dtype::Bf16 | Dtype::F16) {
                return Err(V::DtypeNotAllowed {
                    engine: eng.name(),
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
                engine: eng.name(),
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
            let (mut x, mut sc, mut bi) = (Vec::new(), Vec::new(), Vec::new());
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
