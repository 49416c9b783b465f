//! The operands instructions take besides tile views: a scalar (immediate or per-partition
//! column), the options of `activation`, an affine index expression (`iota`,
//! `affine_select`) and a side of a DMA (HBM or tile). Plain values, checked when used.

use crate::isa::Alu;
use crate::view::*;

/// A scalar operand: an immediate, or a `[P, 1]` fp32 column (one value per partition).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Imm(f32),
    Col(TileView),
}

impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Imm(v)
    }
}
impl From<TileView> for Scalar {
    fn from(v: TileView) -> Self {
        Scalar::Col(v)
    }
}
impl From<Tile> for Scalar {
    fn from(v: Tile) -> Self {
        Scalar::Col(v.view())
    }
}

/// The source of [`Nc::tensor_copy_predicated`](crate::Nc::tensor_copy_predicated): a
/// tile, or a scalar written in `dst`'s dtype wherever the predicate selects. NKI takes a
/// Python float or int there, and only its kind must match `dst`'s: a float (`Float`) needs
/// a float `dst`, an int (`Int`) an integer one; the widths need not match (an int goes
/// into an int8, rounded and saturated as any write). `3.0` converts to `Float`, `3` to
/// `Int`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CopySrc {
    Tile(TileView),
    Float(f32),
    Int(i64),
}

impl From<TileView> for CopySrc {
    fn from(v: TileView) -> Self {
        CopySrc::Tile(v)
    }
}
impl From<Tile> for CopySrc {
    fn from(v: Tile) -> Self {
        CopySrc::Tile(v.view())
    }
}
impl From<f32> for CopySrc {
    fn from(v: f32) -> Self {
        CopySrc::Float(v)
    }
}
impl From<i32> for CopySrc {
    fn from(v: i32) -> Self {
        CopySrc::Int(v as i64)
    }
}
impl From<i64> for CopySrc {
    fn from(v: i64) -> Self {
        CopySrc::Int(v)
    }
}

/// Options of [`Nc::activation`](crate::Nc::activation): `dst = func(src * scale + bias)`, optionally
/// `reduce = reduce_op(dst)` along the free axis (neuroncore.md §1.5 ScalarE pipeline).
/// `reduce_op` is NKI's `reduce_op`: ScalarE's accumulator registers can only add, so any
/// other operator is refused (`ReduceOpNotAllowed`) when the instruction is issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActArgs {
    pub scale: Scalar,
    pub bias: Option<TileView>,
    pub reduce: Option<TileView>,
    pub reduce_op: Alu,
}

impl Default for ActArgs {
    fn default() -> Self {
        ActArgs { scale: Scalar::Imm(1.0), bias: None, reduce: None, reduce_op: Alu::Add }
    }
}

impl ActArgs {
    /// Multiply the input by `s` before the function: an immediate (`0.5`) or a `[P, 1]`
    /// tile, one factor per partition.
    pub fn scale(mut self, s: impl Into<Scalar>) -> Self {
        self.scale = s.into();
        self
    }
    /// Add a `[P, 1]` tile, one value per partition, after scaling. Only a tile: NKI's
    /// `activation` takes its bias as a vector, an immediate bias is a tile set once with
    /// `memset`.
    pub fn bias(mut self, b: impl Into<TileView>) -> Self {
        self.bias = Some(b.into());
        self
    }
    /// Reduce with add (the only reduction ScalarE has) into `r`, one element per partition.
    pub fn reduce(mut self, r: impl Into<TileView>) -> Self {
        self.reduce = Some(r.into());
        self
    }
    /// Reduce with `op` into `r`: NKI's `reduce_op=op, reduce_res=r`. Only [`Alu::Add`] is
    /// accepted by `activation`; the others are the kernel's error, as in NKI.
    pub fn reduce_with(mut self, op: Alu, r: impl Into<TileView>) -> Self {
        self.reduce = Some(r.into());
        self.reduce_op = op;
        self
    }
}

/// Options of [`Nc::activate2`](crate::Nc::activate2) (NeuronCore-v4): `dst =
/// func((src op0 imm0) op1 imm1)`, optionally `reduce = reduce_op(dst)` along the free axis.
/// `reverse0` computes `imm0 op0 src` instead (and `reverse1` likewise for op1). The default is
/// `(bypass, bypass)`, no reduction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Act2Args {
    pub op0: Alu,
    pub imm0: Scalar,
    pub op1: Alu,
    pub imm1: Scalar,
    pub reverse0: bool,
    pub reverse1: bool,
    pub reduce_op: Alu,
    pub reduce: Option<TileView>,
}

impl Default for Act2Args {
    fn default() -> Self {
        Act2Args {
            op0: Alu::Bypass,
            imm0: Scalar::Imm(0.0),
            op1: Alu::Bypass,
            imm1: Scalar::Imm(0.0),
            reverse0: false,
            reverse1: false,
            reduce_op: Alu::Add,
            reduce: None,
        }
    }
}

impl Act2Args {
    /// The tensor-scalar stage: `(src op0 imm0) op1 imm1`.
    pub fn ops(mut self, op0: (Alu, Scalar), op1: (Alu, Scalar)) -> Self {
        (self.op0, self.imm0, self.op1, self.imm1) = (op0.0, op0.1, op1.0, op1.1);
        self
    }
    /// `imm0 op0 src` and/or `imm1 op1 t` instead.
    pub fn reverse(mut self, reverse0: bool, reverse1: bool) -> Self {
        (self.reverse0, self.reverse1) = (reverse0, reverse1);
        self
    }
    /// Reduce the activated values of each partition with `op` into `r` (`[P, 1]`).
    pub fn reduce_with(mut self, op: Alu, r: impl Into<TileView>) -> Self {
        (self.reduce_op, self.reduce) = (op, Some(r.into()));
        self
    }
}

/// An affine integer expression over a view's indices:
/// `offset + partition * p + Σ free[i] * idx_i` (for `iota` and `affine_select`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Affine {
    pub offset: i64,
    pub partition: i64,
    pub free: [i64; MAX_FREE_DIMS],
}

impl Affine {
    /// `offset + partition * p + free0 * j` for 2-D views.
    pub fn new2(offset: i64, partition: i64, free0: i64) -> Self {
        Affine { offset, partition, free: [free0, 0, 0, 0] }
    }
}

/// One side of a DMA: an HBM access pattern or an on-chip tile view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Access {
    Hbm(HbmView),
    Tile(TileView),
}

impl From<HbmView> for Access {
    fn from(v: HbmView) -> Self {
        Access::Hbm(v)
    }
}
impl From<Hbm> for Access {
    fn from(v: Hbm) -> Self {
        Access::Hbm(v.view())
    }
}
impl From<TileView> for Access {
    fn from(v: TileView) -> Self {
        Access::Tile(v)
    }
}
impl From<Tile> for Access {
    fn from(v: Tile) -> Self {
        Access::Tile(v.view())
    }
}
