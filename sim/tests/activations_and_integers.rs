//! The activation functions, integer dtypes and integer/bitwise ALU operators added after the
//! first instruction set (neuroncore.md §2.2): what the functional model computes through
//! real instructions, what it refuses, and that the program hash tells them apart.

use neuron_sim::{
    Act, ActArgs, Alu, Chip, Dtype, Engine, ExecMode, Nc, Scalar, Tile, ViolationKind as V,
};

fn nc() -> Nc {
    Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL)
}

/// Each new function through a ScalarE `activation`, against `Act::apply` and, for a few
/// points, values worked out by hand.
#[test]
fn activation_evaluates_the_new_functions() {
    let x = [-2.0f32, -0.5, 0.0, 1.0, 3.0];
    for (f, at_one) in [
        (Act::Erf, 0.842_700_8f32),
        (Act::GeluApprxSigmoid, 0.845_796_4), // 1/(1 + e^-1.702)
        (Act::Mish, 0.865_098_4),
        (Act::Arctan, std::f32::consts::FRAC_PI_4),
        (Act::GeluDx, 1.083_315_5),
        (Act::SiluDx, 0.927_670_5),
        (Act::ErfDx, 0.415_107_5),
        (Act::GeluApprxSigmoidDx, 1.067_779_6), // σ(k) + kσ(k)(1 − σ(k)), k = 1.702
    ] {
        let mut nc = nc();
        let xh = nc.hbm_input("x", Dtype::F32, &[1, 5], &x).unwrap();
        let yh = nc.hbm("y", Dtype::F32, &[1, 5]).unwrap();
        let sb = nc.sbuf_pool("sb", 1);
        let t = nc.tile(sb, Dtype::F32, &[1, 5]).unwrap();
        nc.dma(t, xh).unwrap();
        nc.activation(t, t, f, ActArgs::default()).unwrap();
        nc.dma(yh, t).unwrap();
        let y = nc.read_hbm(yh).unwrap().to_vec();
        for (v, got) in x.iter().zip(&y) {
            assert_eq!(*got, f.apply(*v), "{f:?}({v})");
        }
        assert!((y[3] - at_one).abs() < 2e-6, "{f:?}(1) = {} want {at_one}", y[3]);
    }
}

/// Programs that differ only in the activation function hash differently, for every pair
/// of functions, old and new.
#[test]
fn programs_differing_only_in_the_function_hash_apart() {
    let hashes: Vec<String> = Act::ALL
        .iter()
        .map(|&f| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            let sb = nc.sbuf_pool("sb", 1);
            let t = nc.tile(sb, Dtype::F32, &[128, 64]).unwrap();
            nc.activation(t, t, f, ActArgs::default()).unwrap();
            nc.program_hash()
        })
        .collect();
    for i in 0..hashes.len() {
        for j in 0..i {
            assert_ne!(hashes[i], hashes[j], "{:?} and {:?}", Act::ALL[i], Act::ALL[j]);
        }
    }
}

const INTS: [Dtype; 6] = [Dtype::I32, Dtype::U8, Dtype::I8, Dtype::U16, Dtype::I16, Dtype::U32];

/// fp32 values in HBM, DMA'd into an integer tile (the conversion on write) and back.
fn through(dt: Dtype, x: &[f32]) -> Vec<f32> {
    let mut nc = nc();
    let n = x.len() as u64;
    let xh = nc.hbm_input("x", Dtype::F32, &[1, n], x).unwrap();
    let yh = nc.hbm("y", Dtype::F32, &[1, n]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, dt, &[1, n]).unwrap();
    nc.dma(t, xh).unwrap();
    nc.dma(yh, t).unwrap();
    nc.read_hbm(yh).unwrap().to_vec()
}

/// A DMA into an integer tile converts as docs/neuroncore.md §2.2 assumes: round half to
/// even, saturate at the type's bounds, NaN to 0.
#[test]
fn dma_into_integer_tiles_rounds_half_even_and_saturates() {
    let x = [255.5f32, 254.5, 300.0, -1.0, f32::NAN, 2.5, -2.5, 127.6, -128.6, 70_000.0];
    let want: [(Dtype, [f32; 10]); 5] = [
        (Dtype::U8, [255.0, 254.0, 255.0, 0.0, 0.0, 2.0, 0.0, 128.0, 0.0, 255.0]),
        (Dtype::I8, [127.0, 127.0, 127.0, -1.0, 0.0, 2.0, -2.0, 127.0, -128.0, 127.0]),
        (Dtype::U16, [256.0, 254.0, 300.0, 0.0, 0.0, 2.0, 0.0, 128.0, 0.0, 65535.0]),
        (Dtype::I16, [256.0, 254.0, 300.0, -1.0, 0.0, 2.0, -2.0, 128.0, -129.0, 32767.0]),
        (Dtype::U32, [256.0, 254.0, 300.0, 0.0, 0.0, 2.0, 0.0, 128.0, 0.0, 70_000.0]),
    ];
    for (dt, want) in want {
        assert_eq!(through(dt, &x), want, "{dt}");
    }
}

