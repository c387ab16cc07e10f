//! The caller's arrays as the kernel reads them: index elements of any
//! integer width ([`IndexElem`]), values turned into lanes ([`Source`]),
//! and the bucket / minor-key view of a contribution ([`Input`]) for a
//! matrix (two index arrays) or any rank (a packed key).
//!
//! Nothing here copies an array: every pass reads the caller's slices in
//! place, a chunk at a time.

use crate::assemble::combine::PushValue;
use crate::assemble::combine::{raw_parts, raw_value};
use crate::assemble::direct::lane::Lane;
use crate::assemble::sort::Record;
use crate::codec::le_u64_at;
use crate::element::DType;
use crate::options::NonFinitePolicy;

/// What an entry point marks an invalid contribution with (a minor key
/// or bucket no shape admits: every valid one is below 2^63).
pub(crate) const INVALID: u64 = u64::MAX;

/// An integer type of a caller's index array: `i32`, `i64`, `u32`, `u64`.
///
/// Read in place, never converted as a whole array: each element is
/// widened as it is read (sign-extended, so a negative index becomes a
/// value at or above 2^63, which no extent the kernel accepts admits: one
/// unsigned comparison checks both ends).
pub trait IndexElem: Copy + Send + Sync + std::fmt::Display + 'static {
    /// The element widened to u64 (sign-extended for signed types).
    fn widen(self) -> u64;
    /// True for a negative value.
    fn is_negative(self) -> bool;
    /// Smallest and largest element of a non-empty slice, widened (a
    /// negative minimum comes out at or above 2^63).
    fn min_max(s: &[Self]) -> (u64, u64);
    /// Index arrays of this type as [`Cols`].
    fn cols<'a>(arrays: &'a [&'a [Self]]) -> Cols<'a>;
    /// Smallest and largest non-negative element, widened; None when
    /// every element is negative (`skip_negative` skips them all).
    fn min_max_kept(s: &[Self]) -> Option<(u64, u64)> {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for &x in s {
            if !x.is_negative() {
                lo = lo.min(x.widen());
                hi = hi.max(x.widen());
            }
        }
        (lo <= hi).then_some((lo, hi))
    }
}

/// The caller's index arrays (one per dimension, all of one integer
/// type) as one type: the kernel is compiled once for the four index
/// types; each pass matches the type once per chunk and runs its loop for
/// that type (`with_cols!`), so reading them costs what reading a typed
/// array costs.
#[derive(Clone, Copy, Debug)]
pub enum Cols<'a> {
    /// `int32` indices.
    I32(&'a [&'a [i32]]),
    /// `int64` indices.
    I64(&'a [&'a [i64]]),
    /// `uint32` indices.
    U32(&'a [&'a [u32]]),
    /// `uint64` indices.
    U64(&'a [&'a [u64]]),
}

/// Run `$body` with `$c` bound to the typed index arrays of `$cols`.
macro_rules! with_cols {
    ($cols:expr, $c:ident => $body:expr) => {
        match $cols {
            $crate::assemble::direct::input::Cols::I32($c) => $body,
            $crate::assemble::direct::input::Cols::I64($c) => $body,
            $crate::assemble::direct::input::Cols::U32($c) => $body,
            $crate::assemble::direct::input::Cols::U64($c) => $body,
        }
    };
}

impl Cols<'_> {
    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        with_cols!(self, c => c.len())
    }

    /// The length of dimension `d`'s array.
    pub fn len_of(&self, d: usize) -> usize {
        with_cols!(self, c => c[d].len())
    }

    /// Whether any index is negative.
    pub fn any_negative(&self) -> bool {
        with_cols!(self, c => c.iter().any(|d| d.iter().any(|x| x.is_negative())))
    }

    /// Index `i` of dimension `d`, widened (a negative one comes out at or
    /// above 2^63), and whether it is negative.
    pub fn get(&self, d: usize, i: usize) -> (u64, bool) {
        with_cols!(self, c => (c[d][i].widen(), c[d][i].is_negative()))
    }
}

