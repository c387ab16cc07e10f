//! Lookups, typed views, content verification and property tests of the reader.

use crate::common;

use common::*;
use coo_assembler::element::F16 as f16;
use coo_assembler::internals::hurray::KvValue;
use coo_assembler::{DType, Error, Value, element::Element};
use coo_assembler::{HurrayFile, read::Problem, read::ReadOptions, read::Severity};
use proptest::prelude::*;
use std::collections::BTreeMap;

const PERMISSIVE: ReadOptions = ReadOptions {
    permissive: true,
    in_memory: false,
};

fn open(ts: &[T], kv: &[(String, KvValue)]) -> HurrayFile {
    HurrayFile::from_bytes(build(ts, kv, Opts::default()).0).unwrap()
}

fn open_p(ts: &[T]) -> HurrayFile {
    HurrayFile::from_bytes_with(&build(ts, &[], Opts::default()).0, PERMISSIVE).unwrap()
}

/// `f.verify()` without its notes: the files made here carry no checksums
/// unless a test adds them, and say so in a note per tensor.
fn verify(f: &HurrayFile) -> Vec<Problem> {
    f.verify()
        .into_iter()
        .filter(|p| p.severity != Severity::Note)
        .collect()
}

fn rules(p: &[Problem]) -> Vec<(&'static str, Option<u64>)> {
    p.iter().map(|p| (p.rule, p.entry)).collect()
}

#[test]
fn get_hit_and_miss_sorted() {
    let (b, _, _) = small();
    let f = HurrayFile::from_bytes(b).unwrap();
    let t = f.tensor("coo").unwrap();
    assert_eq!(t.get(&[1, 4]).unwrap(), Value::Float(-2.0));
    assert_eq!(t.get(&[3, 3]).unwrap(), Value::Float(2.0));
    assert_eq!(t.get(&[0, 1]).unwrap(), Value::Float(1.5));
    assert_eq!(t.get(&[0, 0]).unwrap(), Value::Float(0.0));
    assert_eq!(t.get(&[3, 4]).unwrap(), Value::Float(0.0));
    assert_eq!(t.find(&[2, 0]).unwrap(), Some(2));
    assert_eq!(t.find(&[2, 1]).unwrap(), None);
    assert!(matches!(
        t.get(&[1]),
        Err(Error::WrongIndexCount {
            expected: 2,
            got: 1,
            ..
        })
    ));
    let msg = t.get(&[1]).unwrap_err().to_string();
    assert!(msg.contains("expected 2 indices, got 1"), "{msg}");
    assert!(!msg.contains("contribution"), "{msg}");
    let msg = t.get(&[1, 5]).unwrap_err().to_string();
    assert!(
        msg.starts_with("position [1, 5]: index 5 in dimension 1"),
        "{msg}"
    );
    assert!(matches!(
        t.get(&[1, 5]),
        Err(Error::PositionOutOfRange {
            dim: 1,
            index: 5,
            extent: 5,
            ..
        })
    ));
    assert_eq!(t.statistics().unwrap().nnz, 4);
    assert!(t.is_sorted());
    assert_eq!(t.rank(), 2);
}

