//! Binary floating-point formats: [`FloatFormat`], the one rounding of an
//! exact value into f64, f32, f16 or bf16 (round half to even, once), and
//! the floats narrower than f32, [`F16`] (IEEE 754 binary16) and [`BF16`]
//! (bfloat16), as their bits. Conversions from f64 round once through
//! `FloatFormat::nearest`; conversions to f64 are exact. A NaN keeps its
//! sign and the top bits of its payload, and is made quiet.
//!
//! Our own types rather than a crate's: the library then depends on no
//! procedural macro but `thiserror`'s, which keeps its build the same in
//! every front end's build (docs/architecture.md, "Crates").

use std::cmp::Ordering;
use std::fmt;

/// A binary floating-point format: what an exact sum is rounded into.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FloatFormat {
    /// Precision in bits (including the implicit bit).
    pub(crate) prec: i32,
    /// Exponent of the smallest subnormal (its quantum).
    pub(crate) min_quantum: i32,
    /// Largest finite value.
    pub(crate) max: f64,
}

impl FloatFormat {
    pub(crate) const F64: FloatFormat = FloatFormat {
        prec: 53,
        min_quantum: -1074,
        max: f64::MAX,
    };
    pub(crate) const F32: FloatFormat = FloatFormat {
        prec: 24,
        min_quantum: -149,
        max: f32::MAX as f64,
    };
    pub(crate) const F16: FloatFormat = FloatFormat {
        prec: 11,
        min_quantum: -24,
        max: 65504.0,
    };
    pub(crate) const BF16: FloatFormat = FloatFormat {
        prec: 8,
        min_quantum: -133,
        max: 3.3895313892515355e38,
    };
}

impl FloatFormat {
    /// `v` rounded to the nearest value of this format (half to even);
    /// beyond its largest finite value, infinity of `v`'s sign. Zeros,
    /// infinities and NaN are returned as they are. The `from_f64` of a
    /// float type that has no crate's conversion (f16, bf16 and f32 have
    /// theirs, which the tests hold this to).
    #[allow(dead_code)]
    pub(crate) fn nearest(&self, v: f64) -> f64 {
        if v == 0.0 || !v.is_finite() {
            v
        } else {
            self.round_f64(v, 0)
        }
    }

    /// Rounds finite non-zero `hi` (the correctly rounded f64 of an exact
    /// value whose residual `exact - hi` has sign `res`) once to this
    /// format, returning the result as an f64 (exactly representable in
    /// the format, or ±inf): the exact sums' single rounding.
    pub(crate) fn round_f64(&self, hi: f64, res: i8) -> f64 {
        let neg = hi < 0.0;
        let m = hi.abs();
        let res = if neg { -res } else { res };
        let qe = (ilog2(m) - self.prec + 1).max(self.min_quantum);
        // k = m / 2^qe, exact (a power-of-two scaling that cannot underflow,
        // since qe <= ilog2(m)).
        let k = scale2(m, -qe);
        let fl = k.floor();
        let frac = k - fl;
        let up = frac > 0.5 || (frac == 0.5 && (res > 0 || (res == 0 && (fl % 2.0) != 0.0)));
        let r = if up { fl + 1.0 } else { fl };
        let mut v = scale2(r, qe);
        if v > self.max {
            v = f64::INFINITY;
        }
        if neg { -v } else { v }
    }
}

/// `2^e` for `-1022 <= e <= 1023`.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `m * 2^e`, exact when the result is representable; `inf` above the range.
pub(crate) fn scale2(m: f64, e: i32) -> f64 {
    if m == 0.0 {
        0.0
    } else if e > 1023 {
        m * pow2(1023) * pow2((e - 1023).min(1023))
    } else if e >= -1022 {
        m * pow2(e)
    } else {
        m * pow2(e + 52) * pow2(-52)
    }
}

/// floor(log2(|x|)) of a finite non-zero f64.
pub(crate) fn ilog2(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let be = (bits >> 52) as i32;
    if be == 0 {
        // subnormal: value = frac * 2^-1074
        63 - bits.leading_zeros() as i32 - 1074
    } else {
        be - 1023
    }
}

/// The bit layout of a narrow format.
struct Layout {
    /// Explicit mantissa bits.
    man_bits: u32,
    /// The exponent bias.
    bias: i32,
    /// The rounding of an f64 to this format.
    format: FloatFormat,
}

const F16_LAYOUT: Layout = Layout {
    man_bits: 10,
    bias: 15,
    format: FloatFormat::F16,
};
const BF16_LAYOUT: Layout = Layout {
    man_bits: 7,
    bias: 127,
    format: FloatFormat::BF16,
};

impl Layout {
    const fn exp_mask(&self) -> u16 {
        (0x7FFF >> self.man_bits) << self.man_bits
    }

