//! C and Fortran programs built against libcoo_assembler, run, and their
//! output files checked with the Rust reader.
//!
//! Needs a C compiler (`cc`, or `$CC`) and `gfortran` (or `$FC`); `.ci/run`
//! installs gfortran when it is missing. The library is built by running
//! cargo from the test (`cargo test` does not build a cdylib-only crate for
//! its integration tests), into this test's own target directory and
//! profile.

use coo_assembler::{AssembleOptions, Builder, DType, Error, HurrayFile, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("capi/ has a parent")
        .to_path_buf()
}

/// The directory holding libcoo_assembler.so and .a, built once per run.
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // This test runs as <target>/<profile dir>/deps/<name>-<hash>.
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in <target>/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(other) => other.to_string(),
            None => panic!("no profile directory in {}", exe.display()),
        };
        // The workspace's default members, libraries and tests: the same
        // packages and targets, so the same features, as the `cargo test`
        // at the root that runs this test, whose library builds are then
        // reused (`-p coo-assembler-capi` alone resolves features without
        // the root's dev-dependencies and rebuilt the library and every
        // dependency, most of this test's time). Only the C library is new.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let out = Command::new(cargo)
            .args(["build", "--lib", "--tests", "--profile", &profile])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(repo_root())
            .output()
            .expect("run cargo build");
        assert!(
            out.status.success(),
            "cargo build --lib --tests failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for lib in ["libcoo_assembler.so", "libcoo_assembler.a"] {
            assert!(
                profile_dir.join(lib).exists(),
                "{lib} missing in {}",
                profile_dir.display()
            );
        }
        profile_dir
    })
}

fn tool(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// Run a command, panic with its output unless it succeeds; its stdout.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

enum Link {
    Shared,
    Static,
}

/// Compile C sources against the library into `dir/exe`.
fn compile_c(sources: &[PathBuf], dir: &Path, exe: &str, link: Link) -> PathBuf {
    compile_c_with(sources, dir, exe, link, &[])
}

/// As `compile_c`, with more compiler and linker flags (another library's).
fn compile_c_with(
    sources: &[PathBuf],
    dir: &Path,
    exe: &str,
    link: Link,
    extra: &[String],
) -> PathBuf {
    let lib = lib_dir();
    let out = dir.join(exe);
    let mut cmd = Command::new(tool("CC", "cc"));
    cmd.args([
        "-std=c11",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ])
    .arg("-I")
    .arg(repo_root().join("include"))
    .args(sources)
    .arg("-o")
    .arg(&out);
    match link {
        Link::Shared => {
            cmd.arg(format!("-L{}", lib.display()))
                .arg("-lcoo_assembler")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Link::Static => {
            // The static library needs what the Rust standard library uses.
            cmd.arg(lib.join("libcoo_assembler.a"))
                .args(["-lgcc_s", "-lutil", "-lrt", "-ldl"]);
        }
    }
    cmd.args(extra);
    cmd.args(["-lpthread", "-lm"]);
    run(&mut cmd, &format!("compiling {exe}"));
    out
}

/// A field `name=<number>` of a program's output.
fn field(out: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&key))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in:\n{out}"))
}

/// Every entry of the file's only tensor, as f64.
fn entries(path: &Path) -> BTreeMap<(u64, u64), f64> {
    let file = HurrayFile::open(path).expect("open output");
    let t = file.only_tensor().expect("one tensor");
    assert!(t.verify().is_empty(), "{:?}", t.verify());
    t.iter().map(|(i, v)| ((i[0], i[1]), v.to_f64())).collect()
}

#[test]
fn c_example_assembles_1d_poisson_and_reads_it_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/examples/assemble.c")],
        dir.path(),
        "assemble",
        Link::Shared,
    );
    let n = 64u64;
    let path = dir.path().join("K.hrry");
    let out = run(Command::new(&exe).arg(&path).arg(n.to_string()), "assemble");
    assert_eq!(field(&out, "contributions"), 4 * n);
    assert_eq!(field(&out, "nnz"), 3 * n + 1);
    assert!(out.contains("K[1,1]=128\n"), "{out}");
    assert!(
        out.contains("K[1,0]=-64\nK[1,1]=128\nK[1,2]=-64\n"),
        "{out}"
    );

    // The tridiagonal matrix of linear elements with h = 1/n.
    let mut want = BTreeMap::new();
    for e in 0..n {
        for (a, b, v) in [(0, 0, 1.0), (0, 1, -1.0), (1, 0, -1.0), (1, 1, 1.0)] {
            *want.entry((e + a, e + b)).or_insert(0.0) += v * n as f64;
        }
    }
    assert_eq!(entries(&path), want);
}

#[test]
fn c_example_links_statically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/examples/assemble.c")],
        dir.path(),
        "assemble_static",
        Link::Static,
    );
    let path = dir.path().join("K.hrry");
    let out = run(Command::new(&exe).arg(&path).arg("5"), "assemble_static");
    assert_eq!(field(&out, "nnz"), 16);
    assert_eq!(entries(&path).get(&(2, 2)), Some(&10.0));
}

/// The smallest budget the library accepts for this shape and thread count.
fn minimum_budget(shape: &[u64], threads: usize) -> u64 {
    let opts = AssembleOptions {
        memory_budget: 1,
        threads,
        ..AssembleOptions::default()
    };
    match Builder::new(shape, DType::F64, opts) {
        Err(Error::BudgetTooSmall { minimum, .. }) => minimum,
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a 1-byte budget was accepted"),
    }
}

/// Replays tests/c/threads.c: each thread's LCG and how it pushes.
fn threads_oracle(threads: u64, per_thread: u64) -> BTreeMap<(u64, u64), f64> {
    let mut want = BTreeMap::new();
    for t in 0..threads {
        let mut s = 1000 + t;
        for i in 0..per_thread {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (r, c) = ((s >> 33) % 300, (s >> 13) % 300);
            let v = (((s >> 50) % 17) as f64 - 8.0) / 8.0;
            let mut add = |k, x| *want.entry(k).or_insert(0.0) += x;
            if i % 3 == 2 {
                add((r, r), v);
                add((r, c), 1.0);
                add((c, r), -1.0);
                add((c, c), v);
            } else {
                add((r, c), v);
            }
        }
    }
    want
}

