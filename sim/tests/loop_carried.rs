//! Loop-carried dependencies (docs/scheduling.md §2): anything that crosses the iterations
//! of an `affine_range` loop, other than accumulation into one PSUM tile and ring-buffer
//! reuse, is a typed error naming both instructions and their lines; disjoint or
//! interleaved slices of a shared tile are not.

use neuron_sim::{
    Act, ActArgs, Alu, Chip, Dtype, ExecMode, Hazard, Hbm, Nc, SimError, Tile, ViolationKind as V,
};
use proptest::prelude::*;

/// Assert `err` is a loop-carried dependency of kind `hazard` between `earlier` (the
/// instruction at `earlier_line` of this file) and `later` (at `line`), naming both lines.
fn check_carried(
    err: &SimError,
    hazard: Hazard,
    later: &str,
    line: u32,
    earlier: &str,
    earlier_line: u32,
) {
    let V::LoopCarriedDependency(d) = &err.kind else {
        panic!("expected a loop-carried dependency, got {err}");
    };
    let (h, earlier_instruction, earlier_loc) = (&d.hazard, &d.earlier_instruction, &d.earlier_loc);
    assert_eq!(*h, hazard, "{err}");
    assert_eq!((err.instruction, err.loc.line), (later, line), "{err}");
    assert!(err.loc.file.ends_with("loop_carried.rs"), "{err}");
    assert_eq!((*earlier_instruction, earlier_loc.line), (earlier, earlier_line), "{err}");
    assert!(earlier_loc.file.ends_with("loop_carried.rs"), "{err}");
    assert_eq!(err.kind.name(), "loop_carried_dependency");
    let msg = err.to_string();
    for needle in [
        format!("{}:{}:", err.loc.file, line),
        format!("{}:{}:", earlier_loc.file, earlier_line),
        format!("`{earlier}`"),
        later.to_string(),
        h.to_string(),
    ] {
        assert!(msg.contains(&needle), "message lacks {needle:?}: {msg}");
    }
}

struct Setup {
    nc: Nc,
    x: Hbm,
    y: Hbm,
    sb: neuron_sim::Pool,
    ps: neuron_sim::Pool,
    /// A tile allocated (and written) before the loop.
    shared: Tile,
}

fn setup(mode: ExecMode) -> Setup {
    let mut nc = Nc::new(Chip::trn2(), mode);
    let x = nc.hbm_input("x", Dtype::F32, &[512, 64], &vec![0.25; 512 * 64]).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[512, 64]).unwrap();
    let sb = nc.sbuf_pool("sb", 2);
    let ps = nc.psum_pool("ps", 2);
    let shared = nc.tile_named(sb, "shared", Dtype::F32, &[128, 64]).unwrap();
    nc.memset(shared, 1.0).unwrap();
    Setup { nc, x, y, sb, ps, shared }
}

/// RAW: a running sum in a tile allocated outside the loop — each iteration reads what the
/// one before wrote.
#[test]
fn reading_what_an_earlier_iteration_wrote_is_a_raw_error() {
    let Setup { mut nc, x, sb, shared, .. } = setup(ExecMode::FUNCTIONAL);
    let mut lines = (0, 0);
    let e = nc
        .affine_range(0..4, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            lines.0 = line!() + 1;
            nc.tensor_tensor(shared, shared, t, Alu::Add)
        })
        .unwrap_err();
    lines.1 = lines.0;
    // Iteration 1 reads `shared`, which iteration 0's tensor_tensor wrote.
    check_carried(&e, Hazard::Raw, "tensor_tensor", lines.0, "tensor_tensor", lines.1);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index, d.what.as_str()), (1, 0, "tile `shared`"));
}

/// RAW through HBM: iteration i reads the rows iteration i - 1 stored (a scan written as an
/// affine loop).
#[test]
fn reading_hbm_an_earlier_iteration_stored_is_a_raw_error() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::TIMING);
    let (mut store_line, mut load_line) = (0, 0);
    let e = nc
        .affine_range(0..4, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            if i == 0 {
                nc.dma(t, x.rows(0..128))?;
            } else {
                load_line = line!() + 1;
                nc.dma(t, y.rows((i - 1) * 128..i * 128))?;
            }
            store_line = line!() + 1;
            nc.dma(y.rows(i * 128..(i + 1) * 128), t)
        })
        .unwrap_err();
    check_carried(&e, Hazard::Raw, "dma_copy", load_line, "dma_copy", store_line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!(d.what, "HBM tensor `y`");
}

