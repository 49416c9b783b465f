//! Memory: HBM tensors, and SBUF/PSUM pools whose logical tiles each own a ring of `bufs`
//! buffers. Allocation checks capacity per pool and tile; the functional model's values and
//! written-element bitmaps live here; each buffer gets the timing model's buffer id.

use super::{Nc, VResult};
use crate::error::{PoolUse, SimError, SimResult, SourceLoc, TileUse, ViolationKind as V};
use crate::view::*;
use crate::Dtype;
use std::panic::Location;

/// Which elements of a buffer have been written (to report reads of fresh memory).
///
/// Once every element is written (`count == len`) the bits are no longer read, and they
/// stay allocated so that the buffer's next allocation ([`Written::reset`]) reuses them.
#[derive(Clone, Debug, Default)]
pub(super) struct Written {
    bits: Vec<u64>,
    count: u64,
    len: u64,
}

impl Written {
    pub(super) fn new(len: u64, all: bool) -> Self {
        if all {
            Written { bits: Vec::new(), count: len, len }
        } else {
            Written { bits: vec![0; len.div_ceil(64) as usize], count: 0, len }
        }
    }
    /// Nothing of `len` elements written, reusing the allocation.
    pub(super) fn reset(&mut self, len: u64) {
        self.bits.clear();
        self.bits.resize(len.div_ceil(64) as usize, 0);
        (self.count, self.len) = (0, len);
    }
    #[inline]
    fn all(&self) -> bool {
        self.count == self.len
    }
    #[cfg(test)]
    pub(super) fn get(&self, i: u64) -> bool {
        self.all() || self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    #[cfg(test)]
    pub(super) fn set(&mut self, i: u64) {
        self.set_range(i, i + 1);
    }
    /// The words of `lo..hi`, each with the mask of its elements in the range.
    #[inline]
    fn words(lo: u64, hi: u64) -> impl Iterator<Item = (usize, u64)> {
        let (first, last) = (lo / 64, hi.saturating_sub(1) / 64);
        (first..=last).filter(move |_| lo < hi).map(move |w| {
            let from = if w == first { lo % 64 } else { 0 };
            let to = if w == last { (hi - 1) % 64 + 1 } else { 64 };
            let mask = (u64::MAX >> (64 - (to - from))) << from;
            (w as usize, mask)
        })
    }
    /// The first element of `lo..hi` not written, if any.
    #[inline]
    pub(super) fn first_unwritten(&self, lo: u64, hi: u64) -> Option<u64> {
        if self.all() {
            return None;
        }
        Self::words(lo, hi).find_map(|(w, mask)| {
            let missing = !self.bits[w] & mask;
            (missing != 0).then(|| w as u64 * 64 + missing.trailing_zeros() as u64)
        })
    }
    /// Mark `lo..hi` written.
    #[inline]
    pub(super) fn set_range(&mut self, lo: u64, hi: u64) {
        if self.all() {
            return;
        }
        for (w, mask) in Self::words(lo, hi) {
            let word = &mut self.bits[w];
            self.count += (!*word & mask).count_ones() as u64;
            *word |= mask;
        }
    }
}

pub(super) struct HbmTensor {
    pub(super) name: String,
    pub(super) dtype: Dtype,
    pub(super) shape: Vec<u64>,
    /// Elements per row (product of dims after the first) for dependency regions.
    pub(super) row_elems: u64,
    pub(super) data: Vec<f32>,
    pub(super) written: Written,
    pub(super) tid: u32,
}

pub(super) struct Buf {
    pub(super) logical: u32,
    pub(super) gen: u32,
    /// The affine-loop iteration serial at this allocation (see `affine::Loops::serial`):
    /// a tile allocated during an iteration is that iteration's own.
    pub(super) alloc_serial: u64,
    pub(super) pstride: u64,
    pub(super) data: Vec<f32>,
    pub(super) written: Written,
    pub(super) tid: u32,
}

pub(super) struct PoolState {
    pub(super) name: String,
    pub(super) mem: Mem,
    pub(super) bufs: u32,
    /// Released by [`Nc::release_pools`]: no longer counts against capacity.
    pub(super) released: bool,
}

pub(super) struct Logical {
    pub(super) pool: u32,
    pub(super) name: String,
    pub(super) max_bytes: u64,
    pub(super) ring: Vec<u32>,
    pub(super) allocations: u64,
}

#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) enum TileKey {
    Site(usize, u32, u32),
    Name(String),
}