#[test]
fn c_threads_push_at_once_through_pushers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/threads.c")],
        dir.path(),
        "threads",
        Link::Shared,
    );
    let (threads, per_thread) = (4u64, 60_000u64);
    // Just above the minimum: runs must spill and merge in several passes.
    let budget = minimum_budget(&[300, 300], threads as usize) * 11 / 10;
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).expect("mkdir spill");
    let path = dir.path().join("T.hrry");
    let out = run(
        Command::new(&exe)
            .arg(&path)
            .arg(threads.to_string())
            .arg(per_thread.to_string())
            .arg(budget.to_string())
            .arg(&spill),
        "threads",
    );
    let want = threads_oracle(threads, per_thread);
    // Values are multiples of 1/8 far from overflow: every sum is exact
    // in any order, so the oracle's plain additions are the exact sums.
    assert_eq!(entries(&path), want);
    let thirds = per_thread / 3;
    assert_eq!(
        field(&out, "contributions"),
        threads * (thirds * 2 + thirds * 4)
    );
    assert!(field(&out, "runs_spilled") > 0, "{out}");
    assert!(field(&out, "merge_passes") > 1, "{out}");
    let left: Vec<_> = std::fs::read_dir(&spill).expect("read spill").collect();
    assert!(left.is_empty(), "spill files left: {left:?}");
}

/// Issue 22: more pushing threads than `options.threads` (the main thread
/// through the builder's own pusher, the others through pushers of their
/// own), meeting at a barrier halfway so that some sit idle holding data
/// while others need chunks: every contribution arrives, within budget.
#[test]
fn c_more_pushing_threads_than_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/threads.c")],
        dir.path(),
        "threads",
        Link::Shared,
    );
    let per_thread = 30_000u64;
    for (threads, pushers) in [(2usize, 3u64), (2, 8), (1, 4)] {
        let budget = minimum_budget(&[300, 300], threads) * 11 / 10;
        let spill = dir.path().join(format!("spill-{threads}-{pushers}"));
        std::fs::create_dir(&spill).expect("mkdir spill");
        let path = dir.path().join(format!("T-{threads}-{pushers}.hrry"));
        let out = run(
            Command::new(&exe)
                .arg(&path)
                .arg(threads.to_string())
                .arg(per_thread.to_string())
                .arg(budget.to_string())
                .arg(&spill)
                .arg(pushers.to_string()),
            "threads with more pushers",
        );
        let what = format!("threads {threads}, {pushers} pushing threads");
        assert_eq!(
            entries(&path),
            threads_oracle(pushers, per_thread),
            "{what}"
        );
        let thirds = per_thread / 3;
        assert_eq!(
            field(&out, "contributions"),
            pushers * (thirds * 2 + thirds * 4),
            "{what}"
        );
        assert!(field(&out, "runs_spilled") > 0, "{what}: {out}");
        assert!(field(&out, "peak_buffer_bytes") <= budget, "{what}: {out}");
        let left: Vec<_> = std::fs::read_dir(&spill).expect("read spill").collect();
        assert!(left.is_empty(), "{what}: spill files left: {left:?}");
    }
}

#[test]
fn c_error_paths_give_documented_codes_and_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/errors.c")],
        dir.path(),
        "errors",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("spill")).expect("mkdir");
    write_without_checksums(&work.join("nosums.hrry"));
    let out = run(Command::new(&exe).arg(&work), "errors");
    assert!(out.ends_with("0 failed\n"), "{out}");
    // Each code the header documents for these paths was seen.
    for code in [
        "COO_ERR_NULL",
        "COO_ERR_ARGUMENT",
        "COO_ERR_INDEX",
        "COO_ERR_RANK",
        "COO_ERR_VALUE",
        "COO_ERR_DUPLICATE",
        "COO_ERR_OVERFLOW",
        "COO_ERR_BUDGET",
        "COO_ERR_IO",
        "COO_ERR_INVALID_FILE",
        "COO_ERR_STATE",
        "COO_ERR_REFUSED",
    ] {
        assert!(
            out.contains(&format!(": {code} ")),
            "{code} not seen:\n{out}"
        );
    }
    // Failed and abandoned assemblies leave no spill file and no output.
    let left: Vec<_> = std::fs::read_dir(work.join("spill"))
        .expect("read")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    for gone in ["overflow.hrry", "dup.hrry", "alive.hrry", "newdir"] {
        assert!(!work.join(gone).exists(), "{gone} was published");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&work)
        .expect("read")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary outputs left: {leftovers:?}"
    );
    // The integer tensor written through the C API reads back in Rust.
    let f = HurrayFile::open(work.join("i8.hrry")).expect("open");
    let t = f.only_tensor().expect("tensor");
    assert_eq!(t.dtype(), DType::I8);
    assert_eq!(t.get(&[0, 0]).expect("get"), Value::Int(-128));
}

/// A 4 x 4 COO tensor "coo" written as another writer would: no checksums.
fn write_without_checksums(path: &Path) {
    use coo_assembler::write::{FileWriter, WriteOptions};
    let opts = WriteOptions {
        checksums: false,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(path, opts).expect("create");
    let mut t = fw.begin_tensor("coo", DType::F64, &[4, 4]).expect("tensor");
    t.push(&[0, 1], 1.5f64).expect("push");
    t.push(&[3, 2], -2.0f64).expect("push");
    t.finish().expect("tensor finish");
    fw.finish().expect("finish");
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Issue 22, "never abort" from C: a 2^40 x 2^40 CSR (8 TiB of row
/// pointers) is COO_ERR_MEMORY in memory (a plan), COO_ERR_IO for a file
/// (no room for it: coo_assemble_arrays, a builder); nothing left behind.
#[test]
fn c_a_2_40_square_csr_is_a_clean_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/huge.c")],
        dir.path(),
        "huge",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("spill")).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "huge");
    assert!(out.ends_with("0 failed\n"), "{out}");
    // Only the COO file; no temporary output, no spill file.
    assert_eq!(names_in(&work), ["coo.hrry", "spill"], "{out}");
    assert!(names_in(&work.join("spill")).is_empty(), "{out}");
    let f = HurrayFile::open(work.join("coo.hrry")).expect("open");
    let t = f.only_tensor().expect("tensor");
    assert_eq!(t.shape(), [1u64 << 40, 1 << 40]);
    assert_eq!(t.get(&[0, 0]).expect("get"), Value::Float(1.0));
}

