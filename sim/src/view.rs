//! Handles to memory and access patterns over them.
//!
//! An [`Hbm`] is a tensor in device memory; an [`HbmView`] is an access pattern over it
//! (offset plus up to 5 `(stride, size)` dims in elements; dim 0 maps to partitions when
//! the view is copied on chip). A [`Tile`] is one allocation of an on-chip logical tile
//! (SBUF or PSUM); a [`TileView`] is a partition range plus a free-axis access pattern of
//! up to 4 dims (neuroncore.md §1.8). All handles are small `Copy` values; slicing is pure
//! and checked later, when an instruction uses the view, so errors carry the instruction's
//! source line.
//!
//! Every helper checks what it is asked against the view it is applied to — a range or index
//! against that view's size in the dim (not merely the tensor's or tile's memory), a dim
//! against the view's dims, a split against the size it divides — and a helper that cannot
//! apply leaves the view as it was, marked with a [`Fault`] that names the step. The first
//! instruction that uses a marked view reports it as an error (`hbm_out_of_bounds`,
//! `tile_out_of_bounds` or `bad_view`): a bad view is never used, and never silently a
//! different one.

use crate::error::{SimError, SimResult, SourceLoc, ViolationKind};
use crate::Dtype;
use std::ops::Range;
use std::panic::Location;

/// Maximum dims of an HBM access pattern (partition dim + 4 free dims).
pub const MAX_HBM_DIMS: usize = 5;
/// Maximum free dims of an on-chip access pattern (§1.8: up to 4).
pub const MAX_FREE_DIMS: usize = 4;

/// `(stride, size)` dims, strides in elements, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dims<const N: usize> {
    pub(crate) n: u8,
    pub(crate) d: [(i64, u64); N],
}