/// An integer dtype is not a TensorE dtype: a matmul with an integer stationary or moving
/// tensor is a typed error naming the operand and the dtype.
#[test]
fn integer_matmul_is_refused_naming_the_operand() {
    for dt in INTS {
        for integer_side in ["stationary", "moving"] {
            let mut nc = nc();
            let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
            let int_t = nc.tile(sb, dt, &[128, 128]).unwrap();
            let f_t = nc.tile(sb, Dtype::Bf16, &[128, 128]).unwrap();
            let acc = nc.tile(ps, Dtype::F32, &[128, 128]).unwrap();
            let (s, m) = if integer_side == "stationary" { (int_t, f_t) } else { (f_t, int_t) };
            let e = nc.matmul(acc, s, m, false).unwrap_err();
            match e.kind {
                V::DtypeNotAllowed { engine: "TensorE", operand, dtype, .. } => {
                    assert_eq!((operand, dtype), (integer_side, dt), "{e}");
                }
                _ => panic!("{dt} {integer_side}: {e}"),
            }
            assert!(e.to_string().contains(dt.name()), "{e}");
        }
    }
}

/// The activation table takes floating-point inputs: every integer src is refused.
#[test]
fn activation_refuses_integer_inputs() {
    for dt in INTS {
        let mut nc = nc();
        let sb = nc.sbuf_pool("sb", 1);
        let x = nc.tile(sb, dt, &[128, 8]).unwrap();
        let y = nc.tile(sb, Dtype::F32, &[128, 8]).unwrap();
        let e = nc.activation(y, x, Act::Exp, ActArgs::default()).unwrap_err();
        assert!(
            matches!(e.kind, V::DtypeNotAllowed { operand: "src", dtype, .. } if dtype == dt),
            "{dt}: {e}"
        );
    }
}

/// 32-bit integer tensor_tensor runs on GpSimd (int32 per §2.3, uint32 assumed alike); the
/// 8- and 16-bit integers stay on VectorE.
#[test]
fn thirty_two_bit_integer_tensor_tensor_runs_on_gpsimd() {
    for dt in INTS {
        let mut nc = nc();
        let sb = nc.sbuf_pool("sb", 1);
        let a = nc.tile(sb, dt, &[128, 8]).unwrap();
        nc.on(Engine::GpSimd).memset(a, 3.0).unwrap();
        let on_vector = nc.tensor_tensor(a, a, a, Alu::Add);
        if dt.size() == 4 {
            let e = on_vector.unwrap_err();
            assert!(
                matches!(e.kind, V::DtypeNotAllowed { engine: "VectorE", dtype, .. } if dtype == dt),
                "{dt}: {e}"
            );
            nc.on(Engine::GpSimd).tensor_tensor(a, a, a, Alu::Add).unwrap();
        } else {
            on_vector.unwrap();
        }
    }
}

/// VectorE's performance mode is for bf16/fp16 (neuroncore.md §1.5): a 16-bit integer copy
/// on trn2 costs what an fp32 one does, a bf16 one less.
#[test]
fn sixteen_bit_integers_get_no_performance_mode() {
    let busy = |dt: Dtype| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let sb = nc.sbuf_pool("sb", 1);
        let x = nc.tile(sb, dt, &[128, 2048]).unwrap();
        let y = nc.tile(sb, dt, &[128, 2048]).unwrap();
        nc.tensor_copy(y, x).unwrap();
        nc.tensor_tensor(y, x, y, Alu::Add).unwrap();
        nc.profile().engines[Engine::Vector.index()].busy_cycles
    };
    let (f32_, bf16) = (busy(Dtype::F32), busy(Dtype::Bf16));
    assert!(bf16 < f32_, "bf16 {bf16} vs fp32 {f32_}");
    assert_eq!(busy(Dtype::U16), f32_);
    assert_eq!(busy(Dtype::I16), f32_);
}

/// Programs that differ only in a tile's dtype hash differently, for every pair of dtypes.
#[test]
fn programs_differing_only_in_the_dtype_hash_apart() {
    let hashes: Vec<String> = Dtype::ALL
        .iter()
        .map(|&dt| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            let sb = nc.sbuf_pool("sb", 1);
            let t = nc.tile(sb, dt, &[128, 64]).unwrap();
            nc.on(Engine::GpSimd).memset(t, 1.0).unwrap();
            nc.program_hash()
        })
        .collect();
    for i in 0..hashes.len() {
        for j in 0..i {
            assert_ne!(hashes[i], hashes[j], "{} and {}", Dtype::ALL[i], Dtype::ALL[j]);
        }
    }
}

