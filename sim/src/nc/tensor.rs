//! TensorE instructions: `nc_matmul` (SBUF × SBUF → PSUM), its transpose mode
//! (`is_transpose=True`), and `nc_transpose` (also on VectorE, for up to 32 × 32). Both
//! TensorE transposes are the same matmul by an identity and share one cost path
//! ([`Nc::tensor_transpose_cycles`]).

use super::values::transpose_into;
use super::{Nc, On, VResult};
use crate::cost;
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::isa::Engine;
use crate::timing::Region;
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

impl Nc {
    /// `nc_matmul`: `dst[M,N] (+)= stationary[K,M].T @ moving[K,N]` on the PE array, into
    /// PSUM (neuroncore.md §2.1, §2.3, §2.4). `accumulate = false` starts an accumulation
    /// group (overwrites), `true` adds to what the group holds.
    #[track_caller]
    pub fn matmul(
        &mut self,
        dst: impl Into<TileView>,
        stationary: impl Into<TileView>,
        moving: impl Into<TileView>,
        accumulate: bool,
    ) -> SimResult<()> {
        let (d, s, m) = (dst.into(), stationary.into(), moving.into());
        self.issue("nc_matmul", |nc, loc| nc.exec_matmul(&d, &s, &m, accumulate, loc))
    }