impl Nc {
    /// A new buffer id for dependency tracking; `bytes` is its size per partition (per row
    /// for HBM), which sets the granularity of its records.
    pub(super) fn new_tid(&mut self, bytes: u64) -> u32 {
        let id = self.next_tid;
        self.next_tid += 1;
        if let Some(t) = &mut self.timing {
            t.ensure_buffer(id, bytes);
        }
        id
    }

    /// A tensor in HBM that nothing has written yet (an output or scratch space).
    #[track_caller]
    pub fn hbm(&mut self, name: &str, dtype: Dtype, shape: &[u64]) -> SimResult<Hbm> {
        self.new_hbm(name, dtype, shape, None, Location::caller())
    }

    /// An input tensor in HBM holding `data` (row-major, rounded to `dtype`). In a
    /// timing-only run the data is not needed and may be empty.
    #[track_caller]
    pub fn hbm_input(
        &mut self,
        name: &str,
        dtype: Dtype,
        shape: &[u64],
        data: &[f32],
    ) -> SimResult<Hbm> {
        self.new_hbm(name, dtype, shape, Some(data), Location::caller())
    }

    fn new_hbm(
        &mut self,
        name: &str,
        dtype: Dtype,
        shape: &[u64],
        data: Option<&[f32]>,
        loc: &'static Location<'static>,
    ) -> SimResult<Hbm> {
        let err =
            |kind| SimError { instruction: "hbm_tensor", loc: SourceLoc::from_location(loc), kind };
        if shape.is_empty() || shape.len() > MAX_HBM_DIMS || shape.contains(&0) {
            return Err(err(V::Invalid(format!(
                "HBM tensor `{name}` has shape {shape:?}; expected 1 to {MAX_HBM_DIMS} non-zero dims"
            ))));
        }
        let elems: u64 = shape.iter().product();
        let mut values = Vec::new();
        // Which elements were written is only checked when values are computed; a timing
        // run skips the bitmap (an HBM output of 16 M elements is 2 MB to zero).
        let written = Written::new(elems, data.is_some() || !self.mode.functional);
        if self.mode.functional {
            match data {
                Some(d) if d.len() as u64 != elems => {
                    return Err(err(V::Invalid(format!(
                        "HBM input `{name}` with shape {shape:?} needs {elems} values, got {}",
                        d.len()
                    ))))
                }
                Some(d) => {
                    values = vec![0.0; d.len()];
                    dtype.round_slice(d, &mut values);
                }
                None => values = vec![f32::NAN; elems as usize],
            }
        }
        let id = self.hbm.len() as u32;
        let tid = self.new_tid(shape[1..].iter().product::<u64>() * dtype.size() as u64);
        self.spmd_new_buffer(tid);
        self.hbm.push(HbmTensor {
            name: name.to_string(),
            dtype,
            shape: shape.to_vec(),
            row_elems: shape[1..].iter().product(),
            data: values,
            written,
            tid,
        });
        self.h(&[3, dtype.code(), shape.len() as u8]);
        for &d in shape {
            self.h64(d);
        }
        Ok(Hbm { id, dtype, shape: Dims::contiguous(shape) })
    }

    /// The values of an HBM tensor (`None` in a timing-only run). Unwritten elements are NaN.
    pub fn read_hbm(&self, t: Hbm) -> Option<&[f32]> {
        self.mode.functional.then(|| self.hbm[t.id as usize].data.as_slice())
    }

