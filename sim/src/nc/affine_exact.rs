//! Exact element sets for the loop-carried check of `nc/affine.rs` (docs/scheduling.md §2).
//!
//! The check keeps an affine loop's accesses as rectangles (partitions or rows × bytes), which
//! is exact for a dense access and no more than a bounding box for a strided one: every other
//! column of a tile has the box of all its columns. So a strided access also keeps its access
//! pattern ([`Pattern`]: the view's offset and (stride, size) dims, flattened over the tile's
//! partitions or the tensor's rows), and two accesses whose rectangles overlap, one of them
//! strided, conflict only if their patterns share an element ([`meet`]): no false error, and
//! no missed one.
//!
//! A buffer's rectangles are bounded per loop level (`MAX_RECTS`) so that a scan stays cheap;
//! what does not fit is not dropped but painted into a [`Spill`], a map of the bytes it
//! touched, which is exact whatever the number of accesses and bounded by the buffer's size.

use super::{Hazard, Kind, Rect, Region, MAX_RECTS};
use std::collections::BTreeMap;

/// Dims a pattern keeps: a view's (a tile's partitions and its 4 free dims, or an HBM view's
/// 5) and up to 3 more, added when accesses of successive iterations merge ([`Pattern::absorb`]).
pub(super) const MAX_PAT_DIMS: usize = 8;

/// The elements an access touches: `off + Σ iₖ·sₖ` for `0 ≤ iₖ < nₖ`, as flat element indices
/// of its buffer (`row · r + element in row`, `r` the tile's free elements per partition or
/// the tensor's row length). Strides are positive and sizes above 1 (a negative stride is
/// walked from the other end; a broadcast dim repeats the same elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    off: i64,
    n: u8,
    /// `(stride, size)`; entries from `n` on stay `(0, 1)`, so equal sets of dims compare equal.
    d: [(i64, u64); MAX_PAT_DIMS],
    /// Elements per row (partition) and bytes per element.
    row: i64,
    size: u64,
}

impl Pattern {
    /// The pattern of an access at `off` with `dims` (at most [`MAX_PAT_DIMS`] of more than
    /// one element), over a buffer of rows of `row` elements of `size` bytes.
    pub(super) fn new(off: i64, dims: &[(i64, u64)], row: u64, size: u64) -> Pattern {
        let mut p = Pattern { off, n: 0, d: [(0, 1); MAX_PAT_DIMS], row: row.max(1) as i64, size };
        for &(s, n) in dims {
            if n <= 1 || s == 0 {
                continue;
            }
            let s = if s < 0 {
                p.off += s * (n as i64 - 1);
                -s
            } else {
                s
            };
            p.d[p.n as usize] = (s, n);
            p.n += 1;
        }
        p
    }

    /// The elements of a rectangle of the same buffer (rows `p0..p1`, bytes `b0..b1`).
    pub(super) fn rect(&self, p0: u32, p1: u32, b0: u64, b1: u64) -> Pattern {
        let off = p0 as i64 * self.row + (b0 / self.size) as i64;
        let dims = [(self.row, (p1 - p0) as u64), (1, (b1 - b0) / self.size)];
        Pattern::new(off, &dims, self.row as u64, self.size)
    }

    fn dims(&self) -> &[(i64, u64)] {
        &self.d[..self.n as usize]
    }

    /// The first and last element (inclusive).
    fn span(&self) -> (i64, i64) {
        let ext: i64 = self.dims().iter().map(|&(s, n)| s * (n as i64 - 1)).sum();
        (self.off, self.off + ext)
    }

    /// The dims by increasing stride, and how many of the first cover an interval together:
    /// each stride at most the length the ones below it cover, which they extend.
    fn inner(&self) -> ([(i64, u64); MAX_PAT_DIMS], usize, i64) {
        let mut d = self.d;
        d[..self.n as usize].sort_unstable();
        let (mut len, mut k) = (1i64, 0);
        for &(s, n) in &d[..self.n as usize] {
            if s > len {
                break;
            }
            len += s * (n as i64 - 1);
            k += 1;
        }
        (d, k, len)
    }

    /// Whether the pattern touches every element of its span.
    fn covers(&self) -> bool {
        self.inner().1 == self.n as usize
    }

