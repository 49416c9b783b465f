//! Indirect DMA (`Nc::dma_gather`, `Nc::dma_scatter`): NKI's `dma_copy` with row indices
//! read from SBUF. Values against a plain reference, the documented out-of-bounds and
//! operand rules, and the cost: a gather costs what a direct copy of the same rows costs by
//! the descriptor model (neuroncore.md §1.7), after the index it waits for.

use neuron_sim::{Chip, Dtype, ExecMode, Hbm, Nc, SimError, Tile};
use proptest::prelude::*;

/// Where every refusal of an indirect copy says its rule is documented.
const DOC: &str = "neuroncore.md §2.3 dma_copy";

/// A `[rows, cols]` fp32 table whose element (r, c) is `r · 1000 + c`.
fn table(nc: &mut Nc, rows: u64, cols: u64) -> Hbm {
    let vals: Vec<f32> =
        (0..rows).flat_map(|r| (0..cols).map(move |c| (r * 1000 + c) as f32)).collect();
    nc.hbm_input("table", Dtype::F32, &[rows, cols], &vals).unwrap()
}

/// An SBUF `[n, 1]` int32 tile holding `idx`, loaded from HBM as a kernel would.
fn index_tile(nc: &mut Nc, idx: &[f32]) -> Tile {
    let n = idx.len() as u64;
    let h = nc.hbm_input("idx", Dtype::I32, &[n, 1], idx).unwrap();
    let pool = nc.sbuf_pool("idx", 1);
    let t = nc.tile(pool, Dtype::I32, &[n, 1]).unwrap();
    nc.dma(t, h).unwrap();
    t
}

/// The rows `idx` of a `table(rows, cols)`, gathered through SBUF and stored.
fn gathered(rows: u64, cols: u64, idx: &[f32]) -> Result<Vec<f32>, SimError> {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, rows, cols);
    let it = index_tile(&mut nc, idx);
    let pool = nc.sbuf_pool("rows", 1);
    let n = idx.len() as u64;
    let t = nc.tile(pool, Dtype::F32, &[n, cols]).unwrap();
    nc.dma_gather(t, tab.view(), it)?;
    let out = nc.hbm("out", Dtype::F32, &[n, cols]).unwrap();
    nc.dma(out, t).unwrap();
    Ok(nc.read_hbm(out).unwrap().to_vec())
}

fn reference(cols: u64, idx: &[f32]) -> Vec<f32> {
    idx.iter().flat_map(|&r| (0..cols).map(move |c| (r as u64 * 1000 + c) as f32)).collect()
}

#[test]
fn a_gather_reads_the_indexed_rows_repeats_included() {
    let idx = [5.0, 0.0, 299.0, 5.0, 17.0];
    assert_eq!(gathered(300, 6, &idx).unwrap(), reference(6, &idx));
}

/// Any integer dtype holds the row numbers (NKI's examples use int32): uint16 here.
#[test]
fn a_uint16_index_gathers_the_same_rows() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, 300, 3);
    let idx = [299.0, 0.0, 42.0];
    let h = nc.hbm_input("idx", Dtype::U16, &[3, 1], &idx).unwrap();
    let pool = nc.sbuf_pool("sb", 1);
    let it = nc.tile(pool, Dtype::U16, &[3, 1]).unwrap();
    nc.dma(it, h).unwrap();
    let out = nc.hbm("out", Dtype::F32, &[3, 3]).unwrap();
    nc.dma_gather(out, tab.view(), it).unwrap();
    assert_eq!(nc.read_hbm(out).unwrap(), reference(3, &idx).as_slice());
}

