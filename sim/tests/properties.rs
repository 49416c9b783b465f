//! Properties of the simulator over random programs (proptest).
//!
//! Programs are drawn from a small instruction vocabulary over a fixed set of tiles, always
//! valid (every tile is written before it is read), so each property is about the models,
//! not about error paths.

use neuron_sim::{Act, ActArgs, Alu, Chip, Dtype, Engine, ExecMode, Hbm, Nc, Profile, Scalar};
use proptest::prelude::*;

const F: u64 = 64;

#[derive(Clone, Copy, Debug)]
enum Op {
    Load { tile: usize, block: u64 },
    Store { tile: usize, block: u64 },
    Add { dst: usize, a: usize, b: usize },
    Scale { dst: usize, src: usize, k: f32 },
    Tanh { dst: usize, src: usize },
    Matmul { a: usize, b: usize, accumulate: bool },
    Evacuate { dst: usize },
    CopyOn { engine: usize, dst: usize, src: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let t = 0usize..4;
    prop_oneof![
        (t.clone(), 0u64..4).prop_map(|(tile, block)| Op::Load { tile, block }),
        (t.clone(), 0u64..4).prop_map(|(tile, block)| Op::Store { tile, block }),
        (t.clone(), t.clone(), t.clone()).prop_map(|(dst, a, b)| Op::Add { dst, a, b }),
        (t.clone(), t.clone(), -2.0f32..2.0).prop_map(|(dst, src, k)| Op::Scale { dst, src, k }),
        (t.clone(), t.clone()).prop_map(|(dst, src)| Op::Tanh { dst, src }),
        (t.clone(), t.clone(), any::<bool>()).prop_map(|(a, b, accumulate)| Op::Matmul {
            a,
            b,
            accumulate
        }),
        t.clone().prop_map(|dst| Op::Evacuate { dst }),
        (0usize..3, t.clone(), t).prop_map(|(engine, dst, src)| Op::CopyOn { engine, dst, src }),
    ]
}

fn program() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..40)
}

fn input() -> Vec<f32> {
    (0..128 * 4 * F).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect()
}

struct Run {
    out: Vec<u32>,
    profile: Profile,
    trace: Option<serde_json::Value>,
}

/// Run `ops` after a prologue that writes every tile and the PSUM accumulator.
fn run(ops: &[Op], chip: Chip, mode: ExecMode) -> Run {
    let mut nc = Nc::new(chip, mode);
    let x = nc.hbm_input("x", Dtype::F32, &[128, 4 * F], &input()).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[128, 4 * F]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let ps = nc.psum_pool("ps", 1);
    let tiles: Vec<_> = (0..4)
        .map(|i| nc.tile_named(sb, &format!("t{i}"), Dtype::F32, &[128, F]).unwrap())
        .collect();
    let acc = nc.tile_named(ps, "acc", Dtype::F32, &[F, F]).unwrap();
    for (i, t) in tiles.iter().enumerate() {
        nc.dma(*t, x.cols(i as u64 * F..(i as u64 + 1) * F)).unwrap();
    }
    nc.matmul(acc, tiles[0], tiles[1], false).unwrap();
    for b in 0..4 {
        nc.dma(y.cols(b * F..(b + 1) * F), tiles[b as usize]).unwrap();
    }
    for op in ops {
        match *op {
            Op::Load { tile, block } => nc.dma(tiles[tile], x.cols(block * F..(block + 1) * F)),
            Op::Store { tile, block } => nc.dma(y.cols(block * F..(block + 1) * F), tiles[tile]),
            Op::Add { dst, a, b } => nc.tensor_tensor(tiles[dst], tiles[a], tiles[b], Alu::Add),
            Op::Scale { dst, src, k } => {
                nc.tensor_scalar(tiles[dst], tiles[src], (Alu::Multiply, Scalar::Imm(k)), None)
            }
            Op::Tanh { dst, src } => {
                nc.activation(tiles[dst], tiles[src], Act::Tanh, ActArgs::default())
            }
            Op::Matmul { a, b, accumulate } => nc.matmul(acc, tiles[a], tiles[b], accumulate),
            Op::Evacuate { dst } => nc.tensor_copy(tiles[dst].parts(0..F as u32), acc),
            Op::CopyOn { engine, dst, src } => {
                let e = [Engine::Vector, Engine::Scalar, Engine::GpSimd][engine];
                nc.on(e).tensor_copy(tiles[dst], tiles[src])
            }
        }
        .unwrap();
    }
    let out = nc.read_hbm(y).map(|v| v.iter().map(|f| f.to_bits()).collect()).unwrap_or_default();
    Run { out, profile: nc.profile(), trace: nc.trace_json() }
}

/// `ops`, then a store of every tile: whatever the program computed last reaches `y`, so
/// comparing outputs compares every value, not only those a random `Store` happened to write.
fn then_store_all(ops: &[Op]) -> Vec<Op> {
    let stores = (0..4).map(|t| Op::Store { tile: t, block: t as u64 });
    ops.iter().copied().chain(stores).collect()
}