macro_rules! index_elem {
    ($($t:ty: $signed:expr, $var:ident),*) => {$(
        impl IndexElem for $t {
            #[inline(always)]
            fn widen(self) -> u64 {
                self as i128 as u64
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn is_negative(self) -> bool {
                $signed && self < 0
            }
            #[inline]
            fn min_max(s: &[Self]) -> (u64, u64) {
                // In the element's own type, which vectorises; an explicit
                // fold over a fixed number of lanes helps the compiler.
                let (mut lo, mut hi) = (<$t>::MAX, <$t>::MIN);
                let mut it = s.chunks_exact(16);
                for c in &mut it {
                    let mut l = [<$t>::MAX; 16];
                    let mut h = [<$t>::MIN; 16];
                    for k in 0..16 {
                        l[k] = l[k].min(c[k]);
                        h[k] = h[k].max(c[k]);
                    }
                    lo = lo.min(l.iter().copied().fold(<$t>::MAX, <$t>::min));
                    hi = hi.max(h.iter().copied().fold(<$t>::MIN, <$t>::max));
                }
                for &x in it.remainder() {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
                // A negative minimum is the worst index there is.
                if lo.is_negative() {
                    return (lo.widen(), lo.widen());
                }
                (lo.widen(), hi.widen())
            }
            #[inline]
            fn cols<'a>(arrays: &'a [&'a [$t]]) -> Cols<'a> {
                Cols::$var(arrays)
            }
        }
    )*};
}
index_elem!(i32: true, I32, i64: true, I64, u32: false, U32, u64: false, U64);

/// Turns a caller's value into the lane the kernel moves, as
/// [`crate::Builder::push`] would store it.
pub(crate) trait Source<V>: Sync {
    /// The lane type.
    type L: Lane;
    /// The lane for `v`, or None when a push of `v` would be refused
    /// (the error itself is built by the slow path that names it).
    fn lane(&self, v: V) -> Option<Self::L>;
}

/// f64 values into a float tensor, every value kept: the lane is the
/// value's bits (what `raw_value` gives for this case), no check at all.
pub(crate) struct F64Bits;

impl Source<f64> for F64Bits {
    type L = u64;
    #[inline(always)]
    fn lane(&self, v: f64) -> Option<u64> {
        Some(v.to_bits())
    }
}

/// Any value type into any element type: the builder's own conversion
/// and non-finite policy ([`raw_value`]).
pub(crate) struct Checked {
    pub(crate) dtype: DType,
    pub(crate) policy: NonFinitePolicy,
}

impl<V: PushValue> Source<V> for Checked {
    type L = u64;
    #[inline(always)]
    fn lane(&self, v: V) -> Option<u64> {
        raw_value(v, self.dtype, self.policy, 0).ok()
    }
}

/// Any value type into a complex tensor whose parts are `part`: the
/// builder's own conversion and non-finite policy ([`raw_parts`]), both
/// parts in one lane.
pub(crate) struct ComplexChecked {
    pub(crate) part: DType,
    pub(crate) policy: NonFinitePolicy,
}

impl<V: PushValue> Source<V> for ComplexChecked {
    type L = [u64; 2];
    #[inline(always)]
    fn lane(&self, v: V) -> Option<[u64; 2]> {
        raw_parts(v, self.part, self.policy, 0)
            .ok()
            .map(|(re, im)| [re, im])
    }
}

/// complex128 values into a complex128 tensor, every value kept: the
/// lane is the parts' bits, no check at all.
pub(crate) struct C128Bits;

impl Source<num_complex::Complex<f64>> for C128Bits {
    type L = [u64; 2];
    #[inline(always)]
    fn lane(&self, v: num_complex::Complex<f64>) -> Option<[u64; 2]> {
        Some([v.re.to_bits(), v.im.to_bits()])
    }
}

/// Contributions as the kernel sees them: a bucket (the major index of a
/// matrix, or the top bits of a packed key) and a minor key that orders
/// contributions within their bucket.
pub(crate) trait Input: Sync {
    /// The lane type values become.
    type L: Lane;
    /// Number of contributions.
    fn len(&self) -> usize;
    /// Smallest and largest bucket of contributions `lo..hi` (non-empty),
    /// or None when one of them has an invalid bucket index.
    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)>;
    /// Add one to `hist[bucket - base]` for contributions `lo..hi`, whose
    /// buckets [`Input::bucket_range`] has checked to lie in the histogram.
    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]);
    /// Call `f(bucket - first, minor, lane, ok)` for the contributions
    /// `lo..hi` whose bucket lies in `first..first + buckets` (the others
    /// are skipped before their minor index and value are read); `ok` is
    /// false when a push of the contribution would be refused (an index out
    /// of range or a refused value; the bucket's own indices were checked
    /// by `bucket_range`), and then `minor` and `lane` are junk.
    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        f: impl FnMut(usize, u64, Self::L, bool),
    );
    /// Contributions `lo..hi` were read and will not be read again soon:
    /// an input in mapped file pages gives them back to the kernel (they
    /// stay in the page cache; a later read faults them back in), so that
    /// the input does not count against the resident set. Arrays the
    /// caller holds ignore it.
    fn release(&self, lo: usize, hi: usize) {
        let _ = (lo, hi);
    }
}

