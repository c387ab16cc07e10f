//! LEB128 varints of u64, the one codec the run format, the accumulators
//! and the exact-sum encoding share. Decoding accepts only the canonical
//! (shortest) form, so one value has one encoding.

/// Append the LEB128 encoding of `v`.
#[inline]
pub(crate) fn write_u64(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decode one varint at `*pos` and advance past it. None on truncated,
/// overlong, out-of-range or non-canonical input (then `pos` is unchanged).
#[inline]
pub(crate) fn read_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut p = *pos;
    for i in 0..10u32 {
        let b = *buf.get(p)?;
        p += 1;
        // The tenth group holds bit 63 only.
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // A final zero group after others is a non-canonical encoding.
            if i > 0 && b == 0 {
                return None;
            }
            *pos = p;
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
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
}
