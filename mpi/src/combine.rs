//! Sender-side combining: the off-rank records a rank is about to send
//! are sorted by index tuple and each group of equal tuples is replaced by
//! fewer records that the owner combines into exactly the same result.
//!
//! What stays exact (the owner's result is bit-identical whatever was
//! combined where):
//! - **exact float sums**: a group's exact sum is a non-overlapping
//!   expansion ([`ExactSum`]); its partials are f64 values whose exact sum
//!   is the group's, so they travel as ordinary records (usually one or
//!   two for finite-element data). An exactly cancelling group goes as one
//!   `+0.0` (or `-0.0` if every value was `-0.0`), which keeps the owner's
//!   signed-zero rule. Groups holding NaN or an infinity, or whose sum
//!   needed the wide form, go unchanged.
//! - **integer sums**: the group's sum in i128 goes as one record when it
//!   fits the element type (the owner sums in i128 and checks the range at
//!   the end, so the result, or the overflow error, is the same); otherwise
//!   the group goes unchanged.
//! - **min / max** (float or integer): the group's min or max, by the
//!   owner's own rule (NaN wins, `-0.0` below `+0.0`), which is
//!   associative and commutative.
//!
//! Not combined: fast (inexact) float sums, whose result depends on the
//! order anyway, and the `error` policy, whose duplicates the owner must
//! see. `last` is refused by the distributed builder (the order of
//! contributions from different ranks is not defined).

use coo_assembler::DType;
use coo_assembler::internals::assemble::combine::{CombinerKind, PushValue};
use coo_assembler::internals::assemble::exact::ExactSum;

/// How a rank may combine the records it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precombine {
    /// Send every record (sorted by index tuple).
    Off,
    FloatSum,
    FloatExtreme {
        max: bool,
    },
    IntSum {
        signed: bool,
    },
    IntExtreme {
        max: bool,
        signed: bool,
    },
}

impl Precombine {
    pub(crate) fn of(kind: CombinerKind, dtype: DType) -> Precombine {
        let signed = dtype.is_signed_int();
        match kind {
            CombinerKind::FloatSum => Precombine::FloatSum,
            CombinerKind::FloatExtreme { max } => Precombine::FloatExtreme { max },
            CombinerKind::IntSum => Precombine::IntSum { signed },
            CombinerKind::IntExtreme { max } => Precombine::IntExtreme { max, signed },
            CombinerKind::FloatFastSum | CombinerKind::Last | CombinerKind::Unique => {
                Precombine::Off
            }
        }
    }
}

/// The owner's float min/max rule (see `FloatExtreme` in the assembler).
fn pick(a: f64, b: f64, max: bool) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if max {
        if a > b || (a == b && b.is_sign_negative()) {
            a
        } else {
            b
        }
    } else if a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

fn int_of(raw: u64, signed: bool) -> i128 {
    if signed {
        raw as i64 as i128
    } else {
        raw as i128
    }
}

