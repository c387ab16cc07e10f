//! xxh3-64 of a byte stream whose pieces are hashed by several threads at
//! once, giving exactly `xxhash_rust::xxh3::xxh3_64` of the whole stream.
//!
//! XXH3's long-input loop keeps eight 64-bit accumulators. Within a block
//! of 1024 bytes (16 stripes of 64 bytes, the default secret's length) a
//! stripe only *adds* to them: lane `i` of stripe `s` adds its word `x` to
//! accumulator `i ^ 1` and `lo32(k) * hi32(k)`, `k = x ^ secret[s + i]`,
//! to accumulator `i`. Each block's additions therefore depend on its bytes
//! alone and can be summed from pieces computed anywhere ([`Part`], one
//! per piece of the stream, any 8-byte-aligned split). Between blocks the
//! accumulators are scrambled (a non-linear step), which [`Chain`] applies
//! in stream order: one scramble per KiB, cheap. The last block (the one
//! holding the stream's last byte) is special in XXH3 (its stripes up to
//! the last and then the final 64 bytes with another secret offset), so
//! the chain keeps the stream's last 1024 bytes and hashes that block from
//! them at the end; a stream of at most 240 bytes, which XXH3 hashes with
//! other functions altogether, is hashed whole from them.

/// Bytes per block: one scramble per block.
const BLOCK: u64 = 1024;
/// Words (8 bytes) per block.
const BLOCK_WORDS: u64 = BLOCK / 8;
/// Bytes kept from the stream's end: the last block and the last stripe.
const TAIL: usize = BLOCK as usize;
/// Streams up to this length are not hashed by the long loop.
const MID_SIZE_MAX: u64 = 240;
const PRIME32_1: u64 = 0x9E37_79B1;
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const INITIAL_ACC: [u64; 8] = [
    0xC2B2_AE3D,
    0x9E37_79B1_85EB_CA87,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x85EB_CA77_C2B2_AE63,
    0x85EB_CA77,
    0x27D4_EB2F_1656_67C5,
    0x9E37_79B1,
];
/// XXH3's default secret.
const SECRET: [u8; 192] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
];

/// The little-endian u64 of the secret at byte `at`.
const fn secret_at(at: usize) -> u64 {
    let mut x = 0u64;
    let mut b = 0;
    while b < 8 {
        x |= (SECRET[at + b] as u64) << (8 * b);
        b += 1;
    }
    x
}

/// The secret as words: word `n` is at byte `8 n`.
const SECRET_WORDS: [u64; 24] = {
    let mut w = [0u64; 24];
    let mut n = 0;
    while n < 24 {
        w[n] = secret_at(8 * n);
        n += 1;
    }
    w
};

#[inline(always)]
fn mul32(k: u64) -> u64 {
    (k & 0xFFFF_FFFF).wrapping_mul(k >> 32)
}

/// What the words `w` at word `pos` of a block add to its accumulators.
#[inline]
fn accumulate(d: &mut [u64; 8], mut pos: usize, mut w: &[u64]) {
    // Up to the next stripe.
    while pos % 8 != 0 {
        let Some((&x, rest)) = w.split_first() else {
            return;
        };
        add_word(d, pos, u64::from_le(x));
        pos += 1;
        w = rest;
    }
    let mut stripes = w.chunks_exact(8);
    for st in stripes.by_ref() {
        let s = pos / 8;
        let key = &SECRET_WORDS[s..s + 8];
        for i in 0..8 {
            let x = u64::from_le(st[i]);
            d[i ^ 1] = d[i ^ 1].wrapping_add(x);
            d[i] = d[i].wrapping_add(mul32(x ^ key[i]));
        }
        pos += 8;
    }
    for &x in stripes.remainder() {
        add_word(d, pos, u64::from_le(x));
        pos += 1;
    }
}

#[inline(always)]
fn add_word(d: &mut [u64; 8], pos: usize, x: u64) {
    let (s, i) = (pos / 8, pos % 8);
    d[i ^ 1] = d[i ^ 1].wrapping_add(x);
    d[i] = d[i].wrapping_add(mul32(x ^ SECRET_WORDS[s + i]));
}

