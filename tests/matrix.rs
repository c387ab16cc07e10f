//! Matrix products, exports and pictures (issue 10) on files written by
//! the test helper (sorted and unsorted COO, any value type).

use crate::common;

use coo_assembler::matrix::export::{ExportOptions, Format, export};
use coo_assembler::matrix::{
    BLOCK_ENTRIES, Matrix, MatrixError, MatvecOptions, NonFiniteInput, Paging, SCATTER_MIN_ENTRIES,
    SpyOptions, dense, matvec, matvec_into, spy,
};
use coo_assembler::{HurrayFile, Value, element::Element, read::ReadOptions};
use std::path::{Path, PathBuf};

/// splitmix64.
fn rand(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn unit(s: &mut u64) -> f64 {
    (rand(s) >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// Write entries (in the order given) as a file; `sorted` sets the flag.
fn write<E: Element>(
    dir: &Path,
    name: &str,
    shape: &[u64],
    entries: &[(Vec<u64>, E)],
    sorted: bool,
) -> PathBuf {
    let t = common::tensor("A", shape, entries, sorted);
    let (bytes, _) = common::build(&[t], &[], common::Opts::default());
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Distinct random coordinates with values, sorted row-major.
fn random_entries(m: u64, n: u64, k: usize, seed: u64) -> Vec<(Vec<u64>, f64)> {
    let mut s = seed;
    let mut keys: Vec<(u64, u64)> = (0..k)
        .map(|_| (rand(&mut s) % m, rand(&mut s) % n))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|(i, j)| (vec![i, j], unit(&mut s)))
        .collect()
}

/// A banded matrix: rows of 2w+1 entries around the diagonal.
fn band_entries(n: u64, w: u64, seed: u64) -> Vec<(Vec<u64>, f64)> {
    let mut s = seed;
    let mut e = Vec::new();
    for i in 0..n {
        for j in i.saturating_sub(w)..(i + w + 1).min(n) {
            e.push((vec![i, j], unit(&mut s)));
        }
    }
    e
}

/// Shuffled copy (Fisher-Yates).
fn shuffled<T: Clone>(v: &[T], seed: u64) -> Vec<T> {
    let mut s = seed;
    let mut out = v.to_vec();
    for i in (1..out.len()).rev() {
        let j = (rand(&mut s) % (i as u64 + 1)) as usize;
        out.swap(i, j);
    }
    out
}

/// Reference product in storage order, with a compensated sum per output.
fn reference(entries: &[(Vec<u64>, f64)], x: &[f64], out_len: usize, transpose: bool) -> Vec<f64> {
    let mut sum = vec![0.0f64; out_len];
    let mut comp = vec![0.0f64; out_len];
    for (ij, v) in entries {
        let (o, i) = if transpose {
            (ij[1], ij[0])
        } else {
            (ij[0], ij[1])
        };
        let (o, p) = (o as usize, v * x[i as usize]);
        // Neumaier.
        let t = sum[o] + p;
        comp[o] += if sum[o].abs() >= p.abs() {
            (sum[o] - t) + p
        } else {
            (p - t) + sum[o]
        };
        sum[o] = t;
    }
    sum.iter().zip(&comp).map(|(s, c)| s + c).collect()
}

fn close(y: &[f64], r: &[f64], entries: &[(Vec<u64>, f64)], x: &[f64], transpose: bool) {
    // Error bound per output: 1e-12 of the sum of |products|.
    let abs: Vec<(Vec<u64>, f64)> = entries.iter().map(|(i, v)| (i.clone(), v.abs())).collect();
    let ax: Vec<f64> = x.iter().map(|v| v.abs()).collect();
    let bound = reference(&abs, &ax, y.len(), transpose);
    for k in 0..y.len() {
        assert!(
            (y[k] - r[k]).abs() <= 1e-12 * bound[k],
            "y[{k}] = {} vs {}",
            y[k],
            r[k]
        );
    }
}

fn opts(threads: usize) -> MatvecOptions {
    MatvecOptions {
        threads: Some(threads),
        ..MatvecOptions::default()
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Products of sorted and unsorted files, both directions, are right and
/// bitwise identical for 1, 2, 3 and 7 threads and both paging modes.
#[test]
fn matvec_is_right_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (m, n) = (3000u64, 2500u64);
    // Enough entries for many owned blocks and several scatter blocks.
    let rnd = random_entries(m, n, 6 * SCATTER_MIN_ENTRIES, 1);
    assert!(rnd.len() > 4 * SCATTER_MIN_ENTRIES && rnd.len() > 20 * BLOCK_ENTRIES);
    let band = band_entries(20_000, 13, 2);
    let cases = [
        ("random", vec![m, n], rnd.clone(), true),
        ("random-unsorted", vec![m, n], shuffled(&rnd, 3), false),
        ("band", vec![20_000, 20_000], band.clone(), true),
        (
            "band-unsorted",
            vec![20_000, 20_000],
            shuffled(&band, 4),
            false,
        ),
    ];
    let mut s = 99u64;
    for (name, shape, entries, sorted) in cases {
        let p = write(
            dir.path(),
            &format!("{name}.hrry"),
            &shape,
            &entries,
            sorted,
        );
        let f = HurrayFile::open(&p).unwrap();
        let a = Matrix::of_file(&f, None).unwrap();
        assert_eq!(a.is_row_sorted(), sorted);
        for transpose in [false, true] {
            let (xl, yl) = if transpose {
                (shape[0], shape[1])
            } else {
                (shape[1], shape[0])
            };
            let x: Vec<f64> = (0..xl).map(|_| unit(&mut s)).collect();
            let want = reference(&entries, &x, yl as usize, transpose);
            let y1 = matvec(&a, &x, transpose, &opts(1)).unwrap();
            close(&y1, &want, &entries, &x, transpose);
            if sorted && !transpose {
                // Owned rows: entry k of a row in accumulator k mod 4,
                // combined (a0 + a1) + (a2 + a3).
                let mut acc = vec![[0.0f64; 4]; yl as usize];
                let mut pos = vec![0usize; yl as usize];
                for (ij, v) in &entries {
                    let r = ij[0] as usize;
                    acc[r][pos[r] % 4] += v * x[ij[1] as usize];
                    pos[r] += 1;
                }
                let seq: Vec<f64> = acc.iter().map(|a| (a[0] + a[1]) + (a[2] + a[3])).collect();
                assert_eq!(bits(&y1), bits(&seq), "{name}");
            }
            for t in [2, 3, 7] {
                for paging in [Paging::Keep, Paging::Stream] {
                    let o = MatvecOptions { paging, ..opts(t) };
                    let y = matvec(&a, &x, transpose, &o).unwrap();
                    assert_eq!(
                        bits(&y),
                        bits(&y1),
                        "{name} transpose={transpose} threads={t} {paging:?}"
                    );
                }
            }
            let mut y = vec![f64::NAN; yl as usize];
            matvec_into(&a, &x, &mut y, transpose, &opts(2)).unwrap();
            assert_eq!(bits(&y), bits(&y1));
        }
    }
}

#[test]
fn matvec_on_an_in_memory_copy_and_every_type() {
    let dir = tempfile::tempdir().unwrap();
    let e = random_entries(50, 40, 600, 5);
    let ints: Vec<(Vec<u64>, i16)> = e
        .iter()
        .map(|(i, v)| (i.clone(), (v * 100.0) as i16))
        .collect();
    let as_f64: Vec<(Vec<u64>, f64)> = ints.iter().map(|(i, v)| (i.clone(), *v as f64)).collect();
    let p = write(dir.path(), "i.hrry", &[50, 40], &ints, true);
    let f = HurrayFile::open_with(
        &p,
        ReadOptions {
            in_memory: true,
            ..Default::default()
        },
    )
    .unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let x: Vec<f64> = (0..40).map(|k| k as f64 - 3.5).collect();
    let y = matvec(
        &a,
        &x,
        false,
        &MatvecOptions {
            paging: Paging::Stream,
            ..opts(2)
        },
    )
    .unwrap();
    close(&y, &reference(&as_f64, &x, 50, false), &as_f64, &x, false);
}

#[test]
fn matvec_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "a.hrry",
        &[4, 3],
        &random_entries(4, 3, 8, 7),
        true,
    );
    let f = HurrayFile::open(&p).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let e = matvec(&a, &[1.0; 4], false, &opts(1)).unwrap_err();
    assert!(
        matches!(
            e,
            MatrixError::VectorLength {
                got: 4,
                expected: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("4 x 3"), "{e}");
    let e = matvec(&a, &[1.0; 3], true, &opts(1)).unwrap_err();
    assert!(e.to_string().contains("transposed"), "{e}");
    let e = matvec(&a, &[1.0, f64::INFINITY, 0.0], false, &opts(1)).unwrap_err();
    assert!(
        matches!(e, MatrixError::NonFiniteInput { position: 1, .. }),
        "{e}"
    );
    let allow = MatvecOptions {
        non_finite: NonFiniteInput::Allow,
        ..opts(1)
    };
    let y = matvec(&a, &[1.0, f64::NAN, 0.0], false, &allow).unwrap();
    assert!(y.iter().any(|v| v.is_nan()));
    let e = matvec(&a, &[1.0; 3], false, &opts(0)).unwrap_err();
    assert!(matches!(e, MatrixError::Options(_)), "{e}");
    let p3 = write(
        dir.path(),
        "t.hrry",
        &[2, 2, 2],
        &[(vec![0, 1, 1], 1.0f64)],
        true,
    );
    let f3 = HurrayFile::open(&p3).unwrap();
    let e = Matrix::of_file(&f3, None).unwrap_err();
    assert!(matches!(e, MatrixError::Rank { rank: 3, .. }), "{e}");
}

/// A file that says sorted but is not, or holds an index beyond the shape
/// (open checks structure, not content): an error, never a panic.
#[test]
fn damaged_content_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let unsorted = vec![(vec![3, 0], 1.0f64), (vec![1, 1], 2.0), (vec![0, 2], 3.0)];
    let p = write(dir.path(), "lie.hrry", &[4, 3], &unsorted, true);
    let f = HurrayFile::open_with(
        &p,
        coo_assembler::read::ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    for t in [false, true] {
        let x = vec![1.0; if t { 4 } else { 3 }];
        if let Err(e) = matvec(&a, &x, t, &opts(2)) {
            assert!(e.to_string().contains("run verify"), "{e}");
        }
    }
    let e = matvec(&a, &[1.0; 3], false, &opts(2)).unwrap_err();
    assert!(e.to_string().contains("sorted order"), "{e}");
}

#[test]
fn symmetric_mtx_check() {
    let dir = tempfile::tempdir().unwrap();
    let sym = vec![
        (vec![0, 0], 4.0f64),
        (vec![0, 2], -1.0),
        (vec![1, 1], 4.0),
        (vec![2, 0], -1.0),
        (vec![2, 2], 4.0),
        (vec![2, 3], 0.5),
        (vec![3, 2], 0.5),
    ];
    let p = write(dir.path(), "s.hrry", &[4, 4], &sym, true);
    let f = HurrayFile::open(&p).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let out = dir.path().join("s.mtx");
    let o = ExportOptions {
        symmetric: true,
        ..ExportOptions::default()
    };
    let s = export(&a, Format::Mtx, &out, &o).unwrap();
    assert_eq!(s.entries, 5);
    let text = std::fs::read_to_string(&out).unwrap();
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('%')).collect();
    assert_eq!(
        body,
        [
            "4 4 5", "1 1 4.0", "2 2 4.0", "3 1 -1.0", "3 3 4.0", "4 3 0.5"
        ]
    );

    let bad = [
        // value differs
        vec![(vec![0, 1], 1.0f64), (vec![1, 0], 2.0)],
        // mirror missing (above)
        vec![(vec![0, 1], 1.0), (vec![1, 1], 2.0)],
        // mirror missing (below)
        vec![(vec![1, 0], 1.0)],
        // an upper entry skipped by a later match: (0,1) has no (1,0), (0,2) has (2,0)
        vec![(vec![0, 1], 1.0), (vec![0, 2], 1.0), (vec![2, 0], 1.0)],
        // -0.0 vs 0.0 are different bytes
        vec![(vec![0, 1], 0.0), (vec![1, 0], -0.0)],
    ];
    for (k, entries) in bad.iter().enumerate() {
        let p = write(dir.path(), &format!("b{k}.hrry"), &[3, 3], entries, true);
        let f = HurrayFile::open(&p).unwrap();
        let a = Matrix::of_file(&f, None).unwrap();
        let out = dir.path().join(format!("b{k}.mtx"));
        let e = export(&a, Format::Mtx, &out, &o).unwrap_err();
        assert!(
            matches!(e, MatrixError::NotSymmetric { .. }),
            "case {k}: {e}"
        );
        assert!(!out.exists());
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Not square.
    let p = write(dir.path(), "r.hrry", &[2, 3], &[(vec![0, 0], 1.0f64)], true);
    let f = HurrayFile::open(&p).unwrap();
    let e = export(&Matrix::of_file(&f, None).unwrap(), Format::Mtx, &out, &o).unwrap_err();
    assert!(e.to_string().contains("not square"), "{e}");
}

#[test]
fn petsc_header_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let e = vec![(vec![0, 1], 2.5f64), (vec![2, 0], -1.0), (vec![2, 2], 3.0)];
    let p = write(dir.path(), "p.hrry", &[4, 3], &e, true);
    let f = HurrayFile::open(&p).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let out = dir.path().join("p.petsc");
    export(&a, Format::Petsc, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    let ints: Vec<i32> = b[..4 * (4 + 4 + 3)]
        .chunks_exact(4)
        .map(|c| i32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ints, [1211216, 4, 3, 3, 1, 0, 2, 0, 1, 0, 2]);
    let vals: Vec<f64> = b[44..]
        .chunks_exact(8)
        .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [2.5, -1.0, 3.0]);
    let o64 = ExportOptions {
        petsc_int64: true,
        ..ExportOptions::default()
    };
    export(&a, Format::Petsc, &out, &o64).unwrap();
    assert_eq!(
        std::fs::metadata(&out).unwrap().len(),
        8 * (4 + 4 + 3) + 8 * 3
    );
    // Unsorted: put in row order, the same bytes.
    let pu = write(dir.path(), "u.hrry", &[4, 3], &shuffled(&e, 9), false);
    let fu = HurrayFile::open(&pu).unwrap();
    let outu = dir.path().join("u.petsc");
    export(
        &Matrix::of_file(&fu, None).unwrap(),
        Format::Petsc,
        &outu,
        &o64,
    )
    .unwrap();
    assert_eq!(std::fs::read(&outu).unwrap(), std::fs::read(&out).unwrap());
    // Needs 64-bit: a shape beyond i32 (the file stays small).
    let big = write(
        dir.path(),
        "big.hrry",
        &[3_000_000_000, 5],
        &[(vec![2_999_999_999, 1], 1.0f64)],
        true,
    );
    let fb = HurrayFile::open(&big).unwrap();
    let ab = Matrix::of_file(&fb, None).unwrap();
    let err = export(&ab, Format::Petsc, &out, &ExportOptions::default()).unwrap_err();
    assert!(err.to_string().contains("--petsc-int64"), "{err}");
}

#[test]
fn dense_small_matrices_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "d.hrry",
        &[2, 3],
        &[(vec![0, 2], 7i32), (vec![1, 0], -1)],
        true,
    );
    let f = HurrayFile::open(&p).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let d = dense(&a, 10_000).unwrap();
    let v = |x: i64| Value::Int(x);
    assert_eq!(d, [v(0), v(0), v(7), v(-1), v(0), v(0)]);
    let e = dense(&a, 5).unwrap_err();
    assert!(e.to_string().contains("6 elements (2 x 3)"), "{e}");
}

/// Decode a grayscale PNG: (width, height, pixels).
fn read_png(p: &Path) -> (usize, usize, Vec<u8>) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Grayscale);
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, buf)
}

