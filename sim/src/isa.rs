//! The instruction vocabulary: engines, activation functions, ALU ops, comparisons.
//!
//! Values follow `nki.isa` / `nki.language` (neuroncore.md §2.2, §2.3); each enum documents
//! which engine implements it and how the functional model computes it.

use crate::Dtype;
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
    // The variants below were added after the ones above; each variant's program-hash code
    // is its position, so new ones go at the end and older programs keep their hashes.
    /// The error function `erf x = (2/√π)∫₀ˣ e^(−t²) dt` (NKI `erf`), from `libm`'s `erff`;
    /// ±1 at ±∞, NaN for NaN.
    Erf,
    /// GELU's sigmoid approximation, `x·sigmoid(1.702x)` (NKI `gelu_apprx_sigmoid`). NKI's
    /// page gives no formula; 1.702 is the constant of the GELU paper's sigmoid form
    /// (Hendrycks & Gimpel, as MLX's `gelu_fast_approx` documents it) **(assumed)**. 0 at
    /// −∞ (the limit, not ∞·0), NaN for NaN.
    GeluApprxSigmoid,
    /// `x·tanh(softplus x)` (Mish, NKI `mish`); softplus as [`Act::Softplus`], so no
    /// overflow for large `x`; 0 at −∞, NaN for NaN.
    Mish,
    /// `arctan x` in radians, in (−π/2, π/2) (NKI `arctan`, "similar to numpy.arctan");
    /// ±π/2 at ±∞.
    Arctan,
    /// GELU's derivative, `Φ(x) + x·φ(x) = ½(1 + erf(x/√2)) + x·e^(−x²/2)/√(2π)` (NKI
    /// `gelu_dx`, "derivative of GELU", GELU being the exact [`Act::Gelu`]); 0 at −∞, 1 at
    /// ∞, NaN for NaN.
    GeluDx,
    /// SiLU's derivative, `σ(x)·(1 + x·(1 − σ(x)))` with `σ` the sigmoid (NKI `silu_dx`);
    /// 0 at −∞, 1 at ∞, NaN for NaN.
    SiluDx,
    /// erf's derivative, `(2/√π)·e^(−x²)` (NKI `erf_dx`); 0 at ±∞, NaN for NaN.
    ErfDx,
    /// The derivative of [`Act::GeluApprxSigmoid`], `σ(kx) + kx·σ(kx)(1 − σ(kx))` with
    /// `k = 1.702` (NKI `gelu_apprx_sigmoid_dx`; the constant is assumed as there); 0 at
    /// −∞, 1 at ∞, NaN for NaN.
    GeluApprxSigmoidDx,
}

/// The constant of GELU's sigmoid approximation `x·sigmoid(1.702x)` (see
/// [`Act::GeluApprxSigmoid`]).
const GELU_SIGMOID_K: f32 = 1.702;

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
            Act::Erf => libm::erff(x),
            // At −∞ the products below are ∞·0: the limits (0, and 1 or 0 for the
            // derivatives) are returned instead of NaN.
            _ if x == f32::NEG_INFINITY && self.is_zero_at_neg_inf() => 0.0,
            Act::GeluApprxSigmoid => x * sigmoid(GELU_SIGMOID_K * x),
            Act::Mish => x * Act::Softplus.apply(x).tanh(),
            Act::Arctan => x.atan(),
            Act::GeluDx | Act::SiluDx | Act::GeluApprxSigmoidDx if x == f32::INFINITY => 1.0,
            Act::GeluDx => {
                let pdf = (-0.5 * x * x).exp() / (2.0 * std::f32::consts::PI).sqrt();
                0.5 * (1.0 + erf(x / std::f32::consts::SQRT_2)) + x * pdf
            }
            Act::SiluDx => {
                let s = sigmoid(x);
                s * (1.0 + x * (1.0 - s))
            }
            Act::ErfDx => std::f32::consts::FRAC_2_SQRT_PI * (-x * x).exp(),
            Act::GeluApprxSigmoidDx => {
                let kx = GELU_SIGMOID_K * x;
                let s = sigmoid(kx);
                s + kx * s * (1.0 - s)
            }
        }
    }

    /// The functions written as a product that is ∞·0 at −∞ and whose limit there is 0.
    fn is_zero_at_neg_inf(self) -> bool {
        matches!(
            self,
            Act::GeluApprxSigmoid | Act::Mish | Act::GeluDx | Act::SiluDx | Act::GeluApprxSigmoidDx
        )
    }

    /// Every function, in program-hash code order.
    pub const ALL: [Act; 25] = [
        Act::Copy,
        Act::Square,
        Act::Exp,
        Act::Log,
        Act::Sqrt,
        Act::Rsqrt,
        Act::Reciprocal,
        Act::Relu,
        Act::Sigmoid,
        Act::Silu,
        Act::Gelu,
        Act::GeluTanh,
        Act::Tanh,
        Act::Softplus,
        Act::Sin,
        Act::Abs,
        Act::Sign,
        Act::Erf,
        Act::GeluApprxSigmoid,
        Act::Mish,
        Act::Arctan,
        Act::GeluDx,
        Act::SiluDx,
        Act::ErfDx,
        Act::GeluApprxSigmoidDx,
    ];

    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// The error function (`libm`'s `erff`: `f32::erf` is not in stable std).
