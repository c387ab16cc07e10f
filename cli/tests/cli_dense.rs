//! The command line on files that hold dense tensors (issue 22): `info`
//! lists every tensor with its layout, `verify` checks the container and
//! says what it checked of each dense tensor, the commands that read
//! entries refuse a dense tensor naming its layout and what they serve,
//! the COO matrix beside it works as usual, and `matvec --x FILE:TENSOR`
//! takes a rank-1 dense tensor as x.

use crate::common;
use crate::common::s;

use common::mixed;

use crate::{ok_text as ok, run};

#[test]
fn info_lists_every_tensor_with_its_layout() {
    let d = tempfile::tempdir().unwrap();
    let basic = d.path().join("basic.hrry");
    std::fs::write(&basic, mixed::basic()).unwrap();
    let out = ok(["info", s(&basic)]);
    assert!(out.contains("Hurray file, 2 tensors"), "{out}");
    assert!(out.contains("tensor \"weights\"\n  type:        f32\n  shape:       2 x 2 (4 elements)\n  stored:      every element, 16 B\n  layout:      dense row-major: "), "{out}");
    assert!(
        out.contains("tensor \"bias\"\n  type:        i8\n  shape:       3 (3 elements)"),
        "{out}"
    );
    assert!(out.contains("producer = hurray-conformance"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok(["info", "--json", s(&basic)])).unwrap();
    let w = &json["tensors"][0];
    assert_eq!(
        (&w["name"], &w["layout"], &w["layout_kind"], &w["dtype"]),
        (
            &"weights".into(),
            &"row-major".into(),
            &"dense".into(),
            &"f32".into()
        )
    );
    assert_eq!(w["shape"], serde_json::json!([2, 2]));
    assert_eq!((&w["data_bytes"], &w["read"]), (&16.into(), &false.into()));
    assert_eq!(json["tensors"][1]["data_bytes"], 3);

    let mixed_path = d.path().join("mixed.hrry");
    std::fs::write(&mixed_path, mixed::mixed()).unwrap();
    let out = ok(["info", s(&mixed_path)]);
    assert!(out.contains("Hurray file, 5 tensors"), "{out}");
    assert!(out.contains("tensor \"K\"\n  type:        f64\n  shape:       3 x 3 (9 elements)\n  stored:      3 entries"), "{out}");
    assert!(out.contains("layout:      dense column-major: "), "{out}");
    let v = ok(["info", "-v", s(&mixed_path)]);
    assert!(
        v.contains(
            "buffers:     values 16 B at byte 4096 (layout tag 0x01, element type tag 0x03)"
        ),
        "{v}"
    );
}

#[test]
fn verify_checks_the_container_and_says_what_it_checked() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("mixed.hrry");
    std::fs::write(&p, mixed::mixed()).unwrap();
    let out = ok(["verify", s(&p)]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("note: container checked: header, trailer, index"),
        "{out}"
    );
    assert!(out.contains("note: tensor \"weights\" (f32, 2 x 2) is dense row-major: its descriptor and its buffer were checked (16 bytes at byte 4096, inside the file, aligned, holding the 16 bytes"), "{out}");
    assert!(
        out.contains("note: tensor \"K\" carries no stored checksums"),
        "{out}"
    );
    assert_eq!(lines.last(), Some(&"OK"), "{out}");
    let one = ok(["verify", s(&p), "--tensor", "bias"]);
    assert!(
        one.contains("tensor \"bias\" (i8, 3) is dense row-major"),
        "{one}"
    );
    assert!(!one.contains("\"weights\""), "{one}");
    // A damaged dense buffer size is an invalid file, exit 1.
    let mut b = mixed::mixed();
    b[64 + 45..64 + 53].copy_from_slice(&8u64.to_le_bytes());
    let bad = d.path().join("bad.hrry");
    std::fs::write(&bad, b).unwrap();
    let o = run(["verify", s(&bad)]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("values byte_size 8 is not at least"),
        "{}",
        o.stderr
    );
}