/// The uid the unwritable-folder programs run as when the tests run as
/// root (for whom every permission check passes): `nobody`.
const NOBODY: u32 = 65534;

/// Issue 22: a read-only temp_dir and output folder, from C. Run as
/// `nobody` when the test runs as root; skipped (with the reason) only
/// when root may not switch user.
#[test]
fn c_read_only_folders_are_refused_and_the_builder_kept() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/unwritable.c")],
        dir.path(),
        "unwritable",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let mut cmd = Command::new(&exe);
    cmd.arg(&work);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::os::unix::fs::chown(&work, Some(NOBODY), Some(NOBODY)).expect("chown");
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let o = match cmd.output() {
        Ok(o) => o,
        Err(e) if root && e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!(
                "SKIPPED: running as root without the right to switch to uid {NOBODY} ({e}); \
                 the read-only folder checks need a user that permissions apply to"
            );
            return;
        }
        Err(e) => panic!("cannot run {}: {e}", exe.display()),
    };
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains("SKIP"), "{out}");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert_eq!(names_in(&work), ["K.hrry", "read-only", "spill"], "{out}");
    assert!(names_in(&work.join("read-only")).is_empty());
    assert!(names_in(&work.join("spill")).is_empty());
}

/// Replays tests/c/arrays.c's LCG: rows, columns and values of "lcg".
fn arrays_lcg() -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let (n, extent) = (100_000usize, 300u64);
    let mut s = 7u64;
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (s >> 33) % extent;
        out.0.push(r);
        out.1.push((r + (s >> 13) % 7) % extent);
        out.2.push(((s >> 50) % 17) as f64 - 8.0);
    }
    for v in &mut out.2 {
        *v /= 8.0;
    }
    out
}

/// The `merge_passes=` of the summary line `name: ...` of a program.
fn merge_passes_of(out: &str, name: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{name}: contributions=")))
        .unwrap_or_else(|| panic!("no summary of {name} in:\n{out}"));
    field(line, "merge_passes")
}

/// Issue 23: coo_assemble_arrays and coo_assemble_arrays_i32 write the
/// builder's file byte for byte (COO, CSR, CSC; f64, f32, i32; exact
/// cancelling sums; the kernel and the builder's fallback), the values
/// are the exact sums, and every error has its status and leaves nothing.
#[test]
fn c_assembles_arrays_into_the_builders_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/arrays.c")],
        dir.path(),
        "arrays",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("spill")).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "arrays");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    for code in [
        "COO_ERR_NULL",
        "COO_ERR_ARGUMENT",
        "COO_ERR_INDEX",
        "COO_ERR_VALUE",
        "COO_ERR_DUPLICATE",
        "COO_ERR_OVERFLOW",
        "COO_ERR_BUDGET",
        "COO_ERR_IO",
    ] {
        assert!(
            out.contains(&format!(": {code} ")),
            "{code} not seen:\n{out}"
        );
    }
    // The in-memory kernel took the matrices that fit (no merge at all);
    // the builder the index wider than 64 bits and the matrix whose counts
    // do not fit the small budget.
    for name in ["lcg", "cancel", "csr", "csc", "f32", "i32"] {
        assert_eq!(merge_passes_of(&out, name), 0, "{name}: not the kernel");
    }
    for name in ["wide3", "tall"] {
        assert!(merge_passes_of(&out, name) >= 1, "{name}: not the builder");
    }
    // The values are the sums (multiples of 1/8: plain sums are exact).
    let (rows, cols, vals) = arrays_lcg();
    let mut want = BTreeMap::new();
    for ((&r, &c), &v) in rows.iter().zip(&cols).zip(&vals) {
        *want.entry((r, c)).or_insert(0.0) += v;
    }
    assert_eq!(entries(&work.join("lcg.arrays.hrry")), want);
    assert_eq!(entries(&work.join("lcg.i32.hrry")), want);
    // The "tall" rows are lcg's rows spread out.
    let tall = entries(&work.join("tall.arrays.hrry"));
    let mut want = BTreeMap::new();
    for (j, ((&r, &c), &v)) in rows.iter().zip(&cols).zip(&vals).enumerate() {
        *want.entry((r * 3000 + (j % 3) as u64, c)).or_insert(0.0) += v;
    }
    assert_eq!(tall, want);
    // Nothing left behind by the failures.
    assert!(!work.join("bad.hrry").exists());
    let left: Vec<_> = std::fs::read_dir(work.join("spill"))
        .expect("read")
        .collect();
    assert!(left.is_empty(), "spill files left: {left:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&work)
        .expect("read")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary outputs left: {leftovers:?}"
    );
}

/// tests/c/complex.c: complex values pushed through every complex call,
/// summed exactly part by part, read back by the complex readers; the
/// real-only readers refuse to drop an imaginary part.
#[test]
fn c_complex_values_push_and_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/complex.c")],
        dir.path(),
        "complex",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "complex");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

/// tests/c/export.c: `coo_file_export` writes what the library's export
/// writes, byte for byte, for MatrixMarket, both `.npz` layouts and PETSc
/// (32- and 64-bit indices), and refuses by name a non-symmetric matrix
/// with `symmetric`, a matrix to `.npy`, unknown names, its own input and
/// a short options struct.
#[test]
fn c_export_writes_what_the_library_writes() {
    use coo_assembler::matrix::export::{ExportOptions, Format, NpzLayout, export_file};
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/export.c")],
        dir.path(),
        "export",
        Link::Shared,
    );
    let hrry = dir.path().join("K.hrry");
    let mut b = Builder::new(&[5, 4], DType::F64, AssembleOptions::default()).expect("builder");
    for (i, j, v) in [
        (0u64, 1u64, 0.5f64),
        (4, 3, -2.25),
        (2, 0, 1e-300),
        (0, 1, 1.0),
        (3, 3, 7.0),
    ] {
        b.push(&[i, j], v).expect("push");
    }
    b.finish(&hrry).expect("finish");
    let out = dir.path().join("c");
    std::fs::create_dir_all(&out).expect("mkdir");
    let printed = run(Command::new(&exe).arg(&hrry).arg(&out), "export");
    assert!(printed.ends_with("0 failed\n"), "{printed}");
    assert!(!printed.contains("FAIL"), "{printed}");
    assert!(printed.contains("mtx entries=4 "), "{printed}");

    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    let file = HurrayFile::open(&hrry).expect("open");
    let cases = [
        ("K.mtx", Format::Mtx, ExportOptions::default()),
        ("K.npz", Format::Npz, ExportOptions::default()),
        (
            "K-csc.npz",
            Format::Npz,
            ExportOptions {
                npz_layout: NpzLayout::Csc,
                ..ExportOptions::default()
            },
        ),
        ("K.petsc", Format::Petsc, ExportOptions::default()),
        (
            "K64.petsc",
            Format::Petsc,
            ExportOptions {
                petsc_int64: true,
                ..ExportOptions::default()
            },
        ),
    ];
    for (name, format, opts) in cases {
        export_file(&file, None, format, &lib.join(name), &opts).expect("library export");
        let (c, l) = (std::fs::read(out.join(name)), std::fs::read(lib.join(name)));
        assert_eq!(c.expect("C output"), l.expect("library output"), "{name}");
    }
    // Only the five files: the refusals left nothing behind.
    let mut left: Vec<_> = std::fs::read_dir(&out)
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["K-csc.npz", "K.mtx", "K.npz", "K.petsc", "K64.petsc"]
    );
}

