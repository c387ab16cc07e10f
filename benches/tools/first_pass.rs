//! Timing of the first and later whole passes over an open file (issue 22:
//! the first pass checks the stored checksums, later ones reuse the
//! verdict). Public API only, so the same file runs against an older
//! checkout for the "before" numbers.
//!
//! ```text
//! cargo run --release -p coo-assembler-benches --example first_pass -- [NNZ] [ROWS] [REPEATS]
//! ```
//!
//! Assembles a random f64 matrix of NNZ entries (default 20 M) over ROWS
//! rows (default 1 M) into a temporary sorted COO file, then for each of
//! REPEATS fresh opens (default 5) times the first and the second
//! `matvec`, and the first and second export to `.npz`. Prints the median
//! of each, and a conversion to CSR. The baseline "unchecked" is the same tensor written without
//! stored checksums (as another writer's file, which is read as before
//! issue 22), timed on fresh opens in the same rounds: the first pass's
//! price is `first / unchecked first`.

use coo_assembler::matrix::export::{ExportOptions, Format, export};
use coo_assembler::matrix::{Matrix, MatvecOptions, matvec};
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{
    AssembleOptions, Builder, DType, HurrayFile, convert, convert::ConvertOptions,
    options::OutputLayout,
};
use std::time::Instant;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (nnz, rows, reps) = (arg(1, 20_000_000), arg(2, 1_000_000), arg(3, 5) as usize);
    let cols = rows;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("A.hrry");
    let mut b = Builder::new(&[rows, cols], DType::F64, AssembleOptions::default())?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for k in 0..nnz {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.push(&[k % rows, x % cols], (x >> 11) as f64 * 1e-15)?;
    }
    let s = b.finish(&path)?;
    println!(
        "file: {} entries, {} rows, {:.1} MiB",
        s.nnz,
        rows,
        s.file_bytes as f64 / (1 << 20) as f64
    );
    // The same tensor without stored checksums: the unchecked baseline.
    let plain = dir.path().join("A-unchecked.hrry");
    {
        let f = HurrayFile::open(&path)?;
        let t = f.only_tensor()?;
        let opts = WriteOptions {
            checksums: false,
            ..WriteOptions::default()
        };
        let mut fw = FileWriter::create(&plain, opts)?;
        let mut tw = fw.begin_tensor(t.name(), t.dtype(), t.shape())?;
        for (i, v) in t.iter() {
            tw.push_value(i, v)?;
        }
        tw.finish()?;
        fw.finish()?;
    }
    let xs: Vec<f64> = (0..cols).map(|j| 1.0 + (j % 7) as f64).collect();
    let o = MatvecOptions::default();
    let (mut m1, mut m2, mut e1, mut e2) = (vec![], vec![], vec![], vec![]);
    let (mut u1, mut u2, mut ue1) = (vec![], vec![], vec![]);
    let out = dir.path().join("A.npz");
    for _ in 0..reps {
        let f = HurrayFile::open(&plain)?;
        let a = Matrix::of_file(&f, None)?;
        assert_eq!(a.tensor().stored_checksums(), 0);
        let t = Instant::now();
        matvec(&a, &xs, false, &o)?;
        u1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        matvec(&a, &xs, false, &o)?;
        u2.push(t.elapsed().as_secs_f64());
        drop(f);
        let f = HurrayFile::open(&plain)?;
        let a = Matrix::of_file(&f, None)?;
        let t = Instant::now();
        export(&a, Format::Npz, &out, &ExportOptions::default())?;
        ue1.push(t.elapsed().as_secs_f64());
        drop(f);
        let f = HurrayFile::open(&path)?;
        let a = Matrix::of_file(&f, None)?;
        let t = Instant::now();
        let y1 = matvec(&a, &xs, false, &o)?;
        m1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let y2 = matvec(&a, &xs, false, &o)?;
        m2.push(t.elapsed().as_secs_f64());
        assert_eq!(y1, y2);
        drop(f);
        let f = HurrayFile::open(&path)?;
        let a = Matrix::of_file(&f, None)?;
        for times in [&mut e1, &mut e2] {
            let t = Instant::now();
            export(&a, Format::Npz, &out, &ExportOptions::default())?;
            times.push(t.elapsed().as_secs_f64());
        }
    }
    // The checksum alone on a fresh open (absent before issue 22).
    let mut h = vec![];
    for _ in 0..reps {
        let f = HurrayFile::open(&path)?;
        let t = Instant::now();
        f.only_tensor_view()?.check_checksums()?;
        h.push(t.elapsed().as_secs_f64());
    }
    let mut after = vec![];
    for _ in 0..reps {
        let f = HurrayFile::open(&path)?;
        f.only_tensor_view()?.check_checksums()?;
        let a = Matrix::of_file(&f, None)?;
        let t = Instant::now();
        matvec(&a, &xs, false, &o)?;
        after.push(t.elapsed().as_secs_f64());
    }
    println!(
        "checksums alone: {:.1} ms; then the first matvec {:.1} ms",
        median(h) * 1e3,
        median(after) * 1e3
    );
    let ms = |v: Vec<f64>| median(v) * 1e3;
    let (m1, m2, u1, u2) = (ms(m1), ms(m2), ms(u1), ms(u2));
    println!(
        "matvec: first {m1:.1} ms, second {m2:.1} ms; unchecked first {u1:.1} ms, second {u2:.1} ms (median of {reps} fresh opens): first / unchecked first {:.2}x, second / unchecked second {:.2}x",
        m1 / u1,
        m2 / u2
    );
    let (e1, e2, ue1) = (ms(e1), ms(e2), ms(ue1));
    println!(
        "export npz: first {e1:.1} ms, second {e2:.1} ms; unchecked first {ue1:.1} ms: first / unchecked {:.2}x",
        e1 / ue1
    );
    // convert opens the file itself: every call is a first pass.
    let (mut c1, mut uc1) = (vec![], vec![]);
    let csr = ConvertOptions {
        to: OutputLayout::Csr,
        ..ConvertOptions::default()
    };
    let out = dir.path().join("A.csr.hrry");
    for _ in 0..reps.min(3) {
        for (src, times) in [(&path, &mut c1), (&plain, &mut uc1)] {
            let t = Instant::now();
            convert(src, &out, &csr)?;
            times.push(t.elapsed().as_secs_f64());
        }
    }
    let (c1, uc1) = (ms(c1), ms(uc1));
    println!(
        "convert to csr: {c1:.1} ms; unchecked {uc1:.1} ms: {:.2}x",
        c1 / uc1
    );
    Ok(())
}
