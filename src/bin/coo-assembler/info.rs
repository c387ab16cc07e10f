//! `coo-assembler info`: container, tensors, statistics and metadata, as
//! text or JSON (through serde_json).

use crate::open;
use coo_assembler::{HurrayFile, KvValue};
use serde_json::{json, Map, Value as Json};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let out = if json {
        serde_json::to_string(&as_json(path, &f))?
    } else {
        as_text(path, &f)
    };
    println!("{}", out.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// A float as JSON: non-finite values have no JSON form and become null.
fn json_f64(v: f64) -> Json {
    serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(2 * b.len()), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

fn kv_json(v: &KvValue) -> Json {
    match v {
        KvValue::String(s) => Json::String(s.clone()),
        KvValue::I64(x) => json!(x),
        KvValue::U64(x) => json!(x),
        KvValue::F64(x) => json_f64(*x),
        KvValue::Bool(b) => json!(b),
        KvValue::Bytes(b) => Json::String(hex(b)),
        KvValue::Array(items) => Json::Array(items.iter().map(kv_json).collect()),
    }
}

fn kv_text(v: &KvValue) -> String {
    match v {
        KvValue::String(s) => s.clone(),
        KvValue::I64(x) => x.to_string(),
        KvValue::U64(x) => x.to_string(),
        KvValue::F64(x) => x.to_string(),
        KvValue::Bool(b) => b.to_string(),
        KvValue::Bytes(b) => format!("0x{}", hex(b)),
        KvValue::Array(items) => {
            let parts: Vec<String> = items.iter().map(kv_text).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

fn as_json(path: &Path, f: &HurrayFile) -> Json {
    let h = f.header();
    let metadata: Map<String, Json> = f
        .kv()
        .iter()
        .map(|(k, v)| (k.clone(), kv_json(v)))
        .collect();
    let tensors: Vec<Json> = f
        .tensors()
        .map(|t| {
            let d = t.descriptor();
            let mut o = json!({
                "name": t.name(),
                "dtype": d.dtype.to_string(),
                "shape": d.shape,
                "nnz": d.nnz,
                "is_sorted": d.is_sorted,
                "values_bytes": d.values.byte_size,
                "indices_bytes": d.indices.byte_size,
            });
            if let (Some(s), Some(m)) = (&d.statistics, o.as_object_mut()) {
                m.insert(
                    "statistics".into(),
                    json!({
                        "computed_mask": s.computed_mask,
                        "nnz": s.nnz,
                        "sparsity_ratio": json_f64(s.sparsity_ratio),
                        "min": json_f64(s.value_min),
                        "max": json_f64(s.value_max),
                        "abs_max": json_f64(s.value_abs_max),
                        "mean": json_f64(s.value_mean),
                        "stddev": json_f64(s.value_stddev),
                        "has_nan": s.has_nan,
                        "has_inf": s.has_inf,
                    }),
                );
            }
            o
        })
        .collect();
    json!({
        "file": path.display().to_string(),
        "bytes": f.len(),
        "container_version": "1.0",
        "alignment": h.alignment,
        "flags": h.flags,
        "metadata": metadata,
        "tensors": tensors,
    })
}

fn as_text(path: &Path, f: &HurrayFile) -> String {
    let h = f.header();
    let mut o = String::new();
    let names: Vec<&str> = f.tensor_names().collect();
    let _ = writeln!(o, "file:       {} ({} bytes)", path.display(), f.len());
    let _ = writeln!(
        o,
        "container:  Hurray 1.0, buffer alignment {} B, flags 0x{:x}",
        h.alignment, h.flags
    );
    let _ = writeln!(o, "tensors:    {}", names.len());
    for (k, v) in f.kv() {
        let _ = writeln!(o, "metadata:   {k} = {}", kv_text(v));
    }
    for t in f.tensors() {
        let d = t.descriptor();
        let shape: Vec<String> = d.shape.iter().map(u64::to_string).collect();
        let _ = writeln!(o, "tensor {:?}:", t.name());
        let _ = writeln!(o, "  dtype:    {}", d.dtype);
        let _ = writeln!(o, "  shape:    [{}]", shape.join(", "));
        let _ = writeln!(o, "  nnz:      {}", d.nnz);
        let _ = writeln!(o, "  sorted:   {}", if d.is_sorted { "yes" } else { "no" });
        let _ = writeln!(o, "  values:   {} bytes", d.values.byte_size);
        let _ = writeln!(o, "  indices:  {} bytes", d.indices.byte_size);
        match &d.statistics {
            Some(s) => {
                let _ = writeln!(
                    o,
                    "  stats:    sparsity {} min {} max {} abs_max {} mean {} stddev {} nan {} inf {} (mask 0x{:02x})",
                    s.sparsity_ratio, s.value_min, s.value_max, s.value_abs_max, s.value_mean, s.value_stddev, s.has_nan, s.has_inf, s.computed_mask
                );
            }
            None => {
                let _ = writeln!(o, "  stats:    none");
            }
        }
    }
    o
}