    /// Make this pattern the union of itself and `o` when that union is a pattern with at most
    /// [`MAX_PAT_DIMS`] dims: `o` the same, or this one with its last dim one step longer at
    /// either end, or this one shifted (a new last dim of two). What successive iterations
    /// (or an inner loop's) of one source line give: the union keeps a dim per loop.
    fn absorb(&mut self, o: &Pattern) -> bool {
        if self == o {
            return true;
        }
        if (self.row, self.size) != (o.row, o.size) {
            return false;
        }
        let n = self.n as usize;
        if n >= 1 && o.n as usize == n - 1 && o.d[..n - 1] == self.d[..n - 1] {
            let (s, k) = self.d[n - 1];
            if o.off == self.off + s * k as i64 {
                self.d[n - 1].1 += 1;
                return true;
            }
            if o.off == self.off - s {
                self.off -= s;
                self.d[n - 1].1 += 1;
                return true;
            }
        }
        if o.n == self.n && o.d == self.d && n < MAX_PAT_DIMS {
            let delta = o.off - self.off;
            self.off = self.off.min(o.off);
            self.d[n] = (delta.abs(), 2);
            self.n += 1;
            return true;
        }
        false
    }

    /// Call `f` with each run of the pattern's bytes inside one row, as spill keys
    /// ([`Spill`]: `row << 64 | byte`, end exclusive), until it returns true; whether it did.
    fn runs(&self, mut f: impl FnMut(u128, u128) -> bool) -> bool {
        let (d, k, len) = self.inner();
        let outer = &d[k..self.n as usize];
        let mut idx = [0u64; MAX_PAT_DIMS];
        loop {
            let start =
                self.off + outer.iter().zip(&idx).map(|(&(s, _), &i)| s * i as i64).sum::<i64>();
            let (mut lo, hi) = (start, start + len);
            while lo < hi {
                let r = lo.div_euclid(self.row);
                let end = hi.min((r + 1) * self.row);
                let at =
                    |e: i64| (r as u128) << 64 | ((e - r * self.row) as u64 * self.size) as u128;
                if f(at(lo), at(end)) {
                    return true;
                }
                lo = end;
            }
            let mut i = 0;
            loop {
                if i == outer.len() {
                    return false;
                }
                idx[i] += 1;
                if idx[i] < outer[i].1 {
                    break;
                }
                idx[i] = 0;
                i += 1;
            }
        }
    }
}

fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether two patterns of one buffer share an element. Exact: the pattern with the longer
/// span is split along its largest stride into the pieces whose spans meet the other's, down
/// to single elements if need be, and a pair is decided early when the spans are apart, when
/// the offsets differ by no multiple of the strides' gcd (even and odd columns), or when one
/// covers its span and that holds the other's. Dense rectangles and the usual strided views
/// are decided in a few steps per row; at worst it visits the elements of the two patterns
/// that lie within each other's spans.
pub(super) fn meet(a: &Pattern, b: &Pattern) -> bool {
    let ((alo, ahi), (blo, bhi)) = (a.span(), b.span());
    if ahi < blo || bhi < alo {
        return false;
    }
    let g = a.dims().iter().chain(b.dims()).fold(0, |g, &(s, _)| gcd(g, s));
    if g == 0 {
        // Two single elements, at the same place (their spans overlap).
        return true;
    }
    if (a.off - b.off).rem_euclid(g) != 0 {
        return false;
    }
    let (ac, bc) = (a.covers(), b.covers());
    if ac && (bc || alo <= blo && bhi <= ahi) || bc && blo <= alo && ahi <= bhi {
        return true;
    }
    // `x` has a dim: were it a single element, so would `y` be (its span no longer), and g 0.
    let (x, ylo, yhi, y) = if ahi - alo >= bhi - blo { (a, blo, bhi, b) } else { (b, alo, ahi, a) };
    let j = (0..x.n as usize).max_by_key(|&j| x.d[j].0).expect("a dim");
    let (s, n) = x.d[j];
    let mut rest = *x;
    for i in j..MAX_PAT_DIMS - 1 {
        rest.d[i] = rest.d[i + 1];
    }
    rest.d[MAX_PAT_DIMS - 1] = (0, 1);
    rest.n -= 1;
    let w = rest.span().1 - rest.off;
    // Piece k spans x.off + k·s + [0, w]: the ones that reach [ylo, yhi].
    let k0 = (-(x.off + w - ylo).div_euclid(s)).max(0);
    let k1 = (yhi - x.off).div_euclid(s).min(n as i64 - 1);
    (k0..=k1).any(|k| {
        rest.off = x.off + k * s;
        meet(&rest, y)
    })
}

