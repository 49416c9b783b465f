//! Element types of the NeuronCore and rounding to them.
//!
//! The engines compute in fp32 and round on write to the destination dtype
//! (neuroncore.md §1.5 "all arithmetic in FP32 with free cast on input/output").
//! The functional model stores every value as an `f32` that is exactly representable
//! in its buffer's dtype, so rounding happens once, at the write.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An element type (neuroncore.md §2.2; the subset the kernel builder supports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    Bf16,
    F16,
    /// float8_e4m3, IEEE-754-like as NKI's `nl.float8_e4m3` (ml_dtypes' float8_e4m3): bias
    /// 7, the all-ones exponent for infinities and NaN, max ±240. NKI's extended-range
    /// `float8_e4m3fn` (no infinities, max ±448) is a different type, documented for
    /// NC-v4's matmul only, and not modelled (docs/neuroncore.md §2.2).
    Fp8E4m3,
    /// float8_e5m2 (IEEE-like: infinities, max ±57344).
    Fp8E5m2,
    /// int32. Stored as `f32` in the functional model, so integers beyond ±2^24 lose
    /// precision; the kernels here use int32 only for indices (iota) well below that.
    I32,
}

impl Dtype {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => 1,
        }
    }

    /// The NKI spelling, used in messages and traces.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "float16",
            Dtype::Fp8E4m3 => "float8_e4m3",
            Dtype::Fp8E5m2 => "float8_e5m2",
            Dtype::I32 => "int32",
        }
    }

    pub const fn is_float(self) -> bool {
        !matches!(self, Dtype::I32)
    }

    /// Stable small code for program hashing.
    pub(crate) const fn code(self) -> u8 {
        self as u8
    }

    /// Round an fp32 value to this dtype (round-to-nearest-even; int32 rounds half to
    /// even and saturates, NaN becomes 0 as a float→int conversion does on the engines).
    #[inline]
    pub fn round(self, x: f32) -> f32 {
        match self {
            Dtype::F32 => x,
            Dtype::Bf16 => round_bf16(x),
            Dtype::F16 => half::f16::from_f32(x).to_f32(),
            Dtype::Fp8E4m3 => round_minifloat(x, 3, -6, 240.0, true),
            Dtype::Fp8E5m2 => round_minifloat(x, 2, -14, 57344.0, true),
            Dtype::I32 => {
                if x.is_nan() {
                    0.0
                } else {
                    x.round_ties_even().clamp(i32::MIN as f32, i32::MAX as f32)
                }
            }
        }
    }
}

impl Dtype {
    /// `dst[i] = self.round(src[i])` for equal-length slices, with the dtype chosen once
    /// rather than per element (the functional model writes every value through this).
    ///
    /// Panics if the lengths differ.
    #[inline]
    pub fn round_slice(self, src: &[f32], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len(), "round_slice: source and destination lengths");
        match self {
            Dtype::F32 => dst.copy_from_slice(src),
            Dtype::Bf16 => {
                for (d, &x) in dst.iter_mut().zip(src) {
                    *d = round_bf16(x);
                }
            }
            _ => {
                for (d, &x) in dst.iter_mut().zip(src) {
                    *d = self.round(x);
                }
            }
        }
    }
}