#[test]
fn a_gather_can_write_hbm_directly() {
    let mut nc = Nc::new(Chip::trn1(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, 50, 4);
    let idx = [3.0, 49.0, 10.0];
    let it = index_tile(&mut nc, &idx);
    let out = nc.hbm("out", Dtype::F32, &[3, 4]).unwrap();
    nc.dma_gather(out, tab.view(), it).unwrap();
    assert_eq!(nc.read_hbm(out).unwrap(), reference(4, &idx).as_slice());
}

#[test]
fn a_gather_indexes_dim_0_of_the_view_it_is_given() {
    // Columns 2..5 of rows 10..20: index 3 is row 13 of the table, columns 2, 3, 4.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, 30, 8);
    let it = index_tile(&mut nc, &[3.0, 0.0]);
    let out = nc.hbm("out", Dtype::F32, &[2, 3]).unwrap();
    nc.dma_gather(out, tab.rows(10..20).cols(2..5), it).unwrap();
    assert_eq!(nc.read_hbm(out).unwrap(), &[13002., 13003., 13004., 10002., 10003., 10004.]);
}

#[test]
fn a_scatter_writes_the_indexed_rows_and_the_last_repeat_wins() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let dst = table(&mut nc, 10, 2);
    let src: Vec<f32> = (0..8).map(|x| -(x as f32) - 1.0).collect(); // rows [-1,-2], [-3,-4]…
    let src = nc.hbm_input("src", Dtype::F32, &[4, 2], &src).unwrap();
    let pool = nc.sbuf_pool("src", 1);
    let t = nc.tile(pool, Dtype::F32, &[4, 2]).unwrap();
    nc.dma(t, src).unwrap();
    let it = index_tile(&mut nc, &[7.0, 2.0, 7.0, 0.0]);
    nc.dma_scatter(dst.view(), t, it).unwrap();
    let got = nc.read_hbm(dst).unwrap();
    let mut want: Vec<f32> =
        (0..10u64).flat_map(|r| [r as f32 * 1000.0, r as f32 * 1000.0 + 1.0]).collect();
    want[0..2].copy_from_slice(&[-7.0, -8.0]); // partition 3 → row 0
    want[4..6].copy_from_slice(&[-3.0, -4.0]); // partition 1 → row 2
    want[14..16].copy_from_slice(&[-5.0, -6.0]); // partitions 0 and 2 → row 7: 2 wins
    assert_eq!(got, want.as_slice());
}

#[test]
fn an_index_out_of_bounds_names_the_partition_the_value_and_the_bound() {
    for (bad, shown) in [(300.0, "300"), (-1.0, "-1")] {
        let e = gathered(300, 4, &[1.0, 2.0, bad]).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.instruction, "dma_copy");
        for want in ["partition 2", shown, "rows 0..300", "`table`", "oob_mode.error", DOC] {
            assert!(msg.contains(want), "{want:?} missing from: {msg}");
        }
    }
}

#[test]
fn the_index_must_be_an_sbuf_integer_column() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, 8, 4);
    let sb = nc.sbuf_pool("sb", 1);
    let ps = nc.psum_pool("ps", 1);
    let rows = nc.tile(sb, Dtype::F32, &[2, 4]).unwrap();
    let float_idx = nc.tile(sb, Dtype::F32, &[2, 1]).unwrap();
    let wide_idx = nc.tile(sb, Dtype::I32, &[2, 2]).unwrap();
    let psum_idx = nc.tile(ps, Dtype::I32, &[2, 1]).unwrap();
    let err = |nc: &mut Nc, idx: Tile| nc.dma_gather(rows, tab.view(), idx).unwrap_err();
    let m = err(&mut nc, float_idx).to_string();
    assert!(m.contains("index") && m.contains("integer tile"), "{m}");
    let m = err(&mut nc, wide_idx).to_string();
    assert!(m.contains("index must be one column, [P, 1]") && m.contains(DOC), "{m}");
    let m = err(&mut nc, psum_idx).to_string();
    assert!(m.contains("index is in PSUM") && m.contains("SBUF"), "{m}");
}

