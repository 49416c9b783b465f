//! VectorE's selection instructions (sim/src/nc/select.rs): what they compute, against
//! values worked out by hand or by a naive reference written here, the shape rules they
//! refuse, and their program hash (nki.isa pages; neuroncore.md §2.3).

use neuron_sim::{
    Chip, Dtype, ExecMode, Nc, Tile, TileView, INDEX_NOT_FOUND_U16, INDEX_NOT_FOUND_U32,
};
use proptest::prelude::*;

const NEG_INF: f32 = f32::NEG_INFINITY;

mod common;
use common::{load, nc, read, tile};

/// The reference top k of a row: positions ordered by value, largest first, the earlier of
/// equal values first (NaN never taken).
fn top_k(row: &[f32], k: usize) -> Vec<(f32, usize)> {
    let mut order: Vec<usize> = (0..row.len()).filter(|&j| !row[j].is_nan()).collect();
    order.sort_by(|&i, &j| row[j].partial_cmp(&row[i]).unwrap().then(i.cmp(&j)));
    order.into_iter().take(k).map(|j| (row[j], j)).collect()
}

#[test]
fn max8_gives_the_8_largest_descending_with_ties_and_minus_inf() {
    // Two partitions of 12, worked by hand: ties keep both places; -inf is an ordinary
    // (smallest) value; a NaN is passed over (assumed: the simulator's max drops NaN).
    #[rustfmt::skip]
    let x = [
        3.0, 9.0, -1.0, 9.0, 0.5, NEG_INF, 7.0, 2.0, 7.0, 7.0, -4.0, 1.0,
        f32::NAN, 1.0, NEG_INF, 2.0, NEG_INF, 0.0, -0.5, 3.0, -2.0, NEG_INF, -3.0, 5.0,
    ];
    let mut nc = nc();
    let src = load(&mut nc, "src", Dtype::F32, &[2, 12], &x);
    let dst = tile(&mut nc, "dst", Dtype::F32, &[2, 8]);
    nc.max8(dst, src).unwrap();
    #[rustfmt::skip]
    let want = [
        9.0, 9.0, 7.0, 7.0, 7.0, 3.0, 2.0, 1.0,
        5.0, 3.0, 2.0, 1.0, 0.0, -0.5, -2.0, -3.0,
    ];
    assert_eq!(read(&mut nc, dst), want);
}

#[test]
fn max8_reads_every_free_dim_and_rounds_to_dst() {
    // A [1, 2, 6] source is one row of 12; a bf16 dst rounds the fp32 values on write
    // (1 + 2^-10 rounds to 1 in bf16's 8-bit significand).
    let x: Vec<f32> = (0..12).map(|i| i as f32 + 1.0 / 1024.0).collect();
    let mut nc = nc();
    let src = load(&mut nc, "src", Dtype::F32, &[1, 2, 6], &x);
    let dst = tile(&mut nc, "dst", Dtype::Bf16, &[1, 8]);
    nc.max8(dst, src).unwrap();
    assert_eq!(read(&mut nc, dst), [11.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
}

#[test]
fn find_index8_gives_first_occurrences_and_successive_ones_for_repeats() {
    // nki.isa.nc_find_index8: the first occurrence of each value; a value repeated in vals
    // takes successive occurrences in ascending order (SDK 2.32 page); a value absent, NaN
    // included, gives the all-ones sentinel of the index dtype: 0xFFFF for uint16, and for
    // uint32 0xFFFFFFFF as an f32 holds it, 2^32 (the uint32 conversion's saturated maximum).
    #[rustfmt::skip]
    let data = [
        1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 0.0,
        5.0, NEG_INF, 5.0, 6.0, 7.0, f32::NAN, 9.0, 9.0, 1.0, 2.0, 3.0, 4.0,
    ];
    #[rustfmt::skip]
    let vals = [
        3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0,
        9.0, 5.0, NEG_INF, 5.0, 4.0, f32::NAN, 42.0, 5.0,
    ];
    assert_eq!(INDEX_NOT_FOUND_U32, 4_294_967_296.0);
    assert_eq!(INDEX_NOT_FOUND_U16, 65_535.0);
    for (dt, nf) in [(Dtype::U32, INDEX_NOT_FOUND_U32), (Dtype::U16, INDEX_NOT_FOUND_U16)] {
        // The sentinel is what a write of all ones into the dtype stores (neuroncore.md §2.2).
        assert_eq!(dt.round(nf), nf, "{dt}");
        assert_eq!(dt.round(u32::MAX as f32), dt.int_range().unwrap().1, "{dt}");
        let mut nc = nc();
        let d = load(&mut nc, "data", Dtype::F32, &[2, 12], &data);
        let v = load(&mut nc, "vals", Dtype::F32, &[2, 8], &vals);
        let idx = tile(&mut nc, "idx", dt, &[2, 8]);
        nc.find_index8(idx, d, v).unwrap();
        #[rustfmt::skip]
        let want = [
            2.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
            6.0, 0.0, 1.0, 2.0, 11.0, nf, nf, nf,
        ];
        assert_eq!(read(&mut nc, idx), want, "{dt}");
    }
}

#[test]
fn match_replace8_replaces_first_occurrences_and_pairs_repeats_from_the_last_column() {
    // nki.isa.nc_match_replace8 (SDK 2.32 page's example): data [1, 2, 3, 4, 8 x 7],
    // vals [3, 8 x 7]: positions 2 and 4..=10 replaced, dst_idx [2, 10, 9, ..., 4]. Second
    // partition: the first 5 of three 5s and the first 1 replaced by the immediate, a value
    // absent replaces nothing (index: find_index8's all-ones sentinel, assumed), other
    // elements unchanged.
    #[rustfmt::skip]
    let data = [
        1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0,
        5.0, 1.0, 5.0, 5.0, 2.0, 1.0, 7.0, 6.0, 3.0, 4.0, 0.0,
    ];
    #[rustfmt::skip]
    let vals = [
        3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0,
        5.0, 1.0, 7.0, 6.0, 3.0, 4.0, 2.0, 99.0,
    ];
    let mut nc = nc();
    let d = load(&mut nc, "data", Dtype::F32, &[2, 11], &data);
    let v = load(&mut nc, "vals", Dtype::F32, &[2, 8], &vals);
    let out = tile(&mut nc, "out", Dtype::F32, &[2, 11]);
    let idx = tile(&mut nc, "idx", Dtype::U32, &[2, 8]);
    nc.match_replace8(out, d, v, NEG_INF, Some(idx.view())).unwrap();
    let m = NEG_INF;
    #[rustfmt::skip]
    let want = [
        1.0, 2.0, m, 4.0, m, m, m, m, m, m, m,
        m, m, 5.0, 5.0, m, 1.0, m, m, m, m, 0.0,
    ];
    assert_eq!(read(&mut nc, out), want);
    #[rustfmt::skip]
    let want_idx = [
        2.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0,
        0.0, 1.0, 6.0, 7.0, 8.0, 9.0, 4.0, INDEX_NOT_FOUND_U32,
    ];
    assert_eq!(read(&mut nc, idx), want_idx);
}

#[test]
fn match_replace8_works_in_place_without_dst_idx() {
    let data = [4.0, 4.0, 3.0, 9.0, 1.0, 2.0, 5.0, 6.0, 7.0, 8.0];
    let vals = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 4.0, 3.0];
    let mut nc = nc();
    let d = load(&mut nc, "data", Dtype::F32, &[1, 10], &data);
    let v = load(&mut nc, "vals", Dtype::F32, &[1, 8], &vals);
    nc.match_replace8(d, d, v, -7.5, None).unwrap();
    let r = -7.5;
    assert_eq!(read(&mut nc, d), [r, r, r, r, 1.0, 2.0, r, r, r, r]);
}

#[test]
fn a_top_16_loop_gives_the_16_largest_values_and_their_positions() {
    // max8 → find_index8 → match_replace8(-inf) → max8 → find_index8: the top 16 of each
    // row, ties included (values from a small set, so ties straddle the 8th place).
    let (p, n) = (4usize, 200usize);
    let x: Vec<f32> = (0..p * n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 24) as f32 / 8.0 - 10.0)
        .collect();
    let mut nc = nc();
    let src = load(&mut nc, "src", Dtype::F32, &[p as u64, n as u64], &x);
    let rest = tile(&mut nc, "rest", Dtype::F32, &[p as u64, n as u64]);
    let (mut vals, mut idxs) = (Vec::new(), Vec::new());
    for round in 0..2 {
        let data = if round == 0 { src } else { rest };
        let v = tile(&mut nc, &format!("v{round}"), Dtype::F32, &[p as u64, 8]);
        let i = tile(&mut nc, &format!("i{round}"), Dtype::U32, &[p as u64, 8]);
        nc.max8(v, data).unwrap();
        nc.find_index8(i, data, v).unwrap();
        if round == 0 {
            nc.match_replace8(rest, src, v, NEG_INF, None).unwrap();
        }
        vals.push(read(&mut nc, v));
        idxs.push(read(&mut nc, i));
    }
    for (q, row) in x.chunks(n).enumerate() {
        let got: Vec<(f32, usize)> = (0..16)
            .map(|k| (vals[k / 8][q * 8 + k % 8], idxs[k / 8][q * 8 + k % 8] as usize))
            .collect();
        assert_eq!(got, top_k(row, 16), "partition {q}");
    }
}

