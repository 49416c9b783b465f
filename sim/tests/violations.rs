//! Every hardware rule broken gives a typed error naming the instruction, the kernel's own
//! source line and the numbers involved — never a panic, never a silent wrong answer.

use neuron_sim::{Alu, Chip, Dtype, ExecMode, Nc, SimError, ViolationKind as V};
use proptest::prelude::*;
use std::ops::Range;

fn nc() -> Nc {
    Nc::new(Chip::trn2(), ExecMode::BOTH)
}

/// Assert the error names this test file and `line`, the instruction, and each `needle`.
fn check(err: &SimError, instruction: &str, line: u32, needles: &[&str]) {
    assert_eq!(err.instruction, instruction, "{err}");
    assert!(err.loc.file.ends_with("violations.rs"), "{err}");
    assert_eq!(err.loc.line, line, "{err}");
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}:{}:", err.loc.file, line)), "{msg}");
    for n in needles {
        assert!(msg.contains(n), "message lacks {n:?}: {msg}");
    }
}

#[test]
fn more_than_128_partitions() {
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let (e, line) = (nc.tile(p, Dtype::F32, &[129, 4]).unwrap_err(), line!());
    assert!(matches!(e.kind, V::PartitionOverflow { partitions: 129, max: 128, .. }), "{e}");
    check(&e, "tile", line, &["129 partitions", "128"]);
}

#[test]
fn a_pool_of_zero_buffers() {
    let mut nc = nc();
    let p = nc.sbuf_pool("io", 0);
    let (e, line) = (nc.tile(p, Dtype::F32, &[128, 4]).unwrap_err(), line!());
    assert!(matches!(e.kind, V::Invalid(_)), "{e}");
    check(&e, "tile", line, &["pool `io` was made with 0 buffers", "at least 1"]);
}

#[test]
fn bad_start_partition() {
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let t = nc.tile(p, Dtype::F32, &[128, 4]).unwrap();
    nc.memset(t, 0.0).unwrap();
    // 64 partitions must start at 0 or 64 (§1.8).
    let (e, line) = (nc.tensor_copy(t.parts(64..128), t.parts(32..96)).unwrap_err(), line!());
    assert!(matches!(e.kind, V::BadStartPartition { start: 32, partitions: 64, .. }), "{e}");
    check(&e, "tensor_copy", line, &["starts at partition 32", "64 partitions"]);
    // Allowed: 32 partitions at 96, 64 at 64.
    nc.tensor_copy(t.parts(96..128), t.parts(64..96)).unwrap();
}

#[test]
fn moving_free_size_over_512() {
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let ps = nc.psum_pool("ps", 1);
    let st = nc.tile(p, Dtype::Bf16, &[128, 128]).unwrap();
    let mv = nc.tile(p, Dtype::Bf16, &[128, 640]).unwrap();
    let acc = nc.tile(ps, Dtype::F32, &[128, 640]).unwrap();
    nc.memset(st, 1.0).unwrap();
    nc.memset(mv, 1.0).unwrap();
    let (e, line) = (nc.matmul(acc, st, mv, false).unwrap_err(), line!());
    assert!(matches!(e.kind, V::MovingFreeTooLarge { n: 640, max: 512 }), "{e}");
    check(&e, "nc_matmul", line, &["640", "512"]);
}

#[test]
fn psum_bank_overflow() {
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let ps = nc.psum_pool("ps", 1);
    let st = nc.tile(p, Dtype::Bf16, &[128, 128]).unwrap();
    let mv = nc.tile(p, Dtype::Bf16, &[128, 512]).unwrap();
    nc.memset(st, 1.0).unwrap();
    nc.memset(mv, 1.0).unwrap();
    // Two banks; columns 256..768 of fp32 = bytes 1024..3072 straddle the bank boundary.
    let acc = nc.tile(ps, Dtype::F32, &[128, 1024]).unwrap();
    let (e, line) = (nc.matmul(acc.cols(256..768), st, mv, false).unwrap_err(), line!());
    assert!(
        matches!(e.kind, V::PsumBankOverflow { offset: 1024, bytes: 2048, bank_bytes: 2048, .. }),
        "{e}"
    );
    check(&e, "nc_matmul", line, &["PSUM bank overflow", "2048 bytes"]);
    // Inside one bank it is fine.
    nc.matmul(acc.cols(512..1024), st, mv, false).unwrap();
}

#[test]
fn sbuf_over_capacity_names_every_pool_and_tile() {
    let mut nc = nc(); // trn2: 229,376 bytes per partition
    let a = nc.sbuf_pool("weights", 2);
    let b = nc.sbuf_pool("io", 3);
    nc.tile_named(a, "w", Dtype::F32, &[128, 16384]).unwrap(); // 2 x 64 KiB
    nc.tile_named(b, "x", Dtype::Bf16, &[128, 8192]).unwrap(); // 3 x 16 KiB
    let (e, line) = (nc.tile_named(b, "y", Dtype::F32, &[128, 8192]).unwrap_err(), line!()); // +3 x 32 KiB
    let V::OverCapacity { needed, capacity, pools, .. } = &e.kind else { panic!("{e}") };
    assert_eq!(*needed, 2 * 65536 + 3 * 16384 + 3 * 32768);
    assert_eq!(*capacity, 229_376);
    assert_eq!(pools.len(), 2);
    check(
        &e,
        "tile",
        line,
        &[
            "SBUF over capacity",
            "needs 278528",
            "has 229376",
            "pool `weights` (bufs=2): 131072",
            "tile `w`: 2 x 65536",
            "pool `io` (bufs=3): 147456",
            "tile `x`: 3 x 16384",
            "tile `y`: 3 x 32768",
        ],
    );
    // The failed allocation did not count: a smaller one still fits.
    nc.tile_named(b, "y", Dtype::F32, &[128, 1024]).unwrap();
}