fn scramble(acc: &mut [u64; 8]) {
    for (i, a) in acc.iter_mut().enumerate() {
        let key = secret_at(192 - 64 + 8 * i);
        *a = ((*a ^ (*a >> 47)) ^ key).wrapping_mul(PRIME32_1);
    }
}

/// One stripe of 64 bytes with the secret at byte `secret`.
fn stripe(acc: &mut [u64; 8], bytes: &[u8], secret: usize) {
    for i in 0..8 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        let x = u64::from_le_bytes(w);
        acc[i ^ 1] = acc[i ^ 1].wrapping_add(x);
        acc[i] = acc[i].wrapping_add(mul32(x ^ secret_at(secret + 8 * i)));
    }
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(0x1656_6791_9E37_79F9);
    h ^ (h >> 32)
}

/// A piece of the stream, hashed on its own: what it adds to each block it
/// meets. Reusable ([`Part::start`]).
#[derive(Default)]
pub(crate) struct Part {
    /// The stream's word where the piece starts, and the next word.
    start: u64,
    next: u64,
    /// What the piece adds to blocks `start / 128 ..`.
    deltas: Vec<[u64; 8]>,
}

impl Part {
    /// Begin a piece at byte `8 * word` of the stream (dropping the last).
    pub(crate) fn start(&mut self, word: u64) {
        self.start = word;
        self.next = word;
        self.deltas.clear();
    }

    /// [`Part::start`] for a piece of `words` words, its room reserved
    /// exactly (a budgeted writer's scratch: no doubling past the need).
    pub(crate) fn start_sized(&mut self, word: u64, words: u64) {
        self.start(word);
        let blocks = (word % BLOCK_WORDS + words).div_ceil(BLOCK_WORDS) as usize;
        self.deltas.reserve_exact(blocks);
    }

    /// Hash the next words of the piece, each stored little-endian (the
    /// stream's bytes, as `u64`s).
    pub(crate) fn push_le(&mut self, mut words: &[u64]) {
        while !words.is_empty() {
            let pos = self.next % BLOCK_WORDS;
            if pos == 0 || self.deltas.is_empty() {
                self.deltas.push([0; 8]);
            }
            let take = ((BLOCK_WORDS - pos) as usize).min(words.len());
            let (now, rest) = words.split_at(take);
            if let Some(d) = self.deltas.last_mut() {
                accumulate(d, pos as usize, now);
            }
            self.next += take as u64;
            words = rest;
        }
    }

    /// Bytes of the stream the piece holds.
    pub(crate) fn len(&self) -> u64 {
        (self.next - self.start) * 8
    }

    /// Bytes of memory held.
    pub(crate) fn buffer_bytes(&self) -> usize {
        self.deltas.capacity() * 64
    }
}

/// The pieces, in stream order, into one xxh3-64.
pub(crate) struct Chain {
    /// The accumulators after every block before `block`.
    acc: [u64; 8],
    /// What the pieces so far add to block `block`.
    open: [u64; 8],
    block: u64,
    /// Bytes so far.
    len: u64,
    /// The stream's last `TAIL` bytes (all of them while shorter).
    tail: Vec<u8>,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            acc: INITIAL_ACC,
            open: [0; 8],
            block: 0,
            len: 0,
            tail: Vec::with_capacity(TAIL),
        }
    }
}

impl Chain {
    /// Append the next piece: `part` must start where the stream stands,
    /// and `last` be its last `min(part.len(), 1024)` bytes.
    pub(crate) fn append(&mut self, part: &Part, last: &[u8]) {
        debug_assert_eq!(part.start * 8, self.len);
        debug_assert_eq!(last.len() as u64, part.len().min(TAIL as u64));
        if part.len() == 0 {
            return;
        }
        let first = part.start / BLOCK_WORDS;
        for (j, d) in part.deltas.iter().enumerate() {
            let b = first + j as u64;
            // A block is scrambled once the stream goes on past it.
            while self.block < b {
                for (a, o) in self.acc.iter_mut().zip(&mut self.open) {
                    *a = a.wrapping_add(*o);
                    *o = 0;
                }
                scramble(&mut self.acc);
                self.block += 1;
            }
            for (o, x) in self.open.iter_mut().zip(d) {
                *o = o.wrapping_add(*x);
            }
        }
        self.len += part.len();
        let keep = TAIL.saturating_sub(last.len()).min(self.tail.len());
        self.tail.drain(..self.tail.len() - keep);
        self.tail.extend_from_slice(last);
    }

