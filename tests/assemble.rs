//! The assembler against a BTreeMap oracle, under budgets small enough to
//! force spills and multi-pass merges; determinism; bad input.

use coo_assembler::HurrayFile;
use coo_assembler::{
    AssembleOptions, Builder, DType, Error, ErrorKind, Value, options::DuplicatePolicy,
    options::NonFinitePolicy,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The smallest budget the planner accepts for this shape and thread count.
fn tiny(shape: &[u64], dtype: DType, threads: usize, dir: &Path) -> AssembleOptions {
    AssembleOptions {
        memory_budget: crate::common::min_budget(shape, dtype, threads),
        threads,
        temp_dir: Some(dir.to_path_buf()),
        max_fan_in: 3,
        ..AssembleOptions::default()
    }
}

fn read_all(path: &Path) -> Vec<(Vec<u64>, Value)> {
    let f = HurrayFile::open(path).unwrap();
    let t = f.only_tensor().unwrap();
    assert!(t.verify().is_empty(), "{:?}", t.verify());
    t.iter().map(|(i, v)| (i.to_vec(), v)).collect()
}

fn dir_is_empty(p: &Path) -> bool {
    std::fs::read_dir(p).unwrap().next().is_none()
}

fn decode_index(mut lin: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = lin % shape[d];
        lin /= shape[d];
    }
    idx
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Integer sums, min, max, last and error against an oracle, with spills.
    #[test]
    fn matches_oracle_with_spills(
        shape in (1usize..=4).prop_flat_map(|rank| {
            // Enough distinct coordinates that runs outgrow the in-memory share.
            let (lo, hi) = [(20_000u64, 200_000u64), (150, 600), (30, 80), (12, 30)][rank - 1];
            prop::collection::vec(lo..hi, rank)
        }),
        n in 80_000usize..150_000,
        seed in any::<u64>(),
        policy in prop::sample::select(vec![DuplicatePolicy::Sum, DuplicatePolicy::Min, DuplicatePolicy::Max, DuplicatePolicy::Last]),
        threads in 1usize..=2,
    ) {
        let total: u64 = shape.iter().product();
        let tmp = tempfile::tempdir().unwrap();
        let spill = tempfile::tempdir().unwrap();
        let out = tmp.path().join("t.hrry");
        let mut opts = tiny(&shape, DType::I64, threads, spill.path());
        opts.duplicates = policy;
        let mut b = Builder::new(&shape, DType::I64, opts).unwrap();
        let mut oracle: BTreeMap<Vec<u64>, i64> = BTreeMap::new();
        let mut s = seed | 1;
        for _ in 0..n {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            let idx = decode_index(s % total, &shape);
            let v = ((s >> 20) % 2001) as i64 - 1000;
            b.push(&idx, v).unwrap();
            oracle.entry(idx).and_modify(|o| *o = match policy {
                DuplicatePolicy::Sum => *o + v,
                DuplicatePolicy::Min => (*o).min(v),
                DuplicatePolicy::Max => (*o).max(v),
                _ => v,
            }).or_insert(v);
        }
        let sum = b.finish(&out).unwrap();
        prop_assert!(sum.runs_spilled > 0, "no spill: {sum:?}");
        prop_assert!(sum.merge_passes >= 2, "single pass: {sum:?}");
        prop_assert!(dir_is_empty(spill.path()), "spill files left behind");
        let got = read_all(&out);
        let want: Vec<(Vec<u64>, Value)> = oracle.into_iter().map(|(k, v)| (k, Value::Int(v))).collect();
        prop_assert_eq!(sum.nnz as usize, want.len());
        prop_assert_eq!(got, want);
    }
}