fn chip(i: usize) -> Chip {
    [Chip::trn1(), Chip::trn2(), Chip::trn3()][i].clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn same_program_gives_bit_identical_values_and_cycles(ops in program(), c in 0usize..3) {
        // Everything a run reports: values, the whole profile (critical path, verdict, top
        // lines, DMA and HBM figures), the trace.
        let ops = then_store_all(&ops);
        let all = ExecMode { functional: true, timing: true, trace: true };
        let (a, b) = (run(&ops, chip(c), all), run(&ops, chip(c), all));
        prop_assert_eq!(&a.out, &b.out);
        let json = |p: &Profile| serde_json::to_string(p).unwrap();
        prop_assert_eq!(json(&a.profile), json(&b.profile));
        prop_assert!(a.trace.is_some());
        prop_assert_eq!(&a.trace, &b.trace);
    }

    #[test]
    fn values_do_not_depend_on_timing(ops in program(), c in 0usize..3) {
        let ops = then_store_all(&ops);
        let f = run(&ops, chip(c), ExecMode::FUNCTIONAL);
        let b = run(&ops, chip(c), ExecMode::BOTH);
        prop_assert_eq!(&f.out, &b.out);
        prop_assert_eq!(&f.profile.program_hash, &b.profile.program_hash);
    }

    // "Adding an instruction never makes a program finish earlier" holds where the model has
    // no choice to make, and these two properties pin that. It does not hold in general, for
    // this model or for the hardware: DMA engines serve whichever transfer is ready, so an
    // inserted instruction that delays one load can let a later load take the engines first
    // and finish the program sooner (a list-scheduling anomaly; proptest found one: a copy
    // into t0 delays `Load t0`, and `Load t1` behind it then starts 0.1 µs earlier).

    /// Compute engines run in program order and DMA placement is final when issued, so a
    /// compute instruction inserted after the last DMA can only delay what follows it.
    #[test]
    fn inserting_compute_after_the_last_dma_never_finishes_earlier(ops in program(), extra in op(), at in 0usize..40, c in 0usize..3) {
        prop_assume!(!matches!(extra, Op::Load { .. } | Op::Store { .. }));
        let after_dmas = ops.iter().rposition(|o| matches!(o, Op::Load { .. } | Op::Store { .. })).map_or(0, |i| i + 1);
        let at = after_dmas + at % (ops.len() - after_dmas + 1);
        let base = run(&ops, chip(c), ExecMode::TIMING).profile.kernel_time_us;
        let mut more = ops.clone();
        more.insert(at, extra);
        let with = run(&more, chip(c), ExecMode::TIMING).profile.kernel_time_us;
        prop_assert!(with >= base, "inserting {:?} at {} made it finish at {} < {}", extra, at, with, base);
    }

    /// Nothing issued later changes what was placed before it (placement is final at issue:
    /// the model streams).
    #[test]
    fn appending_any_instruction_never_finishes_earlier(ops in program(), extra in op(), c in 0usize..3) {
        let base = run(&ops, chip(c), ExecMode::TIMING).profile.kernel_time_us;
        let mut more = ops.clone();
        more.push(extra);
        let with = run(&more, chip(c), ExecMode::TIMING).profile.kernel_time_us;
        prop_assert!(with >= base, "appending {:?} made it finish at {} < {}", extra, with, base);
    }

    #[test]
    fn time_is_never_below_the_roofline(ops in program(), c in 0usize..3) {
        let p = run(&ops, chip(c), ExecMode::TIMING).profile;
        prop_assert!(p.kernel_time_us >= p.roofline_bound_us * (1.0 - 1e-9), "{} < {}", p.kernel_time_us, p.roofline_bound_us);
    }

    #[test]
    fn trace_bytes_equal_profile_bytes_and_no_thread_has_overlapping_slices(ops in program(), c in 0usize..3) {
        let r = run(&ops, chip(c), ExecMode::TRACE);
        let trace = r.trace.expect("trace mode records a trace");
        let events = trace["traceEvents"].as_array().unwrap();
        let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
        let bytes: u64 = slices.iter().filter_map(|e| e["args"]["bytes"].as_u64()).sum();
        prop_assert_eq!(bytes, r.profile.hbm_read_bytes + r.profile.hbm_write_bytes);
        // The slices of one thread never overlap (the format wants them nested, and Perfetto
        // drops those that are not): transfers a DMA engine serves round-robin go to lanes
        // of their track.
        let mut by_tid: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
        for s in &slices {
            by_tid.entry(s["tid"].as_u64().unwrap()).or_default().push((s["ts"].as_f64().unwrap(), s["dur"].as_f64().unwrap()));
        }
        for (tid, mut v) in by_tid {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in v.windows(2) {
                prop_assert!(w[0].0 + w[0].1 <= w[1].0 + 1e-6, "tid {}: {:?} overlaps {:?}", tid, w[0], w[1]);
            }
        }
        // Every thread that holds a slice is named.
        let named: std::collections::BTreeSet<u64> = events.iter().filter(|e| e["name"] == "thread_name").map(|e| e["tid"].as_u64().unwrap()).collect();
        prop_assert!(slices.iter().all(|s| named.contains(&s["tid"].as_u64().unwrap())));
        // Instruction count on the compute tracks matches the profile.
        let compute: u64 = r.profile.engines.iter().map(|e| e.instruction_count).sum();
        let compute_slices = slices.iter().filter(|e| e["tid"].as_u64().unwrap() < 4).count() as u64;
        prop_assert_eq!(compute, compute_slices);
    }
}

