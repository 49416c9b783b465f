//! The kernel builder: the NKI-like API a kernel is written against, and its execution.
//!
//! A kernel is an ordinary Rust function that takes `&mut Nc` and its HBM tensors and issues
//! instructions. Each call is checked against the hardware's rules (neuroncore.md §1.8,
//! §2.1–2.4), then executed at once by the models the run asked for: the functional model
//! computes values, the timing model schedules the instruction (see [`crate::timing`]).
//! Nothing is buffered, so a program of any length runs in constant memory (unless a trace is
//! requested). Every method that issues an instruction is `#[track_caller]`: errors and
//! profiles name the kernel's own source line.

use crate::cost;
use crate::error::{PoolUse, SimError, SimResult, SourceLoc, TileUse, ViolationKind as V};
use crate::isa::{Act, Alu, Cmp, Engine};
use crate::timing::{ComputeOp, DmaChunk, Region, Slice, Timing};
use crate::view::*;
use crate::{Chip, Dtype};
use rustc_hash::FxHashMap;
use std::panic::Location;

/// Which models run. Values and times are independent: the functional model never looks at
/// time and the timing model never looks at values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecMode {
    /// Compute every value (for correctness checks).
    pub functional: bool,
    /// Compute time (for benchmarks and profiles).
    pub timing: bool,
    /// Record a Perfetto trace (needs `timing`; memory grows with the instruction count).
    pub trace: bool,
}

impl ExecMode {
    pub const FUNCTIONAL: ExecMode = ExecMode { functional: true, timing: false, trace: false };
    pub const TIMING: ExecMode = ExecMode { functional: false, timing: true, trace: false };
    pub const BOTH: ExecMode = ExecMode { functional: true, timing: true, trace: false };
    pub const TRACE: ExecMode = ExecMode { functional: false, timing: true, trace: true };
}

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

/// Options of [`Nc::activation`]: `dst = func(src * scale + bias)`, optionally
/// `reduce = Σ dst` along the free axis (neuroncore.md §1.5 ScalarE pipeline).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActArgs {
    pub scale: Scalar,
    pub bias: Option<TileView>,
    pub reduce: Option<TileView>,
}

