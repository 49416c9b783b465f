//! GpSimd instructions: `iota` and `affine_select` (an affine expression of the indices,
//! written or compared per element).

use super::{Affine, Nc, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::{Cmp, Engine};
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

impl Nc {
    /// `iota` on GpSimd: `dst[p, i...] = expr(p, i...)` computed in int32, cast to dst.
    #[track_caller]
    pub fn iota(&mut self, dst: impl Into<TileView>, expr: Affine) -> SimResult<()> {
        let d = dst.into();
        self.issue("iota", |nc, loc| nc.exec_affine("iota", d, None, expr, Cmp::Ge, 0.0, loc))
    }

    /// `affine_select` on GpSimd: `dst = src where (expr cmp 0) else on_false` — e.g. a causal
    /// mask with `expr = q0 - k0 + p - j` and `Cmp::Ge`.
    #[track_caller]
    pub fn affine_select(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        expr: Affine,
        cmp: Cmp,
        on_false: f32,
    ) -> SimResult<()> {
        let (d, s) = (dst.into(), Some(src.into()));
        self.issue("affine_select", |nc, loc| {
            nc.exec_affine("affine_select", d, s, expr, cmp, on_false, loc)
        })
    }

    /// Executes `iota` (no `src`) and `affine_select`: checks, hash, values, schedule
    /// (see [`Nc::issue`]).
    #[allow(clippy::too_many_arguments)]
    fn exec_affine(
        &mut self,
        opcode: &'static str,
        d: TileView,
        s: Option<TileView>,
        expr: Affine,
        cmp: Cmp,
        on_false: f32,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rd = self.check_tile("dst", &d)?;
        if d.tile.mem != Mem::Sbuf {
            return Err(V::MemoryNotAllowed {
                operand: "dst",
                memory: d.tile.mem.name(),
                rule: "GpSimd writes SBUF only (neuroncore.md §2.3)",
            });
        }
        let mut reads = Vec::new();
        if let Some(s) = &s {
            reads.push((s, self.check_tile("src", s)?));
            if s.tile.mem != Mem::Sbuf {
                return Err(V::MemoryNotAllowed {
                    operand: "src",
                    memory: s.tile.mem.name(),
                    rule: "GpSimd reads SBUF only (neuroncore.md §2.3)",
                });
            }
            self.same_shape("dst", &d, "src", s)?;
        }
        self.h(&[15, s.is_some() as u8, cmp as u8]);
        self.h_tile(&d);
        if let Some(s) = &s {
            self.h_tile(s);
        }
        self.h64(expr.offset as u64);
        self.h64(expr.partition as u64);
        for f in expr.free {
            self.h64(f as u64);
        }
        self.h64(on_false.to_bits() as u64);
        if self.mode.functional {
            let mut x = Vec::new();
            if let Some(s) = &s {
                self.gather_tile("src", s, &mut x)?;
            }
            let shape = d.free.shape();
            let f = d.free.elems() as usize;
            let mut out = vec![0f32; d.np as usize * f];
            for p in 0..d.np as usize {
                for j in 0..f {
                    // Unflatten j into the view's free indices.
                    let (mut rest, mut v) = (j as u64, expr.offset + expr.partition * p as i64);
                    for (k, &n) in shape.iter().enumerate().rev() {
                        v += expr.free[k] * (rest % n) as i64;
                        rest /= n;
                    }
                    out[p * f + j] = match &s {
                        None => Dtype::I32.round(v as f32),
                        Some(_) if cmp.holds(v) => x[p * f + j],
                        Some(_) => on_false,
                    };
                }
            }
            self.scatter_tile(&d, &out);
        }
        let cycles = cost::gpsimd_start_plus_n(self.chip.gpsimd.start_cycles, d.free.elems());
        let writes = [(&d, rd)];
        self.schedule(
            opcode,
            Engine::GpSimd,
            cycles,
            &reads,
            &writes,
            SourceLoc::from_location(loc),
        )
    }
}
