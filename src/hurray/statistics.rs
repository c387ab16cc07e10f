//! The 72-byte statistics section of a tensor descriptor.

use super::ByteReader;
use crate::error::Result;

/// Length of the statistics section.
pub const STATISTICS_LEN: usize = 72;
/// computed_mask bit: `nnz` is valid.
pub const NNZ_VALID: u32 = 1 << 0;
/// computed_mask bit: `sparsity_ratio` is valid.
pub const SPARSITY_VALID: u32 = 1 << 1;
/// computed_mask bit: min / max / abs-max are valid.
pub const VALUE_RANGE_VALID: u32 = 1 << 2;
/// computed_mask bit: mean / stddev are valid.
pub const VALUE_STATS_VALID: u32 = 1 << 3;
/// computed_mask bit: N:M sparsity is valid.
pub const NM_SPARSITY_VALID: u32 = 1 << 4;
/// computed_mask bit: has_nan / has_inf are valid.
pub const NAN_INF_VALID: u32 = 1 << 5;
const KNOWN_MASK: u32 = 0x3f;

/// The statistics section, field for field. Fields whose mask bit is clear
/// are written as zero and carry no meaning.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Statistics {
    /// Which fields are valid.
    pub computed_mask: u32,
    /// Number of stored entries.
    pub nnz: u64,
    /// 1 - nnz / product(shape).
    pub sparsity_ratio: f64,
    /// Smallest value of the logical tensor (implicit zeros included).
    pub value_min: f64,
    /// Largest value of the logical tensor.
    pub value_max: f64,
    /// Largest absolute value.
    pub value_abs_max: f64,
    /// Mean over every element of the logical tensor.
    pub value_mean: f64,
    /// Population standard deviation over every element.
    pub value_stddev: f64,
    /// N of N:M structured sparsity.
    pub nm_n: u8,
    /// M of N:M structured sparsity.
    pub nm_m: u8,
    /// Some value is NaN.
    pub has_nan: bool,
    /// Some value is infinite.
    pub has_inf: bool,
}

impl Statistics {
    /// Encode to 72 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.computed_mask.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.nnz.to_le_bytes());
        for v in [
            self.sparsity_ratio,
            self.value_min,
            self.value_max,
            self.value_abs_max,
            self.value_mean,
            self.value_stddev,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&[
            self.nm_n,
            self.nm_m,
            self.has_nan as u8,
            self.has_inf as u8,
            0,
            0,
            0,
            0,
        ]);
    }

    /// Decode from a reader positioned at the section.
    pub(crate) fn decode(r: &mut ByteReader<'_>) -> Result<Statistics> {
        let mask_pos = r.pos();
        let computed_mask = r.u32("statistics computed_mask")?;
        if computed_mask & !KNOWN_MASK != 0 {
            return Err(r.err_at(
                mask_pos,
                format!("statistics computed_mask 0x{computed_mask:08x} sets undefined bits 6..31"),
            ));
        }
        r.reserved(4, "statistics reserved bytes 4..8")?;
        let nnz = r.u64("statistics nnz")?;
        let sparsity_ratio = r.f64("sparsity_ratio")?;
        let value_min = r.f64("value_min")?;
        let value_max = r.f64("value_max")?;
        let value_abs_max = r.f64("value_abs_max")?;
        let value_mean = r.f64("value_mean")?;
        let sd_pos = r.pos();
        let value_stddev = r.f64("value_stddev")?;
        if computed_mask & VALUE_STATS_VALID != 0 && value_stddev < 0.0 {
            return Err(r.err_at(sd_pos, format!("value_stddev {value_stddev} is negative")));
        }
        let nm_n = r.u8("nm_n")?;
        let nm_m = r.u8("nm_m")?;
        let flag = |r: &mut ByteReader<'_>, what: &str| -> Result<bool> {
            let p = r.pos();
            match r.u8(what)? {
                0 => Ok(false),
                1 => Ok(true),
                v => Err(r.err_at(p, format!("{what} must be 0 or 1, found {v}"))),
            }
        };
        let has_nan = flag(r, "has_nan")?;
        let has_inf = flag(r, "has_inf")?;
        r.reserved(4, "statistics reserved bytes 68..72")?;
        Ok(Statistics {
            computed_mask,
            nnz,
            sparsity_ratio,
            value_min,
            value_max,
            value_abs_max,
            value_mean,
            value_stddev,
            nm_n,
            nm_m,
            has_nan,
            has_inf,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Statistics {
            computed_mask: 0x2f,
            nnz: 3,
            sparsity_ratio: 0.8125,
            value_min: -0.5,
            value_max: 2.0,
            value_abs_max: 2.0,
            value_mean: 0.1875,
            value_stddev: 0.6,
            nm_n: 0,
            nm_m: 0,
            has_nan: false,
            has_inf: true,
        };
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(b.len(), STATISTICS_LEN);
        let mut r = ByteReader::new(&b, 0, "stats");
        assert_eq!(Statistics::decode(&mut r).unwrap(), s);
        let mut bad = b.clone();
        bad[66] = 2;
        assert!(Statistics::decode(&mut ByteReader::new(&bad, 0, "s")).is_err());
        let mut bad = b.clone();
        bad[3] = 0x80;
        assert!(Statistics::decode(&mut ByteReader::new(&bad, 0, "s")).is_err());
    }
}