    /// The xxh3-64 of the stream.
    pub(crate) fn digest(&self) -> u64 {
        let len = self.len;
        if len <= MID_SIZE_MAX {
            return xxhash_rust::xxh3::xxh3_64(&self.tail);
        }
        // The last block, from its bytes: its stripes before the last
        // byte's, then the stream's last 64 bytes.
        let mut acc = self.acc;
        let kb = (len - 1) / BLOCK;
        debug_assert_eq!(kb, self.block);
        let base = len - self.tail.len() as u64;
        let from = (kb * BLOCK - base) as usize;
        let stripes = (((len - 1) - kb * BLOCK) / 64) as usize;
        for s in 0..stripes {
            stripe(&mut acc, &self.tail[from + 64 * s..], 8 * s);
        }
        stripe(&mut acc, &self.tail[self.tail.len() - 64..], 192 - 64 - 7);
        let mut h = len.wrapping_mul(PRIME64_1);
        for i in 0..4 {
            let a = acc[2 * i] ^ secret_at(11 + 16 * i);
            let b = acc[2 * i + 1] ^ secret_at(11 + 16 * i + 8);
            let m = u128::from(a) * u128::from(b);
            h = h.wrapping_add((m as u64) ^ ((m >> 64) as u64));
        }
        avalanche(h)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn words(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect()
    }

    fn bytes_of(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// The words hashed in pieces cut at `cuts`, the pieces' own order.
    fn in_pieces(w: &[u64], cuts: &[usize]) -> u64 {
        let mut chain = Chain::default();
        let mut at = 0usize;
        let mut part = Part::default();
        for &c in cuts.iter().chain(std::iter::once(&w.len())) {
            let piece: Vec<u64> = w[at..c].iter().map(|x| x.to_le()).collect();
            part.start(at as u64);
            // Pushed in uneven slices, as an encoder's chunks would be.
            for sl in piece.chunks(37) {
                part.push_le(sl);
            }
            let b = bytes_of(&w[at..c]);
            chain.append(&part, &b[b.len().saturating_sub(TAIL)..]);
            at = c;
        }
        chain.digest()
    }

    #[test]
    fn equals_xxh3_64_for_every_length_and_cut() {
        for n in 0..400usize {
            let w = words(n, n as u64 + 7);
            let want = xxhash_rust::xxh3::xxh3_64(&bytes_of(&w));
            assert_eq!(in_pieces(&w, &[]), want, "{n} words whole");
            for c in [1, 2, 7, 8, 16, 63, 64, 127, 128, 129, 130, 200, 256, 257] {
                if c < n {
                    assert_eq!(in_pieces(&w, &[c]), want, "{n} words cut at {c}");
                }
            }
        }
    }

    #[test]
    fn equals_xxh3_64_in_many_pieces() {
        for (n, seed) in [(1000usize, 1u64), (4096, 2), (12_345, 3), (100_000, 4)] {
            let w = words(n, seed);
            let want = xxhash_rust::xxh3::xxh3_64(&bytes_of(&w));
            let cuts: Vec<usize> = words(20, seed + 100)
                .iter()
                .map(|x| (x % n as u64) as usize)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(in_pieces(&w, &cuts), want, "{n} words");
            // Empty pieces and pieces of one word.
            let mut fine: Vec<usize> = cuts
                .iter()
                .flat_map(|&c| [c, c, c + 1])
                .filter(|&c| c <= n)
                .collect();
            fine.sort_unstable();
            assert_eq!(in_pieces(&w, &fine), want, "{n} words, fine cuts");
        }
    }
}