/// A matrix given as two index arrays: buckets are the major indices
/// (rows for CSR and COO, columns for CSC), minor keys the other ones.
pub(crate) struct Matrix<'a, V, S> {
    pub(crate) cols: Cols<'a>,
    /// The dimension of the major indices (the minor's is the other).
    pub(crate) major: usize,
    pub(crate) values: &'a [V],
    pub(crate) major_extent: u64,
    pub(crate) minor_extent: u64,
    pub(crate) source: S,
    /// `skip_negative`: a contribution with a negative index is left out
    /// of every pass (a negative major index already falls outside every
    /// histogram and band; a negative minor one is checked for).
    pub(crate) skip_negative: bool,
}

/// [`Matrix::count`]'s loop, for one index type.
#[inline(always)]
fn count_major<I: IndexElem>(major: &[I], base: u64, hist: &mut [u32]) {
    for &x in major {
        if let Some(h) = hist.get_mut(x.widen().wrapping_sub(base) as usize) {
            *h += 1;
        }
    }
}

/// [`count_major`] under `skip_negative`: a contribution whose minor
/// index is negative is not counted either.
#[inline(always)]
fn count_major_kept<I: IndexElem>(major: &[I], minor: &[I], base: u64, hist: &mut [u32]) {
    let minor = &minor[..major.len()];
    for (&x, &m) in major.iter().zip(minor) {
        if m.is_negative() {
            continue;
        }
        if let Some(h) = hist.get_mut(x.widen().wrapping_sub(base) as usize) {
            *h += 1;
        }
    }
}

/// [`Matrix::entries`]'s loop, for one index type.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn matrix_entries<I: IndexElem, V: Copy, S: Source<V>>(
    major: &[I],
    minor: &[I],
    values: &[V],
    minor_extent: u64,
    source: &S,
    first: u64,
    buckets: usize,
    skip_negative: bool,
    mut f: impl FnMut(usize, u64, S::L, bool),
) {
    // Cut to the same length, so that one loop bound covers all three.
    let minor = &minor[..major.len()];
    let values = &values[..major.len()];
    for i in 0..major.len() {
        let j = major[i].widen().wrapping_sub(first) as usize;
        if j >= buckets {
            continue;
        }
        let m = minor[i].widen();
        let l = source.lane(values[i]);
        let ok = l.is_some() & (m < minor_extent);
        // Checked only on the rare refused path: a negative minor index
        // skipped, as the counts skipped it.
        if !ok && skip_negative && minor[i].is_negative() {
            continue;
        }
        f(j, m, l.unwrap_or_default(), ok);
    }
}

