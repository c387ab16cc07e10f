//! Low-level byte codecs shared by the run format, the accumulators and the
//! exact-sum encoding: LEB128 varints (of `u64`, `u128`, wide keys, and
//! zigzag `i128`) and little-endian readers. This is the only copy of each.
//!
//! Varint decoding accepts only the canonical (shortest) form, so one value
//! has one encoding, refuses bits beyond the type's width, and leaves `pos`
//! unchanged on failure.

/// An unsigned integer a LEB128 varint can hold, seen as 7-bit groups.
pub trait LebWord: Default {
    /// Capacity in bits.
    const WIDTH: u32;
    /// `self |= group << shift` (`group` < 128, fits below `WIDTH`).
    fn or_group(&mut self, group: u64, shift: u32);
    /// The 7-bit group starting at bit `shift`.
    fn group(&self, shift: u32) -> u8;
    /// Number of significant bits (0 for zero).
    fn significant_bits(&self) -> u32;
}

impl LebWord for u64 {
    const WIDTH: u32 = 64;
    #[inline(always)]
    fn or_group(&mut self, group: u64, shift: u32) {
        *self |= group << shift;
    }
    #[inline(always)]
    fn group(&self, shift: u32) -> u8 {
        ((*self >> shift) & 0x7f) as u8
    }
    #[inline(always)]
    fn significant_bits(&self) -> u32 {
        64 - self.leading_zeros()
    }
}

impl LebWord for u128 {
    const WIDTH: u32 = 128;
    #[inline(always)]
    fn or_group(&mut self, group: u64, shift: u32) {
        *self |= u128::from(group) << shift;
    }
    #[inline(always)]
    fn group(&self, shift: u32) -> u8 {
        ((*self >> shift) & 0x7f) as u8
    }
    #[inline(always)]
    fn significant_bits(&self) -> u32 {
        128 - self.leading_zeros()
    }
}

/// Append the LEB128 encoding of `v`, 7 bits at a time, low groups first.
#[inline]
pub fn write_leb<W: LebWord>(v: &W, out: &mut Vec<u8>) {
    let groups = v.significant_bits().div_ceil(7).max(1);
    for g in 0..groups {
        let mut byte = v.group(7 * g);
        if g + 1 < groups {
            byte |= 0x80;
        }
        out.push(byte);
    }
}

/// Decode one varint at `*pos` and advance past it. `None` on truncated,
/// overlong, out-of-range or non-canonical input; `pos` is then unchanged.
#[inline]
pub fn read_leb<W: LebWord>(buf: &[u8], pos: &mut usize) -> Option<W> {
    let start = *pos;
    let max_len = W::WIDTH.div_ceil(7) as usize;
    let mut acc = W::default();
    for i in 0..max_len {
        let byte = *buf.get(start.checked_add(i)?)?;
        let group = u64::from(byte & 0x7f);
        let shift = 7 * i as u32;
        // Bits of the last group that fall at or above W::WIDTH would be lost.
        let room = W::WIDTH - shift;
        if room < 7 && group >> room != 0 {
            return None;
        }
        acc.or_group(group, shift);
        if byte & 0x80 == 0 {
            // A final zero group after others is a non-canonical encoding.
            if byte == 0 && i > 0 {
                return None;
            }
            *pos = start + i + 1;
            return Some(acc);
        }
    }
    None // overlong: more groups than the width needs
}

/// Append the LEB128 encoding of a `u64`.
#[inline]
pub fn write_u64(v: u64, out: &mut Vec<u8>) {
    write_leb(&v, out);
}

/// Decode a `u64` varint; see [`read_leb`].
#[inline]
pub fn read_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    read_leb(buf, pos)
}

/// Append the zigzag LEB128 encoding of an `i128` (small magnitudes of
/// either sign take few bytes).
#[inline]
pub fn write_i128_zigzag(v: i128, out: &mut Vec<u8>) {
    let z = ((v << 1) ^ (v >> 127)) as u128;
    write_leb(&z, out);
}