/// Time of a chain of `n` dependent instructions on one engine over tiles `a`, `b`.
fn chains(vector: usize, scalar: usize) -> f64 {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let sb = nc.sbuf_pool("sb", 1);
    let t: Vec<_> = (0..4)
        .map(|i| nc.tile_named(sb, &format!("t{i}"), Dtype::Bf16, &[128, 512]).unwrap())
        .collect();
    // Interleave the two chains in program order; they share no tile and no engine.
    for i in 0..vector.max(scalar) {
        if i < vector {
            nc.tensor_tensor(t[0], t[0], t[1], Alu::Add).unwrap();
        }
        if i < scalar {
            nc.activation(t[2], t[3], Act::Exp, ActArgs::default()).unwrap();
            nc.activation(t[3], t[2], Act::Exp, ActArgs::default()).unwrap();
        }
    }
    nc.profile().kernel_time_us
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The two chains share no tile, no engine, and (on trn2, NeuronCore-v3) no port
    /// (§1.8: the v2 port sharing is lifted), so together they take exactly as long as the
    /// longer one alone, and each alone takes its formula:
    /// * VectorE, `vector` dependent bf16 SBUF adds of N = 512: the §2.3 1-pass N, 2x
    ///   performance mode (§1.5), plus the access start: max(64, 512 / 2) + 60 = 316 cycles
    ///   at 0.96 GHz, each waiting the 100-cycle result latency of the one before;
    /// * ScalarE, `2 · scalar` dependent activations of N = 512: max(64, 512) + 60 = 572
    ///   cycles at 1.2 GHz, each waiting the 140-cycle latency of the one before.
    /// (The model converts each duration to whole picoseconds, rounding to nearest.)
    #[test]
    fn independent_chains_overlap(vector in 1usize..30, scalar in 1usize..30) {
        let (v, s, both) = (chains(vector, 0), chains(0, scalar), chains(vector, scalar));
        let ps = |cycles: f64, ghz: f64| (cycles * 1000.0 / ghz).round() / 1e6; // µs
        let chain = |n: usize, cycles: f64, latency: f64, ghz: f64| {
            n as f64 * ps(cycles, ghz) + (n - 1) as f64 * ps(latency, ghz)
        };
        let want_v = chain(vector, 64f64.max(512.0 / 2.0) + 60.0, 100.0, 0.96);
        let want_s = chain(2 * scalar, 64f64.max(512.0) + 60.0, 140.0, 1.2);
        prop_assert!((v - want_v).abs() < 1e-6, "vector chain {} µs, want {}", v, want_v);
        prop_assert!((s - want_s).abs() < 1e-6, "scalar chain {} µs, want {}", s, want_s);
        prop_assert!((both - v.max(s)).abs() < 1e-6, "{} != max({}, {})", both, v, s);
    }

    #[test]
    fn splitting_a_dma_never_makes_it_faster(cols in 1u64..64, parts_log in 0u32..8, pieces in 2u64..9, by_rows in any::<bool>(), c in 0usize..3) {
        let parts = 1u64 << parts_log; // 1..128 partitions
        let free = cols * 64;
        let time = |n: u64| {
            let mut nc = Nc::new(chip(c), ExecMode::TIMING);
            let x = nc.hbm_input("x", Dtype::Bf16, &[parts, free], &[]).unwrap();
            let sb = nc.sbuf_pool("sb", 1);
            let t = nc.tile(sb, Dtype::Bf16, &[parts, free]).unwrap();
            if by_rows && parts >= n {
                // Partition slices must keep legal start partitions: split into n equal
                // power-of-two groups when possible, else whole.
                let step = (parts / n).next_power_of_two().min(parts);
                let mut p0 = 0;
                while p0 < parts {
                    let p1 = (p0 + step).min(parts);
                    nc.dma(t.parts(p0 as u32..p1 as u32), x.rows(p0..p1)).unwrap();
                    p0 = p1;
                }
            } else {
                let mut c0 = 0;
                let step = free.div_ceil(n);
                while c0 < free {
                    let c1 = (c0 + step).min(free);
                    nc.dma(t.cols(c0..c1), x.cols(c0..c1)).unwrap();
                    c0 = c1;
                }
            }
            nc.profile().kernel_time_us
        };
        let whole = time(1);
        let split = time(pieces);
        // Each transfer's descriptor time is rounded to the picosecond, so k transfers may add
        // up to k/2 ps less than the whole (a rounding, not a speed-up). At most 2·pieces
        // transfers are issued (the row split rounds the piece count up to a power of two):
        // allow 1 ps for each.
        let rounding = 2.0 * pieces as f64 * 1e-6;
        prop_assert!(split >= whole - rounding, "{} pieces took {} < whole {}", pieces, split, whole);
    }
}