/// Float contributions whose exact sum differs from naive summation, in
/// any order: the output bytes are identical across orders, budgets,
/// thread counts and spill points.
#[test]
fn output_is_bitwise_identical_across_orders_budgets_and_threads() {
    let shape = [300u64, 300];
    let mut contribs = Vec::new();
    let mut s = 0x9e3779b97f4a7c15u64;
    for k in 0..60_000u64 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let i = s % 300;
        let j = (s >> 16) % 300;
        let mag = [1e16, 1.0, 1e-8, -1e16, 3.3][(k % 5) as usize];
        let v = mag * (1.0 + (s >> 40) as f64 / (1u64 << 24) as f64);
        contribs.push(([i, j], v));
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut reference: Option<Vec<u8>> = None;
    for (round, (threads, big)) in [(1, false), (2, false), (2, true), (1, true), (3, false)]
        .into_iter()
        .enumerate()
    {
        // A different order each round.
        let mut order = contribs.clone();
        let n = order.len();
        crate::common::Rng::new(12345 + round as u64).shuffle(&mut order);
        let mut opts = tiny(&shape, DType::F64, threads, tmp.path());
        if big {
            opts.memory_budget = 64 << 20;
        }
        let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
        std::thread::scope(|sc| {
            for part in order.chunks(n / threads + 1) {
                let mut p = b.pusher().unwrap();
                sc.spawn(move || {
                    for (idx, v) in part {
                        p.push(idx, *v).unwrap();
                    }
                });
            }
        });
        let out = tmp.path().join(format!("r{round}.hrry"));
        let sum = b.finish(&out).unwrap();
        assert_eq!(sum.contributions, n as u64);
        if !big {
            assert!(sum.runs_spilled > 0, "round {round} did not spill");
        }
        let bytes = std::fs::read(&out).unwrap();
        match &reference {
            None => reference = Some(bytes),
            Some(r) => assert!(r == &bytes, "round {round} differs"),
        }
    }
    // And the values are the correctly rounded sums: check a few against
    // an exact rational sum via i128 scaled arithmetic is overkill here;
    // instead compare with a sorted-magnitude compensated sum oracle.
    let mut groups: BTreeMap<[u64; 2], Vec<f64>> = BTreeMap::new();
    for (idx, v) in &contribs {
        groups.entry(*idx).or_default().push(*v);
    }
    let got = read_all(&tmp.path().join("r0.hrry"));
    assert_eq!(got.len(), groups.len());
    for ((idx, v), (k, vals)) in got.iter().zip(&groups) {
        assert_eq!(idx.as_slice(), k.as_slice());
        assert_eq!(
            *v,
            Value::Float(coo_assembler::internals::assemble::exact::sum_exact(vals).round_f64())
        );
    }
}

#[test]
fn bad_contributions_are_typed_errors_and_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = AssembleOptions {
        non_finite: NonFinitePolicy::RejectNan,
        temp_dir: Some(tmp.path().to_path_buf()),
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[10, 20], DType::F32, opts).unwrap();
    b.push(&[1, 2], 1.0f32).unwrap();
    match b.push(&[10, 0], 1.0) {
        Err(Error::IndexOutOfRange {
            contribution: 1,
            dim: 0,
            index: 10,
            extent: 10,
        }) => {}
        other => panic!("{other:?}"),
    }
    match b.push(&[1, 2, 3], 1.0) {
        Err(Error::WrongRank {
            expected: 2,
            got: 3,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    match b.push(&[1, 2], f64::NAN) {
        Err(Error::InvalidValue { .. }) => {}
        other => panic!("{other:?}"),
    }
    match b.push(&[1, 2], 7.0f64) {
        Ok(()) => {}
        other => panic!("{other:?}"),
    }
    let msg = b.push(&[3, 25], 1.0).unwrap_err().to_string();
    assert!(
        msg.contains("dimension 1") && msg.contains("25") && msg.contains("20"),
        "{msg}"
    );
    let out = tmp.path().join("o.hrry");
    let s = b.finish(&out).unwrap();
    assert_eq!(s.contributions, 2);
    assert_eq!(read_all(&out), vec![(vec![1, 2], Value::Float(8.0))]);
}

#[test]
fn integer_tensor_refuses_floats_and_detects_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[4], DType::U8, AssembleOptions::default()).unwrap();
    assert!(matches!(
        b.push(&[0], 1.5f64),
        Err(Error::InvalidValue { .. })
    ));
    assert!(matches!(
        b.push(&[0], 256u32),
        Err(Error::InvalidValue { .. })
    ));
    b.push(&[3], 200u8).unwrap();
    b.push(&[3], 100u8).unwrap();
    let out = tmp.path().join("o.hrry");
    match b.finish(&out) {
        Err(Error::IntegerOverflow {
            coordinate,
            dtype: "u8",
        }) => assert_eq!(coordinate, vec![3]),
        other => panic!("{other:?}"),
    }
    assert!(dir_is_empty(tmp.path()), "a failed finish left files");
}