    /// Executes `nc_matmul`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_matmul(
        &mut self,
        d: &TileView,
        s: &TileView,
        m: &TileView,
        accumulate: bool,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let sbuf_input = |name, v: &TileView| match v.tile.mem {
            Mem::Sbuf => Ok(()),
            mem => Err(V::MemoryNotAllowed {
                operand: name,
                memory: mem.name(),
                rule: "TensorE reads its inputs only from SBUF (neuroncore.md §1.4)",
            }),
        };
        sbuf_input("stationary", s)?;
        sbuf_input("moving", m)?;
        if d.tile.mem != Mem::Psum {
            return Err(V::MemoryNotAllowed {
                operand: "dst",
                memory: d.tile.mem.name(),
                rule: "TensorE writes its output only to PSUM (neuroncore.md §1.4)",
            });
        }
        let (rs, mm) = self.check_view_elems("stationary", s, true)?;
        let (rm, n) = self.check_view_elems("moving", m, true)?;
        let (rd, d_elems) = self.check_view_elems("dst", d, true)?;
        let multipliable = |name, v: &TileView| match v.tile.dtype {
            dt if !dt.is_float() => Err(V::DtypeNotAllowed {
                engine: "TensorE",
                operand: name,
                dtype: dt,
                rule: "the PE array multiplies fp8, bf16, fp16, tf32 or fp32, no integer type \
                       (neuroncore.md §2.3); convert with tensor_copy first",
            }),
            _ => Ok(()),
        };
        multipliable("stationary", s)?;
        multipliable("moving", m)?;
        let fp32 = s.tile.dtype == Dtype::F32 || m.tile.dtype == Dtype::F32;
        if fp32 && s.tile.dtype != m.tile.dtype {
            // The fp32 operand is the odd one out: the other dtypes pair with each other.
            let (name, rule) = if m.tile.dtype == Dtype::F32 {
                (
                    "moving",
                    "fp32 matmul operands only pair with fp32, and stationary is not fp32: cast \
                     one with tensor_copy so that both match (neuroncore.md §2.3)",
                )
            } else {
                (
                    "stationary",
                    "fp32 matmul operands only pair with fp32, and moving is not fp32: cast one \
                     with tensor_copy so that both match (neuroncore.md §2.3)",
                )
            };
            return Err(V::DtypeNotAllowed {
                engine: "TensorE",
                operand: name,
                dtype: Dtype::F32,
                rule,
            });
        }
        let psum_ok = d.tile.dtype == Dtype::F32
            || (self.chip.neuroncore_version >= 4 && d.tile.dtype == Dtype::Bf16);
        if !psum_ok {
            return Err(V::DtypeNotAllowed {
                engine: "TensorE",
                operand: "dst",
                dtype: d.tile.dtype,
                rule: "matmul accumulates into fp32 PSUM (bf16 also on NeuronCore-v4; §2.3)",
            });
        }
        let k = s.np as u64;
        if m.np as u64 != k {
            return Err(V::ShapeMismatch(format!(
                "matmul contracts over partitions: stationary has K={k}, moving has K={}",
                m.np
            )));
        }
        if mm > self.chip.tensor.stationary_fmax {
            return Err(V::StationaryFreeTooLarge { m: mm, max: self.chip.tensor.stationary_fmax });
        }
        let n_max = self.moving_fmax(d.tile.dtype);
        if n > n_max {
            return Err(V::MovingFreeTooLarge { n, max: n_max });
        }
        if d.np as u64 != mm || d_elems != n {
            return Err(V::ShapeMismatch(format!(
                "matmul of stationary [{k} x {mm}] and moving [{k} x {n}] writes [{mm} x {n}], \
                 dst is [{} x {}]",
                d.np,
                d.free.elems()
            )));
        }
        self.check_one_psum_bank(&rd)?;
        self.h_op(&[6, accumulate as u8], &[d, s, m]);
        if self.mode.functional {
            let (mut a, mut b, mut c) = (self.take_vals(), self.take_vals(), self.take_vals());
            self.gather_tile("stationary", s, &mut a)?;
            self.gather_tile("moving", m, &mut b)?;
            if accumulate {
                self.gather_tile("dst (accumulating)", d, &mut c)?;
            } else {
                c.resize((mm * n) as usize, 0.0);
            }
            // c[M,N] = a[K,M]^T · b[K,N] (+ c). matrixmultiply takes arbitrary strides.
            // SAFETY: the slices hold K·M, K·N and M·N elements and the strides stay inside them.
            unsafe {
                matrixmultiply::sgemm(
                    mm as usize,
                    k as usize,
                    n as usize,
                    1.0,
                    a.as_ptr(),
                    1,
                    mm as isize,
                    b.as_ptr(),
                    n as isize,
                    1,
                    if accumulate { 1.0 } else { 0.0 },
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            self.scatter_tile(d, &c);
            self.give_vals([a, b, c]);
        }
        let cycles =
            cost::matmul(self.chip.tensor.mm_min_cycles, mm, n, fp32, self.chip.tensor.fp32_factor);
        let flops = 2.0 * (k * mm * n) as f64;
        self.stats.matmuls += 1;
        self.stats.matmul_flops += flops;
        // neuron-profile's hardware_flops count an fp32 matmul twice (calibration.md §1.1:
        // 2 × 2·M·N·K, derived from the NKIBench matmul, swiglu and bmm counters).
        self.stats.hardware_flops += if fp32 { flops * 2.0 } else { flops };
        self.schedule(
            "nc_matmul",
            Engine::Tensor,
            cycles,
            &[(s, rs), (m, rm)],
            &[(d, rd)],
            SourceLoc::from_location(loc),
        )
    }

    /// `nc_transpose` on TensorE: `dst[F,P] = src[P,F]`, SBUF → PSUM, P, F ≤ 128.
    #[track_caller]
    pub fn transpose(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        self.on(Engine::Tensor).transpose(dst, src)
    }

    /// Executes `nc_transpose`: checks, hash, values, schedule (see [`Nc::issue`]).
    fn exec_transpose(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        let (p, f) = (s.np as u64, s.free.elems());
        let limit = match eng {
            Engine::Tensor => {
                if s.tile.mem != Mem::Sbuf || d.tile.mem != Mem::Psum {
                    return Err(V::MemoryNotAllowed {
                        operand: if s.tile.mem != Mem::Sbuf { "src" } else { "dst" },
                        memory: if s.tile.mem != Mem::Sbuf {
                            s.tile.mem.name()
                        } else {
                            d.tile.mem.name()
                        },
                        rule: "a TensorE transpose reads SBUF and writes PSUM (neuroncore.md §2.3)",
                    });
                }
                128
            }
            Engine::Vector => 32,
            _ => {
                return Err(V::Invalid(format!(
                    "nc_transpose runs on TensorE or VectorE, not {}",
                    eng.doc_name()
                )));
            }
        };
        if p > limit || f > limit {
            return Err(V::ShapeMismatch(format!(
                "{} transpose takes at most [{limit} x {limit}], src is [{p} x {f}]",
                eng.doc_name()
            )));
        }
        if d.tile.dtype != s.tile.dtype {
            return Err(V::DtypeNotAllowed {
                engine: eng.doc_name(),
                operand: "dst",
                dtype: d.tile.dtype,
                rule: "a transpose keeps the dtype: dst must match src (neuroncore.md §2.3)",
            });
        }
        if d.np as u64 != f || d.free.elems() != p {
            return Err(V::ShapeMismatch(format!(
                "transpose of [{p} x {f}] writes [{f} x {p}], dst is [{} x {}]",
                d.np,
                d.free.elems()
            )));
        }
        if eng == Engine::Tensor {
            // A matmul by an identity: its output is a matmul's, in one PSUM bank.
            self.check_one_psum_bank(&rd)?;
        }
        self.h_op(&[7, eng as u8], &[&d, &s]);
        if self.mode.functional {
            let (mut a, mut t) = (self.take_vals(), self.take_vals());
            self.gather_tile("src", &s, &mut a)?;
            transpose_into(&a, p as usize, f as usize, &mut t);
            self.scatter_tile(&d, &t);
            self.give_vals([a, t]);
        }
        // On TensorE a transpose is a matmul of the source (stationary, [P, F]) with a P x P
        // identity (moving), and costs what that matmul costs in the source's dtype, fp32
        // included (calibration.md §1.3, §3); neuron-profile counts it that way too, fp32
        // twice (calibration.md §1.1: 2·128³·2 per fp32 128 x 128 transpose).
        let fp32 = s.tile.dtype == Dtype::F32;
        let cycles = match eng {
            Engine::Tensor => self.tensor_transpose_cycles(p, f, s.tile.dtype),
            _ => cost::transpose_vector(self.chip.vector.min_ii_cycles, f),
        };
        if eng == Engine::Tensor {
            self.count_transpose_flops(p, f, fp32);
        }
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule("nc_transpose", eng, cycles, &reads, &writes, SourceLoc::from_location(loc))
    }
}

impl Nc {
    /// `nc_matmul(dst, stationary=data, moving=identity, is_transpose=True)`: TensorE moves
    /// `data[P, F]` through the PE array as a transpose, `dst[F, P] = dataᵀ`, bit-exact and in
    /// data's dtype (neuroncore.md §1.4 \[A2\]; nki.isa.nc_transpose: "a matrix multiplication
    /// between data as the stationary tensor and an identity matrix as the moving tensor").
    /// `identity` must be a `[P, P]` identity of data's dtype in SBUF (checked when values are
    /// computed); `dst` is in PSUM with data's dtype. It costs a matmul of that dtype:
    /// `max(min(64, F), P)`, ×4 for fp32 (§2.3), the same cost path as `nc_transpose`.
    #[track_caller]
    pub fn matmul_transpose(
        &mut self,
        dst: impl Into<TileView>,
        data: impl Into<TileView>,
        identity: impl Into<TileView>,
    ) -> SimResult<()> {
        let (d, s, m) = (dst.into(), data.into(), identity.into());
        self.issue("nc_matmul", |nc, loc| nc.exec_matmul_transpose(&d, &s, &m, loc))
    }