impl<const N: usize> Dims<N> {
    pub(crate) fn contiguous(shape: &[u64]) -> Self {
        let mut d = [(0i64, 1u64); N];
        let mut stride = 1i64;
        for (i, &s) in shape.iter().enumerate().rev() {
            d[i] = (stride, s);
            stride *= s as i64;
        }
        Dims { n: shape.len() as u8, d }
    }
    pub fn len(&self) -> usize {
        self.n as usize
    }
    pub fn as_slice(&self) -> &[(i64, u64)] {
        &self.d[..self.n as usize]
    }
    pub fn shape(&self) -> Vec<u64> {
        self.as_slice().iter().map(|d| d.1).collect()
    }
    pub fn elems(&self) -> u64 {
        self.as_slice().iter().map(|d| d.1).product()
    }
    /// Smallest and largest element offset relative to the base (inclusive), or None if empty.
    pub(crate) fn span(&self) -> Option<(i64, i64)> {
        self.span_elems().map(|(lo, hi, _)| (lo, hi))
    }
    /// [`Dims::span`] and [`Dims::elems`] in one pass (instruction checks need both).
    #[inline(always)]
    pub(crate) fn span_elems(&self) -> Option<(i64, i64, u64)> {
        let (mut lo, mut hi, mut elems) = (0i64, 0i64, 1u64);
        for &(s, n) in self.as_slice() {
            if n == 0 {
                return None;
            }
            let ext = s * (n as i64 - 1);
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
            elems *= n;
        }
        Some((lo, hi, elems))
    }
    /// Elements in the innermost contiguous run (merging inner dims while they stay dense).
    pub(crate) fn contiguous_run(&self) -> u64 {
        let mut run = 1u64;
        for &(s, n) in self.as_slice().iter().rev() {
            if n == 1 {
                continue;
            }
            if s == run as i64 {
                run *= n;
            } else {
                break;
            }
        }
        run
    }
    /// Stride of the innermost dim with more than one element (1 if none).
    pub(crate) fn inner_stride(&self) -> i64 {
        self.as_slice().iter().rev().find(|d| d.1 > 1).map(|d| d.0).unwrap_or(1)
    }
    /// Element offsets of every element, row-major over the dims.
    pub(crate) fn offsets(&self, base: i64, out: &mut Vec<i64>) {
        out.clear();
        out.push(base);
        for &(s, n) in self.as_slice() {
            let prev = std::mem::take(out);
            out.reserve(prev.len() * n as usize);
            for o in prev {
                for i in 0..n as i64 {
                    out.push(o + i * s);
                }
            }
        }
    }
    /// Drop dim `i` (< `n`), moving the later ones down. Written as a fixed-size loop:
    /// `copy_within` calls `memmove` for these few bytes, and this runs for every view a
    /// kernel builds (`tile.at(k)` in its inner loop).
    #[inline(always)]
    fn remove(&mut self, i: usize) {
        for j in i..N - 1 {
            self.d[j] = self.d[j + 1];
        }
        self.n -= 1;
        self.d[self.n as usize] = (0, 1);
    }
    /// Insert `dim` at position `i` (<= `n` < `N`), moving the later ones up (see [`Dims::remove`]).
    #[inline(always)]
    fn insert(&mut self, i: usize, dim: (i64, u64)) {
        for j in (i + 1..N).rev() {
            self.d[j] = self.d[j - 1];
        }
        self.d[i] = dim;
        self.n += 1;
    }
    /// Restrict dim `dim` to `r`, giving the offset it adds; or the fault, leaving the dims
    /// as they were. `own`: whether the dim is a tensor's own (for the error's wording).
    fn restrict(
        &mut self,
        step: Step,
        dim: usize,
        r: &Range<u64>,
        own: bool,
    ) -> Result<i64, Fault> {
        let Some(&(stride, size)) = self.as_slice().get(dim) else {
            return Err(Fault::NoDim { step, n: self.n, args: [dim as u64, r.start, r.end] });
        };
        let dim = dim as u8;
        if r.start > r.end {
            return Err(Fault::Reversed { dim, start: r.start, end: r.end });
        }
        if r.end > size {
            let (start, end) = (r.start, r.end);
            return Err(Fault::OutOfBounds { dim, index: false, own, start, end, size });
        }
        self.d[dim as usize].1 = r.end - r.start;
        Ok(stride * r.start as i64)
    }
    /// Drop dim `dim`, fixed at `i`, giving the offset it adds; or the fault (see
    /// [`Dims::restrict`]).
    fn fix(&mut self, step: Step, dim: usize, i: u64, own: bool) -> Result<i64, Fault> {
        let Some(&(stride, size)) = self.as_slice().get(dim) else {
            return Err(Fault::NoDim { step, n: self.n, args: [dim as u64, i, 0] });
        };
        if i >= size {
            let dim = dim as u8;
            let end = i.saturating_add(1);
            return Err(Fault::OutOfBounds { dim, index: true, own, start: i, end, size });
        }
        self.remove(dim);
        Ok(stride * i as i64)
    }
    /// Split dim `dim` into `[size / inner, inner]`, or the fault.
    fn split(&mut self, dim: usize, inner: u64) -> Result<(), Fault> {
        let (n, args) = (self.n, [dim as u64, inner, 0]);
        let Some(&(s, size)) = self.as_slice().get(dim) else {
            return Err(Fault::NoDim { step: Step::Split, n, args });
        };
        if n as usize == N {
            return Err(Fault::Full { step: Step::Split, n, args });
        }
        if inner == 0 || !size.is_multiple_of(inner) {
            return Err(Fault::Split { dim: dim as u8, inner, size });
        }
        self.d[dim] = (s * inner as i64, size / inner);
        self.insert(dim + 1, (s, inner));
        Ok(())
    }
    /// Swap dims `a` and `b`, or the fault.
    fn swap(&mut self, step: Step, a: usize, b: usize) -> Result<(), Fault> {
        if a >= self.len() || b >= self.len() {
            return Err(Fault::NoDim { step, n: self.n, args: [a as u64, b as u64, 0] });
        }
        self.d.swap(a, b);
        Ok(())
    }
    /// Insert a stride-0 dim of `n` elements at `dim` (<= the dim count), or the fault.
    fn expand(&mut self, step: Step, dim: usize, n: u64) -> Result<(), Fault> {
        let args = [dim as u64, n, 0];
        if dim > self.len() {
            return Err(Fault::NoDim { step, n: self.n, args });
        }
        if self.len() == N {
            return Err(Fault::Full { step, n: self.n, args });
        }
        let elems = self.as_slice().iter().try_fold(n, |total, d| total.checked_mul(d.1));
        if elems.is_none_or(|e| e > MAX_VIEW_ELEMS) {
            return Err(Fault::Huge { step, args });
        }
        self.insert(dim, (0, n));
        Ok(())
    }
}

/// The most elements a view may cover: 2⁴⁰, far past any NeuronCore memory (an HBM of
/// 96 GiB holds under 2³⁷ bytes), so only a broadcast or expand by a wrong count reaches
/// it; past it the element and byte counts the checks compute could overflow.
pub(crate) const MAX_VIEW_ELEMS: u64 = 1 << 40;

