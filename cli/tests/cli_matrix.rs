//! The matrix subcommands of the CLI: matvec, export, spy, dump --dense.

use crate::common::s;
use coo_assembler::HurrayFile;
use coo_assembler::matrix::{Matrix, MatvecOptions, matvec, vector};
use std::path::{Path, PathBuf};

use crate::{fails_with as fails, ok_text as ok};

/// A banded n x n matrix with a few off-band entries, assembled by the CLI.
fn assemble(dir: &Path, n: u64) -> PathBuf {
    let mut text = String::new();
    for i in 0..n {
        for j in i.saturating_sub(2)..(i + 3).min(n) {
            text.push_str(&format!("{i} {j} {}\n", 1.0 / (1 + i + 2 * j) as f64));
        }
    }
    text.push_str(&format!("0 {} 7.5\n", n - 1));
    let input = dir.join("a.txt");
    std::fs::write(&input, text).unwrap();
    let out = dir.join("a.hrry");
    let shape = format!("{n},{n}");
    ok([
        "assemble",
        "--shape",
        &shape,
        "--input",
        s(&input),
        "--format",
        "text",
        "--output",
        s(&out),
        "-q",
    ]);
    out
}

#[test]
fn matvec_cli_matches_the_library_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let a = assemble(dir.path(), 300_000);
    let x: Vec<f64> = (0..300_000).map(|k| (k % 17) as f64 - 8.25).collect();
    let xp = dir.path().join("x.npy");
    vector::write_vector(&xp, &x).unwrap();
    let f = HurrayFile::open(&a).unwrap();
    let m = Matrix::of_file(&f, None).unwrap();
    for transpose in [false, true] {
        let want = matvec(&m, &x, transpose, &MatvecOptions::default()).unwrap();
        for (threads, ext) in [("1", "npy"), ("3", "f64")] {
            let yp = dir.path().join(format!("y.{ext}"));
            let mut args = vec![
                "matvec",
                s(&a),
                "--x",
                s(&xp),
                "--out",
                s(&yp),
                "--threads",
                threads,
                "-q",
            ];
            if transpose {
                args.push("--transpose");
            }
            ok(&args);
            let y = vector::read_vector(&yp).unwrap();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&y),
                bits(&want),
                "transpose={transpose} threads={threads}"
            );
        }
    }
    let short = dir.path().join("short.f64");
    std::fs::write(&short, [0u8; 16]).unwrap();
    let out = dir.path().join("bad.npy");
    fails(
        ["matvec", s(&a), "--x", s(&short), "--out", s(&out)],
        1,
        "x has 2 elements; the product needs 300000",
    );
    assert!(!out.exists());
    let nan = dir.path().join("nan.f64");
    let mut b = vec![0u8; 300_000 * 8];
    b[8 * 5..8 * 6].copy_from_slice(&f64::NAN.to_le_bytes());
    std::fs::write(&nan, &b).unwrap();
    fails(
        ["matvec", s(&a), "--x", s(&nan), "--out", s(&out)],
        1,
        "x[5] = NaN is not finite",
    );
    ok([
        "matvec",
        s(&a),
        "--x",
        s(&nan),
        "--out",
        s(&out),
        "--non-finite",
        "allow",
        "-q",
    ]);
    fails(
        [
            "matvec",
            s(&a),
            "--x",
            s(&xp),
            "--out",
            s(&out),
            "--paging",
            "sometimes",
        ],
        2,
        "unknown paging mode \"sometimes\"; use one of auto, stream, keep",
    );
}