    /// `v` rounded to this format, as its bits.
    fn encode(&self, v: f64) -> u16 {
        let b = v.to_bits();
        let sign = ((b >> 48) & 0x8000) as u16;
        if v.is_nan() {
            // Quiet, with the top bits of the payload.
            let quiet = 1u16 << (self.man_bits - 1);
            let payload = ((b & 0x000F_FFFF_FFFF_FFFF) >> (52 - self.man_bits)) as u16;
            return sign | self.exp_mask() | quiet | payload;
        }
        let r = self.format.nearest(v);
        if r.is_infinite() {
            return sign | self.exp_mask();
        }
        if r == 0.0 {
            return sign;
        }
        let m = r.abs();
        let e = ((m.to_bits() >> 52) as i32) - 1023;
        let emin = 1 - self.bias;
        if e >= emin {
            // Normal: `r` has at most `man_bits` bits after its leading one.
            let man = ((m.to_bits() & 0x000F_FFFF_FFFF_FFFF) >> (52 - self.man_bits)) as u16;
            sign | (((e + self.bias) as u16) << self.man_bits) | man
        } else {
            // Subnormal: an integer number of the smallest quanta, exactly.
            let quanta = m * pow2(-(self.format.min_quantum));
            sign | quanta as u16
        }
    }

    /// The exact value of `bits`.
    fn decode(&self, bits: u16) -> f64 {
        let sign = u64::from(bits & 0x8000) << 48;
        let exp = i32::from((bits & self.exp_mask()) >> self.man_bits);
        let man = u64::from(bits & !(self.exp_mask() | 0x8000));
        let all_ones = i32::from(self.exp_mask() >> self.man_bits);
        let mag = if exp == all_ones {
            if man == 0 {
                0x7FF0_0000_0000_0000
            } else {
                // Quiet, with the payload at the top of f64's.
                0x7FF8_0000_0000_0000 | (man << (52 - self.man_bits))
            }
        } else if exp == 0 {
            // Zero or subnormal: `man` quanta, exact in f64.
            (man as f64 * pow2(self.format.min_quantum)).to_bits()
        } else {
            (((exp - self.bias + 1023) as u64) << 52) | (man << (52 - self.man_bits))
        };
        f64::from_bits(sign | mag)
    }
}