#[test]
fn shape_rules_name_the_operand_and_the_rule() {
    let mut nc = nc();
    let x = tile(&mut nc, "x", Dtype::F32, &[128, 16_385]);
    let eight = tile(&mut nc, "eight", Dtype::F32, &[128, 8]);
    let idx = tile(&mut nc, "idx", Dtype::U32, &[128, 8]);
    let idx_i32 = tile(&mut nc, "idx_i32", Dtype::I32, &[128, 8]);
    let idx_u8 = tile(&mut nc, "idx_u8", Dtype::U8, &[128, 8]);
    nc.memset(x, 1.0).unwrap();
    nc.memset(eight, 1.0).unwrap();
    let check = |r: neuron_sim::SimResult<()>, instruction: &str, name: &str, says: &[&str]| {
        let e = r.expect_err("refused");
        assert_eq!(e.instruction, instruction, "{e}");
        assert_eq!(e.kind.name(), name, "{e}");
        let msg = e.to_string();
        for s in says {
            assert!(msg.contains(s), "{msg:?} should say {s:?}");
        }
    };
    let range = ["8 to 16384", "neuroncore.md §2.3"];
    // N < 8 and N > 16,384.
    let seven = x.view().cols(0..7);
    check(
        nc.max8(eight, seven),
        "max8",
        "free_size_out_of_range",
        &[&["src has 7"], &range[..]].concat(),
    );
    check(
        nc.max8(eight, x),
        "max8",
        "free_size_out_of_range",
        &[&["src has 16385"], &range[..]].concat(),
    );
    check(
        nc.find_index8(idx, seven, eight),
        "nc_find_index8",
        "free_size_out_of_range",
        &["data has 7", "8 to 16384"],
    );
    check(
        nc.match_replace8(x, x, eight, 0.0, None),
        "nc_match_replace8",
        "free_size_out_of_range",
        &["data has 16385", "1 to 16384"],
    );
    // Wrong [P, 8] shapes.
    let x100 = x.view().cols(0..100);
    check(
        nc.max8(eight.view().cols(0..7), x100),
        "max8",
        "shape_mismatch",
        &["dst must be [128 x 8]"],
    );
    check(
        nc.max8(eight.view().parts(0..64), x100),
        "max8",
        "shape_mismatch",
        &["dst must be [128 x 8]", "is [64 x [8]]"],
    );
    check(
        nc.find_index8(idx, x100, eight.view().cols(0..4)),
        "nc_find_index8",
        "shape_mismatch",
        &["vals must be [128 x 8]"],
    );
    check(
        nc.match_replace8(x100, x100, eight, 0.0, Some(idx.view().cols(0..6))),
        "nc_match_replace8",
        "shape_mismatch",
        &["dst_idx must be [128 x 8]"],
    );
    check(
        nc.match_replace8(x.view().cols(0..99), x100, eight, 0.0, None),
        "nc_match_replace8",
        "shape_mismatch",
        &["dst is [128 x [99]] but data is [128 x [100]]"],
    );
    // Indices are uint32 or uint16 (nki.isa.nc_find_index8): not a float, not int32 (the
    // simulator's stand-in before it had unsigned dtypes), not uint8.
    let index_rule = ["uint32 or uint16", "nki.isa.nc_find_index8", "neuroncore.md §2.3"];
    for (bad, dtype) in [(eight, "float32"), (idx_i32, "int32"), (idx_u8, "uint8")] {
        check(
            nc.find_index8(bad, x100, eight),
            "nc_find_index8",
            "dtype_not_allowed",
            &[&[&format!("{dtype} for dst:") as &str], &index_rule[..]].concat(),
        );
        check(
            nc.match_replace8(x100, x100, eight, 0.0, Some(bad.view())),
            "nc_match_replace8",
            "dtype_not_allowed",
            &[&[&format!("{dtype} for dst_idx:") as &str], &index_rule[..]].concat(),
        );
    }
    check(
        nc.match_replace8(x100, x100, eight, 0.0, Some(eight.view())),
        "nc_match_replace8",
        "dtype_not_allowed",
        &["dst_idx", "float32"],
    );
}