#[test]
fn psum_over_its_eight_banks() {
    let mut nc = nc();
    let ps = nc.psum_pool("acc", 4);
    nc.tile_named(ps, "a", Dtype::F32, &[128, 512]).unwrap(); // 4 x 1 bank
    let (e, line) = (nc.tile_named(ps, "b", Dtype::F32, &[128, 1024]).unwrap_err(), line!()); // 4 x 2
    assert!(
        matches!(e.kind, V::OverCapacity { memory: "PSUM", needed: 12, capacity: 8, .. }),
        "{e}"
    );
    check(&e, "tile", line, &["PSUM over capacity", "12 banks"]);
}

#[test]
fn hbm_out_of_bounds() {
    let mut nc = nc();
    let x = nc.hbm_input("x", Dtype::F32, &[100, 8], &[0.0; 800]).unwrap();
    let p = nc.sbuf_pool("p", 1);
    let t = nc.tile(p, Dtype::F32, &[128, 8]).unwrap();
    let (e, line) = (nc.dma(t, x.rows(0..128)).unwrap_err(), line!());
    assert_eq!(e.kind.name(), "hbm_out_of_bounds", "{e}");
    // The dimension and the range asked for, not an element worked back from a flat offset.
    check(&e, "dma_copy", line, &["src x dim 0 is 0..128, but x has 100 rows"]);
}

/// `at!(call)`: the call's result and its line (the line of `at!`, which is the call's).
macro_rules! at {
    ($e:expr) => {
        ($e, line!())
    };
}

