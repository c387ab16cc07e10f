//! `coo-assembler info`: container, tensors, statistics and metadata, as
//! text or JSON (through serde_json).

use crate::open_any;
use coo_assembler::vocab::format_size;
use coo_assembler::{
    DType, HurrayFile, element::format_float, element::group_digits, options::OutputLayout,
    read::KvValue, read::Layout, read::Opened, read::Statistics, read::Tensor, read::TensorInfo,
    vocab::Vocabulary,
};
use serde_json::{Map, Value as Json, json};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, json: bool, verbose: bool) -> anyhow::Result<ExitCode> {
    let f = match open_any(path, true)? {
        Opened::Plain(f) => f,
        Opened::Composite(c) => {
            crate::composite::info(path, &c, json)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let out = if json {
        serde_json::to_string(&as_json(path, &f))?
    } else {
        as_text(path, &f, verbose)
    };
    outln!("{}", out.trim_end());
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
        KvValue::F64(x) => format_float(*x, DType::F64),
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
        .tensor_infos()
        .map(|info| match f.tensor_view(info.name()) {
            Ok(t) => served_json(t),
            Err(_) => listed_json(&info),
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

fn statistics_json(s: &Statistics) -> Json {
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
    })
}

/// A tensor the reader lists but does not serve: what its descriptor
/// says. `layout` is the spec's name (or the tag in hex when the spec
/// names none), `dtype` the type's name (or its tag), `nnz` absent.
fn listed_json(info: &TensorInfo<'_>) -> Json {
    let (offset, bytes) = info.data();
    let mut o = json!({
        "name": info.name(),
        "dtype": info.dtype().map_or(format!("0x{:02x}", info.type_tag()), |d| d.to_string()),
        "shape": info.shape(),
        "layout": info.layout().map_or(format!("0x{:02x}", info.layout_tag()), |l| l.to_string()),
        "layout_kind": info.layout().map(|l| l.kind().name()),
        "layout_tag": info.layout_tag(),
        "read": false,
        "data_offset": offset,
        "data_bytes": bytes,
    });
    if let (Some(s), Some(m)) = (info.statistics(), o.as_object_mut()) {
        m.insert("statistics".into(), statistics_json(s));
    }
    o
}

fn served_json(t: Tensor<'_>) -> Json {
    {
        {
            // Fields in the order the JSON has always had them.
            let mut o = json!({
                "name": t.name(),
                "dtype": t.dtype().to_string(),
                "shape": t.shape(),
                "nnz": t.nnz(),
            });
            if let Some(m) = o.as_object_mut() {
                // The layout's own facts first, then its buffers' sizes.
                let mut buffers: Vec<(String, Json)> = Vec::new();
                if t.layout() == OutputLayout::Coo {
                    buffers.push(("is_sorted".into(), json!(t.is_row_major())));
                }
                if let Some(order) = t.mode_order() {
                    buffers.push(("mode_order".into(), json!(order)));
                }
                buffers.extend(
                    t.buffer_sizes()
                        .into_iter()
                        .map(|(name, bytes)| (format!("{name}_bytes"), json!(bytes))),
                );
                m.extend(buffers);
                m.insert("layout".into(), json!(t.layout().to_string()));
            }
            if let (Some(s), Some(m)) = (t.statistics(), o.as_object_mut()) {
                m.insert("statistics".into(), statistics_json(s));
            }
            o
        }
    }
}

/// A size for people, with the exact count beside it.
fn human_bytes(b: u64) -> String {
    if b < 1024 {
        return format_size(b);
    }
    format!("{} ({} bytes)", format_size(b), group_digits(u128::from(b)))
}

fn as_text(path: &Path, f: &HurrayFile, verbose: bool) -> String {
    let h = f.header();
    let mut o = String::new();
    let n = f.tensor_names().count();
    let _ = writeln!(
        o,
        "{}: Hurray file, {n} tensor{}, {}",
        path.display(),
        if n == 1 { "" } else { "s" },
        human_bytes(f.len())
    );
    for info in f.tensor_infos() {
        let t = match f.tensor_view(info.name()) {
            Ok(t) => t,
            Err(_) => {
                listed_text(&mut o, &info, verbose);
                continue;
            }
        };
        let shape = t.shape();
        let dims: Vec<String> = shape.iter().map(|&e| group_digits(u128::from(e))).collect();
        // The element count can pass u64 (rank up to 64); say so then.
        let elements = shape
            .iter()
            .try_fold(1u128, |a, &e| a.checked_mul(u128::from(e)));
        let elements_text = elements.map_or("more than 2^128".to_string(), group_digits);
        let _ = writeln!(o, "\ntensor {:?}", t.name());
        let _ = writeln!(o, "  type:        {}", t.dtype());
        let _ = writeln!(
            o,
            "  shape:       {} ({elements_text} elements)",
            dims.join(" x ")
        );
        let density = match elements {
            Some(e) if e > 0 => format!(", {} of all elements", percent(t.nnz() as f64 / e as f64)),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "  stored:      {} entries{density}",
            group_digits(u128::from(t.nnz()))
        );
        let layout = t.description();
        let _ = writeln!(o, "  layout:      {layout}");
        match t.statistics() {
            Some(s) => stats_text(&mut o, s, t.dtype(), &elements_text),
            None => {
                let _ = writeln!(o, "  statistics:  none stored");
            }
        }
        if verbose {
            let sizes: Vec<String> = t
                .buffer_sizes()
                .into_iter()
                .map(|(name, bytes)| format!("{name} {}", human_bytes(bytes)))
                .collect();
            let buffers = match t.mode_order() {
                Some(order) => format!("mode order {order:?}, {}", sizes.join(", ")),
                None => sizes.join(", "),
            };
            let _ = writeln!(o, "  buffers:     {buffers}");
            if let Some(s) = t.statistics() {
                let _ = writeln!(o, "  stats mask:  0x{:02x}", s.computed_mask);
            }
        }
    }
    let meta: Vec<_> = f
        .kv()
        .iter()
        .filter(|(k, _)| verbose || !coo_assembler::raw::kv::is_checksum_key(k))
        .collect();
    if !meta.is_empty() {
        let _ = writeln!(o, "\nmetadata");
        for (k, v) in meta {
            let _ = writeln!(o, "  {k} = {}", kv_text(v));
        }
    }
    if verbose {
        let _ = writeln!(
            o,
            "\ncontainer:   Hurray 1.0, buffer alignment {} bytes, flags 0x{:x}",
            h.alignment, h.flags
        );
    }
    o
}

/// "2 x 2 (4 elements)" ("scalar (1 element)" for rank 0), and the
/// element count when it fits.
fn shape_line(shape: &[u64]) -> (String, Option<u128>) {
    let dims: Vec<String> = shape.iter().map(|&e| group_digits(u128::from(e))).collect();
    // The element count can pass u64 (rank up to 64); say so then.
    let elements = shape
        .iter()
        .try_fold(1u128, |a, &e| a.checked_mul(u128::from(e)));
    let count = elements.map_or("more than 2^128".to_string(), group_digits);
    let dims = if dims.is_empty() {
        "scalar".to_string()
    } else {
        dims.join(" x ")
    };
    let noun = if elements == Some(1) {
        "element"
    } else {
        "elements"
    };
    (format!("{dims} ({count} {noun})"), elements)
}

/// A tensor the reader lists but does not serve: its descriptor's
/// fields, and which commands read it.
fn listed_text(o: &mut String, info: &TensorInfo<'_>, verbose: bool) {
    let (offset, bytes) = info.data();
    let (shape, elements) = shape_line(info.shape());
    let _ = writeln!(o, "\ntensor {:?}", info.name());
    let _ = writeln!(o, "  type:        {}", info.dtype_text());
    let _ = writeln!(o, "  shape:       {shape}");
    let dense = matches!(info.layout(), Some(Layout::RowMajor | Layout::ColumnMajor))
        && info.dtype().is_some();
    let stored = if dense {
        format!("every element, {}", human_bytes(bytes))
    } else {
        format!("{} of data, not read", human_bytes(bytes))
    };
    let _ = writeln!(o, "  stored:      {stored}");
    let layout = match info.layout() {
        Some(l) => format!("{}: {}", l.described(), l.term().help),
        None => format!(
            "tag 0x{:02x}, which the Hurray specification does not name",
            info.layout_tag()
        ),
    };
    let _ = writeln!(o, "  layout:      {layout}");
    let _ = writeln!(
        o,
        "  read by:     info and verify (its placement{}); the other commands serve {}",
        if dense { " and buffer size" } else { "" },
        coo_assembler::read::SERVED
    );
    match info.statistics() {
        Some(s) => {
            let elements_text = elements.map_or("more than 2^128".to_string(), group_digits);
            stats_text(o, s, info.dtype().unwrap_or(DType::F64), &elements_text)
        }
        None => {
            let _ = writeln!(o, "  statistics:  none stored");
        }
    }
    if verbose {
        let _ = writeln!(
            o,
            "  buffers:     {} {} at byte {offset} (layout tag 0x{:02x}, element type tag 0x{:02x})",
            if dense { "values" } else { "data" },
            human_bytes(bytes),
            info.layout_tag(),
            info.type_tag()
        );
    }
}

fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p == 0.0 || p >= 0.1 {
        format!("{p:.1} %")
    } else {
        format!("{} %", format_float(p, DType::F64))
    }
}

/// The statistics in plain words, each line only when its mask bit says
/// the writer computed it.
fn stats_text(o: &mut String, s: &Statistics, dtype: DType, elements: &str) {
    use coo_assembler::raw::statistics::{NAN_INF_VALID, VALUE_RANGE_VALID, VALUE_STATS_VALID};
    let num = |v: f64| format_float(v, dtype);
    let m = s.computed_mask;
    let _ = writeln!(
        o,
        "  statistics:  as the writer stored them, over all {elements} elements, implicit zeros included"
    );
    if m & VALUE_RANGE_VALID != 0 {
        let _ = writeln!(
            o,
            "    smallest {}, largest {}, largest magnitude {}",
            num(s.value_min),
            num(s.value_max),
            num(s.value_abs_max)
        );
    }
    if m & VALUE_STATS_VALID != 0 {
        let _ = writeln!(
            o,
            "    mean {}, standard deviation {}",
            num(s.value_mean),
            num(s.value_stddev)
        );
    }
    if m & NAN_INF_VALID != 0 {
        let _ = writeln!(
            o,
            "    {}, {}",
            if s.has_nan { "some NaN" } else { "no NaN" },
            if s.has_inf {
                "some infinite values"
            } else {
                "no infinite values"
            }
        );
    }
}