impl<V: Copy + Sync, S: Source<V>> Input for Matrix<'_, V, S> {
    type L = S::L;

    fn len(&self) -> usize {
        self.values.len()
    }

    #[inline]
    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)> {
        let (a, b) = if self.skip_negative {
            // A chunk whose contributions are all skipped reads as
            // bucket 0: visited, and nothing found.
            with_cols!(self.cols, c => IndexElem::min_max_kept(c[self.major].get(lo..hi)?))
                .unwrap_or((0, 0))
        } else {
            with_cols!(self.cols, c => IndexElem::min_max(c[self.major].get(lo..hi)?))
        };
        (b < self.major_extent).then_some((a, b))
    }

    #[inline]
    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]) {
        let (major, minor) = (self.major, 1 - self.major);
        if self.skip_negative {
            with_cols!(self.cols, c => count_major_kept(&c[major][lo..hi], &c[minor][lo..hi], base, hist))
        } else {
            with_cols!(self.cols, c => count_major(&c[major][lo..hi], base, hist))
        }
    }

    #[inline(always)]
    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        f: impl FnMut(usize, u64, S::L, bool),
    ) {
        let (major, minor) = (self.major, 1 - self.major);
        with_cols!(self.cols, c => matrix_entries(
            &c[major][lo..hi],
            &c[minor][lo..hi],
            &self.values[lo..hi],
            self.minor_extent,
            &self.source,
            first,
            buckets,
            self.skip_negative,
            f,
        ))
    }
}

/// The bucket of a contribution whose indices `x(d)` pack into a key
/// (dimension d at bit `shifts[d]`): the key's bits from `split` up, which
/// only the leading `bucket_dims` dimensions reach; None when one of those
/// is out of range.
#[inline(always)]
fn packed_bucket(
    shape: &[u64],
    shifts: &[u32],
    split: u32,
    bucket_dims: usize,
    x: impl Fn(usize) -> u64,
) -> Option<u64> {
    let mut key = 0u64;
    for (d, (&s, &e)) in shifts.iter().zip(shape).enumerate().take(bucket_dims) {
        let v = x(d);
        if v >= e {
            return None;
        }
        key |= v << s;
    }
    Some(key >> split)
}

/// The minor key of the same contribution (the key's bits below `split`)
/// and whether every index is in range. An invalid index only spoils the
/// minor key (it is flagged); the bucket's dimensions were checked by
/// [`packed_bucket`].
#[inline(always)]
fn packed_minor(
    shape: &[u64],
    shifts: &[u32],
    split: u32,
    bucket_dims: usize,
    x: impl Fn(usize) -> u64,
) -> (u64, bool) {
    let mask = if split == 0 {
        0
    } else {
        u64::MAX >> (64 - split)
    };
    let mut key = 0u64;
    let mut ok = true;
    for (d, (&e, &s)) in shape.iter().zip(shifts).enumerate() {
        let v = x(d);
        ok &= v < e;
        if v < e || d < bucket_dims {
            key |= v << s;
        }
    }
    (key & mask, ok)
}

/// Any rank, one index array per dimension: the index tuple is packed
/// into a u64 key (dimension 0 in the high bits, as the builder packs
/// it); the bucket is the key's top bits, the minor key the rest.
pub(crate) struct Packed<'a, V, S> {
    pub(crate) cols: Cols<'a>,
    pub(crate) values: &'a [V],
    pub(crate) shape: &'a [u64],
    /// Bit offset of each dimension's field.
    pub(crate) shifts: &'a [u32],
    /// The bucket is `key >> split`.
    pub(crate) split: u32,
    /// Dimensions whose fields reach at or above `split` (the ones the
    /// bucket depends on): the leading `bucket_dims` ones.
    pub(crate) bucket_dims: usize,
    pub(crate) source: S,
}

