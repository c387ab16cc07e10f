//! Issue 8 items 1 and 2: statistics are advisory (a mismatch is a warning,
//! the common "over the stored values" convention is recognised and named;
//! `--strict` fails on warnings), and every padding byte is checked.

use crate::common;

use common::reference;
use coo_assembler::{HurrayFile, read::Severity};
use hurray_core::LayoutDescriptor;
use hurray_core::descriptor::{Statistics as RefStats, StatisticsMask};
use hurray_core::layout::CooLayout;

/// A 300 x 300 f64 tensor with 10 stored values 1..=10, written by the
/// reference writer (hurray-io 0.1.0) with statistics computed the way its
/// callers often do: over the stored values (`values.mean()`, ...).
fn reference_file_with_stored_value_statistics() -> Vec<u8> {
    let vals: Vec<f64> = (1..=10).map(f64::from).collect();
    let idx: Vec<u64> = (0..10u64).flat_map(|k| [k * 29, k * 31]).collect();
    let mean = vals.iter().sum::<f64>() / 10.0;
    let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 10.0;
    let stats = RefStats {
        // nnz, sparsity, range, mean/stddev, nan/inf
        computed_mask: StatisticsMask(0b10_1111),
        nnz: 10,
        sparsity_ratio: 1.0 - 10.0 / 90_000.0,
        value_min: 1.0,
        value_max: 10.0,
        value_abs_max: 10.0,
        value_mean: mean,
        value_stddev: var.sqrt(),
        nm_n: 0,
        nm_m: 0,
        has_nan: false,
        has_inf: false,
    };
    let v: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
    let i: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
    let b: [&[u8]; 2] = [&v, &i];
    let d = reference::descriptor(
        coo_assembler::DType::F64,
        &[300, 300],
        LayoutDescriptor::Coo(CooLayout::new(10, true)),
        &b,
        Some(stats),
    );
    reference::write(&[("coo", &d, &b)])
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let o = crate::run(args);
    (o.code, o.stdout, o.stderr)
}

#[test]
fn statistics_over_stored_values_are_a_named_warning() {
    let bytes = reference_file_with_stored_value_statistics();
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    let mut problems = f.verify();
    // The reference writer stores no checksums: the last is a note.
    let note = problems.pop().unwrap();
    assert_eq!(note.severity, Severity::Note, "{note}");
    assert!(!note.is_error());
    assert!(!problems.is_empty());
    for p in &problems {
        assert_eq!(p.severity, Severity::Warning, "{p}");
        assert!(!p.is_error());
        assert_eq!(p.rule, "statistics-mismatch", "{p}");
    }
    let all = problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    // min 1 over stored values vs 0 over all elements (implicit zeros).
    for needle in [
        "value_mean is 5.5",
        "over the 10 stored values",
        "the spec defines it over all 90,000 elements",
        "value_min is 1.0",
    ] {
        assert!(all.contains(needle), "{needle:?} not in\n{all}");
    }

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ref.hrry");
    std::fs::write(&p, &bytes).unwrap();
    let path = p.to_str().unwrap();
    let (code, out, _) = cli(&["verify", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK with") && out.contains("warnings"), "{out}");
    assert!(out.contains("over the 10 stored values"), "{out}");
    // The reference writer stores no checksums, and verify says so.
    assert!(out.contains("carries no stored checksums"), "{out}");
    let (code, out, err) = cli(&["verify", "--strict", path]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("--strict"), "{err}");
    let (code, out, _) = cli(&["info", path]);
    assert_eq!(code, 0);
    assert!(
        out.contains("over all 90,000 elements, implicit zeros included"),
        "{out}"
    );
}

#[test]
fn a_non_zero_padding_byte_anywhere_fails_verify_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ours.hrry");
    let mut fw = coo_assembler::write::FileWriter::create(&p, Default::default()).unwrap();
    let mut t = fw
        .begin_tensor("coo", coo_assembler::DType::F64, &[4, 4])
        .unwrap();
    t.push(&[0, 1], 1.5f64).unwrap();
    t.push(&[3, 2], -2.0f64).unwrap();
    t.finish().unwrap();
    fw.finish().unwrap();
    let good = std::fs::read(&p).unwrap();
    let f = HurrayFile::from_bytes(good.clone()).unwrap();
    assert!(f.verify().is_empty(), "{:?}", f.verify());
    drop(f);
    // The buffers, found by their bytes.
    let find = |needle: Vec<u8>| {
        good.windows(needle.len())
            .position(|w| w == needle)
            .unwrap() as u64
    };
    let v_end = find(
        [1.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    ) + 16;
    let i_end = find(
        [0u64, 1, 3, 2]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
    ) + 32;
    // Between values and indices, and after the last buffer.
    for at in [v_end + 5, i_end + 3] {
        let mut b = good.clone();
        b[at as usize] = 0x5A;
        let bad = dir.path().join(format!("pad{at}.hrry"));
        std::fs::write(&bad, &b).unwrap();
        let f = HurrayFile::open_with(
            &bad,
            coo_assembler::read::ReadOptions {
                permissive: true,
                in_memory: false,
            },
        )
        .unwrap();
        let problems = f.verify();
        let pad: Vec<_> = problems
            .iter()
            .filter(|p| p.rule == "padding-not-zero")
            .collect();
        assert_eq!(pad.len(), 1, "{problems:?}");
        assert!(pad[0].is_error());
        assert!(pad[0].detail.contains(&format!("byte {at}")), "{}", pad[0]);
        let (code, out, _) = cli(&["verify", bad.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(&format!("byte {at}")), "{out}");
    }
}