#[test]
fn error_policy_names_the_coordinate_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let shape = [100u64, 100];
    let mut opts = tiny(&shape, DType::F64, 1, spill.path());
    opts.duplicates = DuplicatePolicy::Error;
    let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
    for i in 0..100u64 {
        for j in 0..100u64 {
            b.push(&[i, j], 1.0).unwrap();
        }
    }
    b.push(&[42, 7], 2.0).unwrap();
    let out = tmp.path().join("o.hrry");
    match b.finish(&out) {
        Err(Error::DuplicateCoordinate { coordinate }) => assert_eq!(coordinate, vec![42, 7]),
        other => panic!("{other:?}"),
    }
    assert!(dir_is_empty(tmp.path()));
    assert!(dir_is_empty(spill.path()));
}

#[test]
fn drop_zeros_and_keep_zeros() {
    let tmp = tempfile::tempdir().unwrap();
    for drop in [false, true] {
        let opts = AssembleOptions {
            drop_zeros: drop,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&[5, 5], DType::F64, opts).unwrap();
        b.push(&[1, 1], 0.1).unwrap();
        b.push(&[1, 1], -0.1).unwrap();
        b.push(&[2, 2], 0.0).unwrap();
        b.push(&[3, 3], 1.0).unwrap();
        let out = tmp.path().join(format!("z{drop}.hrry"));
        let s = b.finish(&out).unwrap();
        assert_eq!(s.nnz, if drop { 1 } else { 3 });
        assert_eq!(s.dropped_zeros, if drop { 2 } else { 0 });
    }
}

#[test]
fn unwritable_output_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let shape = [50u64, 50];
    let mut b = Builder::new(
        &shape,
        DType::F64,
        tiny(&shape, DType::F64, 1, spill.path()),
    )
    .unwrap();
    for k in 0..20_000u64 {
        b.push(&[k % 50, (k * 7) % 50], 1.0).unwrap();
    }
    let out = tmp.path().join("no/such/dir/o.hrry");
    let e = b.finish(&out).unwrap_err();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("no/such/dir"),
        "{e}"
    );
    // Refused before the merge: the builder keeps everything and can
    // finish elsewhere.
    assert!(!b.is_finished());
    let s = b.finish(tmp.path().join("o.hrry")).unwrap();
    assert_eq!(s.contributions, 20_000);
    drop(b);
    assert!(dir_is_empty(spill.path()));
    // An unusable temp dir is refused when the builder is made, not at
    // the first spill thousands of pushes later.
    let opts = AssembleOptions {
        temp_dir: Some(tmp.path().join("missing")),
        ..tiny(&shape, DType::F64, 1, spill.path())
    };
    let Err(e) = Builder::new(&shape, DType::F64, opts) else {
        panic!("a missing temp_dir was accepted");
    };
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("missing"),
        "{e}"
    );
}

/// A builder of `tiny` budget holding 20,000 contributions in spill runs.
fn spilled_builder(spill: &Path) -> Builder {
    let shape = [50u64, 50];
    let mut b = Builder::new(&shape, DType::F64, tiny(&shape, DType::F64, 1, spill)).unwrap();
    for k in 0..20_000u64 {
        b.push(&[k % 50, (k * 7) % 50], 1.0).unwrap();
    }
    b
}