#[test]
fn get_on_unsorted_files_and_zero_types() {
    let t = tensor::<i32>(
        "i",
        &[10],
        &[(vec![7], -3), (vec![2], 5), (vec![9], 1)],
        false,
    );
    let u = tensor::<u16>("u", &[3, 3], &[(vec![2, 2], 9), (vec![0, 1], 4)], false);
    let f = open(&[t, u], &[]);
    let i = f.tensor("i").unwrap();
    assert_eq!(i.get(&[2]).unwrap(), Value::Int(5));
    assert_eq!(i.get(&[3]).unwrap(), Value::Int(0));
    let u = f.tensor("u").unwrap();
    assert_eq!(u.get(&[0, 1]).unwrap(), Value::UInt(4));
    assert_eq!(u.get(&[1, 1]).unwrap(), Value::UInt(0));
    assert!(matches!(u.lower_bound(&[0, 0]), Err(Error::Unsupported(_))));
    assert!(matches!(u.prefix_range(&[0]), Err(Error::Unsupported(_))));
    assert!(verify(&f).is_empty(), "{:?}", verify(&f));
    // Without checksums, each tensor gets a note, and nothing else.
    let notes: Vec<_> = f
        .verify()
        .into_iter()
        .map(|p| (p.severity, p.rule, p.tensor))
        .collect();
    assert_eq!(
        notes,
        [
            (Severity::Note, "no-checksums", Some("i".to_string())),
            (Severity::Note, "no-checksums", Some("u".to_string())),
        ]
    );
}

