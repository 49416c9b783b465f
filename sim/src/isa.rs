//! The instruction vocabulary: engines, activation functions, ALU ops, comparisons.
//!
//! Values follow `nki.isa` / `nki.language` (neuroncore.md §2.2, §2.3); each enum documents
//! which engine implements it and how the functional model computes it.

use serde::Serialize;
use std::fmt;

/// A compute engine of the NeuronCore (neuroncore.md §1.3). DMA queues are separate tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Engine {
    Tensor,
    Vector,
    Scalar,
    GpSimd,
}

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Tensor, Engine::Vector, Engine::Scalar, Engine::GpSimd];

    /// Index of the engine's track (0..4; DMA queues follow).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The engine's name in profiles, traces and JSON (`Tensor`, `Vector`, `Scalar`,
    /// `GpSimd`); error messages use [`Engine::doc_name`].
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Tensor => "Tensor",
            Engine::Vector => "Vector",
            Engine::Scalar => "Scalar",
            Engine::GpSimd => "GpSimd",
        }
    }

    /// The engine as the documentation names it (TensorE, VectorE, ScalarE, GpSimd), for
    /// error messages. [`Engine::name`] stays the profiles', traces' and JSON's spelling.
    pub const fn doc_name(self) -> &'static str {
        match self {
            Engine::Tensor => "TensorE",
            Engine::Vector => "VectorE",
            Engine::Scalar => "ScalarE",
            Engine::GpSimd => "GpSimd",
        }
    }

    /// neuron-profile's spelling in summary field names (`tensor_engine_active_time`, …).
    pub const fn profile_name(self) -> &'static str {
        match self {
            Engine::Tensor => "tensor",
            Engine::Vector => "vector",
            Engine::Scalar => "scalar",
            Engine::GpSimd => "gpsimd",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// ScalarE activation functions (neuroncore.md §2.2), computed in fp32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Act {
    /// `x` (a copy through ScalarE; with `scale`/`bias`, the affine map alone).
    Copy,
    /// `x²`.
    Square,
    /// `eˣ`.
    Exp,
    /// `ln x` (NaN below 0, −∞ at 0).
    Log,
    /// `√x` (NaN below 0).
    Sqrt,
    /// `1/√x` (NaN below 0, ∞ at 0).
    Rsqrt,
    /// `1/x` (∞ at 0).
    Reciprocal,
    /// `max(x, 0)`.
    Relu,
    /// `1/(1 + e⁻ˣ)`.
    Sigmoid,
    /// `x·sigmoid(x)` (SiLU, swish).
    Silu,
    /// Exact GELU, `x·Φ(x) = ½x(1 + erf(x/√2))` (NKI `gelu`).
    Gelu,
    /// GELU's tanh approximation, `½x(1 + tanh(√(2/π)(x + 0.044715x³)))` (NKI
    /// `gelu_apprx_tanh`).
    GeluTanh,
    /// `tanh x`.
    Tanh,
    /// `ln(1 + eˣ)`, computed without overflow for large `x`.
    Softplus,
    /// `sin x` (radians).
    Sin,
    /// `|x|`.
    Abs,
    /// −1, 0 or 1 by the sign of `x`.
    Sign,
}

impl Act {
    /// Apply the function to `x` (fp32, as the engine does; the hardware uses piecewise
    /// polynomials, so real results differ in the last bits).
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Act::Copy => x,
            Act::Square => x * x,
            Act::Exp => x.exp(),
            Act::Log => x.ln(),
            Act::Sqrt => x.sqrt(),
            Act::Rsqrt => 1.0 / x.sqrt(),
            Act::Reciprocal => 1.0 / x,
            Act::Relu => x.max(0.0),
            Act::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Act::Silu => x / (1.0 + (-x).exp()),
            Act::Gelu => 0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2)),
            Act::GeluTanh => {
                let c = (2.0 / std::f32::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
            Act::Tanh => x.tanh(),
            // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): e^x overflows f32 past x ≈ 88.7.
            Act::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
            Act::Sin => x.sin(),
            Act::Abs => x.abs(),
            Act::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
        }
    }

    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// The error function, Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7). Written here because