/// Partitions, as a [`Fault`]'s dim.
pub(crate) const PARTS: u8 = u8::MAX;

/// The view helper a [`Fault`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    Slice,
    SliceDim,
    Rows,
    Cols,
    Index,
    At,
    Swap,
    T,
    Split,
    Expand,
    Broadcast,
    BroadcastFree,
}

impl Step {
    /// The call as a kernel wrote it, from its arguments (`[dim, start, end]` for a range,
    /// `[dim, index]`, `[a, b]` for a swap, `[dim, n]`).
    fn call(self, a: [u64; 3]) -> String {
        match self {
            Step::Slice => format!("slice with a range for dim {} ({}..{})", a[0], a[1], a[2]),
            Step::SliceDim => format!("slice_dim({}, {}..{})", a[0], a[1], a[2]),
            Step::Rows => format!("rows({}..{})", a[1], a[2]),
            Step::Cols => format!("cols({}..{})", a[1], a[2]),
            Step::Index => format!("index({}, {})", a[0], a[1]),
            Step::At => format!("at({})", a[1]),
            Step::Swap => format!("swap({}, {})", a[0], a[1]),
            Step::T => "t()".into(),
            Step::Split => format!("split({}, {})", a[0], a[1]),
            Step::Expand => format!("expand({}, {})", a[0], a[1]),
            Step::Broadcast => format!("broadcast({})", a[1]),
            Step::BroadcastFree => format!("broadcast_free({})", a[1]),
        }
    }
}

/// A view's [`Fault`], as the view carries it: a handle, 0 for none.
///
/// Views are made and copied for every instruction, and a [`Fault`] inline (32 bytes) took
/// a `TileView` from 112 to 144 bytes, past what a move copies inline: every view passed
/// became a `memcpy` call, 6 % of the timing benchmark's CPU instructions. Faults are rare
/// (a kernel with a bad view stops at it), so they live in a process-wide table and the
/// view holds a 4-byte handle. The table is a ring of [`FAULTS_KEPT`] entries, each with its
/// handle: a handle whose entry a later fault took reads as [`Fault::Lost`] (only past
/// that many bad views in one process), never as another view's fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct FaultRef(u32);

/// How many faults the table keeps (32 bytes each: 2 MiB).
const FAULTS_KEPT: usize = 1 << 16;

static FAULTS: std::sync::Mutex<FaultTable> = std::sync::Mutex::new(FaultTable::new(FAULTS_KEPT));

/// The last `kept` faults, each under its handle (1, 2, …; 0 is no fault).
struct FaultTable {
    last: u32,
    kept: usize,
    ring: Vec<(u32, Fault)>,
}

impl FaultTable {
    const fn new(kept: usize) -> FaultTable {
        FaultTable { last: 0, kept, ring: Vec::new() }
    }

    fn put(&mut self, fault: Fault) -> u32 {
        self.last = self.last.checked_add(1).unwrap_or(1);
        let slot = self.last as usize % self.kept;
        if self.ring.len() <= slot {
            self.ring.resize(slot + 1, (0, Fault::None));
        }
        self.ring[slot] = (self.last, fault);
        self.last
    }

    fn get(&self, id: u32) -> Fault {
        match self.ring.get(id as usize % self.kept) {
            Some(&(kept, fault)) if kept == id => fault,
            _ => Fault::Lost,
        }
    }
}

impl FaultRef {
    pub(crate) const NONE: FaultRef = FaultRef(0);

    fn new(fault: Fault) -> FaultRef {
        // A poisoned lock still holds consistent entries (each written whole).
        FaultRef(FAULTS.lock().unwrap_or_else(|e| e.into_inner()).put(fault))
    }

    pub(crate) fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The fault this handle names.
    pub(crate) fn get(self) -> Fault {
        match self.0 {
            0 => Fault::None,
            id => FAULTS.lock().unwrap_or_else(|e| e.into_inner()).get(id),
        }
    }
}