// The roofline bound's exact value (`tune` prunes a candidate whose bound is no better than
// the best time so far, so a bound too high prunes good candidates and one too low prunes
// nothing). Profile::roofline_bound_us = max(hardware FLOPs / peak, HBM bytes / bandwidth),
// with the peak of neuroncore.md §1.4 (128 × 128 PEs × 2 FLOP per TensorE cycle, 78.6
// TFLOPS at 2.4 GHz on trn2) and the per-core HBM bandwidth of §7 (`hbm_gbps_per_core`,
// 362 GB/s on trn2, 410 on trn1).

/// A fresh trn-`chip` run with one SBUF tile of `shape` (`dt`).
fn one_tile(chip: Chip, dt: Dtype, shape: &[u64]) -> (Nc, neuron_sim::Tile) {
    let mut nc = Nc::new(chip, ExecMode::TIMING);
    nc.count_lower_bound_work();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile_named(sb, "t", dt, shape).unwrap();
    (nc, t)
}

fn assert_close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-9 * want.max(1e-3), "{what}: bound {got} µs, want {want} µs");
}

#[test]
fn roofline_bound_of_dmas_alone_is_their_hbm_bytes_over_the_core_bandwidth() {
    // A trn2 load of [128, 4096] bf16 = 1,048,576 B read from HBM: 1,048,576 / 362 B/ns
    // = 2,896.6 ns; no FLOPs. trn1: / 410 B/ns.
    for (chip, gbps) in [(Chip::trn2(), 362.0), (Chip::trn1(), 410.0)] {
        let (mut nc, t) = one_tile(chip, Dtype::Bf16, &[128, 4096]);
        let x = nc.hbm_input("x", Dtype::Bf16, &[128, 4096], &[]).unwrap();
        nc.dma(t, x).unwrap();
        let p = nc.profile();
        let bytes = 128.0 * 4096.0 * 2.0;
        assert_close(p.roofline_bound_us, bytes / gbps / 1e3, &format!("{} load", p.chip));
        assert!(p.kernel_time_us >= p.roofline_bound_us);
    }
    // An HBM→HBM copy reads and writes every byte: 2 × 1,048,576 / 362 B/ns = 5,793.2 ns.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let a = nc.hbm_input("a", Dtype::Bf16, &[128, 4096], &[]).unwrap();
    let b = nc.hbm("b", Dtype::Bf16, &[128, 4096]).unwrap();
    nc.dma(b, a).unwrap();
    let p = nc.profile();
    assert_close(p.roofline_bound_us, 2.0 * 1_048_576.0 / 362.0 / 1e3, "HBM→HBM copy");
    // An SBUF→SBUF copy moves no HBM byte and does no FLOP: a bound of 0.
    let (mut nc, t) = one_tile(Chip::trn2(), Dtype::Bf16, &[128, 4096]);
    let sb2 = nc.sbuf_pool("sb2", 1);
    let u = nc.tile_named(sb2, "u", Dtype::Bf16, &[128, 4096]).unwrap();
    nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
    nc.dma(u, t).unwrap();
    assert_eq!(nc.profile().roofline_bound_us, 0.0, "SBUF→SBUF copy");
}

#[test]
fn roofline_bound_of_a_matmul_is_its_hardware_flops_over_the_pe_peak() {
    // bf16 [K=128] x [M=128] x [N=512]: 2·128·128·512 = 16,777,216 FLOPs over
    // 128·128·2·f_tensor FLOP/s = 512 / f_tensor ns: 213.3 ns at 2.4 GHz (trn2), 182.9 ns at
    // 2.8 GHz (trn1). fp32: neuron-profile's hardware FLOPs count it twice
    // (calibration.md §1.1), so twice that (the matmul itself takes 4x, §1.4).
    for (chip, ghz) in [(Chip::trn2(), 2.4), (Chip::trn1(), 2.8)] {
        for (dt, times) in [(Dtype::Bf16, 1.0), (Dtype::F32, 2.0)] {
            let (mut nc, t) = one_tile(chip.clone(), dt, &[128, 640]);
            let ps = nc.psum_pool("ps", 1);
            let acc = nc.tile_named(ps, "acc", Dtype::F32, &[128, 512]).unwrap();
            nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
            nc.matmul(acc, t.cols(0..128), t.cols(128..640), false).unwrap();
            let p = nc.profile();
            let want = times * 512.0 / ghz / 1e3;
            assert_close(p.roofline_bound_us, want, &format!("{} {dt} matmul", p.chip));
            assert!(p.kernel_time_us >= p.roofline_bound_us);
        }
    }
    // A bf16 TensorE transpose of [128 x 128] counts 2·128·128·128 hardware FLOPs
    // (calibration.md §1.1): 128 / 2.4 GHz = 53.3 ns on trn2.
    let (mut nc, t) = one_tile(Chip::trn2(), Dtype::Bf16, &[128, 128]);
    let ps = nc.psum_pool("ps", 1);
    let d = nc.tile_named(ps, "d", Dtype::Bf16, &[128, 128]).unwrap();
    nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
    nc.transpose(d, t).unwrap();
    assert_close(nc.profile().roofline_bound_us, 128.0 / 2.4 / 1e3, "bf16 transpose");
}