/// Issue 22: an output the rename cannot replace was found only after the
/// merge had spent the builder, losing every contribution. Each is now
/// refused first, the builder kept, nothing created.
#[test]
fn an_output_that_cannot_be_published_is_refused_before_the_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let existing = tmp.path().join("out");
    std::fs::create_dir(&existing).unwrap();
    std::os::unix::fs::symlink(&existing, tmp.path().join("link")).unwrap();
    let file = tmp.path().join("plain.txt");
    std::fs::write(&file, b"a file").unwrap();
    let with_slash = format!("{}/", tmp.path().join("new").display());
    let dot = format!("{}/.", existing.display());
    let long = tmp.path().join(format!("{}.hrry", "k".repeat(240)));
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (existing.clone(), "a directory, not a file"),
        (tmp.path().join("link"), "a directory, not a file"),
        (with_slash.into(), "names a directory, not a file"),
        (dot.into(), "names a directory, not a file"),
        (".".into(), "names a directory, not a file"),
        ("".into(), "the output path is empty"),
        (file.join("K.hrry"), "not a directory"),
        (long, "its temporary name adds"),
    ];
    let mut b = spilled_builder(spill.path());
    for (target, want) in &cases {
        let e = b.finish(target).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{}: {msg}", target.display());
        assert!(
            matches!(e.kind(), ErrorKind::Io | ErrorKind::Argument),
            "{}: {e:?}",
            target.display()
        );
        assert!(
            !b.is_finished(),
            "{}: the builder was spent",
            target.display()
        );
    }
    assert!(dir_is_empty(&existing));
    let mut left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["link", "out", "plain.txt"]);
    // The refusals kept every contribution: finish into the folder.
    let s = b.finish(existing.join("K.hrry")).unwrap();
    assert_eq!(s.contributions, 20_000);
    drop(b);
    assert!(dir_is_empty(spill.path()));
}

/// The uid the read-only folder test runs as when the tests run as root,
/// for whom every permission check passes: `nobody`.
const NOBODY: u32 = 65534;

/// Issue 22: a read-only output folder is refused by `finish` before the
/// merge (the builder kept), a read-only `temp_dir` by `Builder::new`. As
/// root the test runs itself again as `nobody`; it is skipped, saying
/// why, only when root may not switch user.
#[test]
fn read_only_folders_are_refused_and_the_builder_kept() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::process::CommandExt;
        let name = "assemble::read_only_folders_are_refused_and_the_builder_kept";
        let exe = std::env::current_exe().unwrap();
        let run = std::process::Command::new(&exe)
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .uid(NOBODY)
            .gid(NOBODY)
            .output();
        let o = match run {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                eprintln!(
                    "SKIPPED: running as root without the right to switch to uid {NOBODY} \
                     ({e}); the read-only folder checks need a user permissions apply to"
                );
                return;
            }
            Err(e) => panic!("cannot run {} as uid {NOBODY}: {e}", exe.display()),
        };
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("1 passed"),
            "as uid {NOBODY}:\n{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    let ro = tmp.path().join("read-only");
    std::fs::create_dir(&spill).unwrap();
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let shape = [50u64, 50];
    let opts = AssembleOptions {
        temp_dir: Some(ro.clone()),
        ..tiny(&shape, DType::F64, 1, &spill)
    };
    let Err(e) = Builder::new(&shape, DType::F64, opts) else {
        panic!("a read-only temp_dir was accepted");
    };
    let msg = e.to_string();
    assert_eq!(e.kind(), ErrorKind::Io, "{msg}");
    assert!(
        msg.contains("temp_dir") && msg.contains("read-only"),
        "{msg}"
    );
    let mut b = spilled_builder(&spill);
    let e = b.finish(ro.join("K.hrry")).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("output directory") && msg.contains("Permission denied"),
        "{msg}"
    );
    assert!(!b.is_finished());
    let s = b.finish(tmp.path().join("K.hrry")).unwrap();
    assert_eq!(s.contributions, 20_000);
    drop(b);
    assert!(dir_is_empty(&ro) && dir_is_empty(&spill));
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `finish` while a pusher is alive is refused and changes nothing: the
/// pusher and the builder go on pushing, and a later finish has it all.
#[test]
fn finish_with_a_live_pusher_is_refused_and_the_builder_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let mut b = spilled_builder(spill.path());
    let mut p = b.pusher().unwrap();
    p.push(&[1, 1], 2.0).unwrap();
    let out = tmp.path().join("K.hrry");
    let e = b.finish(&out).unwrap_err();
    assert!(matches!(e, Error::PushersAlive { alive: 1 }), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::State);
    assert!(e.to_string().contains("drop them before finish"), "{e}");
    assert!(!b.is_finished());
    assert!(!out.exists());
    p.push(&[1, 1], 3.0).unwrap();
    drop(p);
    b.push(&[1, 1], 4.0).unwrap();
    let s = b.finish(&out).unwrap();
    assert_eq!(s.contributions, 20_003);
    let f = HurrayFile::open(&out).unwrap();
    let before = (0..20_000u64)
        .filter(|k| k % 50 == 1 && (k * 7) % 50 == 1)
        .count() as f64;
    assert_eq!(
        f.only_tensor().unwrap().get(&[1, 1]).unwrap(),
        Value::Float(before + 9.0)
    );
}

