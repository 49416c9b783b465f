//! The functional model's memory access: gathering a view's values (reporting reads of
//! elements nothing wrote) and scattering results into a view, rounded to its dtype.

use super::{Nc, Scalar, VResult};
use crate::error::ViolationKind as V;
use crate::view::*;

impl Nc {
    /// Read a tile view as `[np][free]` values (row-major), checking for unwritten elements.
    pub(super) fn gather_tile(
        &mut self,
        operand: &'static str,
        v: &TileView,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        out.clear();
        let mut offs = std::mem::take(&mut self.scratch);
        v.free.offsets(v.offset, &mut offs);
        let b = &self.bufs[v.tile.buf as usize];
        out.reserve(v.np as usize * offs.len());
        for p in v.p0..v.p0 + v.np {
            let base = p as u64 * b.pstride;
            for &o in &offs {
                let i = base + o as u64;
                if !b.written.get(i) {
                    let lt = &self.logicals[b.logical as usize];
                    self.scratch = offs;
                    return Err(V::UnwrittenRead {
                        operand,
                        what: format!("tile `{}`", lt.name),
                        partition: p as u64,
                        element: o as u64,
                    });
                }
                out.push(b.data[i as usize]);
            }
        }
        self.scratch = offs;
        Ok(())
    }

    /// Write `[np][free]` values into a tile view, rounding to its dtype.
    pub(super) fn scatter_tile(&mut self, v: &TileView, vals: &[f32]) {
        let mut offs = std::mem::take(&mut self.scratch);
        v.free.offsets(v.offset, &mut offs);
        let dt = v.tile.dtype;
        let b = &mut self.bufs[v.tile.buf as usize];
        let mut k = 0;
        for p in v.p0..v.p0 + v.np {
            let base = p as u64 * b.pstride;
            for &o in &offs {
                let i = base + o as u64;
                b.data[i as usize] = dt.round(vals[k]);
                b.written.set(i);
                k += 1;
            }
        }
        self.scratch = offs;
    }

    fn hbm_offsets(v: &HbmView, out: &mut Vec<i64>) -> (u64, u64) {
        v.dims.offsets(v.offset, out);
        let parts = v.dims.as_slice().first().map_or(1, |d| d.1);
        (parts, out.len() as u64 / parts.max(1))
    }

    pub(super) fn gather_hbm(
        &mut self,
        operand: &'static str,
        v: &HbmView,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        let mut offs = std::mem::take(&mut self.scratch2);
        Self::hbm_offsets(v, &mut offs);
        let t = &self.hbm[v.tensor.id as usize];
        out.clear();
        out.reserve(offs.len());
        for &o in &offs {
            if !t.written.get(o as u64) {
                let (name, row) = (t.name.clone(), t.row_elems.max(1));
                self.scratch2 = offs;
                return Err(V::UnwrittenRead {
                    operand,
                    what: format!("HBM tensor `{name}`"),
                    partition: o as u64 / row,
                    element: o as u64 % row,
                });
            }
            out.push(t.data[o as usize]);
        }
        self.scratch2 = offs;
        Ok(())
    }

    pub(super) fn scatter_hbm(&mut self, v: &HbmView, vals: &[f32]) {
        let mut offs = std::mem::take(&mut self.scratch2);
        Self::hbm_offsets(v, &mut offs);
        let t = &mut self.hbm[v.tensor.id as usize];
        let dt = t.dtype;
        for (k, &o) in offs.iter().enumerate() {
            t.data[o as usize] = dt.round(vals[k]);
            t.written.set(o as u64);
        }
        self.scratch2 = offs;
    }

    pub(super) fn gather_scalar(
        &mut self,
        operand: &'static str,
        s: &Scalar,
        np: u32,
        out: &mut Vec<f32>,
    ) -> VResult<()> {
        match s {
            Scalar::Imm(x) => {
                out.clear();
                out.resize(np as usize, *x);
                Ok(())
            }
            Scalar::Col(v) => self.gather_tile(operand, v, out),
        }
    }
}