#[test]
fn roofline_bound_is_the_larger_of_the_compute_and_memory_sides() {
    // trn2: load [128, 640] bf16 (163,840 B: 452.6 ns at 362 B/ns), one bf16 matmul of
    // N = 512 (213.3 ns): memory-bound, 452.6 ns. With 8 matmuls of the loaded tile
    // (8 × 213.3 = 1,706.7 ns) it is compute-bound, 1,706.7 ns.
    for (matmuls, want_ns) in [(1u32, 163_840.0 / 362.0), (8, 8.0 * 512.0 / 2.4)] {
        let (mut nc, t) = one_tile(Chip::trn2(), Dtype::Bf16, &[128, 640]);
        let x = nc.hbm_input("x", Dtype::Bf16, &[128, 640], &[]).unwrap();
        let ps = nc.psum_pool("ps", 1);
        let acc = nc.tile_named(ps, "acc", Dtype::F32, &[128, 512]).unwrap();
        nc.dma(t, x).unwrap();
        for i in 0..matmuls {
            nc.matmul(acc, t.cols(0..128), t.cols(128..640), i > 0).unwrap();
        }
        let p = nc.profile();
        assert_close(p.roofline_bound_us, want_ns / 1e3, &format!("{matmuls} matmuls"));
        let side = if matmuls == 1 { "memory" } else { "compute" };
        assert_eq!(p.roofline_side, side, "{matmuls} matmuls");
        assert!(p.kernel_time_us >= p.roofline_bound_us);
    }
}

// The lower bound `tune` prunes with (`Nc::lower_bound`, sim/src/timing/bound.rs): the
// roofline, the DMA fixed latency plus the most engine time one queue of one DMA engine is
// given, and the most time one compute engine or NeuronCore-v2 shared port is given. Its
// programs reach what `program()` does not: transfers over any partition range (chunks of
// unequal rows, engines in different states), strided HBM sides (a descriptor per element),
// SBUF→SBUF and HBM→HBM copies (queues 2 and 3; over 128 rows they wrap), and affine loops
// (the list scheduler) around loads, compute on three engines and stores.

/// One step of a lower-bound program.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `kind` 0 load, 1 store, 2 SBUF→SBUF copy, 3 HBM→HBM copy, 4 and 5 a DMA transpose
    /// from HBM and from SBUF into `np` partitions of a bf16 tile (a plain copy on trn1,
    /// which has none); partitions `p0..p0 + np`
    /// of tile `tile` (a copy's source: tile `other` from `q0`), HBM rows from `row`,
    /// columns `block`, the HBM side transposed in 8 × 8 when `strided`.
    Dma {
        kind: u8,
        tile: usize,
        other: usize,
        p0: u32,
        q0: u32,
        np: u32,
        row: u64,
        block: u64,
        strided: bool,
    },
    Compute(Op),
    /// An affine loop of `trips` iterations, each loading a fresh tile (whole, then
    /// `np` partitions from `p0` again), running `ops` activations or copies on it on
    /// engine `engine`, and storing partitions `p0..p0 + np` to its own rows.
    Loop {
        trips: u64,
        p0: u32,
        np: u32,
        ops: u8,
        engine: usize,
        strided: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..6, 0usize..4, 0usize..4, 0u32..128, 0u32..128, 1u32..=256, 0u64..256, 0u64..4, any::<bool>())
            .prop_map(|(kind, tile, other, p0, q0, np, row, block, strided)| Step::Dma { kind, tile, other, p0, q0, np, row, block, strided }),
        3 => op().prop_map(Step::Compute),
        1 => (1u64..6, 0u32..128, 1u32..=128, 0u8..4, 0usize..3, any::<bool>())
            .prop_map(|(trips, p0, np, ops, engine, strided)| Step::Loop { trips, p0, np, ops, engine, strided }),
    ]
}

/// Run `steps` (timing as `mode` says) after a prologue that writes every tile; returns the
/// run's profile and lower bound.
fn run_steps(steps: &[Step], chip: Chip, mode: ExecMode) -> (Profile, neuron_sim::LowerBound) {
    run_launch(steps, &[], &[], chip, mode)
}