#[test]
fn commands_on_a_dense_tensor_name_its_layout() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("mixed.hrry");
    std::fs::write(&p, mixed::mixed()).unwrap();
    let out_mtx = d.path().join("w.mtx");
    let out_png = d.path().join("w.png");
    let out_y = d.path().join("y.npy");
    let x = d.path().join("x.f64");
    std::fs::write(&x, [0u8; 16]).unwrap();
    let cases: [(&str, Vec<&str>); 6] = [
        ("dump", vec!["dump", s(&p), "--tensor", "weights"]),
        (
            "dump",
            vec!["dump", "--dense", s(&p), "--tensor", "weights"],
        ),
        ("get", vec!["get", s(&p), "0,0", "--tensor", "weights"]),
        (
            "matvec",
            vec![
                "matvec",
                s(&p),
                "--tensor",
                "weights",
                "--x",
                s(&x),
                "--out",
                s(&out_y),
            ],
        ),
        (
            "export",
            vec![
                "export",
                s(&p),
                "--tensor",
                "weights",
                "--to",
                "mtx",
                s(&out_mtx),
            ],
        ),
        (
            "spy",
            vec!["spy", s(&p), "--tensor", "weights", "--out", s(&out_png)],
        ),
    ];
    for (cmd, args) in cases {
        let o = run(&args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        let want = format!("tensor \"weights\" is dense row-major; {cmd} serves COO, CSR and CSC");
        assert!(o.stderr.contains(&want), "{args:?}: {}", o.stderr);
    }
    let conv = d.path().join("c.hrry");
    let o = run([
        "convert",
        s(&p),
        s(&conv),
        "--to",
        "csr",
        "--tensor",
        "cols",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("tensor \"cols\" is dense column-major; convert serves COO, CSR and CSC"),
        "{}",
        o.stderr
    );
    for out in [&out_mtx, &out_png, &out_y, &conv] {
        assert!(!out.exists(), "{}", out.display());
    }
    // Without --tensor: a file of several tensors asks for one (exit 2).
    let o = run(["dump", s(&p)]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--tensor NAME"), "{}", o.stderr);
    // The only tensor of a file, dense: refused by name, not "choose one".
    let one = d.path().join("one.hrry");
    std::fs::write(
        &one,
        common::reference::write(&[(
            "v",
            &common::reference::descriptor(
                coo_assembler::DType::F64,
                &[2],
                hurray_core::LayoutDescriptor::RowMajor,
                &[&[0u8; 16]],
                None,
            ),
            &[&[0u8; 16]],
        )]),
    )
    .unwrap();
    let o = run(["get", s(&one), "0"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("tensor \"v\" is dense row-major; get serves COO, CSR and CSC"),
        "{}",
        o.stderr
    );
}

#[test]
fn the_coo_matrix_beside_dense_tensors_works() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("mixed.hrry");
    std::fs::write(&p, mixed::mixed()).unwrap();
    assert_eq!(ok(["get", s(&p), "1,2", "--tensor", "K"]).trim(), "-1.0");
    assert_eq!(ok(["dump", s(&p), "--tensor", "K"]).lines().count(), 3);
    assert!(ok(["verify", s(&p), "--tensor", "K"]).ends_with("OK\n"));
    // x from the file's own rank-1 dense tensor: y = K x.
    let y = d.path().join("y.f64");
    let x = format!("{}:x", s(&p));
    ok([
        "matvec",
        s(&p),
        "--tensor",
        "K",
        "--x",
        &x,
        "--out",
        s(&y),
        "-q",
    ]);
    let got: Vec<f64> = std::fs::read(&y)
        .unwrap()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, [2.0, -3.0, 1.0]);
    // A tensor that is not a rank-1 dense one is refused by name.
    for (name, want) in [
        ("weights", "has shape [2, 2]: a vector is a rank-1 tensor"),
        ("K", "tensor \"K\" is sparse COO"),
        ("nope", "no tensor named \"nope\""),
    ] {
        let x = format!("{}:{name}", s(&p));
        let o = run(["matvec", s(&p), "--tensor", "K", "--x", &x, "--out", s(&y)]);
        assert_ne!(o.code, 0);
        assert!(o.stderr.contains(want), "{name}: {}", o.stderr);
    }
}