#[test]
fn the_direct_side_must_have_one_row_per_index() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let tab = table(&mut nc, 8, 4);
    let it = index_tile(&mut nc, &[1.0, 2.0]);
    let sb = nc.sbuf_pool("sb", 1);
    let three_rows = nc.tile(sb, Dtype::F32, &[3, 4]).unwrap();
    let m = nc.dma_gather(three_rows, tab.view(), it).unwrap_err().to_string();
    assert!(m.contains("dst is [3 x 4]") && m.contains("index has 2 partitions"), "{m}");
    assert!(m.contains(DOC), "{m}");
    let short_rows = nc.tile(sb, Dtype::F32, &[2, 3]).unwrap();
    let m = nc.dma_gather(short_rows, tab.view(), it).unwrap_err().to_string();
    assert!(m.contains("has 4 elements"), "{m}");
    let flat = nc.hbm_input("flat", Dtype::F32, &[8], &[0.0; 8]).unwrap();
    let m = nc.dma_gather(short_rows, flat.view(), it).unwrap_err().to_string();
    assert!(m.contains("rank 2 or more") && m.contains(DOC), "{m}");
}

/// The time (ns) of `build`'s program, launch overhead excluded.
fn time_ns(chip: &Chip, mode: ExecMode, build: impl FnOnce(&mut Nc)) -> f64 {
    let mut nc = Nc::new(chip.clone(), mode);
    build(&mut nc);
    let p = nc.profile();
    (p.total_time_us - p.launch_overhead_us) * 1e3
}

/// The cost: 128 rows of `cols` fp32 (one descriptor each, 8 rows per DMA engine) cost what
/// a direct load of 128 rows that are not contiguous with each other costs, exactly, and
/// that is the descriptor model's `fixed + max(8 × descriptor_ns + 8 × row / rate,
/// total / HBM)` (within the 3 % that `dma.rs` allows the model's HBM sharing); and a gather
/// starts only when the index it reads is written.
#[test]
fn a_gather_costs_a_direct_load_of_its_rows_after_its_index() {
    for chip in [Chip::trn1(), Chip::trn2()] {
        for cols in [64u64, 512, 2048] {
            let row = cols * 4;
            let d = &chip.dma;
            let per_engine = 128 / d.engines as u64;
            let engine = per_engine as f64 * (d.descriptor_ns + row as f64 / d.engine_gbps);
            let hbm = (128 * row) as f64 / chip.memory.hbm_gbps_per_core;
            let want = d.fixed_ns + engine.max(hbm);
            let name = &chip.name;
            // A timing run has no values, so the index needs no writer: the gather alone.
            let gather = |nc: &mut Nc, index_written: bool| {
                let tab = nc.hbm_input("t", Dtype::F32, &[1000, cols], &[]).unwrap();
                let pool = nc.sbuf_pool("sb", 1);
                let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
                if index_written {
                    let h = nc.hbm_input("idx", Dtype::I32, &[128, 1], &[]).unwrap();
                    nc.dma(it, h).unwrap();
                }
                let t = nc.tile(pool, Dtype::F32, &[128, cols]).unwrap();
                nc.dma_gather(t, tab.view(), it).unwrap();
            };
            let alone = time_ns(&chip, ExecMode::TIMING, |nc| gather(nc, false));
            // A direct load of every other row of a table: 128 separate runs.
            let direct = time_ns(&chip, ExecMode::TIMING, |nc| {
                let tab = nc.hbm_input("t", Dtype::F32, &[256, cols], &[]).unwrap();
                let pool = nc.sbuf_pool("rows", 1);
                let t = nc.tile(pool, Dtype::F32, &[128, cols]).unwrap();
                nc.dma(t, tab.view().split(0, 2).index(1, 0)).unwrap();
            });
            assert_eq!(alone, direct, "{name} cols {cols}");
            assert!((alone / want - 1.0).abs() < 0.03, "{name} {cols}: {alone:.1} vs {want:.1}");
            // After the index's own load (a [128, 1] int32 load, fixed latency and more).
            let index_only = time_ns(&chip, ExecMode::TIMING, |nc| {
                let h = nc.hbm_input("idx", Dtype::I32, &[128, 1], &[]).unwrap();
                let pool = nc.sbuf_pool("sb", 1);
                let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
                nc.dma(it, h).unwrap();
            });
            assert!(index_only > d.fixed_ns, "{name}: {index_only:.1}");
            let after = time_ns(&chip, ExecMode::TIMING, |nc| gather(nc, true));
            assert!(
                after >= index_only + 0.97 * alone,
                "{name} cols {cols}: the gather ended at {after:.1} ns, before its index \
                 ({index_only:.1} ns) plus its own time ({alone:.1} ns)"
            );
        }
    }
}