/// A PETSc built with complex scalars: `$PETSC_DIR`, else Debian's
/// `/usr/lib/petscdir/petsc-complex` (libpetsc-complex-dev). Its compiler
/// and linker flags from its pkg-config file (with MPI's, whose `mpi.h`
/// PETSc's headers include), or why there is none.
fn complex_petsc_flags() -> Result<Vec<String>, String> {
    let dir = std::env::var_os("PETSC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/petscdir/petsc-complex"));
    let conf = dir.join("include/petscconf.h");
    let text = std::fs::read_to_string(&conf)
        .map_err(|e| format!("no PETSc at {} ({}: {e})", dir.display(), conf.display()))?;
    if !text
        .lines()
        .any(|l| l.trim() == "#define PETSC_USE_COMPLEX 1")
    {
        return Err(format!("the PETSc at {} has real scalars", dir.display()));
    }
    let pc_path = dir.join("lib/pkgconfig");
    let pkg = |args: &[&str]| -> Result<String, String> {
        let out = Command::new("pkg-config")
            .args(args)
            .env("PKG_CONFIG_PATH", &pc_path)
            .output()
            .map_err(|e| format!("cannot run pkg-config: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pkg-config {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let mut flags: Vec<String> = pkg(&["--cflags", "--libs", "petsc", "mpi"])?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    flags.push(format!(
        "-Wl,-rpath,{}",
        pkg(&["--variable=libdir", "petsc"])?
    ));
    Ok(flags)
}

/// tests/c/petsc_complex.c: a complex 1D Helmholtz matrix (lossy medium,
/// absorbing end) assembled through the C API, exported with
/// `coo_file_export(..., "petsc", ...)`, and loaded by a complex PETSc's
/// `MatLoad` in the same C program, which checks every entry bit for bit
/// against sums it computes itself, and `MatMult` with a complex vector.
/// Skipped, saying so, without a complex PETSc (Debian:
/// libpetsc-complex-dev; CI does not install it).
#[test]
fn c_complex_matrix_to_petsc_matload() {
    let flags = match complex_petsc_flags() {
        Ok(flags) => flags,
        Err(why) => {
            eprintln!(
                "SKIPPED c_complex_matrix_to_petsc_matload: {why} \
                 (Debian: apt-get install libpetsc-complex-dev, or set PETSC_DIR)"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c_with(
        &[repo_root().join("capi/tests/c/petsc_complex.c")],
        dir.path(),
        "petsc_complex",
        Link::Shared,
        &flags,
    );
    let n = 16u64;
    let hrry = dir.path().join("K.hrry");
    let out = run(
        Command::new(&exe)
            .arg("assemble")
            .arg(&hrry)
            .arg(n.to_string()),
        "petsc_complex assemble",
    );
    // Two dofs per element (4 entries each) and the impedance term.
    assert_eq!(field(&out, "contributions"), 4 * n + 1, "{out}");
    assert_eq!(field(&out, "nnz"), 3 * n + 1, "{out}");

    // The file as our reader sees it: complex128, the band, and the
    // imaginary parts the problem gives (the lossy medium everywhere, the
    // absorbing condition at x = 1), within rounding of the formula.
    let file = HurrayFile::open(&hrry).expect("open K.hrry");
    let t = file.only_tensor().expect("one tensor");
    assert_eq!(t.dtype(), DType::C128);
    assert_eq!(t.nnz(), 3 * n + 1);
    let (k2, h) = (49.0, 1.0 / n as f64);
    let elem = |e: u64, diag: bool| -> (f64, f64) {
        let (re, im) = (1.0 + 0.03 * e as f64, 0.2);
        let (s, w) = if diag {
            (1.0, h / 3.0)
        } else {
            (-1.0, h / 6.0)
        };
        (s / h - k2 * re * w, -k2 * im * w)
    };
    for (idx, v) in t.iter() {
        let (i, j) = (idx[0], idx[1]);
        let want = if i != j {
            assert_eq!(i.abs_diff(j), 1, "({i},{j}) outside the band");
            elem(i.min(j), false)
        } else {
            let mut s = (0.0, 0.0);
            for (e, ok) in [(i.wrapping_sub(1), i > 0), (i, i < n)] {
                if ok {
                    let (re, im) = elem(e, true);
                    s = (s.0 + re, s.1 + im);
                }
            }
            if i == n {
                s.1 -= 7.0;
            }
            s
        };
        let Value::Complex(re, im) = v else {
            panic!("({i},{j}): {v:?} is not complex");
        };
        let scale = want.0.abs() + want.1.abs();
        assert!(
            (re - want.0).abs() <= 1e-14 * scale && (im - want.1).abs() <= 1e-14 * scale,
            "({i},{j}) = {re}{im:+}i, want {}{:+}i",
            want.0,
            want.1
        );
    }
    drop(file);

    let petsc = dir.path().join("K.petsc");
    let out = run(
        Command::new(&exe).arg("export").arg(&hrry).arg(&petsc),
        "petsc_complex export",
    );
    assert!(
        out.ends_with("0 failed\n") && !out.contains("FAIL"),
        "{out}"
    );
    assert_eq!(field(&out, "entries"), 3 * n + 1, "{out}");
    // MAT_FILE_CLASSID, rows, columns, nnz; row lengths; columns (32-bit
    // PetscInt, Debian's build); values as (real, imaginary) doubles.
    let rows = n + 1;
    let nnz = 3 * n + 1;
    let len = std::fs::metadata(&petsc).expect("K.petsc").len();
    assert_eq!(len, 4 * 4 + 4 * rows + 4 * nnz + 16 * nnz);

    let out = run(
        Command::new(&exe)
            .arg("check")
            .arg(&petsc)
            .arg(n.to_string())
            // PETSc starts MPI; CI runs as root, which Open MPI refuses
            // unless told.
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        "petsc_complex check",
    );
    assert!(!out.contains("FAIL"), "{out}");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(
        out.contains(&format!("MatLoad: {rows} x {rows}\n")),
        "{out}"
    );
    assert!(
        out.contains(&format!("entries checked={nnz} wrong=0\n")),
        "{out}"
    );
}

/// tests/c/bool.c: a bool pattern pushed as 1.0 / 0.0 through the double
/// pushes, a duplicate true if any contribution is, other values refused.
#[test]
fn c_bool_values_push_and_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/bool.c")],
        dir.path(),
        "bool",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "bool");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

/// Replays tests/c/plan.c: the quadrilateral mesh's element dofs and the
/// two sets of values.
fn plan_mesh() -> (Vec<u64>, [Vec<f64>; 2]) {
    const NX: u64 = 80;
    let mut dofs = Vec::new();
    for j in 0..NX {
        for i in 0..NX {
            let n0 = j * (NX + 1) + i;
            dofs.extend([n0, n0 + 1, n0 + NX + 2, n0 + NX + 1]);
        }
    }
    let n = dofs.len() / 4 * 16;
    let values = |seed: u64| {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let e = ((s >> 3) % 41) as i64 - 20;
                let scale = f64::from_bits(((1023 + e - 53) as u64) << 52);
                let v = (s >> 11) as f64 * scale;
                if s & 1 == 1 { -v } else { v }
            })
            .collect::<Vec<f64>>()
    };
    (dofs, [values(1000), values(1001)])
}

