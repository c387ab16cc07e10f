//! The library's names: one table per vocabulary enum (element types,
//! the layouts a stored tensor can have and the subset we write,
//! duplicate and non-finite policies, input and export formats, npz
//! layouts, paging modes) and the one size grammar.
//!
//! `FromStr`, `Display`, the command line's value lists and its `--help`,
//! the Python argument parsing, the C name-based setter and the docs all
//! come from these tables: a front end never spells a name itself, so a
//! new value is one line in one table.
//!
//! The grammar, for every table: ASCII case does not matter, and `_` and
//! `-` are the same character (`reject_nan` = `Reject-NaN`).

use crate::error::{Error, Result};

/// One value of a vocabulary with the names it answers to.
#[derive(Debug)]
pub struct Term<T: 'static> {
    /// The value.
    pub value: T,
    /// Its name: what `Display` writes and `--help` lists first.
    pub name: &'static str,
    /// Other spellings accepted when parsing.
    pub aliases: &'static [&'static str],
    /// One line saying what it means, for `--help` and the docs.
    pub help: &'static str,
}

/// An enum whose values have names (see the module docs).
pub trait Vocabulary: Copy + PartialEq + Sized + 'static {
    /// What the values are, for messages ("duplicate policy").
    const WHAT: &'static str;
    /// Every value, in the order `--help` lists them.
    const TERMS: &'static [Term<Self>];

    /// The value's name.
    fn name(self) -> &'static str;

    /// The value named `s` (its name or an alias, in the table's grammar).
    fn parse(s: &str) -> Result<Self> {
        Self::TERMS
            .iter()
            .find(|t| {
                std::iter::once(&t.name)
                    .chain(t.aliases)
                    .any(|n| same_name(n, s))
            })
            .map(|t| t.value)
            .ok_or_else(|| Error::InvalidOptions(unknown::<Self>(s)))
    }

    /// The value's table row.
    fn term(self) -> &'static Term<Self> {
        // Every value is in its table (the macro builds both from one list).
        let i = Self::TERMS.iter().position(|t| t.value == self);
        &Self::TERMS[i.unwrap_or(0)]
    }
}

/// "unknown duplicate policy \"avg\"; use one of sum, min, max, last, error".
fn unknown<T: Vocabulary>(s: &str) -> String {
    let names: Vec<&str> = T::TERMS.iter().map(|t| t.name).collect();
    format!("unknown {} {s:?}; use one of {}", T::WHAT, names.join(", "))
}

/// `a` and `b` spell the same name: ASCII case-insensitive, `_` = `-`.
pub fn same_name(a: &str, b: &str) -> bool {
    let norm = |c: u8| match c {
        b'_' => b'-',
        c => c.to_ascii_lowercase(),
    };
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| norm(x) == norm(y))
}

/// Declares a vocabulary enum: the enum, its [`Vocabulary`] table, `name`,
/// `FromStr` and `Display`, from one list of
/// `Variant => "name" | "alias"...: "help"` lines (doc comments and
/// attributes allowed on each).
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis enum $ty:ident ($what:literal) {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => $name:literal $(| $alias:literal)* : $help:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $ty {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $ty {
            /// The value's name (its [`Vocabulary`](crate::vocab::Vocabulary) name).
            pub fn name(self) -> &'static str {
                match self { $( $ty::$variant => $name, )+ }
            }
        }

        impl $crate::vocab::Vocabulary for $ty {
            const WHAT: &'static str = $what;
            const TERMS: &'static [$crate::vocab::Term<Self>] = &[
                $( $crate::vocab::Term {
                    value: $ty::$variant,
                    name: $name,
                    aliases: &[$($alias),*],
                    help: $help,
                }, )+
            ];
            fn name(self) -> &'static str {
                $ty::name(self)
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                <$ty as $crate::vocab::Vocabulary>::parse(s)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::vocab::Vocabulary::name(*self))
            }
        }
    };
}
pub(crate) use vocabulary;

/// Units of the size grammar and their multipliers: binary for `K`/`KiB`
/// (and `k`, `Ki`), decimal for `KB`.
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("ki", 1 << 10),
    ("kib", 1 << 10),
    ("kb", 1_000),
    ("m", 1 << 20),
    ("mi", 1 << 20),
    ("mib", 1 << 20),
    ("mb", 1_000_000),
    ("g", 1 << 30),
    ("gi", 1 << 30),
    ("gib", 1 << 30),
    ("gb", 1_000_000_000),
    ("t", 1 << 40),
    ("ti", 1 << 40),
    ("tib", 1 << 40),
    ("tb", 1_000_000_000_000),
];

/// The size grammar, in words, for `--help` and error messages.
pub const SIZE_GRAMMAR: &str = "a number of bytes with an optional unit: 4096, 1e9, 64M, 256MiB, 256 MiB, 1.5GiB, 2g, 100MB (K, M, G, T and KiB... are powers of 1024; KB, MB, GB, TB powers of 1000)";

