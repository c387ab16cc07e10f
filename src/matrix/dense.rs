//! The dense form of a small matrix (what scipy's `todense()` gives).

use super::error::{MatrixError, MatrixResult};
use super::view::Matrix;
use crate::Value;

/// Largest number of elements [`dense`] accepts by default.
pub const DENSE_LIMIT: u64 = 10_000;

/// The matrix as `rows * cols` values in row-major order (zeros of the
/// element type where nothing is stored). Refused above `limit` elements.
pub fn dense(a: &Matrix<'_>, limit: u64) -> MatrixResult<Vec<Value>> {
    let elements = a.rows() as u128 * a.cols() as u128;
    if elements > limit as u128 {
        return Err(MatrixError::TooManyElements {
            elements,
            shape: format!("{} x {}", a.rows(), a.cols()),
            limit,
        });
    }
    let d = a.dtype();
    let zero = d.zero();
    let cols = a.cols() as usize;
    let mut out = vec![zero; elements as usize];
    let mut p = 0usize;
    // Storage order of any layout: each entry lands at its own place.
    a.tensor().try_for_each(|ij, v| -> MatrixResult<()> {
        let slot = ij[0]
            .checked_mul(cols as u64)
            .and_then(|r| r.checked_add(ij[1]))
            .filter(|_| ij[1] < cols as u64)
            .and_then(|k| out.get_mut(k as usize));
        match slot {
            Some(s) => *s = v,
            None => return Err(a.corrupt(p, format_args!("coordinate {ij:?} is out of range"))),
        }
        p += 1;
        Ok(())
    })?;
    Ok(out)
}