/// The values of a file's tensor in storage order.
fn stored_f64s(path: &Path) -> Vec<f64> {
    let file = HurrayFile::open(path).expect("open");
    let t = file.only_tensor_view().expect("tensor");
    assert_eq!(t.dtype(), DType::F64);
    t.values_bytes()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

/// Issue 24: plans through the C API. The program checks every refill
/// against coo_assemble_arrays bit for bit, the structure against the
/// file's, save and load, refills from several threads at once, typed
/// refills and every error; here the plans it saved are read by the Rust
/// library and refilled with the replayed values, and a Rust plan of the
/// replayed mesh has the digest the C plans printed.
#[test]
fn c_plans_refill_bit_for_bit() {
    use coo_assembler::{Plan, options::OutputLayout};
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/plan.c")],
        dir.path(),
        "plan",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "plan");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    for code in [
        "COO_ERR_NULL",
        "COO_ERR_ARGUMENT",
        "COO_ERR_INDEX",
        "COO_ERR_VALUE",
        "COO_ERR_DUPLICATE",
        "COO_ERR_OVERFLOW",
        "COO_ERR_BUDGET",
        "COO_ERR_IO",
        "COO_ERR_INVALID_FILE",
        "COO_ERR_STATE",
    ] {
        assert!(
            out.contains(&format!(": {code} ")),
            "{code} not seen:\n{out}"
        );
    }
    let damaged = out
        .lines()
        .find(|l| l.starts_with("damaged: "))
        .unwrap_or_else(|| panic!("no damage summary in:\n{out}"));
    assert_eq!(field(damaged, "wrong"), 0, "{damaged}");
    assert!(
        field(damaged, "invalid_file") * 10 > field(damaged, "flips") * 9,
        "{damaged}"
    );

    let (dofs, values) = plan_mesh();
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        threads: 2,
        ..AssembleOptions::default()
    };
    let nodes = 81 * 81;
    let ours = Plan::for_elements(&dofs, 4, [nodes, nodes], DType::F64, &opts, None)
        .expect("plan the mesh");
    for name in ["coo", "csr", "csc"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name}: nnz=")))
            .unwrap_or_else(|| panic!("no {name} line in:\n{out}"));
        assert_eq!(field(line, "contributions"), values[0].len() as u64);
        assert_eq!(field(line, "nnz"), ours.nnz() as u64, "{line}");
        assert_eq!(field(line, "digest"), ours.digest(), "{line}");
        // The C program's plan file, refilled by the Rust library with the
        // replayed values: the C program's coo_assemble_arrays file.
        let plan = Plan::load(work.join(format!("{name}.plan.hrry"))).expect("load the C plan");
        assert_eq!(plan.layout().to_string(), name);
        for (r, vals) in values.iter().enumerate() {
            let mut got = vec![0.0f64; plan.nnz()];
            plan.assemble_into(vals, &mut got, None).expect("refill");
            let want = stored_f64s(&work.join(format!("{name}.{r}.hrry")));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
            assert_eq!(bits(&got), bits(&want), "{name}, values {r}");
        }
    }
    // Exact sums matter here: the plain sums of some entry differ.
    let want = stored_f64s(&work.join("csr.0.hrry"));
    let mut plain = BTreeMap::new();
    for (c, &v) in values[0].iter().enumerate() {
        let (e, a, b) = (c / 16, c % 16 / 4, c % 4);
        *plain
            .entry((dofs[e * 4 + a], dofs[e * 4 + b]))
            .or_insert(0.0) += v;
    }
    let plain: Vec<f64> = plain.into_values().collect();
    assert_eq!(plain.len(), want.len());
    assert!(
        plain.iter().zip(&want).any(|(p, w)| p != w),
        "every plain sum is exact: the values do not test exact summation"
    );
}

