//! Input values for checks: deterministic in a seed, drawn from a [`Distribution`].

use crate::kernel::{Role, TensorSpec};
use neuron_tune_protocol::Distribution;

/// Deterministic inputs for `specs` from a seed (xorshift64* + Box–Muller). Written here so
/// a seed means the same inputs in every version of every dependency.
pub fn make_inputs(specs: &[TensorSpec], seed: u64, dist: Distribution) -> Vec<Vec<f32>> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    specs
        .iter()
        .filter(|s| s.role == Role::Input)
        .map(|s| {
            (0..s.elems())
                .map(|_| {
                    let v = match dist {
                        Distribution::Edge => {
                            [0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0][(next() * 7.0) as usize % 7]
                        }
                        Distribution::Normal | Distribution::Large => {
                            let (u1, u2) = (next().max(1e-12), next());
                            let z =
                                (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                            if dist == Distribution::Large {
                                z * 64.0
                            } else {
                                z
                            }
                        }
                    };
                    // An integer input gets the drawn value rounded and saturated as
                    // `Dtype::round` converts (an unsigned one clamps negatives to 0); a
                    // kernel wanting a wider spread of integers scales with `init_scale`.
                    s.dtype.round(v as f32 * s.init_scale)
                })
                .collect()
        })
        .collect()
}
