//! `dma_transpose`: a 2-D transpose done by the DMA engines while they copy, NKI's
//! `nisa.dma_transpose` (and `nl.load_transpose2d`): `dst[j, i] = src[i, j]`, from HBM or
//! SBUF into SBUF. It is how a kernel gets a K^T or an A^T without spending TensorE time and
//! a PSUM bank on a transpose by identity, at the price of slower DMA (docs/dma.md §1).
//!
//! What is modelled, and what is not:
//! * **Values**: the exact transpose; the dtype is kept (2-byte dtypes only, the one case
//!   whose throughput is published).
//! * **Cost**: the direct copy of the same bytes into the destination's partitions
//!   ([`Nc::transfer`]: descriptors per contiguous run of the destination's rows, the rows
//!   split over the DMA engines by partition), its bytes streamed at 90 % of the engines'
//!   rate from HBM and 50 % from SBUF: the Trainium2 architecture guide's "up to 90 % of DMA
//!   throughput for HBM→SBUF, up to 50 % for SBUF→SBUF" (docs/neuroncore.md §1.7 [A2]).
//!   Those are best cases (partitions a multiple of 128, an inner free size a multiple of
//!   16); no figure is published for other shapes, so every shape gets them and the model
//!   is optimistic there. NeuronCore-v4 (trn3) is **assumed** to keep the v3 fractions; on
//!   NeuronCore-v2 (trn1) the instruction is refused: its DMA transpose is documented only as
//!   "much lower bandwidth" (§2.5 [PERF]), which gives no number to simulate.
//! * **Shapes**: 2-D only (NKI's `axes=(1, 0)`); the 3-D and 4-D permutations are refused.

use super::affine::Kind;
use super::dma::Transfer;
use super::{Access, Nc, VResult};
use crate::error::{SimResult, SourceLoc, ViolationKind as V};
use crate::view::*;
use std::panic::Location;

/// A DMA transpose from HBM streams at this share of the engines' rate, in thousandths
/// (neuroncore.md §1.7 [A2]: "up to 90 % of DMA throughput for HBM→SBUF").
pub(crate) const DMA_TRANSPOSE_FROM_HBM_PERMILLE: u16 = 900;
/// A DMA transpose from SBUF streams at this share (§1.7 [A2]: "up to 50 % for SBUF→SBUF").
pub(crate) const DMA_TRANSPOSE_FROM_SBUF_PERMILLE: u16 = 500;

impl Nc {
    /// DMA transpose: `dst[j, i] = src[i, j]` for a 2-D `src` of `[A, B]` (an HBM view of
    /// two dims, or an SBUF tile view of A partitions and one free dim of B) into an SBUF
    /// tile view of `[B, A]` (B partitions, so B ≤ 128). Both in one 2-byte dtype (bf16 or
    /// fp16). NeuronCore-v3 and later. NKI: `nisa.dma_transpose(dst, src)`.
    ///
    /// ```
    /// use neuron_sim::{Chip, Dtype, ExecMode, Nc};
    /// let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    /// let k = nc.hbm_input("k", Dtype::Bf16, &[3, 2], &[1., 2., 3., 4., 5., 6.])?;
    /// let pool = nc.sbuf_pool("sb", 1);
    /// let kt = nc.tile(pool, Dtype::Bf16, &[2, 3])?;
    /// nc.dma_transpose(kt, k)?;
    /// let out = nc.hbm("out", Dtype::Bf16, &[2, 3])?;
    /// nc.dma(out, kt)?;
    /// assert_eq!(nc.read_hbm(out).unwrap(), &[1., 3., 5., 2., 4., 6.]);
    /// # Ok::<(), neuron_sim::SimError>(())
    /// ```
    #[track_caller]
    pub fn dma_transpose(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<Access>,
    ) -> SimResult<()> {
        let (dst, src) = (dst.into(), src.into());
        self.issue("dma_transpose", |nc, loc| nc.exec_dma_transpose(dst, src, loc))
    }