/// Diagonal, band and one dense block: the plot has ink exactly where the
/// blocks hold entries, darker where they hold more.
#[test]
fn spy_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let n = 256u64;
    let diag: Vec<(Vec<u64>, f64)> = (0..n).map(|i| (vec![i, i], 1.0)).collect();
    let band = band_entries(n, 2, 1);
    let mut block: Vec<(Vec<u64>, f64)> = Vec::new();
    for i in 64..128 {
        for j in 128..192 {
            block.push((vec![i, j], 1.0));
        }
    }
    let check = |name: &str, entries: &[(Vec<u64>, f64)], size: u32| {
        let p = write(dir.path(), &format!("{name}.hrry"), &[n, n], entries, true);
        let f = HurrayFile::open(&p).unwrap();
        let out = dir.path().join(format!("{name}.png"));
        let s = spy(
            &f,
            None,
            &out,
            &SpyOptions {
                size,
                ..SpyOptions::default()
            },
        )
        .unwrap();
        let (w, h, px) = read_png(&out);
        assert_eq!((w as u32, h as u32), (s.width, s.height));
        assert_eq!(s.caption, format!("{n} x {n}, nnz {}", entries.len()));
        // Expected count per block.
        let pb = s.per_block;
        let g = n.div_ceil(pb) as usize;
        let mut count = vec![0u32; g * g];
        for (ij, _) in entries {
            count[(ij[0] / pb) as usize * g + (ij[1] / pb) as usize] += 1;
        }
        let max = *count.iter().max().unwrap();
        assert_eq!(max, s.max_count);
        let z = s.zoom as usize;
        for by in 0..g {
            for bx in 0..g {
                let c = count[by * g + bx];
                for (dy, dx) in [(0, 0), (z - 1, z - 1)] {
                    let (x, y) = (1 + bx * z + dx, 1 + by * z + dy);
                    let shade = px[y * w + x];
                    assert_eq!(
                        shade,
                        coo_assembler::matrix::spy_shade(c, max),
                        "{name} block ({by}, {bx}) count {c}"
                    );
                    assert_eq!(shade == 255, c == 0);
                }
            }
        }
        // Frame and caption ink.
        assert_eq!(px[0], 160);
        assert!(
            px[(s.plot.1 as usize + 2) * w..].contains(&0),
            "{name}: caption"
        );
        s
    };
    let s = check("diag", &diag, 1024);
    assert_eq!((s.zoom, s.per_block), (4, 1));
    let s = check("diag-small", &diag, 64);
    assert_eq!((s.zoom, s.per_block), (1, 4));
    check("band", &band, 100);
    let s = check("block", &block, 256);
    assert_eq!(s.max_count, 1);
    // A rank-3 tensor: dimensions after the first two summed.
    let t3: Vec<(Vec<u64>, f64)> = vec![
        (vec![0, 0, 0], 1.0),
        (vec![0, 0, 1], 1.0),
        (vec![3, 1, 0], 1.0),
    ];
    let p = write(dir.path(), "t3.hrry", &[4, 4, 2], &t3, true);
    let f = HurrayFile::open(&p).unwrap();
    let s = spy(
        &f,
        None,
        &dir.path().join("t3.png"),
        &SpyOptions {
            size: 16,
            ..SpyOptions::default()
        },
    )
    .unwrap();
    assert_eq!(s.max_count, 2);
    assert!(s.caption.contains("summed"));
}