/// A scatter costs the direct store of the same rows, and an HBM-to-HBM gather the direct
/// HBM-to-HBM copy of rows that are not contiguous (every other row of a table): the same
/// descriptors on the same engines, exactly.
#[test]
fn a_scatter_and_an_hbm_to_hbm_gather_cost_their_direct_copies() {
    for chip in [Chip::trn1(), Chip::trn2()] {
        let name = &chip.name;
        let every_other = |nc: &mut Nc, t: &str| {
            nc.hbm_input(t, Dtype::Bf16, &[256, 1024], &[]).unwrap().view().split(0, 2).index(1, 0)
        };
        let scatter = time_ns(&chip, ExecMode::TIMING, |nc| {
            let tab = nc.hbm_input("t", Dtype::Bf16, &[1000, 1024], &[]).unwrap();
            let pool = nc.sbuf_pool("sb", 1);
            let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
            let t = nc.tile(pool, Dtype::Bf16, &[128, 1024]).unwrap();
            nc.dma_scatter(tab.view(), t, it).unwrap();
        });
        let store = time_ns(&chip, ExecMode::TIMING, |nc| {
            let dst = every_other(nc, "t");
            let pool = nc.sbuf_pool("sb", 1);
            let t = nc.tile(pool, Dtype::Bf16, &[128, 1024]).unwrap();
            nc.dma(dst, t).unwrap();
        });
        assert_eq!(scatter, store, "{name}: scatter");
        let gather = time_ns(&chip, ExecMode::TIMING, |nc| {
            let tab = nc.hbm_input("t", Dtype::Bf16, &[1000, 1024], &[]).unwrap();
            let out = nc.hbm("out", Dtype::Bf16, &[128, 1024]).unwrap();
            let pool = nc.sbuf_pool("sb", 1);
            let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
            nc.dma_gather(out, tab.view(), it).unwrap();
        });
        let copy = time_ns(&chip, ExecMode::TIMING, |nc| {
            let src = every_other(nc, "t");
            let out = nc.hbm("out", Dtype::Bf16, &[128, 1024]).unwrap();
            nc.dma(out, src).unwrap();
        });
        assert_eq!(gather, copy, "{name}: HBM-to-HBM gather");
    }
}

#[test]
fn timing_needs_no_index_values_and_gives_the_functional_run_s_time() {
    let build = |nc: &mut Nc| {
        let tab = nc.hbm_input("t", Dtype::Bf16, &[4096, 1024], &[]).unwrap();
        let h = nc.hbm_input("idx", Dtype::I32, &[128, 1], &[]).unwrap();
        let pool = nc.sbuf_pool("sb", 1);
        let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
        nc.dma(it, h).unwrap();
        let t = nc.tile(pool, Dtype::Bf16, &[128, 1024]).unwrap();
        nc.dma_gather(t, tab.view(), it).unwrap();
    };
    let timing = time_ns(&Chip::trn2(), ExecMode::TIMING, build);
    let both = time_ns(&Chip::trn2(), ExecMode::BOTH, |nc| {
        let tab_vals = vec![0.5f32; 4096 * 1024];
        let tab = nc.hbm_input("t", Dtype::Bf16, &[4096, 1024], &tab_vals).unwrap();
        let idx: Vec<f32> = (0..128).map(|p| (p * 31) as f32).collect();
        let h = nc.hbm_input("idx", Dtype::I32, &[128, 1], &idx).unwrap();
        let pool = nc.sbuf_pool("sb", 1);
        let it = nc.tile(pool, Dtype::I32, &[128, 1]).unwrap();
        nc.dma(it, h).unwrap();
        let t = nc.tile(pool, Dtype::Bf16, &[128, 1024]).unwrap();
        nc.dma_gather(t, tab.view(), it).unwrap();
    });
    assert_eq!(timing, both);
}

