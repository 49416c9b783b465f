//! Helpers shared by the simulator's integration tests that build tiles from values and
//! read them back (each test file is its own crate: `mod common;` brings these in).
#![allow(dead_code)] // each test crate uses its own subset

use neuron_sim::{Chip, Dtype, ExecMode, Nc, Tile};

/// A functional trn2 core.
pub fn nc() -> Nc {
    Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL)
}

/// A fresh SBUF tile of `shape` named `name` (its own pool, so no two share a buffer).
pub fn tile(nc: &mut Nc, name: &str, dt: Dtype, shape: &[u64]) -> Tile {
    let pool = nc.sbuf_pool(name, 1);
    nc.tile_named(pool, name, dt, shape).unwrap()
}

/// A tile holding `vals` (row-major `shape`), loaded from HBM.
pub fn load(nc: &mut Nc, name: &str, dt: Dtype, shape: &[u64], vals: &[f32]) -> Tile {
    let h = nc.hbm_input(&format!("{name}_in"), dt, shape, vals).unwrap();
    let t = tile(nc, name, dt, shape);
    nc.dma(t, h).unwrap();
    t
}

/// The values of a whole tile, through HBM.
pub fn read(nc: &mut Nc, t: Tile) -> Vec<f32> {
    static OUTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = OUTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let shape = [t.partitions() as u64, t.free_elems()];
    let h = nc.hbm(&format!("out{k}"), t.dtype(), &shape).unwrap();
    nc.dma(h, t).unwrap();
    nc.read_hbm(h).unwrap().to_vec()
}
