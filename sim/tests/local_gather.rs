//! GpSimd's `local_gather` (sim/src/nc/local_gather.rs; nki.isa.local_gather, neuroncore.md
//! §2.3): its cost against the documented formula written out here, what it computes against
//! hand-worked values and a naive reference, and each rule it refuses.

use neuron_sim::{Chip, Dtype, Engine, ExecMode, Nc, SimResult, Tile};
use proptest::prelude::*;

/// §2.3 local_gather "150 + ...": GPSIMD_START.
const GPSIMD_START: u64 = 150;

mod common;
use common::{load, nc, read, tile};

/// The documented cost, written from the page (nki.isa.local_gather): `150 + (N * e) / C`
/// GpSimd cycles, `C = ((28 + t*e) / (t*e)) / min(4/dtype_size, e)`, `t = 4`; a fraction of
/// a cycle counts as a whole one (the simulator's stated choice). The tiny epsilon keeps a
/// whole number computed in f64 (e.g. 8.000000000001) from rounding up.
fn documented_cycles(n: u64, e: u64, dtype_size: u64) -> u64 {
    let (t, e, n) = (4.0, e as f64, n as f64);
    let c = ((28.0 + t * e) / (t * e)) / (4.0 / dtype_size as f64).min(e);
    GPSIMD_START + ((n * e) / c - 1e-9).ceil() as u64
}

/// GpSimd's busy cycles after one instruction (as sim/tests/formulas.rs measures them).
fn gpsimd_cycles(nc: &mut Nc) -> u64 {
    let p = nc.profile();
    let e = &p.engines[Engine::GpSimd.index()];
    assert_eq!(e.instruction_count, 1, "exactly one instruction on GpSimd");
    let expect_us = e.busy_cycles as f64 / nc.chip().clocks.gpsimd_ghz / 1e3;
    assert!((e.active_time_us - expect_us).abs() < 1e-6);
    e.busy_cycles
}

#[test]
fn cost_is_the_documented_formula_rounded_up() {
    // (partitions, dtype, e, index free elements, num_valid_indices): fractions of a cycle
    // (12.5, 93.1, 2625.6, 631.5, 42.7) and a whole number (64 / 8 = 8), every dtype size,
    // the given and the default num_valid_indices (16 x index free elements).
    let cases = [
        (128, Dtype::F32, 1, 8, Some(100)),
        (128, Dtype::F32, 1, 4, Some(64)),
        (64, Dtype::F32, 4, 4, Some(64)),
        (32, Dtype::Bf16, 32, 4, Some(50)),
        (16, Dtype::U8, 8, 3, Some(37)),
        (128, Dtype::Bf16, 2, 3, None),
        (16, Dtype::Fp8E4m3, 1, 256, None),
    ];
    for (np, dt, e, idx_free, nv) in cases {
        let mut nc = Nc::new(Chip::trn1(), ExecMode::TIMING);
        let n = nv.unwrap_or(16 * idx_free);
        let src = tile(&mut nc, "src", dt, &[np, 1024]);
        let idx = tile(&mut nc, "idx", Dtype::U16, &[np, idx_free]);
        let dst = tile(&mut nc, "dst", dt, &[np, n * e]);
        nc.local_gather(dst, src, idx, e, nv).unwrap();
        let want = documented_cycles(n, e, dt.size() as u64);
        assert_eq!(gpsimd_cycles(&mut nc), want, "{np} partitions {dt} e={e} N={n}");
    }
    // The hand-worked values of three of them, so the formula above is checked too.
    assert_eq!(documented_cycles(100, 1, 4), 150 + 13); // C = 8: 12.5 cycles
    assert_eq!(documented_cycles(64, 1, 4), 150 + 8); // exactly 8
    assert_eq!(documented_cycles(50, 32, 2), 150 + 2626); // C = 0.609375: 2625.6
}