/// Why a view is not one an instruction may use: the first helper that could not apply, kept
/// (through a [`FaultRef`]) in the view until an instruction reports it with its own name
/// and source line (builders return plain values). [`Fault::None`] for a good view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Fault {
    None,
    /// Range `start..end` (index `start` when `index`) of dim `dim` ([`PARTS`] for a tile's
    /// partitions) reaches past the `size` the view it restricts has there; `own`: that dim
    /// is the HBM tensor's own, neither sliced nor moved before.
    OutOfBounds {
        dim: u8,
        index: bool,
        own: bool,
        start: u64,
        end: u64,
        size: u64,
    },
    /// Range `start..end` of dim `dim` runs backwards.
    Reversed {
        dim: u8,
        start: u64,
        end: u64,
    },
    /// `step(args)` names a dim a view of `n` dims does not have.
    NoDim {
        step: Step,
        n: u8,
        args: [u64; 3],
    },
    /// `step(args)` would give a view of `n` dims one more than it may have.
    Full {
        step: Step,
        n: u8,
        args: [u64; 3],
    },
    /// A fault whose details the table no longer holds ([`FaultRef`]).
    Lost,
    /// `step(args)` (a broadcast or expand) would cover more than [`MAX_VIEW_ELEMS`].
    Huge {
        step: Step,
        args: [u64; 3],
    },
    /// `split(dim, inner)` of a dim of `size` elements, which `inner` does not divide.
    Split {
        dim: u8,
        inner: u64,
        size: u64,
    },
}

impl Fault {
    /// What was asked and why it cannot be, for a fault other than
    /// [`Fault::OutOfBounds`] (which has its own violations). `hbm`: the view is over an
    /// HBM tensor (dims numbered from the partition dim), else over a tile (free dims).
    pub(crate) fn problem(&self, hbm: bool) -> String {
        let dims = |n: u8| match (hbm, n) {
            (true, n) => format!("a {n}-dim view"),
            (false, 1) => "a view with 1 free dim".to_string(),
            (false, n) => format!("a view with {n} free dims"),
        };
        let dim = |d: u8| match (hbm, d) {
            (_, PARTS) => "partitions".to_string(),
            (true, d) => format!("dim {d}"),
            (false, d) => format!("free dim {d}"),
        };
        match *self {
            Fault::None | Fault::OutOfBounds { .. } => String::new(),
            Fault::Reversed { dim: d, start, end } => {
                let is = if d == PARTS { "" } else { " is" };
                format!(
                    "{}{is} {start}..{end}, a reversed range (start after end): a range runs \
                     upward from its start, and this one selects nothing",
                    dim(d)
                )
            }
            Fault::NoDim { step, n, args } => {
                let has = match (step, n) {
                    (Step::Expand, n) => format!("a new dim goes at 0 to {n}"),
                    (_, 0) => "it has none".to_string(),
                    (_, n) if hbm => format!("its dims are 0 to {}", n - 1),
                    (_, n) => format!("its free dims are 0 to {}", n - 1),
                };
                format!("{} on {} ({has})", step.call(args), dims(n))
            }
            Fault::Full { step, n, args } => {
                let max = if hbm {
                    format!("an HBM view has at most {MAX_HBM_DIMS} dims")
                } else {
                    format!("a view has at most {MAX_FREE_DIMS} free dims (neuroncore.md §1.8)")
                };
                format!("{} on {}: {max}", step.call(args), dims(n))
            }
            Fault::Split { dim: d, inner, size } => {
                format!("split({d}, {inner}): {inner} does not divide {}'s {size}", dim(d))
            }
            Fault::Lost => format!(
                "a view helper could not apply; which one was not kept (more than {FAULTS_KEPT} \
                 bad views were made in this process)"
            ),
            Fault::Huge { step, args } => format!(
                "{}: the view would cover more than 2^40 elements, more than any NeuronCore \
                 memory holds (a broadcast or expand by a wrong count?)",
                step.call(args)
            ),
        }
    }
}

/// A tensor in HBM (device memory). Create with [`crate::Nc::hbm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hbm {
    pub(crate) id: u32,
    pub(crate) dtype: Dtype,
    pub(crate) shape: Dims<MAX_HBM_DIMS>,
}

impl Hbm {
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    pub fn shape(&self) -> Vec<u64> {
        self.shape.shape()
    }
    /// Number of elements.
    pub fn elems(&self) -> u64 {
        self.shape.elems()
    }
    /// The two dims of a 2-D tensor.
    ///
    /// Precondition: the tensor is 2-D (it panics on another rank, like indexing would). For
    /// a tensor whose rank a kernel does not control, [`Hbm::try_dims2`] is the same with a
    /// typed error, and [`Hbm::shape`] gives any rank.
    #[track_caller]
    pub fn dims2(&self) -> (u64, u64) {
        self.try_dims2().unwrap_or_else(|e| panic!("{e}"))
    }
    /// The two dims of a 2-D tensor, or a `shape_mismatch` error at the caller's line.
    #[track_caller]
    pub fn try_dims2(&self) -> SimResult<(u64, u64)> {
        match *self.shape.as_slice() {
            [(_, rows), (_, cols)] => Ok((rows, cols)),
            ref dims => Err(SimError {
                instruction: "dims2",
                loc: SourceLoc::from_location(Location::caller()),
                kind: ViolationKind::ShapeMismatch(format!(
                    "dims2() takes a 2-D tensor, this one has rank {} (shape {:?}); use shape() \
                     for another rank",
                    dims.len(),
                    self.shape()
                )),
            }),
        }
    }
    /// The same memory with another row-major shape of the same element count (like
    /// `reshape` on a contiguous array), or `None` if the counts differ.
    pub fn reshape(&self, shape: &[u64]) -> Option<Hbm> {
        (shape.len() <= MAX_HBM_DIMS
            && !shape.is_empty()
            && shape.iter().product::<u64>() == self.elems())
        .then(|| Hbm { id: self.id, dtype: self.dtype, shape: Dims::contiguous(shape) })
    }