fn erf(x: f32) -> f32 {
    libm::erff(x)
}

/// The logistic sigmoid `1/(1 + e⁻ˣ)`.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// ALU operations of Vector/GpSimd (and ScalarE `tensor_scalar`) (§2.2): binary, but for
/// [`Alu::Invert`], which ignores its second operand. NKI's table (nki.api.shared) sorts
/// them into bitvec operators ([`Alu::is_bitwise`]: integer operands, bit patterns) and
/// arithmetic ones (any dtype, computed in fp32), and marks the legal reductions
/// ([`Alu::is_reduction`]).
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
    // The variants below were added after the ones above; each variant's program-hash code
    // is its position, so new ones go at the end and older programs keep their hashes.
    //
    // The bitwise operators (NKI `bitwise_and`, `bitwise_or`, `bitwise_xor`, `left_shift`,
    // `right_shift`) take integer operands only; an instruction applying one to a tile of
    // a float dtype is refused (`DtypeNotAllowed`). They work on the operands' integer
    // values (each rounded half to even, NaN as 0, as an immediate may be any fp32) in
    // two's complement, so they need no dtype; the destination's conversion (round,
    // saturate, `Dtype::round`) then applies to the result as to any other.
    /// `a & b` on the integer values (two's complement: −1 is all ones).
    BitwiseAnd,
    /// `a | b` on the integer values.
    BitwiseOr,
    /// `a ^ b` on the integer values.
    BitwiseXor,
    /// `a · 2ᵇ`: `a` shifted left by `b` bits, `b` clamped to 0..=32 (NKI `left_shift`,
    /// "similar to numpy.left_shift"). Bits shifted past the destination's width are not
    /// dropped: the write saturates (uint8: 200 << 1 → 255), as the assumed conversion
    /// does **(assumed**; numpy would wrap).
    LeftShift,
    /// `⌊a / 2ᵇ⌋`: `a` shifted right by `b` bits, `b` clamped to 0..=32, arithmetic
    /// (sign-propagating) for a negative `a`: numpy's `right_shift` (arithmetic for signed
    /// types, logical for unsigned ones, whose values are never negative, so the two agree
    /// here), which NKI's shift operators say they follow.
    RightShift,
    /// 1.0 where `a ≠ b`, else 0.0 (a mask; NaN ≠ NaN is 1).
    NotEqual,
    /// `a mod b` with the sign of the divisor, Python's `%` (NKI `mod`: "the remainder
    /// complementary to the floor_divide function"); NaN for `b = 0` (0 once written to an
    /// integer type).
    Mod,
    /// `~a`, bitwise not (NKI `invert`, "similar to numpy.invert"; SDK 2.33: "implemented as
    /// XOR with all-ones"), a bitvec operator like [`Alu::BitwiseAnd`]: integer operands
    /// only, not a reduction. Unary: the second operand is ignored. Its result depends on
    /// the type's width and signedness, so the instructions apply it with their data
    /// input's dtype ([`Alu::apply_as`]): the integer value XOR the type's all-ones, `−a − 1`
    /// for a signed type, `2ʷ − 1 − a` for a `w`-bit unsigned one (uint8: ~5 = 250); the
    /// data input of an instruction is `a` of `tensor_tensor`, `src` of `tensor_scalar`,
    /// `data` of `scalar_tensor_tensor`, whichever operator slot invert is in **(assumed)**.
    /// [`Alu::apply`], with no dtype, gives the signed result.
    Invert,
    // The logical operators are arithmetic ones in NKI's operator table (nki.api.shared:
    // inputs of any dtype, converted to fp32), unlike the bitvec ones: they take float
    // operands too. A value is true when it is nonzero (NaN included, as numpy's `bool`
    // takes it) and the result is 1.0 or 0.0 **(assumed**: NKI gives no definition; numpy's
    // `logical_and` & co., which NKI's functions follow, do this). Each is a legal reduction.
    /// 1.0 where `a` and `b` are both nonzero, else 0.0 (NKI `logical_and`).
    LogicalAnd,
    /// 1.0 where `a` or `b` is nonzero, else 0.0 (NKI `logical_or`).
    LogicalOr,
    /// 1.0 where exactly one of `a` and `b` is nonzero, else 0.0 (NKI `logical_xor`).
    LogicalXor,
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
            Alu::BitwiseAnd => (int(a) & int(b)) as f32,
            Alu::BitwiseOr => (int(a) | int(b)) as f32,
            Alu::BitwiseXor => (int(a) ^ int(b)) as f32,
            // i128: a saturated i64 shifted by 32 bits still fits.
            Alu::LeftShift => ((int(a) as i128) << shift_count(b)) as f32,
            Alu::RightShift => (int(a) >> shift_count(b)) as f32,
            Alu::NotEqual => (a != b) as u8 as f32,
            Alu::Mod => {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) {
                    r + b
                } else {
                    r
                }
            }
            Alu::Invert => !int(a) as f32,
            Alu::LogicalAnd => (a != 0.0 && b != 0.0) as u8 as f32,
            Alu::LogicalOr => (a != 0.0 || b != 0.0) as u8 as f32,
            Alu::LogicalXor => ((a != 0.0) != (b != 0.0)) as u8 as f32,
        }
    }

    /// [`Alu::apply`] in an instruction whose data input has dtype `dt`: the same for every
    /// operator but [`Alu::Invert`], which XORs the integer value with the all-ones of `dt`
    /// (`2ʷ − 1` for a `w`-bit unsigned type, −1 for a signed one), so that ~5 is 250 in
    /// uint8 and −6 in int8.
    #[inline]
    pub fn apply_as(self, a: f32, b: f32, dt: Dtype) -> f32 {
        match self {
            Alu::Invert => (int(a) ^ all_ones(dt)) as f32,
            _ => self.apply(a, b),
        }
    }

    /// A bitwise (NKI: bitvec) operator (and, or, xor, the shifts, invert), defined on
    /// integer operands only.
    pub fn is_bitwise(self) -> bool {
        matches!(
            self,
            Alu::BitwiseAnd
                | Alu::BitwiseOr
                | Alu::BitwiseXor
                | Alu::LeftShift
                | Alu::RightShift
                | Alu::Invert
        )
    }

    /// Every operator, in program-hash code order.
    pub const ALL: [Alu; 25] = [
        Alu::Add,
        Alu::Subtract,
        Alu::Multiply,
        Alu::Divide,
        Alu::Max,
        Alu::Min,
        Alu::Pow,
        Alu::AbsMax,
        Alu::IsEqual,
        Alu::IsGt,
        Alu::IsGe,
        Alu::IsLt,
        Alu::IsLe,
        Alu::Bypass,
        Alu::BitwiseAnd,
        Alu::BitwiseOr,
        Alu::BitwiseXor,
        Alu::LeftShift,
        Alu::RightShift,
        Alu::NotEqual,
        Alu::Mod,
        Alu::Invert,
        Alu::LogicalAnd,
        Alu::LogicalOr,
        Alu::LogicalXor,
    ];

    /// Legal as a reduction operator (§2.2 "reduction-legal", NKI's operator table): add,
    /// subtract, multiply, max, min, the bitwise and, or, xor and the logical and, or, xor.
    /// An instruction may take fewer (`tensor_scalar_reduce`: the arithmetic five).
    pub fn is_reduction(self) -> bool {
        self.is_arithmetic_reduction()
            || matches!(
                self,
                Alu::BitwiseAnd
                    | Alu::BitwiseOr
                    | Alu::BitwiseXor
                    | Alu::LogicalAnd
                    | Alu::LogicalOr
                    | Alu::LogicalXor
            )
    }

    /// The reductions of the arithmetic five: add, subtract, multiply, max, min (all that
    /// `tensor_scalar_reduce` takes).
    pub fn is_arithmetic_reduction(self) -> bool {
        matches!(self, Alu::Add | Alu::Subtract | Alu::Multiply | Alu::Max | Alu::Min)
    }

    /// Identity element of the reduction (bitwise and: all ones, −1 in two's complement;
    /// logical and: true).
    pub(crate) fn reduce_init(self) -> f32 {
        match self {
            Alu::Multiply | Alu::LogicalAnd => 1.0,
            Alu::Max => f32::NEG_INFINITY,
            Alu::Min => f32::INFINITY,
            Alu::BitwiseAnd => -1.0,
            _ => 0.0,
        }
    }

    pub(crate) fn code(self) -> u8 {
        self as u8
    }
}

