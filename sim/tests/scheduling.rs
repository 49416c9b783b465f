//! Scheduling of `affine_range` loops (docs/scheduling.md): iterations declared independent
//! are list-scheduled across engines and a plain loop keeps program order; the program
//! hash and the trace show which; memory stays bounded; and on random bodies an affine loop
//! is deterministic, computes the same values and is never (or boundedly) later. The
//! loop-carried dependency errors are `loop_carried.rs`'s.

use neuron_sim::{Act, ActArgs, Alu, Chip, Dtype, ExecMode, Hbm, Nc, SimResult, Tile};

/// Picoseconds of a profile's kernel time (the model counts in picoseconds).
fn ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// The tile program of must-show 1: `tiles` tiles of 64 rows, each loaded with `cols`
/// columns, a [64 x 512] block of it multiplied by a [64 x 64] weight into PSUM, `exp` of
/// the product evacuated to SBUF by ScalarE, and stored.
fn tiles(nc: &mut Nc, affine: bool, n: u64, cols: u64) -> SimResult<Hbm> {
    let data = |len: u64| (0..len).map(|i| ((i * 37) % 101) as f32 / 400.0).collect::<Vec<_>>();
    let mode = nc.mode();
    let input = |len| if mode.functional { data(len) } else { Vec::new() };
    let x = nc.hbm_input("x", Dtype::Bf16, &[n * 64, cols], &input(n * 64 * cols))?;
    let w = nc.hbm_input("w", Dtype::Bf16, &[64, 64], &input(64 * 64))?;
    let y = nc.hbm("y", Dtype::Bf16, &[n * 64, 512])?;
    let sb = nc.sbuf_pool("sb", 2);
    let ps = nc.psum_pool("ps", 2);
    let wt = nc.tile(sb, Dtype::Bf16, &[64, 64])?;
    nc.dma(wt, w)?;
    let body = |nc: &mut Nc, i: u64| {
        let t = nc.tile(sb, Dtype::Bf16, &[64, cols])?;
        nc.dma(t, x.rows(i * 64..(i + 1) * 64))?;
        let acc = nc.tile(ps, Dtype::F32, &[64, 512])?;
        nc.matmul(acc, wt, t.cols(0..512), false)?;
        let o = nc.tile(sb, Dtype::Bf16, &[64, 512])?;
        nc.activation(o, acc, Act::Exp, ActArgs::default())?;
        nc.dma(y.rows(i * 64..(i + 1) * 64), o)
    };
    if affine {
        nc.affine_range(0..n, body)?;
    } else {
        nc.sequential_range(0..n, body)?;
    }
    Ok(y)
}