    /// The name an HBM tensor was created with.
    pub fn hbm_name(&self, t: Hbm) -> &str {
        &self.hbm[t.id as usize].name
    }

    /// An SBUF pool whose every logical tile has `bufs` physical buffers (multi-buffering;
    /// at least 1: a tile of a pool of 0 buffers is an error).
    pub fn sbuf_pool(&mut self, name: &str, bufs: u32) -> Pool {
        self.pool(name, bufs, Mem::Sbuf)
    }

    /// A PSUM pool; each tile occupies whole 2 KiB banks per partition.
    pub fn psum_pool(&mut self, name: &str, bufs: u32) -> Pool {
        self.pool(name, bufs, Mem::Psum)
    }

    /// `bufs` = 0 is kept: a tile of such a pool is an error naming the pool (it was taken
    /// as 1 silently, so a kernel's `bufs = 0` ran as single-buffered).
    fn pool(&mut self, name: &str, bufs: u32, mem: Mem) -> Pool {
        let id = self.pools.len() as u32;
        self.pools.push(PoolState { name: name.to_string(), mem, bufs, released: false });
        Pool { id, mem, bufs }
    }

    /// End of a kernel: every pool allocated so far is released, its SBUF/PSUM free for the
    /// next kernel issued on this core (as when a model runs kernels one after another).
    /// Tiles of released pools become stale: using one is a
    /// [`ViolationKind::StaleTile`](crate::ViolationKind::StaleTile) error. HBM tensors stay.
    /// As with [`Nc::release_pool`], buffers made afterwards wait for the last access to the
    /// released ones.
    pub fn release_pools(&mut self) {
        for p in 0..self.pools.len() {
            if !self.pools[p].released {
                self.free_pool(p as u32);
            }
        }
        self.sbuf_reserved = 0;
        self.psum_reserved_banks = 0;
    }

    /// Free `pool` between two phases of one kernel (a pool's scope ending in NKI): its SBUF or
    /// PSUM no longer counts against capacity, so the next phase's pools may use it. Handles
    /// to its tiles become stale ([`ViolationKind::StaleTile`](crate::ViolationKind::StaleTile)
    /// errors), as does allocating from it. The ordering across the free is kept: the
    /// simulator does not place buffers at addresses, so every buffer made after the release
    /// in the same memory may be the released memory, and its first access waits until the
    /// last read or write of the released buffers has ended (write-after-read and
    /// write-after-write across the free). Not inside an `affine_range` loop, whose
    /// instructions are not placed yet.
    #[track_caller]
    pub fn release_pool(&mut self, pool: Pool) -> SimResult<()> {
        self.issue("release_pool", |nc, _| {
            let p = &nc.pools[pool.id as usize];
            if p.released {
                return Err(V::Invalid(format!("pool `{}` was already released", p.name)));
            }
            if nc.loops.active() || nc.timing.as_ref().is_some_and(|t| t.window_open()) {
                return Err(V::Invalid(format!(
                    "pool `{}` released inside an affine_range loop; release it after the loop",
                    p.name
                )));
            }
            nc.free_pool(pool.id);
            nc.h(&[42]);
            nc.h64(pool.id as u64);
            let total = nc.reserved(pool.mem);
            if nc.mode.trace && pool.mem == Mem::Sbuf {
                let t = nc.timing.as_ref().map_or(0, |t| t.frontier());
                nc.sbuf_counter.push((t, total));
            }
            Ok(())
        })
    }

    /// Mark pool `id` released, make its tiles stale and note when its buffers' memory is
    /// free in time (the latest end of any access to them).
    pub(super) fn free_pool(&mut self, id: u32) {
        let pool = &mut self.pools[id as usize];
        pool.released = true;
        let slot = match pool.mem {
            Mem::Sbuf => 0,
            Mem::Psum => 1,
        };
        for lt in self.logicals.iter().filter(|lt| lt.pool == id) {
            for &b in &lt.ring {
                let buf = &mut self.bufs[b as usize];
                buf.gen += 1;
                if let Some(t) = &self.timing {
                    let done = t.buffer_done(buf.tid);
                    if done.0 > self.freed[slot].0 {
                        self.freed[slot] = done;
                    }
                }
            }
        }
    }