#[test]
fn export_spy_and_dense() {
    let dir = tempfile::tempdir().unwrap();
    let a = assemble(dir.path(), 40);
    let mtx = dir.path().join("a.mtx");
    ok(["export", s(&a), "--to", "mtx", s(&mtx), "-q"]);
    let text = std::fs::read_to_string(&mtx).unwrap();
    assert!(text.starts_with("%%MatrixMarket matrix coordinate real general\n"));
    assert!(text.contains("\n40 40 195\n"), "{text}");
    assert!(text.contains("\n1 40 7.5\n"));
    // Not symmetric (values and the corner entry): refused, nothing written.
    let sym = dir.path().join("s.mtx");
    fails(
        ["export", s(&a), "--to", "mtx", s(&sym), "--symmetric"],
        1,
        "not symmetric",
    );
    assert!(!sym.exists());
    fails(
        ["export", s(&a), "--to", "npz", s(&sym), "--symmetric"],
        2,
        "MatrixMarket option",
    );
    let npz = dir.path().join("a.npz");
    ok(["export", s(&a), "--to", "npz", s(&npz), "-q"]);
    assert_eq!(&std::fs::read(&npz).unwrap()[..4], b"PK\x03\x04");
    let petsc = dir.path().join("a.petsc");
    ok([
        "export",
        s(&a),
        "--to",
        "petsc",
        s(&petsc),
        "--petsc-int64",
        "-q",
    ]);
    let b = std::fs::read(&petsc).unwrap();
    assert_eq!(i64::from_be_bytes(b[..8].try_into().unwrap()), 1211216);
    assert_eq!(b.len(), 8 * (4 + 40 + 195) + 8 * 195);
    let png = dir.path().join("a.png");
    ok(["spy", s(&a), "--out", s(&png), "--size", "200", "-q"]);
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    fails(
        ["spy", s(&a), "--out", s(&png), "--size", "8"],
        2,
        "picture size 8",
    );

    let d = ok(["dump", s(&a), "--dense"]);
    let rows: Vec<&str> = d.lines().collect();
    assert_eq!(rows.len(), 40);
    assert_eq!(rows[0].split_whitespace().count(), 40);
    assert_eq!(rows[0].split_whitespace().last(), Some("7.5"));
    assert_eq!(rows[39].split_whitespace().next(), Some("0.0"));
    let big = assemble(dir.path(), 101);
    fails(
        ["dump", s(&big), "--dense"],
        1,
        "10201 elements (101 x 101), more than the limit of 10000",
    );
}

/// `matvec` on CSR and CSC files gives the COO file's product (the values
/// are small integers: every sum is exact whatever the order); `export`
/// (mtx, npz, PETSc) and `spy` of CSR and CSC files give the COO file's bytes.
#[test]
fn matvec_cli_on_csr_and_csc() {
    let dir = tempfile::tempdir().unwrap();
    let n = 5000u64;
    let mut text = String::new();
    for i in 0..n {
        for j in [i, (i * 7 + 3) % n, (i * 13 + 1) % n] {
            text.push_str(&format!("{i} {j} {}\n", (i + 2 * j) % 9));
        }
    }
    let input = dir.path().join("a.txt");
    std::fs::write(&input, text).unwrap();
    let shape = format!("{n},{n}");
    let files: Vec<PathBuf> = ["coo", "csr", "csc"]
        .iter()
        .map(|layout| {
            let out = dir.path().join(format!("a-{layout}.hrry"));
            ok([
                "assemble",
                "--shape",
                &shape,
                "--input",
                s(&input),
                "--format",
                "text",
                "--layout",
                layout,
                "--output",
                s(&out),
                "-q",
            ]);
            out
        })
        .collect();
    let x: Vec<f64> = (0..n).map(|k| (k % 11) as f64 - 5.0).collect();
    let xp = dir.path().join("x.f64");
    vector::write_vector(&xp, &x).unwrap();
    for transpose in [false, true] {
        let mut outs = Vec::new();
        for (k, f) in files.iter().enumerate() {
            let yp = dir.path().join(format!("y{k}.npy"));
            let mut args = vec!["matvec", s(f), "--x", s(&xp), "--out", s(&yp), "-q"];
            if transpose {
                args.push("--transpose");
            }
            ok(&args);
            outs.push(std::fs::read(&yp).unwrap());
        }
        assert_eq!(outs[1], outs[0], "CSR transpose={transpose}");
        assert_eq!(outs[2], outs[0], "CSC transpose={transpose}");
        let y = vector::read_vector(dir.path().join("y0.npy")).unwrap();
        assert!(y.iter().any(|v| *v != 0.0));
    }
    let (m0, m1) = (dir.path().join("coo.mtx"), dir.path().join("csr.mtx"));
    ok(["export", s(&files[0]), "--to", "mtx", s(&m0), "-q"]);
    ok(["export", s(&files[1]), "--to", "mtx", s(&m1), "-q"]);
    assert_eq!(std::fs::read(&m1).unwrap(), std::fs::read(&m0).unwrap());
    // npz, PETSc and spy read CSR/CSC too: the same files as from COO.
    for (to, ext) in [("npz", "npz"), ("petsc", "petsc")] {
        let outs: Vec<Vec<u8>> = files
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let out = dir.path().join(format!("a{k}.{ext}"));
                ok([
                    "export",
                    s(f),
                    "--to",
                    to,
                    "--npz-layout",
                    "csr",
                    s(&out),
                    "-q",
                ]);
                std::fs::read(&out).unwrap()
            })
            .collect();
        assert!(outs[1] == outs[0] && outs[2] == outs[0], "{to}");
    }
    let pngs: Vec<Vec<u8>> = files
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let out = dir.path().join(format!("a{k}.png"));
            ok(["spy", s(f), "--out", s(&out), "--size", "64", "-q"]);
            std::fs::read(&out).unwrap()
        })
        .collect();
    assert!(pngs[1] == pngs[0] && pngs[2] == pngs[0], "spy");
}