/// `vals` in an SBUF tile of `dt` (one partition), through HBM.
fn load(nc: &mut Nc, name: &str, dt: Dtype, vals: &[f32]) -> Tile {
    let n = vals.len() as u64;
    let h = nc.hbm_input(name, dt, &[1, n], vals).unwrap();
    let pool = nc.sbuf_pool(&format!("in_{name}"), 1);
    let t = nc.tile(pool, dt, &[1, n]).unwrap();
    nc.dma(t, h).unwrap();
    t
}

/// The values of an SBUF tile, through an fp32 HBM tensor.
fn fetch(nc: &mut Nc, t: Tile, n: u64) -> Vec<f32> {
    let h = nc.hbm("out", Dtype::F32, &[1, n]).unwrap();
    nc.dma(h, t).unwrap();
    nc.read_hbm(h).unwrap().to_vec()
}

/// Bitwise and, or, xor on uint8 tiles on VectorE and on int32 tiles on GpSimd, against
/// the bit patterns worked out here; the result is written through the dtype.
#[test]
fn tensor_tensor_bitwise_ops_on_integer_tiles() {
    let a = [0b1100_1010u8, 0xFF, 0x0F, 0];
    let b = [0b1010_0110u8, 0x81, 0xF0, 0x55];
    let expect = |f: fn(u8, u8) -> u8| -> Vec<f32> {
        a.iter().zip(&b).map(|(&x, &y)| f(x, y) as f32).collect()
    };
    let (af, bf): (Vec<f32>, Vec<f32>) =
        a.iter().zip(&b).map(|(&x, &y)| (x as f32, y as f32)).unzip();
    for (op, want) in [
        (Alu::BitwiseAnd, expect(|x, y| x & y)),
        (Alu::BitwiseOr, expect(|x, y| x | y)),
        (Alu::BitwiseXor, expect(|x, y| x ^ y)),
    ] {
        for (dt, eng) in [(Dtype::U8, Engine::Vector), (Dtype::I32, Engine::GpSimd)] {
            let mut nc = nc();
            let (x, y) = (load(&mut nc, "a", dt, &af), load(&mut nc, "b", dt, &bf));
            nc.on(eng).tensor_tensor(x, x, y, op).unwrap();
            assert_eq!(fetch(&mut nc, x, 4), want, "{op:?} on {dt}");
        }
    }
    // Negative int16 values in two's complement: −16 & 0x7F = 0x70, −16 ^ 0x7F = 0b…1000_1111
    // = −113, −16 ^ −1 = 15.
    let mut nc = nc();
    let (x, y) = (
        load(&mut nc, "a", Dtype::I16, &[-16.0, -16.0]),
        load(&mut nc, "b", Dtype::I16, &[127.0, -1.0]),
    );
    let z = load(&mut nc, "z", Dtype::I16, &[0.0, 0.0]);
    nc.tensor_tensor(z, x, y, Alu::BitwiseAnd).unwrap();
    assert_eq!(fetch(&mut nc, z, 2), [112.0, -16.0]);
    nc.tensor_tensor(z, x, y, Alu::BitwiseXor).unwrap();
    assert_eq!(fetch(&mut nc, z, 2), [-113.0, 15.0]);
}