/// The access a spilled byte range came from: its instruction site, the loop indices of the
/// earlier iterations of its rectangle, and a tag ordering it against iterations (0 for
/// earlier iterations' accesses, the level's iteration counter for the current one's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Who {
    pub site: u32,
    pub tag: u64,
    pub first: u64,
    pub last: u64,
}

#[derive(Clone, Copy, Debug)]
struct Seg {
    end: u128,
    who: Who,
}

/// The bytes of a buffer that accesses spilled from a level's bounded lists touched, per kind
/// of access: disjoint byte ranges keyed `row << 64 | byte` (end exclusive), each naming one
/// access that touched it — of those that did, the one with the lowest tag, so that a range
/// an earlier iteration touched is found as earlier whatever touched it since. Neighbouring
/// ranges of the same access merge. At most one range per element of the buffer and kind,
/// whatever the number of accesses; in practice one per row and run of a spilled access.
#[derive(Default)]
struct Spill {
    maps: [BTreeMap<u128, Seg>; 3],
}

impl Spill {
    /// Record that `who` touched bytes `lo..hi` with the kind of index `kind`.
    fn paint(&mut self, kind: usize, lo: u128, hi: u128, who: Who) {
        if lo >= hi {
            return;
        }
        let map = &mut self.maps[kind];
        let mut olds: Vec<(u128, Seg)> = Vec::new();
        if let Some((&s, &g)) = map.range(..lo).next_back() {
            if g.end > lo {
                olds.push((s, g));
            }
        }
        olds.extend(map.range(lo..hi).map(|(&s, &g)| (s, g)));
        let mut pieces = Vec::with_capacity(2 * olds.len() + 1);
        let mut cur = lo;
        for &(s, g) in &olds {
            map.remove(&s);
            if s < lo {
                pieces.push((s, lo, g.who));
            } else if s > cur {
                pieces.push((cur, s, who));
            }
            let (a, b) = (s.max(lo), g.end.min(hi));
            pieces.push((a, b, if who.tag < g.who.tag { who } else { g.who }));
            if g.end > hi {
                pieces.push((hi, g.end, g.who));
            }
            cur = b;
        }
        if cur < hi {
            pieces.push((cur, hi, who));
        }
        for (mut a, mut b, w) in pieces {
            if let Some((&s, g)) = map.range(..a).next_back() {
                if g.end == a && g.who == w {
                    a = s;
                }
            }
            if let Some(g) = map.get(&b).copied() {
                if g.who == w {
                    map.remove(&b);
                    b = g.end;
                }
            }
            map.insert(a, Seg { end: b, who: w });
        }
    }

    /// An access of the kind of index `kind` with a tag below `before` that touched a byte of
    /// `lo..hi`.
    fn find(&self, kind: usize, lo: u128, hi: u128, before: u64) -> Option<Who> {
        let map = &self.maps[kind];
        let left = map.range(..lo).next_back().filter(|(_, g)| g.end > lo);
        left.into_iter().chain(map.range(lo..hi)).map(|(_, g)| g.who).find(|w| w.tag < before)
    }

    /// Whether nothing was spilled.
    fn is_empty(&self) -> bool {
        self.maps.iter().all(BTreeMap::is_empty)
    }
}

impl Rect {
    fn who(&self, tag: u64) -> Who {
        Who { site: self.site, tag, first: self.first_index, last: self.last_index }
    }
}

#[cold]
pub(super) fn spill_rect(extra: &mut Option<Box<Extra>>, r: &Rect, tag: u64) {
    let spill = &mut extra.get_or_insert_with(Default::default).spill;
    for row in r.p0..r.p1 {
        let at = |b: u64| (row as u128) << 64 | b as u128;
        spill.paint(r.kind.index(), at(r.b0), at(r.b1), r.who(tag));
    }
}