#[test]
fn an_indirect_copy_is_a_program_of_its_own() {
    // (indirect, index column): a gather differs from the direct copy of its operands, and
    // from the same gather through another index (the hash covers the index view).
    let hash = |indirect: bool, col: u64| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let tab = nc.hbm_input("t", Dtype::F32, &[128, 64], &[]).unwrap();
        let h = nc.hbm_input("idx", Dtype::I32, &[128, 2], &[]).unwrap();
        let pool = nc.sbuf_pool("sb", 1);
        let it = nc.tile(pool, Dtype::I32, &[128, 2]).unwrap();
        nc.dma(it, h).unwrap();
        let t = nc.tile(pool, Dtype::F32, &[128, 64]).unwrap();
        if indirect {
            nc.dma_gather(t, tab.view(), it.cols(col..col + 1)).unwrap();
        } else {
            nc.dma(t, tab.view()).unwrap();
        }
        nc.profile().program_hash
    };
    assert_ne!(hash(true, 0), hash(false, 0));
    assert_ne!(hash(true, 0), hash(true, 1));
    assert_eq!(hash(true, 1), hash(true, 1));
}

/// In an affine loop, every iteration gathering from one table and scattering into another
/// is accepted: the rows are known only from values, so no loop-carried dependency can be
/// proven, and the scheduler keeps the scatters in order with each other.
#[test]
fn indirect_copies_in_an_affine_loop_are_accepted_and_computed_as_in_order() {
    let run = |affine: bool| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
        let tab = table(&mut nc, 64, 8);
        // The destination starts as −1 everywhere: a scatter that wrote nothing shows.
        let out = nc.hbm_input("out", Dtype::F32, &[64, 8], &[-1.0; 512]).unwrap();
        let idx: Vec<f32> = (0..64).map(|p| ((p * 5) % 64) as f32).collect();
        let h = nc.hbm_input("idx", Dtype::I32, &[64, 1], &idx).unwrap();
        let pool = nc.sbuf_pool("sb", 2);
        let body = |nc: &mut Nc, i: u64| {
            let r = i * 16..(i + 1) * 16;
            let it = nc.tile(pool, Dtype::I32, &[16, 1])?;
            nc.dma(it, h.rows(r))?;
            let t = nc.tile(pool, Dtype::F32, &[16, 8])?;
            nc.dma_gather(t, tab.view(), it)?;
            nc.dma_scatter(out.view(), t, it)
        };
        if affine {
            nc.affine_range(0..4, body).unwrap();
        } else {
            for i in 0..4 {
                body(&mut nc, i).unwrap();
            }
        }
        nc.read_hbm(out).unwrap().to_vec()
    };
    let (a, b) = (run(true), run(false));
    assert_eq!(a, b);
    // Every row r·5 mod 64 (all 64 rows: 5 is prime to 64) was gathered from the table and
    // scattered to the same row of `out`: the table again.
    assert_eq!(
        a,
        (0..64u64).flat_map(|r| (0..8).map(move |c| (r * 1000 + c) as f32)).collect::<Vec<_>>()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A gather of any in-range indices is the reference's rows, and scattering them back
    /// to where they came from writes exactly the indexed rows of a destination filled with
    /// −1: those equal the table's, every other row keeps its −1.
    #[test]
    fn gather_then_scatter_round_trips(
        rows in 1u64..200,
        cols in 1u64..40,
        picks in prop::collection::vec(0u64..10_000, 1..128),
    ) {
        let idx: Vec<f32> = picks.iter().map(|&p| (p % rows) as f32).collect();
        prop_assert_eq!(gathered(rows, cols, &idx).unwrap(), reference(cols, &idx));
        let mut nc = Nc::new(Chip::trn1(), ExecMode::FUNCTIONAL);
        let tab = table(&mut nc, rows, cols);
        let fill = vec![-1.0; (rows * cols) as usize];
        let copy = nc.hbm_input("copy", Dtype::F32, &[rows, cols], &fill).unwrap();
        let it = index_tile(&mut nc, &idx);
        let pool = nc.sbuf_pool("rows", 1);
        let t = nc.tile(pool, Dtype::F32, &[idx.len() as u64, cols]).unwrap();
        nc.dma_gather(t, tab.view(), it).unwrap();
        nc.dma_scatter(copy.view(), t, it).unwrap();
        let picked: std::collections::HashSet<u64> = idx.iter().map(|&r| r as u64).collect();
        let want: Vec<f32> = (0..rows)
            .flat_map(|r| {
                let hit = picked.contains(&r);
                (0..cols).map(move |c| if hit { (r * 1000 + c) as f32 } else { -1.0 })
            })
            .collect();
        prop_assert_eq!(nc.read_hbm(copy).unwrap(), want.as_slice());
    }
}