/// WAR: an in-place shift — iteration i reads rows i + 1 and writes rows i, so iteration 1
/// overwrites rows iteration 0 read.
#[test]
fn overwriting_what_an_earlier_iteration_read_is_a_war_error() {
    let Setup { mut nc, x, sb, .. } = setup(ExecMode::BOTH);
    let (mut read_line, mut write_line) = (0, 0);
    let e = nc
        .affine_range(0..3, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            read_line = line!() + 1;
            nc.dma(t, x.rows((i + 1) * 128..(i + 2) * 128))?;
            write_line = line!() + 1;
            nc.dma(x.rows(i * 128..(i + 1) * 128), t)
        })
        .unwrap_err();
    check_carried(&e, Hazard::War, "dma_copy", write_line, "dma_copy", read_line);
}

/// WAR in SBUF: iteration 0 reads a tile allocated outside the loop, iteration 1 overwrites
/// it (an engine instruction, not a DMA).
#[test]
fn overwriting_a_shared_tile_an_earlier_iteration_read_is_a_war_error() {
    let Setup { mut nc, y, sb, shared, .. } = setup(ExecMode::FUNCTIONAL);
    let (mut read_line, mut write_line) = (0, 0);
    let e = nc
        .affine_range(0..2, |nc, i| {
            if i == 0 {
                let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
                read_line = line!() + 1;
                nc.activation(t, shared, Act::Exp, ActArgs::default())?;
                nc.dma(y.rows(0..128), t)?;
            } else {
                write_line = line!() + 1;
                nc.memset(shared, 0.0)?;
            }
            Ok(())
        })
        .unwrap_err();
    check_carried(&e, Hazard::War, "memset", write_line, "activation", read_line);
}

/// WAW outside PSUM accumulation: every iteration stores into the same rows.
#[test]
fn writing_what_an_earlier_iteration_wrote_is_a_waw_error() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::TIMING);
    let mut line = 0;
    let e = nc
        .affine_range(0..4, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            line = line!() + 1;
            nc.dma(y.rows(0..128), t)
        })
        .unwrap_err();
    check_carried(&e, Hazard::Waw, "dma_copy", line, "dma_copy", line);
}

/// WAW in PSUM by a non-matmul: an engine writing a PSUM tile other iterations write is not
/// an accumulation.
#[test]
fn copying_into_a_shared_psum_tile_is_a_waw_error() {
    let Setup { mut nc, x, sb, ps, .. } = setup(ExecMode::FUNCTIONAL);
    let acc = nc.tile(ps, Dtype::F32, &[128, 64]).unwrap();
    let mut line = 0;
    let e = nc
        .affine_range(0..2, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            line = line!() + 1;
            nc.tensor_copy(acc, t)
        })
        .unwrap_err();
    check_carried(&e, Hazard::Waw, "tensor_copy", line, "tensor_copy", line);
}

