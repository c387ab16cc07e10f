//! Order-preserving packing of index tuples into unsigned integer keys.
//!
//! Dimension `d` of a tensor with extent `shape[d]` gets `bits[d]` bits, the
//! number of bits needed to hold `shape[d] - 1` (0 when the extent is 1 or 0).
//! Dimension 0 takes the most significant field, so the lexicographic order of
//! index tuples equals the integer order of their keys. The total width picks
//! the smallest [`Key`] type that holds it (see [`KeyWidth`]).

use crate::codec::{LebWord, read_leb, write_leb};
use std::fmt::Debug;

/// An unsigned integer wide enough to hold a packed index tuple.
///
/// Bit positions (`shift`) count from the least significant bit of the whole
/// key, whatever the in-memory representation.
pub trait Key: Copy + Ord + Eq + Default + Send + Sync + Debug + 'static {
    /// Capacity in bits: 64, 128, 256 or 4096.
    const BITS: u32;
    /// Whether the radix sort may radix sort this type using
    /// [`Key::radix_digit`]; wide keys take a comparison sort instead, since
    /// hundreds of digit passes would lose to comparisons.
    const RADIX: bool;

    /// `self |= value << shift`. `value` must fit in the field starting at
    /// `shift`; bits that would land above [`Key::BITS`] are dropped.
    fn or_bits(&mut self, value: u64, shift: u32);

    /// The field of `nbits` (at most 64) bits starting at `shift`; bits at or
    /// above [`Key::BITS`] read as zero.
    fn get_bits(&self, shift: u32, nbits: u32) -> u64;

    /// The key shifted right by `shift` (which must be below [`Key::BITS`]),
    /// truncated to `usize`; the radix sort masks it to its digit width
    /// (8 or 11 bits), which keeps this a single shift for `u64`/`u128`.
    fn radix_digit(&self, shift: u32) -> usize;

    /// Appends the unsigned LEB128 varint of `cur - prev` to `out`.
    /// Requires `cur >= prev` (checked in debug builds).
    fn write_delta(prev: &Self, cur: &Self, out: &mut Vec<u8>);

    /// Decodes a varint written by [`Key::write_delta`] at `buf[*pos..]` and
    /// returns `prev + delta`, advancing `*pos` past it. Returns `None` (with
    /// `*pos` unchanged) on truncated input, non-canonical or overlong
    /// encodings, a delta wider than the key, or a sum that overflows the key.
    /// Never panics.
    fn read_delta(prev: &Self, buf: &[u8], pos: &mut usize) -> Option<Self>;
}

/// Mask of the low `nbits` bits (`nbits <= 64`).
#[inline(always)]
fn low_mask(nbits: u32) -> u64 {
    if nbits >= 64 {
        u64::MAX
    } else {
        (1u64 << nbits) - 1
    }
}

impl Key for u64 {
    const BITS: u32 = 64;
    const RADIX: bool = true;

    #[inline(always)]
    fn or_bits(&mut self, value: u64, shift: u32) {
        debug_assert!(shift < 64 || value == 0);
        *self |= value.checked_shl(shift).unwrap_or(0);
    }

    #[inline(always)]
    fn get_bits(&self, shift: u32, nbits: u32) -> u64 {
        self.checked_shr(shift).unwrap_or(0) & low_mask(nbits)
    }

    #[inline(always)]
    fn radix_digit(&self, shift: u32) -> usize {
        (*self >> shift) as usize
    }

    fn write_delta(prev: &Self, cur: &Self, out: &mut Vec<u8>) {
        debug_assert!(cur >= prev);
        write_leb(&cur.wrapping_sub(*prev), out);
    }

