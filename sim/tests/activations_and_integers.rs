//! The activation functions, integer dtypes and integer/bitwise ALU operators added after the
//! first instruction set (neuroncore.md §2.2): what the functional model computes through
//! real instructions, what it refuses, and that the program hash tells them apart.

use neuron_sim::{Act, ActArgs, Chip, Dtype, ExecMode, Nc};

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