/// Must-show 1. Two independent tiles, each load → matmul → activation → store, whose load
/// streams longer than the rest of a tile's chain. In program order the second load is
/// issued behind the first tile's store, which waits for the first tile's activation: the
/// idle gap before that store is too short for it, so it moves what it can in the gap and
/// then shares the engines with the store round-robin (loads and stores are on different
/// queues, docs/dma.md): the plain loop takes the first load, the gap, the shared part and
/// the second tile's compute and store, more than the affine loop. In an affine loop the list scheduler starts the
/// second load as soon as the queues are free (it is ready long before the first store), so
/// the loop takes one tile's chain plus the second load (the pipeline fill): the first store
/// shares the engines with the second load and is done long before the second store.
/// Every expected time is written out here from the cost formulas (neuroncore.md §1.7 DMA,
/// §2.3 matmul and activation) and the chip's constants.
#[test]
fn two_independent_tiles_overlap_in_an_affine_loop_and_partly_in_a_plain_one() {
    let chip = Chip::trn2();
    let (cols, parts) = (4096u64, 64u64);
    // DMA (§1.7): a [64 x C] bf16 transfer is split over 64 / 8 = 8 queues, 8 rows each; a
    // chunk pays one descriptor per row and streams its bytes at the engine rate. The 8
    // queues together (8 x the engine rate) stay under the HBM bandwidth, and no two transfers
    // share a queue at once, so HBM never binds: time = fixed + rows x descriptor + bytes / rate.
    let queues = parts / chip.dma.partitions_per_engine as u64;
    assert!(queues as f64 * chip.dma.engine_gbps < chip.memory.hbm_gbps_per_core);
    let fixed = (chip.dma.fixed_ns * 1e3).round() as u64;
    let dma = |bytes_per_row: u64| {
        let rows = chip.dma.partitions_per_engine as u64;
        let desc = (rows as f64 * chip.dma.descriptor_ns * 1e3).round() as u64;
        let stream = (rows * bytes_per_row) as f64 / (chip.dma.engine_gbps / 1e3);
        desc + stream.ceil() as u64
    };
    let w_load = dma(64 * 2);
    let load = dma(cols * 2);
    let store = dma(512 * 2);
    // §2.3: matmul max(min(64, M), N) = N = 512 cycles on TensorE; activation
    // max(MIN_II, N) = 512 cycles on ScalarE plus its fixed access start (§1.8); a result is
    // visible `latency` cycles later.
    let at = |cycles: u64, ghz: f64| (cycles as f64 * 1e3 / ghz).round() as u64;
    let matmul = at(512, chip.clocks.tensor_ghz);
    let matmul_lat = at(chip.tensor.latency_cycles, chip.clocks.tensor_ghz);
    let act = at(512 + chip.scalar.fixed_cycles, chip.clocks.scalar_ghz);
    let act_lat = at(chip.scalar.latency_cycles, chip.clocks.scalar_ghz);
    // From a tile's load end to its store's start.
    let compute = matmul + matmul_lat + act + act_lat + fixed;
    // One tile, from its load's start to its store's end.
    let chain = load + compute + store;
    // The regime the test is about: the second load does not fit before the first store,
    // and the first store is done before the second one is ready.
    assert!(load > compute && store < compute, "load {load} compute {compute} store {store}");
    // Both loops first load the weight ([F, F + w_load] on the same 8 queues). In the plain
    // loop the second load moves `compute` alone in the gap before the first store, then its
    // `rest` round-robin with the store (one other queue): `min(2 × rest, store + rest)`.
    let rest = load - compute;
    let plain_expected =
        fixed + w_load + load + compute + (2 * rest).min(store + rest) + compute + store;
    let affine_expected = fixed + w_load + chain + load;
    assert!(plain_expected > affine_expected);

    let time = |affine: bool| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        tiles(&mut nc, affine, 2, cols).unwrap();
        ps(nc.profile().kernel_time_us)
    };
    let (plain, affine) = (time(false), time(true));
    // A transfer's end is its bytes summed bucket by bucket on the HBM timeline: a
    // picosecond of rounding per transfer at most.
    let close = |a: u64, b: u64| a.abs_diff(b) <= 4;
    assert!(close(plain, plain_expected), "plain loop: {plain} ps, formulas {plain_expected}");
    assert!(close(affine, affine_expected), "affine loop: {affine} ps, formulas {affine_expected}");
    eprintln!(
        "two tiles: plain {:.3} µs (the second load shares the first store), affine {:.3} µs (one chain {:.3} + \
         one load {:.3})",
        plain as f64 / 1e6,
        affine as f64 / 1e6,
        chain as f64 / 1e6,
        load as f64 / 1e6
    );

    // The plain loop is exactly what the model gave before affine loops existed (program
    // order: the same program without the loop structure), and the values do not depend on
    // the schedule.
    let mut a = Nc::new(Chip::trn2(), ExecMode::BOTH);
    let ya = tiles(&mut a, true, 2, cols).unwrap();
    let mut p = Nc::new(Chip::trn2(), ExecMode::BOTH);
    let yp = tiles(&mut p, false, 2, cols).unwrap();
    assert_eq!(a.read_hbm(ya).unwrap(), p.read_hbm(yp).unwrap());
    let (pa, pp) = (a.profile(), p.profile());
    assert_eq!(ps(pp.kernel_time_us), plain);
    assert!(pp.scheduling.is_none(), "a plain loop is not list-scheduled");
    let s = pa.scheduling.expect("an affine loop is reported");
    assert_eq!(
        (s.affine_loops, s.affine_iterations, s.list_scheduled_instruction_count),
        (1, 2, 8)
    );
    // The second load went ahead of the first store on their DMA queue.
    assert_eq!(s.reordered_instruction_count, 1);
}