/// A bitwise operand's integer value: rounded half to even, NaN as 0, saturated to i64.
fn int(x: f32) -> i64 {
    if x.is_nan() {
        0
    } else {
        x.round_ties_even() as i64
    }
}

/// The all-ones bit pattern of `dt` as an integer value: `2ʷ − 1` for a `w`-bit unsigned
/// type, −1 (two's complement) for a signed one (and a float type, which a bitwise operator
/// never takes).
fn all_ones(dt: Dtype) -> i64 {
    match dt {
        Dtype::U8 => u8::MAX as i64,
        Dtype::U16 => u16::MAX as i64,
        Dtype::U32 => u32::MAX as i64,
        _ => -1,
    }
}

/// A shift count: the operand's integer value clamped to 0..=32 (a 32-bit value shifted by
/// 32 has no bits left of where it was).
fn shift_count(b: f32) -> u32 {
    int(b).clamp(0, 32) as u32
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

    fn close(got: f32, want: f64, tol: f64, what: &str) {
        assert!((got as f64 - want).abs() <= tol, "{what}: got {got}, want {want}");
    }

    /// erf against a table (Abramowitz–Stegun table 7.1), odd symmetry, the limits, NaN.
    #[test]
    fn erf_act_matches_the_table() {
        let table = [(0.5, 0.520_499_877_8), (1.0, 0.842_700_792_9), (2.0, 0.995_322_265_0)];
        for (x, want) in table.into_iter().chain([(3.0, 0.999_977_909_5)]) {
            close(Act::Erf.apply(x as f32), want, 2e-7, "erf");
            close(Act::Erf.apply(-x as f32), -want, 2e-7, "erf(-x)");
        }
        assert_eq!(Act::Erf.apply(f32::INFINITY), 1.0);
        assert_eq!(Act::Erf.apply(f32::NEG_INFINITY), -1.0);
        assert!(Act::Erf.apply(f32::NAN).is_nan());
    }

    /// The closed forms, evaluated in f64 here, and known values.
    #[test]
    fn new_activations_match_their_closed_forms() {
        for x in [-6.0f64, -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 3.0, 7.0] {
            let xf = x as f32;
            let gs = x / (1.0 + (-1.702 * x).exp());
            close(Act::GeluApprxSigmoid.apply(xf), gs, 1e-5, "gelu_apprx_sigmoid");
            let mish = x * (1.0 + x.exp()).ln().tanh();
            close(Act::Mish.apply(xf), mish, 1e-5, "mish");
            close(Act::Arctan.apply(xf), x.atan(), 1e-6, "arctan");
            let sg = 1.0 / (1.0 + (-x).exp());
            close(Act::SiluDx.apply(xf), sg * (1.0 + x * (1.0 - sg)), 1e-5, "silu_dx");
            let erf_dx = 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp();
            close(Act::ErfDx.apply(xf), erf_dx, 1e-6, "erf_dx");
            let (k, s) = (1.702 * x, 1.0 / (1.0 + (-1.702 * x).exp()));
            close(Act::GeluApprxSigmoidDx.apply(xf), s + k * s * (1.0 - s), 1e-5, "gas_dx");
        }
        // mish(1) = tanh(ln(1 + e)) = 0.8650983883; arctan(1) = π/4.
        close(Act::Mish.apply(1.0), 0.865_098_388_3, 1e-6, "mish(1)");
        close(Act::Arctan.apply(1.0), std::f64::consts::FRAC_PI_4, 1e-7, "arctan(1)");
        // gelu'(x) = Φ(x) + xφ(x): gelu'(0) = ½, gelu'(±1) = 0.8413447461 ± 0.2419707245.
        close(Act::GeluDx.apply(0.0), 0.5, 1e-7, "gelu_dx(0)");
        close(Act::GeluDx.apply(1.0), 0.841_344_746_1 + 0.241_970_724_5, 1e-6, "gelu_dx(1)");
        close(Act::GeluDx.apply(-1.0), 0.158_655_253_9 - 0.241_970_724_5, 1e-6, "gelu_dx(-1)");
        // erf'(1) = (2/√π)/e.
        close(Act::ErfDx.apply(1.0), 0.415_107_497_4, 1e-7, "erf_dx(1)");
    }

    /// Each derivative is its function's slope: a central difference of the function.
    #[test]
    fn derivatives_are_the_slopes_of_their_functions() {
        let pairs = [
            (Act::GeluDx, Act::Gelu),
            (Act::SiluDx, Act::Silu),
            (Act::ErfDx, Act::Erf),
            (Act::GeluApprxSigmoidDx, Act::GeluApprxSigmoid),
        ];
        for (dx, f) in pairs {
            for x in [-4.0f32, -1.5, -0.5, 0.0, 0.25, 1.0, 2.5] {
                let h = 1e-2f32;
                let slope = (f.apply(x + h) - f.apply(x - h)) / (2.0 * h);
                close(dx.apply(x), slope as f64, 1e-3, &format!("{dx:?}({x})"));
            }
        }
    }

    /// Limits at the infinities rather than ∞·0 = NaN, and NaN stays NaN.
    #[test]
    fn new_activations_at_infinity_and_nan() {
        use Act::*;
        for (f, at_neg, at_pos) in [
            (GeluApprxSigmoid, 0.0, f32::INFINITY),
            (Mish, 0.0, f32::INFINITY),
            (Arctan, -std::f32::consts::FRAC_PI_2, std::f32::consts::FRAC_PI_2),
            (GeluDx, 0.0, 1.0),
            (SiluDx, 0.0, 1.0),
            (ErfDx, 0.0, 0.0),
            (GeluApprxSigmoidDx, 0.0, 1.0),
        ] {
            assert_eq!(f.apply(f32::NEG_INFINITY), at_neg, "{f:?}(-inf)");
            assert_eq!(f.apply(f32::INFINITY), at_pos, "{f:?}(inf)");
            assert!(f.apply(f32::NAN).is_nan(), "{f:?}(NaN)");
        }
    }

    /// `Act::ALL` lists each function once, at its code.
    #[test]
    fn act_all_is_in_code_order() {
        for (i, f) in Act::ALL.iter().enumerate() {
            assert_eq!(f.code() as usize, i, "{f:?}");
        }
    }

    /// The bitwise operators on known bit patterns, two's complement for negatives.
    #[test]
    fn bitwise_operators_on_known_bit_patterns() {
        use Alu::*;
        let cases = [
            (BitwiseAnd, 0b1100, 0b1010, 0b1000),
            (BitwiseOr, 0b1100, 0b1010, 0b1110),
            (BitwiseXor, 0b1100, 0b1010, 0b0110),
            (BitwiseAnd, 0xF0F0, 0x0FF0, 0x00F0),
            (BitwiseOr, 0xF000, 0x000F, 0xF00F),
            (BitwiseXor, 0xFFFF, 0x00FF, 0xFF00),
            (BitwiseAnd, -1, 0x5A, 0x5A),  // −1 is all ones
            (BitwiseAnd, -16, 0xFF, 0xF0), // …11110000
            (BitwiseOr, -16, 0x0F, -1),
            (BitwiseXor, -1, 0x0F, -16),
            (BitwiseXor, 4_000_000, 4_000_000, 0),
        ];
        for (op, a, b, want) in cases {
            assert_eq!(op.apply(a as f32, b as f32), want as f32, "{op:?}({a:#x}, {b:#x})");
        }
    }

    /// Shifts: left multiplies by 2ᵇ, right floor-divides (sign-propagating), counts clamp
    /// to 0..=32.
    #[test]
    fn shifts_multiply_and_floor_divide_by_powers_of_two() {
        use Alu::*;
        let cases = [
            (LeftShift, 1.0, 4.0, 16.0),
            (LeftShift, 0b1011 as f32, 3.0, 0b101_1000 as f32),
            (LeftShift, -3.0, 2.0, -12.0),
            (LeftShift, 1.0, 31.0, 2_147_483_648.0),
            (LeftShift, 1.0, 40.0, 4_294_967_296.0), // count clamped to 32
            (LeftShift, 5.0, -2.0, 5.0),             // negative count clamped to 0
            (RightShift, 64.0, 2.0, 16.0),
            (RightShift, 0b1011_0110 as f32, 4.0, 0b1011 as f32),
            (RightShift, 7.0, 1.0, 3.0),
            (RightShift, -7.0, 1.0, -4.0), // arithmetic: ⌊−3.5⌋
            (RightShift, -1.0, 5.0, -1.0),
            (RightShift, -128.0, 3.0, -16.0),
            (RightShift, 4_000_000_000.0, 31.0, 1.0), // a uint32 value: logical = arithmetic
            (RightShift, 12345.0, 32.0, 0.0),
            (RightShift, -12345.0, 99.0, -1.0),
        ];
        for (op, a, b, want) in cases {
            assert_eq!(op.apply(a, b), want, "{op:?}({a}, {b})");
        }
        // Non-integer operands (an fp32 immediate) count as their rounded values; NaN as 0.
        assert_eq!(LeftShift.apply(2.5, 1.0), 4.0);
        assert_eq!(BitwiseOr.apply(f32::NAN, 6.0), 6.0);
    }

    #[test]
    fn not_equal_and_mod() {
        use Alu::*;
        assert_eq!(NotEqual.apply(1.0, 2.0), 1.0);
        assert_eq!(NotEqual.apply(2.0, 2.0), 0.0);
        assert_eq!(NotEqual.apply(f32::NAN, f32::NAN), 1.0);
        // Python's %: the result takes the divisor's sign.
        for (a, b, want) in [
            (7.0f32, 3.0f32, 1.0f32),
            (-7.0, 3.0, 2.0),
            (7.0, -3.0, -2.0),
            (-7.0, -3.0, -1.0),
            (6.0, 3.0, 0.0),
            (5.5, 2.0, 1.5),
            (-0.5, 2.0, 1.5),
        ] {
            assert_eq!(Mod.apply(a, b), want, "{a} mod {b}");
        }
        assert!(Mod.apply(1.0, 0.0).is_nan());
    }

    #[test]
    fn alu_all_is_in_code_order_and_knows_the_bitwise_ones() {
        for (i, op) in Alu::ALL.iter().enumerate() {
            assert_eq!(op.code() as usize, i, "{op:?}");
        }
        let bitwise: Vec<Alu> = Alu::ALL.into_iter().filter(|op| op.is_bitwise()).collect();
        use Alu::*;
        assert_eq!(bitwise, [BitwiseAnd, BitwiseOr, BitwiseXor, LeftShift, RightShift, Invert]);
        // NKI's table of legal reductions: the arithmetic five, the bitwise and the logical
        // and/or/xor; not invert, the shifts, the comparisons.
        let reductions: Vec<Alu> = Alu::ALL.into_iter().filter(|op| op.is_reduction()).collect();
        #[rustfmt::skip]
        let want = [
            Add, Subtract, Multiply, Max, Min, BitwiseAnd, BitwiseOr, BitwiseXor,
            LogicalAnd, LogicalOr, LogicalXor,
        ];
        assert_eq!(reductions, want);
        let arith: Vec<Alu> =
            Alu::ALL.into_iter().filter(|op| op.is_arithmetic_reduction()).collect();
        assert_eq!(arith, [Add, Subtract, Multiply, Max, Min]);
    }

    /// Each reduction's initial value is its identity: folding a value into it gives the
    /// value (for the logical ones its truth value; subtract folds as `0 − v`).
    #[test]
    fn reduction_identities() {
        for op in Alu::ALL.into_iter().filter(|op| op.is_reduction()) {
            for v in [0.0f32, 1.0, 5.0, -3.0, 255.0, 4_000_000.0] {
                let want = match op {
                    Alu::LogicalAnd | Alu::LogicalOr | Alu::LogicalXor => (v != 0.0) as u8 as f32,
                    Alu::Subtract => -v,
                    _ => v,
                };
                assert_eq!(op.apply(op.reduce_init(), v), want, "{op:?} with {v}");
            }
        }
    }

    /// invert is XOR with the type's all-ones: −a − 1 for signed types, 2ʷ − 1 − a for
    /// unsigned ones; the second operand is ignored.
    #[test]
    fn invert_flips_every_bit_of_the_type() {
        use Dtype::*;
        let cases = [
            (U8, 5.0, 250.0),
            (U8, 0.0, 255.0),
            (U8, 255.0, 0.0),
            (U8, 0b1010_0101 as f32, 0b0101_1010 as f32),
            (I8, 5.0, -6.0),
            (I8, -128.0, 127.0),
            (I8, 0.0, -1.0),
            (U16, 0x00FF as f32, 0xFF00 as f32),
            (I16, -1.0, 0.0),
            (I32, 2_000_000.0, -2_000_001.0),
            (U32, 0.0, 4_294_967_295.0),
            (U32, 1.0, 4_294_967_294.0),
        ];
        for (dt, a, want) in cases {
            for b in [0.0, 7.0, f32::NAN] {
                assert_eq!(Alu::Invert.apply_as(a, b, dt), want, "~{a} in {dt}");
            }
        }
        // Without a dtype, the signed (two's complement) result.
        assert_eq!(Alu::Invert.apply(5.0, 1.0), -6.0);
        // Every other operator ignores the dtype.
        for op in Alu::ALL.into_iter().filter(|&op| op != Alu::Invert) {
            for dt in [U8, I32, F32] {
                let (x, y) = (op.apply_as(6.0, 3.0, dt), op.apply(6.0, 3.0));
                assert!(x == y || (x.is_nan() && y.is_nan()), "{op:?} in {dt}");
            }
        }
    }

    /// The logical operators on truth values: nonzero (NaN and −0.5 included) is true,
    /// the result 1 or 0.
    #[test]
    fn logical_operators_take_nonzero_as_true() {
        use Alu::*;
        let t = [1.0f32, -0.5, 7.0, f32::NAN, f32::INFINITY];
        let f = [0.0f32, -0.0];
        for &x in &t {
            for &y in &t {
                assert_eq!((LogicalAnd.apply(x, y), LogicalOr.apply(x, y)), (1.0, 1.0));
                assert_eq!(LogicalXor.apply(x, y), 0.0);
            }
            for &z in &f {
                for (a, b) in [(x, z), (z, x)] {
                    assert_eq!(LogicalAnd.apply(a, b), 0.0, "{a} and {b}");
                    assert_eq!(LogicalOr.apply(a, b), 1.0, "{a} or {b}");
                    assert_eq!(LogicalXor.apply(a, b), 1.0, "{a} xor {b}");
                }
            }
        }
        for &a in &f {
            for &b in &f {
                for op in [LogicalAnd, LogicalOr, LogicalXor] {
                    assert_eq!(op.apply(a, b), 0.0, "{op:?}({a}, {b})");
                }
            }
        }
    }

    #[test]
    fn silu_is_x_times_sigmoid() {
        for x in [-3.0f32, -0.5, 0.0, 0.7, 4.0] {
            assert!((Act::Silu.apply(x) - x * Act::Sigmoid.apply(x)).abs() < 1e-6);
        }
    }
}