/// A strided access: its bounding box (with its kind, site and iterations) and its elements.
#[derive(Clone, Copy, Debug)]
pub(super) struct Strided {
    pub(super) rect: Rect,
    pub(super) pat: Pattern,
}

/// A buffer's strided accesses at one level, and what its full lists spilled: most buffers
/// have neither (`BufRects::extra`). Strided accesses are merged when recorded (they are
/// rare), the current iteration's apart from the earlier ones' as for rectangles.
#[derive(Default)]
pub(super) struct Extra {
    earlier: Vec<Strided>,
    current: Vec<Strided>,
    /// The iteration counter (`Level::iter`) of `current`'s accesses.
    iter: u64,
    spill: Spill,
}

impl Extra {
    /// Add `s` to `list`, merged into an access of the same site and kind whose union with
    /// it is a pattern, or appended; at the cap the oldest is spilled with `tag`.
    fn add(list: &mut Vec<Strided>, spill: &mut Spill, s: Strided, tag: u64) {
        let merged = list.iter_mut().rev().any(|x| {
            (x.rect.site, x.rect.kind) == (s.rect.site, s.rect.kind) && x.pat.absorb(&s.pat) && {
                x.rect.join(&s.rect);
                true
            }
        });
        if merged {
            return;
        }
        if list.len() >= MAX_RECTS {
            let old = list.remove(0);
            let who = old.rect.who(tag);
            old.pat.runs(|lo, hi| {
                spill.paint(old.rect.kind.index(), lo, hi, who);
                false
            });
        }
        list.push(s);
    }

    /// Make `iter` the current iteration: an older one's accesses become earlier ones.
    fn sync(&mut self, iter: u64) {
        if self.iter != iter {
            for s in std::mem::take(&mut self.current) {
                Extra::add(&mut self.earlier, &mut self.spill, s, 0);
            }
            self.iter = iter;
        }
    }

    /// Record strided access `s` of iteration `iter`.
    pub(super) fn record(&mut self, s: Strided, iter: u64) {
        self.sync(iter);
        Extra::add(&mut self.current, &mut self.spill, s, iter);
    }