#[test]
fn vectors_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let v = vec![1.0, -0.0, f64::MIN_POSITIVE, 1e300];
    for name in ["v.npy", "v.f64"] {
        let p = dir.path().join(name);
        coo_assembler::matrix::vector::write_vector(&p, &v).unwrap();
        let back = coo_assembler::matrix::vector::read_vector(&p).unwrap();
        assert_eq!(bits(&back), bits(&v));
    }
}

/// The same contributions (with duplicates, out of order) assembled as
/// COO, CSR and CSC, in `dir`.
fn three_layouts(
    dir: &Path,
    tag: &str,
    shape: [u64; 2],
    contributions: &[(u64, u64, f64)],
) -> [PathBuf; 3] {
    use coo_assembler::{AssembleOptions, Builder, DType, options::OutputLayout};
    [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc].map(|layout| {
        let p = dir.join(format!("{tag}-{layout}.hrry"));
        let o = AssembleOptions {
            layout,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&shape, DType::F64, o).unwrap();
        for &(i, j, v) in contributions {
            b.push(&[i, j], v).unwrap();
        }
        b.finish(&p).unwrap();
        p
    })
}

/// CSR and CSC products: right, the same bytes for 1 and 2 threads, CSR
/// `A x` and `A^T x` bit for bit the COO ones (same kernels, order, blocks), and
/// with values whose sums are exact, all layouts and directions byte-equal.
#[test]
fn matvec_csr_csc_match_coo() {
    use coo_assembler::matrix::Layout;
    let dir = tempfile::tempdir().unwrap();
    let (m, n) = (3000u64, 2500u64);
    let mut s = 7u64;
    let k = 3 * SCATTER_MIN_ENTRIES;
    // Random values; and small integers (every sum exact in f64).
    let floats: Vec<(u64, u64, f64)> = (0..k)
        .map(|_| (rand(&mut s) % m, rand(&mut s) % n, unit(&mut s)))
        .collect();
    let ints: Vec<(u64, u64, f64)> = floats
        .iter()
        .map(|&(i, j, v)| (i, j, (v * 64.0).round()))
        .collect();
    for (tag, contributions) in [("floats", &floats), ("ints", &ints)] {
        let paths = three_layouts(dir.path(), tag, [m, n], contributions);
        let files: Vec<HurrayFile> = paths.iter().map(|p| HurrayFile::open(p).unwrap()).collect();
        let mats: Vec<Matrix<'_>> = files
            .iter()
            .map(|f| Matrix::of_file(f, None).unwrap())
            .collect();
        assert_eq!(mats[0].layout(), Layout::Coo { sorted: true });
        assert_eq!(mats[1].layout(), Layout::Csr);
        assert_eq!(mats[2].layout(), Layout::Csc);
        assert!(mats.iter().all(|a| a.nnz() == mats[0].nnz()));
        // The stored entries, for the reference product.
        let entries: Vec<(Vec<u64>, f64)> = mats[0]
            .tensor()
            .as_coo()
            .unwrap()
            .iter()
            .map(|(ij, v)| (ij.to_vec(), v.to_f64()))
            .collect();
        for transpose in [false, true] {
            let (xl, yl) = if transpose { (m, n) } else { (n, m) };
            let x: Vec<f64> = if tag == "ints" {
                (0..xl).map(|_| (rand(&mut s) % 33) as f64 - 16.0).collect()
            } else {
                (0..xl).map(|_| unit(&mut s)).collect()
            };
            let want = reference(&entries, &x, yl as usize, transpose);
            let ys: Vec<Vec<f64>> = mats
                .iter()
                .map(|a| {
                    let y1 = matvec(a, &x, transpose, &opts(1)).unwrap();
                    let y2 = matvec(a, &x, transpose, &opts(2)).unwrap();
                    assert_eq!(bits(&y1), bits(&y2), "{tag} {:?} {transpose}", a.layout());
                    close(&y1, &want, &entries, &x, transpose);
                    y1
                })
                .collect();
            // CSR walks the sorted COO order with the same blocks.
            assert_eq!(bits(&ys[1]), bits(&ys[0]), "{tag}: CSR vs COO {transpose}");
            if tag == "ints" {
                assert_eq!(bits(&ys[0]), bits(&want), "{tag} {transpose}");
                assert_eq!(bits(&ys[1]), bits(&ys[0]), "{tag} CSR {transpose}");
                assert_eq!(bits(&ys[2]), bits(&ys[0]), "{tag} CSC {transpose}");
            }
        }
    }
}

