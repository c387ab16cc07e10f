//! Sender-side combining: the off-rank records a rank is about to send
//! are sorted by index tuple and each group of equal tuples is replaced by
//! the fewer records the library's [`Precombine`] gives for it (each
//! policy's own combiner decides), which the owner combines into exactly
//! the same result: bit-identical whatever was combined where. `last` is
//! refused by the distributed builder (the order of contributions from
//! different ranks is not defined).

pub(crate) use coo_assembler::internals::assemble::combine::Precombine;

/// Sort the records of `recs` (`wpr` words each: index tuple, raw value)
/// by index tuple and write them, groups combined as `how` allows, to
/// `out` (cleared first). `perm` is scratch. Returns the records written.
pub(crate) fn sort_and_combine(
    recs: &[u64],
    wpr: usize,
    how: Precombine,
    perm: &mut Vec<u32>,
    out: &mut Vec<u64>,
) -> usize {
    let n = recs.len() / wpr;
    let key = |r: u32| &recs[r as usize * wpr..r as usize * wpr + wpr - 1];
    let raw = |r: u32| recs[r as usize * wpr + wpr - 1];
    perm.clear();
    perm.extend(0..n as u32);
    perm.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
    out.clear();
    let mut raws = Vec::new();
    let mut g = 0;
    while g < n {
        let k = key(perm[g]);
        let mut e = g + 1;
        while e < n && key(perm[e]) == k {
            e += 1;
        }
        raws.clear();
        raws.extend(perm[g..e].iter().map(|&r| raw(r)));
        g = e;
        how.group(&raws, |v| {
            out.extend_from_slice(k);
            out.push(v);
        });
    }
    out.len() / wpr
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use coo_assembler::DType;
    use coo_assembler::internals::assemble::combine::CombinerKind;
    use coo_assembler::internals::assemble::exact::ExactSum;

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
        let how = Precombine::new(CombinerKind::FloatSum, DType::F64);
        let n = sort_and_combine(&recs, 3, how, &mut perm, &mut out);
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
        let how = Precombine::new(CombinerKind::IntSum, DType::U8);
        assert_eq!(sort_and_combine(&recs, 3, how, &mut perm, &mut out), 3);
        assert_eq!(&out[6..], &[1, 0, 3]);
        // i32 min of -5, 7, -9.
        let recs = [4u64, 4, (-5i64) as u64, 4, 4, 7, 4, 4, (-9i64) as u64];
        let how = Precombine::new(CombinerKind::IntExtreme { max: false }, DType::I32);
        sort_and_combine(&recs, 3, how, &mut perm, &mut out);
        assert_eq!(out, vec![4, 4, (-9i64) as u64]);
        // Float max prefers +0.0 over -0.0 whatever the order.
        let recs = [
            rec(0, 0, -0.0),
            rec(0, 0, 0.0),
            rec(1, 1, 0.0),
            rec(1, 1, -0.0),
        ]
        .concat();
        let how = Precombine::new(CombinerKind::FloatExtreme { max: true }, DType::F64);
        sort_and_combine(&recs, 3, how, &mut perm, &mut out);
        assert_eq!(out, [rec(0, 0, 0.0), rec(1, 1, 0.0)].concat());
        // Off sends everything, sorted.
        let recs = [rec(2, 0, 1.0), rec(1, 0, 2.0), rec(2, 0, 3.0)].concat();
        let off = Precombine::new(CombinerKind::Last, DType::F64);
        sort_and_combine(&recs, 3, off, &mut perm, &mut out);
        assert_eq!(out.len(), 9);
        assert_eq!(out[0], 1);
    }
}