/// The P1 stiffness matrix of the Fortran example, computed here the
/// same way (element by element) but summed in Rust.
fn poisson_2d_oracle(n: u64) -> BTreeMap<(u64, u64), f64> {
    let mut want = BTreeMap::new();
    for s in 0..n * n {
        let (i, j) = (s % n, s / n);
        for tri in [
            [(i, j), (i + 1, j), (i + 1, j + 1)],
            [(i, j), (i + 1, j + 1), (i, j + 1)],
        ] {
            let x: Vec<f64> = tri.iter().map(|p| p.0 as f64 / n as f64).collect();
            let y: Vec<f64> = tri.iter().map(|p| p.1 as f64 / n as f64).collect();
            let area2 = (x[1] - x[0]) * (y[2] - y[0]) - (x[2] - x[0]) * (y[1] - y[0]);
            let bx = [y[1] - y[2], y[2] - y[0], y[0] - y[1]];
            let by = [x[2] - x[1], x[0] - x[2], x[1] - x[0]];
            let dof: Vec<u64> = tri.iter().map(|p| p.1 * (n + 1) + p.0).collect();
            for a in 0..3 {
                for b in 0..3 {
                    let k = (bx[a] * bx[b] + by[a] * by[b]) / (2.0 * area2);
                    *want.entry((dof[a], dof[b])).or_insert(0.0) += k;
                }
            }
        }
    }
    want
}

/// Compile Fortran sources (after the module) against the library.
fn compile_fortran(sources: &[&str], dir: &Path, exe: &str, flags: &[&str]) -> PathBuf {
    let lib = lib_dir();
    let fc = tool("FC", "gfortran");
    let out = dir.join(exe);
    let mut cmd = Command::new(&fc);
    // In the temporary directory: no stale .mod file elsewhere is found first.
    cmd.current_dir(dir)
        .args(["-std=f2008", "-Wall", "-Wextra", "-Werror", "-O2"])
        .args(flags)
        .arg(format!("-J{}", dir.display()))
        .arg(repo_root().join("fortran/coo_assembler.f90"))
        .args(sources.iter().map(|s| repo_root().join(s)))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg("-lcoo_assembler")
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    let compiled = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run {fc}: {e} (install gfortran: apt-get install gfortran, or set FC)")
    });
    assert!(
        compiled.status.success(),
        "{fc} failed:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    out
}

#[test]
fn fortran_example_assembles_2d_poisson_with_openmp_pushers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_fortran(
        &["fortran/examples/assemble_fe.f90"],
        dir.path(),
        "assemble_fe",
        &["-fopenmp"],
    );
    let n = 24u64;
    let path = dir.path().join("K.hrry");
    let out = run(
        Command::new(&exe)
            .arg(&path)
            .arg(n.to_string())
            .env("OMP_NUM_THREADS", "2"),
        "assemble_fe",
    );
    assert!(out.contains("threads=2"), "{out}");
    assert!(out.contains(")=4.000"), "{out}");
    let row_sum: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("max |row sum|="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no row sum in:\n{out}"));
    assert!(row_sum < 1e-12, "{out}");
    assert!(out.contains("verify=0"), "{out}");

    let got = entries(&path);
    let want = poisson_2d_oracle(n);
    assert_eq!(got.len(), want.len());
    for ((k, g), (wk, w)) in got.iter().zip(&want) {
        assert_eq!(k, wk);
        // Exact sums against the oracle's order-dependent ones: ulps apart.
        assert!((g - w).abs() <= 1e-12, "{k:?}: {g} vs {w}");
    }
    assert_eq!(field(&out, "contributions"), 2 * n * n * 9);
}

#[test]
fn fortran_layer_indices_batches_and_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The checks compare exact sums with ==, on purpose.
    let exe = compile_fortran(
        &["capi/tests/fortran/checks.f90"],
        dir.path(),
        "checks",
        &["-Wno-compare-reals"],
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("spill")).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "checks");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    let left: Vec<_> = std::fs::read_dir(work.join("spill"))
        .expect("read")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The CSF tensor the Fortran checks assembled (1-based, levels 3, 1, 2).
    let reference = work.join("T-ref.hrry");
    let opts = AssembleOptions {
        layout: coo_assembler::options::OutputLayout::Csf,
        mode_order: Some(vec![2, 0, 1]),
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[4, 3, 5], DType::F64, opts).expect("builder");
    for j in 1..=60u64 {
        b.push(&[j % 4, (2 * j) % 3, (3 * j) % 5], j as f64)
            .expect("push");
    }
    b.finish(&reference).expect("finish");
    assert_eq!(
        std::fs::read(work.join("T.hrry")).expect("T.hrry"),
        std::fs::read(&reference).expect("reference")
    );
    let e = entries(&work.join("F.hrry"));
    assert_eq!(e.len(), 100);
    assert_eq!(e[&(8, 9)], 50.0);
    // Fortran's export: a MatrixMarket file of the same entries, 1-based.
    let mtx = std::fs::read_to_string(work.join("F.mtx")).expect("F.mtx");
    assert!(
        mtx.starts_with("%%MatrixMarket matrix coordinate real general"),
        "{mtx}"
    );
    assert!(mtx.lines().any(|l| l == "9 10 50.0"), "{mtx}");
    assert!(work.join("F.npz").exists() && !work.join("F-sym.mtx").exists());
    // The complex pushes: ke(a, b) at (dofs(a), dofs(b)), 1-based.
    let file = HurrayFile::open(work.join("Z.hrry")).expect("open Z.hrry");
    let t = file.only_tensor().expect("one tensor");
    let z: BTreeMap<(u64, u64), coo_assembler::Value> =
        t.iter().map(|(i, v)| ((i[0], i[1]), v)).collect();
    use coo_assembler::Value::Complex as C;
    let want: BTreeMap<(u64, u64), coo_assembler::Value> = [
        ((0, 0), C(1.0, 1.0)),
        ((0, 1), C(1.5, 1.0)),
        ((0, 2), C(2.0, 0.0)),
        ((2, 0), C(3.0, 0.0)),
        ((2, 2), C(0.0, 0.0)),
    ]
    .into_iter()
    .collect();
    assert_eq!(z, want);
}

