//! One test per documented instruction cost formula (neuroncore.md §2.3, §2.4).
//!
//! Each test issues a single instruction on a fresh trn1 (NeuronCore-v2, the generation the
//! formulas were published for, with no performance-mode speed-ups) and compares the
//! engine's busy cycles with the formula written out here from the document — not from the
//! simulator's `cost` module. Both sides of every `max()` / floor are exercised, except
//! where the instruction's own limits rule one out: a VectorE transpose takes at most 32
//! elements per partition, so it always sits on the `MIN_II` floor (64). The NeuronCore-v3/v4
//! performance-mode speed-ups (§1.5) and the stride penalty (§1.8) are checked on both sides of
//! the floor too, since they scale only the per-element term, never `MIN_II`.

use neuron_sim::{
    Act, ActArgs, Affine, Alu, Chip, Cmp, Dtype, Engine, ExecMode, Nc, Scalar, Tile, ViolationKind,
};

const MIN_II: u64 = 64; // §2.3 "MIN_II ≈ 64 engine cycles"
const GPSIMD_START: u64 = 150; // §2.3 iota / affine_select "150 + N"

fn nc() -> Nc {
    Nc::new(Chip::trn1(), ExecMode::TIMING)
}

fn sbuf(nc: &mut Nc, dt: Dtype, shape: &[u64]) -> Tile {
    let pool = nc.sbuf_pool("p", 1);
    nc.tile_named(pool, &format!("t{}", shape.iter().product::<u64>()), dt, shape).unwrap()
}

fn psum(nc: &mut Nc, dt: Dtype, shape: &[u64]) -> Tile {
    let pool = nc.psum_pool("ps", 1);
    nc.tile_named(pool, "acc", dt, shape).unwrap()
}

/// Fixed cycles every VectorE and ScalarE instruction pays on top of its formula: starting a
/// tensor access costs about 60 cycles (neuroncore.md §1.8).
const ACCESS_START: u64 = 60;

/// Busy cycles of `engine` after the program (less the access start on VectorE and
/// ScalarE, so what is left is the §2.3 formula), checked against its busy time at its clock.
fn cycles(nc: &mut Nc, engine: Engine) -> u64 {
    let p = nc.profile();
    let e = &p.engines[engine.index()];
    assert_eq!(e.instruction_count, 1, "exactly one instruction on {engine}");
    let ghz = match engine {
        Engine::Tensor => nc.chip().clocks.tensor_ghz,
        Engine::Vector => nc.chip().clocks.vector_ghz,
        Engine::Scalar => nc.chip().clocks.scalar_ghz,
        Engine::GpSimd => nc.chip().clocks.gpsimd_ghz,
    };
    let expect_us = e.busy_cycles as f64 / ghz / 1e3;
    assert!(
        (e.active_time_us - expect_us).abs() < 1e-6,
        "{} µs vs {} cycles",
        e.active_time_us,
        e.busy_cycles
    );
    match engine {
        Engine::Vector | Engine::Scalar => e.busy_cycles - ACCESS_START,
        _ => e.busy_cycles,
    }
}

#[test]
fn matmul_is_max_of_min64_stationary_and_moving() {
    // §2.3: max(min(64, N_stationary), N_moving) for bf16; §2.4 MM_INIT_LATENCY = 64.
    for (m, n) in [(128, 512), (128, 32), (16, 8), (16, 40), (100, 64), (128, 1)] {
        let mut nc = nc();
        let st = sbuf(&mut nc, Dtype::Bf16, &[128, m]);
        let mv = sbuf(&mut nc, Dtype::Bf16, &[128, n]);
        let ps = psum(&mut nc, Dtype::F32, &[m, n]);
        nc.memset(st, 1.0).unwrap();
        nc.memset(mv, 1.0).unwrap();
        nc.matmul(ps, st, mv, false).unwrap();
        let want = std::cmp::max(std::cmp::min(64, m), n);
        assert_eq!(cycles(&mut nc, Engine::Tensor), want, "M={m} N={n}");
    }
}

#[test]
fn fp32_matmul_costs_four_times_bf16() {
    // §1.4, §2.3: fp32 = 4 x max(min(64, N_stationary), N_moving).
    for (m, n) in [(128, 512), (128, 16)] {
        let mut nc = nc();
        let st = sbuf(&mut nc, Dtype::F32, &[128, m]);
        let mv = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let ps = psum(&mut nc, Dtype::F32, &[m, n]);
        nc.on(Engine::GpSimd).memset(st, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(mv, 1.0).unwrap();
        nc.matmul(ps, st, mv, false).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Tensor), 4 * std::cmp::max(64.min(m), n));
    }
}

#[test]
fn tensor_engine_transpose_is_max_p_min64_f() {
    // §2.3: Tensor transpose max(P, min(64, F)) — the bf16 matmul of the [P, F] source
    // (stationary, free size F) with a P x P identity (moving, free size P):
    // max(min(64, F), P).
    for (p, f) in [(128, 128), (32, 128), (16, 8), (8, 100)] {
        let mut nc = nc();
        let src = sbuf(&mut nc, Dtype::Bf16, &[p, f]);
        let dst = psum(&mut nc, Dtype::Bf16, &[f, p]);
        nc.on(Engine::GpSimd).memset(src, 1.0).unwrap();
        nc.transpose(dst, src).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Tensor), p.max(f.min(64)), "P={p} F={f}");
    }
}

#[test]
fn fp32_tensor_engine_transpose_costs_an_fp32_matmul_and_counts_its_flops() {
    // calibration.md §1.3, §3: a PE transpose is an nc_matmul against an identity, so an
    // fp32 one costs 4 x max(min(64, F), P) (§2.3 fp32 matmul); neuron-profile counts
    // 2·P·P·F·2 transpose FLOPs for it (calibration.md §1.1: 8,388,608 for 128 x 128,
    // 4,194,304 for the bmm's [128 x 64]), and adds them to hardware_flops.
    for (p, f, flops) in [(128u64, 128u64, 8_388_608.0), (128, 64, 4_194_304.0), (32, 16, 0.0)] {
        let mut nc = nc();
        let src = sbuf(&mut nc, Dtype::F32, &[p, f]);
        let dst = psum(&mut nc, Dtype::F32, &[f, p]);
        nc.on(Engine::GpSimd).memset(src, 1.0).unwrap();
        nc.transpose(dst, src).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Tensor), 4 * p.max(f.min(64)), "P={p} F={f}");
        let prof = nc.profile();
        let want = if flops > 0.0 { flops } else { (2 * p * p * f * 2) as f64 };
        assert_eq!(prof.transpose_flops, want);
        assert_eq!(prof.hardware_flops, want);
    }
}