    /// The first conflict, with an earlier iteration's strided or spilled access, of an access
    /// of kind `kind` to `region` touching `pat`'s elements (every element of `region` if
    /// `None`) in iteration `iter`.
    pub(super) fn conflict(
        &mut self,
        kind: Kind,
        region: &Region,
        pat: Option<&Pattern>,
        iter: u64,
    ) -> Option<(Hazard, Rect)> {
        self.sync(iter);
        let strided = self.earlier.iter().filter(|e| e.rect.overlaps(region)).find_map(|e| {
            let hazard = e.rect.hazard(kind)?;
            let mine = match pat {
                Some(p) => *p,
                None => e.pat.rect(region.p0, region.p1, region.b0, region.b1),
            };
            meet(&mine, &e.pat).then_some((hazard, e.rect))
        });
        if strided.is_some() || self.spill.is_empty() {
            return strided;
        }
        let mut found = None;
        for earlier in [Kind::Write, Kind::Accumulate, Kind::Read] {
            if kind.conflicts() & earlier.bit() == 0 {
                continue;
            }
            let mut look = |lo, hi| {
                found = self.spill.find(earlier.index(), lo, hi, iter);
                found.is_some()
            };
            let hit = match pat {
                Some(p) => p.runs(look),
                None => (region.p0..region.p1).any(|row| {
                    let at = |b: u64| (row as u128) << 64 | b as u128;
                    look(at(region.b0), at(region.b1))
                }),
            };
            if hit {
                let w = found.expect("found");
                let rect = Rect {
                    p0: 0,
                    p1: 0,
                    b0: 0,
                    b1: 0,
                    kind: earlier,
                    site: w.site,
                    first_index: w.first,
                    last_index: w.last,
                };
                return Some((rect.hazard(kind).expect("conflicting kinds"), rect));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elements(p: &Pattern) -> Vec<i64> {
        let mut out = vec![p.off];
        for &(s, n) in p.dims() {
            out = out.iter().flat_map(|&o| (0..n as i64).map(move |i| o + i * s)).collect();
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `meet` against brute force on random patterns of up to 4 dims (strides up to 9, some
    /// negative or 0, so patterns repeat and interleave), and `runs` gives each pattern's
    /// elements, row by row.
    #[test]
    fn meet_and_runs_agree_with_brute_force() {
        let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15);
        let (mut yes, mut no) = (0, 0);
        let random = |next: &mut dyn FnMut(u64) -> u64| {
            let dims: Vec<(i64, u64)> =
                (0..next(5)).map(|_| (next(12) as i64 - 2, 1 + next(5))).collect();
            Pattern::new(40 + next(40) as i64, &dims, 7, 2)
        };
        for _ in 0..20_000 {
            let (a, b) = (random(&mut next), random(&mut next));
            let (ea, eb) = (elements(&a), elements(&b));
            let truth = ea.iter().any(|e| eb.binary_search(e).is_ok());
            assert_eq!(meet(&a, &b), truth, "{a:?} {b:?}");
            assert_eq!(meet(&b, &a), truth, "{a:?} {b:?}");
            if truth {
                yes += 1;
            } else {
                no += 1;
            }
            let mut got = Vec::new();
            a.runs(|lo, hi| {
                assert_eq!(lo >> 64, hi >> 64, "one row");
                let row = (lo >> 64) as i64;
                let (b0, b1) = ((lo as u64) as i64 / 2, (hi as u64) as i64 / 2);
                assert!(b1 <= 7 && b0 < b1);
                got.extend((b0..b1).map(|e| row * 7 + e));
                false
            });
            got.sort_unstable();
            got.dedup();
            assert_eq!(got, ea, "{a:?}");
        }
        assert!(yes > 2_000 && no > 2_000, "{yes} meet, {no} apart");
    }

    /// Absorbing keeps the union exact: each pattern absorbed (when it is) leaves the set of
    /// elements the union of the two.
    #[test]
    fn absorb_gives_the_union() {
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1d);
        let mut merged = 0;
        for _ in 0..5_000 {
            let dims: Vec<(i64, u64)> =
                (0..1 + next(3)).map(|_| (1 + next(9) as i64, 1 + next(4))).collect();
            let mut acc = Pattern::new(next(50) as i64, &dims, 1000, 4);
            let mut truth = elements(&acc);
            for _ in 0..6 {
                let step = next(30) as i64 - 10;
                let o = if next(2) == 0 {
                    Pattern::new(acc.off + step, &dims, 1000, 4)
                } else {
                    let mut o = acc;
                    o.off += step;
                    o
                };
                if o.off < 0 {
                    continue;
                }
                let before = acc;
                if acc.absorb(&o) {
                    merged += 1;
                    truth.extend(elements(&o));
                    truth.sort_unstable();
                    truth.dedup();
                    assert_eq!(elements(&acc), truth, "{before:?} + {o:?}");
                } else {
                    assert_eq!(acc, before);
                }
            }
        }
        assert!(merged > 1_000, "{merged}");
    }

    /// The spill keeps, per byte, the access with the lowest tag, and finds what it was asked.
    #[test]
    fn spill_keeps_the_earliest_access_per_byte() {
        let who = |site, tag| Who { site, tag, first: tag, last: tag };
        let mut next = crate::test_rng(0x0123_4567_89ab_cdef);
        for _ in 0..300 {
            let mut s = Spill::default();
            let mut truth = [u64::MAX; 64];
            for site in 0..1 + next(12) as u32 {
                let lo = next(64);
                let hi = lo + 1 + next(64 - lo);
                let tag = next(4);
                s.paint(0, lo as u128, hi as u128, who(site, tag));
                for t in truth.iter_mut().take(hi as usize).skip(lo as usize) {
                    *t = (*t).min(tag);
                }
            }
            for lo in 0..64u64 {
                for hi in lo + 1..=64 {
                    for before in 0..5 {
                        let want = truth[lo as usize..hi as usize].iter().any(|&t| t < before);
                        let got = s.find(0, lo as u128, hi as u128, before);
                        assert_eq!(got.is_some(), want, "{lo}..{hi} before {before}");
                    }
                }
            }
            // Ranges stay disjoint and sorted.
            let segs: Vec<_> = s.maps[0].iter().map(|(&a, g)| (a, g.end)).collect();
            assert!(segs.windows(2).all(|w| w[0].1 <= w[1].0) && segs.iter().all(|s| s.0 < s.1));
        }
    }
}