impl Default for ActArgs {
    fn default() -> Self {
        ActArgs { scale: Scalar::Imm(1.0), bias: None, reduce: None }
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
    pub fn reduce(mut self, r: impl Into<TileView>) -> Self {
        self.reduce = Some(r.into());
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

/// Which elements of a buffer have been written (to report reads of fresh memory).
#[derive(Clone, Debug, Default)]
struct Written {
    bits: Vec<u64>,
    count: u64,
    len: u64,
}

impl Written {
    fn new(len: u64, all: bool) -> Self {
        if all {
            Written { bits: Vec::new(), count: len, len }
        } else {
            Written { bits: vec![0; len.div_ceil(64) as usize], count: 0, len }
        }
    }
    #[inline]
    fn all(&self) -> bool {
        self.count == self.len
    }
    #[inline]
    fn get(&self, i: u64) -> bool {
        self.all() || self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    #[inline]
    fn set(&mut self, i: u64) {
        if self.all() {
            return;
        }
        let w = &mut self.bits[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        if *w & m == 0 {
            *w |= m;
            self.count += 1;
            if self.count == self.len {
                self.bits = Vec::new();
            }
        }
    }
}

struct HbmTensor {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    /// Elements per row (product of dims after the first) for dependency regions.
    row_elems: u64,
    data: Vec<f32>,
    written: Written,
    tid: u32,
}

struct Buf {
    logical: u32,
    gen: u32,
    pstride: u64,
    data: Vec<f32>,
    written: Written,
    tid: u32,
}

struct PoolState {
    name: String,
    mem: Mem,
    bufs: u32,
    /// Released by [`Nc::release_pools`]: no longer counts against capacity.
    released: bool,
}

struct Logical {
    pool: u32,
    name: String,
    max_bytes: u64,
    ring: Vec<u32>,
    allocations: u64,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum TileKey {
    Site(usize, u32, u32),
    Name(String),
}

/// Counters the profile is built from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub instructions: u64,
    pub matmuls: u64,
    pub matmul_flops: f64,
    pub hardware_flops: f64,
    pub transpose_flops: f64,
    pub hbm_read_bytes: u64,
    pub hbm_write_bytes: u64,
    pub sbuf_dma_bytes: u64,
    pub dma_transfers: u64,
    pub dma_bytes: u64,
    pub dma_descriptors: u64,
    pub dma_partition_rows: u64,
    pub dma_bytes_per_partition_sum: f64,
    /// Per source line: time and instruction count, in first-seen order.
    pub lines: Vec<LineStat>,
    line_index: FxHashMap<(usize, u32, u32), usize>,
    last_line: Option<((usize, u32, u32), usize)>,
}

impl Stats {
    /// Attribute `busy_ps` to the source line `loc`. Consecutive instructions usually come
    /// from the same line (a loop body), so the last line's slot is remembered.
    #[inline(always)]
    fn add_line(&mut self, loc: SourceLoc, opcode: &'static str, busy_ps: u64) {
        let key = (loc.file.as_ptr() as usize, loc.line, loc.column);
        let idx = match self.last_line {
            Some((k, i)) if k == key => i,
            _ => self.line_slot(key, loc, opcode),
        };
        let line = &mut self.lines[idx];
        line.busy_ps += busy_ps;
        line.count += 1;
    }

    /// The slot of a line other than the last one seen (found or added).
    #[inline(never)]
    fn line_slot(&mut self, key: (usize, u32, u32), loc: SourceLoc, opcode: &'static str) -> usize {
        let next = self.lines.len();
        let i = *self.line_index.entry(key).or_insert(next);
        if i == next {
            self.lines.push(LineStat { loc, busy_ps: 0, count: 0, opcode });
        }
        self.last_line = Some((key, i));
        i
    }
}

#[derive(Clone, Debug)]
pub(crate) struct LineStat {
    pub loc: SourceLoc,
    pub busy_ps: u64,
    pub count: u64,
    pub opcode: &'static str,
}

/// The NeuronCore being programmed: builder, functional model and timing model in one.
pub struct Nc {
    pub(crate) chip: Chip,
    pub(crate) mode: ExecMode,
    hbm: Vec<HbmTensor>,
    bufs: Vec<Buf>,
    pools: Vec<PoolState>,
    logicals: Vec<Logical>,
    tile_index: FxHashMap<(u32, TileKey), u32>,
    next_tid: u32,
    pub(crate) timing: Option<Timing>,
    pub(crate) stats: Stats,
    pub(crate) sbuf_reserved: u64,
    pub(crate) psum_reserved_banks: u64,
    /// Streaming hash of the program's encoding.
    hash: ProgramHasher,
    scratch: Vec<i64>,
    scratch2: Vec<i64>,
    dma_out: Vec<(usize, u64, u64)>,
    /// The current DMA's chunks (kept to reuse the allocation).
    dma_chunks: Vec<DmaChunk>,
    pub(crate) sbuf_counter: Vec<(u64, u64)>,
}

type VResult<T> = Result<T, V>;

/// The program's encoding, hashed as it is issued: xxh3-128 (content addressing needs no
/// cryptographic strength, and this runs for every instruction) over little-endian 64-bit
/// words. The builder emits a few words per instruction; they are gathered in a fixed word
/// buffer and hashed in large blocks, which costs far less than feeding the hasher (or a
/// byte vector) a few bytes at a time.
struct ProgramHasher {
    state: xxhash_rust::xxh3::Xxh3,
    buf: Box<[u64; HASH_WORDS]>,
    len: usize,
}

const HASH_WORDS: usize = 4096;

impl ProgramHasher {
    fn new() -> Self {
        ProgramHasher {
            state: xxhash_rust::xxh3::Xxh3::new(),
            buf: Box::new([0; HASH_WORDS]),
            len: 0,
        }
    }

    /// The next `n` words of the stream, for the caller to fill (little-endian).
    #[inline(always)]
    fn reserve(&mut self, n: usize) -> &mut [u64] {
        if self.len + n > HASH_WORDS {
            self.flush();
        }
        let start = self.len;
        self.len += n;
        &mut self.buf[start..start + n]
    }

    fn flush(&mut self) {
        self.state.update(words_as_bytes(&self.buf[..self.len]));
        self.len = 0;
    }

    fn digest128(&self) -> u128 {
        let mut h = self.state.clone();
        h.update(words_as_bytes(&self.buf[..self.len]));
        h.digest128()
    }
}

/// Calls `f` with the chip's TOML (its identity in the program hash). Serializing it costs
/// about as much as simulating a hundred instructions (25 µs for trn2), and a tuning run
/// builds many programs for one chip: the text for the last chip seen on this thread is
/// kept, keyed by the chip's `Debug` text — a tenth of the cost (2.6 µs), and exact where
/// `==` is not (`-0.0 == 0.0`, but the two print, and hash, differently).
fn chip_toml(chip: &Chip, f: impl FnOnce(&str)) {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, String)>> = const { std::cell::RefCell::new(None) };
    }
    let key = format!("{chip:?}");
    LAST.with_borrow_mut(|last| match last {
        Some((k, toml)) if *k == key => f(toml),
        _ => {
            let (_, toml) = last.insert((key, chip.to_toml()));
            f(toml)
        }
    })
}

/// A tag of up to 7 bytes as one hash word (its length in the top byte).
#[inline(always)]
fn tag_word(bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len() < 8);
    let mut w = (bytes.len() as u64) << 56;
    for (i, &b) in bytes.iter().enumerate() {
        w |= (b as u64) << (8 * i);
    }
    w.to_le()
}

/// A tile view as hash words (`3 + 2 × dims` of them) into `out`; returns how many.
#[inline(always)]
fn tile_words(v: &TileView, out: &mut [u64]) -> usize {
    let dims = v.free.as_slice();
    out[0] = (1
        | (v.tile.dtype.code() as u64) << 8
        | (v.tile.mem as u64) << 16
        | (dims.len() as u64) << 24)
        .to_le();
    out[1] = (v.tile.buf as u64 | (v.p0 as u64) << 32).to_le();
    out[2] = (v.np as u64 | (v.offset as u64) << 32).to_le();
    let words = 3 + 2 * dims.len();
    for (pair, &(s, n)) in out[3..words].chunks_exact_mut(2).zip(dims) {
        pair[0] = (s as u64).to_le();
        pair[1] = n.to_le();
    }
    words
}

/// The bytes of words already stored little-endian.
fn words_as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u8 has alignment 1 and every bit pattern is a valid u8; the byte slice covers
    // exactly the words' memory and borrows it for the same lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

impl Nc {
    /// A fresh NeuronCore of `chip`, running the models of `mode`.
    ///
    /// Panics if `chip` fails [`Chip::validate`] (chips read with [`Chip::from_toml`] are
    /// validated there, with an error to show).
    pub fn new(chip: Chip, mode: ExecMode) -> Nc {
        if let Err(e) = chip.validate() {
            panic!("Nc::new: invalid chip `{}`: {e}", chip.name);
        }
        let mode = ExecMode { trace: mode.trace && mode.timing, ..mode };
        let timing = mode.timing.then(|| Timing::new(&chip, chip.dma.engines as usize, mode.trace));
        let mut hash = ProgramHasher::new();
        hash.state.update(b"neuron-sim program v2\0");
        chip_toml(&chip, |toml| hash.state.update(toml.as_bytes()));
        Nc {
            chip,
            mode,
            hbm: Vec::new(),
            bufs: Vec::new(),
            pools: Vec::new(),
            logicals: Vec::new(),
            tile_index: FxHashMap::default(),
            next_tid: 0,
            timing,
            stats: Stats::default(),
            sbuf_reserved: 0,
            psum_reserved_banks: 0,
            hash,
            scratch: Vec::new(),
            scratch2: Vec::new(),
            dma_out: Vec::new(),
            dma_chunks: Vec::new(),
            sbuf_counter: Vec::new(),
        }
    }

    pub fn chip(&self) -> &Chip {
        &self.chip
    }

    pub fn mode(&self) -> ExecMode {
        self.mode
    }

    /// A new buffer id for dependency tracking; `bytes` is its size per partition (per row
    /// for HBM), which sets the granularity of its records.
    fn new_tid(&mut self, bytes: u64) -> u32 {
        let id = self.next_tid;
        self.next_tid += 1;
        if let Some(t) = &mut self.timing {
            t.ensure_buffer(id, bytes);
        }
        id
    }

    // ------------------------------------------------------------------ program hash

    /// Hash a short tag (opcode and small operands, at most 7 bytes) as one word: the
    /// bytes, little-endian, and their count in the top byte.
    #[inline(always)]
    fn h(&mut self, bytes: &[u8]) {
        self.hash.reserve(1)[0] = tag_word(bytes);
    }
    /// An instruction's tag and its tile operands, as [`Nc::h`] and [`Nc::h_tile`] each
    /// would hash them, into one reservation of the hash buffer.
    #[inline(always)]
    fn h_op(&mut self, tag: &[u8], views: &[&TileView]) {
        let words = 1 + views.iter().map(|v| 3 + 2 * v.free.len()).sum::<usize>();
        let out = self.hash.reserve(words);
        out[0] = tag_word(tag);
        let mut at = 1;
        for v in views {
            at += tile_words(v, &mut out[at..]);
        }
    }
    #[inline]
    fn h64(&mut self, v: u64) {
        self.hash.reserve(1)[0] = v.to_le();
    }
    fn h_tile(&mut self, v: &TileView) {
        let out = self.hash.reserve(3 + 2 * v.free.len());
        tile_words(v, out);
    }
    fn h_hbm(&mut self, v: &HbmView) {
        let dims = v.dims.as_slice();
        let out = self.hash.reserve(2 + 2 * dims.len());
        out[0] = (2
            | (v.tensor.dtype.code() as u64) << 8
            | (dims.len() as u64) << 16
            | (v.tensor.id as u64) << 32)
            .to_le();
        out[1] = (v.offset as u64).to_le();
        for (pair, &(s, n)) in out[2..].chunks_exact_mut(2).zip(dims) {
            pair[0] = (s as u64).to_le();
            pair[1] = n.to_le();
        }
    }
    /// A scalar operand: an immediate behind its own tag word (its bits could otherwise
    /// read as a view's first word: tag words have a non-zero top byte, view headers do
    /// not), a column as the view it is.
    fn h_scalar(&mut self, s: &Scalar) {
        match s {
            Scalar::Imm(x) => {
                self.h(&[20]);
                self.h64(x.to_bits() as u64)
            }
            Scalar::Col(c) => self.h_tile(c),
        }
    }

    /// Content hash of the program issued so far (instructions, operands, shapes, chip):
    /// the same kernel, parameters and shape give the same hash, whatever the data.
    pub fn program_hash(&self) -> String {
        format!("{:032x}", self.hash.digest128())
    }

    // ------------------------------------------------------------------ HBM

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
                Some(d) => values = d.iter().map(|&x| dtype.round(x)).collect(),
                None => values = vec![f32::NAN; elems as usize],
            }
        }
        let id = self.hbm.len() as u32;
        let tid = self.new_tid(shape[1..].iter().product::<u64>() * dtype.size() as u64);
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

    // ------------------------------------------------------------------ pools and tiles

    /// An SBUF pool whose every logical tile has `bufs` physical buffers (multi-buffering).
    pub fn sbuf_pool(&mut self, name: &str, bufs: u32) -> Pool {
        self.pool(name, bufs, Mem::Sbuf)
    }

    /// A PSUM pool; each tile occupies whole 2 KiB banks per partition.
    pub fn psum_pool(&mut self, name: &str, bufs: u32) -> Pool {
        self.pool(name, bufs, Mem::Psum)
    }

    fn pool(&mut self, name: &str, bufs: u32, mem: Mem) -> Pool {
        let id = self.pools.len() as u32;
        let bufs = bufs.max(1);
        self.pools.push(PoolState { name: name.to_string(), mem, bufs, released: false });
        Pool { id, mem, bufs }
    }

