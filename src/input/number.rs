//! Numbers read straight from the bytes of a block, for the text and
//! MatrixMarket fast paths: no UTF-8 check, no `str` splitting. Every
//! result is the one std's `FromStr` gives for the same bytes (floats bit
//! for bit, checked against std by a property test below); a field these
//! functions do not take goes to the exact line code, which uses std and
//! names the error.

/// Powers of ten that are exact in an f64 (10^22 < 2^53 * 2^22, its
/// factor 5^22 < 2^53).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The largest integer below which every integer is an exact f64.
const EXACT_INT: u64 = 1 << 53;

/// Written exponents and fraction lengths beyond this (far outside f64's
/// decimal range, -342..=308) are left to std.
const EXP_LIMIT: u32 = 1000;

/// Whether `b` may follow a number: a blank, a line end, or nothing.
#[inline]
pub(crate) fn ends_field(b: Option<&u8>) -> bool {
    matches!(b, None | Some(b' ' | b'\t' | b'\x0C' | b'\n' | b'\r'))
}

/// 1 to 19 ASCII digits at the start of `b` (no sign; 19 digits cannot
/// overflow a u64), followed by a blank, a line end or nothing: the value
/// and its length.
#[inline]
pub(crate) fn index_prefix(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut n = 0;
    while let Some(&c) = b.get(n) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        // A 20th digit may not fit: std decides (checked before the
        // product, which would overflow).
        if n == 19 {
            return None;
        }
        v = v * 10 + u64::from(d);
        n += 1;
    }
    (n > 0 && ends_field(b.get(n))).then_some((v, n))
}

/// An integer `[+-]?[0-9]{1,18}` at the start of `b` (18 digits always fit
/// an i64), as `i64::from_str` reads it: the value and its length. Longer
/// or unusual fields are left to std.
#[inline]
pub(crate) fn i64_prefix(b: &[u8]) -> Option<(i64, usize)> {
    let (neg, mut n) = match b.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let start = n;
    let mut v = 0i64;
    while let Some(&c) = b.get(n) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if n - start == 18 {
            return None;
        }
        v = v * 10 + i64::from(d);
        n += 1;
    }
    (n > start).then_some((if neg { -v } else { v }, n))
}

/// The digits of a mantissa, before and after the point.
#[derive(Default)]
struct Digits {
    /// The first 19 significant digits (leading zeros do not count).
    m: u64,
    /// Significant digits in `m`.
    sig: u32,
    /// Digits seen, and digits kept in `m` (leading zeros included).
    seen: u32,
    kept: u32,
    /// More than 19 significant digits: `m` holds only the first 19.
    lost: bool,
}

impl Digits {
    /// Take the digits at `b[n..]`; returns the position after them.
    #[inline]
    fn take(&mut self, b: &[u8], mut n: usize) -> usize {
        loop {
            // Eight at once while they all count and fit (19 digits do).
            if self.m != 0 && self.sig <= 11 {
                if let Some(v) = eight_digits(b, n) {
                    self.m = self.m * 100_000_000 + v;
                    self.sig += 8;
                    self.seen += 8;
                    self.kept += 8;
                    n += 8;
                    continue;
                }
            }
            let Some(d) = b.get(n).map(|c| c.wrapping_sub(b'0')).filter(|&d| d <= 9) else {
                return n;
            };
            n += 1;
            self.seen += 1;
            if self.sig < 19 {
                self.m = self.m * 10 + u64::from(d);
                self.sig += u32::from(self.m != 0);
                self.kept += 1;
            } else {
                self.lost = true;
            }
        }
    }

    /// Digits kept after the point, given the digits before it.
    fn kept_fraction(&self, int_digits: u32) -> u32 {
        // Digits before the point are kept first: while any is lost, no
        // fraction digit is kept.
        self.kept.saturating_sub(int_digits)
    }
}

/// Eight ASCII digits at `b[n..]` as a number, in a few word operations.
#[inline]
fn eight_digits(b: &[u8], n: usize) -> Option<u64> {
    let chunk: [u8; 8] = b.get(n..n + 8)?.try_into().ok()?;
    let v = u64::from_le_bytes(chunk);
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZERO: u64 = 0x3030_3030_3030_3030;
    // Each byte 0x30..=0x39: high nibble 3, and still 3 after adding 6.
    if v & HIGH != ZERO || v.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZERO {
        return None;
    }
    // The first digit is the lowest byte. Pairs: byte 2i = 10 d(2i) + d(2i+1).
    let v = v - ZERO;
    let v = v * 10 + (v >> 8);
    // Pairs at bytes 0, 2, 4, 6 weighted 10^6, 10^4, 10^2, 1 land in the
    // high half.
    let lo = (v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32));
    let hi = ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32));
    Some(lo.wrapping_add(hi) >> 32)
}