    /// The whole tensor as an access pattern.
    pub fn view(&self) -> HbmView {
        HbmView { tensor: *self, offset: 0, dims: self.shape, fault: FaultRef::NONE }
    }
    /// Rows `r` of the tensor (dim 0, the one that maps to partitions when copied on chip):
    /// `x.rows(r..r + 128)` is a tile's worth.
    pub fn rows(&self, r: Range<u64>) -> HbmView {
        self.view().rows(r)
    }
    /// Columns `r` (the last dim).
    pub fn cols(&self, r: Range<u64>) -> HbmView {
        self.view().cols(r)
    }
    /// The leading dims restricted, one range per dim (`x.slice(&[r0..r1, c0..c1])`).
    pub fn slice(&self, ranges: &[Range<u64>]) -> HbmView {
        self.view().slice(ranges)
    }
}

/// An access pattern over an HBM tensor; dim 0 is the partition dim when copied on chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HbmView {
    pub(crate) tensor: Hbm,
    pub(crate) offset: i64,
    pub(crate) dims: Dims<MAX_HBM_DIMS>,
    /// The first helper that could not apply (see [`Fault`]).
    pub(crate) fault: FaultRef,
}

impl HbmView {
    /// The view's shape, dim by dim.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.shape()
    }
    /// The tensor's dtype.
    pub fn dtype(&self) -> Dtype {
        self.tensor.dtype
    }
    /// Apply one helper's edit of the dims, or keep its fault (and the view as it was). A
    /// view already at fault stays as it is: its first fault is the one reported.
    ///
    /// In place, with no copy to roll back to: each edit checks everything before it
    /// changes anything (the `Dims` methods and the closures here return their fault
    /// first), which the tests of a faulted view's dims and offset hold it to.
    #[inline(always)]
    fn edit(mut self, f: impl FnOnce(&mut Self) -> Result<(), Fault>) -> Self {
        if self.fault.is_none() {
            if let Err(fault) = f(&mut self) {
                self.fault = FaultRef::new(fault);
            }
        }
        self
    }
    /// Whether dim `dim` of the view is still the tensor's own (for error wording).
    fn own(&self, dim: usize) -> bool {
        self.dims.n == self.tensor.shape.n && self.dims.d.get(dim) == self.tensor.shape.d.get(dim)
    }
    fn restrict(self, step: Step, dim: usize, r: Range<u64>) -> Self {
        self.edit(|v| {
            let own = v.own(dim);
            v.offset += v.dims.restrict(step, dim, &r, own)?;
            Ok(())
        })
    }
    /// Restrict dim `dim` to `r`, which must lie in the view's size there (checked when an
    /// instruction uses the view, as every helper's argument is).
    pub fn slice_dim(self, dim: usize, r: Range<u64>) -> Self {
        self.restrict(Step::SliceDim, dim, r)
    }
    /// Slice the leading dims, one range per dim (at most one per dim).
    pub fn slice(mut self, ranges: &[Range<u64>]) -> Self {
        for (i, r) in ranges.iter().enumerate() {
            self = self.restrict(Step::Slice, i, r.clone());
        }
        self
    }
    /// Dim 0 restricted to `r` (rows; partitions when copied on chip).
    pub fn rows(self, r: Range<u64>) -> Self {
        self.restrict(Step::Rows, 0, r)
    }
    /// The last dim restricted to `r` (columns).
    pub fn cols(self, r: Range<u64>) -> Self {
        let last = self.dims.len().saturating_sub(1);
        self.restrict(Step::Cols, last, r)
    }
    /// Fix dim `dim` at index `i`, dropping it.
    pub fn index(self, dim: usize, i: u64) -> Self {
        self.edit(|v| {
            let own = v.own(dim);
            v.offset += v.dims.fix(Step::Index, dim, i, own)?;
            Ok(())
        })
    }
    /// Swap two dims (a strided, transposing access).
    pub fn swap(self, a: usize, b: usize) -> Self {
        self.edit(|v| v.dims.swap(Step::Swap, a, b))
    }
    /// Transpose a 2-D view.
    pub fn t(self) -> Self {
        self.edit(|v| v.dims.swap(Step::T, 0, 1))
    }
    /// Split dim `dim` of size `outer*inner` into `[outer, inner]` (`inner` must divide it).
    pub fn split(self, dim: usize, inner: u64) -> Self {
        self.edit(|v| v.dims.split(dim, inner))
    }
    /// Prepend a stride-0 dim of `n` elements: every partition reads the same data
    /// (e.g. a weight vector broadcast to 128 partitions).
    pub fn broadcast(self, n: u64) -> Self {
        self.edit(|v| v.dims.expand(Step::Broadcast, 0, n))
    }
    /// Merge all dims after dim 0 into one, when they are dense (for 2-D copies).
    pub fn flatten_free(mut self) -> Self {
        let n = self.dims.len();
        if n > 2 {
            let free = Dims::<MAX_HBM_DIMS> { n: (n - 1) as u8, d: shift(&self.dims.d, 1) };
            if free.contiguous_run() == free.elems() {
                let mut flat = Dims::contiguous(&[self.dims.d[0].1, free.elems()]);
                flat.d[0] = self.dims.d[0];
                self.dims = flat;
            }
        }
        self
    }
}