    /// End of a kernel: every pool allocated so far is released, its SBUF/PSUM free for the
    /// next kernel issued on this core (as when a model runs kernels one after another).
    /// Tiles of released pools become stale: using one is a [`ViolationKind::StaleTile`]
    /// error. HBM tensors stay.
    pub fn release_pools(&mut self) {
        for p in &mut self.pools {
            p.released = true;
        }
        for b in &mut self.bufs {
            b.gen += 1;
        }
        self.sbuf_reserved = 0;
        self.psum_reserved_banks = 0;
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
            self.bufs.push(Buf {
                logical: lid,
                gen: 0,
                pstride: 0,
                data: Vec::new(),
                written: Written::default(),
                tid,
            });
            b
        };
        let functional = self.mode.functional;
        let b = &mut self.bufs[buf_id as usize];
        b.gen += 1;
        b.pstride = free.elems();
        let len = parts * free.elems();
        if functional {
            b.data.clear();
            b.data.resize(len as usize, f32::NAN);
            b.written = Written::new(len, false);
        }
        let gen = b.gen;
        self.h(&[4, dtype.code(), pool.mem as u8]);
        self.h64(lid as u64);
        for &d in shape {
            self.h64(d);
        }
        Ok(Tile::new(buf_id, gen, dtype, pool.mem, parts as u32, free))
    }

    fn check_capacity(&mut self, mem: Mem) -> VResult<()> {
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
            Mem::Sbuf => {
                self.sbuf_reserved = total;
                if self.mode.trace {
                    let t = self.timing.as_ref().map_or(0, |t| t.frontier());
                    self.sbuf_counter.push((t, total));
                }
            }
            Mem::Psum => self.psum_reserved_banks = total,
        }
        Ok(())
    }

    // ------------------------------------------------------------------ checks

    /// Check a view used by a compute engine (all rules, including §1.8 start partitions).
    #[inline(always)]
    fn check_tile(&self, operand: &'static str, v: &TileView) -> VResult<Region> {
        self.check_view(operand, v, true)
    }

    /// Check a view; DMA descriptors address any partition, so `engine_access = false`
    /// skips the start-partition rule, which is about engine access patterns (§1.8).
    /// Returns the view's region for the timing model (its span is needed here anyway).
    #[inline(always)]
    fn check_view(
        &self,
        operand: &'static str,
        v: &TileView,
        engine_access: bool,
    ) -> VResult<Region> {
        self.check_view_elems(operand, v, engine_access).map(|(region, _)| region)
    }

    /// [`Nc::check_view`], also giving the view's free elements (computed with its span).
    #[inline(always)]
    fn check_view_elems(
        &self,
        operand: &'static str,
        v: &TileView,
        engine_access: bool,
    ) -> VResult<(Region, u64)> {
        let b = &self.bufs[v.tile.buf as usize];
        if b.gen != v.tile.gen {
            let lt = &self.logicals[b.logical as usize];
            let p = &self.pools[lt.pool as usize];
            return Err(V::StaleTile { tile: lt.name.clone(), pool: p.name.clone(), bufs: p.bufs });
        }
        let max = self.chip.memory.partitions as u64;
        if v.np as u64 > max {
            return Err(V::PartitionOverflow { operand, partitions: v.np as u64, max });
        }
        // `span` is None when a dim is empty.
        let (Some((lo, hi, elems)), true) = (v.free.span_elems(), v.np > 0) else {
            return Err(V::BadAccessPattern(format!("{operand} is empty")));
        };
        if v.p0 + v.np > v.tile.parts {
            return Err(V::BadAccessPattern(format!(
                "{operand} uses partitions {}..{} of a tile with {} partitions",
                v.p0,
                v.p0 + v.np,
                v.tile.parts
            )));
        }
        let (p0, np) = (v.p0 as u64, v.np as u64);
        let ok = !engine_access
            || if np > 64 {
                p0 == 0
            } else if np > 32 {
                p0 == 0 || p0 == 64
            } else {
                p0 % 32 == 0
            };
        if !ok {
            return Err(V::BadStartPartition { operand, start: p0, partitions: np });
        }
        if v.offset + lo < 0 || (v.offset + hi) as u64 >= v.tile.elems {
            return Err(V::BadAccessPattern(format!(
                "{operand} reaches free elements {}..={} of a tile with {} free elements",
                v.offset + lo,
                v.offset + hi,
                v.tile.elems
            )));
        }
        let size = v.tile.dtype.size() as u64;
        let region = Region {
            id: b.tid,
            p0: v.p0,
            p1: v.p0 + v.np,
            b0: (v.offset + lo) as u64 * size,
            b1: (v.offset + hi + 1) as u64 * size,
        };
        Ok((region, elems))
    }

    fn check_hbm(&self, operand: &'static str, v: &HbmView) -> VResult<()> {
        let t = &self.hbm[v.tensor.id as usize];
        let elems: u64 = t.shape.iter().product();
        let Some((lo, hi)) = v.dims.span() else {
            return Err(V::BadAccessPattern(format!("{operand} (HBM `{}`) is empty", t.name)));
        };
        let bad = if v.offset + lo < 0 {
            Some(v.offset + lo)
        } else if (v.offset + hi) as u64 >= elems {
            Some(v.offset + hi)
        } else {
            None
        };
        if let Some(flat) = bad {
            let mut index = vec![0i64; t.shape.len()];
            let mut rest = flat;
            for (i, &d) in t.shape.iter().enumerate().rev() {
                if i == 0 {
                    index[0] = rest;
                } else {
                    index[i] = rest.rem_euclid(d as i64);
                    rest = rest.div_euclid(d as i64);
                }
            }
            if t.shape.len() == 1 {
                index[0] = flat;
            }
            return Err(V::HbmOutOfBounds {
                operand,
                tensor: t.name.clone(),
                index: index.into(),
                shape: t.shape.clone().into(),
            });
        }
        Ok(())
    }

    fn check_free_size(&self, operand: &'static str, v: &TileView) -> VResult<()> {
        let (max, memory) = match v.tile.mem {
            Mem::Sbuf => (self.chip.memory.max_free_elems_sbuf, "SBUF"),
            Mem::Psum => (self.chip.memory.max_free_elems_psum, "PSUM"),
        };
        let elems = v.free.elems();
        if elems > max {
            return Err(V::FreeSizeTooLarge { operand, elems, memory, max });
        }
        Ok(())
    }

    fn same_shape(&self, a_name: &str, a: &TileView, b_name: &str, b: &TileView) -> VResult<()> {
        if a.np != b.np || a.free.elems() != b.free.elems() {
            return Err(V::ShapeMismatch(format!(
                "{a_name} is [{} x {:?}] but {b_name} is [{} x {:?}] (partitions x free)",
                a.np,
                a.free.shape(),
                b.np,
                b.free.shape()
            )));
        }
        Ok(())
    }

    // ------------------------------------------------------------------ regions

    /// Rows × byte-columns bounding box of an HBM access (exact for blocks of a row-major
    /// tensor; the whole row width when the pattern wraps rows).
    fn hbm_region(&self, v: &HbmView) -> Region {
        let t = &self.hbm[v.tensor.id as usize];
        let row = t.row_elems.max(1) as i64;
        // Integer divisions cost tens of cycles; rows are mostly a power of two long, and
        // then shifts and masks give the same numbers (floor division and its remainder).
        let pow2 = (row as u64).is_power_of_two();
        let shift = row.trailing_zeros();
        let div = |x: i64| if pow2 { x >> shift } else { x.div_euclid(row) };
        let rem = |x: i64| if pow2 { x & (row - 1) } else { x.rem_euclid(row) };
        let size = t.dtype.size() as u64;
        let o = v.offset;
        let (mut r_lo, mut r_hi) = (div(o), div(o));
        let c0 = rem(o);
        let (mut c_lo, mut c_hi) = (c0, c0);
        for &(s, n) in v.dims.as_slice() {
            if n <= 1 {
                continue;
            }
            let ext = s * (n as i64 - 1);
            if rem(s) == 0 {
                // Exact: `ext` is a multiple of `row` here.
                let re = div(ext);
                if re < 0 {
                    r_lo += re
                } else {
                    r_hi += re
                }
            } else if ext < 0 {
                c_lo += ext
            } else {
                c_hi += ext
            }
        }
        if c_lo < 0 || c_hi >= row {
            let (lo, hi) = v.dims.span().unwrap_or((0, 0));
            r_lo = div(o + lo);
            r_hi = div(o + hi);
            c_lo = 0;
            c_hi = row - 1;
        }
        Region {
            id: t.tid,
            p0: r_lo as u32,
            p1: r_hi as u32 + 1,
            b0: c_lo as u64 * size,
            b1: (c_hi + 1) as u64 * size,
        }
    }

    // ------------------------------------------------------------------ functional helpers

    /// Read a tile view as `[np][free]` values (row-major), checking for unwritten elements.
    fn gather_tile(
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
    fn scatter_tile(&mut self, v: &TileView, vals: &[f32]) {
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

    fn gather_hbm(
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

    fn scatter_hbm(&mut self, v: &HbmView, vals: &[f32]) {
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

    fn gather_scalar(
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

    // ------------------------------------------------------------------ scheduling helpers

    fn engine_clock(&self, e: Engine) -> f64 {
        match e {
            Engine::Tensor => self.chip.clocks.tensor_ghz,
            Engine::Vector => self.chip.clocks.vector_ghz,
            Engine::Scalar => self.chip.clocks.scalar_ghz,
            Engine::GpSimd => self.chip.clocks.gpsimd_ghz,
        }
    }

    fn engine_latency(&self, e: Engine) -> u64 {
        match e {
            Engine::Tensor => self.chip.tensor.latency_cycles,
            Engine::Vector => self.chip.vector.latency_cycles,
            Engine::Scalar => self.chip.scalar.latency_cycles,
            Engine::GpSimd => self.chip.gpsimd.latency_cycles,
        }
    }

    fn min_ii(&self, e: Engine) -> u64 {
        match e {
            Engine::Tensor => self.chip.tensor.mm_min_cycles,
            Engine::Vector => self.chip.vector.min_ii_cycles,
            Engine::Scalar => self.chip.scalar.min_ii_cycles,
            Engine::GpSimd => self.chip.gpsimd.min_ii_cycles,
        }
    }

    /// Schedule a compute instruction on the timing model and account for it.
    #[allow(clippy::too_many_arguments)]
    fn schedule(
        &mut self,
        opcode: &'static str,
        engine: Engine,
        cycles: u64,
        reads: &[(&TileView, Region)],
        writes: &[(&TileView, Region)],
        loc: SourceLoc,
    ) {
        self.stats.instructions += 1;
        if self.timing.is_none() {
            return;
        }
        let (mut sbuf, mut psum) = (false, false);
        // Two loops, not `chain`: this runs for every compute instruction.
        for (v, _) in reads {
            sbuf |= v.tile.mem == Mem::Sbuf;
            psum |= v.tile.mem == Mem::Psum;
        }
        for (v, _) in writes {
            sbuf |= v.tile.mem == Mem::Sbuf;
            psum |= v.tile.mem == Mem::Psum;
        }
        // NeuronCore-v2 port sharing (neuroncore.md §1.8); lifted on v3+ (§1.8, [A2]).
        let mut ports = 0u8;
        if self.chip.neuroncore_version == 2 {
            if sbuf && matches!(engine, Engine::Vector | Engine::GpSimd) {
                ports |= 1;
            }
            if psum && matches!(engine, Engine::Vector | Engine::Scalar) {
                ports |= 2;
            }
        }
        let ghz = self.engine_clock(engine);
        let op = ComputeOp {
            track: engine.index(),
            cycles,
            ghz,
            latency_cycles: self.engine_latency(engine),
            reads,
            writes,
            ports,
        };
        let timing = self.timing.as_mut().expect("checked above");
        let (start, end) = timing.compute(&op);
        self.stats.add_line(loc, opcode, end - start);
        if self.mode.trace {
            let args = reads
                .iter()
                .map(|(v, _)| format!("src={}", describe(v)))
                .chain(writes.iter().map(|(v, _)| format!("dst={}", describe(v))))
                .collect::<Vec<_>>()
                .join(" ");
            let args = format!("{args} cycles={cycles}");
            if let Some(tr) = &mut self.timing.as_mut().unwrap().trace {
                tr.push(Slice {
                    track: engine.index() as u16,
                    start,
                    dur: end - start,
                    name: opcode,
                    loc,
                    args,
                    bytes: 0,
                });
            }
        }
    }

    fn fail<T>(
        &self,
        instruction: &'static str,
        loc: &'static Location<'static>,
        kind: V,
    ) -> SimResult<T> {
        Err(SimError { instruction, loc: SourceLoc::from_location(loc), kind })
    }

    // ------------------------------------------------------------------ DMA

    /// `dma_copy`: copy between HBM and SBUF, SBUF and SBUF, or HBM and HBM, casting through
    /// fp32 when the dtypes differ (neuroncore.md §1.7, §2.3).
    #[track_caller]
    pub fn dma(&mut self, dst: impl Into<Access>, src: impl Into<Access>) -> SimResult<()> {
        let loc = Location::caller();
        let (dst, src) = (dst.into(), src.into());
        self.dma_impl(dst, src, loc).or_else(|kind| self.fail("dma_copy", loc, kind))
    }

    /// (partitions, free elements, dtype, contiguous run in elements, and for a tile its
    /// region — the check computes it anyway; an HBM region is only needed when timing).
    fn access_shape(
        &self,
        operand: &'static str,
        a: &Access,
    ) -> VResult<(u64, u64, Dtype, u64, Option<Region>)> {
        match a {
            Access::Tile(v) => {
                if v.tile.mem == Mem::Psum {
                    return Err(V::MemoryNotAllowed {
                        operand,
                        memory: "PSUM",
                        rule:
                            "DMA moves data between HBM and SBUF only (neuroncore.md §2.3 dma_copy)",
                    });
                }
                let (region, elems) = self.check_view_elems(operand, v, false)?;
                Ok((v.np as u64, elems, v.tile.dtype, v.free.contiguous_run(), Some(region)))
            }
            Access::Hbm(v) => {
                self.check_hbm(operand, v)?;
                let d = v.dims.as_slice();
                let parts = d.first().map_or(1, |x| x.1);
                let free = Dims::<MAX_HBM_DIMS> {
                    n: d.len().saturating_sub(1) as u8,
                    d: shift_dims(&v.dims),
                };
                Ok((parts, free.elems(), v.tensor.dtype, free.contiguous_run(), None))
            }
        }
    }

    fn dma_impl(
        &mut self,
        dst: Access,
        src: Access,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let (dp, df, ddt, drun, dst_region) = self.access_shape("dst", &dst)?;
        let (sp, sf, sdt, srun, src_region) = self.access_shape("src", &src)?;
        if dp != sp || df != sf {
            return Err(V::ShapeMismatch(format!(
                "dma_copy dst is [{dp} x {df}] but src is [{sp} x {sf}] (partitions x free elements)"
            )));
        }
        // Program hash.
        self.h(&[5]);
        for a in [&dst, &src] {
            match a {
                Access::Tile(v) => self.h_tile(v),
                Access::Hbm(v) => self.h_hbm(v),
            }
        }
        if self.mode.functional {
            let mut vals = Vec::new();
            match &src {
                Access::Tile(v) => self.gather_tile("src", v, &mut vals)?,
                Access::Hbm(v) => self.gather_hbm("src", v, &mut vals)?,
            }
            match &dst {
                Access::Tile(v) => self.scatter_tile(v, &vals),
                Access::Hbm(v) => self.scatter_hbm(v, &vals),
            }
        }
        let sloc = SourceLoc::from_location(loc);
        self.stats.instructions += 1;
        let elem = ddt.size().max(sdt.size()) as u64;
        let bytes_pp = df * elem;
        let total = dp * bytes_pp;
        let is_hbm = |a: &Access| matches!(a, Access::Hbm(_));
        let hbm_sides = is_hbm(&dst) as u32 + is_hbm(&src) as u32;
        if is_hbm(&src) {
            self.stats.hbm_read_bytes += dp * sf * sdt.size() as u64;
        }
        if is_hbm(&dst) {
            self.stats.hbm_write_bytes += dp * df * ddt.size() as u64;
        }
        if hbm_sides == 0 {
            self.stats.sbuf_dma_bytes += total;
        }
        self.stats.dma_transfers += 1;
        self.stats.dma_bytes += total;
        self.stats.dma_partition_rows += dp;
        self.stats.dma_bytes_per_partition_sum += bytes_pp as f64;
        // Descriptors: one per contiguous run (the less contiguous side decides), split at
        // the largest descriptor size (neuroncore.md §1.7).
        let run = drun.min(srun).max(1).min(df.max(1));
        let run_bytes = run * elem;
        let per_run = run_bytes.div_ceil(self.chip.dma.max_descriptor_bytes).max(1);
        let desc_pp = df.div_ceil(run) * per_run;
        self.stats.dma_descriptors += desc_pp * dp;
        let Some(_) = &self.timing else { return Ok(()) };
        let queues = self.chip.dma.engines as u64;
        let ppe = self.chip.dma.partitions_per_engine as u64;
        let p_base = match (&dst, &src) {
            (Access::Tile(v), _) | (_, Access::Tile(v)) => v.p0 as u64,
            _ => 0,
        };
        let n_chunks = dp.div_ceil(ppe).clamp(1, queues);
        let mut chunks = std::mem::take(&mut self.dma_chunks);
        chunks.clear();
        // Integer divisions cost tens of cycles each and this runs per chunk: when the rows
        // split evenly and the engine geometry is a power of two (every built-in chip), use
        // multiplications and shifts, which give the same numbers.
        let even = dp % n_chunks == 0;
        let pow2 = ppe.is_power_of_two() && queues.is_power_of_two();
        let (per_chunk, ppe_shift) = (dp / n_chunks, ppe.trailing_zeros());
        let mut first = 0u64;
        for c in 0..n_chunks {
            let last = if even { (c + 1) * per_chunk } else { (c + 1) * dp / n_chunks };
            let rows = last - first;
            let engine = if pow2 {
                ((p_base + first) >> ppe_shift) & (queues - 1)
            } else {
                ((p_base + first) / ppe) % queues
            };
            chunks.push(DmaChunk {
                queue: 4 + engine as usize,
                descriptors: rows * desc_pp,
                bytes: rows * bytes_pp,
            });
            first = last;
        }
        let region = |checked: Option<Region>, a: &Access| match (checked, a) {
            (Some(r), _) => r,
            (None, Access::Hbm(v)) => self.hbm_region(v),
            (None, Access::Tile(_)) => unreachable!("access_shape gives every tile its region"),
        };
        let (rr, wr) = ([region(src_region, &src)], [region(dst_region, &dst)]);
        let mut out = std::mem::take(&mut self.dma_out);
        let timing = self.timing.as_mut().expect("checked above");
        timing.dma(&chunks, hbm_sides, &rr, &wr, &mut out);
        let busy = out.iter().map(|&(_, s, e)| e - s).sum();
        self.stats.add_line(sloc, "dma_copy", busy);
        if self.mode.trace {
            let desc = |a: &Access| match a {
                Access::Tile(v) => describe(v),
                Access::Hbm(v) => format!(
                    "hbm:{}{:?}@{}",
                    self.hbm[v.tensor.id as usize].name,
                    v.dims.shape(),
                    v.offset
                ),
            };
            let args =
                format!("dst={} src={} bytes_per_partition={bytes_pp}", desc(&dst), desc(&src));
            let timing = self.timing.as_mut().expect("checked above");
            if let Some(tr) = &mut timing.trace {
                for (i, &(q, s, e)) in out.iter().enumerate() {
                    tr.push(Slice {
                        track: q as u16,
                        start: s,
                        dur: e - s,
                        name: "dma_copy",
                        loc: sloc,
                        args: args.clone(),
                        bytes: chunks[i].bytes,
                    });
                }
            }
        }
        self.dma_out = out;
        self.dma_chunks = chunks;
        Ok(())
    }

    // ------------------------------------------------------------------ TensorE

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
        let loc = Location::caller();
        let (d, s, m) = (dst.into(), stationary.into(), moving.into());
        self.matmul_impl(&d, &s, &m, accumulate, loc).or_else(|k| self.fail("nc_matmul", loc, k))
    }

    fn matmul_impl(
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
            Dtype::I32 => Err(V::DtypeNotAllowed {
                engine: "Tensor",
                operand: name,
                dtype: v.tile.dtype,
                rule: "the PE array multiplies fp8, bf16, fp16, tf32 or fp32 (neuroncore.md §2.3)",
            }),
            _ => Ok(()),
        };
        multipliable("stationary", s)?;
        multipliable("moving", m)?;
        let fp32 = s.tile.dtype == Dtype::F32 || m.tile.dtype == Dtype::F32;
        if fp32 && s.tile.dtype != m.tile.dtype {
            let (name, v) =
                if s.tile.dtype == Dtype::F32 { ("moving", m) } else { ("stationary", s) };
            return Err(V::DtypeNotAllowed {
                engine: "Tensor",
                operand: name,
                dtype: v.tile.dtype,
                rule: "fp32 matmul operands only pair with fp32 (neuroncore.md §2.3)",
            });
        }
        let psum_ok = d.tile.dtype == Dtype::F32
            || (self.chip.neuroncore_version >= 4 && d.tile.dtype == Dtype::Bf16);
        if !psum_ok {
            return Err(V::DtypeNotAllowed {
                engine: "Tensor",
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
        if n > self.chip.tensor.moving_fmax {
            return Err(V::MovingFreeTooLarge { n, max: self.chip.tensor.moving_fmax });
        }
        if d.np as u64 != mm || d_elems != n {
            return Err(V::ShapeMismatch(format!(
                "matmul of stationary [{k} x {mm}] and moving [{k} x {n}] writes [{mm} x {n}], \
                 dst is [{} x {}]",
                d.np,
                d.free.elems()
            )));
        }
        if self.chip.neuroncore_version < 4 {
            let r = rd;
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
        }
        self.h_op(&[6, accumulate as u8], &[d, s, m]);
        if self.mode.functional {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            self.gather_tile("stationary", s, &mut a)?;
            self.gather_tile("moving", m, &mut b)?;
            let mut c = vec![0f32; (mm * n) as usize];
            if accumulate {
                self.gather_tile("dst (accumulating)", d, &mut c)?;
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
        }
        let cycles =
            cost::matmul(self.chip.tensor.mm_min_cycles, mm, n, fp32, self.chip.tensor.fp32_factor);
        let flops = 2.0 * (k * mm * n) as f64;
        self.stats.matmuls += 1;
        self.stats.matmul_flops += flops;
        // neuron-profile's adjusted (bf16-equivalent) FLOPs: fp32 x4 (§5 [SCHEMA]).
        self.stats.hardware_flops += if fp32 { flops * 4.0 } else { flops };
        self.schedule(
            "nc_matmul",
            Engine::Tensor,
            cycles,
            &[(s, rs), (m, rm)],
            &[(d, rd)],
            SourceLoc::from_location(loc),
        );
        Ok(())
    }

    /// `nc_transpose` on TensorE: `dst[F,P] = src[P,F]`, SBUF → PSUM, P, F ≤ 128.
    #[track_caller]
    pub fn transpose(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.transpose_impl(Engine::Tensor, dst.into(), src.into(), loc)
            .or_else(|k| self.fail("nc_transpose", loc, k))
    }

    fn transpose_impl(
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
                    "nc_transpose runs on Tensor or Vector, not {eng}"
                )));
            }
        };
        if p > limit || f > limit {
            return Err(V::ShapeMismatch(format!(
                "{eng} transpose takes at most [{limit} x {limit}], src is [{p} x {f}]"
            )));
        }
        if d.tile.dtype != s.tile.dtype {
            return Err(V::DtypeNotAllowed {
                engine: eng.name(),
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
        self.h_op(&[7, eng as u8], &[&d, &s]);
        if self.mode.functional {
            let mut a = Vec::new();
            self.gather_tile("src", &s, &mut a)?;
            let mut t = vec![0f32; a.len()];
            for i in 0..p as usize {
                for j in 0..f as usize {
                    t[j * p as usize + i] = a[i * f as usize + j];
                }
            }
            self.scatter_tile(&d, &t);
        }
        let cycles = match eng {
            Engine::Tensor => cost::transpose_tensor(p, f),
            _ => cost::transpose_vector(self.chip.vector.min_ii_cycles, f),
        };
        if eng == Engine::Tensor {
            self.stats.transpose_flops += 2.0 * (p * p * f) as f64;
        }
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule("nc_transpose", eng, cycles, &reads, &writes, SourceLoc::from_location(loc));
        Ok(())
    }

    // ------------------------------------------------------------------ Vector / Scalar / GpSimd

    /// Free elements per partition of the main input, with the strided-access penalty of
    /// neuroncore.md §1.8 when any operand's inner stride exceeds 16 bytes.
    fn n_with_stride(views: &[&TileView]) -> u64 {
        let n = views[0].free.elems();
        let strided = views
            .iter()
            .any(|v| (v.free.inner_stride().unsigned_abs()) * v.tile.dtype.size() as u64 > 16);
        if strided {
            cost::strided_n(n)
        } else {
            n
        }
    }

    fn is_contig(v: &TileView) -> bool {
        v.free.contiguous_run() == v.free.elems()
    }

    fn check_engine_mem(eng: Engine, operand: &'static str, v: &TileView) -> VResult<()> {
        if eng == Engine::GpSimd && v.tile.mem == Mem::Psum {
            return Err(V::MemoryNotAllowed {
                operand,
                memory: "PSUM",
                rule: "GpSimd cannot access PSUM (neuroncore.md §1.5)",
            });
        }
        Ok(())
    }

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
        let loc = Location::caller();
        self.activation_impl(Engine::Scalar, dst.into(), src.into(), func, args, loc)
            .or_else(|k| self.fail("activation", loc, k))
    }

    fn activation_impl(
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
            bias_region = Some((b, self.check_tile("bias", b)?));
            if !matches!(b.tile.dtype, Dtype::F32 | Dtype::Bf16 | Dtype::F16) {
                return Err(V::DtypeNotAllowed {
                    engine: eng.name(),
                    operand: "bias",
                    dtype: b.tile.dtype,
                    rule: "bias is a [P,1] fp32, fp16 or bf16 tile (neuroncore.md §2.3)",
                });
            }
            if b.np != s.np || b.free.elems() != 1 {
                return Err(V::ShapeMismatch(format!(
                    "bias must be [{} x 1], is [{} x {}]",
                    s.np,
                    b.np,
                    b.free.elems()
                )));
            }
        }
        if let Scalar::Col(c) = &args.scale {
            scale_region = Some((c, self.check_tile("scale", c)?));
            if c.np != s.np || c.free.elems() != 1 {
                return Err(V::ShapeMismatch(format!(
                    "scale must be [{} x 1], is [{} x {}]",
                    s.np,
                    c.np,
                    c.free.elems()
                )));
            }
        }
        if let Some(r) = &args.reduce {
            reduce_region = Some((r, self.check_tile("reduce", r)?));
            if r.np != s.np || r.free.elems() != 1 {
                return Err(V::ShapeMismatch(format!(
                    "reduce must be [{} x 1], is [{} x {}]",
                    s.np,
                    r.np,
                    r.free.elems()
                )));
            }
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
        self.schedule("activation", eng, cycles, reads, writes, SourceLoc::from_location(loc));
        Ok(())
    }

    /// `tensor_tensor`: `dst = a op b` element-wise on VectorE (GpSimd via [`Nc::on`]).
    #[track_caller]
    pub fn tensor_tensor(
        &mut self,
        dst: impl Into<TileView>,
        a: impl Into<TileView>,
        b: impl Into<TileView>,
        op: Alu,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.tensor_tensor_impl(Engine::Vector, dst.into(), a.into(), b.into(), op, loc)
            .or_else(|k| self.fail("tensor_tensor", loc, k))
    }

    fn tensor_tensor_impl(
        &mut self,
        eng: Engine,
        d: TileView,
        a: TileView,
        b: TileView,
        op: Alu,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !matches!(eng, Engine::Vector | Engine::GpSimd) {
            return Err(V::Invalid(format!("tensor_tensor runs on Vector or GpSimd, not {eng}")));
        }
        let mut regions = [Region::default(); 3];
        for (i, (name, v)) in [("a", &a), ("b", &b), ("dst", &d)].into_iter().enumerate() {
            regions[i] = self.check_tile(name, v)?;
            Self::check_engine_mem(eng, name, v)?;
            self.check_free_size(name, v)?;
        }
        self.same_shape("a", &a, "b", &b)?;
        self.same_shape("dst", &d, "a", &a)?;
        if a.tile.mem == Mem::Psum && b.tile.mem == Mem::Psum {
            return Err(V::MemoryNotAllowed {
                operand: "b",
                memory: "PSUM",
                rule: "tensor_tensor inputs cannot both be in PSUM (neuroncore.md §2.3)",
            });
        }
        if eng == Engine::Vector {
            for (name, v) in [("a", &a), ("b", &b), ("dst", &d)] {
                if v.tile.dtype == Dtype::I32 {
                    return Err(V::DtypeNotAllowed {
                        engine: "Vector",
                        operand: name,
                        dtype: Dtype::I32,
                        rule: "int32 tensor_tensor runs on GpSimd (neuroncore.md §2.3)",
                    });
                }
            }
            if op == Alu::Pow {
                return Err(V::Invalid(
                    "tensor_tensor `power` runs on GpSimd (neuroncore.md §2.3)".into(),
                ));
            }
        }
        self.h_op(&[10, eng as u8, op.code()], &[&d, &a, &b]);
        if self.mode.functional {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            self.gather_tile("a", &a, &mut x)?;
            self.gather_tile("b", &b, &mut y)?;
            for (u, v) in x.iter_mut().zip(&y) {
                *u = op.apply(*u, *v);
            }
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&a, &b, &d]);
        let sb = |v: &TileView| v.tile.mem == Mem::Sbuf;
        let bf = |v: &TileView| v.tile.dtype == Dtype::Bf16;
        let split = sb(&a) != sb(&b);
        let bf16_fast = [&a, &b, &d].iter().all(|v| sb(v) && bf(v) && Self::is_contig(v))
            && matches!(op, Alu::Add | Alu::Multiply | Alu::Subtract);
        let sixteen = [&a, &b, &d].iter().all(|v| v.tile.dtype.size() == 2);
        // NeuronCore-v3+ VectorE performance mode: 2x with both inputs in SBUF, all 16-bit (§1.5).
        let speedup = if eng == Engine::Vector
            && self.chip.vector.perf_mode_16bit > 1
            && sb(&a)
            && sb(&b)
            && sixteen
        {
            2
        } else {
            1
        };
        let cycles = cost::tensor_tensor(self.min_ii(eng), n, split || bf16_fast, speedup);
        self.schedule(
            "tensor_tensor",
            eng,
            cycles,
            &[(&a, regions[0]), (&b, regions[1])],
            &[(&d, regions[2])],
            SourceLoc::from_location(loc),
        );
        Ok(())
    }

    /// `tensor_scalar`: `dst = (src op0 s0) op1 s1` with immediates or `[P,1]` columns, on
    /// VectorE (ScalarE via [`Nc::on`], which supports only multiply and add).
    #[track_caller]
    pub fn tensor_scalar(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.tensor_scalar_impl(Engine::Vector, dst.into(), src.into(), op0, op1, loc)
            .or_else(|k| self.fail("tensor_scalar", loc, k))
    }

    fn tensor_scalar_impl(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        match eng {
            Engine::Vector => {}
            Engine::Scalar => {
                for (op, _) in std::iter::once(&op0).chain(op1.as_ref()) {
                    if !matches!(op, Alu::Multiply | Alu::Add) {
                        return Err(V::Invalid(format!(
                            "ScalarE tensor_scalar supports only multiply and add, not {op:?} (neuroncore.md §2.3)"
                        )));
                    }
                }
            }
            _ => {
                return Err(V::Invalid(format!(
                    "tensor_scalar runs on Vector or Scalar, not {eng}"
                )))
            }
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        self.same_shape("dst", &d, "src", &s)?;
        let mut cols: Vec<(TileView, Region)> = Vec::new();
        for (name, (_, sc)) in
            [("scalar0", &op0)].into_iter().chain(op1.as_ref().map(|o| ("scalar1", o)))
        {
            if let Scalar::Col(c) = sc {
                let rc = self.check_tile(name, c)?;
                if c.np != s.np || c.free.elems() != 1 {
                    return Err(V::ShapeMismatch(format!(
                        "{name} must be [{} x 1], is [{} x {}]",
                        s.np,
                        c.np,
                        c.free.elems()
                    )));
                }
                if c.tile.dtype != Dtype::F32 {
                    return Err(V::DtypeNotAllowed {
                        engine: eng.name(),
                        operand: name,
                        dtype: c.tile.dtype,
                        rule: "tensor_scalar operands are fp32 (neuroncore.md §2.3)",
                    });
                }
                cols.push((*c, rc));
            }
        }
        self.h(&[11, eng as u8, op0.0.code(), op1.map_or(255, |o| o.0.code())]);
        self.h_tile(&d);
        self.h_tile(&s);
        for sc in std::iter::once(&op0.1).chain(op1.as_ref().map(|o| &o.1)) {
            self.h_scalar(sc);
        }
        if self.mode.functional {
            let (mut x, mut s0, mut s1) = (Vec::new(), Vec::new(), Vec::new());
            self.gather_tile("src", &s, &mut x)?;
            self.gather_scalar("scalar0", &op0.1, s.np, &mut s0)?;
            if let Some((_, sc)) = &op1 {
                self.gather_scalar("scalar1", sc, s.np, &mut s1)?;
            }
            let f = s.free.elems() as usize;
            for p in 0..s.np as usize {
                for v in &mut x[p * f..(p + 1) * f] {
                    *v = op0.0.apply(*v, s0[p]);
                    if let Some((op, _)) = &op1 {
                        *v = op.apply(*v, s1[p]);
                    }
                }
            }
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let speedup = self.copy_speedup(eng, &s, &d);
        let cycles = cost::tensor_scalar(self.min_ii(eng), n, speedup);
        let mut reads = vec![(&s, rs)];
        reads.extend(cols.iter().map(|(c, r)| (c, *r)));
        let writes = [(&d, rd)];
        self.schedule("tensor_scalar", eng, cycles, &reads, &writes, SourceLoc::from_location(loc));
        Ok(())
    }

    /// Performance-mode speed-up for copies and tensor_scalar (neuroncore.md §1.5): VectorE
    /// on v3+ 4x when both sides are 16-bit, SBUF and contiguous, 2x when one side is PSUM or
    /// strided; ScalarE on v4 2x for 16-bit.
    fn copy_speedup(&self, eng: Engine, s: &TileView, d: &TileView) -> u64 {
        let sixteen = s.tile.dtype.size() == 2 && d.tile.dtype.size() == 2;
        if !sixteen {
            return 1;
        }
        match eng {
            Engine::Vector if self.chip.vector.perf_mode_16bit > 1 => {
                if s.tile.mem == Mem::Sbuf
                    && d.tile.mem == Mem::Sbuf
                    && Self::is_contig(s)
                    && Self::is_contig(d)
                {
                    self.chip.vector.perf_mode_16bit
                } else {
                    2
                }
            }
            Engine::Scalar => self.chip.scalar.perf_mode_16bit,
            _ => 1,
        }
    }

    /// `tensor_reduce` on VectorE: reduce the last free dim of `src` into `dst`
    /// (`[P, N] → [P, 1]`, `[P, B, N] → [P, B]`), optionally negated.
    #[track_caller]
    pub fn tensor_reduce(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op: Alu,
        negate: bool,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.tensor_reduce_impl(dst.into(), src.into(), op, negate, loc)
            .or_else(|k| self.fail("tensor_reduce", loc, k))
    }

    fn tensor_reduce_impl(
        &mut self,
        d: TileView,
        s: TileView,
        op: Alu,
        negate: bool,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        self.check_free_size("src", &s)?;
        if !op.is_reduction() {
            return Err(V::Invalid(format!(
                "{op:?} is not a reduction operator (neuroncore.md §2.2)"
            )));
        }
        let inner = *s.free.as_slice().last().map(|(_, n)| n).unwrap_or(&1);
        let outer = s.free.elems() / inner;
        if d.np != s.np || d.free.elems() != outer {
            return Err(V::ShapeMismatch(format!(
                "reducing the last free dim of [{} x {:?}] gives [{} x {outer}], dst is [{} x {}]",
                s.np,
                s.free.shape(),
                s.np,
                d.np,
                d.free.elems()
            )));
        }
        self.h_op(&[12, op.code(), negate as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            let out: Vec<f32> = x
                .chunks(inner as usize)
                .map(|c| {
                    let r = c.iter().fold(op.reduce_init(), |acc, &v| op.apply(acc, v));
                    if negate {
                        -r
                    } else {
                        r
                    }
                })
                .collect();
            self.scatter_tile(&d, &out);
        }
        let bf = s.tile.dtype == Dtype::Bf16
            && d.tile.dtype == Dtype::Bf16
            && matches!(op, Alu::Add | Alu::Max);
        let cycles = cost::tensor_reduce(Self::n_with_stride(&[&s]), bf);
        self.schedule(
            "tensor_reduce",
            Engine::Vector,
            cycles,
            &[(&s, rs)],
            &[(&d, rd)],
            SourceLoc::from_location(loc),
        );
        Ok(())
    }

    /// `tensor_copy` on VectorE (ScalarE or GpSimd via [`Nc::on`]), casting to dst's dtype.
    #[track_caller]
    pub fn tensor_copy(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.tensor_copy_impl(Engine::Vector, dst.into(), src.into(), loc)
            .or_else(|k| self.fail("tensor_copy", loc, k))
    }

    fn tensor_copy_impl(
        &mut self,
        eng: Engine,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if eng == Engine::Tensor {
            return Err(V::Invalid(
                "tensor_copy runs on Vector, Scalar or GpSimd, not Tensor".into(),
            ));
        }
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "src", &s)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("src", &s)?;
        self.same_shape("dst", &d, "src", &s)?;
        self.h_op(&[13, eng as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            self.scatter_tile(&d, &x);
        }
        let n = Self::n_with_stride(&[&s, &d]);
        let cycles = cost::tensor_copy(self.min_ii(eng), n, self.copy_speedup(eng, &s, &d));
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule("tensor_copy", eng, cycles, &reads, &writes, SourceLoc::from_location(loc));
        Ok(())
    }

    /// `memset` on VectorE (GpSimd via [`Nc::on`]).
    #[track_caller]
    pub fn memset(&mut self, dst: impl Into<TileView>, value: f32) -> SimResult<()> {
        let loc = Location::caller();
        self.memset_impl(Engine::Vector, dst.into(), value, loc)
            .or_else(|k| self.fail("memset", loc, k))
    }

    fn memset_impl(
        &mut self,
        eng: Engine,
        d: TileView,
        value: f32,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        if !matches!(eng, Engine::Vector | Engine::GpSimd) {
            return Err(V::Invalid(format!("memset runs on Vector or GpSimd, not {eng}")));
        }
        let rd = self.check_tile("dst", &d)?;
        Self::check_engine_mem(eng, "dst", &d)?;
        self.check_free_size("dst", &d)?;
        self.h(&[14, eng as u8]);
        self.h_tile(&d);
        self.h64(value.to_bits() as u64);
        if self.mode.functional {
            let vals = vec![value; (d.np as u64 * d.free.elems()) as usize];
            self.scatter_tile(&d, &vals);
        }
        let zero16 = value == 0.0 && matches!(d.tile.dtype, Dtype::Bf16 | Dtype::F16);
        let cycles = cost::memset(self.min_ii(eng), Self::n_with_stride(&[&d]), zero16);
        self.schedule("memset", eng, cycles, &[], &[(&d, rd)], SourceLoc::from_location(loc));
        Ok(())
    }

    /// `iota` on GpSimd: `dst[p, i...] = expr(p, i...)` computed in int32, cast to dst.
    #[track_caller]
    pub fn iota(&mut self, dst: impl Into<TileView>, expr: Affine) -> SimResult<()> {
        let loc = Location::caller();
        self.affine_impl("iota", dst.into(), None, expr, Cmp::Ge, 0.0, loc)
            .or_else(|k| self.fail("iota", loc, k))
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
        let loc = Location::caller();
        self.affine_impl("affine_select", dst.into(), Some(src.into()), expr, cmp, on_false, loc)
            .or_else(|k| self.fail("affine_select", loc, k))
    }

    #[allow(clippy::too_many_arguments)]
    fn affine_impl(
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
        );
        Ok(())
    }

    /// `bn_stats` on VectorE: per partition, for the even and the odd elements of `src`
    /// (N ≤ 512), the triple (count, mean, variance) → `dst` `[P, 6]`.
    #[track_caller]
    pub fn bn_stats(
        &mut self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.bn_impl(true, dst.into(), src.into(), loc).or_else(|k| self.fail("bn_stats", loc, k))
    }

    /// `bn_aggr` on VectorE: combine `k` (count, mean, variance) triples of `src` `[P, 3k]`
    /// into (mean, variance) in `dst` `[P, 2]`.
    #[track_caller]
    pub fn bn_aggr(&mut self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let loc = Location::caller();
        self.bn_impl(false, dst.into(), src.into(), loc).or_else(|k| self.fail("bn_aggr", loc, k))
    }

    fn bn_impl(
        &mut self,
        stats: bool,
        d: TileView,
        s: TileView,
        loc: &'static Location<'static>,
    ) -> VResult<()> {
        let rs = self.check_tile("src", &s)?;
        let rd = self.check_tile("dst", &d)?;
        let n = s.free.elems();
        let want = if stats { 6 } else { 2 };
        if d.np != s.np || d.free.elems() != want {
            return Err(V::ShapeMismatch(format!(
                "dst must be [{} x {want}], is [{} x {}]",
                s.np,
                d.np,
                d.free.elems()
            )));
        }
        if stats && n > 512 {
            return Err(V::FreeSizeTooLarge {
                operand: "src",
                elems: n,
                memory: "bn_stats",
                max: 512,
            });
        }
        if !stats && !n.is_multiple_of(3) {
            return Err(V::ShapeMismatch(format!(
                "bn_aggr takes (count, mean, var) triples, src has {n} elements"
            )));
        }
        self.h_op(&[16, stats as u8], &[&d, &s]);
        if self.mode.functional {
            let mut x = Vec::new();
            self.gather_tile("src", &s, &mut x)?;
            let mut out = Vec::new();
            for row in x.chunks(n as usize) {
                if stats {
                    for parity in 0..2 {
                        let v: Vec<f64> =
                            row.iter().skip(parity).step_by(2).map(|&v| v as f64).collect();
                        let c = v.len() as f64;
                        let mean = if c > 0.0 { v.iter().sum::<f64>() / c } else { 0.0 };
                        let var = if c > 0.0 {
                            v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / c
                        } else {
                            0.0
                        };
                        out.extend([c as f32, mean as f32, var as f32]);
                    }
                } else {
                    let (mut c, mut mean, mut m2) = (0f64, 0f64, 0f64);
                    for t in row.chunks(3) {
                        let (cb, mb, vb) = (t[0] as f64, t[1] as f64, t[2] as f64);
                        if cb == 0.0 {
                            continue;
                        }
                        let tot = c + cb;
                        let delta = mb - mean;
                        mean += delta * cb / tot;
                        m2 += vb * cb + delta * delta * c * cb / tot;
                        c = tot;
                    }
                    out.extend([mean as f32, if c > 0.0 { (m2 / c) as f32 } else { 0.0 }]);
                }
            }
            self.scatter_tile(&d, &out);
        }
        let min_ii = self.chip.vector.min_ii_cycles;
        let cycles = if stats { cost::bn_stats(min_ii, n) } else { cost::bn_aggr(min_ii, n) };
        let opcode = if stats { "bn_stats" } else { "bn_aggr" };
        let (reads, writes) = ([(&s, rs)], [(&d, rd)]);
        self.schedule(
            opcode,
            Engine::Vector,
            cycles,
            &reads,
            &writes,
            SourceLoc::from_location(loc),
        );
        Ok(())
    }

    /// Issue the next instruction on a chosen engine, where the hardware allows a choice:
    /// `nc.on(Engine::Scalar).tensor_copy(dst, src)?`.
    pub fn on(&mut self, engine: Engine) -> On<'_> {
        On { nc: self, engine }
    }
}

/// An engine choice for one instruction (see [`Nc::on`]).
pub struct On<'a> {
    nc: &'a mut Nc,
    engine: Engine,
}

impl On<'_> {
    #[track_caller]
    pub fn tensor_copy(self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .tensor_copy_impl(self.engine, dst.into(), src.into(), loc)
            .or_else(|k| self.nc.fail("tensor_copy", loc, k))
    }
    #[track_caller]
    pub fn tensor_tensor(
        self,
        dst: impl Into<TileView>,
        a: impl Into<TileView>,
        b: impl Into<TileView>,
        op: Alu,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .tensor_tensor_impl(self.engine, dst.into(), a.into(), b.into(), op, loc)
            .or_else(|k| self.nc.fail("tensor_tensor", loc, k))
    }
    #[track_caller]
    pub fn tensor_scalar(
        self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        op0: (Alu, Scalar),
        op1: Option<(Alu, Scalar)>,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .tensor_scalar_impl(self.engine, dst.into(), src.into(), op0, op1, loc)
            .or_else(|k| self.nc.fail("tensor_scalar", loc, k))
    }
    #[track_caller]
    pub fn memset(self, dst: impl Into<TileView>, value: f32) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .memset_impl(self.engine, dst.into(), value, loc)
            .or_else(|k| self.nc.fail("memset", loc, k))
    }
    #[track_caller]
    pub fn transpose(self, dst: impl Into<TileView>, src: impl Into<TileView>) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .transpose_impl(self.engine, dst.into(), src.into(), loc)
            .or_else(|k| self.nc.fail("nc_transpose", loc, k))
    }
    #[track_caller]
    pub fn activation(
        self,
        dst: impl Into<TileView>,
        src: impl Into<TileView>,
        func: Act,
        args: ActArgs,
    ) -> SimResult<()> {
        let loc = Location::caller();
        self.nc
            .activation_impl(self.engine, dst.into(), src.into(), func, args, loc)
            .or_else(|k| self.nc.fail("activation", loc, k))
    }
}