/// An instruction's result and line (`at!`), the instruction, the violation's name and what
/// its message must hold.
type Case<'a> = ((Result<(), SimError>, u32), &'a str, &'a str, &'a [&'a str]);

/// Each case's instruction fails at its own line with the violation `name`, whose message
/// holds every needle.
fn refused(cases: Vec<Case>) {
    for ((r, line), instruction, name, needles) in cases {
        let e = r.expect_err(needles[0]);
        assert_eq!(e.kind.name(), name, "{e}");
        check(&e, instruction, line, needles);
    }
}

#[test]
fn an_hbm_slice_is_bounds_checked_dim_by_dim() {
    // x.slice(&[0..64, 256..768]) of a [128, 512] tensor used to wrap into the next rows:
    // its first and last elements are inside the tensor, so only values were wrong.
    for mode in [ExecMode::BOTH, ExecMode::TIMING] {
        let mut nc = Nc::new(Chip::trn2(), mode);
        let x = nc.hbm_input("x", Dtype::F32, &[128, 512], &[0.0; 128 * 512]).unwrap();
        let y = nc.hbm("y", Dtype::F32, &[128, 512]).unwrap();
        let p = nc.sbuf_pool("p", 1);
        let t = nc.tile(p, Dtype::F32, &[128, 512]).unwrap();
        let half = t.parts(0..64);
        let cols = x.cols(0..256);
        refused(vec![
            (
                at!(nc.dma(half, x.slice(&[0..64, 256..768]))),
                "dma_copy",
                "hbm_out_of_bounds",
                &["src x dim 1 is 256..768, but x has 512 columns"],
            ),
            (
                at!(nc.dma(t.parts(0..65), x.rows(64..129))),
                "dma_copy",
                "hbm_out_of_bounds",
                &["src x dim 0 is 64..129, but x has 128 rows"],
            ),
            (
                at!(nc.dma(y.slice(&[0..64, 256..768]), half)),
                "dma_copy",
                "hbm_out_of_bounds",
                &["dst y dim 1 is 256..768, but y has 512 columns"],
            ),
            (
                at!(nc.dma(t.cols(0..1), x.view().index(0, 128))),
                "dma_copy",
                "hbm_out_of_bounds",
                &["src x dim 0 is index 128, but x has 128 rows"],
            ),
            // A range of a view already sliced is checked against that view.
            (
                at!(nc.dma(t.cols(0..256), cols.cols(128..384))),
                "dma_copy",
                "hbm_out_of_bounds",
                &["src x dim 1 is 128..384, but the view being sliced has 256 there"],
            ),
        ]);
        // In bounds, the same shapes copy.
        nc.dma(half, x.slice(&[64..128, 0..512])).unwrap();
    }
}

#[test]
fn a_tile_view_is_bounds_checked_against_the_view_it_was_taken_from() {
    let mut nc = nc();
    let x = nc.hbm_input("x", Dtype::F32, &[128, 512], &[0.0; 128 * 512]).unwrap();
    let p = nc.sbuf_pool("p", 1);
    let two = nc.tile_named(p, "two", Dtype::F32, &[128, 2, 256]).unwrap();
    let xt = nc.tile_named(p, "xt", Dtype::F32, &[128, 512]).unwrap();
    // Inside the tile's 512 free elements, but past block 0's 256 columns (NKI: an index
    // error); and partitions 32..96 of a 64-partition view (tile partitions 32..96).
    refused(vec![
        (
            at!(nc.memset(two.at(0).cols(0..512), 0.0)),
            "memset",
            "tile_out_of_bounds",
            &["dst (tile `two`) free dim 0 is 0..512, but the view has 256 there"],
        ),
        (
            at!(nc.dma(xt.parts(0..64).parts(32..96), x.rows(0..64))),
            "dma_copy",
            "tile_out_of_bounds",
            &["dst (tile `xt`) partitions are 32..96, but the view has 64 partitions"],
        ),
        (
            at!(nc.memset(two.at(2), 0.0)),
            "memset",
            "tile_out_of_bounds",
            &["dst (tile `two`) free dim 0 is index 2, but the view has 2 there"],
        ),
        (
            at!(nc.memset(two.slice(0..128, &[0..1, 200..300]), 0.0)),
            "memset",
            "tile_out_of_bounds",
            &["dst (tile `two`) free dim 1 is 200..300, but the view has 256 there"],
        ),
        (
            at!(nc.tensor_copy(xt.cols(0..256), xt.parts(0..129))),
            "tensor_copy",
            "tile_out_of_bounds",
            &["src (tile `xt`) partitions are 0..129, but the view has 128 partitions"],
        ),
    ]);
    nc.memset(two.at(1).cols(0..256), 0.0).unwrap();
    nc.dma(xt.parts(64..128).parts(0..32), x.rows(0..32)).unwrap();
}

#[test]
#[allow(clippy::reversed_empty_ranges)] // the point: a kernel's computed range may run backwards
fn a_view_helper_that_cannot_apply_is_an_error_not_a_no_op() {
    let mut nc = nc();
    let x = nc.hbm_input("x", Dtype::F32, &[128, 512], &[0.0; 128 * 512]).unwrap();
    let v = nc.hbm_input("v", Dtype::F32, &[512], &[0.0; 512]).unwrap();
    let p = nc.sbuf_pool("p", 1);
    let t = nc.tile_named(p, "t", Dtype::F32, &[128, 512]).unwrap();
    let (sq, all) = (t.cols(0..128), t.view());
    let four = all.split(0, 2).split(0, 2).split(0, 2);
    // `x.cols(0..128).swap(0, 2)` meant as a transposing load used to be a plain copy.
    refused(vec![
        (
            at!(nc.dma(sq, x.cols(0..128).swap(0, 2))),
            "dma_copy",
            "bad_view",
            &["src x: swap(0, 2) on a 2-dim view"],
        ),
        (
            at!(nc.dma(sq, x.view().index(2, 0))),
            "dma_copy",
            "bad_view",
            &["src x: index(2, 0) on a 2-dim view"],
        ),
        (
            at!(nc.dma(sq, x.view().split(1, 3))),
            "dma_copy",
            "bad_view",
            &["src x: split(1, 3): 3 does not divide dim 1's 512"],
        ),
        (
            at!(nc.dma(sq, x.view().slice_dim(2, 0..1))),
            "dma_copy",
            "bad_view",
            &["src x: slice_dim(2, 0..1) on a 2-dim view"],
        ),
        (
            at!(nc.dma(t.cols(0..5), x.rows(10..5))),
            "dma_copy",
            "bad_view",
            &["src x: dim 0 is 10..5, a reversed range"],
        ),
        (at!(nc.dma(sq, v.view().t())), "dma_copy", "bad_view", &["src v: t() on a 1-dim view"]),
        (
            at!(nc.dma(sq, x.view().split(1, 2).split(1, 2).broadcast(2).broadcast(2))),
            "dma_copy",
            "bad_view",
            &["src x: broadcast(2) on a 5-dim view: an HBM view has at most 5 dims"],
        ),
        (
            at!(nc.memset(all.swap(0, 1), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): swap(0, 1) on a view with 1 free dim"],
        ),
        (
            at!(nc.memset(all.split(0, 3), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): split(0, 3): 3 does not divide free dim 0's 512"],
        ),
        (
            at!(nc.memset(all.expand(2, 4), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): expand(2, 4) on a view with 1 free dim"],
        ),
        (
            at!(nc.memset(four.broadcast_free(2), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): broadcast_free(2) on a view with 4 free dims: a view has at most 4"],
        ),
        (
            at!(nc.memset(t.parts(10..5), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): partitions 10..5, a reversed range"],
        ),
        (
            at!(nc.memset(all.slice_dim(1, 0..1), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): slice_dim(1, 0..1) on a view with 1 free dim"],
        ),
        (
            at!(nc.memset(all.at(0).at(0), 0.0)),
            "memset",
            "bad_view",
            &["dst (tile `t`): at(0) on a view with 0 free dims"],
        ),
    ]);
    // The same helpers within their bounds are accepted.
    nc.dma(t.cols(0..128), x.cols(0..128).t()).unwrap();
    nc.memset(four, 0.0).unwrap();
}

#[test]
fn dims2_of_another_rank_is_a_typed_error() {
    let mut nc = nc();
    let x = nc.hbm("x", Dtype::F32, &[2, 3, 4]).unwrap();
    let (e, line) = (x.try_dims2().unwrap_err(), line!());
    assert!(matches!(e.kind, V::ShapeMismatch(_)), "{e}");
    check(&e, "dims2", line, &["rank 3", "[2, 3, 4]"]);
    let y = nc.hbm("y", Dtype::F32, &[2, 3]).unwrap();
    assert_eq!((y.try_dims2().unwrap(), y.dims2()), ((2, 3), (2, 3)));
}

#[test]
fn errors_name_engines_as_the_docs_do_and_say_the_way_forward() {
    let mut nc = nc();
    let (p, ps) = (nc.sbuf_pool("p", 1), nc.psum_pool("ps", 1));
    let st = nc.tile(p, Dtype::Bf16, &[128, 128]).unwrap();
    let mv = nc.tile(p, Dtype::F32, &[128, 128]).unwrap();
    let (wide, col) =
        (nc.tile(p, Dtype::F32, &[128, 512]).unwrap(), nc.tile(p, Dtype::F32, &[1, 512]).unwrap());
    for t in [st, mv, wide] {
        nc.memset(t, 1.0).unwrap();
    }
    let acc = nc.tile(ps, Dtype::F32, &[128, 128]).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[128, 128]).unwrap();
    refused(vec![
        // The fp32 moving operand is the odd one out beside a bf16 stationary.
        (
            at!(nc.matmul(acc, st, mv, false)),
            "nc_matmul",
            "dtype_not_allowed",
            &["TensorE does not accept float32 for moving", "stationary is not"],
        ),
        (
            at!(nc.dma(y, acc)),
            "dma_copy",
            "memory_not_allowed",
            &[
                "src is in PSUM",
                "SBUF↔SBUF",
                "evacuate PSUM to SBUF with tensor_copy on VectorE/ScalarE first",
            ],
        ),
        (
            at!(nc.tensor_reduce(col, wide, Alu::Add, false)),
            "tensor_reduce",
            "shape_mismatch",
            &[
                "reductions run along the free axis",
                "matmul against a ones vector",
                "transpose first",
            ],
        ),
    ]);
}

#[test]
fn read_of_unwritten_memory() {
    let mut nc = nc();
    let y = nc.hbm("y", Dtype::F32, &[4, 4]).unwrap();
    let p = nc.sbuf_pool("p", 1);
    let t = nc.tile(p, Dtype::F32, &[4, 4]).unwrap();
    let (e, line) = (nc.dma(t, y).unwrap_err(), line!());
    assert!(matches!(e.kind, V::UnwrittenRead { partition: 0, element: 0, .. }), "{e}");
    check(&e, "dma_copy", line, &["HBM tensor `y`", "before anything wrote it"]);
    // A tile written only in part: the first unwritten element is named.
    let u = nc.tile(p, Dtype::F32, &[4, 4]).unwrap();
    nc.memset(u.cols(0..2), 1.0).unwrap();
    let v = nc.tile(p, Dtype::F32, &[4, 4]).unwrap();
    let (e, line) = (nc.tensor_copy(v, u).unwrap_err(), line!());
    assert!(matches!(e.kind, V::UnwrittenRead { partition: 0, element: 2, .. }), "{e}");
    check(&e, "tensor_copy", line, &["partition 0, element 2"]);
}

#[test]
fn dtype_not_allowed_on_the_engine() {
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let a = nc.tile(p, Dtype::I32, &[128, 8]).unwrap();
    nc.on(neuron_sim::Engine::GpSimd).memset(a, 1.0).unwrap();
    let (e, line) = (nc.tensor_tensor(a, a, a, Alu::Add).unwrap_err(), line!());
    assert!(
        matches!(e.kind, V::DtypeNotAllowed { engine: "VectorE", dtype: Dtype::I32, .. }),
        "{e}"
    );
    check(&e, "tensor_tensor", line, &["VectorE does not accept int32", "GpSimd"]);
    // The same on GpSimd is allowed (§2.3).
    nc.on(neuron_sim::Engine::GpSimd).tensor_tensor(a, a, a, Alu::Add).unwrap();

    let ps = nc.psum_pool("ps", 1);
    let st = nc.tile(p, Dtype::F32, &[128, 128]).unwrap();
    let mv = nc.tile(p, Dtype::Bf16, &[128, 128]).unwrap();
    nc.memset(st, 1.0).unwrap();
    nc.memset(mv, 1.0).unwrap();
    let acc = nc.tile(ps, Dtype::F32, &[128, 128]).unwrap();
    let (e, line) = (nc.matmul(acc, st, mv, false).unwrap_err(), line!());
    assert!(
        matches!(
            e.kind,
            V::DtypeNotAllowed { engine: "TensorE", operand: "stationary", dtype: Dtype::F32, .. }
        ),
        "{e}"
    );
    check(&e, "nc_matmul", line, &["fp32 matmul operands only pair with fp32"]);
}

#[test]
fn tile_used_after_its_buffer_was_reused() {
    let mut nc = nc();
    let p = nc.sbuf_pool("ring", 2);
    let mut tiles = Vec::new();
    for _ in 0..3 {
        let t = nc.tile(p, Dtype::F32, &[8, 8]).unwrap();
        nc.memset(t, 0.0).unwrap();
        tiles.push(t);
    }
    // bufs = 2: the third allocation reused the first one's buffer.
    let (e, line) = (nc.tensor_copy(tiles[1], tiles[0]).unwrap_err(), line!());
    assert!(matches!(e.kind, V::StaleTile { bufs: 2, .. }), "{e}");
    check(&e, "tensor_copy", line, &["pool `ring` has bufs = 2", "raise bufs"]);
    nc.tensor_copy(tiles[2], tiles[1]).unwrap();
}

#[test]
fn gpsimd_cannot_touch_psum_and_dma_cannot_either() {
    let mut nc = nc();
    let ps = nc.psum_pool("ps", 1);
    let acc = nc.tile(ps, Dtype::F32, &[128, 4]).unwrap();
    let (e, line) = (nc.on(neuron_sim::Engine::GpSimd).memset(acc, 0.0).unwrap_err(), line!());
    assert!(matches!(e.kind, V::MemoryNotAllowed { memory: "PSUM", .. }), "{e}");
    check(&e, "memset", line, &["GpSimd cannot access PSUM"]);
    let y = nc.hbm("y", Dtype::F32, &[128, 4]).unwrap();
    let (e, line) = (nc.dma(y, acc).unwrap_err(), line!());
    check(&e, "dma_copy", line, &["PSUM", "evacuate PSUM to SBUF"]);
}

#[test]
fn new_vector_instructions_check_their_operands() {
    use neuron_sim::{Engine, Scalar};
    let mut nc = nc();
    let p = nc.sbuf_pool("p", 1);
    let ps = nc.psum_pool("ps", 1);
    let a = nc.tile(p, Dtype::F32, &[128, 8]).unwrap();
    let b = nc.tile(p, Dtype::F32, &[128, 4]).unwrap();
    let col = nc.tile(p, Dtype::F32, &[128, 2]).unwrap();
    let (pa, pb) =
        (nc.tile(ps, Dtype::F32, &[128, 8]).unwrap(), nc.tile(ps, Dtype::F32, &[128, 8]).unwrap());
    for t in [a, b, col] {
        nc.memset(t, 1.0).unwrap();
    }
    nc.memset(pa, 1.0).unwrap();
    nc.memset(pb, 1.0).unwrap();
    // tensor_scalar_reduce: reduce_res must be [P, 1]; the reduce operator a reduction.
    let imm = (Alu::Multiply, Scalar::Imm(2.0));
    let (e, line) = (nc.tensor_scalar_reduce(a, a, imm, Alu::Add, col).unwrap_err(), line!());
    assert!(matches!(e.kind, V::ShapeMismatch(_)), "{e}");
    check(&e, "tensor_scalar_reduce", line, &["reduce_res must be [128 x 1], is [128 x 2]"]);
    let r = col.cols(0..1);
    let (e, line) = (nc.tensor_scalar_reduce(a, a, imm, Alu::IsGt, r).unwrap_err(), line!());
    check(&e, "tensor_scalar_reduce", line, &["IsGt is not a reduction operator"]);
    // scalar_tensor_tensor: in1 has data's shape; data and in1 not both in PSUM.
    let (e, line) = (nc.scalar_tensor_tensor(a, a, imm, Alu::Add, b).unwrap_err(), line!());
    assert!(matches!(e.kind, V::ShapeMismatch(_)), "{e}");
    check(&e, "scalar_tensor_tensor", line, &["data is [128 x [8]] but in1 is [128 x [4]]"]);
    let (e, line) = (nc.scalar_tensor_tensor(a, pa, imm, Alu::Add, pb).unwrap_err(), line!());
    assert!(matches!(e.kind, V::MemoryNotAllowed { operand: "in1", .. }), "{e}");
    check(&e, "scalar_tensor_tensor", line, &["cannot both be in PSUM"]);
    // tensor_tensor_scan: initial is an immediate or a [P, 1] column.
    let (init, add) = (Scalar::Col(col.view()), Alu::Add);
    let (e, line) = (nc.tensor_tensor_scan(a, a, pa, init, add, add).unwrap_err(), line!());
    check(&e, "tensor_tensor_scan", line, &["initial must be [128 x 1]"]);
    // reciprocal: VectorE or ScalarE only; dst has src's shape.
    let (e, line) = (nc.on(Engine::GpSimd).reciprocal(a, a).unwrap_err(), line!());
    check(&e, "reciprocal", line, &["reciprocal runs on VectorE or ScalarE, not GpSimd"]);
    let (e, line) = (nc.reciprocal(b, a).unwrap_err(), line!());
    check(&e, "reciprocal", line, &["dst is [128 x [4]] but src is [128 x [8]]"]);
}

#[test]
fn transpose_mode_shuffle_and_activation_reduce_rules() {
    use neuron_sim::{Act, ActArgs};
    let mut nc = nc();
    let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
    let data = nc.tile(sb, Dtype::F32, &[64, 16]).unwrap();
    let eye = nc.tile(sb, Dtype::F32, &[64, 64]).unwrap();
    let eye_bf = nc.tile(sb, Dtype::Bf16, &[64, 64]).unwrap();
    let sq = nc.tile(sb, Dtype::F32, &[128, 16]).unwrap();
    let bf = nc.tile(sb, Dtype::Bf16, &[128, 16]).unwrap();
    let col = nc.tile(sb, Dtype::F32, &[128, 1]).unwrap();
    let out = nc.tile(ps, Dtype::F32, &[16, 64]).unwrap();
    for t in [data, eye, sq, col] {
        nc.memset(t, 0.0).unwrap();
    }
    // nc_matmul(is_transpose): moving is a [P, P] identity of data's dtype; dst [F, P] in PSUM.
    let (e, line) =
        (nc.matmul_transpose(out, data, eye.parts(0..64).cols(0..8)).unwrap_err(), line!());
    check(&e, "nc_matmul", line, &["by a [64 x 64] identity, moving is [64 x 8]"]);
    let (e, line) = (nc.matmul_transpose(out, data, eye_bf).unwrap_err(), line!());
    assert!(matches!(e.kind, V::DtypeNotAllowed { operand: "moving", .. }), "{e}");
    check(&e, "nc_matmul", line, &["transpose mode keeps the dtype"]);
    let (e, line) = (nc.matmul_transpose(sq.parts(0..16), data, eye).unwrap_err(), line!());
    assert!(matches!(e.kind, V::MemoryNotAllowed { operand: "dst", .. }), "{e}");
    check(&e, "nc_matmul", line, &["only to PSUM"]);
    // nc_stream_shuffle: a mask entry is 0..31 or 255; dtypes match; start partitions follow
    // the active partition count; a copied source partition exists.
    let (e, line) = (nc.stream_shuffle(sq, sq, [40; 32]).unwrap_err(), line!());
    check(&e, "nc_stream_shuffle", line, &["shuffle_mask[0] is 40"]);
    let (e, line) = (nc.stream_shuffle(bf, sq, [0; 32]).unwrap_err(), line!());
    check(&e, "nc_stream_shuffle", line, &["dst must match src"]);
    let (e, line) =
        (nc.stream_shuffle(sq.parts(0..64), sq.parts(32..64), [0; 32]).unwrap_err(), line!());
    assert!(matches!(e.kind, V::BadStartPartition { operand: "src", start: 32, partitions: 64 }));
    check(&e, "nc_stream_shuffle", line, &["starts at partition 32"]);
    let (e, line) =
        (nc.stream_shuffle(sq.parts(0..32), sq.parts(0..4), [5; 32]).unwrap_err(), line!());
    check(&e, "nc_stream_shuffle", line, &["copy src partition 5, but src has 4 partitions"]);
    // activation: the reduction adds; max is refused, with what to do instead.
    let args = ActArgs::default().reduce_with(Alu::Max, col);
    let (e, line) = (nc.activation(sq, sq, Act::Exp, args).unwrap_err(), line!());
    assert!(matches!(e.kind, V::ReduceOpNotAllowed { op: Alu::Max, .. }), "{e}");
    check(&e, "activation", line, &["ScalarE cannot reduce with Max", "tensor_reduce"]);
}

#[test]
fn transposes_into_one_psum_tile_from_two_affine_iterations_are_a_waw_not_an_accumulation() {
    // Matmuls accumulating into one PSUM tile may span affine iterations; a transpose-mode
    // matmul overwrites its dst like any write, so two iterations writing it conflict.
    let mut nc = nc();
    let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
    let data = nc.tile(sb, Dtype::F32, &[32, 32]).unwrap();
    let eye = nc.tile(sb, Dtype::F32, &[32, 32]).unwrap();
    nc.memset(data, 1.0).unwrap();
    // The identity: ones, kept where partition - column == 0 (affine_select).
    nc.memset(eye, 1.0).unwrap();
    let diagonal = neuron_sim::Affine::new2(0, 1, -1);
    nc.affine_select(eye, eye, diagonal, neuron_sim::Cmp::Eq, 0.0).unwrap();
    let out = nc.tile(ps, Dtype::F32, &[32, 32]).unwrap();
    let e = nc.affine_range(0..2, |nc, _| nc.matmul_transpose(out, data, eye)).unwrap_err();
    assert!(matches!(e.kind, V::LoopCarriedDependency(_)), "{e}");
    assert!(e.to_string().contains("WAW"), "{e}");
}

#[test]
fn a_partition_broadcast_into_an_empty_view_is_an_error() {
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let (src, dst) =
        (nc.tile(sb, Dtype::F32, &[1, 8]).unwrap(), nc.tile(sb, Dtype::F32, &[64, 8]).unwrap());
    nc.memset(src, 1.0).unwrap();
    let (e, line) = (nc.partition_broadcast(dst.parts(0..0), src).unwrap_err(), line!());
    check(&e, "nc_stream_shuffle", line, &["dst is empty"]);
}

#[test]
fn a_tensor_e_transpose_writes_within_one_psum_bank() {
    // A transpose is a matmul by an identity (§2.3): its output lives in one PSUM bank on
    // NeuronCore-v2/v3, as a matmul's does.
    let mut nc = nc();
    let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
    let sq = nc.tile(sb, Dtype::F32, &[128, 128]).unwrap();
    let eye = nc.tile(sb, Dtype::F32, &[128, 128]).unwrap();
    nc.memset(sq, 1.0).unwrap();
    nc.memset(eye, 1.0).unwrap();
    nc.affine_select(eye, eye, neuron_sim::Affine::new2(0, 1, -1), neuron_sim::Cmp::Eq, 0.0)
        .unwrap();
    // Two banks of fp32; columns 448..576 are bytes 1792..2304, across the edge at 2048.
    let out = nc.tile(ps, Dtype::F32, &[128, 1024]).unwrap();
    let (e, line) = (nc.transpose(out.cols(448..576), sq).unwrap_err(), line!());
    assert!(
        matches!(e.kind, V::PsumBankOverflow { offset: 1792, bytes: 512, bank_bytes: 2048, .. }),
        "{e}"
    );
    check(&e, "nc_transpose", line, &["PSUM bank overflow"]);
    let (e, line) = (nc.matmul_transpose(out.cols(448..576), sq, eye).unwrap_err(), line!());
    assert!(matches!(e.kind, V::PsumBankOverflow { offset: 1792, .. }), "{e}");
    check(&e, "nc_matmul", line, &["PSUM bank overflow"]);
    // Inside one bank both are fine.
    nc.transpose(out.cols(384..512), sq).unwrap();
    nc.matmul_transpose(out.cols(512..640), sq, eye).unwrap();
}

#[test]
fn a_psum_destination_holds_at_most_its_free_size() {
    // §2.1: at most 4K free elements per partition when an operand is in PSUM — the
    // destination as well as the source.
    let mut nc = nc();
    let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
    let s = nc.tile(sb, Dtype::Bf16, &[128, 4097]).unwrap();
    let p = nc.tile(ps, Dtype::Bf16, &[128, 4097]).unwrap();
    nc.memset(s, 1.0).unwrap();
    let (e, line) = (nc.tensor_copy(p, s).unwrap_err(), line!());
    assert!(
        matches!(e.kind, V::FreeSizeTooLarge { operand: "dst", elems: 4097, memory: "PSUM", .. }),
        "{e}"
    );
    // The message names the rule and where it is written down.
    let rule = [
        "max_free_elems_psum: 64K and 4K",
        "Vector/Scalar instruction limit",
        "neuroncore.md §2.1",
    ];
    check(&e, "tensor_copy", line, &[&["4097"], &rule[..]].concat());
    let (exp, args) = (neuron_sim::Act::Exp, neuron_sim::ActArgs::default());
    let scalar = neuron_sim::Engine::Scalar;
    let (e, line) = (nc.on(scalar).activation(p, s, exp, args).unwrap_err(), line!());
    assert!(matches!(e.kind, V::FreeSizeTooLarge { operand: "dst", .. }), "{e}");
    check(&e, "activation", line, &["4097", "neuroncore.md §2.1"]);
    // 4096 fits.
    nc.tensor_copy(p.cols(0..4096), s.cols(0..4096)).unwrap();
}

#[test]
fn bn_stats_takes_at_most_512_elements_naming_its_rule() {
    // §2.1: bn_stats is limited to 512 elements per partition (bn_stats_fmax), a limit of
    // its own rather than the 64K of an SBUF operand.
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let s = nc.tile(sb, Dtype::F32, &[128, 513]).unwrap();
    let d = nc.tile(sb, Dtype::F32, &[128, 6]).unwrap();
    nc.memset(s, 1.0).unwrap();
    let (e, line) = (nc.bn_stats(d, s).unwrap_err(), line!());
    assert!(
        matches!(e.kind, V::FreeSizeTooLarge { operand: "src", elems: 513, max: 512, .. }),
        "{e}"
    );
    check(&e, "bn_stats", line, &["513", "bn_stats_fmax", "nki.isa.bn_stats", "§2.1"]);
    assert!(!e.to_string().contains("64K"), "{e}");
    nc.bn_stats(d, s.cols(0..512)).unwrap();
}

#[test]
fn scalar_e_tensor_scalar_takes_multiply_then_add_only() {
    // §2.3: ScalarE's tensor_scalar is its activation datapath, (x · scale) + bias: it
    // accepts (multiply, add), (multiply) and (add).
    use neuron_sim::{Engine, Scalar};
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, Dtype::F32, &[128, 64]).unwrap();
    nc.memset(t, 1.0).unwrap();
    let (m, a) = ((Alu::Multiply, Scalar::Imm(2.0)), (Alu::Add, Scalar::Imm(1.0)));
    for (op0, op1) in [(a, Some(m)), (m, Some(m)), (a, Some(a))] {
        let (e, line) = (nc.on(Engine::Scalar).tensor_scalar(t, t, op0, op1).unwrap_err(), line!());
        check(&e, "tensor_scalar", line, &["accepts only (multiply, add), (multiply) or (add)"]);
    }
    for (op0, op1) in [(m, Some(a)), (m, None), (a, None)] {
        nc.on(Engine::Scalar).tensor_scalar(t, t, op0, op1).unwrap();
    }
    // VectorE takes any pair.
    nc.tensor_scalar(t, t, a, Some(m)).unwrap();
}

#[test]
fn a_neuroncore_v4_matmul_output_may_span_every_psum_bank() {
    // §2.1: on v4, N reaches 4096 with an fp32 result or 8192 with bf16 (16 KiB per
    // partition, the eight banks).
    let matmul = |dst: Dtype, n: u64| {
        // (A wider fp32 dst does not fit PSUM: the moving side is what breaks the rule.)
        let out_n = if dst == Dtype::F32 { n.min(4096) } else { n };
        let mut nc = Nc::new(Chip::trn3(), ExecMode::TIMING);
        let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
        let st = nc.tile(sb, Dtype::Bf16, &[128, 128]).unwrap();
        let mv = nc.tile(sb, Dtype::Bf16, &[128, n]).unwrap();
        let out = nc.tile(ps, dst, &[128, out_n]).unwrap();
        nc.matmul(out, st, mv, false)
    };
    matmul(Dtype::Bf16, 8192).unwrap();
    matmul(Dtype::F32, 4096).unwrap();
    let e = matmul(Dtype::F32, 4104).unwrap_err();
    assert!(matches!(e.kind, V::MovingFreeTooLarge { n: 4104, max: 4096 }), "{e}");
    assert!(e.to_string().contains("4104"), "{e}");
}

/// A range over a dim of 1 to 5 elements: mostly in bounds, else past the end or reversed.
fn range() -> impl Strategy<Value = Range<u64>> {
    prop_oneof![
        9 => (0u64..5, 0u64..4).prop_map(|(a, n)| a..a + n),
        1 => (0u64..7, 0u64..7).prop_map(|(a, b)| a..b),
    ]
}

/// Ranges of up to 4 dims (one more than the views below have).
fn ranges() -> impl Strategy<Value = Vec<Range<u64>>> {
    prop::collection::vec(range(), 1..5)
}

/// Whether every range lies in its dim (and there is a dim for it), and none is empty.
fn fits(ranges: &[Range<u64>], sizes: &[u64]) -> bool {
    ranges.len() <= sizes.len()
        && ranges.iter().zip(sizes).all(|(r, &n)| r.start < r.end && r.end <= n)
}

/// The shape a slice has when it is accepted (1 where it is not, for a tensor to copy to).
fn sliced(ranges: &[Range<u64>], sizes: &[u64]) -> Vec<u64> {
    let sliced = |i: usize| ranges.get(i).map_or(sizes[i], |r| r.end.saturating_sub(r.start));
    (0..sizes.len()).map(|i| sliced(i).max(1)).collect()
}

proptest! {
    /// A slice of an HBM tensor is accepted exactly when each range lies in its dim, and
    /// then copies exactly those elements; any other is a typed error — never a panic, never
    /// a wrap into the next row.
    #[test]
    fn an_hbm_slice_is_accepted_exactly_when_every_range_is_in_its_dim(
        shape in prop::collection::vec(1u64..6, 1..4),
        ranges in ranges(),
    ) {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
        let elems = shape.iter().product::<u64>();
        let data: Vec<f32> = (0..elems).map(|i| i as f32).collect();
        let x = nc.hbm_input("x", Dtype::F32, &shape, &data).unwrap();
        let out_shape = sliced(&ranges, &shape);
        let y = nc.hbm("y", Dtype::F32, &out_shape).unwrap();
        let r = nc.dma(y, x.slice(&ranges));
        prop_assert_eq!(r.is_ok(), fits(&ranges, &shape), "{:?}", r);
        if let Err(e) = r {
            prop_assert!(
                ["hbm_out_of_bounds", "bad_view", "bad_access_pattern"].contains(&e.kind.name()),
                "{e}"
            );
            return Ok(());
        }
        // Element j of y is x at (start + j) in every dim.
        let got = nc.read_hbm(y).unwrap().to_vec();
        let mut want = Vec::new();
        for j in 0..out_shape.iter().product::<u64>() {
            let (mut rest, mut flat, mut stride) = (j, 0, 1);
            for d in (0..shape.len()).rev() {
                let start = ranges.get(d).map_or(0, |r| r.start);
                flat += (start + rest % out_shape[d]) * stride;
                rest /= out_shape[d];
                stride *= shape[d];
            }
            want.push(flat as f32);
        }
        prop_assert_eq!(got, want);
    }

    /// A view of a tile is accepted exactly when its partition range and each free range lie
    /// in the view they restrict (not merely in the tile's memory).
    #[test]
    fn a_tile_view_is_accepted_exactly_when_every_range_is_in_its_dim(
        shape in prop::collection::vec(1u64..6, 2..4),
        parts in range(),
        free in ranges(),
    ) {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
        let p = nc.sbuf_pool("p", 1);
        let t = nc.tile(p, Dtype::F32, &shape).unwrap();
        let view = t.slice(parts.start as u32..parts.end as u32, &free);
        let np = parts.end.saturating_sub(parts.start).max(1);
        let cols = sliced(&free, &shape[1..]).iter().product::<u64>();
        let src = nc.hbm_input("src", Dtype::F32, &[np, cols], &vec![1.0; (np * cols) as usize]);
        let r = nc.dma(view, src.unwrap());
        let ok = fits(&[parts], &shape[..1]) && fits(&free, &shape[1..]);
        prop_assert_eq!(r.is_ok(), ok, "{:?}", r);
        if let Err(e) = r {
            prop_assert!(
                ["tile_out_of_bounds", "bad_view", "bad_access_pattern"].contains(&e.kind.name()),
                "{e}"
            );
        }
    }
}