#[test]
fn lower_bound_prefix_range_and_iter_order() {
    let entries: Vec<(Vec<u64>, f64)> = vec![
        (vec![0, 0, 1], 1.0),
        (vec![0, 2, 0], 2.0),
        (vec![2, 0, 0], 3.0),
        (vec![2, 0, 3], 4.0),
        (vec![2, 1, 0], 5.0),
        (vec![4, 4, 4], 6.0),
    ];
    let f = open(&[tensor("t", &[5, 5, 5], &entries, true)], &[]);
    let t = f.only_tensor().unwrap();
    assert_eq!(t.lower_bound(&[0, 0, 0]).unwrap(), 0);
    assert_eq!(t.lower_bound(&[0, 2, 0]).unwrap(), 1);
    assert_eq!(t.lower_bound(&[1, 0, 0]).unwrap(), 2);
    assert_eq!(t.lower_bound(&[9, 9, 9]).unwrap(), 6);
    assert_eq!(t.prefix_range(&[0]).unwrap(), 0..2);
    assert_eq!(t.prefix_range(&[1]).unwrap(), 2..2);
    assert_eq!(t.prefix_range(&[2]).unwrap(), 2..5);
    assert_eq!(t.prefix_range(&[2, 0]).unwrap(), 2..4);
    assert_eq!(t.prefix_range(&[4, 4, 4]).unwrap(), 5..6);
    assert_eq!(t.prefix_range(&[3]).unwrap(), 5..5);
    assert!(matches!(
        t.prefix_range(&[]),
        Err(Error::WrongIndexCount { .. })
    ));
    assert!(matches!(
        t.prefix_range(&[1, 1, 1, 1]),
        Err(Error::WrongIndexCount { .. })
    ));
    let got: Vec<(Vec<u64>, Value)> = t.iter().map(|(i, v)| (i.to_vec(), v)).collect();
    let want: Vec<(Vec<u64>, Value)> = entries
        .iter()
        .map(|(i, v)| (i.clone(), Value::Float(*v)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(t.index(3), &[2, 0, 3]);
    assert_eq!(t.value(4), Value::Float(5.0));
}

#[test]
fn several_tensors_by_name_and_typed_values() {
    let a = tensor::<f32>("a", &[4], &[(vec![1], 1.0), (vec![3], 3.0)], true);
    let b = tensor::<i64>("b.x", &[2, 2], &[(vec![1, 1], -7)], true);
    let c = tensor::<f16>("c", &[8], &[(vec![5], f16::from_f32(0.5))], true);
    let f = open(&[a, b, c], &[]);
    assert_eq!(f.tensor_names().collect::<Vec<_>>(), ["a", "b.x", "c"]);
    assert_eq!(f.tensors().count(), 3);
    assert_eq!(f.tensor("a").unwrap().values::<f32>().unwrap(), &[1.0, 3.0]);
    assert_eq!(f.tensor("b.x").unwrap().values::<i64>().unwrap(), &[-7]);
    assert_eq!(
        f.tensor("b.x").unwrap().get(&[1, 1]).unwrap(),
        Value::Int(-7)
    );
    assert_eq!(f.tensor("c").unwrap().get(&[5]).unwrap(), Value::Float(0.5));
    match f.tensor("a").unwrap().values::<i32>() {
        Err(e @ Error::TypeMismatch { .. }) => {
            assert_eq!(e.to_string(), "tensor \"a\" holds f32 values, not i32");
        }
        other => panic!("expected TypeMismatch, got {other:?}"),
    }
    assert!(f.tensor("a").unwrap().values::<f64>().is_err());
    match f.tensor("zz") {
        Err(Error::TensorNotFound { name, available }) => {
            assert_eq!(name, "zz");
            assert!(available.contains("\"b.x\""), "{available}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(f.only_tensor(), Err(Error::TensorNotFound { .. })));
    let empty = open(&[], &[]);
    assert!(empty.only_tensor().is_err());
    assert_eq!(empty.tensors().count(), 0);
}

#[test]
fn huge_shape_works() {
    let n = 1u64 << 40;
    let mut t = tensor::<f64>(
        "big",
        &[n, n],
        &[
            (vec![0, n - 1], 1.0),
            (vec![n - 1, 0], 2.0),
            (vec![n - 1, n - 1], -3.0),
        ],
        true,
    );
    t.stats = Some(stats_for(&t));
    let kv = checksums(&t);
    let f = open(&[t], &kv);
    let t = f.only_tensor().unwrap();
    assert_eq!(t.get(&[n - 1, 0]).unwrap(), Value::Float(2.0));
    assert_eq!(t.get(&[n - 2, 0]).unwrap(), Value::Float(0.0));
    assert_eq!(t.prefix_range(&[n - 1]).unwrap(), 1..3);
    assert!(verify(&f).is_empty(), "{:?}", verify(&f));
    assert_eq!(t.shape(), &[n, n]);
}

#[test]
fn empty_tensor() {
    let t = tensor::<u8>("e", &[3, 0], &[], true);
    let f = open(&[t], &[]);
    let t = f.only_tensor().unwrap();
    assert_eq!(t.nnz(), 0);
    assert_eq!(t.prefix_range(&[1]).unwrap(), 0..0);
    assert!(t.get(&[0, 0]).is_err());
    assert!(verify(&f).is_empty());
}

#[test]
fn reference_writer_padding_and_empty_last_tensor() {
    let a = tensor::<f32>("a", &[4], &[(vec![1], 1.0)], true);
    let e = tensor::<f32>("empty", &[4, 4], &[], true);
    for ts in [
        vec![a.clone()],
        vec![a.clone(), e.clone()],
        vec![e.clone()],
        vec![e, a],
    ] {
        let opts = Opts {
            pad_last_to_a: false,
            ..Opts::default()
        };
        let (b, l) = build(&ts, &[], opts);
        let f = HurrayFile::from_bytes(b.clone()).unwrap();
        assert!(verify(&f).is_empty());
        assert!(l.index_offset < l.indices_offsets.last().unwrap() + 4096);
        if let Ok(t) = f.tensor("empty") {
            assert_eq!(t.nnz(), 0);
            assert_eq!(t.get(&[1, 1]).unwrap(), Value::Float(0.0));
            assert_eq!(t.values::<f32>().unwrap(), &[] as &[f32]);
        }
        if let Ok(t) = f.tensor("a") {
            assert_eq!(t.get(&[1]).unwrap(), Value::Float(1.0));
        }
        assert_eq!(f.tensor_count(), ts.len());
    }
}

#[test]
fn verify_index_out_of_bounds() {
    let t = tensor::<f32>("t", &[4, 4], &[(vec![0, 1], 1.0), (vec![2, 9], 2.0)], true);
    let f = open(&[t], &[]);
    let p = verify(&f);
    assert_eq!(rules(&p), [("index-out-of-bounds", Some(1))]);
    assert!(p[0].detail.contains("dimension 1"), "{}", p[0]);
    let s = p[0].to_string();
    assert!(
        s.contains("index-out-of-bounds") && s.contains("\"t\"") && s.contains("entry 1"),
        "{s}"
    );
}

#[test]
fn verify_not_sorted() {
    let t = tensor::<f32>(
        "t",
        &[4, 4],
        &[(vec![0, 1], 1.0), (vec![2, 2], 2.0), (vec![1, 3], 3.0)],
        true,
    );
    let f = open(&[t], &[]);
    assert_eq!(rules(&verify(&f)), [("not-sorted", Some(2))]);
}

#[test]
fn verify_duplicate_sorted_and_strict_get() {
    let t = tensor::<f32>(
        "t",
        &[4, 4],
        &[(vec![0, 1], 1.0), (vec![2, 2], 2.0), (vec![2, 2], 3.0)],
        true,
    );
    let (b, layout) = build(&[t], &[], Opts::default());
    let f = HurrayFile::from_bytes(b.clone()).unwrap();
    assert_eq!(rules(&verify(&f)), [("duplicate", Some(2))]);
    let e = err_of(f.only_tensor().unwrap().get(&[2, 2]));
    assert!(e.contains("stored twice"), "{e}");
    // The real offset of the second copy's indices, not "byte 0".
    let second = layout.indices_offsets[0] + 2 * 2 * 8;
    match f.only_tensor().unwrap().get(&[2, 2]) {
        Err(Error::InvalidFile { offset, .. }) => assert_eq!(offset, second),
        other => panic!("{other:?}"),
    }
    let f = HurrayFile::from_bytes_with(&b, PERMISSIVE).unwrap();
    assert_eq!(
        f.only_tensor().unwrap().get(&[2, 2]).unwrap(),
        Value::Float(2.0)
    );
}

#[test]
fn verify_duplicate_unsorted() {
    let t = tensor::<i16>(
        "t",
        &[9],
        &[
            (vec![5], 1),
            (vec![1], 2),
            (vec![8], 3),
            (vec![1], 4),
            (vec![0], 5),
        ],
        false,
    );
    let f = open(std::slice::from_ref(&t), &[]);
    assert_eq!(rules(&verify(&f)), [("duplicate", Some(3))]);
    assert!(verify(&f)[0].detail.contains("entry 1"));
    assert!(err_of(f.only_tensor().unwrap().get(&[1])).contains("stored twice"));
    let f = open_p(&[t]);
    assert_eq!(f.only_tensor().unwrap().get(&[1]).unwrap(), Value::Int(2));
    // Unsorted order with is_sorted = 1: not-sorted and a non-adjacent duplicate.
    let t = tensor::<i16>("t", &[9], &[(vec![1], 1), (vec![5], 2), (vec![1], 3)], true);
    let f = open(&[t], &[]);
    assert_eq!(
        rules(&verify(&f)),
        [("not-sorted", Some(2)), ("duplicate", Some(2))]
    );
}

#[test]
fn verify_statistics_inconsistent() {
    let mut t = tensor::<f32>("t", &[4, 4], &[(vec![0, 1], 1.0), (vec![2, 2], -2.0)], true);
    let mut s = stats_for(&t);
    assert_eq!(s.value_min, -2.0);
    assert_eq!(s.value_max, 1.0);
    s.value_max = 5.0;
    s.value_mean += 0.1;
    t.stats = Some(s);
    let f = open(std::slice::from_ref(&t), &[]);
    let p = verify(&f);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p.iter().all(|p| p.rule == "statistics-mismatch"));
    assert!(p.iter().any(|p| p.detail.contains("value_max")));
    assert!(p.iter().any(|p| p.detail.contains("value_mean")));
    // sparsity contradicting the shape: strict open refuses, permissive verify reports.
    let mut s = stats_for(&t);
    s.sparsity_ratio = 0.5;
    t.stats = Some(s);
    let b = build(&[t], &[], Opts::default()).0;
    assert!(err_of(HurrayFile::from_bytes(b.clone())).contains("sparsity_ratio"));
    let f = HurrayFile::from_bytes_with(&b, PERMISSIVE).unwrap();
    assert_eq!(rules(&verify(&f)), [("statistics-mismatch", None)]);
}

#[test]
fn verify_checksum_mismatch() {
    let (mut b, l, _) = small();
    b[l.values_offsets[0] as usize] ^= 1;
    let f = HurrayFile::from_bytes(b).unwrap();
    let p = verify(&f);
    assert!(
        p.iter()
            .any(|p| p.rule == "checksum-mismatch" && p.detail.contains("values")),
        "{p:?}"
    );
    let (mut b, l, _) = small();
    b[l.indices_offsets[0] as usize + 8] ^= 2; // (0,1) -> (0,3)
    let f = HurrayFile::from_bytes(b).unwrap();
    let p = verify(&f);
    assert_eq!(rules(&p), [("checksum-mismatch", None)]);
    assert!(p[0].detail.contains("indices"));
    let orphan = vec![(
        "coo_assembler.xxh3.nope.values".to_string(),
        KvValue::U64(1),
    )];
    let (b, _, t) = small();
    drop(b);
    let f = open(&[t], &orphan);
    assert_eq!(rules(&verify(&f)), [("checksum-orphan", None)]);
}

#[test]
fn problems_are_capped_per_rule() {
    let entries: Vec<(Vec<u64>, u8)> = (0..150).map(|i| (vec![i + 10], 1)).collect();
    let f = open_p(&[tensor("t", &[5], &entries, true)]);
    let p = verify(&f);
    assert_eq!(p.len(), 101);
    assert_eq!(p[100].rule, "index-out-of-bounds-more");
    assert!(p[100].detail.contains("and 50 more"), "{}", p[100]);
}

fn check_against_btree<E: Element + Copy>(
    rank: usize,
    ext: u64,
    coords: Vec<Vec<u64>>,
    vals: Vec<E>,
    probes: Vec<Vec<u64>>,
) {
    let mut m: BTreeMap<Vec<u64>, E> = BTreeMap::new();
    for (c, v) in coords.into_iter().zip(vals) {
        m.insert(c, v);
    }
    let entries: Vec<(Vec<u64>, E)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let shape = vec![ext; rank];
    let t = tensor("p", &shape, &entries, true);
    let f = open(&[t], &[]);
    let t = f.only_tensor().unwrap();
    assert!(verify(&f).is_empty());
    for (k, v) in &m {
        assert_eq!(t.get(k).unwrap(), v.to_value());
    }
    let zero = match E::DTYPE {
        d if d.is_float() => Value::Float(0.0),
        d if d.is_signed_int() => Value::Int(0),
        _ => Value::UInt(0),
    };
    for p in &probes {
        let want = m.get(p).map_or(zero, |v| v.to_value());
        assert_eq!(t.get(p).unwrap(), want);
        for k in 1..=rank {
            let r = t.prefix_range(&p[..k]).unwrap();
            let lo = entries
                .iter()
                .position(|(c, _)| c[..k] >= p[..k])
                .unwrap_or(entries.len());
            let n = entries.iter().filter(|(c, _)| c[..k] == p[..k]).count();
            assert_eq!(r, lo as u64..(lo + n) as u64);
        }
        let lb = entries
            .iter()
            .position(|(c, _)| c >= p)
            .unwrap_or(entries.len());
        assert_eq!(t.lower_bound(p).unwrap(), lb as u64);
    }
}

fn coords(
    rank: usize,
    ext: u64,
    n: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<Vec<u64>>> {
    prop::collection::vec(prop::collection::vec(0..ext, rank), n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sorted_lookups_agree_with_btreemap(
        rank in 1usize..=4,
        ext in 1u64..6,
        dtype_pick in 0u8..4,
        seed in prop::collection::vec(any::<i32>(), 0..40),
        raw in prop::collection::vec(prop::collection::vec(0u64..100, 4), 0..40),
        probe_raw in prop::collection::vec(prop::collection::vec(0u64..100, 4), 1..20),
    ) {
        let cs: Vec<Vec<u64>> = raw.iter().map(|c| c[..rank].iter().map(|x| x % ext).collect()).collect();
        let ps: Vec<Vec<u64>> = probe_raw.iter().map(|c| c[..rank].iter().map(|x| x % ext).collect()).collect();
        let n = cs.len().min(seed.len());
        let cs = cs[..n].to_vec();
        let s = &seed[..n];
        match dtype_pick {
            0 => check_against_btree(rank, ext, cs, s.iter().map(|&v| v as f32).collect(), ps),
            1 => check_against_btree(rank, ext, cs, s.iter().map(|&v| v as f64 * 0.5).collect(), ps),
            2 => check_against_btree(rank, ext, cs, s.to_vec(), ps),
            _ => check_against_btree(rank, ext, cs, s.iter().map(|&v| v as u8).collect(), ps),
        }
    }

    #[test]
    fn unsorted_duplicates_found(c in coords(2, 4, 0..30)) {
        let entries: Vec<(Vec<u64>, u32)> = c.iter().map(|k| (k.clone(), 1)).collect();
        let f = open_p(&[tensor("u", &[4, 4], &entries, false)]);
        let got: Vec<u64> = verify(&f).iter().filter(|p| p.rule == "duplicate").filter_map(|p| p.entry).collect();
        let want: Vec<u64> = (0..c.len()).filter(|&j| c[..j].contains(&c[j])).map(|j| j as u64).collect();
        let mut got = got;
        got.sort();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn dtype_names() {
    assert_eq!(DType::F32.name(), "f32");
}

/// `cargo test --release --test suite -- --ignored read_access::get_throughput --nocapture`
#[test]
#[ignore]
fn get_throughput_10m() {
    let n: u64 = 10_000_000;
    let side = 1u64 << 20;
    let mut t = T {
        name: "big".into(),
        dtype: DType::F32,
        shape: vec![side, side],
        indices: Vec::with_capacity(2 * n as usize),
        values: Vec::with_capacity(4 * n as usize),
        is_sorted: true,
        stats: None,
    };
    for i in 0..n {
        let lin = i * 97;
        t.indices.push(lin / side);
        t.indices.push(lin % side);
        (i as f32).write_le(&mut t.values);
    }
    let (b, _) = build(std::slice::from_ref(&t), &[], Opts::default());
    t.is_sorted = false;
    let (ub, _) = build(std::slice::from_ref(&t), &[], Opts::default());
    drop(t);
    let uf = HurrayFile::from_bytes(ub).unwrap();
    let start = std::time::Instant::now();
    let p = verify(&uf);
    println!(
        "verify unsorted (hash-partitioned duplicate search): {:?} ({} problems)",
        start.elapsed(),
        p.len()
    );
    drop(uf);
    let f = HurrayFile::from_bytes(b).unwrap();
    let c = f.only_tensor().unwrap();
    let q = 2_000_000u64;
    let mut rng = common::Rng::new(1);
    let start = std::time::Instant::now();
    let mut hits = 0u64;
    for _ in 0..q {
        let lin = rng.below(n * 97);
        if !c.get(&[lin / side, lin % side]).unwrap().is_zero() {
            hits += 1;
        }
    }
    let dt = start.elapsed();
    println!(
        "{q} random gets on {n} entries: {:.0} lookups/s ({hits} hits)",
        q as f64 / dt.as_secs_f64()
    );
    let start = std::time::Instant::now();
    let p = verify(&f);
    println!("verify: {:?} ({} problems)", start.elapsed(), p.len());
}