fn shift<const N: usize>(d: &[(i64, u64); N], by: usize) -> [(i64, u64); N] {
    let mut out = [(0, 1); N];
    out[..N - by].copy_from_slice(&d[by..]);
    out
}

/// Which on-chip memory a tile lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Mem {
    Sbuf,
    Psum,
}

impl Mem {
    pub const fn name(self) -> &'static str {
        match self {
            Mem::Sbuf => "SBUF",
            Mem::Psum => "PSUM",
        }
    }
}

/// A pool of on-chip memory (create with [`crate::Nc::sbuf_pool`] / [`crate::Nc::psum_pool`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool {
    pub(crate) id: u32,
    pub(crate) mem: Mem,
    pub(crate) bufs: u32,
}

impl Pool {
    pub fn bufs(&self) -> u32 {
        self.bufs
    }
    pub fn mem(&self) -> Mem {
        self.mem
    }
}

/// One allocation of a logical tile: `[partitions, free...]` of `dtype` in SBUF or PSUM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// The whole tile as a view, built once: `view()` and `at(k)` copy it rather than
    /// assemble it field by field.
    pub(crate) whole: TileView,
}

impl Tile {
    pub(crate) fn new(
        buf: u32,
        gen: u32,
        dtype: Dtype,
        mem: Mem,
        parts: u32,
        free: Dims<MAX_FREE_DIMS>,
    ) -> Self {
        let tile = TileRef { buf, gen, dtype, mem, parts, elems: free.elems() };
        Tile { whole: TileView { tile, p0: 0, np: parts, offset: 0, free, fault: FaultRef::NONE } }
    }
    pub fn dtype(&self) -> Dtype {
        self.whole.tile.dtype
    }
    pub fn mem(&self) -> Mem {
        self.whole.tile.mem
    }
    pub fn partitions(&self) -> u32 {
        self.whole.tile.parts
    }
    /// Free-axis shape.
    pub fn free_shape(&self) -> Vec<u64> {
        self.whole.free.shape()
    }
    /// Free elements per partition.
    pub fn free_elems(&self) -> u64 {
        self.whole.tile.elems
    }
    /// The whole tile as a view.
    #[inline]
    pub fn view(&self) -> TileView {
        self.whole
    }
    /// Partitions `r` of the tile (`t.parts(0..pr as u32)` for a last, partial row tile).
    /// Partitions are `u32` (at most 128), free-axis indices `u64`.
    pub fn parts(&self, r: Range<u32>) -> TileView {
        self.view().parts(r)
    }
    /// Columns `r`: the last free dim restricted.
    pub fn cols(&self, r: Range<u64>) -> TileView {
        self.view().cols(r)
    }
    /// Block `i` of the first free dim (of a `[128, blocks, n]` tile, the `[128, n]` block).
    pub fn at(&self, i: u64) -> TileView {
        self.view().at(i)
    }
    /// Partitions `parts` and the leading free dims restricted, one range per dim.
    pub fn slice(&self, parts: Range<u32>, free: &[Range<u64>]) -> TileView {
        self.view().parts(parts).slice_free(free)
    }
}