impl<V: Copy + Sync, S: Source<V>> Packed<'_, V, S> {
    /// The bucket of contribution `i` of `dims`, or None when one of the
    /// indices it depends on is out of range.
    #[inline(always)]
    fn bucket_of<I: IndexElem>(&self, dims: &[&[I]], i: usize) -> Option<u64> {
        packed_bucket(self.shape, self.shifts, self.split, self.bucket_dims, |d| {
            dims[d][i].widen()
        })
    }

    fn bucket_range_of<I: IndexElem>(
        &self,
        dims: &[&[I]],
        lo: usize,
        hi: usize,
    ) -> Option<(u64, u64)> {
        let (mut a, mut b) = (u64::MAX, 0u64);
        for i in lo..hi {
            let k = self.bucket_of(dims, i)?;
            a = a.min(k);
            b = b.max(k);
        }
        Some((a, b))
    }

    fn count_of<I: IndexElem>(
        &self,
        dims: &[&[I]],
        lo: usize,
        hi: usize,
        base: u64,
        hist: &mut [u32],
    ) {
        for i in lo..hi {
            let k = self.bucket_of(dims, i).unwrap_or(INVALID);
            if let Some(h) = hist.get_mut(k.wrapping_sub(base) as usize) {
                *h += 1;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entries_of<I: IndexElem>(
        &self,
        dims: &[&[I]],
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        mut f: impl FnMut(usize, u64, S::L, bool),
    ) {
        for i in lo..hi {
            let Some(b) = self.bucket_of(dims, i) else {
                continue;
            };
            let j = b.wrapping_sub(first) as usize;
            if j >= buckets {
                continue;
            }
            let (m, ok) =
                packed_minor(self.shape, self.shifts, self.split, self.bucket_dims, |d| {
                    dims[d][i].widen()
                });
            let lane = self.source.lane(self.values[i]);
            let ok = ok & lane.is_some();
            f(j, m, lane.unwrap_or_default(), ok);
        }
    }
}

impl<V: Copy + Sync, S: Source<V>> Input for Packed<'_, V, S> {
    type L = S::L;

    fn len(&self) -> usize {
        self.values.len()
    }

    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)> {
        with_cols!(self.cols, c => self.bucket_range_of(c, lo, hi))
    }

    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]) {
        with_cols!(self.cols, c => self.count_of(c, lo, hi, base, hist))
    }

    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        f: impl FnMut(usize, u64, S::L, bool),
    ) {
        with_cols!(self.cols, c => self.entries_of(c, lo, hi, first, buckets, f))
    }
}

/// A record's value as its raw lane, checked by nothing: an f64 tensor
/// with every value kept (the lane is the value's bits, as for
/// [`F64Bits`]), or a type whose values need no check.
pub(crate) struct RawKeep;

impl Source<u64> for RawKeep {
    type L = u64;
    #[inline(always)]
    fn lane(&self, v: u64) -> Option<u64> {
        Some(v)
    }
}

/// A record's value as its raw lane, refused when the non-finite policy
/// refuses it (floats only; the lane of a float is its f64 bits).
pub(crate) struct RawChecked {
    pub(crate) policy: NonFinitePolicy,
}

impl Source<u64> for RawChecked {
    type L = u64;
    #[inline(always)]
    fn lane(&self, v: u64) -> Option<u64> {
        let f = f64::from_bits(v);
        let refused = match self.policy {
            NonFinitePolicy::Keep => false,
            NonFinitePolicy::RejectNan => f.is_nan(),
            NonFinitePolicy::RejectNonFinite => !f.is_finite(),
        };
        (!refused).then_some(v)
    }
}

/// Decodes a record's little-endian value of `dtype` into the raw lane
/// `Builder::push` stores for it (floats widened to f64 bits, integers
/// sign- or zero-extended), which the value of the record's own type
/// always fits. `None` for a complex type, whose value is two lanes.
pub(crate) fn raw_decoder(dtype: DType) -> Option<fn(&[u8]) -> u64> {
    fn raw<T: crate::element::Element>(b: &[u8]) -> u64 {
        super::lane::value_to_raw(T::from_le(b).to_value())
    }
    crate::with_element_type!(dtype, {
        float T => Some(raw::<T>),
        narrow T => Some(raw::<T>),
        int T => Some(raw::<T>),
        complex _C => None,
        bool _B => None,
    })
}

/// How a record's indices make its bucket and minor key.
#[derive(Clone, Copy)]
pub(crate) enum RecordKey<'a> {
    /// A matrix: the bucket is index `major`, the minor key the other one.
    Matrix { major: usize },
    /// Any rank, as [`Packed`]: the packed key's top bits and the rest.
    Packed {
        shifts: &'a [u32],
        split: u32,
        bucket_dims: usize,
    },
}

