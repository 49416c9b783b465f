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
    pub fn scale(mut self, s: impl Into<Scalar>) -> Self {
        self.scale = s.into();
        self
    }
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