/// PSUM accumulation across iterations is an associative reduction, allowed (NKI's
/// `affine_range` example 2): a K loop of matmuls into one PSUM tile, read after the loop,
/// gives the plain loop's values, in no more time.
#[test]
fn psum_accumulation_across_iterations_is_accepted() {
    let run = |affine: bool, mode: ExecMode| {
        let mut nc = Nc::new(Chip::trn2(), mode);
        let k = 1024u64;
        let data: Vec<f32> = (0..k * 128).map(|i| ((i * 7) % 13) as f32 / 16.0 - 0.4).collect();
        let a = nc.hbm_input("aT", Dtype::Bf16, &[k, 128], &data).unwrap();
        let b = nc.hbm_input("b", Dtype::Bf16, &[k, 128], &data).unwrap();
        let c = nc.hbm("c", Dtype::F32, &[128, 128]).unwrap();
        let sb = nc.sbuf_pool("sb", 3);
        let ps = nc.psum_pool("ps", 1);
        let acc = nc.tile(ps, Dtype::F32, &[128, 128]).unwrap();
        let body = |nc: &mut Nc, ki: u64| {
            let at = nc.tile(sb, Dtype::Bf16, &[128, 128])?;
            nc.dma(at, a.rows(ki * 128..(ki + 1) * 128))?;
            let bt = nc.tile(sb, Dtype::Bf16, &[128, 128])?;
            nc.dma(bt, b.rows(ki * 128..(ki + 1) * 128))?;
            nc.matmul(acc, at, bt, ki > 0)
        };
        if affine {
            nc.affine_range(0..k / 128, body).unwrap();
        } else {
            nc.sequential_range(0..k / 128, body).unwrap();
        }
        let o = nc.tile(sb, Dtype::F32, &[128, 128]).unwrap();
        nc.tensor_copy(o, acc).unwrap();
        nc.dma(c, o).unwrap();
        let values = nc.read_hbm(c).map(<[f32]>::to_vec);
        (values, nc.profile().kernel_time_us)
    };
    let (affine, plain) = (run(true, ExecMode::BOTH), run(false, ExecMode::BOTH));
    assert_eq!(affine.0, plain.0, "accumulation order is program order");
    assert!(affine.1 <= plain.1, "affine {} µs, plain {} µs", affine.1, plain.1);
    // Reading the partial sums inside the loop, though, is a dependency on the other
    // iterations' accumulation.
    let Setup { mut nc, x, sb, ps, .. } = setup(ExecMode::FUNCTIONAL);
    let acc = nc.tile(ps, Dtype::F32, &[64, 64]).unwrap();
    let (mut mm_line, mut read_line) = (0, 0);
    let e = nc
        .affine_range(0..2, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            mm_line = line!() + 1;
            nc.matmul(acc, t, t, i > 0)?;
            let o = nc.tile(sb, Dtype::F32, &[64, 64])?;
            read_line = line!() + 1;
            nc.tensor_copy(o, acc)
        })
        .unwrap_err();
    // Iteration 1's matmul accumulates into what iteration 0's copy read (WAR).
    check_carried(&e, Hazard::War, "nc_matmul", mm_line, "tensor_copy", read_line);
}

/// A tile allocated inside the loop is a new tile every iteration: reusing its ring buffer
/// is no dependency error, and the scheduler respects the reuse (with one buffer, iteration
/// i + 1's load waits for iteration i's last read).
#[test]
fn ring_buffer_reuse_is_ordered_not_an_error() {
    let run = |bufs: u32| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TRACE);
        let x = nc.hbm_input("x", Dtype::F32, &[512, 64], &[]).unwrap();
        let y = nc.hbm("y", Dtype::F32, &[512, 64]).unwrap();
        let sb = nc.sbuf_pool("sb", bufs);
        nc.affine_range(0..4, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
            nc.activation(t, t, Act::Exp, ActArgs::default())?;
            nc.dma(y.rows(i * 128..(i + 1) * 128), t)
        })
        .unwrap();
        let time = nc.profile().kernel_time_us;
        (time, nc.trace_json().unwrap())
    };
    let (one, trace) = run(1);
    let (two, _) = run(2);
    assert!(two < one, "two buffers pipeline: {two} µs vs {one} µs with one");
    // With one buffer, each load (a write of the buffer) starts after the store before it
    // (the last read of the buffer) ends.
    let events = trace["traceEvents"].as_array().unwrap();
    let dma: Vec<(f64, f64, bool)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["args"]["dma_engine"] == 0)
        .map(|e| {
            let ops = e["args"]["operands"].as_str().unwrap();
            (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap(), ops.starts_with("dst=sbuf"))
        })
        .collect();
    let mut last_store_end = 0.0f64;
    for &(ts, dur, load) in &dma {
        if load {
            assert!(
                ts >= last_store_end - 1e-9,
                "a load at {ts} before the store ending {last_store_end}"
            );
        } else {
            last_store_end = last_store_end.max(ts + dur);
        }
    }
}