#[test]
fn fp32_matmul_counts_twice_its_flops_as_hardware_flops() {
    // calibration.md §1.1: hardware_flops = 2 × 2·M·N·K for fp32 (the NKIBench matmul:
    // 1,159,641,169,920 = 2 × 515,396,075,520 + transpose_flops); bf16 once.
    for (dt, times) in [(Dtype::F32, 2.0), (Dtype::Bf16, 1.0)] {
        let mut nc = nc();
        let st = sbuf(&mut nc, dt, &[128, 128]);
        let mv = sbuf(&mut nc, dt, &[128, 512]);
        let ps = psum(&mut nc, Dtype::F32, &[128, 512]);
        nc.on(Engine::GpSimd).memset(st, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(mv, 1.0).unwrap();
        nc.matmul(ps, st, mv, false).unwrap();
        let nominal = 2.0 * 128.0 * 128.0 * 512.0;
        assert_eq!(nc.profile().hardware_flops, times * nominal, "{dt}");
    }
}

#[test]
fn vector_and_scalar_instructions_pay_the_access_start() {
    // §1.8: starting a tensor access costs about 60 cycles, on top of the §2.3 formula
    // (here max(MIN_II, N) for a tensor_copy), on VectorE and ScalarE alike; GpSimd's
    // memset pays none (its start is inside its own formulas).
    for (engine, n) in [(Engine::Vector, 16), (Engine::Vector, 512), (Engine::Scalar, 512)] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let y = sbuf(&mut nc, Dtype::F32, &[128, n + 1]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.on(engine).tensor_copy(y.cols(0..n), x).unwrap();
        let busy = nc.profile().engines[engine.index()].busy_cycles;
        assert_eq!(busy, MIN_II.max(n) + ACCESS_START, "{engine} N={n}");
    }
}

#[test]
fn vector_engine_transpose_is_max_min_ii_n() {
    // §2.3: Vector transpose max(MIN_II, N), up to 32 x 32. N ≤ 32 < MIN_II, so only the
    // floor side of the max() can be reached (a 33-column source is refused, below).
    for (p, f) in [(32, 32), (4, 16)] {
        let mut nc = nc();
        let src = sbuf(&mut nc, Dtype::F32, &[p, f]);
        let dst = sbuf(&mut nc, Dtype::F32, &[f, p]);
        nc.on(Engine::GpSimd).memset(src, 1.0).unwrap();
        nc.on(Engine::Vector).transpose(dst, src).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(f));
    }
    let mut nc = nc();
    let src = sbuf(&mut nc, Dtype::F32, &[32, 33]);
    let dst = sbuf(&mut nc, Dtype::F32, &[33, 32]);
    nc.on(Engine::GpSimd).memset(src, 1.0).unwrap();
    assert!(nc.on(Engine::Vector).transpose(dst, src).is_err(), "VectorE transposes ≤ 32 x 32");
}

#[test]
fn activation_is_max_min_ii_n_with_or_without_scale_and_bias() {
    // §2.3: activation max(MIN_II, N), the same with or without scale/bias: plain, scale
    // only (an immediate and a [P,1] column), bias only, and both.
    for n in [16u64, 64, 1000] {
        for (scale, bias, col) in [
            (false, false, false),
            (true, false, false),
            (true, false, true),
            (false, true, false),
            (true, true, false),
            (true, true, true),
        ] {
            let mut nc = nc();
            let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
            let y = sbuf(&mut nc, Dtype::F32, &[128, n + 1]);
            let y = y.cols(0..n);
            let pool = nc.sbuf_pool("cols", 1);
            let b = nc.tile_named(pool, "bias", Dtype::F32, &[128, 1]).unwrap();
            let s = nc.tile_named(pool, "scale", Dtype::F32, &[128, 1]).unwrap();
            nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
            nc.on(Engine::GpSimd).memset(b, 0.5).unwrap();
            nc.on(Engine::GpSimd).memset(s, 2.0).unwrap();
            let mut args = ActArgs::default();
            if scale {
                args = if col { args.scale(Scalar::Col(s.view())) } else { args.scale(2.0) };
            }
            if bias {
                args = args.bias(b);
            }
            nc.activation(y, x, Act::Exp, args).unwrap();
            let what = format!("N={n} scale={scale} (column {col}) bias={bias}");
            assert_eq!(cycles(&mut nc, Engine::Scalar), MIN_II.max(n), "{what}");
        }
    }
}

#[test]
fn tensor_tensor_one_psum_one_sbuf_input_is_1n() {
    // §2.3: max(MIN_II, N) when one input is in PSUM and the other in SBUF: N = 512 above
    // the floor (2N would be 1024), N = 20 on it (max(64, 20) = 64; 2N = 40 would be too).
    for n in [512u64, 20] {
        tensor_tensor_one_psum_one_sbuf(n);
    }
}

fn tensor_tensor_one_psum_one_sbuf(n: u64) {
    let mut nc = nc();
    let a = psum(&mut nc, Dtype::F32, &[128, n]);
    let b = sbuf(&mut nc, Dtype::F32, &[128, n]);
    let d = sbuf(&mut nc, Dtype::F32, &[128, n + 8]);
    let d = d.cols(0..n);
    nc.on(Engine::GpSimd).memset(b, 1.0).unwrap();
    // PSUM written by the PE array (GpSimd cannot reach PSUM): a 1-row matmul.
    let one = sbuf(&mut nc, Dtype::F32, &[1, 128]);
    let mv = sbuf(&mut nc, Dtype::F32, &[1, n + 16]);
    nc.on(Engine::GpSimd).memset(one, 1.0).unwrap();
    nc.on(Engine::GpSimd).memset(mv, 1.0).unwrap();
    nc.matmul(a, one, mv.cols(0..n), false).unwrap();
    nc.tensor_tensor(d, a, b, Alu::Add).unwrap();
    assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n));
}

