//! How contributions to one coordinate combine, per element type and
//! duplicate policy, and how a combined state travels through spill runs.
//!
//! A contribution is held as 8 raw bits whose meaning depends on the
//! element type: the f64 bits for every float type (f16, bf16 and f32
//! values are exact in f64), the i64 bits for signed integers, the u64 for
//! unsigned integers. A [`Combiner`] turns the raw contributions of one
//! coordinate within a run into an accumulator (`Acc`), merges accumulators
//! across runs, encodes them into spill runs, and finally rounds once to the
//! element type.

use crate::element::{DType, Value};
use crate::exact::{sum_exact, ExactSum};
use crate::options::DuplicatePolicy;
use half::{bf16, f16};
use std::fmt;

/// Why combining failed; the caller adds the coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CombineError {
    /// Duplicate contributions under the `error` policy.
    Duplicate,
    /// An integer result does not fit the element type.
    Overflow,
}

/// One way of combining contributions of one element type.
pub(crate) trait Combiner: Send + Sync + 'static {
    /// State of a partially combined coordinate.
    type Acc: Clone + Send + Sync + fmt::Debug;
    /// Combine the contributions one run holds for one coordinate, in push
    /// order. `origin` orders runs for the `last` policy.
    fn from_group(&self, raws: &[u64], origin: u64) -> Result<Self::Acc, CombineError>;
    /// Fold `b` into `a`. For order-dependent policies `b` may come from
    /// any run: the accumulator carries what it needs to decide.
    fn merge(&self, a: &mut Self::Acc, b: Self::Acc) -> Result<(), CombineError>;
    /// Append the spill encoding of `a`.
    fn encode(&self, a: &Self::Acc, out: &mut Vec<u8>);
    /// Decode one accumulator; None on malformed bytes.
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<Self::Acc>;
    /// The final value, rounded once to the element type.
    fn finish(&self, a: &Self::Acc) -> Result<Value, CombineError>;
}

/// Round an f64 to a float element type, as a Value holding the rounded value.
fn float_value(dtype: DType, v: f64) -> Value {
    Value::Float(match dtype {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    })
}

/// Range of an integer element type, as i128.
fn int_range(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::U8 => (0, u8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (0, u64::MAX as i128),
    }
}

/// An integer result as a Value, or Overflow when it does not fit.
fn int_value(dtype: DType, v: i128) -> Result<Value, CombineError> {
    let (lo, hi) = int_range(dtype);
    if v < lo || v > hi {
        return Err(CombineError::Overflow);
    }
    Ok(if dtype.is_signed_int() {
        Value::Int(v as i64)
    } else {
        Value::UInt(v as u64)
    })
}

/// A raw contribution as a Value of the element type (no rounding needed:
/// pushes already checked that it fits).
fn raw_value(dtype: DType, raw: u64) -> Value {
    if dtype.is_float() {
        float_value(dtype, f64::from_bits(raw))
    } else if dtype.is_signed_int() {
        Value::Int(raw as i64)
    } else {
        Value::UInt(raw)
    }
}

fn raw_int(dtype: DType, raw: u64) -> i128 {
    if dtype.is_signed_int() {
        raw as i64 as i128
    } else {
        raw as i128
    }
}

pub(crate) fn write_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

fn read_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let b = buf.get(*pos..pos.checked_add(8)?)?;
    *pos += 8;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// Exact float sums.
pub(crate) struct FloatSum(pub DType);