/// Sort the records of `recs` (`wpr` words each: index tuple, raw value)
/// by index tuple and write them, groups combined as `how` allows, to
/// `out` (cleared first). `perm` is scratch. Returns the records written.
pub(crate) fn sort_and_combine(
    recs: &[u64],
    wpr: usize,
    how: Precombine,
    dtype: DType,
    perm: &mut Vec<u32>,
    out: &mut Vec<u64>,
) -> usize {
    let n = recs.len() / wpr;
    let key = |r: u32| &recs[r as usize * wpr..r as usize * wpr + wpr - 1];
    perm.clear();
    perm.extend(0..n as u32);
    perm.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
    out.clear();
    let raw = |r: u32| recs[r as usize * wpr + wpr - 1];
    let emit = |out: &mut Vec<u64>, k: &[u64], v: u64| {
        out.extend_from_slice(k);
        out.push(v);
    };
    let mut g = 0;
    while g < n {
        let k = key(perm[g]);
        let mut e = g + 1;
        while e < n && key(perm[e]) == k {
            e += 1;
        }
        let group = &perm[g..e];
        g = e;
        if group.len() == 1 || how == Precombine::Off {
            for &r in group {
                emit(out, k, raw(r));
            }
            continue;
        }
        match how {
            Precombine::Off => {}
            Precombine::FloatSum => {
                let mut s = ExactSum::new();
                let mut all_neg_zero = true;
                let mut special = false;
                for &r in group {
                    let x = f64::from_bits(raw(r));
                    special |= !x.is_finite();
                    all_neg_zero &= x.to_bits() == (-0.0f64).to_bits();
                    s.add(x);
                }
                match s.partials().filter(|_| !special) {
                    Some([]) => {
                        let z = if all_neg_zero { -0.0f64 } else { 0.0 };
                        emit(out, k, z.to_bits());
                    }
                    Some(parts) => {
                        for p in parts {
                            emit(out, k, p.to_bits());
                        }
                    }
                    None => {
                        for &r in group {
                            emit(out, k, raw(r));
                        }
                    }
                }
            }
            Precombine::FloatExtreme { max } => {
                let v = group
                    .iter()
                    .map(|&r| f64::from_bits(raw(r)))
                    .reduce(|a, b| pick(a, b, max))
                    .unwrap_or(0.0);
                emit(out, k, v.to_bits());
            }
            Precombine::IntSum { signed } => {
                // At most 2^32 terms below 2^64 in magnitude: no i128 overflow.
                let s: i128 = group.iter().map(|&r| int_of(raw(r), signed)).sum();
                let fits = if signed {
                    i64::try_from(s).ok().and_then(|v| v.to_raw(dtype).ok())
                } else {
                    u64::try_from(s).ok().and_then(|v| v.to_raw(dtype).ok())
                };
                match fits {
                    Some(v) => emit(out, k, v),
                    None => {
                        for &r in group {
                            emit(out, k, raw(r));
                        }
                    }
                }
            }
            Precombine::IntExtreme { max, signed } => {
                let it = group.iter().map(|&r| (int_of(raw(r), signed), raw(r)));
                let best = if max {
                    it.max_by_key(|p| p.0)
                } else {
                    it.min_by_key(|p| p.0)
                };
                if let Some((_, v)) = best {
                    emit(out, k, v);
                }
            }
        }
    }
    out.len() / wpr
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Exact sum of the values per index tuple, rounded to f64 bits.
    fn sums(recs: &[u64]) -> std::collections::BTreeMap<(u64, u64), u64> {
        let mut m: std::collections::BTreeMap<(u64, u64), ExactSum> = Default::default();
        for r in recs.chunks_exact(3) {
            m.entry((r[0], r[1])).or_default().add(f64::from_bits(r[2]));
        }
        m.into_iter()
            .map(|(k, s)| (k, s.round_f64().to_bits()))
            .collect()
    }

    fn rec(i: u64, j: u64, v: f64) -> [u64; 3] {
        [i, j, v.to_bits()]
    }

    #[test]
    fn exact_float_sums_keep_the_owners_result() {
        let mut recs = Vec::new();
        let mut z = 7u64;
        for n in 0..5000u64 {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let e = ((z >> 33) % 60) as i32 - 30;
            let v = ((z >> 11) % 1000) as f64 / 999.0 - 0.5;
            recs.extend(rec(n % 37, n % 5, v * 10f64.powi(e)));
        }
        // Groups that cancel, signed zeros, specials.
        recs.extend(rec(100, 0, 1.5));
        recs.extend(rec(100, 0, -1.5));
        recs.extend(rec(101, 0, -0.0));
        recs.extend(rec(101, 0, -0.0));
        recs.extend(rec(102, 0, f64::INFINITY));
        recs.extend(rec(102, 0, 2.0));
        recs.extend(rec(103, 0, 1.7e308));
        recs.extend(rec(103, 0, 1.7e308));
        recs.extend(rec(103, 0, -1.7e308));
        let (mut perm, mut out) = (Vec::new(), Vec::new());
        let n = sort_and_combine(
            &recs,
            3,
            Precombine::FloatSum,
            DType::F64,
            &mut perm,
            &mut out,
        );
        // 185 groups of 27 values over 60 decades: long expansions, but
        // still fewer records than were pushed.
        assert!(n < 5000, "{n}");
        assert_eq!(sums(&out), sums(&recs));
        // Sorted by index tuple.
        assert!(
            out.chunks_exact(3)
                .zip(out.chunks_exact(3).skip(1))
                .all(|(a, b)| a[..2] <= b[..2])
        );
        // The cancelled group is one +0.0, the -0.0 group one -0.0.
        let of = |i: u64| -> Vec<u64> {
            out.chunks_exact(3)
                .filter(|r| r[0] == i)
                .map(|r| r[2])
                .collect()
        };
        assert_eq!(of(100), vec![0.0f64.to_bits()]);
        assert_eq!(of(101), vec![(-0.0f64).to_bits()]);
        assert_eq!(of(102).len(), 2);
        assert_eq!(of(103).len(), 3);
    }

    #[test]
    fn integers_and_extremes() {
        // u8: 200 + 100 does not fit, so the group goes unchanged; 1 + 2 does.
        let recs = [0u64, 0, 200, 0, 0, 100, 1, 0, 1, 1, 0, 2];
        let (mut perm, mut out) = (Vec::new(), Vec::new());
        let how = Precombine::of(CombinerKind::IntSum, DType::U8);
        assert_eq!(
            sort_and_combine(&recs, 3, how, DType::U8, &mut perm, &mut out),
            3
        );
        assert_eq!(&out[6..], &[1, 0, 3]);
        // i32 min of -5, 7, -9.
        let recs = [4u64, 4, (-5i64) as u64, 4, 4, 7, 4, 4, (-9i64) as u64];
        let how = Precombine::of(CombinerKind::IntExtreme { max: false }, DType::I32);
        sort_and_combine(&recs, 3, how, DType::I32, &mut perm, &mut out);
        assert_eq!(out, vec![4, 4, (-9i64) as u64]);
        // Float max prefers +0.0 over -0.0 whatever the order.
        let recs = [
            rec(0, 0, -0.0),
            rec(0, 0, 0.0),
            rec(1, 1, 0.0),
            rec(1, 1, -0.0),
        ]
        .concat();
        let how = Precombine::FloatExtreme { max: true };
        sort_and_combine(&recs, 3, how, DType::F64, &mut perm, &mut out);
        assert_eq!(out, [rec(0, 0, 0.0), rec(1, 1, 0.0)].concat());
        // Off sends everything, sorted.
        let recs = [rec(2, 0, 1.0), rec(1, 0, 2.0), rec(2, 0, 3.0)].concat();
        sort_and_combine(&recs, 3, Precombine::Off, DType::F64, &mut perm, &mut out);
        assert_eq!(out.len(), 9);
        assert_eq!(out[0], 1);
    }
}