/// With more tiles the affine loop is bounded by its DMA queues (every load and store back
/// to back), the plain loop by the chains one after another.
#[test]
fn many_independent_tiles_pipeline_in_an_affine_loop() {
    let time = |affine: bool, n: u64| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        tiles(&mut nc, affine, n, 4096).unwrap();
        nc.profile().kernel_time_us
    };
    // A queue's busy time per tile (§1.7): a [64 x 4096] bf16 load and a [64 x 512] store,
    // 8 rows per queue, each a descriptor per row and its bytes at the engine rate.
    let chip = Chip::trn2();
    let queue_us = |bytes_per_row: f64| {
        let rows = chip.dma.partitions_per_engine as f64;
        (rows * chip.dma.descriptor_ns + rows * bytes_per_row / chip.dma.engine_gbps) / 1e3
    };
    let per_tile = queue_us(4096.0 * 2.0) + queue_us(512.0 * 2.0);
    let single = time(true, 1);
    for n in [4u64, 16, 64] {
        let (plain, affine) = (time(false, n), time(true, n));
        // The affine loop fills the pipeline with one chain, then keeps its DMA queues busy
        // back to back; the plain loop is slower (its loads wait behind earlier stores).
        assert!(affine < plain, "{n} tiles: affine {affine} µs, plain {plain} µs");
        assert!(
            affine <= single + n as f64 * per_tile,
            "{n} tiles: affine {affine} µs, plain {plain} µs, one {single}, queue {per_tile}"
        );
        // Nothing can beat the DMA queues' busy time: n loads and n stores.
        assert!(
            affine >= n as f64 * per_tile * 0.9999,
            "{n} tiles: {affine} µs (one tile {single}, queue time per tile {per_tile})"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The program hash covers the loop structure; the trace shows the scheduled order.

#[test]
fn the_program_hash_tells_an_affine_loop_from_a_plain_one() {
    let hash = |affine: bool, n: u64| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        tiles(&mut nc, affine, n, 512).unwrap();
        nc.program_hash()
    };
    assert_ne!(hash(true, 2), hash(false, 2));
    assert_eq!(hash(true, 2), hash(true, 2));
    assert_ne!(hash(true, 2), hash(true, 3));
    // Two affine loops of one iteration each are not one loop of two.
    let split = |together: bool| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = nc.hbm_input("x", Dtype::F32, &[256, 64], &vec![0.25; 256 * 64]).unwrap();
        let y = nc.hbm("y", Dtype::F32, &[256, 64]).unwrap();
        let sb = nc.sbuf_pool("sb", 2);
        let body = |nc: &mut Nc, i: u64| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            nc.dma(y.rows(i * 128..(i + 1) * 128), t)
        };
        if together {
            nc.affine_range(0..2, body).unwrap();
        } else {
            nc.affine_range(0..1, body).unwrap();
            nc.affine_range(1..2, body).unwrap();
        }
        nc.program_hash()
    };
    assert_ne!(split(true), split(false));
}