#[test]
fn tensor_tensor_all_bf16_sbuf_add_is_1n_else_2n() {
    // §2.3: max(MIN_II, N) for all-bf16 SBUF add/multiply/subtract (contiguous);
    // otherwise max(MIN_II, 2N).
    for (dt, op, n, want) in [
        (Dtype::Bf16, Alu::Add, 256u64, MIN_II.max(256)),
        (Dtype::Bf16, Alu::Multiply, 20, MIN_II.max(20)),
        (Dtype::Bf16, Alu::Max, 256, MIN_II.max(2 * 256)),
        (Dtype::F32, Alu::Add, 256, MIN_II.max(2 * 256)),
        (Dtype::F32, Alu::Add, 20, MIN_II.max(2 * 20)),
    ] {
        let mut nc = nc();
        let a = sbuf(&mut nc, dt, &[128, n]);
        let b = sbuf(&mut nc, dt, &[128, n + 1]);
        let b = b.cols(0..n);
        nc.on(Engine::GpSimd).memset(a, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(b, 1.0).unwrap();
        nc.tensor_tensor(a, a, b, op).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "{dt} {op:?} N={n}");
    }
}

#[test]
fn tensor_tensor_bf16_fast_path_needs_every_view_contiguous() {
    // §2.3: the 1-pass max(MIN_II, N) of an all-bf16 SBUF add/multiply/subtract holds "on
    // contiguous data"; with any operand not contiguous it is max(MIN_II, 2N). The
    // every-other-element views step 2 bf16 = 4 bytes, under §1.8's 16-byte stride limit,
    // so no stride penalty enters. N = 256 (above the floor either way):
    //   all contiguous, add or subtract:      max(64, 256)     = 256
    //   `a`, `b` or `dst` every other element: max(64, 2 · 256) = 512
    let n = 256u64;
    for (op, strided, want) in [
        (Alu::Subtract, None, MIN_II.max(n)),
        (Alu::Add, None, MIN_II.max(n)),
        (Alu::Add, Some(0), MIN_II.max(2 * n)),
        (Alu::Subtract, Some(1), MIN_II.max(2 * n)),
        (Alu::Multiply, Some(2), MIN_II.max(2 * n)),
    ] {
        let mut nc = nc();
        let pool = nc.sbuf_pool("p", 1);
        let mut views = Vec::new();
        for name in ["a", "b", "dst"] {
            let t = nc.tile_named(pool, name, Dtype::Bf16, &[128, 2 * n]).unwrap();
            nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
            // Contiguous: the first n elements of each row; strided: every other element,
            // [2n] split into [n, 2] and the first of each pair taken.
            views.push((t.cols(0..n), t.view().split(0, 2).swap(0, 1).at(0)));
        }
        let pick = |i: usize| if strided == Some(i) { views[i].1 } else { views[i].0 };
        let (a, b, d) = (pick(0), pick(1), pick(2));
        nc.tensor_tensor(d, a, b, op).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "{op:?} strided operand {strided:?}");
    }
}

#[test]
fn tensor_scalar_is_max_min_ii_n_for_one_or_two_ops() {
    // §2.3: max(MIN_II, N); one or two ops cost the same.
    for (n, two) in [(1000u64, false), (1000, true), (8, true)] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        let op1 = two.then_some((Alu::Add, Scalar::Imm(1.0)));
        nc.tensor_scalar(x, x, (Alu::Multiply, Scalar::Imm(3.0)), op1).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n));
    }
}

#[test]
fn tensor_reduce_is_n_half_for_bf16_add_max_else_n() {
    // §2.3: N/2 if bf16 in and out with add or max, else N (no MIN_II floor).
    for (dt, op, n, want) in [
        (Dtype::Bf16, Alu::Add, 512u64, 256u64),
        (Dtype::Bf16, Alu::Max, 100, 50),
        (Dtype::Bf16, Alu::Min, 100, 100),
        (Dtype::F32, Alu::Add, 512, 512),
        (Dtype::F32, Alu::Max, 10, 10),
    ] {
        let mut nc = nc();
        let x = sbuf(&mut nc, dt, &[128, n]);
        let r = sbuf(&mut nc, dt, &[128, 1]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.tensor_reduce(r, x, op, false).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "{dt} {op:?} N={n}");
    }
}

#[test]
fn memset_zero_16bit_is_n_half_else_n() {
    // §2.3: max(MIN_II, N/2) for zero in bf16/fp16, else max(MIN_II, N).
    for (dt, v, n, want) in [
        (Dtype::Bf16, 0.0, 1024u64, 512u64),
        (Dtype::F16, 0.0, 100, MIN_II.max(50)),
        (Dtype::Bf16, 1.0, 1024, 1024),
        (Dtype::F32, 0.0, 1024, 1024),
        (Dtype::F32, 0.0, 10, MIN_II),
    ] {
        let mut nc = nc();
        let x = sbuf(&mut nc, dt, &[128, n]);
        nc.memset(x, v).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "{dt} {v} N={n}");
    }
}

#[test]
fn tensor_copy_is_max_min_ii_n() {
    // §2.3: max(MIN_II, N), on Vector and on Scalar.
    for (engine, n) in [(Engine::Vector, 700u64), (Engine::Vector, 3), (Engine::Scalar, 700)] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let y = sbuf(&mut nc, Dtype::Bf16, &[128, n]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.on(engine).tensor_copy(y, x).unwrap();
        assert_eq!(cycles(&mut nc, engine), MIN_II.max(n));
    }
}

#[test]
fn iota_and_affine_select_are_gpsimd_start_plus_n() {
    // §2.3: 150 + N for iota and affine_select.
    for n in [1u64, 128, 2048] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::I32, &[128, n]);
        nc.iota(x, Affine::new2(0, 1, 1)).unwrap();
        assert_eq!(cycles(&mut nc, Engine::GpSimd), GPSIMD_START + n);

        let mut nc = self::nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        nc.memset(x, 1.0).unwrap();
        nc.affine_select(x, x, Affine::new2(0, 1, -1), Cmp::Ge, -1e9).unwrap();
        assert_eq!(cycles(&mut nc, Engine::GpSimd), GPSIMD_START + n);
    }
}

