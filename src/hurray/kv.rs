//! The key-value metadata section.

use super::ByteReader;
use crate::error::Result;
use crate::options::OutputLayout;
use std::collections::HashSet;

/// KV key of the writer's name and version (written by coo-assembler).
pub const KEY_WRITER: &str = "coo_assembler.writer";

/// Prefix of the KV keys holding the xxh3-64 of a tensor's buffers.
pub const CHECKSUM_KEY_PREFIX: &str = "coo_assembler.xxh3.";

/// The spec's names of a layout's buffers, in buffer order.
pub fn buffer_names(layout: OutputLayout) -> &'static [&'static str] {
    match layout {
        OutputLayout::Coo => &["values", "indices"],
        OutputLayout::Csr => &["values", "col_indices", "row_ptr"],
        OutputLayout::Csc => &["values", "row_indices", "col_ptr"],
        // Rank 64 at most: a tensor of rank r uses the first 2 r + 1.
        OutputLayout::Csf => &CSF_BUFFER_NAMES,
    }
}

/// A CSF tensor's buffers: `values`, then `pos_L` and `crd_L` per level.
const CSF_BUFFER_NAMES: [&str; 129] = [
    "values", "pos_0", "crd_0", "pos_1", "crd_1", "pos_2", "crd_2", "pos_3", "crd_3", "pos_4",
    "crd_4", "pos_5", "crd_5", "pos_6", "crd_6", "pos_7", "crd_7", "pos_8", "crd_8", "pos_9",
    "crd_9", "pos_10", "crd_10", "pos_11", "crd_11", "pos_12", "crd_12", "pos_13", "crd_13",
    "pos_14", "crd_14", "pos_15", "crd_15", "pos_16", "crd_16", "pos_17", "crd_17", "pos_18",
    "crd_18", "pos_19", "crd_19", "pos_20", "crd_20", "pos_21", "crd_21", "pos_22", "crd_22",
    "pos_23", "crd_23", "pos_24", "crd_24", "pos_25", "crd_25", "pos_26", "crd_26", "pos_27",
    "crd_27", "pos_28", "crd_28", "pos_29", "crd_29", "pos_30", "crd_30", "pos_31", "crd_31",
    "pos_32", "crd_32", "pos_33", "crd_33", "pos_34", "crd_34", "pos_35", "crd_35", "pos_36",
    "crd_36", "pos_37", "crd_37", "pos_38", "crd_38", "pos_39", "crd_39", "pos_40", "crd_40",
    "pos_41", "crd_41", "pos_42", "crd_42", "pos_43", "crd_43", "pos_44", "crd_44", "pos_45",
    "crd_45", "pos_46", "crd_46", "pos_47", "crd_47", "pos_48", "crd_48", "pos_49", "crd_49",
    "pos_50", "crd_50", "pos_51", "crd_51", "pos_52", "crd_52", "pos_53", "crd_53", "pos_54",
    "crd_54", "pos_55", "crd_55", "pos_56", "crd_56", "pos_57", "crd_57", "pos_58", "crd_58",
    "pos_59", "crd_59", "pos_60", "crd_60", "pos_61", "crd_61", "pos_62", "crd_62", "pos_63",
    "crd_63",
];

/// KV key of the xxh3-64 of the buffer named `buffer` (see
/// [`buffer_names`]) of the tensor `tensor`:
/// `coo_assembler.xxh3.<tensor>.<buffer>`.
pub fn checksum_key(tensor: &str, buffer: &str) -> String {
    format!("{CHECKSUM_KEY_PREFIX}{tensor}.{buffer}")
}

/// A checksum key's tensor and buffer names (the inverse of
/// [`checksum_key`]); `None` for any other key.
pub fn parse_checksum_key(k: &str) -> Option<(&str, &'static str)> {
    let rest = k.strip_prefix(CHECKSUM_KEY_PREFIX)?;
    [
        OutputLayout::Coo,
        OutputLayout::Csr,
        OutputLayout::Csc,
        OutputLayout::Csf,
    ]
    .iter()
    .flat_map(|&l| buffer_names(l).iter().copied())
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