/// The trace's slices are where the scheduler put them (each track's slices never overlap)
/// and say which iteration issued each instruction and its place in program order; the
/// line profile adds up to the engines' busy time as in program order.
#[test]
fn the_trace_shows_the_scheduled_order() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TRACE);
    tiles(&mut nc, true, 4, 4096).unwrap();
    let profile = nc.profile();
    let trace = nc.trace_json().unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    // Queue 4: the weight load, then the four loads back to back ahead of the first store.
    let q4: Vec<String> = slices
        .iter()
        .filter(|e| e["args"]["dma_engine"] == 0)
        .map(|e| e["args"]["operands"].as_str().unwrap().to_string())
        .collect();
    let issue = |s: &str| -> Option<u64> {
        s.split(' ').find_map(|w| w.strip_prefix("issue=")).map(|v| v.parse().unwrap())
    };
    let order: Vec<Option<u64>> = q4.iter().map(|s| issue(s)).collect();
    assert_eq!(order[0], None, "the weight load is outside the loop");
    // The second load (issue 4) runs ahead of the first store (issue 3), which waits for
    // the first tile's activation; everything else keeps program order.
    assert_eq!(&order[1..], &[0, 4, 3, 8, 7, 12, 11, 15].map(Some), "{q4:#?}");
    assert!(q4[2].contains("affine_index=1"), "{}", q4[2]);
    // No thread's slices overlap: transfers a DMA engine serves round-robin at once
    // (docs/dma.md) are drawn in lanes of its track (the trace's invariant).
    let mut by_tid: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    for s in &slices {
        let (ts, dur) = (s["ts"].as_f64().unwrap(), s["dur"].as_f64().unwrap());
        by_tid.entry(s["tid"].as_u64().unwrap()).or_default().push((ts, dur));
    }
    for (tid, mut v) in by_tid {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in v.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0 + 1e-6, "tid {tid}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
    let busy: f64 = profile.top_lines.iter().map(|l| l.busy_time_us).sum();
    let engines: f64 = profile.engines.iter().map(|e| e.active_time_us).sum();
    let dma = profile.dma_active_time_percent / 100.0 * profile.kernel_time_us * 16.0;
    assert!((busy - engines - dma).abs() < 1e-3, "lines {busy} vs engines {engines} + dma {dma}");
    let s = profile.scheduling.unwrap();
    assert_eq!(s.list_scheduled_instruction_count, 16);
    assert!(s.reordered_instruction_count >= 3, "{s:?}");
}

/// Live heap bytes of the calling thread, counted by this test binary's global allocator.
/// Each test runs on a thread of its own, so other tests' allocations are not counted.
mod live_bytes {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        // `const` and without `Drop`: no allocation or destructor registration, so the
        // allocator can use them.
        static LIVE: Cell<i64> = const { Cell::new(0) };
        static PEAK: Cell<i64> = const { Cell::new(0) };
    }

    fn add(delta: i64) {
        let _ = LIVE.try_with(|live| {
            let now = live.get() + delta;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    }

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                add(layout.size() as i64);
            }
            p
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                add(layout.size() as i64);
            }
            p
        }
        unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
            unsafe { System.dealloc(p, layout) };
            add(-(layout.size() as i64));
        }
        unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
            let q = unsafe { System.realloc(p, layout, new) };
            if !q.is_null() {
                add(new as i64 - layout.size() as i64);
            }
            q
        }
    }

    /// Runs `f`, returning its result and the most bytes it had live at once beyond those
    /// live when it started.
    pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, i64) {
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let out = f();
        (out, PEAK.with(Cell::get) - base)
    }
}

#[global_allocator]
static ALLOCATOR: live_bytes::Counting = live_bytes::Counting;