#[test]
fn bn_stats_and_bn_aggr_follow_their_formulas() {
    // §2.3: bn_stats max(MIN_II, N); bn_aggr max(MIN_II, 13 * (N / 3)).
    for n in [512u64, 32] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let s = sbuf(&mut nc, Dtype::F32, &[128, 6]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.bn_stats(s, x).unwrap();
        // 512 above the floor, max(64, 32) = 64 on it.
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n), "N={n}");
    }

    for k in [2u64, 40] {
        let mut nc = self::nc();
        let st = sbuf(&mut nc, Dtype::F32, &[128, 3 * k]);
        let out = sbuf(&mut nc, Dtype::F32, &[128, 2]);
        nc.on(Engine::GpSimd).memset(st, 1.0).unwrap();
        nc.bn_aggr(out, st).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(13 * (3 * k / 3)));
    }
}

#[test]
fn strided_inner_access_is_half_bandwidth() {
    // §1.8: inner stride over 16 bytes → half port bandwidth, "~50% slower instruction";
    // §7: N is multiplied by 1.5 before the formula, so the MIN_II floor stays:
    //   N = 256: max(64, 256 + 128) = 384
    //   N = 48:  max(64, 48 + 24)   = 72   (without the penalty it would be the floor, 64)
    //   N = 16:  max(64, 16 + 8)    = 64   (penalty after the floor would give 1.5 · 64 = 96)
    for (n, want) in [(256u64, 384u64), (48, 72), (16, 64)] {
        assert_eq!(want, MIN_II.max(n + n / 2));
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n, 8]); // [.., 8] fp32: stride 32 B along n
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        let y = sbuf(&mut nc, Dtype::F32, &[128, n]);
        nc.tensor_copy(y, x.view().swap(0, 1).at(0)).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "N={n}");
    }
}

/// Every `k`-th element of each row of a `[128, n · k]` tile: `n` elements at inner stride `k`.
fn every(nc: &mut Nc, name: &str, dt: Dtype, n: u64, k: u64) -> neuron_sim::TileView {
    let pool = nc.sbuf_pool(name, 1);
    let t = nc.tile_named(pool, name, dt, &[128, n * k]).unwrap();
    nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
    if k == 1 {
        t.view()
    } else {
        t.view().split(0, k).swap(0, 1).at(0)
    }
}

#[test]
fn the_stride_penalty_starts_above_16_bytes_on_either_side() {
    // §1.8: "with an innermost stride under 16 bytes a port delivers the full 128 elements
    // per cycle ...; above 16 bytes it delivers half"; §7 and the code apply the penalty to
    // an inner stride *over* 16 bytes, on any operand (source or destination). A tensor_copy
    // of N = 256 on trn1 (no performance mode):
    //   no penalty:   max(64, 256)             = 256
    //   penalty:      max(64, 256 + 256 / 2)   = 384
    let n = 256u64;
    let (plain, slow) = (MIN_II.max(n), MIN_II.max(n + n / 2));
    // (dtype, source stride, destination stride) in elements, and the expected cycles.
    let cases = [
        (Dtype::F32, 4, 1, plain),  // 4 × 4 B = 16 B: not over 16
        (Dtype::F32, 5, 1, slow),   // 20 B
        (Dtype::Bf16, 8, 1, plain), // 8 × 2 B = 16 B
        (Dtype::Bf16, 9, 1, slow),  // 18 B
        (Dtype::F32, 1, 4, plain),  // destination at 16 B
        (Dtype::F32, 1, 8, slow),   // destination at 32 B, source contiguous
        (Dtype::Bf16, 1, 9, slow),  // destination at 18 B
    ];
    for (dt, ks, kd, want) in cases {
        let mut nc = nc();
        let src = every(&mut nc, "src", dt, n, ks);
        let dst = every(&mut nc, "dst", dt, n, kd);
        nc.tensor_copy(dst, src).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "{dt} src stride {ks}, dst stride {kd}");
    }
}