/// dense and the MatrixMarket export read every layout (CSR: the COO
/// export's bytes; CSC: the same lines, column-major).
#[test]
fn dense_and_mtx_of_csr_csc() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = 5u64;
    let mut c: Vec<(u64, u64, f64)> = vec![(2, 1, 1.5), (0, 3, -2.0), (2, 1, 0.25), (1, 0, 4.0)];
    // Enough for several export blocks, with empty rows and columns.
    c.extend((0..200_000).map(|_| (rand(&mut s) % 40 * 3, rand(&mut s) % 50 * 2, unit(&mut s))));
    let paths = three_layouts(dir.path(), "small", [120, 100], &c);
    let files: Vec<HurrayFile> = paths.iter().map(|p| HurrayFile::open(p).unwrap()).collect();
    let a0 = Matrix::of_file(&files[0], None).unwrap();
    let d0 = dense(&a0, 20_000).unwrap();
    assert!(matches!(d0[2 * 100 + 1], Value::Float(_)));
    let mtx0 = dir.path().join("coo.mtx");
    export(&a0, Format::Mtx, &mtx0, &ExportOptions::default()).unwrap();
    let text0 = std::fs::read_to_string(&mtx0).unwrap();
    let lines = |t: &str| {
        let mut l: Vec<String> = t.lines().skip(3).map(String::from).collect();
        l.sort();
        l
    };
    for (k, f) in files[1..].iter().enumerate() {
        let a = Matrix::of_file(f, None).unwrap();
        assert_eq!(dense(&a, 20_000).unwrap(), d0);
        let mtx = dir.path().join(format!("{k}.mtx"));
        let sum = export(&a, Format::Mtx, &mtx, &ExportOptions::default()).unwrap();
        assert_eq!(sum.entries, a0.nnz());
        let text = std::fs::read_to_string(&mtx).unwrap();
        if k == 0 {
            assert_eq!(text, text0, "CSR mtx");
        } else {
            assert_eq!(
                text.lines().take(3).collect::<Vec<_>>(),
                text0.lines().take(3).collect::<Vec<_>>()
            );
            assert_eq!(lines(&text), lines(&text0), "CSC mtx");
        }
    }
}