/// Binary records read in place (a mapped bin file, see
/// `crate::input::bin`): `rank` u64 little-endian indices, then one value,
/// `rec` bytes each. An index that cannot be read (never: the length is
/// a whole number of records) reads as invalid.
pub(crate) struct Records<'a, V, S> {
    pub(crate) bytes: &'a [u8],
    pub(crate) rec: usize,
    pub(crate) shape: &'a [u64],
    pub(crate) key: RecordKey<'a>,
    pub(crate) decode: fn(&[u8]) -> V,
    pub(crate) source: S,
    /// Gives back the file pages of a byte range (see [`Input::release`]).
    pub(crate) release: &'a (dyn Fn(usize, usize) + Sync),
}

impl<'a, V> Records<'a, V, ()> {
    /// The same records, their values turned into lanes by `source`.
    pub(crate) fn with_source<S>(&self, source: S) -> Records<'a, V, S> {
        Records {
            bytes: self.bytes,
            rec: self.rec,
            shape: self.shape,
            key: self.key,
            decode: self.decode,
            source,
            release: self.release,
        }
    }
}

impl<V, S> Records<'_, V, S> {
    #[inline(always)]
    fn index(&self, i: usize, d: usize) -> u64 {
        le_u64_at(self.bytes, i * self.rec + d * 8).unwrap_or(INVALID)
    }

    #[inline(always)]
    fn value(&self, i: usize) -> Option<V> {
        let at = i * self.rec + self.shape.len() * 8;
        self.bytes.get(at..i * self.rec + self.rec).map(self.decode)
    }

    /// The bucket of record `i`, or None when an index it depends on is
    /// out of range.
    #[inline(always)]
    fn bucket_of(&self, i: usize) -> Option<u64> {
        match self.key {
            RecordKey::Matrix { major } => {
                let x = self.index(i, major);
                (x < self.shape[major]).then_some(x)
            }
            RecordKey::Packed {
                shifts,
                split,
                bucket_dims,
            } => packed_bucket(self.shape, shifts, split, bucket_dims, |d| self.index(i, d)),
        }
    }
}

impl<V: Copy + Sync, S: Source<V>> Input for Records<'_, V, S> {
    type L = S::L;

    fn len(&self) -> usize {
        self.bytes.len() / self.rec.max(1)
    }

    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)> {
        let (mut a, mut b) = (u64::MAX, 0u64);
        for i in lo..hi {
            let k = self.bucket_of(i)?;
            a = a.min(k);
            b = b.max(k);
        }
        Some((a, b))
    }

    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]) {
        for i in lo..hi {
            let k = self.bucket_of(i).unwrap_or(INVALID);
            if let Some(h) = hist.get_mut(k.wrapping_sub(base) as usize) {
                *h += 1;
            }
        }
    }

    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        mut f: impl FnMut(usize, u64, S::L, bool),
    ) {
        for i in lo..hi {
            let Some(b) = self.bucket_of(i) else {
                continue;
            };
            let j = b.wrapping_sub(first) as usize;
            if j >= buckets {
                continue;
            }
            let (m, ok) = match self.key {
                RecordKey::Matrix { major } => {
                    let m = self.index(i, 1 - major);
                    (m, m < self.shape[1 - major])
                }
                RecordKey::Packed {
                    shifts,
                    split,
                    bucket_dims,
                } => packed_minor(self.shape, shifts, split, bucket_dims, |d| self.index(i, d)),
            };
            let lane = self.value(i).and_then(|v| self.source.lane(v));
            f(j, m, lane.unwrap_or_default(), ok & lane.is_some());
        }
    }

    fn release(&self, lo: usize, hi: usize) {
        (self.release)(lo * self.rec, hi * self.rec);
    }
}

/// Rank-2 f64 records (`row, column, value`, 24 bytes, little-endian) as
/// the array of `[u64; 3]` they are when the mapped file is 8-byte
/// aligned: the common FE input, read with no decoding at all.
pub(crate) struct Triples<'a, S> {
    pub(crate) recs: &'a [[u64; 3]],
    /// The bucket's dimension (the other one is the minor key).
    pub(crate) major: usize,
    pub(crate) shape: [u64; 2],
    pub(crate) source: S,
    /// Gives back the file pages of a byte range (see [`Input::release`]).
    pub(crate) release: &'a (dyn Fn(usize, usize) + Sync),
}