#[test]
fn huge_shapes_use_wide_keys() {
    let tmp = tempfile::tempdir().unwrap();
    for shape in [
        vec![1u64 << 40, 1 << 40],
        vec![u64::MAX - 1; 5],
        vec![3u64; 64],
    ] {
        let rank = shape.len();
        let mut b = Builder::new(&shape, DType::F64, AssembleOptions::default()).unwrap();
        let mut oracle = BTreeMap::new();
        for k in 0..500u64 {
            let idx: Vec<u64> = (0..rank)
                .map(|d| (k * 2654435761 + d as u64 * 97) % shape[d].min(1000))
                .collect();
            b.push(&idx, 1.0).unwrap();
            *oracle.entry(idx).or_insert(0.0) += 1.0;
        }
        let out = tmp.path().join(format!("h{rank}.hrry"));
        b.finish(&out).unwrap();
        let got = read_all(&out);
        let want: Vec<(Vec<u64>, Value)> = oracle
            .into_iter()
            .map(|(k, v)| (k, Value::Float(v)))
            .collect();
        assert_eq!(got, want, "shape {shape:?}");
    }
}

#[test]
fn element_matrix_push_matches_individual_pushes() {
    let tmp = tempfile::tempdir().unwrap();
    let dofs = [3u64, 0, 7, 5];
    let local: Vec<f64> = (0..16).map(|x| x as f64 * 0.5 - 2.0).collect();
    let mut a = Builder::new(&[8, 8], DType::F64, AssembleOptions::default()).unwrap();
    let mut b = Builder::new(&[8, 8], DType::F64, AssembleOptions::default()).unwrap();
    for _ in 0..3 {
        a.push_element(&dofs, &local).unwrap();
        for (x, &r) in dofs.iter().enumerate() {
            for (y, &c) in dofs.iter().enumerate() {
                b.push(&[r, c], local[x * 4 + y]).unwrap();
            }
        }
    }
    assert!(matches!(
        a.push_element(&[1, 9], &[1.0; 4]),
        Err(Error::IndexOutOfRange { index: 9, .. })
    ));
    let pa = tmp.path().join("a.hrry");
    let pb = tmp.path().join("b.hrry");
    a.finish(&pa).unwrap();
    b.finish(&pb).unwrap();
    assert_eq!(std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
    let rows = [0u64, 1, 1];
    let cols = [2u64, 0, 0];
    let mut c = Builder::new(&[2, 3], DType::F32, AssembleOptions::default()).unwrap();
    c.push_coo(&rows, &cols, &[1.0f32, 2.0, 3.0]).unwrap();
    let pc = tmp.path().join("c.hrry");
    c.finish(&pc).unwrap();
    assert_eq!(
        read_all(&pc),
        vec![
            (vec![0, 2], Value::Float(1.0)),
            (vec![1, 0], Value::Float(5.0))
        ]
    );
}

/// Every byte of the budget is in a named part, on the kernel's path and
/// on the runs' path, and the summary lists them in the order taken.
#[test]
fn the_summary_names_the_budgets_parts_and_they_add_up_to_it() {
    let d = tempfile::tempdir().unwrap();
    let shape = [1u64 << 20, 1 << 20];
    let run = |n: u64, opts: AssembleOptions| {
        let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
        let mut p = b.pusher().unwrap();
        let mut rng = crate::common::Rng::new(n);
        for _ in 0..n {
            let (i, j) = (rng.below(shape[0]), rng.below(shape[1]));
            p.push(&[i, j], 1.0).unwrap();
        }
        drop(p);
        let s = b.finish(d.path().join("b.hrry")).unwrap();
        let total: u64 = s.budget_parts.iter().map(|p| p.1).sum();
        assert_eq!(total, s.memory_budget, "{:?}", s.budget_parts);
        s
    };
    let tiny = tiny(&shape, DType::F64, 2, d.path());
    let spilled = run(300_000, tiny.clone());
    assert!(spilled.runs_spilled > 0);
    let names: Vec<&str> = spilled.budget_parts.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        [
            "the output writer's buffers",
            "the spill writers and run blocks",
            "the chunks and sort scratch",
            "in-memory runs"
        ]
    );
    let kernel = run(
        1000,
        AssembleOptions {
            memory_budget: 64 << 20,
            ..tiny
        },
    );
    assert_eq!(kernel.runs, 0, "the kernel's path");
    assert_eq!(
        kernel.budget_parts.first().map(|p| p.0),
        Some("the file writer and in-place scratch")
    );
    assert_eq!(
        kernel.budget_parts.last().map(|p| p.0),
        Some("the workers' scratch")
    );
}