impl Combiner for FloatSum {
    type Acc = ExactSum;
    fn from_group(&self, raws: &[u64], _: u64) -> Result<ExactSum, CombineError> {
        if let [one] = raws {
            return Ok(ExactSum::from_value(f64::from_bits(*one)));
        }
        // Groups are short (FE: a handful of elements share an entry); a
        // small stack buffer avoids allocating for them.
        let mut buf = [0f64; 32];
        if raws.len() <= buf.len() {
            for (b, r) in buf.iter_mut().zip(raws) {
                *b = f64::from_bits(*r);
            }
            Ok(sum_exact(&buf[..raws.len()]))
        } else {
            let mut s = ExactSum::new();
            for r in raws {
                s.add(f64::from_bits(*r));
            }
            Ok(s)
        }
    }
    fn merge(&self, a: &mut ExactSum, b: ExactSum) -> Result<(), CombineError> {
        a.merge(&b);
        Ok(())
    }
    fn encode(&self, a: &ExactSum, out: &mut Vec<u8>) {
        a.encode(out)
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<ExactSum> {
        ExactSum::decode(buf, pos)
    }
    fn finish(&self, a: &ExactSum) -> Result<Value, CombineError> {
        Ok(Value::Float(match self.0 {
            DType::F16 => a.round_f16().to_f64(),
            DType::BF16 => a.round_bf16().to_f64(),
            DType::F32 => a.round_f32() as f64,
            _ => a.round_f64(),
        }))
    }
}

/// Float min or max; NaN wins so that a NaN contribution is never hidden.
pub(crate) struct FloatExtreme {
    pub dtype: DType,
    pub max: bool,
}

impl FloatExtreme {
    fn pick(&self, a: f64, b: f64) -> f64 {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else if self.max {
            // -0.0 and 0.0 compare equal: prefer +0.0 for max and -0.0 for
            // min so the result does not depend on the order.
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
}

impl Combiner for FloatExtreme {
    type Acc = f64;
    fn from_group(&self, raws: &[u64], _: u64) -> Result<f64, CombineError> {
        let mut it = raws.iter().map(|r| f64::from_bits(*r));
        let first = it.next().unwrap_or(0.0);
        Ok(it.fold(first, |a, b| self.pick(a, b)))
    }
    fn merge(&self, a: &mut f64, b: f64) -> Result<(), CombineError> {
        *a = self.pick(*a, b);
        Ok(())
    }
    fn encode(&self, a: &f64, out: &mut Vec<u8>) {
        out.extend_from_slice(&a.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<f64> {
        read_u64(buf, pos).map(f64::from_bits)
    }
    fn finish(&self, a: &f64) -> Result<Value, CombineError> {
        Ok(float_value(self.dtype, *a))
    }
}

/// Exact integer sums in i128; the element type's range is checked at the end.
pub(crate) struct IntSum(pub DType);

fn zigzag_encode(v: i128, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 127)) as u128;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn zigzag_decode(buf: &[u8], pos: &mut usize) -> Option<i128> {
    let mut z = 0u128;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift >= 128 {
            return None;
        }
        z |= u128::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    Some(((z >> 1) as i128) ^ -((z & 1) as i128))
}

impl Combiner for IntSum {
    type Acc = i128;
    fn from_group(&self, raws: &[u64], _: u64) -> Result<i128, CombineError> {
        // At most 2^64 terms of magnitude < 2^64 cannot overflow i128.
        Ok(raws.iter().map(|&r| raw_int(self.0, r)).sum())
    }
    fn merge(&self, a: &mut i128, b: i128) -> Result<(), CombineError> {
        *a = a.checked_add(b).ok_or(CombineError::Overflow)?;
        Ok(())
    }
    fn encode(&self, a: &i128, out: &mut Vec<u8>) {
        zigzag_encode(*a, out)
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<i128> {
        zigzag_decode(buf, pos)
    }
    fn finish(&self, a: &i128) -> Result<Value, CombineError> {
        int_value(self.0, *a)
    }
}

/// Integer min or max.
pub(crate) struct IntExtreme {
    pub dtype: DType,
    pub max: bool,
}

impl Combiner for IntExtreme {
    type Acc = i128;
    fn from_group(&self, raws: &[u64], _: u64) -> Result<i128, CombineError> {
        let it = raws.iter().map(|&r| raw_int(self.dtype, r));
        let v = if self.max { it.max() } else { it.min() };
        Ok(v.unwrap_or(0))
    }
    fn merge(&self, a: &mut i128, b: i128) -> Result<(), CombineError> {
        *a = if self.max { (*a).max(b) } else { (*a).min(b) };
        Ok(())
    }
    fn encode(&self, a: &i128, out: &mut Vec<u8>) {
        zigzag_encode(*a, out)
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<i128> {
        zigzag_decode(buf, pos)
    }
    fn finish(&self, a: &i128) -> Result<Value, CombineError> {
        int_value(self.dtype, *a)
    }
}

/// The last contribution: (origin of its run, raw value). Within a run the
/// sort is stable, so the last of a group is the last pushed.
pub(crate) struct Last(pub DType);

impl Combiner for Last {
    type Acc = (u64, u64);
    fn from_group(&self, raws: &[u64], origin: u64) -> Result<(u64, u64), CombineError> {
        Ok((origin, raws.last().copied().unwrap_or(0)))
    }
    fn merge(&self, a: &mut (u64, u64), b: (u64, u64)) -> Result<(), CombineError> {
        if b.0 > a.0 {
            *a = b;
        }
        Ok(())
    }
    fn encode(&self, a: &(u64, u64), out: &mut Vec<u8>) {
        write_varint(a.0, out);
        out.extend_from_slice(&a.1.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<(u64, u64)> {
        let o = read_varint(buf, pos)?;
        Some((o, read_u64(buf, pos)?))
    }
    fn finish(&self, a: &(u64, u64)) -> Result<Value, CombineError> {
        Ok(raw_value(self.0, a.1))
    }
}

/// Duplicates are errors.
pub(crate) struct Unique(pub DType);

impl Combiner for Unique {
    type Acc = u64;
    fn from_group(&self, raws: &[u64], _: u64) -> Result<u64, CombineError> {
        match raws {
            [one] => Ok(*one),
            _ => Err(CombineError::Duplicate),
        }
    }
    fn merge(&self, _: &mut u64, _: u64) -> Result<(), CombineError> {
        Err(CombineError::Duplicate)
    }
    fn encode(&self, a: &u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&a.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<u64> {
        read_u64(buf, pos)
    }
    fn finish(&self, a: &u64) -> Result<Value, CombineError> {
        Ok(raw_value(self.0, *a))
    }
}

/// Which combiner a dtype and policy use (for dispatch in the builder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CombinerKind {
    FloatSum,
    FloatExtreme { max: bool },
    IntSum,
    IntExtreme { max: bool },
    Last,
    Unique,
}

impl CombinerKind {
    pub(crate) fn of(dtype: DType, policy: DuplicatePolicy) -> CombinerKind {
        match (dtype.is_float(), policy) {
            (true, DuplicatePolicy::Sum) => CombinerKind::FloatSum,
            (true, DuplicatePolicy::Min) => CombinerKind::FloatExtreme { max: false },
            (true, DuplicatePolicy::Max) => CombinerKind::FloatExtreme { max: true },
            (false, DuplicatePolicy::Sum) => CombinerKind::IntSum,
            (false, DuplicatePolicy::Min) => CombinerKind::IntExtreme { max: false },
            (false, DuplicatePolicy::Max) => CombinerKind::IntExtreme { max: true },
            (_, DuplicatePolicy::Last) => CombinerKind::Last,
            (_, DuplicatePolicy::Error) => CombinerKind::Unique,
        }
    }
}

/// A value that can be pushed into a tensor of some element type.
///
/// Floats go into float tensors (widened exactly to f64; an f64 pushed into
/// an f32 tensor is summed exactly and rounded once at the end). Integers
/// go into integer tensors when they fit the element type, and into float
/// tensors when they are exact in f64 (|v| <= 2^53).
pub trait PushValue: Copy + fmt::Display {
    /// The raw 8-byte form for `dtype`, or why the value does not fit.
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str>;
    /// The value as f64 if it is a float (for the NaN / infinity policy).
    fn as_float(self) -> Option<f64>;
}

const FLOAT_INTO_INT: &str = "a float value cannot go into an integer tensor";
const INT_OUT_OF_RANGE: &str = "the integer does not fit the tensor's element type";
const INT_NOT_EXACT: &str = "the integer is not exactly representable as a float (|v| > 2^53)";

macro_rules! push_float {
    ($t:ty, $conv:expr) => {
        impl PushValue for $t {
            #[inline]
            fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
                if dtype.is_float() {
                    let f: fn($t) -> f64 = $conv;
                    Ok(f(self).to_bits())
                } else {
                    Err(FLOAT_INTO_INT)
                }
            }
            #[inline]
            fn as_float(self) -> Option<f64> {
                let f: fn($t) -> f64 = $conv;
                Some(f(self))
            }
        }
    };
}

push_float!(f64, |v| v);
push_float!(f32, |v| v as f64);
push_float!(f16, |v| v.to_f64());
push_float!(bf16, |v| v.to_f64());

macro_rules! push_int {
    ($($t:ty),*) => {$(
        impl PushValue for $t {
            #[inline]
            fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
                let v = self as i128;
                if dtype.is_float() {
                    if v.unsigned_abs() > (1u128 << 53) {
                        return Err(INT_NOT_EXACT);
                    }
                    return Ok((v as f64).to_bits());
                }
                let (lo, hi) = int_range(dtype);
                if v < lo || v > hi {
                    return Err(INT_OUT_OF_RANGE);
                }
                Ok(if dtype.is_signed_int() { v as i64 as u64 } else { v as u64 })
            }
            #[inline]
            fn as_float(self) -> Option<f64> {
                None
            }
        }
    )*};
}

push_int!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            let mut b = Vec::new();
            write_varint(v, &mut b);
            let mut p = 0;
            assert_eq!(read_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        for v in [0i128, -1, 1, i128::MAX, i128::MIN, -(1 << 70)] {
            let mut b = Vec::new();
            zigzag_encode(v, &mut b);
            let mut p = 0;
            assert_eq!(zigzag_decode(&b, &mut p), Some(v));
        }
        assert_eq!(read_varint(&[0x80, 0x80], &mut 0), None);
        assert_eq!(read_varint(&[0xff; 11], &mut 0), None);
    }

    #[test]
    fn int_sum_detects_overflow_at_the_end() {
        let c = IntSum(DType::U8);
        let mut a = c.from_group(&[200, 100], 0).unwrap();
        assert_eq!(c.finish(&a), Err(CombineError::Overflow));
        c.merge(&mut a, -100).unwrap();
        assert_eq!(c.finish(&a), Ok(Value::UInt(200)));
        let c = IntSum(DType::I8);
        let a = c.from_group(&[(-100i64) as u64, (-29i64) as u64], 0).unwrap();
        assert_eq!(c.finish(&a), Err(CombineError::Overflow));
    }

    #[test]
    fn extremes_and_last_and_unique() {
        let mx = FloatExtreme { dtype: DType::F64, max: true };
        let raws: Vec<u64> = [1.0f64, 3.0, -2.0].iter().map(|v| v.to_bits()).collect();
        assert_eq!(mx.finish(&mx.from_group(&raws, 0).unwrap()), Ok(Value::Float(3.0)));
        let nan: Vec<u64> = [1.0f64, f64::NAN].iter().map(|v| v.to_bits()).collect();
        assert!(mx.from_group(&nan, 0).unwrap().is_nan());
        let mn = IntExtreme { dtype: DType::I32, max: false };
        assert_eq!(mn.from_group(&[5, (-7i64) as u64], 0), Ok(-7));
        let l = Last(DType::U16);
        let mut a = l.from_group(&[1, 2, 3], 5).unwrap();
        l.merge(&mut a, (4, 9)).unwrap();
        assert_eq!(l.finish(&a), Ok(Value::UInt(3)));
        l.merge(&mut a, (6, 9)).unwrap();
        assert_eq!(l.finish(&a), Ok(Value::UInt(9)));
        let u = Unique(DType::F64);
        assert_eq!(u.from_group(&[1, 2], 0), Err(CombineError::Duplicate));
    }

    #[test]
    fn push_values_convert_or_refuse() {
        assert_eq!(1.5f32.to_raw(DType::F64), Ok(1.5f64.to_bits()));
        assert!(1.5f64.to_raw(DType::I32).is_err());
        assert_eq!(300i32.to_raw(DType::U8), Err(INT_OUT_OF_RANGE));
        assert_eq!((-1i32).to_raw(DType::I8), Ok(u64::MAX));
        assert_eq!(7u64.to_raw(DType::F32), Ok(7f64.to_bits()));
        assert!(u64::MAX.to_raw(DType::F64).is_err());
    }
}