    /// The largest moving free size into a `dst_dtype` PSUM tile: `moving_fmax` (one bank
    /// of fp32 on v2/v3); on v4 the output may span all eight banks, 4096 fp32 or 8192 bf16
    /// elements (neuroncore.md §2.1), so the limit is in bytes there.
    fn moving_fmax(&self, dst_dtype: Dtype) -> u64 {
        let max = self.chip.tensor.moving_fmax;
        if self.chip.neuroncore_version >= 4 {
            max * 4 / dst_dtype.size() as u64
        } else {
            max
        }
    }

    /// Before NeuronCore-v4 a matmul's output (a transpose's too: a matmul by an identity)
    /// must lie in one PSUM bank (neuroncore.md §2.1).
    fn check_one_psum_bank(&self, r: &Region) -> VResult<()> {
        if self.chip.neuroncore_version >= 4 {
            return Ok(());
        }
        let bank = self.chip.memory.psum_bank_bytes_per_partition;
        let same_bank = if bank.is_power_of_two() {
            r.b0 >> bank.trailing_zeros() == (r.b1 - 1) >> bank.trailing_zeros()
        } else {
            r.b0 / bank == (r.b1 - 1) / bank
        };
        if !same_bank {
            return Err(V::PsumBankOverflow {
                operand: "dst",
                offset: r.b0 % bank,
                bytes: r.b1 - r.b0,
                bank_bytes: bank,
            });
        }
        Ok(())
    }

    /// TensorE cycles of a transpose of `[p, f]` elements of `dtype`: the matmul by a `[p, p]`
    /// identity ([`cost::transpose_tensor`]).
    fn tensor_transpose_cycles(&self, p: u64, f: u64, dtype: Dtype) -> u64 {
        let t = &self.chip.tensor;
        cost::transpose_tensor(t.mm_min_cycles, p, f, dtype == Dtype::F32, t.fp32_factor)
    }

    /// A TensorE transpose's FLOPs as neuron-profile counts them: the matmul by the
    /// identity, fp32 twice (calibration.md §1.1: 2·128³·2 per fp32 128 x 128 transpose), in
    /// both `transpose_flops` and `hardware_flops`.
    fn count_transpose_flops(&mut self, p: u64, f: u64, fp32: bool) {
        let flops = 2.0 * (p * p * f) as f64 * if fp32 { 2.0 } else { 1.0 };
        self.stats.transpose_flops += flops;
        self.stats.hardware_flops += flops;
    }