#[test]
fn trn2_vector_bf16_copy_gets_performance_mode() {
    // §1.5: NC-v3 VectorE tensor_copy 4x for bf16 SBUF→SBUF contiguous; fp32 gets none.
    for (dt, want) in [(Dtype::Bf16, MIN_II.max(2048 / 4)), (Dtype::F32, 2048)] {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = sbuf(&mut nc, dt, &[128, 2048]);
        let y = sbuf(&mut nc, dt, &[128, 2048 + 1]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.tensor_copy(y.cols(0..2048), x).unwrap();
        let busy = nc.profile().engines[Engine::Vector.index()].busy_cycles;
        assert_eq!(busy, want + ACCESS_START, "{dt}");
    }
}

#[test]
fn trn2_vector_performance_mode_needs_only_the_innermost_dim_contiguous() {
    // §1.5: 4x when both sides are bf16 in SBUF and "the innermost dimension is
    // contiguous": half of each row of a [128, 8, 128] tile still streams at 4x; every
    // other element does not (2x).
    for (step, want) in [(1u64, MIN_II.max(512 / 4)), (2, MIN_II.max(512 / 2))] {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let a = sbuf(&mut nc, Dtype::Bf16, &[128, 8, 128]);
        let pairs = sbuf(&mut nc, Dtype::Bf16, &[128, 512, 2]);
        let d = sbuf(&mut nc, Dtype::Bf16, &[128, 8, 64]);
        nc.on(Engine::GpSimd).memset(a, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(pairs, 1.0).unwrap();
        let src = if step == 1 {
            a.slice(0..128, &[0..8, 0..64])
        } else {
            // The first of each pair: 512 elements two apart.
            pairs.view().swap(0, 1).at(0)
        };
        nc.tensor_scalar(d, src, (Alu::Multiply, Scalar::Imm(2.0)), None).unwrap();
        let busy = nc.profile().engines[Engine::Vector.index()].busy_cycles;
        assert_eq!(busy, want + ACCESS_START, "inner step {step}");
    }
}

#[test]
fn performance_mode_divides_the_per_element_term_never_the_min_ii_floor() {
    // §1.5 performance modes, as `cost.rs` applies them: the speed-up divides the
    // per-element term only, so `max(MIN_II, term / speedup)`, after which the access start
    // (ACCESS_START, subtracted by `cycles`) is added. The modes (sim/src/nc/schedule.rs
    // `copy_speedup`, vector.rs `tensor_tensor`):
    // * VectorE, NC-v3/v4 (`perf_mode_16bit` = 4): tensor_copy / tensor_scalar 4x with both
    //   sides 16-bit in SBUF with unit inner stride, 2x when one side is PSUM (or strided);
    //   tensor_tensor 2x with both inputs in SBUF and every operand 16-bit;
    // * ScalarE, NC-v4 (`perf_mode_16bit` = 2): tensor_copy / tensor_scalar 2x for 16-bit;
    //   not `activation` (§1.5 names only tensor_scalar and tensor_copy), and not NC-v3.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Copy,
        Scale,
        Add,
        Max,
        Exp,
    }
    let (v, s) = (Engine::Vector, Engine::Scalar);
    let (bf, f32) = (Dtype::Bf16, Dtype::F32);
    let (sb, ps) = (false, true);
    // (chip, engine, op, dtype, dst in PSUM, N, expected formula cycles)
    #[rustfmt::skip]
    let cases = [
        // trn2 VectorE copy bf16 SBUF→SBUF, 4x: max(64, 128/4 = 32) = 64, and
        // max(64, 512/4) = 128 above the floor. (Dividing the floor too would give 32.)
        ("trn2", v, Op::Copy, bf, sb, 128u64, 64u64),
        ("trn2", v, Op::Copy, bf, sb, 512, 128),
        // One side (the destination) in PSUM: 2x, max(64, 512/2) = 256; max(64, 100/2) = 64.
        ("trn2", v, Op::Copy, bf, ps, 512, 256),
        ("trn2", v, Op::Copy, bf, ps, 100, 64),
        // fp32: no speed-up, max(64, 512) = 512.
        ("trn2", v, Op::Copy, f32, sb, 512, 512),
        // tensor_tensor bf16 SBUF add: the 1-pass N (§2.3) then 2x: max(64, 512/2) = 256,
        // and max(64, 100/2) = 64 on the floor.
        ("trn2", v, Op::Add, bf, sb, 512, 256),
        ("trn2", v, Op::Add, bf, sb, 100, 64),
        // bf16 max is 2-pass (2N), then 2x: max(64, 1024/2) = 512; max(64, 80/2) = 64.
        ("trn2", v, Op::Max, bf, sb, 512, 512),
        ("trn2", v, Op::Max, bf, sb, 40, 64),
        // fp32 add: 2N, no speed-up: max(64, 1024) = 1024.
        ("trn2", v, Op::Add, f32, sb, 512, 1024),
        // trn3 VectorE has trn2's 4x: max(64, 512/4) = 128.
        ("trn3", v, Op::Copy, bf, sb, 512, 128),
        // trn3 ScalarE copy and tensor_scalar bf16, 2x: max(64, 512/2) = 256, and
        // max(64, 100/2) = 64; fp32 none: 512.
        ("trn3", s, Op::Copy, bf, sb, 512, 256),
        ("trn3", s, Op::Copy, bf, sb, 100, 64),
        ("trn3", s, Op::Scale, bf, sb, 512, 256),
        ("trn3", s, Op::Copy, f32, sb, 512, 512),
        // trn3 activation bf16: no speed-up, max(64, 512) = 512.
        ("trn3", s, Op::Exp, bf, sb, 512, 512),
        // trn2 ScalarE (`perf_mode_16bit` = 1): max(64, 512) = 512.
        ("trn2", s, Op::Copy, bf, sb, 512, 512),
    ];
    for (chip, engine, op, dt, dst_psum, n, want) in cases {
        let chip = if chip == "trn2" { Chip::trn2() } else { Chip::trn3() };
        let mut nc = Nc::new(chip, ExecMode::TIMING);
        let a = sbuf(&mut nc, dt, &[128, n]);
        let b = sbuf(&mut nc, dt, &[128, n + 1]).cols(0..n);
        nc.on(Engine::GpSimd).memset(a, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(b, 1.0).unwrap();
        let d =
            if dst_psum { psum(&mut nc, dt, &[128, n]) } else { sbuf(&mut nc, dt, &[128, n + 2]) };
        let d = d.cols(0..n);
        match op {
            Op::Copy => nc.on(engine).tensor_copy(d, a),
            Op::Scale => nc.on(engine).tensor_scalar(d, a, (Alu::Multiply, Scalar::Imm(2.0)), None),
            Op::Add => nc.tensor_tensor(d, a, b, Alu::Add),
            Op::Max => nc.tensor_tensor(d, a, b, Alu::Max),
            Op::Exp => nc.activation(d, a, Act::Exp, ActArgs::default()),
        }
        .unwrap();
        let name = nc.chip().name.clone();
        assert_eq!(
            cycles(&mut nc, engine),
            want,
            "{name} {engine} {op:?} {dt} psum={dst_psum} N={n}"
        );
    }
}

#[test]
fn tensor_scalar_reduce_is_max_min_ii_n_plus_min_ii() {
    // §2.3 tensor_scalar_reduce: max(MIN_II, N) + MIN_II, whatever the reduce operator.
    for (n, op) in [(10u64, Alu::Add), (1000, Alu::Max), (64, Alu::Min)] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let r = sbuf(&mut nc, Dtype::F32, &[128, 1]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.tensor_scalar_reduce(x, x, (Alu::Multiply, Scalar::Imm(3.0)), op, r).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n) + MIN_II, "N={n} {op:?}");
    }
}