/// Decode a zigzag `i128` varint; see [`read_leb`].
#[inline]
pub fn read_i128_zigzag(buf: &[u8], pos: &mut usize) -> Option<i128> {
    let z: u128 = read_leb(buf, pos)?;
    Some(((z >> 1) as i128) ^ -((z & 1) as i128))
}

/// The little-endian `u32` at `buf[at..at + 4]`, if in bounds.
#[inline]
pub fn le_u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// The little-endian `u64` at `buf[at..at + 8]`, if in bounds.
#[inline]
pub fn le_u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = buf.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The little-endian `u64` at `*pos`, advancing past it; `pos` unchanged
/// when out of bounds.
#[inline]
pub fn take_le_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let v = le_u64_at(buf, *pos)?;
    *pos += 8;
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_round_trip_and_rejects() {
        for v in [0u64, 1, 127, 128, 300, 1 << 63, u64::MAX] {
            let mut b = Vec::new();
            write_u64(v, &mut b);
            let mut p = 0;
            assert_eq!(read_u64(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        let mut p = 0;
        assert_eq!(read_u64(&[0x80, 0x80], &mut p), None); // truncated
        assert_eq!(p, 0);
        assert_eq!(read_u64(&[0xff; 11], &mut 0), None); // overlong
        assert_eq!(read_u64(&[0x80, 0x00], &mut 0), None); // non-canonical
        let mut max = vec![0xff; 9];
        max.push(0x02); // bit 64
        assert_eq!(read_u64(&max, &mut 0), None);
    }

    #[test]
    fn zigzag_i128_round_trip() {
        for v in [
            0i128,
            1,
            -1,
            63,
            -64,
            64,
            i64::MAX as i128,
            i64::MIN as i128,
            i128::MAX,
            i128::MIN,
        ] {
            let mut b = Vec::new();
            write_i128_zigzag(v, &mut b);
            let mut p = 0;
            assert_eq!(read_i128_zigzag(&b, &mut p), Some(v), "{v}");
            assert_eq!(p, b.len());
        }
        // Small magnitudes stay short.
        let mut b = Vec::new();
        write_i128_zigzag(-64, &mut b);
        assert_eq!(b, [0x7f]);
    }

    #[test]
    fn zigzag_i128_rejects_bad_input_without_moving() {
        let mut p = 1;
        let buf = [0xAA, 0x80, 0x80]; // truncated after the first byte
        assert_eq!(read_i128_zigzag(&buf, &mut p), None);
        assert_eq!(p, 1);
        // 19 groups hold 133 bits: the top group may carry 2 bits only.
        let mut over = vec![0xff; 18];
        over.push(0x04);
        assert_eq!(read_i128_zigzag(&over, &mut 0), None);
        let mut ok = vec![0xff; 18];
        ok.push(0x03);
        assert_eq!(read_i128_zigzag(&ok, &mut 0), Some(i128::MIN));
        // Overlong: a 20th group.
        let mut p = 0;
        assert_eq!(read_i128_zigzag(&[0x80; 25], &mut p), None);
        assert_eq!(p, 0);
        // Non-canonical: a trailing zero group.
        assert_eq!(read_i128_zigzag(&[0x81, 0x00], &mut 0), None);
    }

    #[test]
    fn little_endian_readers() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(le_u32_at(&b, 0), Some(0x0403_0201));
        assert_eq!(le_u64_at(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(le_u64_at(&b, 2), None);
        assert_eq!(le_u32_at(&b, usize::MAX), None);
        let mut p = 1;
        assert_eq!(take_le_u64(&b, &mut p), Some(0x0908_0706_0504_0302));
        assert_eq!(p, 9);
        assert_eq!(take_le_u64(&b, &mut p), None);
        assert_eq!(p, 9);
    }
}