    /// Executes `dma_transpose`: checks, hash, values, then the transfer ([`Nc::transfer`]).
    fn exec_dma_transpose(
        &mut self,
        dst: TileView,
        src: Access,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !self.chip.has_dma_transpose() {
            return Err(V::Invalid(format!(
                "dma_transpose has a published throughput only from NeuronCore-v3 (Trn2) on; {} \
                 is NeuronCore-v{}, whose DMA transpose is documented only as \"much lower \
                 bandwidth\": transpose on TensorE instead (nc.transpose; neuroncore.md §1.7, \
                 §2.5)",
                self.chip.name, self.chip.neuroncore_version
            )));
        }
        let dst_access = Access::Tile(dst);
        let (dp, df, ddt, drun, dst_region) = self.access_shape("dst", &dst_access)?;
        let (sp, sf, sdt, _, src_region) = self.access_shape("src", &src)?;
        let src_rank = match &src {
            Access::Tile(v) => 1 + v.free.len(),
            Access::Hbm(v) => v.dims.len(),
        };
        if src_rank != 2 || dst.free.len() != 1 {
            return Err(V::ShapeMismatch(format!(
                "dma_transpose simulates the 2-D transpose (axes (1, 0)): src must have 2 dims \
                 (has {src_rank}) and dst one partition dim and one free dim (has {}); split a \
                 3-D or 4-D transpose into 2-D ones (nki.isa.dma_transpose; neuroncore.md §2.3)",
                1 + dst.free.len()
            )));
        }
        if (dp, df) != (sf, sp) {
            return Err(V::ShapeMismatch(format!(
                "dma_transpose writes src [{sp} x {sf}] transposed, so dst must be [{sf} x {sp}], \
                 not [{dp} x {df}] (nki.isa.dma_transpose)"
            )));
        }
        for (operand, dtype) in [("src", sdt), ("dst", ddt)] {
            if !dtype.is_16bit_float() {
                return Err(V::DtypeNotAllowed {
                    engine: "DMA",
                    operand,
                    dtype,
                    rule: "dma_transpose moves 2-byte floats (bf16, fp16), the only dtypes with \
                           a published throughput (neuroncore.md §1.7, §2.3 dma_transpose)",
                });
            }
        }
        if ddt != sdt {
            return Err(V::ShapeMismatch(format!(
                "dma_transpose keeps the dtype: src is {sdt:?} and dst {ddt:?} (cast with \
                 tensor_copy first; nki.isa.dma_transpose)"
            )));
        }
        let src_region = self.access_region(src_region, &src);
        let dst_region = self.access_region(dst_region, &dst_access);
        if self.loops.active() {
            let touches = [
                self.dma_touch(&src, src_region, Kind::Read),
                self.dma_touch(&dst_access, dst_region, Kind::Write),
            ];
            self.check_dma_touches("dma_transpose", touches, loc)?;
        }
        // Program hash: its own tag (a transpose is not a copy of the same views).
        self.h(&[61]);
        self.h_tile(&dst);
        self.h_access(&src);
        if self.mode.functional {
            let mut vals = self.take_vals();
            self.gather_access("src", &src, &mut vals)?;
            let mut transposed = self.take_vals();
            let (rows, cols) = (sp as usize, sf as usize);
            transposed.extend(
                (0..cols)
                    .flat_map(|j| (0..rows).map(move |i| (i, j)))
                    .map(|(i, j)| vals[i * cols + j]),
            );
            self.scatter_tile(&dst, &transposed);
            self.give_vals([vals, transposed]);
        }
        let from_hbm = matches!(src, Access::Hbm(_));
        let transfer = Transfer {
            partitions: dp,
            free: df,
            dst_dtype: ddt,
            src_dtype: sdt,
            run: drun,
            p_base: dst.p0 as u64,
            src_hbm: from_hbm,
            dst_hbm: false,
            flat: false,
            rate_permille: if from_hbm {
                DMA_TRANSPOSE_FROM_HBM_PERMILLE
            } else {
                DMA_TRANSPOSE_FROM_SBUF_PERMILLE
            },
        };
        let args = move |nc: &Nc| {
            format!("dst={} src={}", super::schedule::describe(&dst), nc.describe_access(&src))
        };
        self.transfer(
            "dma_transpose",
            transfer,
            &[src_region],
            &[dst_region],
            SourceLoc::from_location(loc),
            args,
        )
    }
}