/// Bytes in `s`, in the one size grammar every front end uses: a number
/// (integer, decimal or with an exponent: `4096`, `1.5`, `.5`, `1e9`), an
/// optional space, an optional unit from `B, K, KiB, KB, M, MiB, MB, G,
/// GiB, GB, T, TiB, TB` (any case; the `i` forms and single letters are
/// powers of 1024, `KB`... powers of 1000). A fractional number of bytes
/// is rounded down; the result must fit 64 bits.
///
/// ```
/// use coo_assembler::vocab::parse_size;
/// assert_eq!(parse_size("256MiB")?, 256 << 20);
/// assert_eq!(parse_size("1.5 GiB")?, 3 << 29);
/// assert_eq!(parse_size("1e9")?, 1_000_000_000);
/// assert!(parse_size("8 parsecs").is_err());
/// # Ok::<(), coo_assembler::Error>(())
/// ```
pub fn parse_size(s: &str) -> Result<u64> {
    let bad = |why: &str| Error::InvalidOptions(format!("size {s:?} {why}; give {SIZE_GRAMMAR}"));
    let t = s.trim();
    let b = t.as_bytes();
    // The number: digits, an optional fraction, an optional exponent.
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits(0);
    let mut end = int_end;
    if end < b.len() && b[end] == b'.' {
        end = digits(end + 1);
    }
    let mantissa_digits = b[..end].iter().filter(|c| c.is_ascii_digit()).count();
    if mantissa_digits == 0 {
        return Err(bad("does not start with a number"));
    }
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut j = end + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let k = digits(j);
        // "1e9" has an exponent; "2e" is not a unit either way.
        if k > j {
            end = k;
        }
    }
    let (num, unit) = t.split_at(end);
    let unit = unit.trim_start();
    let mult = UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, m)| m)
        .ok_or_else(|| bad(&format!("has an unknown unit {unit:?}")))?;
    let too_large = || bad("is too large (at most 2^64 - 1 bytes)");
    if end == int_end {
        // A plain integer: exact, whatever its size.
        let n: u128 = num.parse().map_err(|_| too_large())?;
        let bytes = n.checked_mul(u128::from(mult)).ok_or_else(too_large)?;
        return u64::try_from(bytes).map_err(|_| too_large());
    }
    let v: f64 = num.parse().map_err(|_| bad("is not a number"))?;
    let bytes = (v * mult as f64).floor();
    // 2^64 is exact in f64; anything at or above it does not fit.
    if !bytes.is_finite() || bytes >= 18_446_744_073_709_551_616.0 {
        return Err(too_large());
    }
    Ok(bytes as u64)
}

pub use crate::size::format_size;

#[cfg(test)]
mod tests {
    use super::*;

    vocabulary! {
        /// A test vocabulary.
        enum Fruit ("fruit") {
            Apple => "apple" | "malus": "a pome",
            /// Doc comments are allowed.
            BloodOrange => "blood-orange": "a citrus",
        }
    }

    #[test]
    fn sizes_are_told_in_the_grammar_they_are_read_in() {
        for (b, text) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1 KiB"),
            (1536, "1.5 KiB"),
            (256 << 20, "256 MiB"),
            (3 << 30, "3 GiB"),
            (u64::MAX, "16777216 TiB"),
        ] {
            assert_eq!(format_size(b), text);
        }
        for b in [1u64 << 20, 3_565_158, 5 << 30, 123_456_789_012] {
            let back = parse_size(&format_size(b)).unwrap();
            let err = (back as f64 - b as f64).abs() / b as f64;
            assert!(err < 0.05, "{b} -> {} -> {back}", format_size(b));
        }
    }

    #[test]
    fn names_parse_in_the_grammar_and_round_trip() {
        for t in Fruit::TERMS {
            assert_eq!(t.name.parse::<Fruit>().unwrap(), t.value);
            assert_eq!(t.value.to_string(), t.name);
            assert_eq!(t.value.term().help, t.help);
        }
        assert_eq!("MALUS".parse::<Fruit>().unwrap(), Fruit::Apple);
        assert_eq!("blood_Orange".parse::<Fruit>().unwrap(), Fruit::BloodOrange);
        let e = "pear".parse::<Fruit>().unwrap_err().to_string();
        assert!(
            e.contains("unknown fruit \"pear\"; use one of apple, blood-orange"),
            "{e}"
        );
    }

    #[test]
    fn sizes_follow_one_grammar() {
        let ok = [
            ("4096", 4096),
            ("0", 0),
            ("256MiB", 256 << 20),
            ("256 MiB", 256 << 20),
            ("256mib", 256 << 20),
            ("1.5GiB", 3 << 29),
            (".5GiB", 1 << 29),
            ("64M", 64 << 20),
            ("2g", 2 << 30),
            ("1e9", 1_000_000_000),
            ("1E3 KB", 1_000_000),
            ("2.5e-1 KiB", 256),
            ("100MB", 100_000_000),
            ("1Ki", 1024),
            ("7 B", 7),
            ("1.7", 1),
            ("  8MiB  ", 8 << 20),
            ("18446744073709551615", u64::MAX),
            ("16777215TiB", 16_777_215 << 40),
        ];
        for (s, want) in ok {
            assert_eq!(parse_size(s).unwrap(), want, "{s}");
        }
        for s in [
            "",
            "MiB",
            "-1",
            "8 parsecs",
            "1.2.3",
            "e9",
            "18446744073709551616",
            "16777216TiB",
            "1e30",
            "inf",
            "nan",
            "1 e9",
        ] {
            let e = parse_size(s).unwrap_err().to_string();
            assert!(
                e.contains(&format!("size {s:?}")) && e.contains("256MiB"),
                "{s}: {e}"
            );
        }
    }
}