/// The same matrix stored four ways: sorted COO, unsorted COO, CSR, CSC.
fn four_layouts(
    dir: &Path,
    tag: &str,
    shape: [u64; 2],
    entries: &[(Vec<u64>, f64)],
) -> Vec<PathBuf> {
    let c: Vec<(u64, u64, f64)> = entries.iter().map(|(ij, v)| (ij[0], ij[1], *v)).collect();
    let mut paths = three_layouts(dir, tag, shape, &c).to_vec();
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    paths.push(write(
        dir,
        &format!("{tag}-unsorted.hrry"),
        &shape,
        &shuffled(&sorted, 11),
        false,
    ));
    paths
}

fn export_bytes(f: &HurrayFile, format: Format, o: &ExportOptions, out: &Path) -> Vec<u8> {
    let a = Matrix::of_file(f, None).unwrap();
    export(&a, format, out, o).unwrap();
    std::fs::read(out).unwrap()
}

/// npz (csr, csc), PETSc (32/64-bit indices), symmetric MatrixMarket and
/// spy from every layout: byte for byte what the sorted COO (or, for csc,
/// the CSC) file gives, with the reordering in many small bands and in one.
#[test]
fn exports_of_every_layout_agree() {
    use coo_assembler::matrix::export::NpzLayout;
    let dir = tempfile::tempdir().unwrap();
    let (m, n) = (300u64, 260u64);
    // Random entries with empty rows and columns, and a symmetric band.
    let mut rnd = random_entries(m, n, 20_000, 21);
    rnd.retain(|(ij, _)| ij[0] % 7 != 3 && ij[1] % 5 != 2);
    let mut sym: Vec<(Vec<u64>, f64)> = Vec::new();
    let mut s = 3u64;
    for i in 0..m {
        for j in 0..=i {
            if (i - j) % 9 == 0 && rand(&mut s) % 3 != 0 {
                let v = unit(&mut s);
                sym.push((vec![i, j], v));
                if i != j {
                    sym.push((vec![j, i], v));
                }
            }
        }
    }
    sym.sort_by(|a, b| a.0.cmp(&b.0));
    let small = 16 * 100; // 100 entries a band
    for (tag, shape, entries) in [("rnd", [m, n], &rnd), ("sym", [m, m], &sym)] {
        let paths = four_layouts(dir.path(), tag, shape, entries);
        let files: Vec<HurrayFile> = paths.iter().map(|p| HurrayFile::open(p).unwrap()).collect();
        for budget in [small, 0] {
            let mut cases: Vec<(Format, ExportOptions, usize)> = Vec::new();
            for layout in [NpzLayout::Csr, NpzLayout::Csc, NpzLayout::Coo] {
                let o = ExportOptions {
                    npz_layout: layout,
                    reorder_budget: budget,
                    ..ExportOptions::default()
                };
                // coo keeps the storage order: compare the reference only
                // with itself and the CSR file's (the same order).
                cases.push((Format::Npz, o, if layout == NpzLayout::Csc { 2 } else { 0 }));
            }
            for petsc_int64 in [false, true] {
                let o = ExportOptions {
                    petsc_int64,
                    reorder_budget: budget,
                    ..ExportOptions::default()
                };
                cases.push((Format::Petsc, o, 0));
            }
            if tag == "sym" {
                let o = ExportOptions {
                    symmetric: true,
                    reorder_budget: budget,
                    ..ExportOptions::default()
                };
                cases.push((Format::Mtx, o, 0));
            }
            for (format, o, reference) in cases {
                let out = |k: usize| dir.path().join(format!("{tag}-{k}.out"));
                let want = export_bytes(&files[reference], format, &o, &out(9));
                for (k, f) in files.iter().enumerate() {
                    if o.npz_layout == NpzLayout::Coo && format == Format::Npz && k > 1 {
                        continue;
                    }
                    let got = export_bytes(f, format, &o, &out(k));
                    // MatrixMarket's comment line names the tensor, which
                    // the test helper names differently from the builder.
                    let body = |b: &[u8]| {
                        if format == Format::Mtx {
                            let t = String::from_utf8(b.to_vec()).unwrap();
                            t.lines()
                                .filter(|l| !l.starts_with("% "))
                                .collect::<Vec<_>>()
                                .join("\n")
                                .into_bytes()
                        } else {
                            b.to_vec()
                        }
                    };
                    assert!(
                        body(&got) == body(&want),
                        "{tag} {format:?} {o:?} from file {k}"
                    );
                }
            }
        }
        // The picture does not depend on the layout.
        let pngs: Vec<Vec<u8>> = files
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let out = dir.path().join(format!("{tag}-{k}.png"));
                spy(f, None, &out, &SpyOptions::default()).unwrap();
                std::fs::read(out).unwrap()
            })
            .collect();
        assert!(pngs.iter().all(|p| *p == pngs[0]), "{tag} spy");
    }
    // Auto picks the stored layout: csr, csr, csc, coo (scipy's `format`).
    let paths = four_layouts(dir.path(), "auto", [m, n], &rnd);
    for (p, want) in paths.iter().zip(["csr", "csr", "csc", "coo"]) {
        let f = HurrayFile::open(p).unwrap();
        let b = export_bytes(
            &f,
            Format::Npz,
            &ExportOptions::default(),
            &dir.path().join("x.npz"),
        );
        // format.npy's data follows its local header and npy header.
        let at = b.windows(10).position(|w| w == b"format.npy").unwrap();
        let entry = &b[at..at + 200];
        assert!(
            entry.windows(3).any(|w| w == want.as_bytes()),
            "{p:?} {want}"
        );
    }
}