/// Issue 23: `coo_assemble` of the Fortran layer, both index kinds, 0-
/// and 1-based: the builder's bytes, the exact sums, its errors.
#[test]
fn fortran_assembles_arrays_into_the_builders_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_fortran(
        &["capi/tests/fortran/arrays.f90"],
        dir.path(),
        "arrays",
        &["-Wno-compare-reals"],
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("spill")).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "arrays");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    // Replay the contributions of A.hrry (values multiples of 1/4: plain
    // sums are exact).
    let m = 40u64;
    let mut want = BTreeMap::new();
    for j in 1..=5000u64 {
        let r = (7 * j) % m;
        let c = (r + j % 5) % m;
        *want.entry((r, c)).or_insert(0.0) += ((j % 9) as f64 - 4.0) / 4.0;
    }
    for name in ["A.hrry", "A4.hrry", "A41.hrry", "A81.hrry"] {
        assert_eq!(entries(&work.join(name)), want, "{name}");
    }
    assert!(!work.join("bad.hrry").exists());
    let left: Vec<_> = std::fs::read_dir(work.join("spill"))
        .expect("read")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let hidden: Vec<_> = std::fs::read_dir(&work)
        .expect("read")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "temporary outputs left: {hidden:?}");
}

/// Issue 24: `coo_plan_t` of the Fortran layer: element matrices (1-based,
/// `ke(a, b, e)` to `(dofs(a, e), dofs(b, e))`) and arrays, refilled bit
/// for bit as the builder and `coo_assemble` store them, saved, loaded,
/// and its errors. The plan it saved is a valid Hurray file that the Rust
/// library loads, with the structure of the builder's file.
#[test]
fn fortran_plans_refill_bit_for_bit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_fortran(
        &["capi/tests/fortran/plan.f90"],
        dir.path(),
        "plan",
        &["-Wno-compare-reals"],
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "plan");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    assert!(
        out.lines().filter(|l| l.starts_with("ok ")).count() >= 79,
        "{out}"
    );
    let file = HurrayFile::open(work.join("P.hrry")).expect("open the plan file");
    let problems: Vec<_> = file.verify().into_iter().filter(|p| p.is_error()).collect();
    assert!(problems.is_empty(), "{problems:?}");
    let plan = coo_assembler::Plan::load(work.join("P.hrry")).expect("load the plan");
    assert_eq!(plan.contributions(), 9 * 200);
    // CSR of the builder's (row-major) entries.
    let want: Vec<(u64, u64)> = entries(&work.join("B1.hrry")).into_keys().collect();
    let (ptr, ind): (Vec<u64>, Vec<u64>) =
        (plan.pointers().expect("ptr"), plan.indices().expect("ind"));
    let mut got = Vec::new();
    for (i, w) in ptr.windows(2).enumerate() {
        for &j in &ind[w[0] as usize..w[1] as usize] {
            got.push((i as u64, j));
        }
    }
    assert_eq!(got, want);
}

#[test]
fn docs_show_the_tested_examples_verbatim() {
    let docs = std::fs::read_to_string(repo_root().join("docs/c-api.md")).expect("docs/c-api.md");
    for example in [
        "capi/examples/assemble.c",
        "fortran/examples/assemble_fe.f90",
    ] {
        let text = std::fs::read_to_string(repo_root().join(example)).expect("example");
        assert!(
            docs.contains(&text),
            "docs/c-api.md does not show {example} as it is; paste it again"
        );
    }
}

/// COO, CSR and CSC files (written by the Rust builder) read through the C
/// API: the layout, the `sorted` flag, every entry (read in chunks that
/// cross rows and columns) equal to the Rust reader's, `coo_file_get` on
/// each, and a row's prefix range (sorted COO, CSR) or the documented
/// refusal (CSC).
#[test]
fn c_reads_csr_and_csc_files() {
    use coo_assembler::options::OutputLayout;
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/layouts.c")],
        dir.path(),
        "layouts",
        Link::Shared,
    );
    let (m, n) = (40u64, 31u64);
    for (code, layout) in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc]
        .into_iter()
        .enumerate()
    {
        let path = dir.path().join(format!("{layout}.hrry"));
        let opts = AssembleOptions {
            layout,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&[m, n], DType::F32, opts).expect("builder");
        for k in 0..600u64 {
            let (i, j) = ((k * 7) % m, (k * 11) % (n - 1)); // column n-1 stays empty
            if i % 5 != 2 {
                // rows 2, 7, ... stay empty
                b.push(&[i, j], (k % 13) as f64 - 6.5).expect("push");
            }
        }
        b.finish(&path).expect("finish");
        let out = run(Command::new(&exe).arg(&path), "layouts");
        assert_eq!(field(&out, "layout"), code as u64, "{out}");
        assert_eq!(
            field(&out, "sorted"),
            u64::from(layout != OutputLayout::Csc)
        );
        assert_eq!(field(&out, "bad_get"), 0, "{out}");
        let file = HurrayFile::open(&path).expect("open");
        let t = file.only_tensor_view().expect("tensor");
        let mut want = Vec::new();
        t.try_for_each::<Error>(|ij, v| {
            want.push(format!("e {} {} {}", ij[0], ij[1], v.to_f64()));
            Ok(())
        })
        .expect("entries");
        // %.17g and Rust's shortest form differ in text, not in value.
        let got: Vec<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix("e "))
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                let v: f64 = w[2].parse().expect("value");
                format!("e {} {} {v}", w[0], w[1])
            })
            .collect();
        assert_eq!(got, want, "{layout}");
        assert_eq!(field(&out, "nnz"), want.len() as u64);
        let status = out
            .lines()
            .find_map(|l| l.strip_prefix("prefix_status="))
            .and_then(|l| l.split(' ').next())
            .and_then(|s| s.parse::<i64>().ok())
            .expect("prefix_status");
        // The prefix in storage order: row 3 of COO and CSR, column 3 of CSC.
        assert_eq!(status, 0, "{out}");
        let r = match t.as_compressed() {
            Some(c) => c.major_range(3).expect("lane 3"),
            None => t.as_coo().expect("coo").prefix_range(&[3]).expect("row 3"),
        };
        assert_eq!((field(&out, "begin"), field(&out, "end")), (r.start, r.end));
    }
}

