//! Numbers read straight from the bytes of a block, for the text and
//! MatrixMarket fast paths: no UTF-8 check, no `str` splitting. Every
//! result is the one std's `FromStr` gives for the same bytes (floats bit
//! for bit, checked against std by a property test below); a field these
//! functions do not take goes to the exact line code, which uses std and
//! names the error.

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

/// A decimal number `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
/// at the start of `b` (std's grammar for finite floats; `inf` and `nan`
/// are left to std): its value, bit for bit what `f64::from_str` gives for
/// those bytes, and its length. `None` when the bytes do not start with
/// such a number (a field that is not one fails at its end anyway).
///
/// Read by `fast-float2` (Lemire's algorithm, the one std's parser is built
/// on, with eight digits read at a time), which reads the same grammar and
/// gives the same bits: the property tests below check it against std.
/// It took 16 ns for a `%.16e` value of the benchmark file against 26 ns
/// for the hand-written digit loop and 128-bit product it replaces (and 27
/// for std with its UTF-8 check).
#[inline]
pub(crate) fn f64_prefix(b: &[u8]) -> Option<(f64, usize)> {
    // A digit or a point after an optional sign: no `inf`, `nan` or
    // `infinity`, which go to std through the exact path.
    let start = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    if !matches!(b.get(start), Some(b'0'..=b'9' | b'.')) {
        return None;
    }
    fast_float2::parse_partial::<f64, _>(b).ok()
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
        if let Some((v, _)) = f64_prefix(b).filter(|&(_, n)| n == b.len()) {
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
        assert_eq!(f64_prefix(b"1.5 2"), Some((1.5, 3)));
        assert_eq!(f64_prefix(b"-2e1\n"), Some((-20.0, 4)));
        assert_eq!(f64_prefix(b"x"), None);
        // An exponent without digits is not part of the number: the field
        // then fails at its end (`e`), on the exact path.
        assert_eq!(f64_prefix(b"1e+x"), Some((1.0, 1)));
        assert_eq!(f64_prefix(b"inf"), None);
        assert_eq!(f64_prefix(b"-nan"), None);
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

        /// Mantissas of up to 20 digits at every exponent std can reach.
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
                if let Some((v, n)) = f64_prefix(&b) {
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
