//! Row ownership: contiguous row ranges, given or chosen from a sample of
//! the pushed rows so that every rank receives about as many entries.
//! Pure functions (no MPI), unit-tested here.

use coo_assembler::{Error, Result};

/// Rows kept per rank for choosing the ranges.
pub const SAMPLE_ROWS: usize = 4096;

/// A reservoir sample of pushed rows (Algorithm R with a fixed-seed
/// splitmix64, so a run is reproducible for a given push order).
#[derive(Clone, Debug)]
pub struct RowSample {
    rows: Vec<u64>,
    seen: u64,
    state: u64,
}

impl RowSample {
    /// An empty sample; `seed` differs per rank.
    pub fn new(seed: u64) -> RowSample {
        RowSample {
            rows: Vec::with_capacity(SAMPLE_ROWS),
            seen: 0,
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Offer one pushed row.
    #[inline]
    pub fn offer(&mut self, row: u64) {
        self.seen += 1;
        if self.rows.len() < SAMPLE_ROWS {
            self.rows.push(row);
        } else {
            let j = self.next() % self.seen;
            if (j as usize) < SAMPLE_ROWS {
                self.rows[j as usize] = row;
            }
        }
    }

    /// The rows kept.
    pub fn rows(&self) -> &[u64] {
        &self.rows
    }

    /// Rows offered.
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

/// Check caller-given range starts: `starts[0] = 0`, strictly increasing,
/// all below `nrows`, one per rank.
pub fn check_starts(starts: &[u64], nrows: u64, ranks: usize) -> Result<()> {
    if starts.len() != ranks {
        return Err(Error::InvalidOptions(format!(
            "{} row range starts given for {ranks} ranks",
            starts.len()
        )));
    }
    if starts.first() != Some(&0)
        || starts.windows(2).any(|w| w[0] >= w[1])
        || starts.last().is_some_and(|&s| s >= nrows)
    {
        return Err(Error::InvalidOptions(format!(
            "row range starts {starts:?} must begin at 0, increase strictly and stay below {nrows} rows (every rank owns at least one row)"
        )));
    }
    Ok(())
}

/// Range starts for `ranks` ranks over `nrows` rows from weighted samples
/// `(row, weight)` (a rank's sample rows weigh its push count over its
/// sample size). Every rank gets at least one row (`nrows >= ranks`).
pub fn starts_from_sample(mut sample: Vec<(u64, f64)>, nrows: u64, ranks: usize) -> Vec<u64> {
    let k = ranks as u64;
    let mut starts = vec![0u64; ranks];
    sample.sort_by_key(|a| a.0);
    let total: f64 = sample.iter().map(|s| s.1).sum();
    let mut cum = 0.0;
    let mut it = sample.iter().peekable();
    for (j, s) in starts.iter_mut().enumerate().skip(1) {
        let want = total * j as f64 / ranks as f64;
        let mut at = None;
        while let Some(&&(row, w)) = it.peek() {
            if cum + w > want {
                at = Some(row);
                break;
            }
            cum += w;
            it.next();
        }
        // Without samples (nothing pushed anywhere): equal row counts.
        *s = match at {
            Some(r) if total > 0.0 => r,
            _ if total > 0.0 => nrows,
            _ => nrows * j as u64 / k,
        };
    }
    // Strictly increasing, and room for the ranks after each one.
    for j in 1..ranks {
        let lo = starts[j - 1] + 1;
        let hi = nrows - (k - j as u64);
        starts[j] = starts[j].clamp(lo, hi.max(lo));
    }
    starts
}

/// The rank owning `row`, given the range starts.
#[inline]
pub fn owner(starts: &[u64], row: u64) -> usize {
    starts.partition_point(|&s| s <= row) - 1
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn starts_balance_a_skewed_sample() {
        // Rows 0..100 weigh 1, rows 100..1000 weigh 0.1: half of the weight
        // is in the first 100 rows.
        let mut s: Vec<(u64, f64)> = (0..100).map(|r| (r, 1.0)).collect();
        s.extend((100..1100).map(|r| (r, 0.1)));
        let st = starts_from_sample(s, 1100, 2);
        assert_eq!(st[0], 0);
        assert!((95..=105).contains(&st[1]), "{st:?}");
        check_starts(&st, 1100, 2).unwrap();
    }

    #[test]
    fn starts_are_valid_in_corner_cases() {
        for (sample, nrows, ranks) in [
            (vec![], 10u64, 4usize),
            (vec![(3u64, 1.0)], 4, 4),
            (vec![(9, 5.0), (9, 5.0)], 10, 3),
            (vec![(0, 1.0)], 1, 1),
        ] {
            let st = starts_from_sample(sample, nrows, ranks);
            check_starts(&st, nrows, ranks).unwrap();
        }
    }

    #[test]
    fn owner_and_checks() {
        let st = [0u64, 5, 9];
        assert_eq!(owner(&st, 0), 0);
        assert_eq!(owner(&st, 4), 0);
        assert_eq!(owner(&st, 5), 1);
        assert_eq!(owner(&st, 100), 2);
        assert!(check_starts(&[0, 5, 5], 10, 3).is_err());
        assert!(check_starts(&[1, 5, 7], 10, 3).is_err());
        assert!(check_starts(&[0, 5, 10], 10, 3).is_err());
        assert!(check_starts(&[0, 5], 10, 3).is_err());
    }

    #[test]
    fn reservoir_keeps_a_bounded_sample() {
        let mut r = RowSample::new(1);
        for i in 0..100_000 {
            r.offer(i);
        }
        assert_eq!(r.rows().len(), SAMPLE_ROWS);
        assert_eq!(r.seen(), 100_000);
        let mean = r.rows().iter().sum::<u64>() as f64 / SAMPLE_ROWS as f64;
        assert!((40_000.0..60_000.0).contains(&mean), "{mean}");
    }
}
