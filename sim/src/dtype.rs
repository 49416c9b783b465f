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
    // The integer types below were added after the ones above; a dtype's program-hash code
    // is its position, so new ones go at the end and older programs keep their hashes.
    // Every integer dtype converts as [`Dtype::round`] says: round half to even, saturate,
    // NaN to 0 (assumed: neuroncore.md §2.2).
    /// uint8 (also NKI's `bool_`, which is stored as uint8), 0..=255.
    U8,
    /// int8, −128..=127.
    I8,
    /// uint16, 0..=65535.
    U16,
    /// int16, −32768..=32767.
    I16,
    /// uint32, 0..=2^32 − 1. Stored as `f32` like [`Dtype::I32`], so integers beyond 2^24
    /// lose precision, and the saturated maximum is 2^32 (the f32 nearest to 2^32 − 1).
    U32,
}

impl Dtype {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::Bf16 | Dtype::F16 | Dtype::U16 | Dtype::I16 => 2,
            Dtype::Fp8E4m3 | Dtype::Fp8E5m2 | Dtype::U8 | Dtype::I8 => 1,
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
            Dtype::U8 => "uint8",
            Dtype::I8 => "int8",
            Dtype::U16 => "uint16",
            Dtype::I16 => "int16",
            Dtype::U32 => "uint32",
        }
    }

    /// Every dtype, in program-hash code order.
    pub const ALL: [Dtype; 11] = [
        Dtype::F32,
        Dtype::Bf16,
        Dtype::F16,
        Dtype::Fp8E4m3,
        Dtype::Fp8E5m2,
        Dtype::I32,
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::U32,
    ];

    /// A floating-point type (not one of the integer types).
    pub const fn is_float(self) -> bool {
        self.int_range().is_none()
    }

    /// The 16-bit float types (bf16, fp16), the ones VectorE's and ScalarE's performance
    /// modes speed up (neuroncore.md §1.5); the 16-bit integers are not among them.
    pub const fn is_16bit_float(self) -> bool {
        matches!(self, Dtype::Bf16 | Dtype::F16)
    }

    /// An integer type's smallest and largest values as `f32` (int32's and uint32's upper
    /// bounds round to 2^31 and 2^32), or `None` for a float type.
    pub const fn int_range(self) -> Option<(f32, f32)> {
        match self {
            Dtype::I32 => Some((i32::MIN as f32, i32::MAX as f32)),
            Dtype::U8 => Some((0.0, u8::MAX as f32)),
            Dtype::I8 => Some((i8::MIN as f32, i8::MAX as f32)),
            Dtype::U16 => Some((0.0, u16::MAX as f32)),
            Dtype::I16 => Some((i16::MIN as f32, i16::MAX as f32)),
            Dtype::U32 => Some((0.0, u32::MAX as f32)),
            Dtype::F32 | Dtype::Bf16 | Dtype::F16 | Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => None,
        }
    }

    /// Stable small code for program hashing.
    pub(crate) const fn code(self) -> u8 {
        self as u8
    }

    /// Round an fp32 value to this dtype. Float types round to nearest, ties to even.
    /// Integer types round half to even, saturate at their bounds (uint8: 255.5 → 255,
    /// 300 → 255, −1 → 0) and take NaN to 0, and never give −0. NKI documents no rounding,
    /// overflow or NaN rule for float → integer conversion, so this one is **assumed**
    /// (docs/neuroncore.md §2.2).
    #[inline]
    pub fn round(self, x: f32) -> f32 {
        match self {
            Dtype::F32 => x,
            Dtype::Bf16 => round_bf16(x),
            Dtype::F16 => half::f16::from_f32(x).to_f32(),
            Dtype::Fp8E4m3 => round_minifloat(x, 3, -6, 240.0, true),
            Dtype::Fp8E5m2 => round_minifloat(x, 2, -14, 57344.0, true),
            Dtype::I32 | Dtype::U8 | Dtype::I8 | Dtype::U16 | Dtype::I16 | Dtype::U32 => {
                let (lo, hi) = self.int_range().expect("an integer type");
                if x.is_nan() {
                    0.0
                } else {
                    // `+ 0.0` turns −0 (from −0.4, say) into +0.
                    x.round_ties_even().clamp(lo, hi) + 0.0
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
    use proptest::strategy::Strategy;

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
        for dt in Dtype::ALL {
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

    /// Round half to even, saturate at the bounds, NaN → 0, no −0, for each integer type.
    #[test]
    fn integer_types_round_half_even_and_saturate() {
        use Dtype::*;
        let cases: &[(Dtype, f32, f32)] = &[
            (U8, 255.5, 255.0), // the tie rounds to 256, then saturates
            (U8, 254.5, 254.0), // tie to even
            (U8, 253.5, 254.0),
            (U8, 300.0, 255.0),
            (U8, -1.0, 0.0),
            (U8, -0.4, 0.0),
            (U8, f32::INFINITY, 255.0),
            (U8, f32::NEG_INFINITY, 0.0),
            (U8, f32::NAN, 0.0),
            (I8, 127.5, 127.0),
            (I8, -128.5, -128.0),
            (I8, -129.0, -128.0),
            (I8, -2.5, -2.0),
            (I8, 1000.0, 127.0),
            (I8, f32::NAN, 0.0),
            (U16, 65535.4, 65535.0),
            (U16, 65536.0, 65535.0),
            (U16, 0.5, 0.0),
            (U16, 1.5, 2.0),
            (U16, -7.0, 0.0),
            (I16, 32767.5, 32767.0),
            (I16, -32769.0, -32768.0),
            (I16, -3.5, -4.0),
            (U32, -1.0, 0.0),
            (U32, 4_000_000_000.0, 4_000_000_000.0),
            (U32, 1e12, 4_294_967_296.0),
            (U32, 16_777_217.0, 16_777_216.0), // not an f32: the input already rounded
            (U32, 2.5, 2.0),
            (U32, f32::NAN, 0.0),
        ];
        for &(dt, x, want) in cases {
            let got = dt.round(x);
            assert_eq!(got.to_bits(), want.to_bits(), "{dt}: {x} → {got}, want {want}");
        }
        for dt in Dtype::ALL {
            assert_eq!(dt.is_float(), dt.int_range().is_none());
        }
        assert_eq!([U8.size(), I8.size(), U16.size(), I16.size(), U32.size()], [1, 1, 2, 2, 4]);
        assert_eq!(
            [U8.name(), I8.name(), U16.name(), I16.name(), U32.name()],
            ["uint8", "int8", "uint16", "int16", "uint32"]
        );
    }

    /// `Dtype::ALL` lists each dtype once, at its code.
    #[test]
    fn dtype_all_is_in_code_order() {
        for (i, dt) in Dtype::ALL.iter().enumerate() {
            assert_eq!(dt.code() as usize, i, "{dt}");
        }
    }

    fn int_dtypes() -> impl proptest::strategy::Strategy<Value = Dtype> {
        use Dtype::*;
        proptest::sample::select(vec![I32, U8, I8, U16, I16, U32])
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5_000))]
        /// Converting to an integer type twice is converting once, and conversion keeps
        /// order (x ≤ y ⇒ round(x) ≤ round(y)), over every f32 bit pattern (NaN aside in
        /// the order) and over values near the types' ranges.
        #[test]
        fn integer_conversion_is_idempotent_and_monotone(
            dt in int_dtypes(),
            a in proptest::prelude::prop_oneof![
                proptest::prelude::any::<u32>().prop_map(f32::from_bits),
                -70_000.0f32..70_000.0,
                -300.0f32..300.0,
            ],
            b in proptest::prelude::prop_oneof![
                proptest::prelude::any::<u32>().prop_map(f32::from_bits),
                -70_000.0f32..70_000.0,
                -300.0f32..300.0,
            ],
        ) {
            use proptest::prelude::*;
            let (ra, rb) = (dt.round(a), dt.round(b));
            prop_assert_eq!(dt.round(ra).to_bits(), ra.to_bits());
            let (lo, hi) = dt.int_range().unwrap();
            prop_assert!(ra >= lo && ra <= hi && ra.fract() == 0.0, "{} {} → {}", dt, a, ra);
            if !a.is_nan() && !b.is_nan() {
                let (x, y, rx, ry) = if a <= b { (a, b, ra, rb) } else { (b, a, rb, ra) };
                prop_assert!(rx <= ry, "{}: {} ≤ {} but {} > {}", dt, x, y, rx, ry);
            }
        }
    }
}
