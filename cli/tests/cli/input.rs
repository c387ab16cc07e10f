//! Input and command-line items of issue 8: the user's numbering in
//! messages, bytes in comments, compressed, CR-only and BOM input, dense
//! MatrixMarket and .npy input, bin layout hints, empty input, output over
//! input, readable numbers, and the small messages.

use super::*;
use std::io::Write as _;

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// An .npy file (format 1.0) with this header and data.
fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let order = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    v.extend(data);
    v
}

const SYM: &str = "%%MatrixMarket matrix coordinate real symmetric\n% caf\u{e9}\n3 3 3\n1 1 4.0\n2 1 -1.5\n3 3 2\n";

fn sym_entries() -> Vec<(Vec<u64>, Value)> {
    fl(&[
        (&[0, 0], 4.0),
        (&[0, 1], -1.5),
        (&[1, 0], -1.5),
        (&[2, 2], 2.0),
    ])
}

// Item 3: indices as the file wrote them, with the line; mirrors named.
#[test]
fn mtx_errors_use_the_files_numbering() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let i = w.input(
        "r.mtx",
        b"%%MatrixMarket matrix coordinate real general\n5 5 2\n1 1 1.0\n6 1 1.0\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(
        1,
        &["r.mtx:line 4", "row 6 is out of range", "5 rows", "1-based"],
    );
    w.clean(&[]);
    // A duplicate from mirroring: both lines, 1-based, the mirror named.
    let i = w.input(
        "d.mtx",
        b"%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1.0\n1 2 1.0\n",
    );
    let o = w.assemble(s(&i), &out, &["-q", "--duplicates", "error"]);
    o.fails(
        1,
        &[
            "d.mtx: duplicate",
            "at (1, 2) (1-based",
            "line 3 (mirrored)",
            "line 4",
        ],
    );
    w.clean(&[]);
    // Integer overflow names the coordinate and lines the same way.
    let i = w.input(
        "o.mtx",
        b"%%MatrixMarket matrix coordinate integer general\n2 2 2\n2 1 100\n2 1 100\n",
    );
    let o = w.assemble(s(&i), &out, &["-q", "--dtype", "i8"]);
    o.fails(
        1,
        &[
            "o.mtx: integer overflow",
            "does not fit i8",
            "at (2, 1) (1-based",
            "line 3, line 4",
        ],
    );
    // Said once, in the file's numbering only (not again as the merge's
    // 0-based coordinate).
    assert_eq!(
        o.stderr.matches("does not fit i8").count(),
        1,
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("coordinate [1, 0]"), "{}", o.stderr);
    w.clean(&[]);
    // Text input is 0-based, and says so.
    let i = w.input("d.txt", b"0 1 1.0\n# c\n0 1 2.0\n");
    let o = w.assemble(
        s(&i),
        &out,
        &[
            "-q",
            "--format",
            "text",
            "--shape",
            "2,2",
            "--duplicates",
            "error",
        ],
    );
    o.fails(1, &["at (0, 1) (0-based", "line 1, line 3"]);
    w.clean(&[]);
}