#[test]
fn cost_is_per_core_so_the_partition_count_does_not_change_it() {
    // The eight cores gather in parallel: 16 or 128 partitions cost the same.
    let cost = |np: u64| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let src = tile(&mut nc, "src", Dtype::F32, &[np, 64]);
        let idx = tile(&mut nc, "idx", Dtype::U16, &[np, 2]);
        let dst = tile(&mut nc, "dst", Dtype::F32, &[np, 64]);
        nc.local_gather(dst, src, idx, 2, None).unwrap();
        gpsimd_cycles(&mut nc)
    };
    assert_eq!(cost(16), cost(128));
    assert_eq!(cost(16), documented_cycles(32, 2, 4));
}

/// Two groups of 16 partitions, 18 valid indices of one element: the 17th and 18th
/// indices come from the index's second column (partition first), and partition 16 gathers
/// with the second group's indices.
#[test]
fn each_group_of_16_partitions_gathers_with_its_own_indices_partition_first() {
    let mut nc = nc();
    // src[p, j] = 10p + j, 6 elements per partition.
    let src: Vec<f32> = (0..32 * 6).map(|x| (10 * (x / 6) + x % 6) as f32).collect();
    // Group 0: column 0 holds q % 6, column 1 holds 5 - q % 6. Group 1: 2 then 3.
    let mut idx = vec![0f32; 32 * 2];
    for q in 0..16 {
        idx[q * 2] = (q % 6) as f32;
        idx[q * 2 + 1] = (5 - q % 6) as f32;
        idx[(16 + q) * 2] = 2.0;
        idx[(16 + q) * 2 + 1] = 3.0;
    }
    let s = load(&mut nc, "src", Dtype::F32, &[32, 6], &src);
    let i = load(&mut nc, "idx", Dtype::U16, &[32, 2], &idx);
    let d = tile(&mut nc, "dst", Dtype::F32, &[32, 18]);
    nc.local_gather(d, s, i, 1, Some(18)).unwrap();
    let out = read(&mut nc, d);
    let row = |p: usize| &out[p * 18..(p + 1) * 18];
    // Group 0's indices: 0 1 2 3 4 5 0 1 2 3 4 5 0 1 2 3 (column 0), then 5 4 (column 1,
    // partitions 0 and 1).
    let g0 = [0., 1., 2., 3., 4., 5., 0., 1., 2., 3., 4., 5., 0., 1., 2., 3., 5., 4.];
    assert_eq!(row(0), g0);
    assert_eq!(row(15), g0.map(|x| 150. + x));
    let g1 = [2.; 16].into_iter().chain([3., 3.]).collect::<Vec<f32>>();
    assert_eq!(row(16), g1.iter().map(|x| 160. + x).collect::<Vec<_>>());
    assert_eq!(row(31), g1.iter().map(|x| 310. + x).collect::<Vec<_>>());
}

/// The page's example, scaled down: `src_buffer` `[16, 8, 4]` read in blocks of 4, the
/// hardware fed `index * 4`; every index of the `[16, 1]` index tile valid by default.
#[test]
fn num_elem_per_idx_copies_contiguous_elements_from_each_element_offset() {
    let mut nc = nc();
    let src: Vec<f32> = (0..16 * 32).map(|x| x as f32).collect();
    let blocks: Vec<u64> = (0..16).map(|q| (q * 3 + 1) % 8).collect();
    let idx: Vec<f32> = blocks.iter().map(|&b| (b * 4) as f32).collect();
    let s = load(&mut nc, "src", Dtype::F32, &[16, 8, 4], &src);
    let i = load(&mut nc, "idx", Dtype::U16, &[16, 1], &idx);
    let d = tile(&mut nc, "dst", Dtype::F32, &[16, 16, 4]);
    nc.local_gather(d, s, i, 4, None).unwrap();
    let out = read(&mut nc, d);
    for p in 0..16 {
        for (k, &b) in blocks.iter().enumerate() {
            for j in 0..4 {
                let want = (p * 32 + b as usize * 4 + j) as f32;
                assert_eq!(out[p * 64 + k * 4 + j], want, "p={p} k={k} j={j}");
            }
        }
    }
    // An offset that is not a multiple of e reads from that element on (no alignment rule
    // is documented): offset 5, e = 2, reads elements 5 and 6.
    let mut nc2 = self::nc();
    let s = load(&mut nc2, "src", Dtype::F32, &[16, 8], &src[..128]);
    let i = load(&mut nc2, "idx", Dtype::U16, &[16, 1], &[5.0; 16]);
    let d = tile(&mut nc2, "dst", Dtype::F32, &[16, 2]);
    nc2.local_gather(d, s, i, 2, Some(1)).unwrap();
    let out = read(&mut nc2, d);
    assert_eq!(&out[..4], &[5., 6., 13., 14.]);
}