/// A decimal number `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
/// at the start of `b` (std's grammar for finite floats; `inf` and `nan`
/// are left to std): its value, bit for bit what `f64::from_str` gives for
/// those bytes, and its length. `None` when the bytes do not start with
/// such a number (a field that is not one fails at its end anyway).
///
/// One pass collects up to 19 significant digits and the decimal
/// exponent. When the digits fit 53 bits and the power of ten is exact
/// (|exponent| <= 22), one correctly rounded multiplication or division
/// of two exact f64 gives the correctly rounded result (Clinger's fast
/// path); integers (no fraction, no exponent) are the common case of it.
/// Other values of up to 19 digits (17-digit values printed with `%.16e`
/// are the common case) go through [`scaled`], a 128-bit product with a
/// bounded error. What neither decides (more than 19 digits, halfway
/// cases, subnormals, overflow) goes to std's parser on the same bytes,
/// which is exact for every input.
#[inline]
pub(crate) fn f64_prefix(b: &[u8], pow5: Pow5) -> Option<(f64, usize)> {
    let (neg, mut n) = match b.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let mut d = Digits::default();
    n = d.take(b, n);
    let int_digits = d.seen;
    if b.get(n) == Some(&b'.') {
        n = d.take(b, n + 1);
    }
    let Digits { m, lost, seen, .. } = d;
    // Every fraction digit kept in m divides it by 10.
    let fraction = d.kept_fraction(int_digits);
    let mut exp = -i64::from(fraction);
    // Exponents far outside f64's range, written or implied by a long run
    // of fraction zeros, go to std: it caps the written exponent (at
    // 65536), and a field must get the same bits on every path.
    let mut huge = fraction > EXP_LIMIT;
    let digits = seen;
    if digits == 0 {
        return None;
    }
    if matches!(b.get(n), Some(b'e' | b'E')) {
        n += 1;
        let eneg = match b.get(n) {
            Some(b'-') => {
                n += 1;
                true
            }
            Some(b'+') => {
                n += 1;
                false
            }
            _ => false,
        };
        let start = n;
        let mut x = 0i64;
        while let Some(&c) = b.get(n) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            n += 1;
            // Saturate: such exponents go to std, which handles them.
            if x < 1_000_000 {
                x = x * 10 + i64::from(d);
            }
        }
        if n == start {
            return None;
        }
        huge |= x > i64::from(EXP_LIMIT);
        exp += if eneg { -x } else { x };
    }
    if !lost && !huge {
        if m == 0 {
            return Some((if neg { -0.0 } else { 0.0 }, n));
        }
        if m <= EXACT_INT && (-22..=22).contains(&exp) {
            let f = m as f64;
            let v = if exp < 0 {
                f / POW10[exp.unsigned_abs() as usize]
            } else {
                f * POW10[exp as usize]
            };
            return Some((if neg { -v } else { v }, n));
        }
    }
    if !lost && !huge {
        if let Some(v) = scaled(m, exp, pow5) {
            return Some((if neg { -v } else { v }, n));
        }
    }
    // The bytes matched the grammar above, so they are ASCII and std
    // accepts them.
    let text = std::str::from_utf8(&b[..n]).ok()?;
    text.parse::<f64>().ok().map(|v| (v, n))
}

/// Smallest and largest decimal exponents in [`powers_of_five`]: beyond
/// them a 19-digit mantissa gives 0 or infinity, which std decides.
const MIN_Q: i64 = -342;
const MAX_Q: i64 = 308;

