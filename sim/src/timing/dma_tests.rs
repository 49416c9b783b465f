//! Unit tests of the DMA engines' placement (`dma.rs`): kept apart so that the model
//! itself reads in one file.

use super::super::ComputeOp;
use super::*;

/// Two chunks of one DMA on the same engine, and a load issued while other engines are
/// busy, all on one queue: an engine moves one transfer of a queue at a time.
#[test]
fn dma_chunks_on_one_engine_never_overlap() {
    let chip = crate::Chip::trn2();
    let mut t = Timing::new(&chip, 16, false);
    t.ensure_buffer(0, 1 << 20);
    t.ensure_buffer(1, 1 << 20);
    let region = |id, p0, p1| Region { id, p0, p1, b0: 0, b1: 4096 };
    let chunk = |queue| DmaChunk {
        queue,
        engine_queue: 0,
        descriptors: 8,
        bytes: 32 * 1024,
        rate_permille: FULL_RATE,
    };
    let mut out = Vec::new();
    let mut intervals: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 20];
    // Idle engines, chunks 0 and 1 both on queue 4.
    t.dma(&[chunk(4), chunk(4), chunk(5)], 1, &[region(0, 0, 24)], &[region(1, 0, 24)], &mut out);
    assert_eq!(out.len(), 3);
    for &(q, s, e) in &out {
        intervals[q].push((s, e));
    }
    // A later load waiting for nothing lands in the same engines (gap or after).
    let late: Vec<_> = (4..20).map(chunk).collect();
    t.dma(&late, 1, &[region(0, 24, 128)], &[region(1, 24, 128)], &mut out);
    for &(q, s, e) in &out {
        intervals[q].push((s, e));
    }
    for (q, list) in intervals.iter_mut().enumerate() {
        list.sort();
        for w in list.windows(2) {
            assert!(w[0].1 <= w[1].0, "queue {q}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
    assert_eq!(intervals[4].len(), 3, "queue 4 moved its three chunks");
}

/// Chunks of one transfer at different rates (the builder never mixes them, but the
/// uniform shortcut and the cost cache must not take one chunk's rate for another's):
/// on idle engines, without HBM, each takes its own descriptors and its bytes at its
/// own share of the rate.
#[test]
fn chunks_at_different_rates_each_take_their_own_time() {
    let chip = crate::Chip::trn2();
    let mut t = Timing::new(&chip, 16, false);
    t.ensure_buffer(0, 1 << 20);
    t.ensure_buffer(1, 1 << 20);
    let chunks: Vec<DmaChunk> = (0..16)
        .map(|i| DmaChunk {
            queue: 4 + i,
            engine_queue: 0,
            descriptors: 8,
            bytes: 8 * 2048,
            rate_permille: if i % 2 == 0 { FULL_RATE } else { 500 },
        })
        .collect();
    assert!(t.uniform_engine(&chunks).is_none(), "two rates: not uniform");
    let region = |id| Region { id, p0: 0, p1: 128, b0: 0, b1: 2048 };
    let mut out = Vec::new();
    t.dma(&chunks, 0, &[region(0)], &[region(1)], &mut out);
    let desc = round_u64(8.0 * t.dma_desc_ps);
    for (c, &(q, start, end)) in chunks.iter().zip(&out) {
        // The engine's rate scaled by the share, as `DmaChunk::rate` computes it.
        let rate = t.dma_rate * c.rate_permille as f64 / FULL_RATE as f64;
        let own = ceil_u64(c.bytes as f64 / rate);
        assert_eq!((q, end - start), (c.queue, desc + own), "{c:?}");
    }
}

/// A load issued behind a store that waits on compute fills the idle gap before the
/// store on all 16 engines at once (their busy lists are identical), sharing HBM.
#[test]
fn dma_behind_a_waiting_store_fills_the_gap_on_every_engine() {
    let chip = crate::Chip::trn2();
    let mut t = Timing::new(&chip, 16, false);
    for id in 0..4 {
        t.ensure_buffer(id, 1 << 16);
    }
    let whole = |id| Region { id, p0: 0, p1: 128, b0: 0, b1: 4096 };
    let chunks: Vec<_> = (4..20)
        .map(|queue| DmaChunk {
            queue,
            engine_queue: 0,
            descriptors: 8,
            bytes: 8 * 4096,
            rate_permille: FULL_RATE,
        })
        .collect();
    let mut out = Vec::new();
    // A load, then a long computation on what it loaded, then a store of the result.
    let load_end = t.dma(&chunks, 1, &[whole(0)], &[whole(1)], &mut out);
    let op = ComputeOp {
        track: 1,
        cycles: 100_000,
        ghz: 1.0,
        latency_cycles: 0,
        reads: &[whole(1)],
        writes: &[whole(2)],
        ports: 0,
    };
    let (_, compute_end) = t.compute(&op);
    t.dma(&chunks, 1, &[whole(2)], &[whole(0)], &mut out);
    let store_start = out.iter().map(|o| o.1).min().unwrap();
    assert!(store_start >= compute_end, "the store waits for the computation");
    // An independent load: ready right away, the engines are free until the store.
    let end = t.dma(&chunks, 1, &[whole(3)], &[whole(3)], &mut out);
    let (s0, e0) = (out[0].1, out[0].2);
    assert!(out.iter().all(|o| (o.1, o.2) == (s0, e0)), "one group: {out:?}");
    assert_eq!(s0, load_end, "starts in the first gap: right after the first load");
    assert!(end <= store_start, "fits before the store: {end} > {store_start}");
    // The same bytes as the first load, over the same engines: the same duration.
    assert_eq!(e0 - s0, load_end - t.dma_fixed_ps);
}

/// The O(1) paths of `DmaEngine::insert` keep exactly what sorting and merging every
/// interval would (touching intervals merge; the oldest fold into `floor`).
#[test]
fn dma_engine_insert_matches_sort_and_merge() {
    let mut next = crate::test_rng(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..200 {
        let (mut engine, mut all, mut floor) = (DmaEngine::default(), Vec::new(), 0u64);
        let mut t = 0;
        for _ in 0..40 {
            // Mostly appends (some touching the last interval), sometimes into the past.
            t += next(4) * 10;
            let start = if next(4) == 0 { t.saturating_sub(next(200)) } else { t };
            let end = start + 1 + next(30);
            engine.insert(start, end, 1);
            all.push((start, end));
            all.sort();
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for &(s, e) in &all {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            while merged.len() > DMA_WINDOW {
                floor = floor.max(merged.remove(0).1);
            }
            all = merged.clone();
            assert_eq!((&engine.busy[..], engine.floor), (&merged[..], floor));
            assert!(engine.busy.queues[..engine.busy.len].iter().all(|&q| q == 1));
        }
    }
}

/// All 128 partitions of one of four buffers, from a random 1 KiB step to at least 8 KiB.
fn random_region(next: &mut impl FnMut(u64) -> u64) -> Region {
    let id = next(4) as u32;
    let b0 = next(8) * 1024;
    Region { id, p0: 0, p1: 128, b0, b1: 8192 + next(8) * 1024 }
}

/// The uniform-DMA fast path places every transfer exactly as the general path does:
/// random streams of loads, stores and SBUF copies (even and uneven splits, engines left
/// in equal and in different states) give the same chunk times, ends and critical paths.
#[test]
fn uniform_dma_fast_path_matches_the_general_path() {
    let chip = crate::Chip::trn2();
    let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
    let mut uniform_seen = 0;
    for _ in 0..60 {
        let (mut fast, mut general) = Timing::fast_and_general(&chip, true, 4, 1 << 16);
        for i in 0..30 {
            // The first ten over all 16 queues (uniform while the engines stay alike),
            // then half so, half 1-16 chunks from a random first queue (which leaves the
            // engines in different states); sometimes one odd chunk.
            let all = i < 10 || next(2) == 0;
            let n = if all { 16 } else { 1 + next(16) as usize };
            let q0 = if all { 0 } else { next(16) as usize };
            let (desc, bytes) = (1 + next(4), 512 * (1 + next(8)));
            // Two of an engine's queues, so that transfers share busy engines too.
            let engine_queue = next(2) as u8;
            let mut chunks: Vec<DmaChunk> = (0..n)
                .map(|i| DmaChunk {
                    queue: 4 + (q0 + i) % 16,
                    engine_queue,
                    descriptors: desc,
                    bytes,
                    rate_permille: FULL_RATE,
                })
                .collect();
            if i >= 10 && next(4) == 0 {
                chunks[n - 1].bytes += 64;
            }
            let (src, dst) = (random_region(&mut next), random_region(&mut next));
            let sides = next(3) as u32;
            uniform_seen += fast.uniform_engine(&chunks).is_some() as u32;
            let (mut out_f, mut out_g) = (Vec::new(), Vec::new());
            let end_f = fast.dma(&chunks, sides, &[src], &[dst], &mut out_f);
            let end_g = general.dma(&chunks, sides, &[src], &[dst], &mut out_g);
            assert_eq!((end_f, &out_f), (end_g, &out_g));
            assert_eq!((fast.end, fast.end_crit), (general.end, general.end_crit));
            for (a, b) in fast.tracks.iter().zip(&general.tracks) {
                assert_eq!(
                    (a.free, a.crit, a.busy_ps, a.count),
                    (b.free, b.crit, b.busy_ps, b.count)
                );
            }
        }
        assert_eq!(fast.hbm_counter, general.hbm_counter);
    }
    assert!(uniform_seen >= 500, "the fast path ran {uniform_seen} times");
}

/// Round-robin sharing conserves engine time: on random streams over three engines and
/// four queues (loads, stores, copies; some behind a computation), each engine's busy
/// intervals never overlap (debug checks in placement) and add up to exactly the engine
/// time its chunks were booked, which covers every byte at no more than the engine rate;
/// no chunk ends before its own descriptors and bytes could have moved.
#[test]
fn shared_engine_time_is_conserved_and_never_overlaps() {
    let chip = crate::Chip::trn2();
    let mut next = crate::test_rng(0x51ed_270b_2f6c_1a3du64);
    let mut shared_seen = 0;
    for _ in 0..300 {
        let mut t = Timing::new(&chip, 16, false);
        for id in 0..4 {
            t.ensure_buffer(id, 1 << 16);
        }
        let mut bytes = [0u64; 3];
        let (mut out, mut spans) = (Vec::new(), Vec::new());
        for _ in 0..6 {
            let (src, dst) = (random_region(&mut next), random_region(&mut next));
            if next(4) == 0 {
                let op = ComputeOp {
                    track: 1,
                    cycles: 1000 * next(20),
                    ghz: 1.0,
                    latency_cycles: 0,
                    reads: &[src],
                    writes: &[dst],
                    ports: 0,
                };
                t.compute(&op);
            }
            // Equal chunks on one to three engines, as the builder splits a transfer.
            let (engine_queue, descriptors) = (next(4) as u8, 1 + next(16));
            let (bytes_per_chunk, n) = (512 * (1 + next(64)), 1 + next(3) as usize);
            let chunks: Vec<DmaChunk> = (0..n)
                .map(|i| DmaChunk {
                    queue: 4 + i,
                    engine_queue,
                    descriptors,
                    bytes: bytes_per_chunk,
                    rate_permille: FULL_RATE,
                })
                .collect();
            t.dma(&chunks, next(3) as u32, &[src], &[dst], &mut out);
            for (c, &(q, start, end)) in chunks.iter().zip(&out) {
                bytes[q - 4] += c.bytes;
                let own = round_u64(c.descriptors as f64 * t.dma_desc_ps)
                    + ceil_u64(c.bytes as f64 / t.dma_rate);
                assert!(end - start >= own, "{c:?} in {start}..{end}");
                // Two chunks in flight at once on one engine: one of them shares it.
                shared_seen +=
                    spans.iter().filter(|&&(q2, s2, e2)| q2 == q && s2 < end && start < e2).count();
                spans.push((q, start, end));
            }
        }
        for (e, &moved) in bytes.iter().enumerate() {
            let engine = &t.dma_engines[e];
            let busy: u64 = engine.busy.iter().map(|&(b0, b1)| b1 - b0).sum();
            if engine.floor == 0 {
                assert_eq!(busy, t.tracks[4 + e].busy_ps, "engine {e}: {:?}", engine.busy);
            }
            let at_rate = ceil_u64(moved as f64 / t.dma_rate);
            assert!(t.tracks[4 + e].busy_ps >= at_rate, "engine {e} outran its rate");
        }
    }
    assert!(shared_seen > 100, "sharing happened {shared_seen} times");
}