#[test]
fn only_the_valid_indices_and_the_elements_they_reach_must_be_written() {
    let mut nc = nc();
    let (s, i) =
        (tile(&mut nc, "src", Dtype::Bf16, &[16, 64]), tile(&mut nc, "idx", Dtype::U16, &[16, 2]));
    // Only column 0 of the index (16 indices), and elements 8..16 of the source, written.
    let hi = nc.hbm_input("idx_in", Dtype::U16, &[16, 1], &[8.0; 16]).unwrap();
    nc.dma(i.view().cols(0..1), hi).unwrap();
    let hs = nc.hbm_input("src_in", Dtype::Bf16, &[16, 8], &[1.5; 128]).unwrap();
    nc.dma(s.view().cols(8..16), hs).unwrap();
    let d = tile(&mut nc, "dst", Dtype::Bf16, &[16, 16 * 8]);
    nc.local_gather(d, s, i, 8, Some(16)).unwrap();
    assert!(read(&mut nc, d).iter().all(|&x| x == 1.5));
    // The 17th index (partition 0, element 1) is unwritten: reading it is an error.
    let d17 = tile(&mut nc, "dst17", Dtype::Bf16, &[16, 17 * 8]);
    let e = nc.local_gather(d17, s, i, 8, Some(17)).unwrap_err();
    assert_eq!(e.kind.name(), "unwritten_read", "{e}");
    assert!(e.to_string().contains("index reads tile `idx` at partition 0, element 1"), "{e}");
    // e = 16 from element 8 reaches unwritten element 16 of the source.
    let d16 = tile(&mut nc, "dst16", Dtype::Bf16, &[16, 16 * 16]);
    let e = nc.local_gather(d16, s, i, 16, Some(16)).unwrap_err();
    assert_eq!(e.kind.name(), "unwritten_read", "{e}");
    assert!(
        e.to_string().contains("src_buffer reads tile `src` at partition 0, element 16"),
        "{e}"
    );
}

#[test]
fn an_index_past_the_source_is_refused_naming_core_partition_and_value() {
    let mut nc = nc();
    let s = load(&mut nc, "src", Dtype::F32, &[32, 10], &[0.0; 320]);
    let mut idx = vec![0.0; 32];
    idx[16 + 3] = 7.0; // core 1, partition 19: 7 + 4 > 10
    let i = load(&mut nc, "idx", Dtype::U16, &[32, 1], &idx);
    let d = tile(&mut nc, "dst", Dtype::F32, &[32, 64]);
    let e = nc.local_gather(d, s, i, 4, None).unwrap_err();
    assert_eq!((e.instruction, e.kind.name()), ("local_gather", "invalid"), "{e}");
    let msg = e.to_string();
    for says in [
        "index 3 of GpSimd core 1",
        "partition 19",
        "is 7",
        "7 + num_elem_per_idx (4) = 11",
        "past the 10 elements",
        "nki.isa.local_gather",
    ] {
        assert!(msg.contains(says), "{msg:?} should say {says:?}");
    }
    // 6 + 4 = 10 fits exactly.
    let i = load(&mut nc, "idx_ok", Dtype::U16, &[32, 1], &[6.0; 32]);
    nc.local_gather(d, s, i, 4, None).unwrap();
}