// Items 4 and 6: comments are bytes; CR-only ends and a BOM are fine.
#[test]
fn comments_hold_any_bytes_and_line_ends_vary() {
    let w = Work::new();
    let out = w.out("o.hrry");
    // A Latin-1 é (one byte, not UTF-8) in the header comment.
    let bytes: Vec<u8> = SYM
        .replace('\u{e9}', "\u{1}")
        .bytes()
        .map(|b| if b == 1 { 0xE9 } else { b })
        .collect();
    for (name, data) in [
        ("latin1.mtx", bytes.clone()),
        (
            "cr.mtx",
            bytes
                .iter()
                .map(|&b| if b == b'\n' { b'\r' } else { b })
                .collect(),
        ),
        (
            "crlf.mtx",
            String::from_utf8_lossy(&bytes)
                .replace('\n', "\r\n")
                .into_bytes(),
        ),
        (
            "bom.mtx",
            [b"\xEF\xBB\xBF".as_slice(), SYM.as_bytes()].concat(),
        ),
    ] {
        let i = w.input(name, &data);
        let o = w.assemble(s(&i), &out, &["-q"]);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        assert_eq!(entries(&out), sym_entries(), "{name}");
    }
    // Text: a comment after the data may hold any bytes; data must be ASCII.
    let i = w.input("t.txt", b"0 1 2.5 # M\xFCller\n");
    let o = w.assemble(s(&i), &out, &["-q", "--format", "text", "--shape", "2,2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let i = w.input(
        "bad.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 2.\xB55\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["bad.mtx:line 3", "0xB5", "not ASCII"]);
}

// Item 5: gzip and zstd by magic bytes, files and stdin; others named.
#[test]
fn compressed_input_is_read_transparently() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let z = gz(SYM.as_bytes());
    for (name, data) in [
        ("m.mtx.gz", z.clone()),
        ("m.mtx.zst", zstd::encode_all(SYM.as_bytes(), 3).unwrap()),
        ("renamed.mtx", z.clone()),
    ] {
        let i = w.input(name, &data);
        let o = w.assemble(s(&i), &out, &["-q"]);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        assert_eq!(entries(&out), sym_entries(), "{name}");
    }
    let o = w.assemble_in("-", &out, &["-q"], Some(&z));
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), sym_entries());
    // Bin and text input too (bin is streamed, not mapped).
    let mut b = bin_record_f64(1, 0, 2.5);
    b.extend(bin_record_f64(0, 1, -1.0));
    let i = w.input("r.bin.gz", &gz(&b));
    let o = w.assemble(s(&i), &out, &["-q", "--shape", "2,2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[0, 1], -1.0), (&[1, 0], 2.5)]));
    let i = w.input("t.txt.zst", &zstd::encode_all(&b"1 1 3\n"[..], 1).unwrap());
    let o = w.assemble(s(&i), &out, &["-q", "--shape", "2,2", "--format", "text"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[1, 1], 3.0)]));
    // A damaged gzip stream is an input error, never a shorter tensor.
    let mut bad = z.clone();
    let n = bad.len();
    bad.truncate(n - 12);
    let i = w.input("cut.mtx.gz", &bad);
    std::fs::remove_file(&out).unwrap();
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["cut.mtx.gz"]);
    w.clean(&[]);
    let i = w.input("m.mtx.bz2", b"BZh91AY&SY\x00\x00");
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["bzip2-compressed", "bzip2 -dc", "--input -"]);
}

// Item 7: an extent the format cannot hold is bad input at its line.
#[test]
fn huge_header_extent_is_bad_input_with_its_line() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let i = w.input(
        "h.mtx",
        b"%%MatrixMarket matrix coordinate real general\n% c\n18446744073709551615 2 1\n1 1 1\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["h.mtx:line 3", "18446744073709551615"]);
    w.clean(&[]);
}

// Item 8: wrong record layout for bin input.
#[test]
fn bin_layout_mismatch_is_explained() {
    let w = Work::new();
    let out = w.out("o.hrry");
    // Rank-2 f64 records read as rank 3: 72 bytes, 32-byte records.
    let mut b = bin_record_f64(0, 0, 1.5);
    b.extend(bin_record_f64(1, 1, 1.5));
    b.extend(bin_record_f64(2, 2, 1.5));
    let i = w.input("r.bin", &b);
    let o = w.assemble(s(&i), &out, &["-q", "--shape", "3,3,3"]);
    o.fails(
        1,
        &[
            "r.bin:start",
            "72 bytes",
            "32 bytes (rank 3 x 8 + 8 for f64)",
            "may not match",
        ],
    );
    // Rank 3 with 4 records of 24 bytes = 3 of 32: sizes agree, indices are absurd.
    b.extend(bin_record_f64(0, 1, 1.5));
    let i = w.input("r4.bin", &b);
    let o = w.assemble(s(&i), &out, &["-q", "--shape", "3,3,3"]);
    o.fails(
        1,
        &[
            "r4.bin:record 0",
            "out of range",
            "32 bytes",
            "may not match the file",
        ],
    );
    w.clean(&[]);
}