/// Nested affine loops: a dependency carried by the outer loop is found from inside the
/// inner one, and independent blocks of both are accepted.
#[test]
fn nested_affine_loops_check_every_level() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::BOTH);
    nc.affine_range(0..2, |nc, i| {
        nc.affine_range(0..2, |nc, j| {
            let r = (2 * i + j) * 128;
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows(r..r + 128))?;
            nc.dma(y.rows(r..r + 128), t)
        })
    })
    .unwrap();
    assert_eq!(nc.read_hbm(y).unwrap(), nc.read_hbm(x).unwrap());
    let p = nc.profile().scheduling.unwrap();
    assert_eq!((p.affine_loops, p.affine_iterations), (3, 6));
    let mut line = 0;
    let outer = line!() + 1;
    let result = nc.affine_range(0..2, |nc, i| {
        nc.affine_range(0..2, |nc, j| {
            // Both outer iterations store the same rows (j picks them).
            let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
            nc.dma(t, x.rows((2 * i + j) * 128..(2 * i + j + 1) * 128))?;
            line = line!() + 1;
            nc.dma(y.rows(j * 128..(j + 1) * 128), t)
        })
    });
    let e = result.unwrap_err();
    check_carried(&e, Hazard::Waw, "dma_copy", line, "dma_copy", line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!(d.index, 1, "outer iteration 1 against outer iteration 0");
    assert_eq!(d.loop_loc.line, outer, "the outer loop carries it: {}", d.loop_loc);
}

/// Accesses to disjoint parts of one tile or tensor from different iterations are fine, also
/// when the parts are only known to be disjoint elementwise (strided views whose bounding
/// boxes overlap are compared element by element).
#[test]
fn disjoint_and_interleaved_slices_are_accepted() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::BOTH);
    let wide = nc.tile_named(sb, "wide", Dtype::F32, &[128, 256]).unwrap();
    nc.affine_range(0..4, |nc, i| {
        // Column block i of a tile allocated outside the loop, from row block i of x.
        nc.dma(wide.cols(i * 64..(i + 1) * 64), x.rows(i * 128..(i + 1) * 128))
    })
    .unwrap();
    let even_odd = nc.tile_named(sb, "even_odd", Dtype::F32, &[128, 128]).unwrap();
    nc.affine_range(0..2, |nc, i| {
        // Columns i, i + 2, i + 4, …: interleaved, bounding boxes overlap.
        let v = even_odd.view().split(0, 2).swap(0, 1).at(i);
        let t = nc.tile(sb, Dtype::F32, &[128, 64])?;
        nc.dma(t, x.rows(i * 128..(i + 1) * 128))?;
        nc.tensor_copy(v, t)
    })
    .unwrap();
    nc.dma(y.rows(0..128), wide.cols(0..64)).unwrap();
}

/// The even columns of a tile (column `j` of `[P, 2·n]` as `[P, n]`, stride 2), or the odd
/// ones.
fn every_other_column(t: Tile, odd: bool) -> neuron_sim::TileView {
    t.view().split(0, 2).swap(0, 1).at(odd as u64)
}

/// RAW through strided views, whose bounding boxes overlap whether or not they share an
/// element: iteration 0 writes the even columns of `shared`; iteration 1 reads every third
/// column from column 4 on (4, 7, 10, …), which includes even ones.
#[test]
fn a_strided_read_of_what_a_strided_write_wrote_is_a_raw_error() {
    let Setup { mut nc, sb, shared, .. } = setup(ExecMode::BOTH);
    let (mut write_line, mut read_line) = (0, 0);
    let e = nc
        .affine_range(0..2, |nc, i| {
            if i == 0 {
                let t = nc.tile(sb, Dtype::F32, &[128, 32])?;
                nc.memset(t, 2.0)?;
                write_line = line!() + 1;
                nc.tensor_copy(every_other_column(shared, false), t)
            } else {
                let t = nc.tile(sb, Dtype::F32, &[128, 20])?;
                read_line = line!() + 1;
                nc.tensor_copy(t, shared.cols(4..64).split(0, 3).swap(0, 1).at(0))
            }
        })
        .unwrap_err();
    check_carried(&e, Hazard::Raw, "tensor_copy", read_line, "tensor_copy", write_line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index, d.what.as_str()), (1, 0, "tile `shared`"));
}