/// A complex matrix, or a complex x (.npy complex128), gives a complex128
/// y.npy: the library's complex product, bit for bit; a .f64 output is
/// refused for it, and nothing is written.
#[test]
fn matvec_cli_multiplies_complex_matrices_and_vectors() {
    use coo_assembler::matrix::matvec_complex;
    use coo_assembler::{AssembleOptions, Builder, DType, element::Complex};
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[3, 3], DType::C128, AssembleOptions::default()).unwrap();
    for (i, j, re, im) in [
        (0u64, 0u64, 1.5, -0.5),
        (0, 2, 0.25, 2.0),
        (2, 1, -3.0, 0.125),
    ] {
        b.push(&[i, j], Complex::new(re, im)).unwrap();
    }
    let a = dir.path().join("z.hrry");
    b.finish(&a).unwrap();
    let mut npy = vector::npy_header("<c16", &[3]);
    let x: [Complex<f64>; 3] = [
        Complex::new(0.5, 1.0),
        Complex::new(-2.0, 0.0),
        Complex::new(0.0, 3.0),
    ];
    for v in &x {
        npy.extend(v.re.to_le_bytes());
        npy.extend(v.im.to_le_bytes());
    }
    let xp = dir.path().join("x.npy");
    std::fs::write(&xp, &npy).unwrap();
    let f = HurrayFile::open(&a).unwrap();
    let m = Matrix::of_file(&f, None).unwrap();
    for transpose in [false, true] {
        let yp = dir.path().join("y.npy");
        let mut args = vec!["matvec", s(&a), "--x", s(&xp), "--out", s(&yp), "-q"];
        if transpose {
            args.push("--transpose");
        }
        ok(&args);
        let want = matvec_complex(&m, &x, transpose, &MatvecOptions::default()).unwrap();
        let bytes = std::fs::read(&yp).unwrap();
        let header = String::from_utf8_lossy(&bytes[..64]).into_owned();
        assert!(header.contains("'descr': '<c16'"), "{header}");
        let got: Vec<Complex<f64>> = bytes[bytes.len() - 48..]
            .chunks_exact(16)
            .map(|c| {
                Complex::new(
                    f64::from_le_bytes(c[..8].try_into().unwrap()),
                    f64::from_le_bytes(c[8..].try_into().unwrap()),
                )
            })
            .collect();
        assert_eq!(got, want, "transpose={transpose}");
    }
    // A real x against the complex matrix is a complex product too.
    let xr = dir.path().join("xr.npy");
    vector::write_vector(&xr, &[1.0, 2.0, 3.0]).unwrap();
    let yp = dir.path().join("yr.npy");
    ok(["matvec", s(&a), "--x", s(&xr), "--out", s(&yp), "-q"]);
    let err = vector::read_vector(&yp).unwrap_err().to_string();
    assert!(err.contains("holds complex values"), "{err}");
    let raw = dir.path().join("y.f64");
    fails(
        ["matvec", s(&a), "--x", s(&xp), "--out", s(&raw)],
        1,
        "name it .npy (complex128)",
    );
    assert!(!raw.exists());
    // The command refuses those outputs before the product: the library's
    // check, which it calls first, needs no y.
    let xf = vector::VectorFile::read(&xp).unwrap();
    let err = vector::check_product_output(&raw, true, &m, &xf).unwrap_err();
    assert!(err.to_string().contains("name it .npy"), "{err}");
    vector::check_product_output(&raw, false, &m, &xf).unwrap();
    vector::check_product_output(dir.path().join("y2.npy"), true, &m, &xf).unwrap();
    let err = vector::check_product_output(&xp, true, &m, &xf).unwrap_err();
    assert_eq!(err.kind(), coo_assembler::ErrorKind::Argument, "{err}");
    assert!(!raw.exists() && !dir.path().join("y2.npy").exists());
}