/// Memory is bounded by the window, not the trip count (docs/scheduling.md §3: "a loop of
/// 10⁵ iterations runs in the memory of 8"): the heap the loop itself takes at its peak is
/// the same, within 5%, for 10 000 and 100 000 iterations, affine or plain; and in timing
/// mode the affine loop is not slower than the plain one.
///
/// Each iteration loads a [1, 16 384] bf16 row, applies `exp` on ScalarE (16 384 + 60 cycles
/// at 1.2 GHz = 13.7 µs) and stores it. The one structure that grows with simulated time
/// rather than the trip count, the HBM bandwidth timeline (512 ns buckets, trimmed to one
/// window of 2¹⁶ buckets, 33.6 ms, once past two), has reached its bounded size in both runs:
/// 10 000 iterations already take 10⁴ × 13.7 µs = 137 ms > 2 × 33.6 ms.
#[test]
fn a_long_affine_loop_runs_in_bounded_memory() {
    const COLS: u64 = 16_384;
    let run = |affine: bool, n: u64| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = nc.hbm_input("x", Dtype::Bf16, &[n, COLS], &[]).unwrap();
        let y = nc.hbm("y", Dtype::Bf16, &[n, COLS]).unwrap();
        let sb = nc.sbuf_pool("sb", 3);
        let body = |nc: &mut Nc, i: u64| {
            let t = nc.tile(sb, Dtype::Bf16, &[1, COLS])?;
            nc.dma(t, x.rows(i..i + 1))?;
            nc.activation(t, t, Act::Exp, ActArgs::default())?;
            nc.dma(y.rows(i..i + 1), t)
        };
        let ((), peak) = live_bytes::peak_during(|| {
            if affine {
                nc.affine_range(0..n, body).unwrap();
            } else {
                nc.sequential_range(0..n, body).unwrap();
            }
        });
        let p = nc.profile();
        assert_eq!(p.instruction_count, 3 * n);
        // ScalarE-bound: at least n activations of 16 444 cycles at 1.2 GHz.
        assert!(p.kernel_time_us >= n as f64 * 16_444.0 / 1.2 / 1e3, "{} µs", p.kernel_time_us);
        (p.kernel_time_us, peak)
    };
    let mut times = [0.0; 2];
    for affine in [true, false] {
        let ((_, small), (time, large)) = (run(affine, 10_000), run(affine, 100_000));
        eprintln!(
            "affine {affine}: peak {small} B live over 10 000 iterations, {large} B over 100 000"
        );
        assert!(small > 0 && large > 0);
        let ratio = large as f64 / small as f64;
        assert!((ratio - 1.0).abs() < 0.05, "affine {affine}: {small} B vs {large} B live at peak");
        times[affine as usize] = time;
    }
    let (plain, affine) = (times[0], times[1]);
    assert!(affine <= plain, "affine {affine} µs, plain {plain} µs");
}

// ---------------------------------------------------------------------------------------
// Must-show 3: properties over random loop bodies built from the fixtures' instruction mix
// (loads and stores of row blocks, matmuls into PSUM evacuated by ScalarE or VectorE,
// activations, element-wise and reduction instructions on VectorE, copies on every engine,
// PSUM accumulation across iterations).

mod properties {
    use super::*;
    use neuron_sim::{Engine, Profile, Scalar};
    use proptest::prelude::*;

    const F: u64 = 256;
    const TILES: usize = 3;

    #[derive(Clone, Copy, Debug)]
    enum Step {
        /// Tile `tile` ← column block `block` of this iteration's row block of `x`.
        Load {
            tile: usize,
            block: u64,
        },
        /// This iteration's PSUM tile ← w.T @ tile.
        Matmul {
            tile: usize,
        },
        /// tile ← the PSUM tile, by ScalarE `exp` or a copy on VectorE / ScalarE.
        Evacuate {
            tile: usize,
            how: usize,
        },
        Exp {
            dst: usize,
            src: usize,
        },
        Add {
            dst: usize,
            a: usize,
            b: usize,
        },
        Scale {
            dst: usize,
            src: usize,
        },
        /// A row max into this iteration's stats column, then the tile scaled by it.
        ReduceScale {
            tile: usize,
        },
        Copy {
            engine: usize,
            dst: usize,
            src: usize,
        },
        /// Column block `slot` of this iteration's row block of `y` ← tile.
        Store {
            tile: usize,
            slot: u64,
        },
        /// The loop-wide PSUM tile += w.T @ tile (an accumulation across iterations).
        Accumulate {
            tile: usize,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        let t = 0..TILES;
        prop_oneof![
            (t.clone(), 0u64..4).prop_map(|(tile, block)| Step::Load { tile, block }),
            t.clone().prop_map(|tile| Step::Matmul { tile }),
            (t.clone(), 0usize..3).prop_map(|(tile, how)| Step::Evacuate { tile, how }),
            (t.clone(), t.clone()).prop_map(|(dst, src)| Step::Exp { dst, src }),
            (t.clone(), t.clone(), t.clone()).prop_map(|(dst, a, b)| Step::Add { dst, a, b }),
            (t.clone(), t.clone()).prop_map(|(dst, src)| Step::Scale { dst, src }),
            t.clone().prop_map(|tile| Step::ReduceScale { tile }),
            (0usize..3, t.clone(), t.clone()).prop_map(|(engine, dst, src)| Step::Copy {
                engine,
                dst,
                src
            }),
            (t.clone(), 0u64..2).prop_map(|(tile, slot)| Step::Store { tile, slot }),
            t.prop_map(|tile| Step::Accumulate { tile }),
        ]
    }

