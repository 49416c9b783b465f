//! Every hardware rule broken gives a typed error naming the instruction, the kernel's own
//! source line and the numbers involved — never a panic, never a silent wrong answer.

use neuron_sim::{Alu, Chip, Dtype, ExecMode, Nc, SimError, ViolationKind as V};

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
    let V::HbmOutOfBounds { tensor, index, shape, .. } = &e.kind else { panic!("{e}") };
    assert_eq!(
        (tensor.as_str(), &index[..], &shape[..]),
        ("x", &[127i64, 7][..], &[100u64, 8][..])
    );
    check(&e, "dma_copy", line, &["`x`", "[127, 7]", "[100, 8]", "out of bounds"]);
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
        matches!(e.kind, V::DtypeNotAllowed { engine: "Vector", dtype: Dtype::I32, .. }),
        "{e}"
    );
    check(&e, "tensor_tensor", line, &["Vector does not accept int32", "GpSimd"]);
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
            V::DtypeNotAllowed { engine: "Tensor", operand: "moving", dtype: Dtype::Bf16, .. }
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
    check(&e, "dma_copy", line, &["PSUM", "HBM and SBUF only"]);
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
    check(&e, "reciprocal", line, &["reciprocal runs on Vector or Scalar, not GpSimd"]);
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
    check(&e, "activation", line, &["Scalar cannot reduce with Max", "tensor_reduce"]);
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
    check(&e, "tensor_copy", line, &["4097"]);
    let (exp, args) = (neuron_sim::Act::Exp, neuron_sim::ActArgs::default());
    let scalar = neuron_sim::Engine::Scalar;
    let (e, line) = (nc.on(scalar).activation(p, s, exp, args).unwrap_err(), line!());
    assert!(matches!(e.kind, V::FreeSizeTooLarge { operand: "dst", .. }), "{e}");
    check(&e, "activation", line, &["4097"]);
    // 4096 fits.
    nc.tensor_copy(p.cols(0..4096), s.cols(0..4096)).unwrap();
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