/// `w * 10^q` (w > 0, exact) correctly rounded to a normal f64, or `None`
/// when that cannot be decided cheaply (then std decides).
///
/// `10^q = 5^q * 2^q`, and `5^q = T * 2^s` with `T` in `[2^127, 2^128)`;
/// the table holds `floor(T)`, less than 1 below `T`. With `w` shifted
/// to its top bit (`w_n`), `P = floor(w_n * floor(T) / 2^64)` is within 2
/// of `w_n * T / 2^64` (the product's top 128 bits). The top 53 bits of
/// `P` are the mantissa; the bits below decide the rounding, and they do
/// so for the exact value too unless they are within 2 of one half (ties
/// included): then `None`. Results outside the normal range go to std
/// as well. The idea is Ziv's: round an approximation whose error is
/// bounded, and fall back when the bound straddles a rounding boundary.
#[inline]
fn scaled(w: u64, q: i64, pow5: Pow5) -> Option<f64> {
    if !(MIN_Q..=MAX_Q).contains(&q) || w == 0 {
        return None;
    }
    let (t, s) = *pow5.get((q - MIN_Q) as usize)?;
    let lz = w.leading_zeros();
    let wn = u128::from(w << lz);
    let p = wn * (t >> 64) + ((wn * (t & u128::from(u64::MAX))) >> 64);
    // p >= 2^126: wn >= 2^63 and t >= 2^127.
    let top = 127 - p.leading_zeros();
    let mut shift = top - 52;
    let mut mant = (p >> shift) as u64;
    let rest = p & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rest.abs_diff(half) <= 2 {
        return None;
    }
    if rest > half {
        mant += 1;
        if mant == 1 << 53 {
            mant >>= 1;
            shift += 1;
        }
    }
    // value = mant * 2^e2
    let e2 = i64::from(shift) + 64 + i64::from(s) + q - i64::from(lz);
    let biased = e2 + 52 + 1023;
    if !(1..=2046).contains(&biased) {
        return None;
    }
    Some(f64::from_bits(
        ((biased as u64) << 52) | (mant & ((1 << 52) - 1)),
    ))
}

/// The table [`f64_prefix`] works with: see [`powers_of_five`]. The
/// parsers fetch it once, not once per value.
pub(crate) type Pow5 = &'static [(u128, i32)];