    /// A loop body: random steps made valid (a tile is loaded before it is first read, the
    /// PSUM tile written by a matmul before it is evacuated), ending with a store.
    fn body() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(step(), 1..12).prop_map(|steps| {
            let mut out = Vec::new();
            let mut written = [false; TILES];
            let mut acc = false;
            let need = |tile: usize, out: &mut Vec<Step>, written: &mut [bool; TILES]| {
                if !written[tile] {
                    out.push(Step::Load { tile, block: tile as u64 });
                    written[tile] = true;
                }
            };
            for s in steps {
                match s {
                    Step::Load { tile, .. } => written[tile] = true,
                    Step::Matmul { tile } | Step::Accumulate { tile } => {
                        need(tile, &mut out, &mut written);
                        acc |= matches!(s, Step::Matmul { .. });
                    }
                    Step::Evacuate { tile, .. } => {
                        if !acc {
                            need(tile, &mut out, &mut written);
                            out.push(Step::Matmul { tile });
                            acc = true;
                        }
                        written[tile] = true;
                    }
                    Step::Exp { dst, src }
                    | Step::Scale { dst, src }
                    | Step::Copy { dst, src, .. } => {
                        need(src, &mut out, &mut written);
                        written[dst] = true;
                    }
                    Step::Add { dst, a, b } => {
                        need(a, &mut out, &mut written);
                        need(b, &mut out, &mut written);
                        written[dst] = true;
                    }
                    Step::ReduceScale { tile } | Step::Store { tile, .. } => {
                        need(tile, &mut out, &mut written)
                    }
                }
                out.push(s);
            }
            let last = out.iter().rev().find_map(|s| match s {
                Step::Store { .. } => None,
                _ => (0..TILES).find(|&t| written[t]),
            });
            if let Some(tile) = last {
                out.push(Step::Store { tile, slot: 0 });
            }
            out
        })
    }

    #[derive(Clone, Copy, Debug)]
    struct Shape {
        iterations: u64,
        bufs: u32,
        psum_bufs: u32,
        chip: usize,
        /// Loads and stores are DMAs inside the loop; otherwise the input is loaded before
        /// the loop, a load is a copy from it and a store a copy into an output tile, which
        /// is stored after the loop (the loop itself is compute only).
        dma_in_loop: bool,
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (1u64..10, 1u32..4, 1u32..3, 0usize..3, any::<bool>()).prop_map(
            |(iterations, bufs, psum_bufs, chip, dma_in_loop)| Shape {
                iterations,
                bufs,
                psum_bufs,
                chip,
                dma_in_loop,
            },
        )
    }

    struct Run {
        out: Vec<u32>,
        profile: Profile,
        trace: Option<serde_json::Value>,
    }