    fn read_delta(prev: &Self, buf: &[u8], pos: &mut usize) -> Option<Self> {
        let save = *pos;
        let d: u64 = read_leb(buf, pos)?;
        let r = prev.checked_add(d);
        if r.is_none() {
            *pos = save;
        }
        r
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    const RADIX: bool = true;

    #[inline(always)]
    fn or_bits(&mut self, value: u64, shift: u32) {
        debug_assert!(shift < 128 || value == 0);
        *self |= u128::from(value).checked_shl(shift).unwrap_or(0);
    }

    #[inline(always)]
    fn get_bits(&self, shift: u32, nbits: u32) -> u64 {
        (self.checked_shr(shift).unwrap_or(0) as u64) & low_mask(nbits)
    }

    #[inline(always)]
    fn radix_digit(&self, shift: u32) -> usize {
        (*self >> shift) as usize
    }

    fn write_delta(prev: &Self, cur: &Self, out: &mut Vec<u8>) {
        debug_assert!(cur >= prev);
        write_leb(&cur.wrapping_sub(*prev), out);
    }

    fn read_delta(prev: &Self, buf: &[u8], pos: &mut usize) -> Option<Self> {
        let save = *pos;
        let d: u128 = read_leb(buf, pos)?;
        let r = prev.checked_add(d);
        if r.is_none() {
            *pos = save;
        }
        r
    }
}

/// A key wider than 128 bits, as `N` big-endian 64-bit words (word 0 most
/// significant), so the derived `Ord` is numeric order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct WideKey<const N: usize>(pub [u64; N]);

impl<const N: usize> Default for WideKey<N> {
    fn default() -> Self {
        WideKey([0; N])
    }
}

impl<const N: usize> WideKey<N> {
    /// `self - other` modulo 2^BITS, with the borrow flowing from the least
    /// significant word (index N-1) up.
    fn wrapping_sub(&self, other: &Self) -> Self {
        let mut r = [0u64; N];
        let mut borrow = false;
        for i in (0..N).rev() {
            let (d1, b1) = self.0[i].overflowing_sub(other.0[i]);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            r[i] = d2;
            borrow = b1 | b2;
        }
        WideKey(r)
    }

    /// `self + other`, or `None` if it carries out of the top word.
    fn checked_add(&self, other: &Self) -> Option<Self> {
        let mut r = [0u64; N];
        let mut carry = false;
        for i in (0..N).rev() {
            let (s1, c1) = self.0[i].overflowing_add(other.0[i]);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            r[i] = s2;
            carry = c1 | c2;
        }
        (!carry).then_some(WideKey(r))
    }
}

impl<const N: usize> LebWord for WideKey<N> {
    const WIDTH: u32 = 64 * N as u32;
    #[inline]
    fn or_group(&mut self, group: u64, shift: u32) {
        self.or_bits(group, shift);
    }
    #[inline]
    fn group(&self, shift: u32) -> u8 {
        self.get_bits(shift, 7) as u8
    }
    fn significant_bits(&self) -> u32 {
        for (i, w) in self.0.iter().enumerate() {
            if *w != 0 {
                return ((N - i) as u32) * 64 - w.leading_zeros();
            }
        }
        0
    }
}

impl<const N: usize> Key for WideKey<N> {
    const BITS: u32 = 64 * N as u32;
    const RADIX: bool = false;

    #[inline]
    fn or_bits(&mut self, value: u64, shift: u32) {
        let w = (shift / 64) as usize; // word counted from the least significant
        let off = shift % 64;
        if w >= N {
            return;
        }
        self.0[N - 1 - w] |= value << off;
        if off > 0 && w + 1 < N {
            self.0[N - 2 - w] |= value >> (64 - off);
        }
    }

    #[inline]
    fn get_bits(&self, shift: u32, nbits: u32) -> u64 {
        if nbits == 0 {
            return 0;
        }
        let w = (shift / 64) as usize;
        let off = shift % 64;
        if w >= N {
            return 0;
        }
        let mut v = self.0[N - 1 - w] >> off;
        if off > 0 && w + 1 < N {
            v |= self.0[N - 2 - w] << (64 - off);
        }
        v & low_mask(nbits)
    }

    #[inline]
    fn radix_digit(&self, shift: u32) -> usize {
        self.get_bits(shift, 64) as usize
    }

    fn write_delta(prev: &Self, cur: &Self, out: &mut Vec<u8>) {
        debug_assert!(cur >= prev);
        let d = cur.wrapping_sub(prev);
        write_leb(&d, out);
    }

    fn read_delta(prev: &Self, buf: &[u8], pos: &mut usize) -> Option<Self> {
        let save = *pos;
        let d: Self = read_leb(buf, pos)?;
        let r = prev.checked_add(&d);
        if r.is_none() {
            *pos = save;
        }
        r
    }
}

/// Which [`Key`] type a shape needs: the narrowest that holds `total_bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyWidth {
    /// `u64` (total_bits <= 64).
    U64,
    /// `u128` (total_bits <= 128).
    U128,
    /// `WideKey<4>` (total_bits <= 256).
    W256,
    /// `WideKey<64>` (total_bits <= 4096).
    W4096,
}

impl KeyWidth {
    /// The narrowest width holding `total_bits` bits.
    pub fn for_bits(total_bits: u32) -> KeyWidth {
        match total_bits {
            0..=64 => KeyWidth::U64,
            65..=128 => KeyWidth::U128,
            129..=256 => KeyWidth::W256,
            _ => KeyWidth::W4096,
        }
    }
}