/// What a view needs to know about its tile (kept small: views are passed around a lot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TileRef {
    pub(crate) buf: u32,
    pub(crate) gen: u32,
    pub(crate) dtype: Dtype,
    pub(crate) mem: Mem,
    pub(crate) parts: u32,
    /// Free elements per partition of the allocation.
    pub(crate) elems: u64,
}

/// A partition range and free-axis access pattern over a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileView {
    pub(crate) tile: TileRef,
    pub(crate) p0: u32,
    pub(crate) np: u32,
    pub(crate) offset: i64,
    pub(crate) free: Dims<MAX_FREE_DIMS>,
    /// The first helper that could not apply (see [`Fault`]).
    pub(crate) fault: FaultRef,
}

impl From<Tile> for TileView {
    fn from(t: Tile) -> Self {
        t.view()
    }
}

impl From<&Tile> for TileView {
    fn from(t: &Tile) -> Self {
        t.view()
    }
}

impl TileView {
    /// The tile's dtype.
    pub fn dtype(&self) -> Dtype {
        self.tile.dtype
    }
    /// SBUF or PSUM.
    pub fn mem(&self) -> Mem {
        self.tile.mem
    }
    /// How many partitions the view spans.
    pub fn partitions(&self) -> u32 {
        self.np
    }
    /// The first partition of the view (an access's start partition, which the hardware
    /// restricts: §1.8).
    pub fn start_partition(&self) -> u32 {
        self.p0
    }
    /// The free-axis shape of the view.
    pub fn free_shape(&self) -> Vec<u64> {
        self.free.shape()
    }
    /// Free elements per partition of the view.
    pub fn free_elems(&self) -> u64 {
        self.free.elems()
    }
    /// Apply one helper's edit, or keep its fault (see [`HbmView`]'s: in place, each edit
    /// checking before it changes anything).
    #[inline(always)]
    fn edit(mut self, f: impl FnOnce(&mut Self) -> Result<(), Fault>) -> Self {
        if self.fault.is_none() {
            if let Err(fault) = f(&mut self) {
                self.fault = FaultRef::new(fault);
            }
        }
        self
    }
    fn restrict(self, step: Step, dim: usize, r: Range<u64>) -> Self {
        self.edit(|v| {
            v.offset += v.free.restrict(step, dim, &r, false)?;
            Ok(())
        })
    }
    /// Restrict to partitions `r` (relative to this view, and within it).
    pub fn parts(self, r: Range<u32>) -> Self {
        self.edit(|v| {
            let (start, end, size) = (r.start as u64, r.end as u64, v.np as u64);
            if start > end {
                return Err(Fault::Reversed { dim: PARTS, start, end });
            }
            if end > size {
                let (dim, index, own) = (PARTS, false, false);
                return Err(Fault::OutOfBounds { dim, index, own, start, end, size });
            }
            v.p0 += r.start;
            v.np = r.end - r.start;
            Ok(())
        })
    }
    /// Restrict free dim `dim` to `r`, which must lie in the view's size there.
    pub fn slice_dim(self, dim: usize, r: Range<u64>) -> Self {
        self.restrict(Step::SliceDim, dim, r)
    }
    /// Slice the leading free dims (at most one range per free dim).
    pub fn slice_free(mut self, ranges: &[Range<u64>]) -> Self {
        for (i, r) in ranges.iter().enumerate() {
            self = self.restrict(Step::Slice, i, r.clone());
        }
        self
    }
    /// Restrict the last free dim to `r` (columns of a 2-D tile).
    pub fn cols(self, r: Range<u64>) -> Self {
        let last = self.free.len().saturating_sub(1);
        self.restrict(Step::Cols, last, r)
    }
    /// Fix the first free dim at `i` (e.g. block `i` of a `[128, blocks, n]` tile).
    pub fn at(self, i: u64) -> Self {
        self.edit(|v| {
            v.offset += v.free.fix(Step::At, 0, i, false)?;
            Ok(())
        })
    }
    /// Split free dim `dim` into `[size/inner, inner]` (`inner` must divide it).
    pub fn split(self, dim: usize, inner: u64) -> Self {
        self.edit(|v| v.free.split(dim, inner))
    }
    /// Swap two free dims (strided access).
    pub fn swap(self, a: usize, b: usize) -> Self {
        self.edit(|v| v.free.swap(Step::Swap, a, b))
    }
    /// Insert a stride-0 free dim of `n` elements at position `dim`: the same values seen
    /// `n` times (e.g. a `[P, d]` table used against a `[P, heads, d]` tile).
    pub fn expand(self, dim: usize, n: u64) -> Self {
        self.edit(|v| v.free.expand(Step::Expand, dim, n))
    }

