//! Errors of the streaming writer: typed input errors, invalid options,
//! poisoning, and injected I/O faults at every operation. In every failing
//! case no temporary file may remain and a pre-existing target must be
//! byte-identical.

use coo_assembler::internals::fs::ctx::{FaultKind, FaultMode, FaultPlan, IoCtx};
use coo_assembler::internals::hurray::KvValue;
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{DType, Error, Result};
use std::path::Path;

const OLD: &[u8] = b"previous content of the target, must survive";

/// A directory with a pre-existing target file.
fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.hurray");
    std::fs::write(&p, OLD).unwrap();
    (dir, p)
}

/// Only the target remains, with its old content.
fn assert_untouched(dir: &Path, target: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["out.hurray"], "leftover files");
    assert_eq!(std::fs::read(target).unwrap(), OLD);
}

fn small_opts(io: IoCtx) -> WriteOptions {
    WriteOptions {
        buffer_bytes: 4096,
        io,
        ..WriteOptions::default()
    }
}

#[test]
fn input_errors_are_typed_and_leave_the_target_alone() {
    type Case = fn(&mut coo_assembler::write::TensorWriter<'_>) -> Error;
    let cases: [(&str, Case); 6] = [
        ("out of order", |t| t.push(&[1, 0], 1.0f32).unwrap_err()),
        ("duplicate", |t| t.push(&[1, 1], 1.0f32).unwrap_err()),
        ("wrong rank", |t| t.push(&[2], 1.0f32).unwrap_err()),
        ("out of range", |t| t.push(&[2, 4], 1.0f32).unwrap_err()),
        ("wrong dtype", |t| t.push(&[2, 2], 1.0f64).unwrap_err()),
        ("wrong width", |t| {
            t.push_le(&[2, 2], &[0; 8], 0.0).unwrap_err()
        }),
    ];
    for (what, case) in cases {
        let (dir, p) = setup();
        let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
        let mut t = fw.begin_tensor("t", DType::F32, &[4, 4]).unwrap();
        t.push(&[0, 3], 1.0f32).unwrap();
        t.push(&[1, 1], 2.0f32).unwrap();
        let e = case(&mut t);
        match (what, &e) {
            (
                "out of order",
                Error::OutOfOrder {
                    entry,
                    previous,
                    got,
                },
            )
            | (
                "duplicate",
                Error::OutOfOrder {
                    entry,
                    previous,
                    got,
                },
            ) => {
                assert_eq!(*entry, 2);
                assert_eq!(previous, &[1, 1]);
                assert_eq!(
                    got,
                    if what == "duplicate" {
                        &[1, 1]
                    } else {
                        &[1, 0]
                    }
                );
            }
            (
                "wrong rank",
                Error::WrongRank {
                    contribution: 2,
                    expected: 2,
                    got: 1,
                },
            ) => {}
            (
                "out of range",
                Error::IndexOutOfRange {
                    contribution: 2,
                    dim: 1,
                    index: 4,
                    extent: 4,
                },
            ) => {}
            (
                "wrong dtype" | "wrong width",
                Error::InvalidValue {
                    contribution: 2, ..
                },
            ) => {}
            _ => panic!("{what}: unexpected error {e:?}"),
        }
        // The refused entry was not written.
        assert_eq!(t.nnz(), 2, "{what}");
        drop(t);
        drop(fw);
        assert_untouched(dir.path(), &p);
    }
}

#[test]
fn input_errors_do_not_poison() {
    let (_dir, p) = setup();
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let mut t = fw.begin_tensor("t", DType::U16, &[5]).unwrap();
    t.push(&[1], 7u16).unwrap();
    assert!(t.push(&[1], 8u16).is_err());
    assert!(t.push(&[9], 8u16).is_err());
    t.push(&[3], 9u16).unwrap();
    let s = t.finish().unwrap();
    assert_eq!(s.nnz, 2);
    let st = s.statistics.unwrap();
    assert_eq!(
        (st.value_min, st.value_max, st.value_mean),
        (0.0, 9.0, 16.0 / 5.0)
    );
    fw.finish().unwrap();
    assert_ne!(std::fs::read(&p).unwrap(), OLD);
}

#[test]
fn dropped_tensor_writer_poisons_the_file_writer() {
    let (dir, p) = setup();
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let mut t = fw.begin_tensor("t", DType::I64, &[10]).unwrap();
    t.push(&[0], 5i64).unwrap();
    drop(t);
    assert!(matches!(
        fw.begin_tensor("u", DType::I64, &[10]),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(fw.finish(), Err(Error::Poisoned(_))));
    assert_untouched(dir.path(), &p);
}

#[test]
fn invalid_options_and_names() {
    let (dir, p) = setup();
    for a in [0u32, 1000, 2048, 4097, 4 << 20] {
        let o = WriteOptions {
            alignment: a,
            ..WriteOptions::default()
        };
        assert!(
            matches!(FileWriter::create(&p, o), Err(Error::InvalidOptions(_))),
            "{a}"
        );
    }
    let o = WriteOptions {
        buffer_bytes: 10,
        ..WriteOptions::default()
    };
    assert!(matches!(
        FileWriter::create(&p, o),
        Err(Error::InvalidOptions(_))
    ));

    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let bad_shapes: [&[u64]; 3] = [&[], &[2; 65], &[3, u64::MAX]];
    for s in bad_shapes {
        assert!(matches!(
            fw.begin_tensor("x", DType::F32, s),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        fw.begin_tensor("", DType::F32, &[1]),
        Err(Error::InvalidArgument(_))
    ));
    fw.begin_tensor("x", DType::F32, &[1])
        .unwrap()
        .finish()
        .unwrap();
    assert!(matches!(
        fw.begin_tensor("x", DType::F32, &[1]),
        Err(Error::InvalidArgument(_))
    ));
    fw.add_metadata("k", KvValue::Bool(true)).unwrap();
    for (k, v) in [
        ("k", KvValue::Bool(false)),
        ("", KvValue::U64(1)),
        ("coo_assembler.writer", KvValue::U64(1)),
        (
            "mixed",
            KvValue::Array(vec![KvValue::U64(1), KvValue::I64(1)]),
        ),
        (
            "nested",
            KvValue::Array(vec![KvValue::Array(vec![KvValue::U64(1)])]),
        ),
    ] {
        assert!(
            matches!(fw.add_metadata(k, v), Err(Error::InvalidArgument(_))),
            "{k:?}"
        );
    }
    // Rejected calls do not poison: the file can still be written.
    fw.finish().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn io_error_poisons_the_writer() {
    let (dir, p) = setup();
    let io = IoCtx::with_faults(FaultPlan {
        at: 0,
        mode: FaultMode::Once,
        kind: FaultKind::Io,
        only_op: Some("write"),
    });
    let mut fw = FileWriter::create(&p, small_opts(io)).unwrap();
    let mut t = fw.begin_tensor("t", DType::F64, &[1 << 30]).unwrap();
    let mut failed_at = None;
    for i in 0..10_000u64 {
        if let Err(e) = t.push(&[i], i as f64) {
            assert!(matches!(e, Error::Io { op: "write", .. }), "{e:?}");
            failed_at = Some(i);
            break;
        }
    }
    let i = failed_at.expect("an injected write fault");
    // The fault was once only, but the writer never goes on after it.
    assert!(matches!(t.push(&[i + 1], 0.0f64), Err(Error::Poisoned(_))));
    assert!(matches!(t.finish(), Err(Error::Poisoned(_))));
    assert!(matches!(fw.finish(), Err(Error::Poisoned(_))));
    assert_untouched(dir.path(), &p);
}

/// A small two-tensor file that exercises every path: buffer flushes, the
/// side file for indices, the copy, descriptor writes, KV, index, trailer.
fn write_two(path: &Path, io: IoCtx) -> Result<u64> {
    let mut fw = FileWriter::create(path, small_opts(io))?;
    fw.add_metadata("purpose", KvValue::String("fault test".into()))?;
    let mut t = fw.begin_tensor("a", DType::F64, &[100, 100])?;
    for k in 0..700u64 {
        t.push(&[k / 7, (k % 7) * 13], k as f64 - 300.0)?;
    }
    t.finish()?;
    let mut t = fw.begin_tensor("b", DType::I16, &[50])?;
    for k in 0..10u64 {
        t.push(&[k * 5], k as i16)?;
    }
    t.finish()?;
    Ok(fw.finish()?.bytes)
}

#[test]
fn every_fault_point_fails_cleanly() {
    let ref_dir = tempfile::tempdir().unwrap();
    let ref_path = ref_dir.path().join("out.hurray");
    write_two(&ref_path, IoCtx::new()).unwrap();
    let reference = std::fs::read(&ref_path).unwrap();

    let mut points = 0u64;
    for n in 0.. {
        let (dir, p) = setup();
        let io = IoCtx::with_faults(FaultPlan {
            at: n,
            mode: FaultMode::Once,
            kind: FaultKind::NoSpace,
            only_op: None,
        });
        match write_two(&p, io.clone()) {
            Ok(bytes) => {
                assert_eq!(bytes as usize, reference.len());
                assert_eq!(std::fs::read(&p).unwrap(), reference);
                // The leftover sweep is best effort: a fault there is
                // survived. Otherwise we are past the last operation.
                let injected = io.injected();
                if injected.is_empty() {
                    break;
                }
                assert!(
                    injected
                        .iter()
                        .all(|op| ["list directory", "lstat"].contains(op)),
                    "op {n}: fault in {injected:?} but the write succeeded"
                );
                continue;
            }
            Err(Error::Io { op, source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::ENOSPC), "op {n}");
                points += 1;
                if op == "fsync directory" {
                    // After the rename: the new, complete file is in place.
                    assert_eq!(std::fs::read(&p).unwrap(), reference, "op {n}");
                    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
                } else {
                    assert_untouched(dir.path(), &p);
                }
            }
            Err(e) => panic!("op {n}: expected an I/O error, got {e:?}"),
        }
        assert!(n < 1000, "no run succeeded");
    }
    eprintln!("{points} fault points");
    assert!(points > 10, "only {points} fault points");
}

/// A finish stopped through the builder's `Stopper` (as Python does on
/// Ctrl-C) publishes nothing and leaves no temporary file, whether the
/// contributions were kept for the in-memory kernel or spilled as runs.
#[test]
fn a_stopped_finish_publishes_nothing() {
    use coo_assembler::{AssembleOptions, Builder};
    for (budget, spills) in [(256u64 << 20, false), (4 << 20, true)] {
        let (dir, target) = setup();
        let spill = tempfile::tempdir().unwrap();
        let opts = AssembleOptions {
            memory_budget: budget,
            temp_dir: Some(spill.path().to_path_buf()),
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&[1 << 20, 1 << 20], DType::F64, opts).unwrap();
        for i in 0..2_000_000u64 {
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44;
            b.push(&[k, (k * 7) % (1 << 20)], 1.0).unwrap();
        }
        let stopper = b.stopper();
        stopper.stop();
        let e = b.finish(&target).unwrap_err();
        assert!(matches!(e, Error::Stopped), "budget {budget}: {e}");
        assert!(e.to_string().contains("nothing was written"), "{e}");
        assert_untouched(dir.path(), &target);
        // The builder is spent, and its runs are gone with it.
        assert!(b.is_finished());
        assert!(matches!(b.finish(&target), Err(Error::Finished)));
        drop(b);
        let left = std::fs::read_dir(spill.path()).unwrap().count();
        assert_eq!(
            left, 0,
            "budget {budget} (spills: {spills}): spill files left"
        );
    }
}