/// Field layout of a packed key for one tensor shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLayout {
    shape: Vec<u64>,
    bits: Vec<u32>,
    /// Bit offset of each dimension's field from the least significant bit.
    /// Zero-width fields get shift 0 so every shift stays below the key
    /// capacity (a zero value shifted by 64 would still be a shift overflow).
    shifts: Vec<u32>,
    total_bits: u32,
    width: KeyWidth,
}

/// Bits needed to hold `extent - 1` (0 for extents 0 and 1).
fn bits_for_extent(extent: u64) -> u32 {
    if extent <= 1 {
        0
    } else {
        64 - (extent - 1).leading_zeros()
    }
}

impl KeyLayout {
    /// Layout for `shape`; the caller has validated rank 1..=64. An extent of
    /// 0 (no valid index) gets a zero-width field.
    pub fn new(shape: &[u64]) -> KeyLayout {
        Self::with_major(shape, 0)
    }

    /// Layout for `shape` whose most significant field is dimension
    /// `major`, followed by the other dimensions in increasing order. For a
    /// matrix, `major = 1` packs column-major keys (CSC order), so the sort
    /// and merge yield entries by column at no extra cost.
    pub fn with_major(shape: &[u64], major: usize) -> KeyLayout {
        debug_assert!((1..=64).contains(&shape.len()) && major < shape.len());
        let order = std::iter::once(major).chain((0..shape.len()).filter(|&d| d != major));
        Self::with_order(shape, &order.collect::<Vec<_>>())
    }

    /// Layout for `shape` whose fields are the dimensions of `order` (a
    /// permutation of `0..rank`), the first one most significant: keys
    /// then sort as the index tuples taken in that order (a CSF tensor's
    /// `mode_order`).
    pub fn with_order(shape: &[u64], order: &[usize]) -> KeyLayout {
        debug_assert!((1..=64).contains(&shape.len()) && order.len() == shape.len());
        let bits: Vec<u32> = shape.iter().map(|&s| bits_for_extent(s)).collect();
        let mut shifts = vec![0u32; shape.len()];
        let mut acc = 0u32;
        // Least significant field first: the last dimension of the order.
        for &d in order.iter().rev() {
            shifts[d] = if bits[d] == 0 { 0 } else { acc };
            acc += bits[d];
        }
        KeyLayout {
            shape: shape.to_vec(),
            bits,
            shifts,
            total_bits: acc,
            width: KeyWidth::for_bits(acc),
        }
    }

    /// Sum of the field widths: the number of low key bits that can be set.
    pub fn total_bits(&self) -> u32 {
        self.total_bits
    }

    /// The narrowest key type holding [`KeyLayout::total_bits`].
    pub fn width(&self) -> KeyWidth {
        self.width
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Bit offset of each dimension's field in a key.
    pub(crate) fn shifts(&self) -> &[u32] {
        &self.shifts
    }

    /// The extents this layout was built for.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Packs a validated index tuple (`idx.len() == rank`, each component
    /// below its extent) into a key of type `K`, which must hold
    /// `total_bits` bits.
    #[inline]
    pub fn pack<K: Key>(&self, idx: &[u64]) -> K {
        debug_assert!(self.total_bits <= K::BITS);
        debug_assert_eq!(idx.len(), self.rank());
        let mut k = K::default();
        // Rank 2 (matrices) dominates: two shifts (one of them 0) and ors.
        if let ([s0, s1], [i, j]) = (self.shifts.as_slice(), idx) {
            k.or_bits(*i, *s0);
            k.or_bits(*j, *s1);
            return k;
        }
        for (&v, &s) in idx.iter().zip(&self.shifts) {
            k.or_bits(v, s);
        }
        k
    }

    /// Unpacks `key` into `out` (`out.len() == rank`).
    #[inline]
    pub fn unpack<K: Key>(&self, key: &K, out: &mut [u64]) {
        debug_assert_eq!(out.len(), self.rank());
        for ((o, &s), &b) in out.iter_mut().zip(&self.shifts).zip(&self.bits) {
            *o = key.get_bits(s, b);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn pack_cmp<K: Key>(layout: &KeyLayout, a: &[u64], b: &[u64]) -> Ordering {
        let ka: K = layout.pack(a);
        let kb: K = layout.pack(b);
        let mut out = vec![0u64; layout.rank()];
        layout.unpack(&ka, &mut out);
        assert_eq!(out, a);
        layout.unpack(&kb, &mut out);
        assert_eq!(out, b);
        ka.cmp(&kb)
    }

    /// Extents biased to the interesting cases: 1, tiny, powers of two
    /// and their neighbours, near u64::MAX.
    fn extent() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(1u64),
            2u64..10,
            (1u32..64).prop_flat_map(|b| prop_oneof![
                Just(1u64 << b),
                Just((1u64 << b) + 1),
                Just((1u64 << b) - 1)
            ]),
            (u64::MAX - 3)..=u64::MAX,
            1u64..=u64::MAX,
        ]
    }

    fn tuple_in(shape: Vec<u64>) -> impl Strategy<Value = Vec<u64>> {
        shape
            .into_iter()
            .map(|s| prop_oneof![Just(0u64), Just(s - 1), 0..s, Just(s / 2)].boxed())
            .collect::<Vec<_>>()
    }

    fn shape_and_pair() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<u64>)> {
        proptest::collection::vec(extent(), 1..=6).prop_flat_map(|shape| {
            (
                Just(shape.clone()),
                tuple_in(shape.clone()),
                tuple_in(shape),
            )
        })
    }