/// WAR between a strided read and a dense write: iteration 0 reads the odd columns of
/// `shared`; a later iteration overwriting an even column is fine, one overwriting an odd
/// column is an error.
#[test]
fn overwriting_a_column_a_strided_read_read_is_a_war_error() {
    let Setup { mut nc, y, sb, shared, .. } = setup(ExecMode::BOTH);
    let (mut read_line, mut write_line) = (0, 0);
    let mut run = |nc: &mut Nc, column: u64| {
        nc.affine_range(0..2, |nc, i| {
            if i == 0 {
                let t = nc.tile(sb, Dtype::F32, &[128, 32])?;
                read_line = line!() + 1;
                nc.activation(t, every_other_column(shared, true), Act::Exp, ActArgs::default())?;
                nc.dma(y.rows(0..128).cols(0..32), t)
            } else {
                write_line = line!() + 1;
                nc.memset(shared.cols(column..column + 1), 0.0)
            }
        })
    };
    run(&mut nc, 2).unwrap();
    let e = run(&mut nc, 3).unwrap_err();
    check_carried(&e, Hazard::War, "memset", write_line, "activation", read_line);
}

/// WAW through strided HBM views: iteration i stores to every other row of `y` from row
/// `i`, so iterations 0 and 1 interleave (even and odd rows) and iteration 2 writes rows
/// iteration 0 wrote.
#[test]
fn strided_stores_to_rows_an_earlier_iteration_stored_are_a_waw_error() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::TIMING);
    let mut line = 0;
    let mut run = |nc: &mut Nc, n: u64| {
        nc.affine_range(0..n, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[64, 64])?;
            nc.dma(t, x.rows(i * 64..(i + 1) * 64))?;
            // Rows i, i + 2, …, i + 126.
            line = line!() + 1;
            nc.dma(y.rows(i..i + 128).split(0, 2).index(1, 0), t)
        })
    };
    run(&mut nc, 2).unwrap();
    let e = run(&mut nc, 3).unwrap_err();
    check_carried(&e, Hazard::Waw, "dma_copy", line, "dma_copy", line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index, d.what.as_str()), (2, 0, "HBM tensor `y`"));
}

/// Strided accesses that interleave without sharing an element are accepted: four
/// iterations each write, read back and store their own columns i, i + 4, … of one tile
/// (and every iteration reads all of another, which is no conflict).
#[test]
fn interleaved_strided_accesses_are_accepted() {
    let Setup { mut nc, x, y, sb, shared, .. } = setup(ExecMode::BOTH);
    let wide = nc.tile_named(sb, "wide", Dtype::F32, &[128, 64]).unwrap();
    nc.affine_range(0..4, |nc, i| {
        let mine = wide.view().split(0, 4).swap(0, 1).at(i);
        let t = nc.tile(sb, Dtype::F32, &[128, 16])?;
        nc.dma(t, x.rows(i * 128..(i + 1) * 128).cols(0..16))?;
        nc.tensor_copy(mine, t)?;
        nc.activation(t, mine, Act::Exp, ActArgs::default())?;
        let all = nc.tile(sb, Dtype::F32, &[128, 32])?;
        nc.tensor_copy(all, every_other_column(shared, i % 2 == 1))?;
        nc.dma(y.rows(i * 128..(i + 1) * 128).cols(0..16), t)
    })
    .unwrap();
}

/// More than 32 accesses per buffer that do not merge (columns 0, 3, 6, … of a tile, rows
/// 0, 2, 4, … of a tensor: never adjacent) are all still checked: the last iteration reads
/// what the first wrote, 40 iterations before.
#[test]
fn a_conflict_with_the_first_of_many_unmerged_accesses_is_reported() {
    let Setup { mut nc, x, y, sb, .. } = setup(ExecMode::TIMING);
    let wide = nc.tile_named(sb, "wide", Dtype::F32, &[128, 128]).unwrap();
    let (mut write_line, mut read_line) = (0, 0);
    let e = nc
        .affine_range(0..41, |nc, i| {
            if i < 40 {
                write_line = line!() + 1;
                nc.memset(wide.cols(3 * i..3 * i + 1), 1.0)
            } else {
                let t = nc.tile(sb, Dtype::F32, &[128, 1])?;
                read_line = line!() + 1;
                nc.tensor_copy(t, wide.cols(0..1))
            }
        })
        .unwrap_err();
    check_carried(&e, Hazard::Raw, "tensor_copy", read_line, "memset", write_line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index, d.earlier_last_index), (40, 0, 0));
    let (mut store_line, mut load_line) = (0, 0);
    let e = nc
        .affine_range(0..41, |nc, i| {
            let t = nc.tile(sb, Dtype::F32, &[1, 64])?;
            if i < 40 {
                nc.dma(t, x.rows(i..i + 1))?;
                store_line = line!() + 1;
                nc.dma(y.rows(2 * i..2 * i + 1), t)
            } else {
                load_line = line!() + 1;
                nc.dma(t, y.rows(0..1))
            }
        })
        .unwrap_err();
    check_carried(&e, Hazard::Raw, "dma_copy", load_line, "dma_copy", store_line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index, d.what.as_str()), (40, 0, "HBM tensor `y`"));
}