    /// Allocate the logical tile of this call site in `pool`: the next buffer of its ring.
    #[track_caller]
    pub fn tile(&mut self, pool: Pool, dtype: Dtype, shape: &[u64]) -> SimResult<Tile> {
        let loc = Location::caller();
        let key = TileKey::Site(loc.file().as_ptr() as usize, loc.line(), loc.column());
        self.alloc(pool, key, None, dtype, shape, loc)
    }

    /// Allocate the logical tile `name` in `pool` (for tiles allocated from several sites).
    #[track_caller]
    pub fn tile_named(
        &mut self,
        pool: Pool,
        name: &str,
        dtype: Dtype,
        shape: &[u64],
    ) -> SimResult<Tile> {
        let loc = Location::caller();
        self.alloc(pool, TileKey::Name(name.to_string()), Some(name), dtype, shape, loc)
    }

    fn alloc(
        &mut self,
        pool: Pool,
        key: TileKey,
        name: Option<&str>,
        dtype: Dtype,
        shape: &[u64],
        loc: &'static Location<'static>,
    ) -> SimResult<Tile> {
        let sloc = SourceLoc::from_location(loc);
        let err = |kind| SimError { instruction: "tile", loc: sloc, kind };
        if shape.len() < 2 || shape.len() > 1 + MAX_FREE_DIMS || shape.contains(&0) {
            return Err(err(V::Invalid(format!(
                "tile shape {shape:?}: expected [partitions, free...] with 1 to {MAX_FREE_DIMS} \
                 non-zero free dims"
            ))));
        }
        let parts = shape[0];
        if parts > self.chip.memory.partitions as u64 {
            return Err(err(V::PartitionOverflow {
                operand: "tile",
                partitions: parts,
                max: self.chip.memory.partitions as u64,
            }));
        }
        let p = &self.pools[pool.id as usize];
        if p.bufs == 0 {
            return Err(err(V::Invalid(format!(
                "pool `{}` was made with 0 buffers: a pool needs at least 1 (the `bufs` of \
                 sbuf_pool/psum_pool)",
                p.name
            ))));
        }
        if p.released {
            return Err(err(V::StaleTile {
                tile: name.map(str::to_string).unwrap_or_else(|| format!("{sloc}")),
                pool: p.name.clone(),
                bufs: p.bufs,
                released: true,
            }));
        }
        let free = Dims::<MAX_FREE_DIMS>::contiguous(&shape[1..]);
        let bytes = free.elems() * dtype.size() as u64;
        let lid = match self.tile_index.get(&(pool.id, key.clone())) {
            Some(&l) => l,
            None => {
                let l = self.logicals.len() as u32;
                let tname = name
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{}:{}", sloc.file, sloc.line));
                self.logicals.push(Logical {
                    pool: pool.id,
                    name: tname,
                    max_bytes: 0,
                    ring: Vec::new(),
                    allocations: 0,
                });
                self.tile_index.insert((pool.id, key), l);
                l
            }
        };
        if bytes > self.logicals[lid as usize].max_bytes {
            let old = self.logicals[lid as usize].max_bytes;
            self.logicals[lid as usize].max_bytes = bytes;
            if let Err(kind) = self.check_capacity(pool.mem) {
                self.logicals[lid as usize].max_bytes = old;
                return Err(err(kind));
            }
        }
        let bufs = self.pools[pool.id as usize].bufs;
        let lt = &mut self.logicals[lid as usize];
        let slot = (lt.allocations % bufs as u64) as usize;
        lt.allocations += 1;
        let buf_id = if slot < lt.ring.len() {
            lt.ring[slot]
        } else {
            let b = self.bufs.len() as u32;
            self.logicals[lid as usize].ring.push(b);
            let tid = self.new_tid(bytes);
            let (time, crit) = self.freed[(pool.mem == Mem::Psum) as usize];
            if let (Some(t), true) = (&mut self.timing, time > 0) {
                t.inherit(tid, time, &crit);
            }
            self.bufs.push(Buf {
                logical: lid,
                gen: 0,
                alloc_serial: 0,
                pstride: 0,
                data: Vec::new(),
                written: Written::default(),
                tid,
            });
            b
        };
        let functional = self.mode.functional;
        let serial = self.loops.serial;
        let b = &mut self.bufs[buf_id as usize];
        b.gen += 1;
        b.alloc_serial = serial;
        b.pstride = free.elems();
        let len = parts * free.elems();
        if functional {
            // Only what this allocation writes is ever read (a read of an element it did
            // not write is an error), so an earlier allocation's values may stay: the
            // buffer is only grown or cut to its length, not refilled.
            b.data.resize(len as usize, f32::NAN);
            b.written.reset(len);
        }
        let gen = b.gen;
        self.h(&[4, dtype.code(), pool.mem as u8]);
        self.h64(lid as u64);
        for &d in shape {
            self.h64(d);
        }
        Ok(Tile::new(buf_id, gen, dtype, pool.mem, parts as u32, free))
    }