    /// Broadcast along a new innermost stride-0 dim of `n` elements (e.g. a `[P,1]`
    /// column used against a `[P,n]` tile).
    pub fn broadcast_free(self, n: u64) -> Self {
        self.edit(|v| v.free.expand(Step::BroadcastFree, v.free.len(), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hbm(shape: &[u64]) -> Hbm {
        Hbm { id: 0, dtype: Dtype::Bf16, shape: Dims::contiguous(shape) }
    }

    /// Index, split and broadcast move the other dims as documented, and leave the unused
    /// slots as a fresh pattern has them, so equal patterns compare (and hash) equal.
    #[test]
    fn dim_edits_keep_the_other_dims_and_canonical_unused_slots() {
        // [2, 3, 4] row-major: strides (12, 4, 1).
        let v = hbm(&[2, 3, 4]).view();
        let row = v.index(0, 1);
        assert_eq!((row.offset, row.dims.as_slice()), (12, &[(4, 3), (1, 4)][..]));
        assert_eq!(row.dims, Dims::contiguous(&[3, 4]), "index leaves a fresh pattern's slots");
        let col = v.index(2, 3);
        assert_eq!((col.offset, col.dims.as_slice()), (3, &[(12, 2), (4, 3)][..]));
        let split = v.split(2, 2);
        assert_eq!(split.dims.as_slice(), &[(12, 2), (4, 3), (2, 2), (1, 2)]);
        assert_eq!(split.dims, hbm(&[2, 3, 2, 2]).view().dims);
        // Flattening the free dims of a dense pattern gives the 2-D pattern, slots and all.
        assert_eq!(v.flatten_free().dims, hbm(&[2, 12]).view().dims);
        let b = hbm(&[4]).view().broadcast(8);
        assert_eq!(b.dims.as_slice(), &[(0, 8), (1, 4)]);
        // A full pattern cannot grow: split and broadcast leave it as it is, marked.
        let full = hbm(&[2, 2, 2, 2, 2]).view();
        for grown in [full.split(4, 1), full.broadcast(3)] {
            assert_eq!(grown.dims, full.dims);
            assert!(matches!(grown.fault.get(), Fault::Full { n: 5, .. }), "{grown:?}");
        }
        // Arguments at the edge of their types are faults, not overflows; so is a broadcast
        // whose element count would overflow (or merely pass 2^40).
        let huge = [v.broadcast(u64::MAX), v.broadcast(1 << 40)];
        for h in huge {
            assert!(matches!(h.fault.get(), Fault::Huge { step: Step::Broadcast, .. }), "{h:?}");
        }
        assert!(hbm(&[4]).view().broadcast((1 << 40) / 4).fault.is_none());
        for edge in [v.index(0, u64::MAX), v.rows(u64::MAX..u64::MAX), v.split(2, u64::MAX)] {
            assert!(!edge.fault.is_none(), "{edge:?}");
            assert_eq!((edge.offset, edge.dims), (v.offset, v.dims));
        }
        // A marked view keeps its first fault, whatever comes after it.
        let bad = v.swap(0, 3).index(7, 0).rows(0..1);
        assert!(matches!(bad.fault.get(), Fault::NoDim { step: Step::Swap, .. }), "{bad:?}");
        assert_eq!((bad.offset, bad.dims), (v.offset, v.dims));
    }

    /// The fault table keeps the last `kept` faults: an older handle reads as lost, never as
    /// the fault that took its slot; a view's handle is 4 bytes, so views stay small.
    #[test]
    fn a_fault_handle_reads_its_fault_until_the_ring_passes_it() {
        let mut table = FaultTable::new(4);
        let split = |size| Fault::Split { dim: 0, inner: 3, size };
        let ids: Vec<u32> = (0..6).map(|i| table.put(split(i))).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
        assert_eq!((table.get(1), table.get(2)), (Fault::Lost, Fault::Lost));
        assert_eq!((table.get(3), table.get(6)), (split(2), split(5)));
        assert_eq!(table.get(7), Fault::Lost);
        assert!(std::mem::size_of::<TileView>() <= 120, "{}", std::mem::size_of::<TileView>());
    }
}