#[test]
fn scalar_tensor_tensor_is_n_for_even_bf16_subtract_multiply_else_2n() {
    // §2.3 scalar_tensor_tensor: N when data and in1 are bf16, op0 subtract, op1 multiply and
    // N even; otherwise 2N (no MIN_II floor documented).
    let cases = [
        (1000u64, Dtype::Bf16, Alu::Subtract, Alu::Multiply, 1000u64),
        (10, Dtype::Bf16, Alu::Subtract, Alu::Multiply, 10),
        (999, Dtype::Bf16, Alu::Subtract, Alu::Multiply, 2 * 999),
        (1000, Dtype::F32, Alu::Subtract, Alu::Multiply, 2 * 1000),
        (1000, Dtype::Bf16, Alu::Multiply, Alu::Add, 2 * 1000),
    ];
    for (n, dt, op0, op1, want) in cases {
        let mut nc = nc();
        let x = sbuf(&mut nc, dt, &[128, n]);
        let y = sbuf(&mut nc, dt, &[128, n + 1]).cols(0..n);
        let s = sbuf(&mut nc, Dtype::F32, &[128, 1]);
        for t in [x.view(), y, s.view()] {
            nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
        }
        nc.scalar_tensor_tensor(y, x, (op0, Scalar::Col(s.view())), op1, y).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), want, "N={n} {dt:?} {op0:?} {op1:?}");
    }
}

#[test]
fn tensor_tensor_scan_is_max_min_ii_2n() {
    // §2.3 tensor_tensor_scan: max(MIN_II, 2N).
    for n in [8u64, 32, 1000] {
        let mut nc = nc();
        let a = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let b = sbuf(&mut nc, Dtype::F32, &[128, n + 1]).cols(0..n);
        nc.on(Engine::GpSimd).memset(a, 0.5).unwrap();
        nc.on(Engine::GpSimd).memset(b, 1.0).unwrap();
        nc.tensor_tensor_scan(b, a, b, 0.0, Alu::Multiply, Alu::Add).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(2 * n), "N={n}");
    }
}

#[test]
fn reciprocal_is_max_min_ii_kn_on_vector_and_max_min_ii_n_on_scalar() {
    // §2.3 reciprocal: max(MIN_II, 8N) on VectorE as documented; the calibration suite
    // measures about 3N (silu and swiglu, calibration.md §1.4, §1.9), and VectorE's factor
    // is the chip's fitted `reciprocal_cycles_per_elem` = 3 (docs/calibration-results.md);
    // ScalarE's max(MIN_II, N).
    assert_eq!(Chip::trn1().vector.reciprocal_cycles_per_elem, 3);
    for n in [4u64, 16, 1000] {
        for (engine, per) in [(Engine::Vector, 3), (Engine::Scalar, 1)] {
            let mut nc = nc();
            let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
            nc.on(Engine::GpSimd).memset(x, 2.0).unwrap();
            nc.on(engine).reciprocal(x, x).unwrap();
            assert_eq!(cycles(&mut nc, engine), MIN_II.max(per * n), "N={n} on {engine}");
        }
    }
}

#[test]
fn fp32_tensor_engine_transpose_costs_an_fp32_matmul() {
    // §2.3 nc_transpose on TensorE is a matmul of the data (stationary, N_stationary = F) by
    // an identity (moving, N_moving = P) (nki.isa.nc_transpose): max(min(64, F), P), x4 for
    // fp32 as every fp32 matmul (§1.4).
    for (p, f) in [(128, 128), (16, 8), (8, 100)] {
        let mut nc = nc();
        let src = sbuf(&mut nc, Dtype::F32, &[p, f]);
        let dst = psum(&mut nc, Dtype::F32, &[f, p]);
        nc.on(Engine::GpSimd).memset(src, 1.0).unwrap();
        nc.transpose(dst, src).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Tensor), 4 * p.max(f.min(64)), "P={p} F={f}");
    }
}

#[test]
fn matmul_transpose_mode_costs_a_matmul_of_its_dtype() {
    // nc_matmul(is_transpose=True): stationary = data [P, F], moving = identity [P, P], so
    // §2.3's max(min(64, N_stationary), N_moving) = max(min(64, F), P); x4 for fp32 (§1.4).
    for (dt, factor) in [(Dtype::Bf16, 1), (Dtype::F16, 1), (Dtype::F32, 4)] {
        for (p, f) in [(128, 128), (32, 128), (16, 8), (8, 100), (128, 1)] {
            let mut nc = nc();
            let pool = nc.sbuf_pool("p", 1);
            let data = nc.tile_named(pool, "data", dt, &[p, f]).unwrap();
            let eye = nc.tile_named(pool, "eye", dt, &[p, p]).unwrap();
            let dst = psum(&mut nc, dt, &[f, p]);
            nc.on(Engine::GpSimd).memset(data, 1.0).unwrap();
            nc.on(Engine::GpSimd).memset(eye, 0.0).unwrap();
            nc.matmul_transpose(dst, data, eye).unwrap();
            let want = factor * std::cmp::max(std::cmp::min(64, f), p);
            assert_eq!(cycles(&mut nc, Engine::Tensor), want, "{dt} P={p} F={f}");
        }
    }
}

#[test]
fn activation_with_an_add_reduce_op_adds_min_ii_and_refuses_the_others() {
    // §2.3 activation_reduce: max(MIN_II, N) + MIN_II (the accumulator read), whether the
    // add is the default (`reduce`) or named (`reduce_with(Add)`); reduce_op must be add
    // ([ACT233]), so any other operator is refused and nothing is scheduled.
    for n in [10u64, 512] {
        for named in [false, true] {
            let mut nc = nc();
            let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
            let r = sbuf(&mut nc, Dtype::F32, &[128, 1]);
            nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
            let args = if named {
                ActArgs::default().reduce_with(Alu::Add, r)
            } else {
                ActArgs::default().reduce(r)
            };
            nc.activation(x, x, Act::Exp, args).unwrap();
            assert_eq!(cycles(&mut nc, Engine::Scalar), MIN_II.max(n) + MIN_II, "N={n}");
        }
        for op in [Alu::Max, Alu::Min, Alu::Multiply, Alu::Subtract] {
            let mut nc = nc();
            let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
            let r = sbuf(&mut nc, Dtype::F32, &[128, 1]);
            nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
            let e = nc.activation(x, x, Act::Exp, ActArgs::default().reduce_with(op, r));
            let e = e.expect_err("only add reduces");
            assert!(
                matches!(e.kind, ViolationKind::ReduceOpNotAllowed { op: o, .. } if o == op),
                "{op:?}: {e}"
            );
            assert_eq!(nc.profile().engines[Engine::Scalar.index()].instruction_count, 0);
        }
    }
}