    fn run(steps: &[Step], sh: Shape, mode: ExecMode, affine: bool) -> Run {
        let chip = [Chip::trn1(), Chip::trn2(), Chip::trn3()][sh.chip].clone();
        let mut nc = Nc::new(chip, mode);
        let n = sh.iterations;
        let xs: Vec<f32> =
            (0..n * 128 * 4 * F).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let ws: Vec<f32> = (0..128 * 128).map(|i| ((i * 31) % 17) as f32 / 64.0 - 0.1).collect();
        let data = |v: &[f32]| if mode.functional { v.to_vec() } else { Vec::new() };
        let x = nc.hbm_input("x", Dtype::Bf16, &[n * 128, 4 * F], &data(&xs)).unwrap();
        let w = nc.hbm_input("w", Dtype::Bf16, &[128, 128], &data(&ws)).unwrap();
        let y = nc.hbm("y", Dtype::Bf16, &[n * 128, 2 * F]).unwrap();
        let z = nc.hbm("z", Dtype::F32, &[128, F]).unwrap();
        let sb = nc.sbuf_pool("sb", sh.bufs);
        let ps = nc.psum_pool("ps", sh.psum_bufs);
        let consts = nc.sbuf_pool("consts", 1);
        let wt = nc.tile(consts, Dtype::Bf16, &[128, 128]).unwrap();
        nc.dma(wt, w).unwrap();
        let total = nc.psum_pool("total", 1);
        let gacc = nc.tile(total, Dtype::F32, &[128, F]).unwrap();
        // Without DMAs in the loop: the whole input and output, on chip.
        let (xin, out) = if sh.dma_in_loop {
            (None, None)
        } else {
            let xin = nc.tile(consts, Dtype::Bf16, &[128, n, 4 * F]).unwrap();
            nc.dma(xin, x.view().split(0, 128).swap(0, 1)).unwrap();
            let out = nc.tile(consts, Dtype::Bf16, &[128, n, 2 * F]).unwrap();
            nc.memset(out, 0.0).unwrap();
            (Some(xin), Some(out))
        };
        let mut started = false;
        let mut body = |nc: &mut Nc, i: u64| -> SimResult<()> {
            let t: Vec<Tile> = (0..TILES)
                .map(|k| nc.tile_named(sb, &format!("t{k}"), Dtype::Bf16, &[128, F]))
                .collect::<SimResult<_>>()?;
            let acc = nc.tile_named(ps, "acc", Dtype::F32, &[128, F])?;
            let stat = nc.tile_named(sb, "stat", Dtype::F32, &[128, 1])?;
            let rows = i * 128..(i + 1) * 128;
            for s in steps {
                match *s {
                    Step::Load { tile, block } => match xin {
                        Some(xin) => {
                            nc.tensor_copy(t[tile], xin.at(i).cols(block * F..(block + 1) * F))?
                        }
                        None => {
                            nc.dma(t[tile], x.rows(rows.clone()).cols(block * F..(block + 1) * F))?
                        }
                    },
                    Step::Matmul { tile } => nc.matmul(acc, wt, t[tile], false)?,
                    Step::Evacuate { tile, how } => match how {
                        0 => {
                            nc.activation(t[tile], acc, Act::Exp, ActArgs::default().scale(0.01))?
                        }
                        1 => nc.tensor_copy(t[tile], acc)?,
                        _ => nc.on(Engine::Scalar).tensor_copy(t[tile], acc)?,
                    },
                    Step::Exp { dst, src } => {
                        nc.activation(t[dst], t[src], Act::Exp, ActArgs::default().scale(0.1))?
                    }
                    Step::Add { dst, a, b } => nc.tensor_tensor(t[dst], t[a], t[b], Alu::Add)?,
                    Step::Scale { dst, src } => {
                        nc.tensor_scalar(t[dst], t[src], (Alu::Multiply, Scalar::Imm(0.5)), None)?
                    }
                    Step::ReduceScale { tile } => {
                        nc.tensor_reduce(stat, t[tile], Alu::Max, false)?;
                        nc.tensor_scalar(
                            t[tile],
                            t[tile],
                            (Alu::Subtract, Scalar::Col(stat.view())),
                            None,
                        )?;
                    }
                    Step::Copy { engine, dst, src } => {
                        let e = [Engine::Vector, Engine::Scalar, Engine::GpSimd][engine];
                        nc.on(e).tensor_copy(t[dst], t[src])?
                    }
                    Step::Store { tile, slot } => match out {
                        Some(out) => nc
                            .on(Engine::GpSimd)
                            .tensor_copy(out.at(i).cols(slot * F..(slot + 1) * F), t[tile])?,
                        None => {
                            nc.dma(y.rows(rows.clone()).cols(slot * F..(slot + 1) * F), t[tile])?
                        }
                    },
                    Step::Accumulate { tile } => {
                        nc.matmul(gacc, wt, t[tile], started)?;
                        started = true;
                    }
                }
            }
            Ok(())
        };
        if affine {
            nc.affine_range(0..n, &mut body).unwrap();
        } else {
            nc.sequential_range(0..n, &mut body).unwrap();
        }
        // After the loop: the output tile and the accumulation, evacuated; stored to HBM
        // when values are wanted or the loop moves data by DMA anyway. (A store issued after
        // a compute-only loop is placed into an idle gap of the DMA queues, which is not
        // monotone: an earlier start of the one before can push it past the next transfer.)
        let store = mode.functional || sh.dma_in_loop;
        if let (Some(out), true) = (out, store) {
            nc.dma(y.view().split(0, 128).swap(0, 1), out).unwrap();
        }
        if started {
            let o = nc.tile(consts, Dtype::F32, &[128, F]).unwrap();
            nc.tensor_copy(o, gacc).unwrap();
            if store {
                nc.dma(z, o).unwrap();
            }
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut out = nc.read_hbm(y).map(bits).unwrap_or_default();
        out.extend(nc.read_hbm(z).map(bits).unwrap_or_default());
        Run { out, profile: nc.profile(), trace: nc.trace_json() }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The same program gives the same schedule: profile and trace, to the bit.
        #[test]
        fn the_schedule_is_deterministic(steps in body(), sh in shape()) {
            let a = run(&steps, sh, ExecMode::TRACE, true);
            let b = run(&steps, sh, ExecMode::TRACE, true);
            prop_assert_eq!(serde_json::to_string(&a.profile).unwrap(), serde_json::to_string(&b.profile).unwrap());
            prop_assert_eq!(a.trace, b.trace);
        }

        /// Values are computed in program order whatever the schedule: an affine loop, the
        /// same plain loop, and the affine loop without the timing model agree to the bit.
        #[test]
        fn values_do_not_depend_on_the_schedule(steps in body(), sh in shape()) {
            let affine = run(&steps, sh, ExecMode::BOTH, true);
            let plain = run(&steps, sh, ExecMode::BOTH, false);
            let functional = run(&steps, sh, ExecMode::FUNCTIONAL, true);
            prop_assert_eq!(&affine.out, &plain.out);
            prop_assert_eq!(&affine.out, &functional.out);
            prop_assert_eq!(&affine.profile.program_hash, &functional.profile.program_hash);
            prop_assert_ne!(&affine.profile.program_hash, &plain.profile.program_hash);
        }

        /// An affine loop never finishes later than the same instructions in program order
        /// when its body is compute only: each engine runs its oldest held instruction first
        /// and lets a later one go ahead only into the idle time before that one can start,
        /// so by induction over program order no instruction starts later than in program
        /// order (docs/scheduling.md §4). With DMAs that no longer holds: a transfer the
        /// schedule makes ready earlier can take the idle gap of the DMA queues that program
        /// order left to a later transfer, which then waits for the next gap — placement into
        /// idle gaps is not monotone (ARCHITECTURE.md, `timing/`; it is why a DMA issued after
        /// a compute-only loop is left out of the strict case below), and no greedy schedule
        /// avoids it without lookahead. There the test states the bound it checks: at most
        /// 25% later than program order. The bound is empirical: over 80 000 random bodies
        /// (four proptest seeds × 20 000), of the 39 970 with DMAs 1.1% finished later than
        /// in program order, by at most 16.6%, and 20% sooner, by up to 57%; of the 40 030
        /// compute-only ones none finished later and 47% sooner, by up to 48%.
        #[test]
        fn an_affine_loop_never_finishes_later_than_program_order(steps in body(), sh in shape()) {
            let affine = run(&steps, sh, ExecMode::TIMING, true).profile.kernel_time_us;
            let plain = run(&steps, sh, ExecMode::TIMING, false).profile.kernel_time_us;
            if sh.dma_in_loop {
                prop_assert!(affine <= 1.25 * plain, "affine {} µs > 1.25 x plain {} µs", affine, plain);
            } else {
                prop_assert!(affine <= plain + 1e-6, "affine {} µs > plain {} µs", affine, plain);
            }
        }
    }
}