/// A symmetric check that fails on a CSR, CSC or unsorted COO matrix names
/// the first difference and leaves nothing behind.
#[test]
fn symmetric_refusals_on_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    type Case = (&'static str, Vec<(Vec<u64>, f64)>, &'static str);
    let cases: [Case; 3] = [
        (
            "value",
            vec![(vec![0, 1], 1.0), (vec![1, 0], 2.0), (vec![2, 2], 1.0)],
            "A[1, 0] = 2.0 but A[0, 1] = 1.0",
        ),
        (
            "upper",
            vec![(vec![0, 2], 1.0), (vec![2, 2], 1.0)],
            "has no mirror",
        ),
        (
            "lower",
            vec![(vec![2, 1], 1.0), (vec![2, 2], 1.0)],
            "A[2, 1] = 1.0 but A[1, 2] is not stored",
        ),
    ];
    let o = ExportOptions {
        symmetric: true,
        ..ExportOptions::default()
    };
    for (tag, entries, says) in cases {
        let paths = four_layouts(dir.path(), tag, [3, 3], &entries);
        for p in &paths[1..] {
            let f = HurrayFile::open(p).unwrap();
            let out = dir.path().join(format!("{tag}.mtx"));
            let e = export(&Matrix::of_file(&f, None).unwrap(), Format::Mtx, &out, &o).unwrap_err();
            assert!(matches!(e, MatrixError::NotSymmetric { .. }), "{e}");
            assert!(e.to_string().contains(says), "{tag} {p:?}: {e}");
            assert!(!out.exists());
        }
    }
    let paths = four_layouts(dir.path(), "rect", [3, 4], &[(vec![0, 1], 1.0)]);
    for p in &paths {
        let f = HurrayFile::open(p).unwrap();
        let e = export(
            &Matrix::of_file(&f, None).unwrap(),
            Format::Mtx,
            &dir.path().join("r.mtx"),
            &o,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not square"), "{e}");
    }
    // An unsorted file storing a coordinate twice: an error, not a file.
    let dup = vec![(vec![1, 1], 1.0f64), (vec![0, 0], 1.0), (vec![1, 1], 2.0)];
    let p = write(dir.path(), "dup.hrry", &[2, 2], &dup, false);
    let f = HurrayFile::open(&p).unwrap();
    let out = dir.path().join("dup.petsc");
    let e = export(
        &Matrix::of_file(&f, None).unwrap(),
        Format::Petsc,
        &out,
        &ExportOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("(1, 1) is stored twice"), "{e}");
    assert!(!out.exists());
}