/// Issue 22: `coo_file_read_entries` on a file the library wrote, with one
/// byte flipped in its values or its index buffer, is
/// `COO_ERR_INVALID_FILE` naming the buffer, copies nothing, and says the
/// same on a second call (the verdict is kept for the open file).
#[test]
fn c_read_entries_of_a_damaged_file_is_invalid_file_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clean = dir.path().join("clean.hrry");
    let mut b = Builder::new(&[10, 10], DType::F64, AssembleOptions::default()).expect("builder");
    for k in 0..8u64 {
        b.push(&[k, (3 * k) % 10], 1.0 + k as f64).expect("push");
    }
    b.finish(&clean).expect("finish");
    // Where the buffers are, from the reader's own view of the file.
    let (values_at, indices_at) = {
        let f = HurrayFile::open(&clean).expect("open");
        let map = f.mapped_bytes().expect("a mapped file").as_ptr() as usize;
        let t = f.only_tensor().expect("one tensor");
        let at = |b: &[u8]| b.as_ptr() as usize - map;
        (
            at(t.values_bytes()) + 8 * 2 + 3,
            at(t.indices_bytes()) + 8 * 2 * 2,
        )
    };
    let bytes = std::fs::read(&clean).expect("read");
    let flipped = |name: &str, at: usize, bit: u8| {
        let mut b = bytes.clone();
        b[at] ^= bit;
        let p = dir.path().join(name);
        std::fs::write(&p, b).expect("write");
        p
    };
    let values = flipped("values.hrry", values_at, 0x10);
    // Row 2 of entry 2 becomes row 3: still in range and in order, so
    // only the checksum can tell.
    let indices = flipped("indices.hrry", indices_at, 0x01);
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/damaged.c")],
        dir.path(),
        "damaged",
        Link::Shared,
    );
    let out = run(
        Command::new(&exe).arg(&clean).arg(&values).arg(&indices),
        "damaged",
    );
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert_eq!(out.matches("COO_ERR_INVALID_FILE").count(), 6, "{out}");
}

/// tests/c/skip_negative.c: `skip_negative` through every int64_t push,
/// a pusher and coo_assemble_arrays(_i32): skipped, counted in
/// `coo_summary.skipped_negative`, the same bytes as without those
/// contributions; without the option, COO_ERR_INDEX as before.
#[test]
fn c_skip_negative_skips_and_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/skip_negative.c")],
        dir.path(),
        "skip_negative",
        Link::Shared,
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let out = run(Command::new(&exe).arg(&work), "skip_negative");
    assert!(out.ends_with("0 failed\n"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

/// Replays tests/c/csf.c's contributions with the library.
fn csf_reference(dir: &Path) -> PathBuf {
    use coo_assembler::options::OutputLayout;
    let path = dir.join("ref.hrry");
    let opts = AssembleOptions {
        layout: OutputLayout::Csf,
        mode_order: Some(vec![2, 0, 1]),
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[6, 5, 4], DType::F64, opts).expect("builder");
    for k in 0..400u64 {
        b.push(&[k % 6, (k * 7) % 5, (k * 3) % 4], (k % 9) as f64 - 4.0)
            .expect("push");
    }
    b.finish(&path).expect("finish");
    path
}

#[test]
fn c_assembles_and_reads_csf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/csf.c")],
        dir.path(),
        "csf",
        Link::Shared,
    );
    let out_path = dir.path().join("c.hrry");
    let out = run(Command::new(&exe).arg(&out_path), "csf");
    assert!(!out.contains("FAIL"), "{out}");
    let reference = csf_reference(dir.path());
    // The same bytes as the library's own assembly of the pushes.
    assert_eq!(
        std::fs::read(&out_path).expect("c file"),
        std::fs::read(&reference).expect("reference")
    );
    assert_eq!(field(&out, "layout"), 3, "{out}");
    assert_eq!(field(&out, "sorted"), 0, "{out}");
    assert_eq!(field(&out, "bad_get"), 0, "{out}");
    let file = HurrayFile::open(&reference).expect("open");
    let t = file.only_tensor_view().expect("tensor");
    let mut want = Vec::new();
    t.try_for_each::<Error>(|i, v| {
        want.push(format!("e {} {} {} {}", i[0], i[1], i[2], v.to_f64()));
        Ok(())
    })
    .expect("entries");
    let got: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("e "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let v: f64 = w[3].parse().expect("value");
            format!("e {} {} {} {v}", w[0], w[1], w[2])
        })
        .collect();
    assert_eq!(got, want);
    let c = t.as_csf().expect("csf");
    let (p1, p2) = (
        c.fiber(&[1]).expect("fibre"),
        c.fiber(&[1, 1]).expect("fibre"),
    );
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .map(|l| {
                let n: Vec<u64> = l
                    .split(' ')
                    .skip(1)
                    .map(|w| w.split('=').nth(1).and_then(|x| x.parse().ok()).expect("n"))
                    .collect();
                (n[0], n[1])
            })
            .expect(name)
    };
    assert_eq!(line("prefix1 "), (p1.start, p1.end));
    assert_eq!(line("prefix2 "), (p2.start, p2.end));
    assert!(p2.end > p2.start && p1.start <= p2.start && p2.end <= p1.end);
}

/// The code the C layer gives each name of the library's tables
/// (`coo_parse_name`, through the mapping `from_c`/`to_c` use) is the
/// header's constant of that name: a value added to a library table
/// without a C code, or mapped to another constant, fails here.
#[test]
fn c_codes_of_every_library_name_are_the_headers() {
    use coo_assembler::DType;
    use coo_assembler::options::{DuplicatePolicy, NonFinitePolicy, OutputLayout};
    use coo_assembler::vocab::Vocabulary;
    fn names<T: Vocabulary>() -> Vec<&'static str> {
        T::TERMS.iter().map(|t| t.name).collect()
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile_c(
        &[repo_root().join("capi/tests/c/codes.c")],
        dir.path(),
        "codes",
        Link::Shared,
    );
    let h = std::fs::read_to_string(repo_root().join("include/coo_assembler.h")).expect("header");
    let c = crate::header::header_constants(&h);
    for (kind, prefix, names) in [
        ("dtype", "COO_", names::<DType>()),
        ("duplicates", "COO_DUP_", names::<DuplicatePolicy>()),
        ("non_finite", "COO_", names::<NonFinitePolicy>()),
        ("layout", "COO_LAYOUT_", names::<OutputLayout>()),
    ] {
        let out = run(Command::new(&exe).arg(kind).args(&names), "codes");
        for name in &names {
            let (key, want) = crate::header::constant_of(&c, prefix, name);
            let got = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse::<i64>().ok());
            assert_eq!(got, Some(want), "{kind} {name}: the header's {key}\n{out}");
        }
    }
}