/// Shifts by immediates through `tensor_scalar`: right shifts floor-divide (arithmetic for
/// the negative int16 values), left shifts multiply, and a left shift past uint8's range
/// saturates on the write (the assumed conversion, not numpy's wrap).
#[test]
fn tensor_scalar_shifts_and_their_saturation() {
    let mut nc = nc();
    let x = load(&mut nc, "x", Dtype::I16, &[96.0, -96.0, 7.0, -7.0, 1.0]);
    let y = load(&mut nc, "y", Dtype::I16, &[0.0; 5]);
    nc.tensor_scalar(y, x, (Alu::RightShift, Scalar::Imm(2.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, y, 5), [24.0, -24.0, 1.0, -2.0, 0.0]);
    nc.tensor_scalar(y, x, (Alu::LeftShift, Scalar::Imm(3.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, y, 5), [768.0, -768.0, 56.0, -56.0, 8.0]);
    // Two ops: (x << 12) >> 12 keeps in-range values and saturates out-of-range ones only
    // on the write, since the value in between is not written.
    nc.tensor_scalar(
        y,
        x,
        (Alu::LeftShift, Scalar::Imm(12.0)),
        Some((Alu::RightShift, Scalar::Imm(12.0))),
    )
    .unwrap();
    assert_eq!(fetch(&mut nc, y, 5), [96.0, -96.0, 7.0, -7.0, 1.0]);

    let mut nc = self::nc();
    let x = load(&mut nc, "x", Dtype::U8, &[200.0, 100.0, 1.0]);
    nc.tensor_scalar(x, x, (Alu::LeftShift, Scalar::Imm(1.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, x, 3), [255.0, 200.0, 2.0]);
}

/// A bitwise operator's scalar is an integer, as its data is (neuroncore.md §2.2): a
/// `[P,1]` int32 column masks a uint8 tile row by row, where other operators' columns must
/// be fp32; a float column or a fractional immediate is refused naming the scalar, in
/// `tensor_scalar` and `scalar_tensor_tensor`.
#[test]
fn a_bitwise_operator_takes_an_integer_scalar() {
    // Two partitions, masked by 0x0F and 0xF0.
    let mut nc = nc();
    let xh = nc
        .hbm_input("x", Dtype::U8, &[2, 2], &[0xAB as f32, 0x5C as f32, 0xAB as f32, 0x5C as f32])
        .unwrap();
    let mh = nc.hbm_input("m", Dtype::I32, &[2, 1], &[15.0, 240.0]).unwrap();
    let fh = nc.hbm_input("f", Dtype::F32, &[2, 1], &[15.0, 240.0]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let (x, m, f) = (
        nc.tile(sb, Dtype::U8, &[2, 2]).unwrap(),
        nc.tile(sb, Dtype::I32, &[2, 1]).unwrap(),
        nc.tile(sb, Dtype::F32, &[2, 1]).unwrap(),
    );
    nc.dma(x, xh).unwrap();
    nc.dma(m, mh).unwrap();
    nc.dma(f, fh).unwrap();
    let y = nc.tile(sb, Dtype::U8, &[2, 2]).unwrap();
    nc.tensor_scalar(y, x, (Alu::BitwiseAnd, Scalar::Col(m.view())), None).unwrap();
    let out = nc.hbm("out", Dtype::F32, &[2, 2]).unwrap();
    nc.dma(out, y).unwrap();
    assert_eq!(nc.read_hbm(out).unwrap(), &[0x0B as f32, 0x0C as f32, 0xA0 as f32, 0x50 as f32]);
    let e = nc.tensor_scalar(y, x, (Alu::BitwiseAnd, Scalar::Col(f.view())), None).unwrap_err();
    assert!(
        matches!(e.kind, V::DtypeNotAllowed { operand: "scalar0", dtype: Dtype::F32, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("bitwise_and takes integer operands"), "{e}");
    let e = nc.tensor_scalar(y, x, (Alu::BitwiseOr, Scalar::Imm(1.5)), None).unwrap_err();
    assert!(
        e.to_string().contains("scalar0 is 1.5") && e.to_string().contains("whole number"),
        "{e}"
    );
    let e = nc
        .scalar_tensor_tensor(y, x, (Alu::BitwiseXor, Scalar::Col(f.view())), Alu::BitwiseOr, x)
        .unwrap_err();
    assert!(matches!(e.kind, V::DtypeNotAllowed { operand: "scalar0", .. }), "{e}");
    // Not bitwise: the column is fp32, as before.
    let e = nc.tensor_scalar(y, x, (Alu::Add, Scalar::Col(m.view())), None).unwrap_err();
    assert!(e.to_string().contains("tensor_scalar operands are fp32"), "{e}");
}

/// NotEqual and Mod run on float tiles too (neither is bitwise).
#[test]
fn not_equal_and_mod_through_tensor_tensor() {
    let mut nc = nc();
    let a = load(&mut nc, "a", Dtype::F32, &[7.0, -7.0, 2.0, 5.5]);
    let b = load(&mut nc, "b", Dtype::F32, &[3.0, 3.0, 2.0, -2.0]);
    let d = load(&mut nc, "d", Dtype::F32, &[0.0; 4]);
    nc.tensor_tensor(d, a, b, Alu::Mod).unwrap();
    assert_eq!(fetch(&mut nc, d, 4), [1.0, 2.0, 0.0, -0.5]);
    nc.tensor_tensor(d, a, b, Alu::NotEqual).unwrap();
    assert_eq!(fetch(&mut nc, d, 4), [1.0, 1.0, 0.0, 1.0]);
}

/// A bitwise operator with a float input is a typed error naming the operand and its
/// dtype, in every instruction that takes bitwise operators on tensors (a scan takes none).
#[test]
fn bitwise_ops_on_float_operands_are_refused_naming_the_operand() {
    for op in Alu::ALL.into_iter().filter(|op| op.is_bitwise()) {
        let mut nc = nc();
        let sb = nc.sbuf_pool("sb", 1);
        let i = nc.tile(sb, Dtype::I16, &[128, 8]).unwrap();
        let f = nc.tile(sb, Dtype::Bf16, &[128, 8]).unwrap();
        nc.memset(i, 1.0).unwrap();
        nc.memset(f, 1.0).unwrap();
        let refused = |e: neuron_sim::SimError, operand: &str, dtype: Dtype| {
            assert!(
                matches!(e.kind, V::DtypeNotAllowed { operand: o, dtype: d, .. } if o == operand && d == dtype),
                "{op:?}: {e}"
            );
            assert!(e.to_string().contains("integer operands"), "{e}");
        };
        refused(nc.tensor_tensor(i, i, f, op).unwrap_err(), "b", Dtype::Bf16);
        refused(nc.tensor_tensor(i, f, i, op).unwrap_err(), "a", Dtype::Bf16);
        let imm = (op, Scalar::Imm(1.0));
        refused(nc.tensor_scalar(i, f, imm, None).unwrap_err(), "src", Dtype::Bf16);
        let add = (Alu::Add, Scalar::Imm(1.0));
        refused(nc.tensor_scalar(i, f, add, Some(imm)).unwrap_err(), "src", Dtype::Bf16);
        refused(nc.scalar_tensor_tensor(i, i, add, op, f).unwrap_err(), "in1", Dtype::Bf16);
        refused(nc.scalar_tensor_tensor(i, f, imm, Alu::Add, i).unwrap_err(), "data", Dtype::Bf16);
        // With integer inputs each is accepted (a float dst is only the written type).
        nc.tensor_tensor(f, i, i, op).unwrap();
        nc.tensor_scalar(i, i, imm, None).unwrap();
        nc.scalar_tensor_tensor(i, i, add, op, i).unwrap();
        // A scan's operators are arithmetic ones, whatever the dtype (neuroncore.md §2.3).
        let e = nc.tensor_tensor_scan(i, i, i, 0.0, op, Alu::Add).unwrap_err().to_string();
        assert!(e.contains("arithmetic operators, not"), "{e}");
    }
}

/// The shifts and invert are not reductions (NKI's table: and, or, xor are); and
/// tensor_scalar_reduce reduces with the arithmetic five only, after an arithmetic operator.
#[test]
fn shifts_and_invert_are_not_reduction_operators() {
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let i = nc.tile(sb, Dtype::I32, &[128, 8]).unwrap();
    let r = nc.tile(sb, Dtype::I32, &[128, 1]).unwrap();
    nc.on(Engine::GpSimd).memset(i, 1.0).unwrap();
    for op in [Alu::LeftShift, Alu::RightShift, Alu::Invert] {
        let e = nc.tensor_reduce(r, i, op, false).unwrap_err().to_string();
        assert!(e.contains(&format!("{op:?} is not a reduction operator")), "{e}");
    }
    // tensor_scalar_reduce: one arithmetic operator, so no bitwise one before the reduce.
    let e = nc
        .tensor_scalar_reduce(i, i, (Alu::BitwiseAnd, Scalar::Imm(1.0)), Alu::Add, r)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor_scalar_reduce takes one arithmetic operator, not BitwiseAnd"),
        "{e}"
    );
    // Nor a bitwise or logical reduction, which its page does not list.
    for op in [Alu::BitwiseOr, Alu::BitwiseXor, Alu::LogicalAnd, Alu::LogicalOr] {
        let e = nc
            .tensor_scalar_reduce(i, i, (Alu::Add, Scalar::Imm(1.0)), op, r)
            .unwrap_err()
            .to_string();
        let want = format!(
            "tensor_scalar_reduce reduces with add, subtract, multiply, max or min, not {op:?}"
        );
        assert!(e.contains(&want), "{e}");
    }
}

/// Programs that differ only in the ALU operator hash differently, for every pair.
#[test]
fn programs_differing_only_in_the_operator_hash_apart() {
    let hashes: Vec<String> = Alu::ALL
        .iter()
        .map(|&op| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            let sb = nc.sbuf_pool("sb", 1);
            let t = nc.tile(sb, Dtype::I32, &[128, 64]).unwrap();
            nc.on(Engine::GpSimd).tensor_tensor(t, t, t, op).unwrap();
            nc.program_hash()
        })
        .collect();
    for i in 0..hashes.len() {
        for j in 0..i {
            assert_ne!(hashes[i], hashes[j], "{:?} and {:?}", Alu::ALL[i], Alu::ALL[j]);
        }
    }
}

/// invert is XOR with the input type's all-ones: 255 − a in uint8, −a − 1 in int16 and in
/// int32 (on GpSimd); unary, so tensor_tensor's b and tensor_scalar's scalar do nothing, and
/// its width stays the data input's after another operator.
#[test]
fn invert_flips_the_bits_of_the_input_type() {
    let a = [0.0, 5.0, 0b1010_0101 as f32, 255.0];
    let mut nc = nc();
    let x = load(&mut nc, "x", Dtype::U8, &a);
    let y = load(&mut nc, "y", Dtype::U8, &[9.0; 4]);
    let z = load(&mut nc, "z", Dtype::U8, &[0.0; 4]);
    nc.tensor_tensor(z, x, y, Alu::Invert).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [255.0, 250.0, 0b0101_1010 as f32, 0.0]);
    // (~x) & 0x0F: 0xFF, 0xFA, 0x5A, 0x00 masked.
    let mask = Some((Alu::BitwiseAnd, Scalar::Imm(15.0)));
    nc.tensor_scalar(z, x, (Alu::Invert, Scalar::Imm(0.0)), mask).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [15.0, 10.0, 10.0, 0.0]);
    // ~(x + 1) in uint8's width: ~1 = 254, ~6 = 249, ~166 = 89.
    let (z3, x3) = (z.cols(0..3), x.cols(0..3));
    let inv = Some((Alu::Invert, Scalar::Imm(0.0)));
    nc.tensor_scalar(z3, x3, (Alu::Add, Scalar::Imm(1.0)), inv).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [254.0, 249.0, 89.0, 0.0]);
    // scalar_tensor_tensor: (~data) & in1.
    let w = load(&mut nc, "w", Dtype::U8, &[240.0; 4]);
    nc.scalar_tensor_tensor(z, x, (Alu::Invert, Scalar::Imm(0.0)), Alu::BitwiseAnd, w).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [240.0, 240.0, 80.0, 0.0]);

    let mut nc = self::nc();
    let x = load(&mut nc, "x", Dtype::I16, &[-16.0, 0.0, 32767.0, -32768.0]);
    nc.tensor_tensor(x, x, x, Alu::Invert).unwrap();
    assert_eq!(fetch(&mut nc, x, 4), [15.0, -1.0, -32768.0, 32767.0]);
    let x = load(&mut nc, "x32", Dtype::I32, &[5.0, -6.0, 2_000_000.0]);
    nc.on(Engine::GpSimd).tensor_tensor(x, x, x, Alu::Invert).unwrap();
    assert_eq!(fetch(&mut nc, x, 3), [-6.0, 5.0, -2_000_001.0]);
}