/// For every `q` in `MIN_Q..=MAX_Q`, `(floor(T), s)` with `5^q = T * 2^s`
/// and `T` in `[2^127, 2^128)`. Computed once, exactly, with a small big
/// integer: `5^q` for `q >= 0`, `floor(2^K / 5^-q)` for `q < 0`.
pub(crate) fn powers_of_five() -> Pow5 {
    static TABLE: std::sync::OnceLock<Vec<(u128, i32)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        // The bits of `n` from `lo` up (bits below 0 are 0): the top 128
        // bits when `lo` is the bit length less 128.
        fn top(n: &[u64], lo: i64) -> u128 {
            let bit = |i: i64| -> u128 {
                if i < 0 {
                    return 0;
                }
                let i = i as usize;
                n.get(i / 64).map_or(0, |l| u128::from((l >> (i % 64)) & 1))
            };
            (0..128).fold(0u128, |acc, k| acc | (bit(lo + k) << k))
        }
        fn bits(n: &[u64]) -> i64 {
            n.iter()
                .rposition(|&l| l != 0)
                .map_or(0, |i| i as i64 * 64 + 64 - i64::from(n[i].leading_zeros()))
        }
        let mut table = vec![(0u128, 0i32); (MAX_Q - MIN_Q + 1) as usize];
        // 5^q, q = 0..=MAX_Q (5^308 has 716 bits).
        let mut n = vec![0u64; 12];
        n[0] = 1;
        for q in 0..=MAX_Q {
            let b = bits(&n);
            table[(q - MIN_Q) as usize] = (top(&n, b - 128), (b - 128) as i32);
            let mut carry = 0u128;
            for l in &mut n {
                let x = u128::from(*l) * 5 + carry;
                *l = x as u64;
                carry = x >> 64;
            }
        }
        // floor(2^K / 5^p), p = 1..=-MIN_Q: 2^K / 5^342 still has 358 bits.
        const K: i64 = 1152;
        let mut n = vec![0u64; (K / 64 + 1) as usize];
        n[(K / 64) as usize] = 1;
        for p in 1..=-MIN_Q {
            let mut rem = 0u128;
            for l in n.iter_mut().rev() {
                let x = (rem << 64) | u128::from(*l);
                *l = (x / 5) as u64;
                rem = x % 5;
            }
            let b = bits(&n);
            table[(-p - MIN_Q) as usize] = (top(&n, b - 128), (b - 128 - K) as i32);
        }
        table
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the fast path must give for a whole field: std's value, or
    /// nothing (the exact path then decides).
    fn check(s: &str) {
        let b = s.as_bytes();
        let std = s.parse::<f64>();
        // A prefix only (or nothing): the field goes to the exact path.
        if let Some((v, _)) = f64_prefix(b, powers_of_five()).filter(|&(_, n)| n == b.len()) {
            let want = std.unwrap_or_else(|_| panic!("{s:?}: fast path took what std refuses"));
            assert_eq!(v.to_bits(), want.to_bits(), "{s:?}: {v:e} vs std {want:e}");
        }
    }

    #[test]
    fn edge_cases_match_std() {
        for s in [
            "0",
            "-0",
            "+0",
            "0.0",
            "-0.0",
            "0e0",
            "-0e-999",
            "00000",
            "1",
            "-1",
            "+1",
            "1.",
            ".5",
            "-.5",
            "1.5e3",
            "1.5E-3",
            "1e22",
            "1e23",
            "9007199254740992",
            "9007199254740993",
            "9007199254740991e-22",
            "123456789012345678",
            "1234567890123456789",
            "12345678901234567890",
            "0.1",
            "0.3",
            "2.2250738585072011e-308",
            "2.2250738585072014e-308",
            "4.9e-324",
            "5e-324",
            "2e-324",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "1e309",
            "-1e309",
            "1e-400",
            "3.6538507790272153E-3",
            "-1.7826808286516212E-19",
            "0.000000000000000000000000000001",
            "1e+5",
            "1e-5",
            "000000000000000000000000001.5",
            "1.0000000000000000000000001",
            "9999999999999999999",
            "99999999999999999999e-20",
            "1e1000000000000",
            "1e",
            "1e+",
            ".",
            "-",
            "+",
            "",
            "e5",
            ".e5",
            "1.e5",
            "1..5",
            "1e5.5",
            "inf",
            "nan",
            "0x10",
            "1_0",
        ] {
            check(s);
        }
        assert_eq!(f64_prefix(b"1.5 2", powers_of_five()), Some((1.5, 3)));
        assert_eq!(f64_prefix(b"-2e1\n", powers_of_five()), Some((-20.0, 4)));
        assert_eq!(f64_prefix(b"x", powers_of_five()), None);
        assert_eq!(f64_prefix(b"1e+x", powers_of_five()), None);
    }

    #[test]
    fn eight_digits_at_once() {
        assert_eq!(eight_digits(b"12345678", 0), Some(12_345_678));
        assert_eq!(eight_digits(b"x00000000", 1), Some(0));
        assert_eq!(eight_digits(b"99999999", 0), Some(99_999_999));
        assert_eq!(eight_digits(b"1234567", 0), None);
        for bad in [
            b"1234567:",
            b"/2345678",
            b"12345 78",
            b"1234567\xb9",
            b"\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0",
        ] {
            assert_eq!(eight_digits(bad, 0), None);
        }
        for v in (0..100_000_000u64)
            .step_by(9_973)
            .chain([1, 10, 99_999_999])
        {
            assert_eq!(eight_digits(format!("{v:08}").as_bytes(), 0), Some(v));
        }
    }

    #[test]
    fn the_table_holds_powers_of_five() {
        let t = powers_of_five();
        // 5^0 = 2^127 * 2^-127; 5^1 = (5 * 2^125) * 2^-125.
        assert_eq!(t[(-MIN_Q) as usize], (1u128 << 127, -127));
        assert_eq!(t[(1 - MIN_Q) as usize], (5u128 << 125, -125));
        // 5^-1 = 0.2 = (2^130 / 5) * 2^-130, floor(2^130 / 5).
        assert_eq!(
            t[(-1 - MIN_Q) as usize],
            (272_225_893_536_750_770_770_699_685_945_414_569_164, -130)
        );
        for &(m, _) in t {
            assert!(m >> 127 == 1);
        }
        // The fast product for every exponent against std, 17 digits;
        // it decides nearly all of them (not subnormals and overflows).
        let mut decided = 0;
        for q in MIN_Q..=MAX_Q {
            for w in [1u64, 7, 36538507790272153, 99999999999999999, u64::MAX / 3] {
                let want: f64 = format!("{w}e{q}").parse().unwrap();
                if let Some(v) = scaled(w, q, t) {
                    assert_eq!(v.to_bits(), want.to_bits(), "{w}e{q}");
                    decided += 1;
                }
            }
        }
        assert!(decided > 5 * 600, "{decided}");
        assert!(scaled(36538507790272153, -19, t).is_some());
    }

    #[test]
    fn integers_match_std() {
        for s in [
            "0",
            "-0",
            "+5",
            "-123",
            "999999999999999999",
            "-999999999999999999",
        ] {
            let (v, n) = i64_prefix(s.as_bytes()).unwrap();
            assert_eq!((v, n), (s.parse::<i64>().unwrap(), s.len()));
        }
        assert_eq!(i64_prefix(b"1234567890123456789"), None);
        assert_eq!(i64_prefix(b"-"), None);
        assert_eq!(i64_prefix(b"12x"), Some((12, 2)));
        assert_eq!(index_prefix(b"12 "), Some((12, 2)));
        assert_eq!(index_prefix(b"12\r"), Some((12, 2)));
        assert_eq!(index_prefix(b"12"), Some((12, 2)));
        assert_eq!(index_prefix(b"12x"), None);
        assert_eq!(index_prefix(b"+12 "), None);
        assert_eq!(
            index_prefix(b"9999999999999999999 "),
            Some((9_999_999_999_999_999_999, 19))
        );
        assert_eq!(index_prefix(b"18446744073709551615 "), None);
    }

    /// Decimal strings built from parts: every sign, digit count (up to
    /// 25, past 19), point position and exponent, subnormal and huge
    /// ranges included.
    fn decimal() -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec!["", "-", "+"]),
            "[0-9]{0,25}",
            prop::option::of("[0-9]{0,25}"),
            prop::option::of((
                prop::sample::select(vec!["e", "E"]),
                prop::sample::select(vec!["", "-", "+"]),
                0i32..400,
            )),
        )
            .prop_map(|(s, int, frac, e)| {
                let mut t = format!("{s}{int}");
                if let Some(f) = frac {
                    t.push('.');
                    t.push_str(&f);
                }
                if let Some((e, es, x)) = e {
                    t.push_str(&format!("{e}{es}{x}"));
                }
                t
            })
    }

    /// Written exponents beyond std's cap (65536), set off by long runs
    /// of fraction zeros: std's bits, not the mathematically nearer ones.
    #[test]
    fn huge_exponents_match_std() {
        for (zeros, exp) in [
            (699_995, "e700000"),
            (999_699, "e10000000"),
            (70_000, "e70010"),
            (2_000, "e-5"),
        ] {
            let s = format!("0.{}1{exp}", "0".repeat(zeros));
            check(&s);
            check(&format!("-{s}"));
        }
        check(&format!("1{}e-1200", "0".repeat(1_100)));
        check("1e99999999999999999999");
        check("0.1e-99999999999999999999");
    }

    /// Integer fields one digit too long for the fast path: no overflow
    /// (a panic in debug builds), std decides.
    #[test]
    fn long_integers_are_left_to_std() {
        assert_eq!(
            index_prefix(b"1234567890123456789 "),
            Some((1_234_567_890_123_456_789, 19))
        );
        assert_eq!(index_prefix(b"18446744073709551616 1 1"), None);
        assert_eq!(index_prefix(b"99999999999999999999"), None);
        assert_eq!(
            i64_prefix(b"-123456789012345678"),
            Some((-123_456_789_012_345_678, 19))
        );
        assert_eq!(i64_prefix(b"9223372036854775808"), None);
        assert_eq!(i64_prefix(b"-9999999999999999999"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn decimals_match_std(s in decimal()) {
            check(&s);
        }

        /// Every f64, printed shortest, with 17 digits and with 12.
        #[test]
        fn printed_floats_match_std(bits in any::<u64>()) {
            let f = f64::from_bits(bits);
            if f.is_finite() {
                for s in [format!("{f}"), format!("{f:e}"), format!("{f:.16e}"), format!("{f:.11E}")] {
                    check(&s);
                }
            }
        }

        /// Mantissas of up to 20 digits at every exponent std can reach:
        /// the 128-bit product path and its fallbacks.
        #[test]
        fn long_mantissas_match_std(w in 1u64..=u64::MAX, q in -370i64..340, neg in any::<bool>()) {
            let s = if neg { "-" } else { "" };
            check(&format!("{s}{w}e{q}"));
            check(&format!("{s}0.{w}E{q}"));
            let d = w.to_string();
            let (a, b) = d.split_at(d.len() / 2);
            check(&format!("{s}{a}.{b}e{q}"));
        }

        /// Subnormals and values near the ends of the range.
        #[test]
        fn extreme_floats_match_std(m in 1u64..(1 << 53), e in prop::sample::select(vec![-330i32, -324, -310, -308, -300, 290, 300, 307, 308, 309])) {
            check(&format!("{m}e{e}"));
            let f = f64::from_bits(m & ((1 << 52) - 1));
            check(&format!("{f:.16e}"));
            check(&format!("{f:e}"));
        }

        /// Arbitrary bytes: never a value std does not give.
        #[test]
        fn any_bytes_match_std(b in prop::collection::vec(prop::sample::select(b"0123456789+-.eE x".to_vec()), 0..30)) {
            if let Ok(s) = std::str::from_utf8(&b) {
                check(s);
                if let Some((v, n)) = f64_prefix(&b, powers_of_five()) {
                    let want: f64 = s[..n].parse().unwrap();
                    prop_assert_eq!(v.to_bits(), want.to_bits());
                }
                if let Some((v, n)) = i64_prefix(&b) {
                    prop_assert_eq!(Ok(v), s[..n].parse::<i64>());
                }
            }
        }
    }
}