macro_rules! narrow_float {
    ($(#[$doc:meta])* $name:ident, $layout:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $name(u16);

        impl $name {
            /// The largest finite value.
            pub const MAX: $name = $name($layout.exp_mask() - 1);
            /// Positive infinity.
            pub const INFINITY: $name = $name($layout.exp_mask());
            /// One.
            pub const ONE: $name = $name(($layout.bias as u16) << $layout.man_bits);

            /// The value with these bits.
            pub const fn from_bits(bits: u16) -> $name {
                $name(bits)
            }
            /// Its bits.
            pub const fn to_bits(self) -> u16 {
                self.0
            }
            /// `v` rounded to nearest, ties to even (beyond the largest
            /// finite value: infinity of `v`'s sign).
            pub fn from_f64(v: f64) -> $name {
                $name($layout.encode(v))
            }
            /// `v` rounded to nearest, ties to even (one rounding: f32
            /// widens to f64 exactly).
            pub fn from_f32(v: f32) -> $name {
                $name::from_f64(f64::from(v))
            }
            /// Its value, exactly.
            pub fn to_f64(self) -> f64 {
                $layout.decode(self.0)
            }
            /// Its value, exactly (every narrow float is an f32).
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }
            /// The little-endian bytes.
            pub const fn to_le_bytes(self) -> [u8; 2] {
                self.0.to_le_bytes()
            }
            /// The value of little-endian bytes.
            pub const fn from_le_bytes(b: [u8; 2]) -> $name {
                $name(u16::from_le_bytes(b))
            }
            /// Whether it is a NaN.
            pub fn is_nan(self) -> bool {
                self.to_f64().is_nan()
            }
            /// Whether it is neither infinite nor NaN.
            pub fn is_finite(self) -> bool {
                self.to_f64().is_finite()
            }
            /// Whether its sign bit is set (negative zero included).
            pub const fn is_sign_negative(self) -> bool {
                self.0 & 0x8000 != 0
            }
        }

        impl PartialEq for $name {
            /// As numbers: NaN equals nothing, -0 equals +0.
            fn eq(&self, other: &$name) -> bool {
                self.to_f64() == other.to_f64()
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &$name) -> Option<Ordering> {
                self.to_f64().partial_cmp(&other.to_f64())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f64(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl From<$name> for f32 {
            fn from(v: $name) -> f32 {
                v.to_f32()
            }
        }

        impl From<$name> for f64 {
            fn from(v: $name) -> f64 {
                v.to_f64()
            }
        }

        // SAFETY: a transparent wrapper of a u16; every bit pattern is a
        // value and zero is +0.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above; no padding, `Copy`, `'static`.
        unsafe impl bytemuck::Pod for $name {}
    };
}

narrow_float!(
    /// IEEE 754 half precision (binary16): 5 exponent bits, 10 mantissa
    /// bits. The element type of [`crate::DType::F16`].
    F16,
    F16_LAYOUT
);
narrow_float!(
    /// bfloat16: f32's 8 exponent bits, 7 mantissa bits. The element
    /// type of [`crate::DType::BF16`].
    BF16,
    BF16_LAYOUT
);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    type From16 = fn(u16) -> f64;
    type To16 = fn(f64) -> u16;

    /// Both formats' conversions, and the bits of their largest finite value.
    fn formats() -> [(From16, To16, u16); 2] {
        [
            (
                |b| F16::from_bits(b).to_f64(),
                |x| F16::from_f64(x).to_bits(),
                0x7BFF,
            ),
            (
                |b| BF16::from_bits(b).to_f64(),
                |x| BF16::from_f64(x).to_bits(),
                0x7F7F,
            ),
        ]
    }

    /// Every value of both formats comes back through f64 (a NaN as a
    /// quiet NaN of the same sign), and the finite ones increase with
    /// their bits.
    #[test]
    fn every_bit_pattern_round_trips_and_orders() {
        for (from, to, max) in formats() {
            for bits in 0..=u16::MAX {
                let v = from(bits);
                if v.is_nan() {
                    let back = to(v);
                    assert!(from(back).is_nan());
                    assert_eq!(back & 0x8000, bits & 0x8000);
                    continue;
                }
                assert_eq!(to(v), bits, "{bits:#06x} -> {v:e}");
            }
            for b in 0..max {
                assert!(from(b + 1) > from(b));
            }
        }
    }

    /// The midpoint of two neighbours rounds to the even one, and a hair
    /// off the midpoint to the nearer one.
    #[test]
    fn midpoints_round_to_even() {
        for (from, to, max) in formats() {
            for b in 0..max {
                let (lo, hi) = (from(b), from(b + 1));
                let mid = (lo + hi) / 2.0; // exact in f64
                let even = if b % 2 == 0 { b } else { b + 1 };
                assert_eq!(to(mid), even, "{lo:e}..{hi:e}");
                assert_eq!(to(-mid), even | 0x8000);
                let below = f64::from_bits(mid.to_bits() - 1);
                let above = f64::from_bits(mid.to_bits() + 1);
                assert_eq!(to(below), b);
                assert_eq!(to(above), b + 1);
            }
        }
    }

    #[test]
    fn limits_and_specials() {
        assert_eq!(F16::from_f64(65504.0).to_bits(), 0x7BFF);
        assert_eq!(F16::from_f64(65519.99).to_bits(), 0x7BFF);
        assert_eq!(F16::from_f64(65520.0).to_bits(), 0x7C00); // ties away from MAX go up
        assert_eq!(F16::from_f64(-1e9).to_bits(), 0xFC00);
        assert_eq!(F16::from_f64(f64::INFINITY).to_bits(), 0x7C00);
        assert_eq!(F16::from_f64(-0.0).to_bits(), 0x8000);
        assert_eq!(F16::from_f64(2f64.powi(-24)).to_bits(), 1);
        assert_eq!(F16::from_f64(2f64.powi(-25)).to_bits(), 0); // tie to even zero
        assert_eq!(F16::from_f64(1e-30).to_bits(), 0);
        assert_eq!(F16::from_f64(f64::NAN).to_bits(), 0x7E00);
        assert_eq!(F16::from_f64(-f64::NAN).to_bits(), 0xFE00);
        assert_eq!(BF16::from_f64(f64::NAN).to_bits(), 0x7FC0);
        assert_eq!(BF16::from_f64(1.0).to_bits(), 0x3F80);
        assert_eq!(BF16::from_f64(3.3895313892515355e38).to_bits(), 0x7F7F);
        assert_eq!(BF16::from_f64(f64::MAX).to_bits(), 0x7F80);
        // One rounding, not two: bf16 through f32 would give 1796.
        assert_eq!(BF16::from_f64(1796.0002).to_f64(), 1800.0);
        assert_eq!(F16::from_f32(0.1).to_string(), "0.099975586");
        assert!(F16::from_bits(0x7C01).is_nan());
        assert!(F16::from_f64(-0.0).is_sign_negative());
        assert_eq!(F16::from_f64(0.0), F16::from_f64(-0.0));
        assert!(F16::from_f64(1.0) < F16::from_f64(1.5));
        assert_eq!(f32::from(BF16::from_f64(-2.5)), -2.5);
    }
}
