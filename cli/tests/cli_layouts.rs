//! `info`, `get`, `dump` and `verify` on COO, CSR and CSC files of the same
//! matrix, run as a process: the same answers whatever the layout (`dump`
//! always prints `i j value`, in the file's storage order), the layout
//! shown by `info`, and a broken CSR file named by rule and row.

use crate::common::s;
use coo_assembler::HurrayFile;
use coo_assembler::internals::hurray::align_up;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::{ok_text as ok, run};

/// The same contributions (duplicates summed, one row and one column
/// empty) assembled into each layout.
fn assemble_all(dir: &Path) -> [(&'static str, PathBuf); 3] {
    let input = dir.join("c.txt");
    let mut text = String::new();
    for k in 0..60u64 {
        let (i, j) = ((k * 7) % 6, (k * 5) % 8);
        // Row 6 and column 8 stay empty (shape 7 x 9).
        text.push_str(&format!("{i} {j} {}\n", k as f64 * 0.25 - 3.0));
    }
    std::fs::write(&input, text).unwrap();
    ["coo", "csr", "csc"].map(|l| {
        let out = dir.join(format!("{l}.hrry"));
        ok([
            "assemble",
            "--shape",
            "7,9",
            "--dtype",
            "f64",
            "--input",
            s(&input),
            "--format",
            "text",
            "--layout",
            l,
            "-q",
            "-o",
            s(&out),
        ]);
        (l, out)
    })
}

#[test]
fn info_get_dump_verify_agree_across_layouts() {
    let d = tempfile::tempdir().unwrap();
    let files = assemble_all(d.path());
    let coo_dump = ok(["dump", s(&files[0].1)]);
    let coo_lines: BTreeSet<&str> = coo_dump.lines().collect();
    assert!(coo_lines.len() > 20);
    let dense = ok(["dump", "--dense", s(&files[0].1)]);
    for (l, f) in &files {
        let info = ok(["info", s(f)]);
        let want = match *l {
            "coo" => "layout:      COO",
            "csr" => "layout:      CSR",
            _ => "layout:      CSC",
        };
        assert!(info.contains(want), "{l}: {info}");
        let json: serde_json::Value = serde_json::from_str(&ok(["info", "--json", s(f)])).unwrap();
        assert_eq!(json["tensors"][0]["layout"], *l);
        assert_eq!(ok(["verify", s(f)]).trim(), "OK");
        assert_eq!(ok(["dump", "--dense", s(f)]), dense, "{l}");
        // dump: i j value, the same entries; CSC in column order.
        let out = ok(["dump", s(f)]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines.iter().copied().collect::<BTreeSet<_>>(),
            coo_lines,
            "{l}"
        );
        let keys: Vec<(u64, u64)> = lines
            .iter()
            .map(|line| {
                let w: Vec<u64> = line
                    .split(' ')
                    .take(2)
                    .map(|x| x.parse().unwrap())
                    .collect();
                (w[0], w[1])
            })
            .collect();
        let mut sorted = keys.clone();
        if *l == "csc" {
            sorted.sort_by_key(|&(i, j)| (j, i));
        } else {
            sorted.sort();
        }
        assert_eq!(keys, sorted, "{l}: storage order");
        assert_eq!(ok(["dump", "--limit", "3", s(f)]).lines().count(), 3);
        // get: every element, the same as COO.
        for i in 0..7 {
            for j in 0..9 {
                let at = format!("{i},{j}");
                assert_eq!(
                    ok(["get", s(f), &at]),
                    ok(["get", s(&files[0].1), &at]),
                    "{l} {at}"
                );
            }
        }
        let o = run(["get", s(f), "7,0"]);
        assert_eq!(o.code, 2, "{l}: {}", o.stderr);
        let o = run(["get", s(f), "1"]);
        assert_eq!(o.code, 2, "{l}: {}", o.stderr);
    }
}

#[test]
fn a_broken_csr_file_is_named_by_rule_and_row() {
    let d = tempfile::tempdir().unwrap();
    let files = assemble_all(d.path());
    let csr = &files[1].1;
    let f = HurrayFile::open(csr).unwrap();
    let t = f.only_tensor_view().unwrap();
    let c = t.as_compressed().unwrap();
    let nnz = c.nnz();
    // Where row_ptr lies: after values and col_indices, each A-aligned.
    let mut bytes = std::fs::read(csr).unwrap();
    let first = {
        // data_offset is the first 4096-aligned offset after the descriptor.
        let io = f.trailer().index_offset as usize;
        let name_len = u16::from_le_bytes([bytes[io + 8], bytes[io + 9]]) as usize;
        let at = io + 8 + 2 + name_len + 8 + 4;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    };
    let ind = align_up(first + nnz * 8, 4096).unwrap();
    let ptr = align_up(ind + nnz * 8, 4096).unwrap() as usize;
    assert_eq!(
        &bytes[ptr..ptr + 8 * 8],
        first_pointers(c.pointers()).as_slice(),
        "row_ptr located"
    );
    drop(f);
    // row_ptr[2] = 0 < row_ptr[1]: row 1 has a decreasing pointer.
    bytes[ptr + 16..ptr + 24].copy_from_slice(&0u64.to_le_bytes());
    let bad = d.path().join("bad.hrry");
    std::fs::write(&bad, &bytes).unwrap();
    let o = run(["verify", s(&bad)]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.contains("[pointer-decreasing]"), "{}", o.stdout);
    assert!(o.stdout.contains("row 1:"), "{}", o.stdout);
    assert!(o.stdout.contains("[checksum-mismatch]"), "{}", o.stdout);
    assert!(o.stdout.contains("row_ptr buffer"), "{}", o.stdout);
    let o = run(["dump", s(&bad)]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("row"), "{}", o.stderr);
    let o = run(["get", s(&bad), "1,1"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("row_ptr"), "{}", o.stderr);
    // info still describes it (permissive inspection).
    assert!(ok(["info", s(&bad)]).contains("CSR"));
}

/// The first 8 pointers as file bytes.
fn first_pointers(v: &[u64]) -> Vec<u8> {
    v.iter().take(8).flat_map(|x| x.to_le_bytes()).collect()
}

/// `matvec` reads CSR and CSC (the values are quarters: every sum is
/// exact, so the bytes equal the COO product); `export --to npz` reads
/// them too (CSR: the COO file's csr arrays, byte for byte).
#[test]
fn matvec_and_export_read_csr_and_csc() {
    let d = tempfile::tempdir().unwrap();
    let files = assemble_all(d.path());
    let x = d.path().join("x.f64");
    let ones: Vec<u8> = (0..9).flat_map(|_| 1f64.to_le_bytes()).collect();
    std::fs::write(&x, ones).unwrap();
    let y_coo = d.path().join("y-coo.f64");
    ok([
        "matvec",
        s(&files[0].1),
        "--x",
        s(&x),
        "--out",
        s(&y_coo),
        "-q",
    ]);
    let want = std::fs::read(&y_coo).unwrap();
    for (l, f) in &files[1..] {
        let y = d.path().join(format!("y-{l}.f64"));
        ok(["matvec", s(f), "--x", s(&x), "--out", s(&y), "-q"]);
        assert_eq!(std::fs::read(&y).unwrap(), want, "{l}");
        let npz = d.path().join(format!("{l}.npz"));
        ok([
            "export",
            s(f),
            "--to",
            "npz",
            "--npz-layout",
            "csr",
            s(&npz),
            "-q",
        ]);
        let coo = d.path().join("coo.npz");
        ok(["export", s(&files[0].1), "--to", "npz", s(&coo), "-q"]);
        assert_eq!(
            std::fs::read(&npz).unwrap(),
            std::fs::read(&coo).unwrap(),
            "{l}"
        );
    }
}

/// A FROSTT `.tns` file (1-based, its shape found from its indices) into
/// CSF in a mode order; `info` names the layout and the mode order,
/// `get`, `dump` and `verify` read it, and `convert` gives back the COO
/// the same input assembles into.
#[test]
fn tns_input_into_csf_and_back() {
    let d = tempfile::tempdir().unwrap();
    let tns = d.path().join("t.tns");
    let mut text = String::from("# i j k value\n");
    for k in 0..300u64 {
        text.push_str(&format!(
            "{} {} {} {}\n",
            k % 5 + 1,
            (k * 7) % 11 + 1,
            (k * 3) % 4 + 1,
            k as f64 * 0.5
        ));
    }
    std::fs::write(&tns, text).unwrap();
    let csf = d.path().join("csf.hrry");
    ok([
        "assemble",
        "--input",
        s(&tns),
        "--layout",
        "csf",
        "--mode-order",
        "2,0,1",
        "-q",
        "-o",
        s(&csf),
    ]);
    let info = ok(["info", "--json", s(&csf)]);
    assert!(
        info.contains("\"layout\": \"csf\"") || info.contains("\"layout\":\"csf\""),
        "{info}"
    );
    assert!(info.contains("mode_order"), "{info}");
    assert!(info.contains("[5,11,4]") || info.contains("5,\n"), "{info}");
    assert_eq!(ok(["verify", s(&csf)]).trim(), "OK");
    // Entry (1, 1, 1) 1-based is (0, 0, 0): k = 0 and k = 220 (k % 5 = 0,
    // 7k % 11 = 0, 3k % 4 = 0), 0.0 + 110.0.
    assert_eq!(ok(["get", s(&csf), "0,0,0"]).trim(), "110.0");
    let coo = d.path().join("coo.hrry");
    ok(["assemble", "--input", s(&tns), "-q", "-o", s(&coo)]);
    let back = d.path().join("back.hrry");
    ok(["convert", s(&csf), s(&back), "--to", "coo"]);
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&coo).unwrap());
    let dumped = ok(["dump", s(&csf)]);
    assert_eq!(
        dumped.lines().count(),
        HurrayFile::open(&coo)
            .unwrap()
            .only_tensor_view()
            .unwrap()
            .nnz() as usize
    );
    // A mode order that is not a permutation, and CSF below rank 3.
    run([
        "assemble",
        "--input",
        s(&tns),
        "--layout",
        "csf",
        "--mode-order",
        "0,0,1",
        "-q",
        "-o",
        s(&csf),
    ])
    .fails(2, &["not a permutation"]);
}