#[test]
fn each_selection_and_its_immediates_hash_apart() {
    use neuron_sim::{Alu, Cmp};
    let hash = |k: usize| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let p = nc.sbuf_pool("p", 1);
        let a = nc.tile_named(p, "a", Dtype::F32, &[128, 8]).unwrap();
        let b = nc.tile_named(p, "b", Dtype::F32, &[128, 8]).unwrap();
        // uint16: an index dtype and a predicate dtype of both predicated instructions.
        let i = nc.tile_named(p, "i", Dtype::U16, &[128, 8]).unwrap();
        let r = nc.tile_named(p, "r", Dtype::F32, &[128, 1]).unwrap();
        let iv: TileView = i.into();
        match k {
            0 => nc.max8(a, b),
            1 => nc.tensor_copy(a, b),
            2 => nc.find_index8(i, a, b),
            3 => nc.match_replace8(a, a, b, NEG_INF, None),
            4 => nc.match_replace8(a, a, b, 0.0, None),
            5 => nc.match_replace8(a, a, b, NEG_INF, Some(iv)),
            6 => nc.match_replace8(a, b, a, NEG_INF, None),
            7 => nc.tensor_copy_predicated(a, b, i, false),
            8 => nc.select_reduce(a, i, b, 0.0, false, None),
            9 => nc.select_reduce(a, i, b, 0.0, true, None),
            10 => nc.select_reduce(a, i, b, 1.0, false, None),
            11 => nc.select_reduce(a, i, b, r, false, None),
            12 => nc.select_reduce(a, i, b, 0.0, false, Some((Alu::Max, r.view()))),
            13 => nc.range_select(a, b, [(Cmp::Ge, r.view()), (Cmp::Lt, r.view())], 0, None),
            14 => nc.range_select(a, b, [(Cmp::Gt, r.view()), (Cmp::Lt, r.view())], 0, None),
            15 => nc.range_select(a, b, [(Cmp::Ge, r.view()), (Cmp::Lt, r.view())], 3, None),
            16 => {
                let red = Some((Alu::Max, r.view()));
                nc.range_select(a, b, [(Cmp::Ge, r.view()), (Cmp::Lt, r.view())], 0, red)
            }
            // A scalar src: its value, its kind (float or int) and reverse_pred.
            17 => nc.tensor_copy_predicated(a, 1.0, i, false),
            18 => nc.tensor_copy_predicated(a, 2.0, i, false),
            19 => nc.tensor_copy_predicated(a, 1.0, i, true),
            20 => nc.tensor_copy_predicated(i, 1, i, false),
            21 => nc.tensor_copy_predicated(i, 1, i, true),
            22 => nc.tensor_copy_predicated(i, 2, i, false),
            _ => unreachable!(),
        }
        .unwrap();
        nc.program_hash()
    };
    let hashes: Vec<String> = (0..23).map(hash).collect();
    for i in 0..hashes.len() {
        for j in 0..i {
            assert_ne!(hashes[i], hashes[j], "programs {i} and {j}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// max8 is the sorted-descending top 8 of each row; find_index8 of that output gives 8
    /// distinct positions holding exactly those values.
    #[test]
    fn max8_is_the_sorted_top_8_and_find_index8_locates_it(
        p in 1usize..5,
        n in 8usize..300,
        seed in any::<u64>(),
        levels in 2u32..40,
    ) {
        let mut s = seed | 1;
        let x: Vec<f32> = (0..p * n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 50 {
                    0 => NEG_INF,
                    _ => ((s >> 8) % levels as u64) as f32 * 0.25 - 3.0,
                }
            })
            .collect();
        let mut nc = nc();
        let src = load(&mut nc, "src", Dtype::F32, &[p as u64, n as u64], &x);
        let v = tile(&mut nc, "v", Dtype::F32, &[p as u64, 8]);
        let i = tile(&mut nc, "i", Dtype::U32, &[p as u64, 8]);
        nc.max8(v, src).unwrap();
        nc.find_index8(i, src, v).unwrap();
        let (vals, idx) = (read(&mut nc, v), read(&mut nc, i));
        for (q, row) in x.chunks(n).enumerate() {
            let mut sorted = row.to_vec();
            sorted.sort_by(|a, b| b.partial_cmp(a).unwrap());
            prop_assert_eq!(&vals[q * 8..q * 8 + 8], &sorted[..8], "partition {}", q);
            let at: Vec<usize> = idx[q * 8..q * 8 + 8].iter().map(|&j| j as usize).collect();
            for (k, &j) in at.iter().enumerate() {
                prop_assert!(j < n, "index {} of partition {}", j, q);
                prop_assert_eq!(row[j], vals[q * 8 + k]);
                prop_assert!(!at[..k].contains(&j), "position {} twice", j);
            }
        }
    }
}

#[test]
fn tensor_copy_predicated_copies_where_the_predicate_is_nonzero() {
    // nki.isa.tensor_copy_predicated: where the predicate is true (nonzero: 1, 255, 7), dst
    // takes src; elsewhere dst is unmodified. A predicate from PSUM works the same.
    let src: Vec<f32> = (0..12).map(|i| i as f32 + 0.5).collect();
    let pred = [1.0, 0.0, 255.0, 0.0, 7.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0];
    for pred_in_psum in [false, true] {
        let mut nc = nc();
        let s = load(&mut nc, "src", Dtype::F32, &[2, 6], &src);
        let mut p = load(&mut nc, "pred", Dtype::U8, &[2, 6], &pred);
        if pred_in_psum {
            let ps = nc.psum_pool("ps", 1);
            let q = nc.tile_named(ps, "pred_psum", Dtype::U8, &[2, 6]).unwrap();
            nc.tensor_copy(q, p).unwrap();
            p = q;
        }
        let d = tile(&mut nc, "dst", Dtype::F32, &[2, 6]);
        nc.memset(d, -9.0).unwrap();
        nc.tensor_copy_predicated(d, s, p, false).unwrap();
        let k = -9.0;
        let want = [0.5, k, 2.5, k, 4.5, 5.5, k, k, 8.5, k, 10.5, k];
        assert_eq!(read(&mut nc, d), want, "predicate in PSUM: {pred_in_psum}");
    }
}

#[test]
fn tensor_copy_predicated_writes_nothing_where_the_predicate_is_false() {
    // The elements not copied stay unwritten: reading them is the usual unwritten read.
    let mut nc = nc();
    let s = load(&mut nc, "src", Dtype::F32, &[1, 8], &[1.0; 8]);
    let p = load(&mut nc, "pred", Dtype::U32, &[1, 8], &[1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
    let d = tile(&mut nc, "dst", Dtype::F32, &[1, 8]);
    nc.tensor_copy_predicated(d, s, p, false).unwrap();
    let h = nc.hbm("h", Dtype::F32, &[1, 8]).unwrap();
    let e = nc.dma(h, d).expect_err("element 3 was never written");
    assert_eq!(e.kind.name(), "unwritten_read", "{e}");
    assert!(e.to_string().contains("element 3"), "{e}");
    let h3 = nc.hbm("h3", Dtype::F32, &[1, 3]).unwrap();
    nc.dma(h3, d.cols(0..3)).unwrap();
    assert_eq!(nc.read_hbm(h3).unwrap(), [1.0; 3]);
}

#[test]
fn tensor_copy_predicated_rules_name_the_operand_and_the_rule() {
    let mut nc = nc();
    let ps = nc.psum_pool("ps", 1);
    let src_ps = nc.tile_named(ps, "src_ps", Dtype::F32, &[128, 64]).unwrap();
    let pred_ps = nc.tile_named(ps, "pred_ps", Dtype::U8, &[128, 64]).unwrap();
    let src = tile(&mut nc, "src", Dtype::F32, &[128, 64]);
    let pred = tile(&mut nc, "pred", Dtype::U16, &[128, 64]);
    let dst = tile(&mut nc, "dst", Dtype::F32, &[128, 64]);
    let dst16 = tile(&mut nc, "dst16", Dtype::Bf16, &[128, 64]);
    let e = nc.tensor_copy_predicated(dst, src_ps, pred_ps, false).unwrap_err();
    assert_eq!(e.kind.name(), "memory_not_allowed", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("predicate is in PSUM") && msg.contains("cannot both be in PSUM"),
        "{msg}"
    );
    // The predicate is uint8, uint16 or uint32, in every NKI version's page (2.26 to 2.33):
    // not int32 (the simulator's stand-in before it had unsigned dtypes), a float or int8.
    for (dt, name) in [(Dtype::F32, "float32"), (Dtype::I32, "int32"), (Dtype::I8, "int8")] {
        let bad = tile(&mut nc, &format!("pred_{name}"), dt, &[128, 64]);
        let e = nc.tensor_copy_predicated(dst, src, bad, false).unwrap_err();
        assert_eq!(e.kind.name(), "dtype_not_allowed", "{e}");
        let msg = e.to_string();
        for want in [
            &format!("{name} for predicate:") as &str,
            "uint8, uint16 or uint32",
            "nki.isa.tensor_copy_predicated",
            "neuroncore.md §2.3",
        ] {
            assert!(msg.contains(want), "{msg} should say {want:?}");
        }
    }
    for dt in [Dtype::U8, Dtype::U32] {
        let ok = tile(&mut nc, &format!("pred_ok_{dt}"), dt, &[128, 64]);
        nc.memset(ok, 1.0).unwrap();
        nc.memset(src, 2.0).unwrap();
        nc.tensor_copy_predicated(dst, src, ok, false).unwrap();
    }
    let e = nc.tensor_copy_predicated(dst16, src, pred, false).unwrap_err();
    assert_eq!(e.kind.name(), "dtype_not_allowed", "{e}");
    assert!(e.to_string().contains("dst") && e.to_string().contains("same data type"), "{e}");
    let e = nc.tensor_copy_predicated(dst, src, pred.cols(0..32), false).unwrap_err();
    assert_eq!(e.kind.name(), "shape_mismatch", "{e}");
    assert!(e.to_string().contains("predicate is [128 x [32]]"), "{e}");
}

#[test]
fn range_select_keeps_the_elements_whose_index_is_in_bounds() {
    // nki.isa.range_select: i = range_start + free index (range_start = 2, 10 elements);
    // keep where i cmp0 bound0 and i cmp1 bound1, else FP32_MIN; reduce_res the max of the
    // result. Bounds by partition: [4, 8], [9, 11], [100, 100] (the last keeps nothing, its
    // max is FP32_MIN). Worked by hand, the kept free indices j for each operator pair:
    use neuron_sim::{Alu, Cmp};
    type Kept = [std::ops::Range<usize>; 3];
    let cases: [((Cmp, Cmp), Kept); 3] = [
        ((Cmp::Ge, Cmp::Lt), [2..6, 7..9, 0..0]), // 4 <= i < 8, 9 <= i < 11
        ((Cmp::Gt, Cmp::Le), [3..7, 8..10, 0..0]), // 4 < i <= 8, 9 < i <= 11
        ((Cmp::Eq, Cmp::Le), [2..3, 7..8, 0..0]), // i == 4, i == 9
    ];
    let x: Vec<f32> = (0..30).map(|k| (k % 10) as f32 * 1.5 - 3.0 + (k / 10) as f32).collect();
    for ((c0, c1), kept) in cases {
        let mut nc = nc();
        let on_true = load(&mut nc, "x", Dtype::F32, &[3, 10], &x);
        let lo = load(&mut nc, "lo", Dtype::F32, &[3, 1], &[4.0, 9.0, 100.0]);
        let hi = load(&mut nc, "hi", Dtype::F32, &[3, 1], &[8.0, 11.0, 100.0]);
        let d = tile(&mut nc, "d", Dtype::F32, &[3, 10]);
        let d16 = tile(&mut nc, "d16", Dtype::Bf16, &[3, 10]);
        let r = tile(&mut nc, "r", Dtype::F32, &[3, 1]);
        let b = [(c0, lo.view()), (c1, hi.view())];
        nc.range_select(d, on_true, b, 2, Some((Alu::Max, r.view()))).unwrap();
        nc.range_select(d16, on_true, b, 2, None).unwrap();
        let (out, out16, red) = (read(&mut nc, d), read(&mut nc, d16), read(&mut nc, r));
        for q in 0..3 {
            let mut max = f32::MIN;
            for j in 0..10 {
                let v = x[q * 10 + j];
                // FP32_MIN rounds to -inf in a 16-bit dst (the page's numerical note).
                let (want, want16) =
                    if kept[q].contains(&j) { (v, v) } else { (f32::MIN, NEG_INF) };
                assert_eq!(out[q * 10 + j], want, "{c0:?} {c1:?} [{q}, {j}]");
                assert_eq!(out16[q * 10 + j], want16, "bf16 {c0:?} {c1:?} [{q}, {j}]");
                if kept[q].contains(&j) {
                    max = max.max(v);
                }
            }
            assert_eq!(red[q], max, "{c0:?} {c1:?} max of partition {q}");
        }
    }
}

#[test]
fn range_select_is_refused_before_neuroncore_v3_naming_the_chip() {
    use neuron_sim::Cmp;
    let mut inf2 = Chip::trn1();
    inf2.name = "inf2".into();
    for chip in [Chip::trn1(), inf2] {
        let name = chip.name.clone();
        let mut nc = Nc::new(chip, ExecMode::FUNCTIONAL);
        let x = tile(&mut nc, "x", Dtype::F32, &[128, 64]);
        let b = tile(&mut nc, "b", Dtype::F32, &[128, 1]);
        let e = nc.range_select(x, x, [(Cmp::Ge, b.view()), (Cmp::Le, b.view())], 0, None);
        let e = e.unwrap_err();
        assert_eq!(e.instruction, "range_select");
        let msg = e.to_string();
        assert!(msg.contains(&format!("{name} is NeuronCore-v2")), "{msg}");
        assert!(msg.contains("NeuronCore-v3+"), "{msg}");
    }
}

#[test]
fn select_reduce_picks_on_true_or_on_false_by_predicate_and_takes_the_max() {
    // nki.isa.select_reduce: np.where(predicate, on_true, on_false), the predicate negated
    // with reverse_pred; on_false an immediate or a [P, 1] column; reduce_res the row max.
    use neuron_sim::Alu;
    let x = [1.0, -2.0, 3.0, 7.0, -5.0, 6.0, 0.5, -1.5, 2.5, -8.0, 4.0, -0.5];
    let pred = [1.0, 0.0, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
    let mut nc = nc();
    let on_true = load(&mut nc, "x", Dtype::F32, &[2, 6], &x);
    let p = load(&mut nc, "p", Dtype::I8, &[2, 6], &pred);
    let col = load(&mut nc, "col", Dtype::F32, &[2, 1], &[-10.0, 20.0]);
    let (d0, d1) =
        (tile(&mut nc, "d0", Dtype::F32, &[2, 6]), tile(&mut nc, "d1", Dtype::F32, &[2, 6]));
    let (r0, r1) =
        (tile(&mut nc, "r0", Dtype::F32, &[2, 1]), tile(&mut nc, "r1", Dtype::F32, &[2, 1]));
    nc.select_reduce(d0, p, on_true, NEG_INF, false, Some((Alu::Max, r0.view()))).unwrap();
    nc.select_reduce(d1, p, on_true, col, true, Some((Alu::Max, r1.view()))).unwrap();
    let m = NEG_INF;
    assert_eq!(read(&mut nc, d0), [1.0, m, 3.0, m, -5.0, 6.0, m, m, 2.5, m, m, m]);
    assert_eq!(read(&mut nc, r0), [6.0, 2.5]);
    #[rustfmt::skip]
    let want1 = [-10.0, -2.0, -10.0, 7.0, -10.0, -10.0, 0.5, -1.5, 20.0, -8.0, 4.0, -0.5];
    assert_eq!(read(&mut nc, d1), want1);
    assert_eq!(read(&mut nc, r1), [7.0, 20.0]);
}

#[test]
fn range_select_and_select_reduce_rules_name_the_operand_and_the_rule() {
    use neuron_sim::{Alu, Cmp};
    let mut nc = nc();
    let x = tile(&mut nc, "x", Dtype::F32, &[128, 64]);
    let xi = tile(&mut nc, "xi", Dtype::I32, &[128, 64]);
    let b = tile(&mut nc, "b", Dtype::F32, &[128, 1]);
    let b16 = tile(&mut nc, "b16", Dtype::Bf16, &[128, 1]);
    let ri = tile(&mut nc, "ri", Dtype::I32, &[128, 1]);
    let ps = nc.psum_pool("ps", 1);
    let x_ps = nc.tile_named(ps, "x_ps", Dtype::F32, &[128, 64]).unwrap();
    let p_ps = nc.tile_named(ps, "p_ps", Dtype::U8, &[128, 64]).unwrap();
    let pu8 = tile(&mut nc, "pu8", Dtype::U8, &[128, 64]);
    let bounds = |b0: Tile| [(Cmp::Ge, b0.view()), (Cmp::Lt, b.view())];
    let says = |e: neuron_sim::SimError, name: &str, words: &[&str]| {
        assert_eq!(e.kind.name(), name, "{e}");
        for w in words {
            assert!(e.to_string().contains(w), "{e} should say {w:?}");
        }
    };
    let max_only = ["reduce with max only", "neuroncore.md §2.3"];
    says(
        nc.range_select(x, x, bounds(b), 0, Some((Alu::Add, b.view()))).unwrap_err(),
        "reduce_op_not_allowed",
        &max_only,
    );
    says(
        nc.select_reduce(x, pu8, x, 0.0, false, Some((Alu::Min, b.view()))).unwrap_err(),
        "reduce_op_not_allowed",
        &max_only,
    );
    says(
        nc.range_select(x, x, bounds(b16), 0, None).unwrap_err(),
        "dtype_not_allowed",
        &["bound0", "fp32"],
    );
    says(
        nc.range_select(xi, xi, bounds(b), 0, None).unwrap_err(),
        "dtype_not_allowed",
        &["on_true"],
    );
    says(
        nc.range_select(x, x, [(Cmp::Ge, b.view()), (Cmp::Lt, x.cols(0..2))], 0, None).unwrap_err(),
        "shape_mismatch",
        &["bound1 must be [128 x 1]"],
    );
    says(nc.range_select(x, x, bounds(b), (1 << 24) - 10, None).unwrap_err(), "invalid", &["2^24"]);
    says(
        nc.select_reduce(x, p_ps, x_ps, 0.0, false, None).unwrap_err(),
        "memory_not_allowed",
        &["predicate is in PSUM", "cannot both be in PSUM"],
    );
    // The predicate is int8, uint8, int16 or uint16 (nki.isa.select_reduce): not a float,
    // not int32 (the simulator's stand-in before it had them), not uint32.
    let xu32 = tile(&mut nc, "xu32", Dtype::U32, &[128, 64]);
    let pred_rule = ["int8, uint8, int16 or uint16", "nki.isa.select_reduce", "neuroncore.md §2.3"];
    for (bad, dtype) in [
        (x, "float32 for predicate:"),
        (xi, "int32 for predicate:"),
        (xu32, "uint32 for predicate:"),
    ] {
        says(
            nc.select_reduce(x, bad, x, 0.0, false, None).unwrap_err(),
            "dtype_not_allowed",
            &[&[dtype], &pred_rule[..]].concat(),
        );
    }
    // on_true: any dtype but int32 and uint32 (and tfloat32).
    for (bad, dtype) in [(xi, "int32 for on_true:"), (xu32, "uint32 for on_true:")] {
        says(
            nc.select_reduce(x, pu8, bad, 0.0, false, None).unwrap_err(),
            "dtype_not_allowed",
            &[dtype, "int32, uint32 and tfloat32", "nki.isa.select_reduce"],
        );
    }
    says(
        nc.select_reduce(x, pu8, x, 0.0, false, Some((Alu::Max, ri.view()))).unwrap_err(),
        "dtype_not_allowed",
        &["reduce_res", "float type"],
    );
    says(
        nc.select_reduce(x, pu8, x, x.cols(0..2), false, None).unwrap_err(),
        "shape_mismatch",
        &["on_false must be [128 x 1]"],
    );
}

#[test]
fn select_reduce_takes_the_8_and_16_bit_integers_as_on_true() {
    // nki.isa.select_reduce excludes only int32, uint32 and tfloat32 from on_true: an int16
    // or uint8 on_true selects as a float one does (dst of the same dtype, on_false rounded
    // there on write).
    for (dt, on_false, want_false) in [(Dtype::I16, -7.0, -7.0), (Dtype::U8, -7.0, 0.0)] {
        let mut nc = nc();
        let x = load(&mut nc, "x", dt, &[1, 4], &[1.0, 2.0, 3.0, 4.0]);
        let p = load(&mut nc, "p", Dtype::U8, &[1, 4], &[1.0, 0.0, 0.0, 1.0]);
        let d = tile(&mut nc, "d", dt, &[1, 4]);
        nc.select_reduce(d, p, x, on_false, false, None).unwrap();
        assert_eq!(read(&mut nc, d), [1.0, want_false, want_false, 4.0], "{dt}");
    }
}

#[test]
fn range_select_refuses_any_range_start_beyond_2_pow_24_without_panicking() {
    // i64::MIN has no absolute value in i64: the ±2^24 check must not overflow on it.
    use neuron_sim::Cmp;
    let mut nc = nc();
    let x = tile(&mut nc, "x", Dtype::F32, &[128, 64]);
    let b = tile(&mut nc, "b", Dtype::F32, &[128, 1]);
    for start in [i64::MIN, i64::MIN + 1, -(1 << 24) - 1, (1 << 24) - 62, i64::MAX] {
        let bounds = [(Cmp::Ge, b.view()), (Cmp::Le, b.view())];
        let e = nc.range_select(x, x, bounds, start, None).unwrap_err();
        assert_eq!(e.kind.name(), "invalid", "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("range_start {start}")) && msg.contains("2^24"), "{msg}");
    }
}

#[test]
fn the_top_k_steps_keep_the_psum_free_size_limit() {
    // A VectorE instruction reads at most 4,096 elements per partition from PSUM
    // (neuroncore.md §2.1), whatever its own 16,384 maximum: a bf16 PSUM row of 5,000 fits
    // the bank memory but not the access.
    let mut nc = nc();
    let ps = nc.psum_pool("ps", 1);
    let big = nc.tile_named(ps, "big", Dtype::Bf16, &[128, 5000]).unwrap();
    let eight = tile(&mut nc, "eight", Dtype::F32, &[128, 8]);
    let idx = tile(&mut nc, "idx", Dtype::U32, &[128, 8]);
    let out = tile(&mut nc, "out", Dtype::Bf16, &[128, 5000]);
    let errs = [
        nc.max8(eight, big).unwrap_err(),
        nc.find_index8(idx, big, eight).unwrap_err(),
        nc.match_replace8(out, big, eight, 0.0, None).unwrap_err(),
    ];
    for e in errs {
        assert_eq!(e.kind.name(), "free_size_too_large", "{e}");
        let msg = e.to_string();
        assert!(msg.contains("5000 elements in PSUM") && msg.contains("4096"), "{msg}");
    }
}

/// A TIMING run needs no values and gives a BOTH run's time and program hash: the selection
/// instructions' costs depend on shapes and memories only, never on what they select.
#[test]
fn a_timing_run_of_the_selections_needs_no_values_and_matches_a_both_run() {
    use neuron_sim::{Alu, Cmp};
    let run = |mode: ExecMode| {
        let mut nc = Nc::new(Chip::trn2(), mode);
        let vals: Vec<f32> = (0..128 * 300).map(|i| (i % 97) as f32).collect();
        let preds: Vec<f32> = (0..128 * 300).map(|i| (i % 3 == 0) as u8 as f32).collect();
        let values = |v: &[f32]| if mode.functional { v.to_vec() } else { Vec::new() };
        let hx = nc.hbm_input("x", Dtype::F32, &[128, 300], &values(&vals)).unwrap();
        let hp = nc.hbm_input("p", Dtype::U8, &[128, 300], &values(&preds)).unwrap();
        let hb = nc.hbm_input("b", Dtype::F32, &[128, 1], &values(&[10.0; 128])).unwrap();
        let x = tile(&mut nc, "x", Dtype::F32, &[128, 300]);
        let p = tile(&mut nc, "p", Dtype::U8, &[128, 300]);
        let b = tile(&mut nc, "b", Dtype::F32, &[128, 1]);
        for (t, h) in [(x, hx), (p, hp), (b, hb)] {
            nc.dma(t, h).unwrap();
        }
        let v = tile(&mut nc, "v", Dtype::F32, &[128, 8]);
        let i = tile(&mut nc, "i", Dtype::U32, &[128, 8]);
        let d = tile(&mut nc, "d", Dtype::F32, &[128, 300]);
        let r = tile(&mut nc, "r", Dtype::F32, &[128, 1]);
        nc.max8(v, x).unwrap();
        nc.find_index8(i, x, v).unwrap();
        nc.match_replace8(d, x, v, NEG_INF, Some(i.view())).unwrap();
        nc.tensor_copy_predicated(d, x, p, false).unwrap();
        nc.tensor_copy_predicated(d, NEG_INF, p, true).unwrap();
        nc.select_reduce(d, p, x, NEG_INF, true, Some((Alu::Max, r.view()))).unwrap();
        let bounds = [(Cmp::Ge, b.view()), (Cmp::Lt, b.view())];
        nc.range_select(d, x, bounds, 0, Some((Alu::Max, r.view()))).unwrap();
        let prof = nc.profile();
        (prof.total_time_us, prof.program_hash)
    };
    assert_eq!(run(ExecMode::TIMING), run(ExecMode::BOTH));
}

#[test]
fn tensor_copy_predicated_copies_a_scalar_where_the_predicate_selects() {
    // SDK 2.33: a scalar src is copied where the predicate is true; with reverse_pred where
    // it is false. A float scalar is written in dst's float dtype (2.7 in bf16 is 2.703125:
    // 1 + 45/128 times 2), an int one in dst's integer dtype.
    let pred = [1.0, 0.0, 255.0, 0.0, 7.0, 0.0];
    let k = -9.0;
    for (reverse, want) in [
        (false, [2.703125, k, 2.703125, k, 2.703125, k]),
        (true, [k, 2.703125, k, 2.703125, k, 2.703125]),
    ] {
        let mut nc = nc();
        let p = load(&mut nc, "pred", Dtype::U16, &[2, 3], &pred);
        let d = tile(&mut nc, "dst", Dtype::Bf16, &[2, 3]);
        nc.memset(d, k).unwrap();
        nc.tensor_copy_predicated(d, 2.7, p, reverse).unwrap();
        assert_eq!(read(&mut nc, d), want, "reverse_pred {reverse}");
    }
    let mut nc = nc();
    let p = load(&mut nc, "pred", Dtype::U8, &[1, 4], &[0.0, 1.0, 0.0, 1.0]);
    let d = load(&mut nc, "dst", Dtype::I8, &[1, 4], &[1.0, 2.0, 3.0, 4.0]);
    nc.tensor_copy_predicated(d, -5, p, false).unwrap();
    assert_eq!(read(&mut nc, d), [1.0, -5.0, 3.0, -5.0]);
    nc.tensor_copy_predicated(d, 100i64, p, true).unwrap();
    assert_eq!(read(&mut nc, d), [100.0, -5.0, 100.0, -5.0]);
    // Materialized in dst's dtype: an int beyond int8 saturates, as every integer write
    // does in the simulator (assumed conversion, neuroncore.md §2.2).
    nc.tensor_copy_predicated(d, 300, p, false).unwrap();
    assert_eq!(read(&mut nc, d), [100.0, 127.0, 100.0, 127.0]);
}

#[test]
fn tensor_copy_predicated_scalar_and_reverse_pred_rules() {
    let mut nc = nc();
    let pred = tile(&mut nc, "pred", Dtype::U8, &[128, 64]);
    let src = tile(&mut nc, "src", Dtype::F32, &[128, 64]);
    let dst = tile(&mut nc, "dst", Dtype::F32, &[128, 64]);
    let dsti = tile(&mut nc, "dsti", Dtype::I32, &[128, 64]);
    nc.memset(pred, 1.0).unwrap();
    nc.memset(src, 2.0).unwrap();
    // reverse_pred takes a scalar src only (SDK 2.33).
    let e = nc.tensor_copy_predicated(dst, src, pred, true).unwrap_err();
    assert_eq!(e.kind.name(), "invalid", "{e}");
    assert!(e.to_string().contains("reverse_pred can only be set with a scalar src"), "{e}");
    // Only the kind must match: a float for a float dst, an int for an integer one.
    let e = nc.tensor_copy_predicated(dsti, 1.0, pred, false).unwrap_err();
    assert_eq!(e.kind.name(), "dtype_not_allowed", "{e}");
    assert!(e.to_string().contains("int32 for dst: a float scalar src needs a float dst"), "{e}");
    let e = nc.tensor_copy_predicated(dst, 1, pred, false).unwrap_err();
    assert_eq!(e.kind.name(), "dtype_not_allowed", "{e}");
    assert!(e.to_string().contains("float32 for dst: an int scalar src needs an integer"), "{e}");
    nc.tensor_copy_predicated(dsti, 1, pred, true).unwrap();
    nc.tensor_copy_predicated(dst, 1.0, pred, true).unwrap();
    // The predicate's rules and the shape hold with a scalar src too.
    let bad = tile(&mut nc, "bad", Dtype::I32, &[128, 64]);
    let e = nc.tensor_copy_predicated(dst, 1.0, bad, false).unwrap_err();
    assert!(e.to_string().contains("int32 for predicate: a predicate is uint8"), "{e}");
    let e = nc.tensor_copy_predicated(dst.cols(0..32), 1.0, pred, false).unwrap_err();
    assert_eq!(e.kind.name(), "shape_mismatch", "{e}");
}

#[test]
fn tensor_copy_predicated_takes_at_most_three_free_dims() {
    // SDK 2.33: dst, predicate and a tensor src have at most three free dimensions (rank
    // 4). Three work, values and all; a fourth is refused naming the operand.
    let vals: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let preds: Vec<f32> = (0..24).map(|i| (i % 3 == 0) as u8 as f32).collect();
    let mut nc = nc();
    let s3 = load(&mut nc, "s3", Dtype::F32, &[2, 2, 3, 2], &vals);
    let p3 = load(&mut nc, "p3", Dtype::U8, &[2, 2, 3, 2], &preds);
    let d3 = tile(&mut nc, "d3", Dtype::F32, &[2, 2, 3, 2]);
    nc.memset(d3, -1.0).unwrap();
    nc.tensor_copy_predicated(d3, s3, p3, false).unwrap();
    let want: Vec<f32> = (0..24).map(|i| if i % 3 == 0 { i as f32 } else { -1.0 }).collect();
    assert_eq!(read(&mut nc, d3), want);
    let four = [2u64, 2, 3, 1, 2];
    let s4 = tile(&mut nc, "s4", Dtype::F32, &four);
    let p4 = tile(&mut nc, "p4", Dtype::U8, &four);
    let d4 = tile(&mut nc, "d4", Dtype::F32, &four);
    let refused = |e: neuron_sim::SimError, operand: &str| {
        assert_eq!(e.kind.name(), "bad_access_pattern", "{e}");
        let msg = e.to_string();
        let want = format!("{operand} has 4 free dims [2, 3, 1, 2], but tensor_copy_predicated");
        assert!(msg.contains(&want) && msg.contains("at most 3"), "{msg}");
    };
    refused(nc.tensor_copy_predicated(d3, s4, p3, false).unwrap_err(), "src");
    refused(nc.tensor_copy_predicated(d3, s3, p4, false).unwrap_err(), "predicate");
    refused(nc.tensor_copy_predicated(d4, s3, p3, false).unwrap_err(), "dst");
    refused(nc.tensor_copy_predicated(d4, 1.0, p3, true).unwrap_err(), "dst");
    refused(nc.tensor_copy_predicated(d3, 1.0, p4, true).unwrap_err(), "predicate");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// reverse_pred is the copy with the predicate negated: a scalar copied with
    /// `reverse_pred` equals it copied under `predicate == 0` (computed by VectorE), and both
    /// equal the definition.
    #[test]
    fn reverse_pred_is_the_copy_under_the_negated_predicate(
        preds in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), any::<u8>()], 1..60),
        value in -1000i32..1000,
        p in 1u64..4,
    ) {
        let n = preds.len() as u64;
        let q: Vec<f32> = (0..p * n).map(|i| preds[(i % n) as usize] as f32).collect();
        let base: Vec<f32> = (0..p * n).map(|i| i as f32 * 0.5).collect();
        let mut nc = nc();
        let pred = load(&mut nc, "pred", Dtype::U8, &[p, n], &q);
        let neg = tile(&mut nc, "neg", Dtype::U8, &[p, n]);
        nc.tensor_scalar(neg, pred, (neuron_sim::Alu::IsEqual, 0.0.into()), None).unwrap();
        let a = load(&mut nc, "a", Dtype::F32, &[p, n], &base);
        let b = load(&mut nc, "b", Dtype::F32, &[p, n], &base);
        nc.tensor_copy_predicated(a, value as f32, pred, true).unwrap();
        nc.tensor_copy_predicated(b, value as f32, neg, false).unwrap();
        let (ra, rb) = (read(&mut nc, a), read(&mut nc, b));
        prop_assert_eq!(&ra, &rb);
        let want: Vec<f32> =
            q.iter().zip(&base).map(|(&q, &x)| if q == 0.0 { value as f32 } else { x }).collect();
        prop_assert_eq!(ra, want);
    }
}
