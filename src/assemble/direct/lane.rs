//! Values on their way through the kernel: the lane a contribution's
//! value travels in ([`Lane`]), how the lanes of one coordinate become
//! its stored value ([`Reduce`], today through the builder's own
//! [`Combiner`]s), and the element types a result holds ([`OutValue`]).
//!
//! The kernel itself moves lanes without looking at them, so a wider
//! value (a 16-byte complex, say) needs a lane type and a reducer, not a
//! new kernel.

use crate::assemble::combine::{CombineError, Combiner};
use crate::element::{Element, Value};
use half::{bf16, f16};
use std::marker::PhantomData;

/// The fixed-size bits one contribution's value travels in: what the
/// caller's value becomes when it is read ([`super::input::Source`]),
/// and what the stored value of a coordinate is written as until it is
/// copied into the result.
pub trait Lane: Copy + Default + Send + Sync + 'static {}

/// Today's lane: the 8 raw bits the builder stores for every element type
/// (f64 bits for floats, i64/u64 bits for integers).
impl Lane for u64 {}

/// How the contributions of one coordinate become its stored value.
pub(crate) trait Reduce<L: Lane>: Sync {
    /// `group` holds every contribution to one coordinate, in the order of
    /// the caller's arrays. Returns the stored value as a lane (for
    /// [`OutValue::from_lane`]), or None when the value is dropped (a zero
    /// under `drop_zeros`).
    fn reduce(&self, group: &[L]) -> Result<Option<L>, CombineError>;
}

/// A [`Combiner`] of the builder, applied to a coordinate's whole group at
/// once: `combine_group` then `finish`, which is what the builder's final
/// pass computes when every contribution is in one run, and (for exact
/// sums, min, max, integer sums) whatever the runs were. For `last` the
/// group is in array order, so its last element is the last contribution.
pub(crate) struct CombineReduce<'c, C, O> {
    pub(crate) comb: &'c C,
    pub(crate) drop_zeros: bool,
    pub(crate) out: PhantomData<fn() -> O>,
}

impl<C: Combiner, O: OutValue> Reduce<u64> for CombineReduce<'_, C, O> {
    #[inline(always)]
    fn reduce(&self, group: &[u64]) -> Result<Option<u64>, CombineError> {
        let acc = self.comb.combine_group(group, 0)?;
        let v = self.comb.finish(&acc)?;
        if self.drop_zeros && v.is_zero() {
            return Ok(None);
        }
        Ok(Some(O::from_value(v).to_lane()))
    }
}

/// An element of a result made from the lane its reduction wrote (a
/// wider lane, for complex values say, brings its own impls).
pub trait FromLane<L: Lane> {
    /// The element whose bits the reduction put in `l`.
    fn from_lane_bits(l: L) -> Self;
}

impl<O: OutValue> FromLane<u64> for O {
    #[inline(always)]
    fn from_lane_bits(l: u64) -> O {
        O::from_lane(l)
    }
}

/// An element type of a result: the value the file writer would store
/// for a [`Value`] (`Value::to_le` of the element type), carried in a
/// u64 lane between the reduction and the copy into the result.
pub trait OutValue: Element {
    /// The stored element for a final value of this element type (the
    /// combiners' `finish` gives values that fit).
    fn from_value(v: Value) -> Self;
    /// The element's bits in a lane.
    fn to_lane(self) -> u64;
    /// The element back from [`OutValue::to_lane`].
    fn from_lane(l: u64) -> Self;
}

impl OutValue for f64 {
    #[inline(always)]
    fn from_value(v: Value) -> f64 {
        v.to_f64()
    }
    #[inline(always)]
    fn to_lane(self) -> u64 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_lane(l: u64) -> f64 {
        f64::from_bits(l)
    }
}

impl OutValue for f32 {
    #[inline(always)]
    fn from_value(v: Value) -> f32 {
        v.to_f64() as f32
    }
    #[inline(always)]
    fn to_lane(self) -> u64 {
        self.to_bits() as u64
    }
    #[inline(always)]
    fn from_lane(l: u64) -> f32 {
        f32::from_bits(l as u32)
    }
}

macro_rules! out_half {
    ($($t:ty),*) => {$(
        impl OutValue for $t {
            #[inline(always)]
            fn from_value(v: Value) -> $t {
                <$t>::from_f64(v.to_f64())
            }
            #[inline(always)]
            fn to_lane(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline(always)]
            fn from_lane(l: u64) -> $t {
                <$t>::from_bits(l as u16)
            }
        }
    )*};
}
out_half!(f16, bf16);

macro_rules! out_int {
    ($($t:ty),*) => {$(
        impl OutValue for $t {
            #[inline(always)]
            fn from_value(v: Value) -> $t {
                match v {
                    Value::Int(i) => i as $t,
                    Value::UInt(u) => u as $t,
                    Value::Float(f) => f as $t,
                }
            }
            #[inline(always)]
            fn to_lane(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_lane(l: u64) -> $t {
                l as $t
            }
        }
    )*};
}
out_int!(i8, i16, i32, i64, u8, u16, u32, u64);