/// The affine loop check still sees an indirect copy's direct side: a gather writing the same
/// HBM rows in every iteration is a write-after-write across iterations, and a scatter
/// reading one SBUF tile that every iteration rewrites is not (the tile is the iteration's).
/// The indexed side alone (each iteration gathering from, or scattering to, one table,
/// wherever its indices point) is never an error.
#[test]
fn the_direct_side_of_an_indirect_copy_is_checked_across_iterations() {
    use neuron_sim::{Hazard, ViolationKind as V};
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let tab = nc.hbm_input("t", Dtype::F32, &[64, 8], &[]).unwrap();
    let h = nc.hbm_input("idx", Dtype::I32, &[64, 1], &[]).unwrap();
    let out = nc.hbm("out", Dtype::F32, &[64, 8]).unwrap();
    let pool = nc.sbuf_pool("sb", 2);
    let mut line = 0;
    let e = nc
        .affine_range(0..4, |nc, i| {
            let it = nc.tile(pool, Dtype::I32, &[16, 1])?;
            nc.dma(it, h.rows(i * 16..(i + 1) * 16))?;
            line = line!() + 1;
            nc.dma_gather(out.rows(0..16), tab.view(), it)
        })
        .unwrap_err();
    let V::LoopCarriedDependency(d) = &e.kind else { panic!("{e}") };
    assert_eq!(d.hazard, Hazard::Waw, "{e}");
    assert_eq!((e.instruction, e.loc.line, d.earlier_loc.line), ("dma_copy", line, line), "{e}");
    assert!(e.to_string().contains("`out`"), "{e}");
    // Each iteration its own rows of `out`, and the whole table read or written each time.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let tab = nc.hbm_input("t", Dtype::F32, &[64, 8], &[]).unwrap();
    let h = nc.hbm_input("idx", Dtype::I32, &[64, 1], &[]).unwrap();
    let out = nc.hbm("out", Dtype::F32, &[64, 8]).unwrap();
    let pool = nc.sbuf_pool("sb", 2);
    nc.affine_range(0..4, |nc, i| {
        let it = nc.tile(pool, Dtype::I32, &[16, 1])?;
        nc.dma(it, h.rows(i * 16..(i + 1) * 16))?;
        nc.dma_gather(out.rows(i * 16..(i + 1) * 16), tab.view(), it)?;
        let t = nc.tile(pool, Dtype::F32, &[16, 8])?;
        nc.dma(t, out.rows(i * 16..(i + 1) * 16))?;
        nc.dma_scatter(tab.view(), t, it)
    })
    .unwrap();
}
