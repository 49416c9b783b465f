//! The activation functions, integer dtypes and integer/bitwise ALU operators added after the
//! first instruction set (neuroncore.md §2.2): what the functional model computes through
//! real instructions, what it refuses, and that the program hash tells them apart.

use neuron_sim::{Act, ActArgs, Alu, Chip, Dtype, Engine, ExecMode, Nc, ViolationKind as V};

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