/// The same past 32 strided accesses: 100 iterations each write two columns two apart, at
/// irregular places (so that few merge), and the last overwrites a column the first wrote.
#[test]
fn a_conflict_with_the_first_of_many_strided_accesses_is_reported() {
    let Setup { mut nc, sb, .. } = setup(ExecMode::TIMING);
    let wide = nc.tile_named(sb, "wide", Dtype::F32, &[128, 512]).unwrap();
    let (mut first_line, mut last_line) = (0, 0);
    let e = nc
        .affine_range(0..101, |nc, i| {
            if i < 100 {
                let c = 4 * i + (i % 3 == 0) as u64;
                first_line = line!() + 1;
                nc.memset(wide.cols(c..c + 4).split(0, 2).swap(0, 1).at(0), 1.0)
            } else {
                last_line = line!() + 1;
                nc.memset(wide.cols(1..2), 0.0)
            }
        })
        .unwrap_err();
    check_carried(&e, Hazard::Waw, "memset", last_line, "memset", first_line);
    let V::LoopCarriedDependency(d) = &e.kind else { unreachable!() };
    assert_eq!((d.index, d.earlier_first_index), (100, 0));
}

/// One access of [`reported_iff_two_iterations_touch_an_element_with_a_write`]: what
/// (0 writes the tile, 1 reads it, 2 stores to the tensor, 3 loads from it) and where.
#[derive(Clone, Copy, Debug)]
struct Op {
    op: u8,
    /// Tile: partitions 0..32, 32..64 or 0..64. Tensor: the first row.
    place: u64,
    /// Tensor: rows, and whether every other one.
    rows: u64,
    row_step: bool,
    /// Columns `a..a + w`, every `k`-th from the `j`-th.
    a: u64,
    w: u64,
    k: u64,
    j: u64,
}

/// (whether in the tensor, element) of the elements of an access.
type Elements = Vec<(bool, u64)>;

const COLS: u64 = 24;
const ROWS: u64 = 8;

impl Op {
    fn normalized(mut self) -> Op {
        self.a %= COLS;
        self.w = self.w.clamp(1, COLS - self.a);
        self.k = self.k.clamp(1, self.w);
        self.w -= self.w % self.k;
        self.j %= self.k;
        self.place %= if self.op < 2 { 3 } else { ROWS };
        self.rows = self.rows.clamp(1, ROWS - self.place);
        if self.row_step {
            self.rows -= self.rows % 2;
            if self.rows == 0 {
                (self.rows, self.row_step) = (1, false);
            }
        }
        self
    }

    /// The columns, and the tile's partitions or the tensor's rows.
    fn cols(&self) -> Vec<u64> {
        (0..self.w / self.k).map(|m| self.a + self.j + m * self.k).collect()
    }
    fn rows(&self) -> Vec<u64> {
        match (self.op < 2, self.place) {
            (true, 0) => (0..32).collect(),
            (true, 1) => (32..64).collect(),
            (true, _) => (0..64).collect(),
            (false, p) if self.row_step => (0..self.rows / 2).map(|m| p + 2 * m).collect(),
            (false, p) => (p..p + self.rows).collect(),
        }
    }

    /// (buffer, element) of every element it touches, and whether it writes.
    fn elements(&self) -> (Elements, bool) {
        let hbm = self.op >= 2;
        let mut out = Vec::new();
        for r in self.rows() {
            out.extend(self.cols().into_iter().map(|c| (hbm, r * COLS + c)));
        }
        (out, self.op.is_multiple_of(2))
    }

