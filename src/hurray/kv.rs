//! The key-value metadata section.

use super::ByteReader;
use crate::error::Result;
use crate::options::OutputLayout;
use crate::vocab::Vocabulary;
use std::collections::HashSet;

/// KV key of the writer's name and version (written by coo-assembler).
pub const KEY_WRITER: &str = "coo_assembler.writer";

/// Prefix of the KV keys holding the xxh3-64 of a tensor's buffers.
pub const CHECKSUM_KEY_PREFIX: &str = "coo_assembler.xxh3.";

/// KV key of the xxh3-64 of the buffer named `buffer` (see
/// [`crate::options::OutputLayout::buffer_names`]) of the tensor `tensor`:
/// `coo_assembler.xxh3.<tensor>.<buffer>`.
pub fn checksum_key(tensor: &str, buffer: &str) -> String {
    format!("{CHECKSUM_KEY_PREFIX}{tensor}.{buffer}")
}

/// A checksum key's tensor and buffer names (the inverse of
/// [`checksum_key`]); `None` for any other key.
pub fn parse_checksum_key(k: &str) -> Option<(&str, &'static str)> {
    let rest = k.strip_prefix(CHECKSUM_KEY_PREFIX)?;
    OutputLayout::TERMS
        .iter()
        .flat_map(|t| t.value.buffer_names().iter().copied())
        .find_map(|b| {
            rest.strip_suffix(b)
                .and_then(|n| n.strip_suffix('.'))
                .map(|n| (n, b))
        })
}

/// Whether `k` is one of our buffer-checksum keys (bookkeeping, not
/// content: `info` shows them with `--verbose` only).
pub fn is_checksum_key(k: &str) -> bool {
    k.starts_with(CHECKSUM_KEY_PREFIX)
}

/// A typed KV value.
#[derive(Clone, Debug, PartialEq)]
pub enum KvValue {
    /// Tag 0x01.
    String(String),
    /// Tag 0x02.
    I64(i64),
    /// Tag 0x03.
    U64(u64),
    /// Tag 0x04.
    F64(f64),
    /// Tag 0x05.
    Bool(bool),
    /// Tag 0x06.
    Bytes(Vec<u8>),
    /// Tag 0x07: a homogeneous array of scalars (element tag 0x01..=0x06).
    Array(Vec<KvValue>),
}

impl KvValue {
    fn tag(&self) -> u8 {
        match self {
            KvValue::String(_) => 0x01,
            KvValue::I64(_) => 0x02,
            KvValue::U64(_) => 0x03,
            KvValue::F64(_) => 0x04,
            KvValue::Bool(_) => 0x05,
            KvValue::Bytes(_) => 0x06,
            KvValue::Array(_) => 0x07,
        }
    }

    fn encode_payload(&self, out: &mut Vec<u8>) {
        match self {
            KvValue::String(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            KvValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            KvValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            KvValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            KvValue::Bool(v) => out.push(*v as u8),
            KvValue::Bytes(b) => {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            KvValue::Array(items) => {
                let elem = items.first().map_or(0x01, |v| v.tag());
                out.push(elem);
                out.extend_from_slice(&(items.len() as u32).to_le_bytes());
                for v in items {
                    v.encode_payload(out);
                }
            }
        }
    }

    fn decode_payload(r: &mut ByteReader<'_>, tag: u8, key: &str) -> Result<KvValue> {
        let p = r.pos();
        Ok(match tag {
            0x01 => {
                let n = r.u32("string length")? as usize;
                let b = r.take(n, "string")?;
                KvValue::String(
                    std::str::from_utf8(b)
                        .map_err(|e| {
                            r.err_at(p, format!("key {key:?}: string is not UTF-8 ({e})"))
                        })?
                        .to_string(),
                )
            }
            0x02 => KvValue::I64(r.i64("i64 value")?),
            0x03 => KvValue::U64(r.u64("u64 value")?),
            0x04 => KvValue::F64(r.f64("f64 value")?),
            0x05 => match r.u8("bool value")? {
                0 => KvValue::Bool(false),
                1 => KvValue::Bool(true),
                v => return Err(r.err_at(p, format!("key {key:?}: bool value {v} is not 0 or 1"))),
            },
            0x06 => {
                let n = r.u32("bytes length")? as usize;
                KvValue::Bytes(r.take(n, "bytes")?.to_vec())
            }
            0x07 => {
                let elem = r.u8("array element tag")?;
                if !(0x01..=0x06).contains(&elem) {
                    return Err(r.err_at(
                        p,
                        format!("key {key:?}: array element tag 0x{elem:02x} is invalid"),
                    ));
                }
                let n = r.u32("array count")? as usize;
                // Every element takes at least one byte: bound the allocation.
                let mut items = Vec::with_capacity(n.min(r.remaining()));
                for _ in 0..n {
                    items.push(Self::decode_payload(r, elem, key)?);
                }
                KvValue::Array(items)
            }
            t => {
                return Err(r.err_at(
                    p.saturating_sub(1),
                    format!("key {key:?}: KV type tag 0x{t:02x} is reserved or invalid"),
                ));
            }
        })
    }
}

/// Encode a KV section.
pub fn encode(entries: &[(String, KvValue)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.push(v.tag());
        v.encode_payload(&mut out);
    }
    out
}

/// Decode a KV section. `offset` is its absolute position.
pub fn decode(bytes: &[u8], offset: u64) -> Result<Vec<(String, KvValue)>> {
    let mut r = ByteReader::new(bytes, offset, "KV metadata section");
    let count = r.u32("KV count")? as usize;
    // An entry takes at least 4 bytes (key_len, one key byte, tag).
    if count > r.remaining() / 4 {
        return Err(r.err_at(
            0,
            format!("KV count {count} cannot fit in {} bytes", bytes.len()),
        ));
    }
    let mut out = Vec::with_capacity(count);
    let mut seen = HashSet::new();
    for i in 0..count {
        let p = r.pos();
        let klen = r.u16("key_len")? as usize;
        if klen == 0 {
            return Err(r.err_at(p, format!("KV entry {i}: key_len is 0")));
        }
        let key = std::str::from_utf8(r.take(klen, "key")?)
            .map_err(|e| r.err_at(p + 2, format!("KV entry {i}: key is not UTF-8 ({e})")))?
            .to_string();
        if !seen.insert(key.clone()) {
            return Err(r.err_at(p, format!("KV key {key:?} appears twice")));
        }
        let tag = r.u8("KV tag")?;
        let v = KvValue::decode_payload(&mut r, tag, &key)?;
        out.push((key, v));
    }
    if r.remaining() != 0 {
        return Err(r.err(format!(
            "{} bytes follow the last KV entry inside kv_length",
            r.remaining()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_tags() {
        let e = vec![
            ("s".to_string(), KvValue::String("héllo".into())),
            ("i".to_string(), KvValue::I64(-5)),
            ("u".to_string(), KvValue::U64(7)),
            ("f".to_string(), KvValue::F64(0.25)),
            ("b".to_string(), KvValue::Bool(true)),
            ("y".to_string(), KvValue::Bytes(vec![1, 2, 3])),
            (
                "a".to_string(),
                KvValue::Array(vec![KvValue::U64(1), KvValue::U64(2)]),
            ),
        ];
        let b = encode(&e);
        assert_eq!(decode(&b, 0).unwrap(), e);
        let mut bad = b.clone();
        bad[7] = 0x08; // tag of "s"
        assert!(decode(&bad, 0).is_err());
    }
}