impl<'a, S> Triples<'a, S> {
    /// The records of `bytes`, when they are 24-byte f64 matrix records
    /// lying 8-byte aligned on a little-endian machine.
    pub(crate) fn cast(bytes: &'a [u8]) -> Option<&'a [[u64; 3]]> {
        if cfg!(target_endian = "big") {
            return None;
        }
        bytemuck::try_cast_slice(bytes).ok()
    }
}

impl<'a> Triples<'a, ()> {
    /// The same records, their values turned into lanes by `source`.
    pub(crate) fn with_source<S>(&self, source: S) -> Triples<'a, S> {
        Triples {
            recs: self.recs,
            major: self.major,
            shape: self.shape,
            source,
            release: self.release,
        }
    }
}

impl<S: Source<u64>> Input for Triples<'_, S> {
    type L = S::L;

    fn len(&self) -> usize {
        self.recs.len()
    }

    #[inline]
    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)> {
        let (mut a, mut b) = (u64::MAX, 0u64);
        for r in self.recs.get(lo..hi)? {
            let x = r[self.major];
            a = a.min(x);
            b = b.max(x);
        }
        (b < self.shape[self.major]).then_some((a, b))
    }

    #[inline]
    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]) {
        for r in &self.recs[lo..hi] {
            if let Some(h) = hist.get_mut(r[self.major].wrapping_sub(base) as usize) {
                *h += 1;
            }
        }
    }

    #[inline(always)]
    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        mut f: impl FnMut(usize, u64, S::L, bool),
    ) {
        let (major, minor) = (self.major, 1 - self.major);
        let extent = self.shape[minor];
        for r in &self.recs[lo..hi] {
            let j = r[major].wrapping_sub(first) as usize;
            if j >= buckets {
                continue;
            }
            let m = r[minor];
            let l = self.source.lane(r[2]);
            f(j, m, l.unwrap_or_default(), l.is_some() & (m < extent));
        }
    }

    fn release(&self, lo: usize, hi: usize) {
        (self.release)(lo * 24, hi * 24);
    }
}

/// The records a [`crate::Builder`] kept unsorted (`assemble/deferred.rs`),
/// read in place as one array: packed u64 keys, whose bits from `split`
/// up are the bucket and below it the minor key, and raw lanes, every one
/// checked by its push. A complex tensor's records come in pairs (real
/// part, then imaginary, the part in the key's lowest bit, always in the
/// same chunk): `Held<Pair>` reads them as one contribution each, `Held<One>`
/// reads one record per contribution.
pub(crate) struct Held<'a, G = One> {
    chunks: &'a [&'a [Record<u64>]],
    /// Where each chunk starts in the whole, in records.
    starts: Vec<usize>,
    /// Records in all.
    records: usize,
    split: u32,
    /// Buckets there are: a record beyond them is a bad input (the
    /// kernel then declines the records), never skipped.
    buckets: u64,
    group: std::marker::PhantomData<G>,
}

/// How many kept records make one contribution, and what it is made of.
pub(crate) trait Grouping: Sync {
    /// Records per contribution.
    const N: usize;
    /// The lane of a contribution.
    type L: Lane;
    /// The contribution's own key (the part bit dropped).
    fn key(g: &[Record<u64>]) -> u64;
    fn lane(g: &[Record<u64>]) -> Self::L;
    /// The group is one contribution's records.
    fn whole(g: &[Record<u64>]) -> bool;
}

/// One record per contribution.
pub(crate) struct One;

impl Grouping for One {
    const N: usize = 1;
    type L = u64;
    #[inline(always)]
    fn key(g: &[Record<u64>]) -> u64 {
        g[0].key
    }
    #[inline(always)]
    fn lane(g: &[Record<u64>]) -> u64 {
        g[0].val
    }
    #[inline(always)]
    fn whole(_: &[Record<u64>]) -> bool {
        true
    }
}

/// A complex contribution: its real and imaginary records.
pub(crate) struct Pair;