#[test]
fn each_rule_is_refused_naming_the_operand_and_the_rule() {
    let mut nc = nc();
    let src = tile(&mut nc, "src", Dtype::F32, &[128, 64]);
    let idx = tile(&mut nc, "idx", Dtype::U16, &[128, 2]);
    let dst = tile(&mut nc, "dst", Dtype::F32, &[128, 64]);
    let idx_i32 = tile(&mut nc, "idx_i32", Dtype::I32, &[128, 2]);
    let idx_f32 = tile(&mut nc, "idx_f32", Dtype::F32, &[128, 2]);
    let dst_bf16 = tile(&mut nc, "dst_bf16", Dtype::Bf16, &[128, 64]);
    let big_idx = tile(&mut nc, "big_idx", Dtype::U16, &[16, 300]);
    let big_dst = tile(&mut nc, "big_dst", Dtype::F32, &[16, 4800]);
    let pp = nc.psum_pool("ps", 1);
    let ps = nc.tile_named(pp, "ps", Dtype::F32, &[128, 64]).unwrap();
    let ps_idx = nc.tile_named(pp, "ps_idx", Dtype::U16, &[128, 2]).unwrap();
    let page = "nki.isa.local_gather";
    let check = |r: SimResult<()>, name: &str, says: &[&str]| {
        let e = r.expect_err("refused");
        assert_eq!(e.instruction, "local_gather", "{e}");
        assert_eq!(e.kind.name(), name, "{e}");
        let msg = e.to_string();
        for s in says.iter().chain(&[page]) {
            assert!(msg.contains(s), "{msg:?} should say {s:?}");
        }
    };
    // SBUF only, each operand by name.
    check(nc.local_gather(dst, ps, idx, 2, None), "memory_not_allowed", &["src_buffer is in PSUM"]);
    check(nc.local_gather(dst, src, ps_idx, 2, None), "memory_not_allowed", &["index is in PSUM"]);
    check(nc.local_gather(ps, src, idx, 2, None), "memory_not_allowed", &["dst is in PSUM"]);
    // uint16 indices only.
    for (bad, dt) in [(idx_i32, "int32"), (idx_f32, "float32")] {
        check(
            nc.local_gather(dst, src, bad, 2, None),
            "dtype_not_allowed",
            &[&format!("{dt} for index"), "must be uint16"],
        );
    }
    // No cast.
    check(
        nc.local_gather(dst_bf16, src, idx, 2, None),
        "dtype_not_allowed",
        &["bfloat16 for dst", "same dtype"],
    );
    // Partitions a multiple of 16.
    let p8 = |t: Tile| t.view().parts(0..8);
    let parts8 = |t: Tile| t.view().parts(8..24);
    check(
        nc.local_gather(p8(dst), p8(src), p8(idx), 2, None),
        "shape_mismatch",
        &["src_buffer has 8 partitions", "multiple of 16"],
    );
    // Groups are the cores' own 16 partitions: a view from partition 8, which would span
    // two cores, is refused by the engines' start-partition rule.
    let e = nc.local_gather(parts8(dst), parts8(src), parts8(idx), 2, None).unwrap_err();
    assert_eq!(e.kind.name(), "bad_start_partition", "{e}");
    // The same partitions for index and dst.
    let parts = |t: Tile, a: u32, b: u32| t.view().parts(a..b);
    check(
        nc.local_gather(dst, src, parts(idx, 0, 64), 2, None),
        "shape_mismatch",
        &["index uses partitions 0..64 but src_buffer 0..128"],
    );
    check(
        nc.local_gather(parts(dst, 0, 16), parts(src, 0, 16), parts(idx, 32, 48), 2, None),
        "shape_mismatch",
        &["index uses partitions 32..48 but src_buffer 0..16", "same partitions"],
    );
    check(
        nc.local_gather(parts(dst, 32, 48), parts(src, 0, 16), parts(idx, 0, 16), 2, None),
        "shape_mismatch",
        &["dst uses partitions 32..48"],
    );
    // num_elem_per_idx in 1, 2, 4, 8, 16, 32.
    for e in [0, 3, 5, 64] {
        check(
            nc.local_gather(dst, src, idx, e, Some(1)),
            "invalid",
            &[&format!("num_elem_per_idx is {e}"), "1, 2, 4, 8, 16 or 32"],
        );
    }
    // num_valid_indices from 1 to 16 x the index's free elements.
    for nv in [0, 33] {
        check(
            nc.local_gather(dst, src, idx, 2, Some(nv)),
            "invalid",
            &[&format!("num_valid_indices is {nv}"), "holds 32 (16 partitions x 2 elements)"],
        );
    }
    // At most 4096 indices per core, given or by default.
    let p16 = |t: Tile| t.view().parts(0..16);
    check(
        nc.local_gather(big_dst.view().cols(0..4097), p16(src), big_idx, 1, Some(4097)),
        "invalid",
        &["num_valid_indices is 4097", "at most 4096"],
    );
    check(
        nc.local_gather(big_dst, p16(src), big_idx, 1, None),
        "invalid",
        &["gives each GpSimd core 4800 indices", "num_valid_indices not given", "at most 4096"],
    );
    nc.local_gather(big_dst.view().cols(0..4096), p16(src), big_idx, 1, Some(4096))
        .map_err(|e| assert_eq!(e.kind.name(), "unwritten_read", "past the rules: {e}"))
        .expect_err("the index is unwritten");
    // dst holds num_valid_indices x num_elem_per_idx per partition.
    check(
        nc.local_gather(dst, src, idx, 2, Some(31)),
        "shape_mismatch",
        &["dst has 64 elements per partition", "31 x 2 = 62"],
    );
}