#[test]
fn too_small_budget_is_refused_with_the_minimum() {
    let e = Builder::new(
        &[10, 10],
        DType::F64,
        AssembleOptions {
            memory_budget: 1 << 20,
            ..AssembleOptions::default()
        },
    )
    .err();
    match e {
        Some(Error::BudgetTooSmall {
            budget,
            minimum,
            part,
        }) => {
            assert_eq!(budget, 1 << 20);
            assert_eq!(part, "the sorters' chunks of 4096 records");
            assert!(minimum > budget);
            let ok = AssembleOptions {
                memory_budget: minimum,
                ..AssembleOptions::default()
            };
            assert!(Builder::new(&[10, 10], DType::F64, ok).is_ok());
        }
        other => panic!("{other:?}"),
    }
    // 8 MiB works with the default thread count on these machines.
    let eight = AssembleOptions {
        memory_budget: 8 << 20,
        threads: 2,
        ..AssembleOptions::default()
    };
    assert!(Builder::new(&[1 << 20, 1 << 20], DType::F64, eight).is_ok());
}

/// Argument errors are `InvalidArgument`, and an input error keeps the
/// builder's typed error as its source.
#[test]
fn argument_errors_and_typed_input_causes() {
    let opts = AssembleOptions {
        threads: 1,
        memory_budget: 64 << 20,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[4, 4], DType::F64, opts).unwrap();
    assert!(matches!(
        b.push_many(&[1, 2, 3], &[1.0, 2.0]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.push_coo(&[1], &[1, 2], &[1.0]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.push_element(&[0, 1], &[1.0; 3]),
        Err(Error::InvalidArgument(_))
    ));
    // The builder keeps one pusher and threads = 1: a second one is still
    // welcome (the number of pushers is the caller's business).
    let mut second = b.pusher().unwrap();
    second.push(&[3, 3], 1.0).unwrap();
    drop(second);
    let text = b"0 0 1.5\n0 9 2.0\n";
    let e =
        coo_assembler::input::push_text(&mut b, &text[..], 2, DType::F64, "in.txt", &mut |_| {})
            .unwrap_err();
    assert_eq!(
        e.to_string(),
        "in.txt:line 2: contribution 1: index 9 in dimension 1 is out of range (extent 4)"
    );
    assert!(std::error::Error::source(&e).is_some());
    match e {
        Error::Input {
            cause: Some(cause), ..
        } => assert!(matches!(
            *cause,
            Error::IndexOutOfRange {
                index: 9,
                dim: 1,
                ..
            }
        )),
        other => panic!("{other:?}"),
    }
}