/// [`run_steps`] of `before` on the caller's core, then (when `programs` is not empty) an
/// `spmd` launch whose program `i` runs `programs[i]`, then `after` on the caller's core
/// again, each with its own pools (released between). The programs share the HBM tensors;
/// the runs are timing-only, where conflicts between them are not looked for.
fn run_launch(
    before: &[Step],
    programs: &[Vec<Step>],
    after: &[Step],
    chip: Chip,
    mode: ExecMode,
) -> (Profile, neuron_sim::LowerBound) {
    let mut nc = Nc::new(chip, mode);
    // Without the timing model the work is counted as it is (`tune`'s trace); with it,
    // on request.
    if mode.timing {
        nc.count_lower_bound_work();
    }
    let x = nc.hbm_input("x", Dtype::F32, &[256, 4 * F], &[]).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[256, 4 * F]).unwrap();
    let z = nc.hbm("z", Dtype::F32, &[256, 4 * F]).unwrap();
    let w = nc.hbm("w", Dtype::F32, &[128, 64 * F]).unwrap();
    // The DMA transposes' bf16 source (steps of kind 4 and 5).
    let xb = nc.hbm_input("xb", Dtype::Bf16, &[256, 256], &[]).unwrap();
    let hbm = [x, y, z, w, xb];
    run_body(&mut nc, before, hbm);
    if !programs.is_empty() {
        nc.release_pools();
        nc.spmd(programs.len() as u32, |nc, pid| {
            run_body(nc, &programs[pid as usize], hbm);
            Ok(())
        })
        .unwrap();
        if !after.is_empty() {
            run_body(&mut nc, after, hbm);
        }
    }
    let bound = nc.lower_bound();
    (nc.profile(), bound)
}