    proptest! {
        #[test]
        fn column_major_keys_order_by_column_then_row(
            (shape, a, b) in proptest::collection::vec(extent(), 2..=2).prop_flat_map(|shape| {
                (Just(shape.clone()), tuple_in(shape.clone()), tuple_in(shape))
            })
        ) {
            let layout = KeyLayout::with_major(&shape, 1);
            let expect = (a[1], a[0]).cmp(&(b[1], b[0]));
            if layout.total_bits() <= 64 {
                prop_assert_eq!(pack_cmp::<u64>(&layout, &a, &b), expect);
            }
            if layout.total_bits() <= 128 {
                prop_assert_eq!(pack_cmp::<u128>(&layout, &a, &b), expect);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn key_pack_roundtrip_and_order((shape, a, b) in shape_and_pair()) {
            let layout = KeyLayout::new(&shape);
            let expect = a.cmp(&b);
            // Every type at least as wide as the layout must agree.
            let tb = layout.total_bits();
            if tb <= 64 {
                prop_assert_eq!(pack_cmp::<u64>(&layout, &a, &b), expect);
            }
            if tb <= 128 {
                prop_assert_eq!(pack_cmp::<u128>(&layout, &a, &b), expect);
            }
            if tb <= 256 {
                prop_assert_eq!(pack_cmp::<WideKey<4>>(&layout, &a, &b), expect);
            }
            prop_assert_eq!(pack_cmp::<WideKey<64>>(&layout, &a, &b), expect);
            prop_assert_eq!(layout.width(), KeyWidth::for_bits(tb));
        }

        #[test]
        fn key_delta_roundtrip_u64(a in any::<u64>(), b in any::<u64>()) {
            delta_roundtrip(&a.min(b), &a.max(b));
        }

        #[test]
        fn key_delta_roundtrip_u128(a in any::<u128>(), b in any::<u128>()) {
            delta_roundtrip(&a.min(b), &a.max(b));
        }

        #[test]
        fn key_delta_roundtrip_wide4(a in any::<[u64; 4]>(), b in any::<[u64; 4]>(), z in 0usize..4) {
            // Zero some leading words so small deltas are common too.
            let (mut a, mut b) = (a, b);
            a[..z].fill(0);
            b[..z].fill(0);
            let (a, b) = (WideKey(a), WideKey(b));
            delta_roundtrip(&a.min(b), &a.max(b));
        }

        #[test]
        fn key_delta_roundtrip_wide64(words in proptest::collection::vec(any::<u64>(), 1..4), lo in 0usize..64, sub in any::<u64>()) {
            let mut b = WideKey::<64>::default();
            for (i, w) in words.iter().enumerate() {
                if lo + i < 64 { b.0[lo + i] = *w; }
            }
            let mut a = b;
            a.0[63] = a.0[63].saturating_sub(sub);
            delta_roundtrip(&a, &b);
            delta_roundtrip(&WideKey::default(), &b);
        }
    }

    fn delta_roundtrip<K: Key>(prev: &K, cur: &K) {
        let mut buf = vec![0xAAu8]; // junk before, so `pos` handling is exercised
        let start = buf.len();
        K::write_delta(prev, cur, &mut buf);
        let end = buf.len();
        buf.push(0x80); // junk after
        let mut pos = start;
        assert_eq!(K::read_delta(prev, &buf, &mut pos), Some(*cur));
        assert_eq!(pos, end);
        // Every truncation fails and leaves pos alone.
        for cut in start..end {
            let mut pos = start;
            assert_eq!(K::read_delta(prev, &buf[..cut], &mut pos), None);
            assert_eq!(pos, start);
        }
    }

    fn rejects<K: Key>(prev: &K, buf: &[u8]) {
        let mut pos = 0;
        assert_eq!(K::read_delta(prev, buf, &mut pos), None, "{buf:?}");
        assert_eq!(pos, 0);
    }

    fn delta_rejections<K: Key>() {
        let zero = K::default();
        let max_len = K::BITS.div_ceil(7) as usize;
        // Truncated: empty and continuation bit on the last byte.
        rejects(&zero, &[]);
        rejects(&zero, &[0x80]);
        rejects(&zero, &[0xff, 0xff]);
        // Non-canonical trailing zero group.
        rejects(&zero, &[0x81, 0x00]);
        rejects(&zero, &[0x80, 0x80, 0x00]);
        // Overlong: more groups than the capacity needs.
        let mut long = vec![0x80u8; max_len];
        long.push(0x01);
        rejects(&zero, &long);
        // Value bits beyond the capacity in the last group.
        let room = K::BITS - 7 * (max_len as u32 - 1);
        if room < 7 {
            let mut wide = vec![0xffu8; max_len - 1];
            wide.push(1u8 << room);
            rejects(&zero, &wide);
        }
        // Maximum value: all ones decodes, then adding 1 overflows.
        let mut maxv = vec![0xffu8; max_len - 1];
        maxv.push(((1u16 << room) - 1) as u8);
        let mut pos = 0;
        let m = K::read_delta(&zero, &maxv, &mut pos).expect("max value decodes");
        assert_eq!(pos, maxv.len());
        let mut one = K::default();
        one.or_bits(1, 0);
        rejects(&one, &maxv);
        let mut buf = Vec::new();
        K::write_delta(&zero, &m, &mut buf);
        assert_eq!(buf, maxv);
        // Zero delta is one byte.
        buf.clear();
        K::write_delta(&m, &m, &mut buf);
        assert_eq!(buf, [0]);
    }

    #[test]
    fn key_delta_rejects_malformed() {
        delta_rejections::<u64>();
        delta_rejections::<u128>();
        delta_rejections::<WideKey<4>>();
        delta_rejections::<WideKey<64>>();
    }

    #[test]
    fn key_widths() {
        assert_eq!(KeyLayout::new(&[1 << 31, 1 << 31]).width(), KeyWidth::U64);
        assert_eq!(KeyLayout::new(&[1 << 31, 1 << 31]).total_bits(), 62);
        assert_eq!(KeyLayout::new(&[1 << 40, 1 << 40]).width(), KeyWidth::U128);
        assert_eq!(KeyLayout::new(&[(1 << 40) + 1, 1 << 40]).total_bits(), 81);
        let l = KeyLayout::new(&[u64::MAX; 64]);
        assert_eq!(l.total_bits(), 4096);
        assert_eq!(l.width(), KeyWidth::W4096);
        let idx: Vec<u64> = (0..64).map(|d| u64::MAX - 1 - d).collect();
        let k: WideKey<64> = l.pack(&idx);
        let mut out = vec![0; 64];
        l.unpack(&k, &mut out);
        assert_eq!(out, idx);
        // Extents 1 and 0 take no bits; a zero-width top field with a full
        // 64-bit field below must not shift out of range.
        let l = KeyLayout::new(&[1, u64::MAX, 0]);
        assert_eq!(l.total_bits(), 64);
        assert_eq!(l.width(), KeyWidth::U64);
        let k: u64 = l.pack(&[0, u64::MAX - 1, 0]);
        assert_eq!(k, u64::MAX - 1);
        assert_eq!(KeyLayout::new(&[1]).total_bits(), 0);
        assert_eq!(KeyLayout::new(&[2, 3, 5]).total_bits(), 1 + 2 + 3);
    }

    #[test]
    fn key_wide_bits_straddle_words() {
        let mut k = WideKey::<4>::default();
        k.or_bits(0xdead_beef_cafe_f00d, 60);
        assert_eq!(k.get_bits(60, 64), 0xdead_beef_cafe_f00d);
        assert_eq!(k.0[3], 0xd << 60);
        assert_eq!(k.0[2], 0xdead_beef_cafe_f00d >> 4);
        assert_eq!(k.get_bits(64, 8), 0x00);
        assert_eq!(k.get_bits(256, 8), 0);
        let mut k = WideKey::<4>::default();
        k.or_bits(u64::MAX, 192);
        assert_eq!(k.0, [u64::MAX, 0, 0, 0]);
        assert_eq!(k.radix_digit(192) & 0xff, 0xff);
    }
}