impl Grouping for Pair {
    const N: usize = 2;
    type L = [u64; 2];
    #[inline(always)]
    fn key(g: &[Record<u64>]) -> u64 {
        g[0].key >> 1
    }
    #[inline(always)]
    fn lane(g: &[Record<u64>]) -> [u64; 2] {
        [g[0].val, g[1].val]
    }
    /// Both parts of one coordinate, real first.
    #[inline(always)]
    fn whole(g: &[Record<u64>]) -> bool {
        g[0].key | 1 == g[1].key && g[0].key & 1 == 0
    }
}

impl<'a> Held<'a, One> {
    /// The records of `chunks`, in their order; the split is set by
    /// [`Held::with_split`] once the plan's scheme is known.
    pub(crate) fn new(chunks: &'a [&'a [Record<u64>]]) -> Held<'a, One> {
        let mut starts = Vec::with_capacity(chunks.len());
        let mut records = 0usize;
        for c in chunks {
            starts.push(records);
            records += c.len();
        }
        Held {
            chunks,
            starts,
            records,
            split: 0,
            buckets: 0,
            group: std::marker::PhantomData,
        }
    }

    /// Records kept.
    pub(crate) fn len(&self) -> usize {
        self.records
    }

    /// The same records grouped by `G`, bucketed by the contribution
    /// key's bits from `split` up (64: one bucket) into `buckets` buckets.
    pub(crate) fn with_split<G: Grouping>(&self, split: u32, buckets: u64) -> Held<'a, G> {
        Held {
            chunks: self.chunks,
            starts: self.starts.clone(),
            records: self.records,
            split,
            buckets,
            group: std::marker::PhantomData,
        }
    }
}

impl<G: Grouping> Held<'_, G> {
    /// Call `f` on each group of the contributions `lo..hi` (chunks hold
    /// whole groups, so every piece of a chunk does).
    #[inline]
    fn groups(&self, lo: usize, hi: usize, mut f: impl FnMut(&[Record<u64>])) {
        let (lo, hi) = (lo * G::N, hi * G::N);
        let mut c = self.starts.partition_point(|&s| s <= lo).saturating_sub(1);
        let mut at = lo;
        while at < hi {
            let (Some(chunk), Some(&start)) = (self.chunks.get(c), self.starts.get(c)) else {
                return;
            };
            let a = at - start;
            let b = (hi - start).min(chunk.len());
            if let Some(p) = chunk.get(a..b) {
                p.chunks_exact(G::N).for_each(&mut f);
            }
            at = start + b.max(a + 1);
            c += 1;
        }
    }

    #[inline(always)]
    fn bucket(&self, g: &[Record<u64>]) -> u64 {
        G::key(g).checked_shr(self.split).unwrap_or(0)
    }
}

impl<G: Grouping> Input for Held<'_, G> {
    type L = G::L;

    fn len(&self) -> usize {
        self.records / G::N
    }

    fn bucket_range(&self, lo: usize, hi: usize) -> Option<(u64, u64)> {
        let (mut a, mut b) = (u64::MAX, 0u64);
        let mut whole = true;
        self.groups(lo, hi, |g| {
            whole &= G::whole(g);
            let k = self.bucket(g);
            a = a.min(k);
            b = b.max(k);
        });
        (whole && b < self.buckets).then_some((a, b))
    }

    fn count(&self, lo: usize, hi: usize, base: u64, hist: &mut [u32]) {
        self.groups(lo, hi, |g| {
            if let Some(h) = hist.get_mut(self.bucket(g).wrapping_sub(base) as usize) {
                *h += 1;
            }
        });
    }

    #[inline(always)]
    fn entries(
        &self,
        lo: usize,
        hi: usize,
        first: u64,
        buckets: usize,
        mut f: impl FnMut(usize, u64, G::L, bool),
    ) {
        let mask = match self.split {
            0 => 0,
            s => u64::MAX >> (64 - s.min(64)),
        };
        self.groups(lo, hi, |g| {
            let j = self.bucket(g).wrapping_sub(first) as usize;
            if j < buckets {
                f(j, G::key(g) & mask, G::lane(g), true);
            }
        });
    }
}