fn shift_dims(d: &Dims<MAX_HBM_DIMS>) -> [(i64, u64); MAX_HBM_DIMS] {
    let mut out = [(0, 1); MAX_HBM_DIMS];
    let n = d.len();
    if n > 1 {
        out[..n - 1].copy_from_slice(&d.as_slice()[1..]);
    }
    out
}

fn describe(v: &TileView) -> String {
    format!(
        "{}:b{}[{}:{}]{:?}+{} {}",
        v.tile.mem.name().to_lowercase(),
        v.tile.buf,
        v.p0,
        v.p0 + v.np,
        v.free.shape(),
        v.offset,
        v.tile.dtype
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chip's text in the program hash is the chip's own, whatever chip the thread built
    /// a program for before: 0.0 and -0.0 compare equal but print (and hash) differently.
    #[test]
    fn program_hash_names_the_chip_exactly_whatever_came_before() {
        let hash = |chip: &Chip| Nc::new(chip.clone(), ExecMode::TIMING).program_hash();
        let mut zero = Chip::trn2();
        zero.dma.descriptor_ns = 0.0;
        let mut negative_zero = zero.clone();
        negative_zero.dma.descriptor_ns = -0.0;
        assert_eq!(zero, negative_zero);
        let fresh = {
            let chip = negative_zero.clone();
            std::thread::spawn(move || hash(&chip)).join().unwrap()
        };
        hash(&zero);
        assert_eq!(hash(&negative_zero), fresh);
        assert_ne!(hash(&zero), fresh);
    }

    /// The region of an HBM block (rows x columns of a row-major tensor, transposed or not) is
    /// exactly the bounding box of the elements it touches, for rows of a power-of-two length
    /// (shifts and masks) and of another length (divisions) alike.
    #[test]
    fn hbm_region_of_a_block_is_its_bounding_box() {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        for cols in [64u64, 48] {
            let t = nc.hbm(&format!("t{cols}"), Dtype::Bf16, &[16, cols]).unwrap();
            for _ in 0..200 {
                let (r0, c0) = (next(16), next(cols));
                let (r1, c1) = (r0 + 1 + next(16 - r0), c0 + 1 + next(cols - c0));
                let mut v = t.slice(&[r0..r1, c0..c1]);
                if next(2) == 0 {
                    v = v.t();
                }
                let mut offsets = Vec::new();
                v.dims.offsets(v.offset, &mut offsets);
                let row = |o: &i64| o.div_euclid(cols as i64) as u32;
                let col = |o: &i64| o.rem_euclid(cols as i64) as u64;
                let expected = Region {
                    id: nc.hbm[t.id as usize].tid,
                    p0: offsets.iter().map(row).min().unwrap(),
                    p1: offsets.iter().map(row).max().unwrap() + 1,
                    b0: offsets.iter().map(col).min().unwrap() * 2,
                    b1: (offsets.iter().map(col).max().unwrap() + 1) * 2,
                };
                assert_eq!(nc.hbm_region(&v), expected, "{v:?}");
            }
        }
    }
}