/// The logical operators are arithmetic ones in NKI's table: float tiles are accepted,
/// nonzero is true and the result 1 or 0; with an immediate, `x or 0` is x's truth value
/// and `x xor 1` its negation.
#[test]
fn logical_operators_on_float_and_integer_tiles() {
    let (a, b) = ([0.0, 2.5, -1.0, 0.0], [0.0, 0.0, 3.0, -7.0]);
    for (dt, eng) in [(Dtype::F32, Engine::Vector), (Dtype::Bf16, Engine::Vector)]
        .into_iter()
        .chain([(Dtype::I32, Engine::GpSimd), (Dtype::F32, Engine::GpSimd)])
    {
        let mut nc = nc();
        let to = |v: [f32; 4]| v.map(|x| if dt.is_float() { x } else { x.trunc() });
        let (x, y) = (load(&mut nc, "a", dt, &to(a)), load(&mut nc, "b", dt, &to(b)));
        let z = load(&mut nc, "z", dt, &[9.0; 4]);
        for (op, want) in [
            (Alu::LogicalAnd, [0.0, 0.0, 1.0, 0.0]),
            (Alu::LogicalOr, [0.0, 1.0, 1.0, 1.0]),
            (Alu::LogicalXor, [0.0, 1.0, 0.0, 1.0]),
        ] {
            nc.on(eng).tensor_tensor(z, x, y, op).unwrap();
            assert_eq!(fetch(&mut nc, z, 4), want, "{op:?} on {dt} ({eng:?})");
        }
    }
    let mut nc = nc();
    let x = load(&mut nc, "x", Dtype::F32, &a);
    let z = load(&mut nc, "z", Dtype::F32, &[9.0; 4]);
    nc.tensor_scalar(z, x, (Alu::LogicalOr, Scalar::Imm(0.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [0.0, 1.0, 1.0, 0.0]);
    nc.tensor_scalar(z, x, (Alu::LogicalXor, Scalar::Imm(1.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [1.0, 0.0, 0.0, 1.0]);
    nc.tensor_scalar(z, x, (Alu::LogicalAnd, Scalar::Imm(0.0)), None).unwrap();
    assert_eq!(fetch(&mut nc, z, 4), [0.0; 4]);
    // tensor_scalar_reduce counts a row's nonzeros: (x or 0), summed.
    let r = load(&mut nc, "r", Dtype::F32, &[0.0]);
    nc.tensor_scalar_reduce(z, x, (Alu::LogicalOr, Scalar::Imm(0.0)), Alu::Add, r).unwrap();
    assert_eq!(fetch(&mut nc, r, 1), [2.0]);
    // An arithmetic operator's column is fp32, as for add (the bitwise ones take integers).
    let sb = nc.sbuf_pool("cols", 1);
    let c = nc.tile(sb, Dtype::I32, &[1, 1]).unwrap();
    let e = nc.tensor_scalar(z, x, (Alu::LogicalAnd, Scalar::Col(c.view())), None).unwrap_err();
    assert!(e.to_string().contains("tensor_scalar operands are fp32"), "{e}");
}

/// tensor_reduce with the bitwise and logical reductions (NKI's table lists them as legal):
/// and/or/xor of the bit patterns of integer rows, and/or/xor of the truth values of any
/// rows, against values worked out by hand.
#[test]
fn tensor_reduce_with_bitwise_and_logical_operators() {
    let mut nc = nc();
    #[rustfmt::skip]
    let u = [
        12.0, 10.0, 15.0, 8.0,    // 0b1100, 0b1010, 0b1111, 0b1000
        255.0, 15.0, 240.0, 60.0, // 0xFF, 0x0F, 0xF0, 0x3C
    ];
    let h = nc.hbm_input("u", Dtype::U8, &[2, 4], &u).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let x = nc.tile(sb, Dtype::U8, &[2, 4]).unwrap();
    let r = nc.tile(sb, Dtype::U8, &[2, 1]).unwrap();
    nc.dma(x, h).unwrap();
    let out = |nc: &mut Nc, r: Tile, n: u64| {
        let o = nc.hbm("o", Dtype::F32, &[n, 1]).unwrap();
        nc.dma(o, r).unwrap();
        nc.read_hbm(o).unwrap().to_vec()
    };
    for (op, want) in [
        (Alu::BitwiseAnd, [8.0, 0.0]),
        (Alu::BitwiseOr, [15.0, 255.0]),
        (Alu::BitwiseXor, [1.0, 60.0]),
    ] {
        nc.tensor_reduce(r, x, op, false).unwrap();
        assert_eq!(out(&mut nc, r, 2), want, "{op:?}");
    }
    // Negative int16 values in two's complement: −1 & −16 & 0x7F = 0x70; −1 ^ −16 ^ 0x7F = 0x70.
    let mut nc = self::nc();
    let x = load(&mut nc, "x", Dtype::I16, &[-1.0, -16.0, 127.0]);
    let r = load(&mut nc, "r", Dtype::I16, &[0.0]);
    for (op, want) in [(Alu::BitwiseAnd, 112.0), (Alu::BitwiseOr, -1.0), (Alu::BitwiseXor, 112.0)] {
        nc.tensor_reduce(r, x, op, false).unwrap();
        assert_eq!(fetch(&mut nc, r, 1), [want], "{op:?}");
    }
    // Logical reductions of fp32 rows, negatable (they are arithmetic operators).
    let mut nc = self::nc();
    let v = [1.5, -2.0, 0.0, 0.0, 0.0, 3.0, 1.0, 1.0, 1.0];
    let h = nc.hbm_input("v", Dtype::F32, &[3, 3], &v).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let x = nc.tile(sb, Dtype::F32, &[3, 3]).unwrap();
    let r = nc.tile(sb, Dtype::F32, &[3, 1]).unwrap();
    nc.dma(x, h).unwrap();
    for (op, want) in [
        (Alu::LogicalAnd, [0.0, 0.0, 1.0]),
        (Alu::LogicalOr, [1.0, 1.0, 1.0]),
        (Alu::LogicalXor, [0.0, 1.0, 1.0]),
    ] {
        nc.tensor_reduce(r, x, op, false).unwrap();
        assert_eq!(out(&mut nc, r, 3), want, "{op:?}");
    }
    nc.tensor_reduce(r, x, Alu::LogicalXor, true).unwrap();
    assert_eq!(out(&mut nc, r, 3), [0.0, -1.0, -1.0]);
}

/// A bitwise reduction reads and writes bit patterns: a float src or dst is refused naming
/// it, and so is `negate`, which is for arithmetic reductions.
#[test]
fn bitwise_reductions_take_integer_tiles_and_no_negate() {
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let (i, ir) =
        (nc.tile(sb, Dtype::I16, &[128, 8]).unwrap(), nc.tile(sb, Dtype::I16, &[128, 1]).unwrap());
    let (f, fr) =
        (nc.tile(sb, Dtype::F32, &[128, 8]).unwrap(), nc.tile(sb, Dtype::F32, &[128, 1]).unwrap());
    nc.memset(i, 3.0).unwrap();
    nc.memset(f, 3.0).unwrap();
    for op in [Alu::BitwiseAnd, Alu::BitwiseOr, Alu::BitwiseXor] {
        let e = nc.tensor_reduce(ir, f, op, false).unwrap_err();
        assert!(
            matches!(e.kind, V::DtypeNotAllowed { operand: "src", dtype: Dtype::F32, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("integer operands"), "{e}");
        let e = nc.tensor_reduce(fr, i, op, false).unwrap_err();
        assert!(
            matches!(e.kind, V::DtypeNotAllowed { operand: "dst", dtype: Dtype::F32, .. }),
            "{e}"
        );
        let e = nc.tensor_reduce(ir, i, op, true).unwrap_err().to_string();
        assert!(e.contains(&format!("negates arithmetic reductions only, not {op:?}")), "{e}");
        nc.tensor_reduce(ir, i, op, false).unwrap();
    }
    // The logical reductions take floats, and negate.
    nc.tensor_reduce(fr, f, Alu::LogicalOr, true).unwrap();
}

/// A truth function of two truth values.
type BoolOp = fn(bool, bool) -> bool;
/// A random draw's value in a type and that value's `!`, both as i64.
type NotOf = fn(u64) -> (i64, i64);
/// A binary operator on int16 values.
type I16Op = fn(i16, i16) -> i16;

/// A fresh single-partition tile of `dt` holding `vals`, through HBM.
fn int_tile(nc: &mut Nc, name: &str, dt: Dtype, vals: &[i64]) -> Tile {
    let v: Vec<f32> = vals.iter().map(|&x| x as f32).collect();
    load(nc, name, dt, &v)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// The logical operators equal their definitions (nonzero is true, result 1/0) on random
    /// int16 tiles, through tensor_tensor.
    #[test]
    fn logical_operators_are_their_definitions(
        ab in proptest::collection::vec((-3i64..4, -3i64..4), 1..40),
    ) {
        let (a, b): (Vec<i64>, Vec<i64>) = ab.into_iter().unzip();
        let n = a.len() as u64;
        let mut nc = nc();
        let (x, y) = (int_tile(&mut nc, "a", Dtype::I16, &a), int_tile(&mut nc, "b", Dtype::I16, &b));
        let z = int_tile(&mut nc, "z", Dtype::I16, &vec![9; a.len()]);
        let defs: [(Alu, BoolOp); 3] = [
            (Alu::LogicalAnd, |p, q| p && q),
            (Alu::LogicalOr, |p, q| p || q),
            (Alu::LogicalXor, |p, q| p != q),
        ];
        for (op, def) in defs {
            nc.tensor_tensor(z, x, y, op).unwrap();
            let want: Vec<f32> =
                a.iter().zip(&b).map(|(&p, &q)| def(p != 0, q != 0) as u8 as f32).collect();
            proptest::prop_assert_eq!(fetch(&mut nc, z, n), want, "{:?}", op);
        }
    }

    /// invert is Rust's `!` in the tile's own type, for every integer dtype VectorE takes.
    #[test]
    fn invert_is_the_types_not(seed in proptest::prelude::any::<u64>(), len in 1usize..40) {
        let mut s = seed | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let cases: [(Dtype, NotOf); 4] = [
            (Dtype::U8, |r| (r as u8 as i64, !(r as u8) as i64)),
            (Dtype::I8, |r| (r as i8 as i64, !(r as i8) as i64)),
            (Dtype::U16, |r| (r as u16 as i64, !(r as u16) as i64)),
            (Dtype::I16, |r| (r as i16 as i64, !(r as i16) as i64)),
        ];
        for (dt, not) in cases {
            let (vals, want): (Vec<i64>, Vec<i64>) = (0..len).map(|_| not(next())).unzip();
            let mut nc = nc();
            let x = int_tile(&mut nc, "x", dt, &vals);
            nc.tensor_tensor(x, x, x, Alu::Invert).unwrap();
            let want: Vec<f32> = want.iter().map(|&w| w as f32).collect();
            proptest::prop_assert_eq!(fetch(&mut nc, x, len as u64), want, "{}", dt);
        }
    }

    /// The bitwise reductions of tensor_reduce are the folds of Rust's `&`, `|`, `^` over
    /// each row of a random int16 tile.
    #[test]
    fn bitwise_reductions_are_folds(vals in proptest::collection::vec(-32768i64..32768, 1..30)) {
        let mut nc = nc();
        let x = int_tile(&mut nc, "x", Dtype::I16, &vals);
        let r = int_tile(&mut nc, "r", Dtype::I16, &[0]);
        let folds: [(Alu, i16, I16Op); 3] = [
            (Alu::BitwiseAnd, -1, |p, q| p & q),
            (Alu::BitwiseOr, 0, |p, q| p | q),
            (Alu::BitwiseXor, 0, |p, q| p ^ q),
        ];
        for (op, init, f) in folds {
            nc.tensor_reduce(r, x, op, false).unwrap();
            let want = vals.iter().fold(init, |acc, &v| f(acc, v as i16));
            proptest::prop_assert_eq!(fetch(&mut nc, r, 1), vec![want as f32], "{:?}", op);
        }
    }
}