#[test]
fn stream_shuffle_is_max_min_ii_n() {
    // nki.isa.nc_stream_shuffle: max(MIN_II, N) VectorE cycles, N = src elements per partition.
    for n in [16u64, 64, 1000] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let y = sbuf(&mut nc, Dtype::F32, &[128, n + 1]).cols(0..n);
        nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
        let mut mask = [0u8; 32];
        for (i, m) in mask.iter_mut().enumerate() {
            *m = 31 - i as u8;
        }
        nc.stream_shuffle(y, x, mask).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n), "N={n}");
    }
}

#[test]
fn partition_broadcast_is_one_stream_shuffle_per_destination_quadrant() {
    // nkilib stream_shuffle_broadcast: one nc_stream_shuffle with a zero mask per quadrant of
    // 32 destination partitions, each max(MIN_II, N) after the access start.
    for (parts, n) in [(128u64, 16u64), (100, 1000), (32, 200), (1, 64)] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::Bf16, &[1, n]);
        let y = sbuf(&mut nc, Dtype::Bf16, &[parts, n + 1]).cols(0..n);
        nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
        nc.partition_broadcast(y, x).unwrap();
        let e = &nc.profile().engines[Engine::Vector.index()];
        assert_eq!(e.instruction_count, parts.div_ceil(32), "{parts} partitions");
        // Each shuffle also pays VectorE's per-instruction access start.
        let each = ACCESS_START + MIN_II.max(n);
        assert_eq!(e.busy_cycles, parts.div_ceil(32) * each, "{parts} x {n}");
    }
}

#[test]
fn activate2_costs_an_activation_with_or_without_its_reduce() {
    // activate2 (NeuronCore-v4) has no published cost; the simulator charges activation's
    // §2.3 rows (assumed, docs/neuroncore.md §2.3): max(MIN_II, N), + MIN_II with a reduce.
    use neuron_sim::Act2Args;
    for (n, reduce) in [(10u64, false), (10, true), (1000, false), (1000, true)] {
        let mut nc = Nc::new(Chip::trn3(), ExecMode::TIMING);
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let r = sbuf(&mut nc, Dtype::F32, &[128, 1]);
        nc.on(Engine::GpSimd).memset(x, 0.5).unwrap();
        let mut args = Act2Args::default().ops((Alu::Multiply, 2.0.into()), (Alu::Add, 1.0.into()));
        if reduce {
            args = args.reduce_with(Alu::Max, r);
        }
        nc.activate2(x, x, Act::Exp, args).unwrap();
        let want = MIN_II.max(n) + if reduce { MIN_II } else { 0 };
        assert_eq!(cycles(&mut nc, Engine::Scalar), want, "N={n} reduce={reduce}");
    }
}

#[test]
fn transpose_mode_costs_exactly_the_plain_matmul_of_the_same_operands() {
    // One cost path: the same operands issued as a plain nc_matmul (fp32 PSUM out) and in
    // transpose mode cost the same TensorE cycles, fp32 included.
    for dt in [Dtype::Bf16, Dtype::F32] {
        for (p, f) in [(128, 128), (64, 16), (8, 100)] {
            let busy = |transpose: bool| {
                let mut nc = nc();
                let pool = nc.sbuf_pool("p", 1);
                let data = nc.tile_named(pool, "data", dt, &[p, f]).unwrap();
                let eye = nc.tile_named(pool, "eye", dt, &[p, p]).unwrap();
                nc.on(Engine::GpSimd).memset(data, 1.0).unwrap();
                nc.on(Engine::GpSimd).memset(eye, 0.0).unwrap();
                if transpose {
                    let dst = psum(&mut nc, dt, &[f, p]);
                    nc.matmul_transpose(dst, data, eye).unwrap();
                } else {
                    let dst = psum(&mut nc, Dtype::F32, &[f, p]);
                    nc.matmul(dst, data, eye, false).unwrap();
                }
                cycles(&mut nc, Engine::Tensor)
            };
            assert_eq!(busy(true), busy(false), "{dt} P={p} F={f}");
        }
    }
}

/// The one published timing of a chain (neuroncore.md §2.3 note and §7 [PERF]): dependent
/// one-element ScalarE instructions issued back to back start every ~189 ns on
/// NeuronCore-v2, 264 cycles at ScalarE's 1.4 GHz. The model's parts of that step: MIN_II
/// (N = 1 is on the floor), the access start (§1.8) and the result latency 264 − 64 − 60 =
/// 140 (derived).
#[test]
fn dependent_one_element_scalar_instructions_start_every_264_cycles() {
    const STEP: u64 = 264;
    assert_eq!(MIN_II + ACCESS_START + 140, STEP);
    let chain_us = |k: u64| {
        let mut nc = nc();
        let t = sbuf(&mut nc, Dtype::F32, &[1, k + 1]);
        nc.on(Engine::GpSimd).memset(t.cols(0..1), 0.5).unwrap();
        for i in 0..k {
            let (dst, src) = (t.cols(i + 1..i + 2), t.cols(i..i + 1));
            nc.activation(dst, src, Act::Copy, ActArgs::default()).unwrap();
        }
        nc.profile().kernel_time_us
    };
    // Eight more links in the chain: everything else (the memset, the first start, the
    // last end) cancels.
    let step_ns = (chain_us(10) - chain_us(2)) / 8.0 * 1e3;
    let ghz = Chip::trn1().clocks.scalar_ghz;
    assert!((step_ns - STEP as f64 / ghz).abs() < 1e-3, "{step_ns} ns a step");
    assert!((step_ns - 189.0).abs() < 1.0, "{step_ns} ns against the measured ~189 ns");
}