    fn instruction(&self) -> &'static str {
        ["memset", "tensor_copy", "dma_copy", "dma_copy"][self.op as usize]
    }

    fn issue(
        &self,
        nc: &mut Nc,
        tile: Tile,
        hbm: Hbm,
        scratch: neuron_sim::Pool,
    ) -> Result<(), SimError> {
        let (rows, cols) = (self.rows().len() as u64, self.cols().len() as u64);
        let strided = |v: neuron_sim::TileView| {
            let v = v.cols(self.a..self.a + self.w);
            if self.k > 1 {
                v.split(0, self.k).swap(0, 1).at(self.j)
            } else {
                v
            }
        };
        let parts = [0..32, 32..64, 0..64][self.place.min(2) as usize].clone();
        let t = nc.tile(scratch, Dtype::F32, &[rows, cols])?;
        let mut h = hbm.rows(self.place..self.place + if self.row_step { self.rows } else { rows });
        if self.row_step {
            h = h.split(0, 2).index(1, 0);
        }
        h = h.cols(self.a..self.a + self.w);
        if self.k > 1 {
            h = h.split(1, self.k).swap(1, 2).index(1, self.j);
        }
        match self.op {
            0 => nc.memset(strided(tile.view().parts(parts)), 1.0),
            1 => nc.tensor_copy(t, strided(tile.view().parts(parts))),
            2 => nc.dma(h, t),
            _ => nc.dma(t, h),
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    (0u8..4, 0u64..8, 1u64..6, any::<bool>(), 0u64..COLS, 1u64..10, 1u64..4, 0u64..4).prop_map(
        |(op, place, rows, row_step, a, w, k, j)| {
            Op { op, place, rows, row_step, a, w, k, j }.normalized()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    /// On random small strided and dense accesses to a tile and a tensor allocated before an
    /// affine loop, the loop reports an error iff two iterations touch an element and one of
    /// them writes it (brute force over the elements), and the error is at the first access
    /// that does, naming an earlier one it conflicts with.
    #[test]
    fn reported_iff_two_iterations_touch_an_element_with_a_write(
        body in prop::collection::vec(prop::collection::vec(op(), 1..4), 1..6),
    ) {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let pool = nc.sbuf_pool("tracked", 1);
        let scratch = nc.sbuf_pool("scratch", 2);
        let tile = nc.tile_named(pool, "tile", Dtype::F32, &[64, COLS]).unwrap();
        let hbm = nc.hbm("hbm", Dtype::F32, &[ROWS, COLS]).unwrap();
        let result = nc.affine_range(0..body.len() as u64, |nc, i| {
            for o in &body[i as usize] {
                o.issue(nc, tile, hbm, scratch)?;
            }
            Ok(())
        });
        // The truth: the first access (in program order) touching an element an earlier
        // iteration touched, one of the two writing it; and the earlier ones it conflicts with.
        // (iteration, access, its elements, whether it writes)
        let mut seen: Vec<(usize, Op, Elements, bool)> = Vec::new();
        let mut truth = None;
        'find: for (i, ops) in body.iter().enumerate() {
            for o in ops {
                let (elems, writes) = o.elements();
                let earlier: Vec<(usize, Op)> = seen
                    .iter()
                    .filter(|(j, _, e, w)| {
                        *j < i && (writes || *w) && e.iter().any(|x| elems.contains(x))
                    })
                    .map(|(j, o, _, _)| (*j, *o))
                    .collect();
                if !earlier.is_empty() {
                    truth = Some((i, *o, earlier));
                    break 'find;
                }
                seen.push((i, *o, elems, writes));
            }
        }
        match (result, truth) {
            (Ok(()), None) => {}
            (Err(e), Some((i, o, earlier))) => {
                let V::LoopCarriedDependency(d) = &e.kind else { panic!("{e}") };
                prop_assert_eq!(d.index, i as u64, "{}", e);
                prop_assert_eq!(e.instruction, o.instruction(), "{}", e);
                let named = earlier.iter().any(|(j, eo)| {
                    let hazard = match (o.op.is_multiple_of(2), eo.op.is_multiple_of(2)) {
                        (false, _) => Hazard::Raw,
                        (true, false) => Hazard::War,
                        (true, true) => Hazard::Waw,
                    };
                    d.hazard == hazard
                        && d.earlier_instruction == eo.instruction()
                        && d.earlier_first_index <= *j as u64
                        && *j as u64 <= d.earlier_last_index
                        && (eo.op >= 2) == d.what.starts_with("HBM")
                });
                prop_assert!(named, "{} not among {:?}", e, earlier);
            }
            (r, t) => prop_assert!(false, "result {:?}, truth {:?}", r.err().map(|e| e.to_string()), t),
        }
    }
}