/// A small archive forced into zip64 records: the same arrays, and the
/// zip64 end records are there (Python's zipfile reads it in the Python tests).
#[test]
fn npz_zip64_records_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "z.hrry",
        &[50, 40],
        &random_entries(50, 40, 300, 4),
        true,
    );
    let f = HurrayFile::open(&p).unwrap();
    let plain = export_bytes(
        &f,
        Format::Npz,
        &ExportOptions::default(),
        &dir.path().join("a.npz"),
    );
    let o = ExportOptions {
        zip64_at: 1,
        ..ExportOptions::default()
    };
    let z64 = export_bytes(&f, Format::Npz, &o, &dir.path().join("b.npz"));
    let has = |b: &[u8], sig: u32| b.windows(4).any(|w| w == sig.to_le_bytes());
    assert!(!has(&plain, 0x0606_4b50) && has(&z64, 0x0606_4b50) && has(&z64, 0x0706_4b50));
    // Local headers grow by a 20-byte zip64 extra each (6 entries), the
    // central ones by 28, and the end by the 56 + 20 byte zip64 records.
    assert_eq!(z64.len(), plain.len() + 6 * 20 + 6 * 28 + 56 + 20);
}

/// A CSR/CSC file whose pointers or minor indices were damaged after
/// writing (open checks structure, not content): a typed error from both
/// kernels, never a panic.
#[test]
fn damaged_csr_csc_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let c: Vec<(u64, u64, f64)> = (0..40).map(|k| (k % 5, (k * 3) % 7, k as f64)).collect();
    let paths = three_layouts(dir.path(), "dmg", [5, 7], &c);
    for p in &paths[1..] {
        let bytes = std::fs::read(p).unwrap();
        let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
        let t = f.only_tensor_view().unwrap().as_compressed().unwrap();
        // Offsets inside the file of pointer 2 and minor index 0.
        let (ptr_at, ind_at) = {
            let raw = &bytes;
            let find = |needle: &[u8]| raw.windows(needle.len()).position(|w| w == needle).unwrap();
            (find(t.pointers_bytes()) + 16, find(t.indices_bytes()))
        };
        let open = |b: Vec<u8>| {
            HurrayFile::from_bytes_with(
                &b,
                coo_assembler::read::ReadOptions {
                    permissive: true,
                    ..ReadOptions::default()
                },
            )
            .unwrap()
        };
        let mut broken_ptr = bytes.clone();
        broken_ptr[ptr_at..ptr_at + 8].copy_from_slice(&1000u64.to_le_bytes());
        let mut broken_ind = bytes.clone();
        broken_ind[ind_at..ind_at + 8].copy_from_slice(&99u64.to_le_bytes());
        for (what, b) in [("pointer", broken_ptr), ("index", broken_ind)] {
            let f = open(b);
            let a = Matrix::of_file(&f, None).unwrap();
            for t in [false, true] {
                let x = vec![1.0; if t { 5 } else { 7 }];
                let e = matvec(&a, &x, t, &opts(2)).unwrap_err();
                assert!(e.to_string().contains("run verify"), "{what}: {e}");
            }
        }
    }
}