#[test]
fn max8_and_find_index8_are_n_without_a_floor() {
    // §2.3 max8, nc_find_index8: N engine cycles (N = src / data elements per partition, 8 to
    // 16,384), with no MIN_II floor: N = 8 and 40 sit below MIN_II and cost N; 16,384 the most.
    for n in [8u64, 40, 1000, 16_384] {
        let mut nc = nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let top = sbuf(&mut nc, Dtype::F32, &[128, 8]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.max8(top, x).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), n, "max8 N={n}");

        let mut nc = self::nc();
        let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
        let vals = sbuf(&mut nc, Dtype::F32, &[128, 8]);
        let idx = sbuf(&mut nc, Dtype::U32, &[128, 8]);
        nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
        nc.on(Engine::GpSimd).memset(vals, 1.0).unwrap();
        nc.find_index8(idx, x, vals).unwrap();
        assert_eq!(cycles(&mut nc, Engine::Vector), n, "nc_find_index8 N={n}");
    }
}

#[test]
fn match_replace8_is_max_min_ii_n_reading_the_printed_min_as_max() {
    // §2.3 nc_match_replace8: printed min(MIN_II, N), read as max(MIN_II, N): N = 8 and 40
    // on the floor (min would give 8 and 40), 1000 and 16,384 above it (min would give 64),
    // with and without the dst_idx output.
    for n in [8u64, 40, 1000, 16_384] {
        for with_idx in [false, true] {
            let mut nc = nc();
            let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
            let vals = sbuf(&mut nc, Dtype::F32, &[128, 8]);
            let idx = sbuf(&mut nc, Dtype::U32, &[128, 8]);
            nc.on(Engine::GpSimd).memset(x, 1.0).unwrap();
            nc.on(Engine::GpSimd).memset(vals, 1.0).unwrap();
            let idx = with_idx.then(|| idx.view());
            nc.match_replace8(x, x, vals, f32::NEG_INFINITY, idx).unwrap();
            let want = MIN_II.max(n);
            assert_eq!(cycles(&mut nc, Engine::Vector), want, "N={n} dst_idx={with_idx}");
        }
    }
}

#[test]
fn tensor_copy_predicated_is_1n_split_between_sbuf_and_psum_else_2n() {
    // §2.3 tensor_copy_predicated: max(MIN_II, N) when src and predicate are split between
    // SBUF and PSUM (either way round), max(MIN_II, 2N) when both are in SBUF. N = 20: the
    // floor either way; 40: 2N = 80 above the floor, N = 40 on it; 300 above it either way.
    for n in [20u64, 40, 300] {
        for (src_psum, pred_psum, passes) in [(false, false, 2), (true, false, 1), (false, true, 1)]
        {
            let mut nc = nc();
            let mut at = |psum_side: bool, dt: Dtype| {
                if psum_side {
                    psum(&mut nc, dt, &[128, n])
                } else {
                    sbuf(&mut nc, dt, &[128, n])
                }
            };
            let (src, pred) = (at(src_psum, Dtype::F32), at(pred_psum, Dtype::U8));
            let dst = sbuf(&mut nc, Dtype::F32, &[128, n + 1]).cols(0..n);
            nc.tensor_copy_predicated(dst, src, pred, false).unwrap();
            let want = MIN_II.max(passes * n);
            let what = format!("N={n} src in PSUM {src_psum}, predicate in PSUM {pred_psum}");
            assert_eq!(cycles(&mut nc, Engine::Vector), want, "{what}");
        }
    }
}

#[test]
fn tensor_copy_predicated_with_a_scalar_src_is_one_pass() {
    // A scalar src leaves the predicate the one tensor read: max(MIN_II, N) wherever the
    // predicate is (assumed: §2.3's split row, one pass), with or without reverse_pred.
    for n in [20u64, 40, 300] {
        for (pred_psum, reverse) in [(false, false), (false, true), (true, false)] {
            let mut nc = nc();
            let pred = if pred_psum {
                psum(&mut nc, Dtype::U8, &[128, n])
            } else {
                sbuf(&mut nc, Dtype::U8, &[128, n])
            };
            let dst = sbuf(&mut nc, Dtype::F32, &[128, n + 1]).cols(0..n);
            nc.tensor_copy_predicated(dst, 1.5, pred, reverse).unwrap();
            let what = format!("N={n} predicate in PSUM {pred_psum} reverse_pred {reverse}");
            assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n), "{what}");
        }
    }
}

#[test]
fn the_new_reductions_cost_tensor_reduces_n() {
    // An operator does not change an instruction's cost: tensor_reduce with a bitwise or
    // logical reduction is N (§2.3; the N/2 row is for bf16 add and max).
    for op in [Alu::BitwiseAnd, Alu::BitwiseOr, Alu::BitwiseXor, Alu::LogicalAnd, Alu::LogicalOr] {
        for n in [64u64, 300] {
            let mut nc = nc();
            let src = sbuf(&mut nc, Dtype::I16, &[128, n]);
            let dst = sbuf(&mut nc, Dtype::I16, &[128, 1]);
            nc.tensor_reduce(dst, src, op, false).unwrap();
            assert_eq!(cycles(&mut nc, Engine::Vector), n, "{op:?} N={n}");
        }
    }
}

#[test]
fn range_select_and_select_reduce_are_max_min_ii_n_with_or_without_the_reduce() {
    // §2.3 range_select (NeuronCore-v3+, so on trn2, whose VectorE MIN_II and access start
    // are trn1's), select_reduce: max(MIN_II, N), the max reduction included.
    use neuron_sim::Cmp;
    for n in [20u64, 64, 500] {
        for reduce in [false, true] {
            for range in [true, false] {
                let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
                let x = sbuf(&mut nc, Dtype::F32, &[128, n]);
                let d = sbuf(&mut nc, Dtype::F32, &[128, n + 1]).cols(0..n);
                let col = sbuf(&mut nc, Dtype::F32, &[128, 2]);
                let pred = sbuf(&mut nc, Dtype::U8, &[128, n]);
                let r = reduce.then(|| (Alu::Max, col.cols(1..2)));
                if range {
                    let b = [(Cmp::Ge, col.cols(0..1)), (Cmp::Lt, col.cols(0..1))];
                    nc.range_select(d, x, b, 0, r).unwrap();
                } else {
                    nc.select_reduce(d, pred, x, -1.0, false, r).unwrap();
                }
                let what = format!("range_select {range} N={n} reduce={reduce}");
                assert_eq!(cycles(&mut nc, Engine::Vector), MIN_II.max(n), "{what}");
            }
        }
    }
}