#[test]
fn the_parameters_and_operands_hash_apart_and_timing_needs_no_values() {
    let hash = |k: usize| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let src = tile(&mut nc, "src", Dtype::F32, &[32, 64]);
        let idx = tile(&mut nc, "idx", Dtype::U16, &[32, 4]);
        let dst = tile(&mut nc, "dst", Dtype::F32, &[32, 64]);
        match k {
            0 => nc.local_gather(dst, src, idx, 1, None),
            1 => nc.local_gather(dst, src, idx, 2, Some(32)),
            2 => nc.local_gather(dst, src, idx, 4, Some(16)),
            3 => nc.local_gather(dst.view().cols(0..32), src, idx, 1, Some(32)),
            4 => nc.local_gather(dst.view().cols(0..32), src, idx.view().cols(0..2), 1, None),
            5 => nc.local_gather(dst, src.view().cols(0..32), idx, 1, None),
            6 => nc.tensor_copy(dst, src),
            _ => unreachable!(),
        }
        .unwrap();
        nc.program_hash()
    };
    let hashes: Vec<String> = (0..7).map(hash).collect();
    for i in 0..hashes.len() {
        for j in 0..i {
            assert_ne!(hashes[i], hashes[j], "programs {i} and {j}");
        }
    }
    let run = |mode: ExecMode| {
        let mut nc = Nc::new(Chip::trn2(), mode);
        let values = |v: Vec<f32>| if mode.functional { v } else { Vec::new() };
        let hs =
            nc.hbm_input("s", Dtype::Bf16, &[128, 256], &values(vec![1.0; 128 * 256])).unwrap();
        let hi = nc.hbm_input("i", Dtype::U16, &[128, 4], &values(vec![3.0; 512])).unwrap();
        let (s, i) = (
            tile(&mut nc, "s", Dtype::Bf16, &[128, 256]),
            tile(&mut nc, "i", Dtype::U16, &[128, 4]),
        );
        nc.dma(s, hs).unwrap();
        nc.dma(i, hi).unwrap();
        let d = tile(&mut nc, "d", Dtype::Bf16, &[128, 50 * 4]);
        nc.local_gather(d, s, i, 4, Some(50)).unwrap();
        let p = nc.profile();
        (p.total_time_us, p.program_hash)
    };
    assert_eq!(run(ExecMode::TIMING), run(ExecMode::BOTH));
}