/// The prologue (pools, tiles written) and `steps`, on the tensors `[x, y, z, w, xb]`.
fn run_body(nc: &mut Nc, steps: &[Step], [x, y, z, w, xb]: [Hbm; 5]) {
    let sb = nc.sbuf_pool("sb", 1);
    let lp = nc.sbuf_pool("lp", 2);
    let ps = nc.psum_pool("ps", 1);
    let tiles: Vec<_> = (0..4)
        .map(|i| nc.tile_named(sb, &format!("t{i}"), Dtype::F32, &[128, F]).unwrap())
        .collect();
    let acc = nc.tile_named(ps, "acc", Dtype::F32, &[F, F]).unwrap();
    for (i, t) in tiles.iter().enumerate() {
        nc.dma(*t, x.slice(&[0..128, i as u64 * F..(i as u64 + 1) * F])).unwrap();
    }
    nc.matmul(acc, tiles[0], tiles[1], false).unwrap();
    // The DMA transposes' tiles (steps of kind 4 and 5).
    let tb = nc.tile_named(sb, "tb", Dtype::Bf16, &[128, 128]).unwrap();
    let tb2 = nc.tile_named(sb, "tb2", Dtype::Bf16, &[128, 128]).unwrap();
    nc.dma(tb, xb.slice(&[0..128, 0..128])).unwrap();
    nc.dma(tb2, xb.slice(&[128..256, 0..128])).unwrap();
    let has_dma_transpose = nc.chip().has_dma_transpose();
    // An HBM side of `n` rows from `row` (wrapping within 256) and one column block.
    let side = |h: Hbm, row: u64, n: u64, block: u64, strided: bool| {
        let row = row.min(256 - n);
        let v = h.slice(&[row..row + n, block * F..(block + 1) * F]);
        if strided {
            v.split(1, 8).swap(1, 2)
        } else {
            v
        }
    };
    let mut loop_base = 0u64;
    for s in steps {
        match *s {
            Step::Dma { kind, tile, other, p0, q0, np, row, block, strided } => {
                let np = if kind == 3 { np } else { np.min(128) };
                let p0 = p0.min(128 - np.min(128));
                let q0 = q0.min(128 - np.min(128));
                let t = tiles[tile].parts(p0..p0 + np);
                let n = np as u64;
                match kind {
                    0 => nc.dma(t, side(x, row, n, block, strided)),
                    1 => nc.dma(side(y, row, n, block, strided), t),
                    2 => nc.dma(t, tiles[other].parts(q0..q0 + np)),
                    // [128 rows, np columns] of xb into np partitions of tb (or tb2).
                    4 | 5 => {
                        let dst = [tb, tb2][tile % 2].parts(p0..p0 + np);
                        let row = row.min(128);
                        let cols = block * 32..block * 32 + n;
                        match (has_dma_transpose, kind) {
                            (true, 4) => nc.dma_transpose(dst, xb.slice(&[row..row + 128, cols])),
                            (true, _) => nc.dma_transpose(dst, [tb2, tb][tile % 2].cols(0..n)),
                            (false, _) => nc.dma(dst, xb.slice(&[row..row + n, 0..128])),
                        }
                    }
                    // Whole rows (contiguous: one descriptor per engine's block) or a block.
                    _ if block == 0 => {
                        let row = row.min(256 - n);
                        nc.dma(z.rows(row..row + n), x.rows(row..row + n))
                    }
                    _ => nc.dma(side(z, row, n, block, false), side(x, row, n, block, strided)),
                }
                .unwrap();
            }
            Step::Compute(op) => {
                match op {
                    Op::Load { tile, block } => {
                        nc.dma(tiles[tile], x.slice(&[0..128, block * F..(block + 1) * F]))
                    }
                    Op::Store { tile, block } => {
                        nc.dma(y.slice(&[0..128, block * F..(block + 1) * F]), tiles[tile])
                    }
                    Op::Add { dst, a, b } => {
                        nc.tensor_tensor(tiles[dst], tiles[a], tiles[b], Alu::Add)
                    }
                    Op::Scale { dst, src, k } => nc.tensor_scalar(
                        tiles[dst],
                        tiles[src],
                        (Alu::Multiply, Scalar::Imm(k)),
                        None,
                    ),
                    Op::Tanh { dst, src } => {
                        nc.activation(tiles[dst], tiles[src], Act::Tanh, ActArgs::default())
                    }
                    Op::Matmul { a, b, accumulate } => {
                        nc.matmul(acc, tiles[a], tiles[b], accumulate)
                    }
                    Op::Evacuate { dst } => nc.tensor_copy(tiles[dst].parts(0..F as u32), acc),
                    Op::CopyOn { engine, dst, src } => {
                        let e = [Engine::Vector, Engine::Scalar, Engine::GpSimd][engine];
                        nc.on(e).tensor_copy(tiles[dst], tiles[src])
                    }
                }
                .unwrap();
            }
            Step::Loop { trips, p0, np, ops, engine, strided } => {
                let p0 = p0.min(128 - np);
                let base = loop_base;
                loop_base = (loop_base + trips) % 60;
                let e = [Engine::Vector, Engine::Scalar, Engine::GpSimd][engine];
                nc.affine_range(0..trips, |nc, i| {
                    let u = nc.tile(lp, Dtype::F32, &[128, F])?;
                    nc.dma(u, x.slice(&[0..128, (i % 4) * F..(i % 4 + 1) * F]))?;
                    nc.dma(u.parts(p0..p0 + np), side(x, p0 as u64, np as u64, i % 4, strided))?;
                    for k in 0..ops {
                        if k % 2 == 0 {
                            nc.on(e).tensor_copy(u, u)?;
                        } else {
                            nc.activation(u, u, Act::Exp, ActArgs::default())?;
                        }
                    }
                    let col = (base + i) % 64;
                    nc.dma(
                        w.slice(&[p0 as u64..(p0 + np) as u64, col * F..(col + 1) * F]),
                        u.parts(p0..p0 + np),
                    )
                })
                .unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// No program finishes before its lower bound, on any chip, and the bound is the same
    /// with the timing model off (as `tune`'s trace computes it) as with it on.
    #[test]
    fn time_is_never_below_the_lower_bound(steps in prop::collection::vec(step(), 1..40), c in 0usize..3) {
        let (p, b) = run_steps(&steps, chip(c), ExecMode::TIMING);
        prop_assert!(p.kernel_time_us >= b.us() * (1.0 - 1e-12), "{} µs < bound {:?}", p.kernel_time_us, b);
        prop_assert_eq!(b.roofline_us, p.roofline_bound_us);
        let untimed = ExecMode { functional: false, timing: false, trace: false };
        let (_, traced) = run_steps(&steps, chip(c), untimed);
        prop_assert_eq!(traced, b);
    }

    /// The same with an `spmd` launch between two phases of the caller's core, on the chips
    /// with two physical cores per logical core: its programs' steps run on their own cores
    /// from the caller's end, and the caller continues from the launch's end.
    #[test]
    fn time_is_never_below_the_lower_bound_of_a_launch(
        before in prop::collection::vec(step(), 0..12),
        p0 in prop::collection::vec(step(), 1..20),
        p1 in prop::collection::vec(step(), 0..20),
        after in prop::collection::vec(step(), 0..12),
        c in 1usize..3,
    ) {
        let programs = [p0, p1];
        let (p, b) = run_launch(&before, &programs, &after, chip(c), ExecMode::TIMING);
        prop_assert!(p.kernel_time_us >= b.us() * (1.0 - 1e-12), "{} µs < bound {:?}", p.kernel_time_us, b);
        prop_assert_eq!(b.roofline_us, p.roofline_bound_us);
        let untimed = ExecMode { functional: false, timing: false, trace: false };
        let (_, traced) = run_launch(&before, &programs, &after, chip(c), untimed);
        prop_assert_eq!(traced, b);
        // Each program alone after `before` ends no later than the launch.
        for one in &programs {
            let (alone, _) = run_launch(&before, std::slice::from_ref(one), &[], chip(c), ExecMode::TIMING);
            prop_assert!(alone.kernel_time_us <= p.kernel_time_us, "{} > {}", alone.kernel_time_us, p.kernel_time_us);
        }
    }
}

#[test]
fn lower_bound_of_loads_is_the_dma_fixed_latency_and_one_queues_engine_time() {
    // trn1 (neuroncore.md §7, §1.7): a load of [128, 4096] bf16 is 16 chunks of 8 rows, one
    // per engine; each row is one 8,192 B run, one descriptor: 8 × 4 ns = 32 ns, and
    // 65,536 B at 17 B/ns = 3,855.0588 ns (3,855,058 ps, rounded down), after the fixed
    // 1,300 ns: 5,187.058 ns, twice the roofline's 1,048,576 B / 410 B/ns = 2,557.5 ns. HBM
    // does not bind (16 × 17 = 272 < 410 B/ns), so the load takes exactly that, rounded up:
    // the bound is 1 ps short.
    let (mut nc, t) = one_tile(Chip::trn1(), Dtype::Bf16, &[128, 4096]);
    let x = nc.hbm_input("x", Dtype::Bf16, &[128, 4096], &[]).unwrap();
    let y = nc.hbm("y", Dtype::Bf16, &[128, 4096]).unwrap();
    nc.dma(t, x).unwrap();
    let b = nc.lower_bound();
    let one = 1_300_000 + 32_000 + 3_855_058;
    assert_eq!(b.dma_queue_us, one as f64 / 1e6);
    assert_close(b.roofline_us, 1_048_576.0 / 410.0 / 1e3, "roofline");
    assert_eq!((b.engine_us, b.us()), (0.0, b.dma_queue_us));
    let p = nc.profile();
    assert_eq!(p.kernel_time_us, (one + 1) as f64 / 1e6);
    // A store of the tile goes on each engine's store queue: the loads' queue still has the
    // most work, so the bound stays (the store waits for the load: the time doubles).
    nc.dma(y, t).unwrap();
    assert_eq!(nc.lower_bound().dma_queue_us, one as f64 / 1e6);
    // A second load queues behind the first on every engine: one fixed latency, two chunks.
    nc.dma(t, x).unwrap();
    assert_eq!(nc.lower_bound().dma_queue_us, (one + 32_000 + 3_855_058) as f64 / 1e6);
    assert!(nc.profile().kernel_time_us >= nc.lower_bound().us());
    // Rows 0–11 of a [128, 64] fp32 tile: 8 rows on engine 0, 4 on engine 1 (dma.md §1);
    // engine 0's chunk decides: 8 × 4 ns + 8 × 256 B / 17 B/ns = 32 + 120.47 ns.
    let (mut nc, t) = one_tile(Chip::trn1(), Dtype::F32, &[128, 64]);
    let x = nc.hbm_input("x", Dtype::F32, &[12, 64], &[]).unwrap();
    nc.dma(t.parts(0..12), x).unwrap();
    assert_eq!(nc.lower_bound().dma_queue_us, (1_300_000 + 32_000 + 120_470) as f64 / 1e6);
}

#[test]
fn lower_bound_of_compute_is_the_busiest_engine_or_shared_port() {
    // trn2 VectorE, bf16 SBUF adds of N = 512: max(64, 512 / 2) + 60 = 316 cycles at 0.96
    // GHz = 329,167 ps each (rounded, as the model times them; see `independent_chains_
    // overlap`); ScalarE Exp of N = 512: 572 cycles at 1.2 GHz = 476,667 ps. Ten adds and
    // two activations: VectorE's 3,291,670 ps is the bound, not the sum of the engines.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    nc.count_lower_bound_work();
    let sb = nc.sbuf_pool("sb", 1);
    let t: Vec<_> = (0..4)
        .map(|i| nc.tile_named(sb, &format!("t{i}"), Dtype::Bf16, &[128, 512]).unwrap())
        .collect();
    for _ in 0..10 {
        nc.tensor_tensor(t[0], t[0], t[1], Alu::Add).unwrap();
    }
    for _ in 0..2 {
        nc.activation(t[2], t[3], Act::Exp, ActArgs::default()).unwrap();
    }
    let b = nc.lower_bound();
    assert_eq!((b.engine_us, b.dma_queue_us, b.roofline_us), (3.29167, 0.0, 0.0));
    assert!(nc.profile().kernel_time_us >= b.us());
    // trn1 (NeuronCore-v2, §1.8): VectorE and GpSimdE share the SBUF port, so their SBUF
    // instructions are one after another and the port's work is the sum of theirs; on trn2
    // (v3, the sharing lifted) only the busier engine counts. An fp32 SBUF copy of N = 512
    // on VectorE is max(64, 512) + 60 = 572 cycles at 1.12 GHz on trn1 = 510,714 ps.
    let copies = |chip: Chip, engines: &[Engine]| {
        let mut nc = Nc::new(chip, ExecMode::TIMING);
        nc.count_lower_bound_work();
        let sb = nc.sbuf_pool("sb", 1);
        let t: Vec<_> = (0..4)
            .map(|i| nc.tile_named(sb, &format!("t{i}"), Dtype::F32, &[128, 512]).unwrap())
            .collect();
        for (i, &e) in engines.iter().enumerate() {
            nc.on(e).tensor_copy(t[2 * i], t[2 * i + 1]).unwrap();
        }
        let b = nc.lower_bound();
        assert!(nc.profile().kernel_time_us >= b.us());
        b.engine_us
    };
    let (v, g) = (copies(Chip::trn1(), &[Engine::Vector]), copies(Chip::trn1(), &[Engine::GpSimd]));
    assert_eq!(v, 0.510714);
    assert_close(copies(Chip::trn1(), &[Engine::Vector, Engine::GpSimd]), v + g, "trn1 SBUF port");
    let (v, g) = (copies(Chip::trn2(), &[Engine::Vector]), copies(Chip::trn2(), &[Engine::GpSimd]));
    assert_eq!(copies(Chip::trn2(), &[Engine::Vector, Engine::GpSimd]), v.max(g), "trn2");
}