/// `half::bf16::from_f32(x).to_f32()`, bit for bit, without branches the compiler cannot
/// turn into selects, so a loop of it vectorizes. Written here rather than calling `half`
/// because its conversion branches per element (round up or not, NaN or not), which
/// made bf16 rounding one of the functional model's hottest paths.
///
/// Round to nearest, ties to even, on the bits: adding `0x7FFF` plus the lowest kept bit
/// carries into the kept half exactly when the dropped half is above `0x8000`, or equal to
/// it with an odd kept half (`half`'s test: the round bit set and any of the sticky bits or
/// the kept lowest bit set). No finite value or infinity overflows the addition: their
/// largest bit pattern, negative infinity's `0xFF80_0000`, only reaches `0xFF80_7FFF`, and
/// the largest finite magnitudes round to infinity as in `half`. A NaN keeps its sign
/// and high mantissa bits with the quiet bit set, as `half` makes it (`(x >> 16) | 0x40` on
/// the way in; its way out only sets the quiet bit again).
#[inline(always)]
pub(crate) fn round_bf16(x: f32) -> f32 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000;
    let nan = (b & 0xFFFF_0000) | 0x0040_0000;
    f32::from_bits(if b & 0x7FFF_FFFF > 0x7F80_0000 { nan } else { rounded })
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Round-to-nearest-even into a small float format with `mant` explicit mantissa bits,
/// minimum normal exponent `emin` and largest finite magnitude `max`.
///
/// Written by hand because `half` stops at 16 bits and no well-kept crate rounds f32 to
/// both OCP fp8 formats with the saturation rules the NKI simulator uses.
fn round_minifloat(x: f32, mant: i32, emin: i32, max: f32, has_inf: bool) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    if x.is_infinite() {
        return if has_inf { x } else { f32::NAN };
    }
    if x == 0.0 {
        return x;
    }
    let a = x.abs();
    // Quantum at this magnitude: 2^(e - mant), with e clamped to the subnormal range.
    let e = (a.log2().floor() as i32).max(emin);
    let quantum = (2.0f64).powi(e - mant);
    let q = (a as f64 / quantum).round_ties_even() * quantum;
    let r = q as f32;
    // Overflow: an IEEE-like format (both modelled fp8 types) rounds to infinity past max
    // + half a quantum; one without infinities would become NaN, as the OCP "fn"
    // conversion without saturation does.
    let r = if r > max {
        if has_inf {
            f32::INFINITY
        } else {
            f32::NAN
        }
    } else {
        r
    };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is exactly half way between bf16 neighbours 1.0 and 1 + 2^-7:
        // ties go to the even mantissa (1.0).
        assert_eq!(Dtype::Bf16.round(1.0 + 2f32.powi(-8)), 1.0);
        // 1 + 3·2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
        assert_eq!(Dtype::Bf16.round(1.0 + 3.0 * 2f32.powi(-8)), 1.0 + 2f32.powi(-6));
        // Just above the tie rounds up.
        assert_eq!(Dtype::Bf16.round(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 1.0 + 2f32.powi(-7));
    }

    #[test]
    fn fp8_formats_round_and_saturate() {
        // e4m3: 3 mantissa bits, so between 1 and 2 the step is 1/8.
        assert_eq!(Dtype::Fp8E4m3.round(1.0625), 1.0); // tie → even
        assert_eq!(Dtype::Fp8E4m3.round(1.1875), 1.25); // tie → even (1.25 = 1.010b)
                                                        // IEEE-like e4m3: 240 = 1.875 · 2^7 is the largest finite; 248 is the tie with 256
                                                        // (even), past the max, so infinity; 247 rounds down to 240.
        assert_eq!(Dtype::Fp8E4m3.round(240.0), 240.0);
        assert_eq!(Dtype::Fp8E4m3.round(247.0), 240.0);
        assert_eq!(Dtype::Fp8E4m3.round(248.0), f32::INFINITY);
        assert_eq!(Dtype::Fp8E4m3.round(-448.0), f32::NEG_INFINITY);
        // e5m2: 2 mantissa bits; 57344 is the max finite, beyond → inf.
        assert_eq!(Dtype::Fp8E5m2.round(1.125), 1.0);
        assert_eq!(Dtype::Fp8E5m2.round(-57344.0), -57344.0);
        assert_eq!(Dtype::Fp8E5m2.round(1.0e6), f32::INFINITY);
        // Smallest e4m3 subnormal is 2^-9.
        assert_eq!(Dtype::Fp8E4m3.round(2f32.powi(-9)), 2f32.powi(-9));
        assert_eq!(Dtype::Fp8E4m3.round(2f32.powi(-11)), 0.0);
    }

    /// What the functional model rounded bf16 with before [`round_bf16`].
    fn half_bf16(x: f32) -> f32 {
        half::bf16::from_f32(x).to_f32()
    }

    #[test]
    fn bf16_matches_half_at_the_edges() {
        let edges = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            f32::from_bits(0x7F7F_8000), // a tie below the largest bf16: rounds to even
            f32::from_bits(0x7F7F_8001), // just above it: overflows to infinity
            f32::from_bits(0x7F80_0001), // NaN with only low mantissa bits
            f32::from_bits(0xFF80_8000),
            f32::from_bits(0x7FC0_0000),
            f32::from_bits(0xFFFF_FFFF),
            f32::from_bits(0x0000_8000), // subnormal ties
            f32::from_bits(0x0001_8000),
        ];
        for x in edges {
            assert_eq!(round_bf16(x).to_bits(), half_bf16(x).to_bits(), "{:#010x}", x.to_bits());
        }
    }

    #[test]
    fn round_slice_rounds_each_element() {
        let src: Vec<f32> = (0..300).map(|i| (i as f32 - 150.0) * 1.0371 + 1e-3).collect();
        for dt in [Dtype::F32, Dtype::Bf16, Dtype::F16, Dtype::Fp8E4m3, Dtype::Fp8E5m2, Dtype::I32]
        {
            let mut dst = vec![0.0; src.len()];
            dt.round_slice(&src, &mut dst);
            for (x, y) in src.iter().zip(&dst) {
                assert_eq!(dt.round(*x).to_bits(), y.to_bits(), "{dt} {x}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]
        /// Every f32 bit pattern (NaNs, infinities, subnormals included) rounds to bf16
        /// exactly as `half` rounds it.
        #[test]
        fn bf16_rounding_is_halfs(bits in proptest::prelude::any::<u32>()) {
            let x = f32::from_bits(bits);
            proptest::prop_assert_eq!(round_bf16(x).to_bits(), half_bf16(x).to_bits());
            proptest::prop_assert_eq!(Dtype::Bf16.round(x).to_bits(), half_bf16(x).to_bits());
        }
    }

    /// Every f32 with the 16 low bits from a set that covers each rounding case (zero,
    /// below, at and above the half, the largest) and every high half: an exhaustive sweep
    /// of the decisions, 2^16 · 6 values.
    #[test]
    fn bf16_rounding_is_halfs_for_every_high_half() {
        for hi in 0..=0xFFFFu32 {
            for lo in [0u32, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF] {
                let x = f32::from_bits(hi << 16 | lo);
                assert_eq!(
                    round_bf16(x).to_bits(),
                    half_bf16(x).to_bits(),
                    "{:#010x}",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn int32_rounds_half_even() {
        assert_eq!(Dtype::I32.round(2.5), 2.0);
        assert_eq!(Dtype::I32.round(-3.5), -4.0);
        assert_eq!(Dtype::I32.round(f32::NAN), 0.0);
    }
}