/// `f32::erf` is not in stable std and one polynomial does not justify a dependency.
fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_4 * t - 1.453_152_1) * t) + 1.421_413_8) * t - 0.284_496_74) * t
            + 0.254_829_6)
            * t
            * (-x * x).exp();
    y.copysign(x)
}

/// Binary ALU operations of Vector/GpSimd (and ScalarE `tensor_scalar`) (§2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Alu {
    /// `a + b`.
    Add,
    /// `a − b` (the first operand minus the second).
    Subtract,
    /// `a · b`.
    Multiply,
    /// `a / b` (IEEE: ±∞ or NaN on 0).
    Divide,
    /// `max(a, b)`.
    Max,
    /// `min(a, b)`.
    Min,
    /// `aᵇ` (IEEE `powf`: NaN for a negative `a` and a non-integer `b`).
    Pow,
    /// `max(|a|, |b|)`.
    AbsMax,
    /// 1.0 where `a == b`, else 0.0 (a mask).
    IsEqual,
    /// 1.0 where `a > b`, else 0.0.
    IsGt,
    /// 1.0 where `a ≥ b`, else 0.0.
    IsGe,
    /// 1.0 where `a < b`, else 0.0.
    IsLt,
    /// 1.0 where `a ≤ b`, else 0.0.
    IsLe,
    /// Return the first operand (useful as the second op of tensor_scalar).
    Bypass,
}

impl Alu {
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            Alu::Add => a + b,
            Alu::Subtract => a - b,
            Alu::Multiply => a * b,
            Alu::Divide => a / b,
            Alu::Max => a.max(b),
            Alu::Min => a.min(b),
            Alu::Pow => a.powf(b),
            Alu::AbsMax => a.abs().max(b.abs()),
            Alu::IsEqual => (a == b) as u8 as f32,
            Alu::IsGt => (a > b) as u8 as f32,
            Alu::IsGe => (a >= b) as u8 as f32,
            Alu::IsLt => (a < b) as u8 as f32,
            Alu::IsLe => (a <= b) as u8 as f32,
            Alu::Bypass => a,
        }
    }

    /// Legal as a reduction operator (§2.2 "reduction-legal").
    pub fn is_reduction(self) -> bool {
        matches!(self, Alu::Add | Alu::Subtract | Alu::Multiply | Alu::Max | Alu::Min)
    }

    /// Identity element of the reduction.
    pub(crate) fn reduce_init(self) -> f32 {
        match self {
            Alu::Multiply => 1.0,
            Alu::Max => f32::NEG_INFINITY,
            Alu::Min => f32::INFINITY,
            _ => 0.0,
        }
    }

    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// Comparison of an affine expression with zero, for `affine_select`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Cmp {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

impl Cmp {
    #[inline]
    pub(crate) fn holds(self, v: i64) -> bool {
        match self {
            Cmp::Ge => v >= 0,
            Cmp::Gt => v > 0,
            Cmp::Le => v <= 0,
            Cmp::Lt => v < 0,
            Cmp::Eq => v == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf(0.5) = 0.5204998778, erf(1) = 0.8427007929, erf(2) = 0.9953222650.
        for (x, want) in [(0.5f32, 0.520_499_9), (1.0, 0.842_700_8), (2.0, 0.995_322_3)] {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x})");
            assert!((erf(-x) + want).abs() < 2e-7, "erf(-{x})");
        }
    }

    #[test]
    fn silu_is_x_times_sigmoid() {
        for x in [-3.0f32, -0.5, 0.0, 0.7, 4.0] {
            assert!((Act::Silu.apply(x) - x * Act::Sigmoid.apply(x)).abs() < 1e-6);
        }
    }
}