    /// SBUF bytes per partition (PSUM banks) the pools not released reserve now.
    fn reserved(&self, mem: Mem) -> u64 {
        let bank = self.chip.memory.psum_bank_bytes_per_partition;
        let cost = |lt: &Logical, bufs: u32| -> u64 {
            match mem {
                Mem::Sbuf => bufs as u64 * lt.max_bytes,
                Mem::Psum => bufs as u64 * lt.max_bytes.div_ceil(bank),
            }
        };
        let mut total = 0;
        for lt in &self.logicals {
            let p = &self.pools[lt.pool as usize];
            if p.mem == mem && !p.released {
                total += cost(lt, p.bufs);
            }
        }
        total
    }

    fn check_capacity(&mut self, mem: Mem) -> VResult<()> {
        let bank = self.chip.memory.psum_bank_bytes_per_partition;
        let total = self.reserved(mem);
        let capacity = match mem {
            Mem::Sbuf => self.chip.memory.sbuf_bytes_per_partition,
            Mem::Psum => self.chip.memory.psum_banks as u64,
        };
        if total > capacity {
            let mut pools = Vec::new();
            for (pi, p) in self.pools.iter().enumerate() {
                if p.mem != mem || p.released {
                    continue;
                }
                let tiles: Vec<TileUse> = self
                    .logicals
                    .iter()
                    .filter(|lt| lt.pool == pi as u32)
                    .map(|lt| TileUse {
                        tile: lt.name.clone(),
                        bufs: p.bufs,
                        bytes_per_partition: match mem {
                            Mem::Sbuf => lt.max_bytes,
                            Mem::Psum => lt.max_bytes.div_ceil(bank),
                        },
                    })
                    .collect();
                let t = tiles.iter().map(|t| t.bufs as u64 * t.bytes_per_partition).sum();
                pools.push(PoolUse { pool: p.name.clone(), bufs: p.bufs, total: t, tiles });
            }
            return Err(V::OverCapacity { memory: mem.name(), needed: total, capacity, pools });
        }
        match mem {
            // Peaks: without a release_pool the total never falls, so this is the total.
            Mem::Sbuf => {
                self.sbuf_reserved = self.sbuf_reserved.max(total);
                if self.mode.trace {
                    let t = self.timing.as_ref().map_or(0, |t| t.frontier());
                    self.sbuf_counter.push((t, total));
                }
            }
            Mem::Psum => self.psum_reserved_banks = self.psum_reserved_banks.max(total),
        }
        Ok(())
    }
}