    /// Executes `nc_matmul(is_transpose=True)`: checks, hash, values, schedule.
    fn exec_matmul_transpose(
        &mut self,
        d: &TileView,
        s: &TileView,
        m: &TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        for (name, v) in [("stationary", s), ("moving", m)] {
            if v.tile.mem != Mem::Sbuf {
                return Err(V::MemoryNotAllowed {
                    operand: name,
                    memory: v.tile.mem.name(),
                    rule: "TensorE reads its inputs only from SBUF (neuroncore.md §1.4)",
                });
            }
        }
        if d.tile.mem != Mem::Psum {
            return Err(V::MemoryNotAllowed {
                operand: "dst",
                memory: d.tile.mem.name(),
                rule: "TensorE writes its output only to PSUM (neuroncore.md §1.4)",
            });
        }
        let (rs, f) = self.check_view_elems("stationary", s, true)?;
        let (rm, n) = self.check_view_elems("moving", m, true)?;
        let (rd, d_elems) = self.check_view_elems("dst", d, true)?;
        let dt = s.tile.dtype;
        if !dt.is_float() {
            return Err(V::DtypeNotAllowed {
                engine: "TensorE",
                operand: "stationary",
                dtype: dt,
                rule: "the PE array moves fp8, bf16, fp16, tf32 or fp32, no integer type \
                       (neuroncore.md §2.3)",
            });
        }
        for (name, v) in [("moving", m), ("dst", d)] {
            if v.tile.dtype != dt {
                return Err(V::DtypeNotAllowed {
                    engine: "TensorE",
                    operand: name,
                    dtype: v.tile.dtype,
                    rule: "transpose mode keeps the dtype: the identity and dst must have the \
                           data's dtype (neuroncore.md §1.4, §2.3)",
                });
            }
        }
        let p = s.np as u64;
        if m.np as u64 != p || n != p {
            return Err(V::ShapeMismatch(format!(
                "transpose mode multiplies data [{p} x {f}] by a [{p} x {p}] identity, moving is \
                 [{} x {n}]",
                m.np
            )));
        }
        if f > self.chip.tensor.stationary_fmax {
            return Err(V::StationaryFreeTooLarge { m: f, max: self.chip.tensor.stationary_fmax });
        }
        if d.np as u64 != f || d_elems != p {
            return Err(V::ShapeMismatch(format!(
                "transpose of [{p} x {f}] writes [{f} x {p}], dst is [{} x {d_elems}]",
                d.np
            )));
        }
        self.check_one_psum_bank(&rd)?;
        self.h_op(&[40], &[d, s, m]);
        if self.mode.functional {
            let (mut a, mut eye) = (self.take_vals(), self.take_vals());
            self.gather_tile("stationary", s, &mut a)?;
            self.gather_tile("moving", m, &mut eye)?;
            let pu = p as usize;
            if let Some(k) = (0..pu * pu).find(|&k| eye[k] != (k / pu == k % pu) as u8 as f32) {
                return Err(V::Invalid(format!(
                    "nc_matmul with is_transpose needs an identity moving tensor; moving[{}][{}] \
                     is {}",
                    k / pu,
                    k % pu,
                    eye[k]
                )));
            }
            let mut t = self.take_vals();
            transpose_into(&a, pu, f as usize, &mut t);
            self.scatter_tile(d, &t);
            self.give_vals([a, eye, t]);
        }
        let cycles = self.tensor_transpose_cycles(p, f, dt);
        self.count_transpose_flops(p, f, dt == Dtype::F32);
        // Its own name in profiles and traces, and not "nc_matmul": a transpose overwrites its
        // dst, it does not accumulate (the loop-carried check tells the two apart by name).
        self.schedule(
            "nc_matmul(is_transpose)",
            Engine::Tensor,
            cycles,
            &[(s, rs), (m, rm)],
            &[(d, rd)],
            SourceLoc::from_location(loc),
        )
    }
}

impl On<'_> {
    /// `nc_transpose` on the chosen engine: TensorE (SBUF → PSUM, P, F ≤ 128) or VectorE
    /// (P, F ≤ 32).
    #[track_caller]
    pub fn transpose(self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let (d, s, engine) = (dst.into(), src.into(), self.engine);
        self.nc.issue("nc_transpose", |nc, loc| nc.exec_transpose(engine, d, s, loc))
    }
}