// Item 9: dense MatrixMarket arrays, as scipy reads them.
#[test]
fn mtx_arrays_store_their_non_zeros() {
    let w = Work::new();
    let out = w.out("o.hrry");
    // Column-major: [[1, 0], [2, 0], [0, 3]].
    let i = w.input(
        "g.mtx",
        b"%%MatrixMarket matrix array real general\n3 2\n1\n2\n0\n0\n0\n3\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        entries(&out),
        fl(&[(&[0, 0], 1.0), (&[1, 0], 2.0), (&[2, 1], 3.0)])
    );
    let i = w.input(
        "s.mtx",
        b"%%MatrixMarket matrix array integer symmetric\n2 2\n1\n-2\n0\n",
    );
    let o = w.assemble(s(&i), &out, &["-q", "--dtype", "i32"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let got: Vec<_> = HurrayFile::open(&out)
        .unwrap()
        .only_tensor()
        .unwrap()
        .iter()
        .map(|(i, v)| (i.to_vec(), v))
        .collect();
    assert_eq!(
        got,
        vec![
            (vec![0, 0], Value::Int(1)),
            (vec![0, 1], Value::Int(-2)),
            (vec![1, 0], Value::Int(-2))
        ]
    );
    let i = w.input(
        "k.mtx",
        b"%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n0\n2.5\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        entries(&out),
        fl(&[
            (&[0, 1], -1.0),
            (&[1, 0], 1.0),
            (&[1, 2], -2.5),
            (&[2, 1], 2.5)
        ])
    );
    for (name, text, needle) in [
        (
            "c.mtx",
            "%%MatrixMarket matrix array complex general\n1 1\n1 0\n",
            "complex 'array' files are not read",
        ),
        (
            "n.mtx",
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
            "3 entries found, the size line announces 4",
        ),
        (
            "x.mtx",
            "%%MatrixMarket matrix array real general\n1 1\n1\n2\n",
            "line 4: more entries",
        ),
    ] {
        let i = w.input(name, text.as_bytes());
        let o = w.assemble(s(&i), &out, &["-q"]);
        o.fails(1, &[name, needle]);
    }
}

// Item 9: .npy input, by --format or by its magic.
#[test]
fn npy_arrays_any_dtype_order_and_rank() {
    let w = Work::new();
    let out = w.out("o.hrry");
    // [[0, 1.5, 0], [-2, 0, 0]] f4, C order; found by its magic.
    let c: Vec<u8> = [0f32, 1.5, 0.0, -2.0, 0.0, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let i = w.input("a.npy", &npy("<f4", false, "(2, 3)", &c));
    let o = w.assemble(s(&i), &out, &["-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let f = HurrayFile::open(&out).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(
        t.descriptor().dtype,
        DType::F32,
        "the array's own type by default"
    );
    assert_eq!(t.descriptor().shape, vec![2, 3]);
    let got: Vec<_> = t.iter().map(|(i, v)| (i.to_vec(), v)).collect();
    assert_eq!(got, fl(&[(&[0, 1], 1.5), (&[1, 0], -2.0)]));
    // Rank 3, Fortran order, big-endian i2, gzip'd, from stdin, into f64.
    let vals: [i16; 8] = [0, 1, 0, 0, 0, 0, -7, 0]; // element k is at (k%2, k/2%2, k/4)
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
    let z = gz(&npy(">i2", true, "(2, 2, 2)", &data));
    let o = w.assemble_in(
        "-",
        &out,
        &["-q", "--format", "npy", "--dtype", "f64"],
        Some(&z),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[0, 1, 1], -7.0), (&[1, 0, 0], 1.0)]));
    // Bool becomes u8.
    let i = w.input("b.npy", &npy("|b1", false, "(4,)", &[0, 1, 0, 1]));
    let o = w.assemble(s(&i), &out, &["-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let got: Vec<_> = HurrayFile::open(&out)
        .unwrap()
        .only_tensor()
        .unwrap()
        .iter()
        .map(|(i, v)| (i.to_vec(), v))
        .collect();
    assert_eq!(
        got,
        vec![(vec![1], Value::UInt(1)), (vec![3], Value::UInt(1))]
    );
    std::fs::remove_file(&out).unwrap();
    // Complex arrays (either byte order) assemble to complex tensors.
    let mut le = Vec::new();
    let mut be = Vec::new();
    for (re, im) in [(0.0f64, 0.0f64), (1.5, -2.0), (0.0, 0.0), (0.0, 4.25)] {
        le.extend(re.to_le_bytes());
        le.extend(im.to_le_bytes());
        be.extend(re.to_be_bytes());
        be.extend(im.to_be_bytes());
    }
    for (name, descr, data) in [("c.npy", "<c16", &le), ("cb.npy", ">c16", &be)] {
        let i = w.input(name, &npy(descr, false, "(4,)", data));
        let o = w.assemble(s(&i), &out, &["-q"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let f = HurrayFile::open(&out).unwrap();
        let t = f.only_tensor().unwrap();
        assert_eq!(t.dtype(), DType::C128);
        let got: Vec<(Vec<u64>, Value)> = t.iter().map(|(i, v)| (i.to_vec(), v)).collect();
        assert_eq!(
            got,
            vec![
                (vec![1], Value::Complex(1.5, -2.0)),
                (vec![3], Value::Complex(0.0, 4.25))
            ],
            "{name}"
        );
        drop(f);
        std::fs::remove_file(&out).unwrap();
    }
    let i = w.input("c.npy", &npy("<c16", false, "(1,)", &[0; 16]));
    let o = w.assemble(s(&i), &out, &["-q", "--format", "bin", "--shape", "1"]);
    o.fails(2, &["NumPy .npy file", "--format bin", "format npy"]);
    w.clean(&[]);
}

// Item 10: extra fields refused; an empty input warns and still writes.
#[test]
fn extra_fields_and_empty_input() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let i = w.input(
        "e.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0 7\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["e.mtx:line 3", "unexpected field \"7\""]);
    let i = w.input(
        "p.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1.0\n",
    );
    let o = w.assemble(s(&i), &out, &["-q"]);
    o.fails(1, &["p.mtx:line 3", "unexpected field \"1.0\""]);
    w.clean(&[]);
    let i = w.input("empty.txt", b"# nothing\n");
    let o = w.assemble(s(&i), &out, &["--format", "text", "--shape", "4"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("warning: no contributions: the tensor is empty"),
        "{}",
        o.stderr
    );
    assert!(entries(&out).is_empty());
}

// Item 12: the output must not be the input.
#[test]
fn output_cannot_be_the_input() {
    let w = Work::new();
    let i = w.input("keep.mtx", SYM.as_bytes());
    let dotted = w.root.join("in").join(".").join("keep.mtx");
    let link = w.root.join("in").join("link.mtx");
    std::fs::hard_link(&i, &link).unwrap();
    for out in [i.clone(), dotted, link] {
        let o = w.assemble(s(&i), &out, &["-q"]);
        o.fails(2, &["is the input", "destroy the input"]);
        assert_eq!(std::fs::read(&i).unwrap(), SYM.as_bytes());
    }
}

// Item 13: numbers a person can read.
#[test]
fn dump_and_get_print_shortest_python_style_floats() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let i = w.input(
        "t.txt",
        b"0 1e-300\n1 5e-324\n2 1e16\n3 0.0001\n4 1234.5\n5 1e-5\n",
    );
    let o = w.assemble(s(&i), &out, &["-q", "--format", "text", "--shape", "6"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        ok(["dump", s(&out)]).stdout,
        "0 1e-300\n1 5e-324\n2 1e+16\n3 0.0001\n4 1234.5\n5 1e-05\n"
    );
    assert_eq!(ok(["get", s(&out), "1"]).stdout, "5e-324\n");
    let info = ok(["info", s(&out)]).stdout;
    assert!(info.contains("largest 1e+16"), "{info}");
    // f32 values in their own shortest digits.
    let i = w.input("f.txt", b"0 0.1\n");
    let o = w.assemble(
        s(&i),
        &out,
        &["-q", "--format", "text", "--shape", "1", "--dtype", "f32"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(ok(["dump", s(&out)]).stdout, "0 0.1\n");
}

// Item 14: the small messages.
#[test]
fn small_messages() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let i = w.input("t.txt", b"0 1 1\n");
    assert_eq!(
        w.assemble(s(&i), &out, &["-q", "--format", "text", "--shape", "2,2"])
            .code,
        0
    );
    let o = run(["get", s(&out), "1"]);
    o.fails(2, &["expected 2 indices", "got 1"]);
    let i = w.input("n.txt", b"0 -1\n");
    let o = w.assemble(
        s(&i),
        &out,
        &["-q", "--format", "text", "--shape", "2", "--dtype", "u8"],
    );
    o.fails(1, &["n.txt:line 1", "-1 refused", "does not fit u8"]);
    // -q silences the stale-leftover message too; without it, it is shown.
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let i = w.input("t.txt", b"0 1 1\n");
    for quiet in [true, false] {
        // A dead run's output for another target: swept all the same.
        let stale = w.out(&format!(".other.hrry.tmp-{dead}-0123456789abcdef"));
        std::fs::write(&stale, b"x").unwrap();
        let mut args = vec!["--format", "text", "--shape", "2,2"];
        if quiet {
            args.push("-q");
        }
        let o = w.assemble(s(&i), &out, &args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(!stale.exists());
        assert_eq!(
            o.stderr.contains("removed stale leftover"),
            !quiet,
            "{}",
            o.stderr
        );
    }
}

/// A regular MatrixMarket or text file is mapped and parsed in place;
/// stdin is streamed. Both give the same bytes (with `--duplicates last`,
/// whose result depends on the order of the contributions) and name the
/// same line of a bad entry, many blocks into the file, with one thread
/// and with two.
#[test]
fn mapped_and_streamed_input_agree() {
    let w = Work::new();
    // About 4 MiB of lines: several blocks of either path, with comments,
    // CRLF line ends in places, duplicates and mirrored entries.
    let mut body = String::new();
    let mut lines = 0u64;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for n in 0..150_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (i, j) = (x % 300 + 1, (x >> 20) % 300 + 1);
        let (i, j) = (i.max(j), i.min(j));
        let v = (x >> 40) as f64 * 1e-7 - 0.8;
        let end = if n % 7 == 0 { "\r\n" } else { "\n" };
        body.push_str(&format!("{i} {j} {v:.16e}{end}"));
        lines += 1;
        if n % 1000 == 0 {
            body.push_str("% a comment\n");
        }
    }
    let head = format!("%%MatrixMarket matrix coordinate real symmetric\n300 300 {lines}\n");
    let good = [head.as_bytes(), body.as_bytes()].concat();
    let text: String = body
        .lines()
        .filter(|l| !l.starts_with('%'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (i, j): (u64, u64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            format!("{} {} {}\n", i - 1, j - 1, f[2])
        })
        .collect();
    // An index out of range on a line far into the file.
    let bad_line = 2 + 140_000 + 140;
    let mut bad = String::new();
    for (k, l) in String::from_utf8(good.clone())
        .unwrap()
        .split_inclusive('\n')
        .enumerate()
    {
        if k + 1 == bad_line {
            bad.push_str("301 1 1.0\n");
        } else {
            bad.push_str(l);
        }
    }
    for threads in ["1", "2"] {
        let extra = ["-q", "--threads", threads, "--duplicates", "last"];
        for (name, data, more) in [
            ("g.mtx", good.clone(), &[][..]),
            (
                "t.txt",
                text.clone().into_bytes(),
                &["--format", "text", "--shape", "300,300"][..],
            ),
        ] {
            let args: Vec<&str> = extra.iter().chain(more).copied().collect();
            let i = w.input(name, &data);
            let (a, b) = (w.out("mapped.hrry"), w.out("streamed.hrry"));
            let o = w.assemble(s(&i), &a, &args);
            assert_eq!(o.code, 0, "{name}: {}", o.stderr);
            let o = w.assemble_in("-", &b, &args, Some(&data));
            assert_eq!(o.code, 0, "{name}: {}", o.stderr);
            assert!(
                std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
                "{name}, {threads} threads: mapped and streamed outputs differ"
            );
        }
        let i = w.input("bad.mtx", bad.as_bytes());
        let out = w.out("o.hrry");
        let o = w.assemble(s(&i), &out, &extra);
        let want = format!("line {bad_line}");
        o.fails(1, &["bad.mtx:", &want, "row 301 is out of range"]);
        let streamed = w.assemble_in("-", &out, &extra, Some(bad.as_bytes()));
        streamed.fails(1, &["<stdin>:", &want, "row 301 is out of range"]);
        assert_eq!(
            o.stderr.replace(s(&i), "<stdin>"),
            streamed.stderr,
            "{threads} threads"
        );
    }
}