#[test]
fn in_an_affine_loop_a_write_to_the_gathered_source_is_a_loop_carried_dependency() {
    let mut nc = nc();
    let src = load(&mut nc, "src", Dtype::F32, &[16, 8], &[1.0; 128]);
    let idx = load(&mut nc, "idx", Dtype::U16, &[16, 1], &[0.0; 16]);
    let out = tile(&mut nc, "out", Dtype::F32, &[16, 4 * 16]);
    // Each iteration gathers into its own columns of `out`: independent.
    nc.affine_range(0..4, |nc, k| {
        nc.local_gather(out.view().cols(k * 16..(k + 1) * 16), src, idx, 1, None)
    })
    .unwrap();
    // An iteration that gathers from the whole source, then writes a column of it, feeds
    // the next iteration's gather: which elements a gather reads depends on values, so any
    // write into its source is a dependency.
    let pool = nc.sbuf_pool("d", 1);
    let e = nc
        .affine_range(0..2, |nc, k| {
            let dst = nc.tile_named(pool, "d", Dtype::F32, &[16, 16])?;
            nc.local_gather(dst, src, idx, 1, None)?;
            nc.memset(src.view().cols(k..k + 1), 2.0)
        })
        .unwrap_err();
    assert_eq!((e.instruction, e.kind.name()), ("local_gather", "loop_carried_dependency"), "{e}");
}

/// The reference: each group of 16 partitions, its indices flattened partition first, the
/// first `nv` of them, `e` elements from each, the same partition in and out.
fn reference(
    src: &[f32],
    f: usize,
    idx: &[f32],
    fi: usize,
    np: usize,
    e: usize,
    nv: usize,
) -> Vec<f32> {
    let mut out = vec![0.0; np * nv * e];
    for g in 0..np / 16 {
        let indices: Vec<usize> =
            (0..16 * fi).map(|k| idx[(g * 16 + k % 16) * fi + k / 16] as usize).take(nv).collect();
        for p in g * 16..(g + 1) * 16 {
            for (k, &i) in indices.iter().enumerate() {
                for j in 0..e {
                    out[p * nv * e + k * e + j] = src[p * f + i + j];
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn local_gather_matches_the_reference(
        groups in 1usize..=4,
        fi in 1usize..=4,
        e_log in 0u32..=5,
        extra in 0usize..40,
        valid_frac in 0.0f64..=1.0,
        default_valid in any::<bool>(),
        dt_pick in 0usize..4,
        seed in any::<u64>(),
    ) {
        let (np, e) = (groups * 16, 1usize << e_log);
        let f = e + extra;
        let nv = if default_valid { 16 * fi } else { 1 + ((16 * fi - 1) as f64 * valid_frac) as usize };
        let dt = [Dtype::F32, Dtype::Bf16, Dtype::U16, Dtype::I8][dt_pick];
        let mut s = seed | 1;
        let mut next = |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        };
        // Small integers: exact in every dtype drawn.
        let src: Vec<f32> = (0..np * f).map(|_| next(100) as f32).collect();
        let idx: Vec<f32> = (0..np * fi).map(|_| next((f - e + 1) as u64) as f32).collect();
        let mut nc = nc();
        let st = load(&mut nc, "src", dt, &[np as u64, f as u64], &src);
        let it = load(&mut nc, "idx", Dtype::U16, &[np as u64, fi as u64], &idx);
        let d = tile(&mut nc, "dst", dt, &[np as u64, (nv * e) as u64]);
        let given = (!default_valid).then_some(nv as u64);
        nc.local_gather(d, st, it, e as u64, given).unwrap();
        prop_assert_eq!(read(&mut nc, d), reference(&src, f, &idx, fi, np, e, nv));
    }
}
