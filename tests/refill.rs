//! Plans and refills (`coo_assembler::Plan`, issue 24) against the
//! builder: for random coordinates with heavy duplicates, every layout,
//! the duplicate policies, every kind of element type and ranks, a refill's
//! result (values and structure) is what `Builder` + `finish` write for
//! the same contributions, bit for bit, and refilling again with other
//! values gives their assembly; on many threads as on one; errors name
//! what a push names.

use coo_assembler::internals::assemble::direct::{
    Assembled, ComplexOut, DirectValue, OutIndex, OutValue,
};
use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, Plan, builder::PushValue,
    options::DuplicatePolicy, options::NonFinitePolicy, options::OutputLayout, read::Tensor,
};
use num_complex::Complex;
use proptest::prelude::*;

#[derive(Debug, PartialEq)]
struct Flat {
    values: Vec<u8>,
    indices: Vec<u64>,
    pointers: Vec<u64>,
}

fn flat_of<O: coo_assembler::element::Element, J: OutIndex>(a: &Assembled<O, J>) -> Flat {
    let mut values = Vec::new();
    for &v in &a.values {
        v.write_le(&mut values);
    }
    Flat {
        values,
        indices: a.indices.iter().map(|x| x.to_u64()).collect(),
        pointers: a.pointers.iter().map(|x| x.to_u64()).collect(),
    }
}

fn builder_result<V: PushValue>(
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
    idx: &[Vec<u32>],
    values: &[V],
) -> Result<Flat, Error> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("b.hrry");
    let opts = AssembleOptions {
        temp_dir: Some(dir.path().to_path_buf()),
        // The reference is the sorters' path, not the kernel.
        in_memory_kernel: false,
        ..opts.clone()
    };
    let mut b = Builder::new(shape, dtype, opts)?;
    let mut tuple = vec![0u64; shape.len()];
    for (i, &v) in values.iter().enumerate() {
        for (t, d) in tuple.iter_mut().zip(idx) {
            *t = d[i] as u64;
        }
        b.push(&tuple, v)?;
    }
    b.finish(&path)?;
    let f = HurrayFile::open(&path)?;
    Ok(match f.tensor_view("coo")? {
        Tensor::Compressed(c) => Flat {
            values: c.values_bytes().to_vec(),
            indices: c.indices().to_vec(),
            pointers: c.pointers().to_vec(),
        },
        Tensor::Coo(c) => Flat {
            values: c.values_bytes().to_vec(),
            indices: c.indices().to_vec(),
            pointers: Vec::new(),
        },
        Tensor::Csf(_) => unreachable!("plans are never CSF"),
    })
}

fn plan_of(
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
    idx: &[Vec<u32>],
) -> Result<Plan, Error> {
    let dims: Vec<&[u32]> = idx.iter().map(|d| d.as_slice()).collect();
    Plan::new(&dims, shape, dtype, opts, None)
}

/// Coordinates drawn from few distinct values (so most repeat), and two
/// value sets: a bit pattern per contribution mapped to values that
/// cancel, overflow or repeat.
#[derive(Debug, Clone)]
struct Case {
    shape: Vec<u64>,
    idx: Vec<Vec<u32>>,
    a: Vec<u8>,
    b: Vec<u8>,
}

fn case(rank: usize) -> impl Strategy<Value = Case> {
    (proptest::collection::vec(1u64..9, rank), 0usize..300).prop_flat_map(move |(shape, n)| {
        let dims: Vec<_> = shape
            .iter()
            .map(|&e| proptest::collection::vec(0u32..e as u32, n))
            .collect();
        (
            Just(shape),
            dims,
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(any::<u8>(), n),
        )
            .prop_map(|(shape, idx, a, b)| Case { shape, idx, a, b })
    })
}

fn float_of(c: u8) -> f64 {
    match c % 8 {
        0 => 1e300 * f64::from(c),
        1 => -1e300 * f64::from(c),
        2 => 1e-300,
        3 => 0.1 * f64::from(c),
        4 => -0.0,
        5 => 2f64.powi(60) + f64::from(c),
        6 => -(2f64.powi(60)),
        _ => f64::from(c) - 128.0,
    }
}

fn int_of(c: u8) -> i64 {
    match c % 4 {
        0 => i64::from(c),
        1 => -i64::from(c),
        2 => i64::from(i32::MAX) / 3,
        _ => 7,
    }
}

fn layout() -> impl Strategy<Value = OutputLayout> {
    prop_oneof![
        Just(OutputLayout::Coo),
        Just(OutputLayout::Csr),
        Just(OutputLayout::Csc)
    ]
}

fn policy() -> impl Strategy<Value = DuplicatePolicy> {
    prop_oneof![
        Just(DuplicatePolicy::Sum),
        Just(DuplicatePolicy::Last),
        Just(DuplicatePolicy::Min),
        Just(DuplicatePolicy::Max),
    ]
}

fn opts(layout: OutputLayout, duplicates: DuplicatePolicy, threads: usize) -> AssembleOptions {
    AssembleOptions {
        layout,
        duplicates,
        threads,
        memory_budget: 64 << 20,
        ..Default::default()
    }
}

/// Both value sets through one plan give what the builder writes for each.
fn check<O: OutValue, V: PushValue + coo_assembler::internals::assemble::direct::DirectValue>(
    c: &Case,
    opts: &AssembleOptions,
    of: fn(u8) -> V,
) -> Result<(), TestCaseError> {
    let plan = match plan_of(&c.shape, O::DTYPE, opts, &c.idx) {
        Ok(p) => p,
        Err(e) => {
            // A plan refuses only what a full assembly refuses.
            let v: Vec<V> = c.a.iter().map(|&x| of(x)).collect();
            let b = builder_result(&c.shape, O::DTYPE, opts, &c.idx, &v);
            prop_assert!(b.is_err(), "plan refused ({e}) what the builder took");
            return Ok(());
        }
    };
    for set in [&c.a, &c.b] {
        let v: Vec<V> = set.iter().map(|&x| of(x)).collect();
        let ours = plan.assemble::<V, O, u64>(&v, None).map(|a| flat_of(&a));
        let theirs = builder_result(&c.shape, O::DTYPE, opts, &c.idx, &v);
        match (ours, theirs) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "plan {:?} builder {:?}", a.err(), b.err()),
        }
    }
    Ok(())
}

/// [`check`] for a complex plan (complex64 or complex128 results).
fn check_complex<O: ComplexOut + Default, V: PushValue + DirectValue>(
    c: &Case,
    opts: &AssembleOptions,
    of: fn(u8, u8) -> V,
) -> Result<(), TestCaseError> {
    let plan = match plan_of(&c.shape, O::DTYPE, opts, &c.idx) {
        Ok(p) => p,
        Err(e) => {
            let v: Vec<V> = c.a.iter().zip(&c.b).map(|(&x, &y)| of(x, y)).collect();
            let b = builder_result(&c.shape, O::DTYPE, opts, &c.idx, &v);
            prop_assert!(b.is_err(), "plan refused ({e}) what the builder took");
            return Ok(());
        }
    };
    for (x, y) in [(&c.a, &c.b), (&c.b, &c.a)] {
        let v: Vec<V> = x.iter().zip(y).map(|(&x, &y)| of(x, y)).collect();
        let ours = plan
            .assemble_complex::<V, O, u64>(&v, None)
            .map(|a| flat_of(&a));
        let theirs = builder_result(&c.shape, O::DTYPE, opts, &c.idx, &v);
        match (ours, theirs) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "plan {:?} builder {:?}", a.err(), b.err()),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Complex plans: each part refilled as the builder sums it (min and
    /// max are refused by both).
    #[test]
    fn complex_refill_as_the_builder_assembles(c in (1usize..4).prop_flat_map(case), l in layout(), p in policy()) {
        let l = if c.shape.len() == 2 { l } else { OutputLayout::Coo };
        check_complex::<Complex<f64>, _>(&c, &opts(l, p, 2), |x, y| Complex::new(float_of(x), float_of(y)))?;
        check_complex::<Complex<f32>, _>(&c, &opts(l, p, 1), |x, y| {
            Complex::new(float_of(x) as f32, float_of(y) as f32)
        })?;
        check_complex::<Complex<f64>, _>(&c, &opts(l, p, 1), |x, _| float_of(x))?;
    }

    #[test]
    fn matrix_floats_refill_as_the_builder_assembles(c in case(2), l in layout(), p in policy()) {
        check::<f64, f64>(&c, &opts(l, p, 2), float_of)?;
        check::<f32, f64>(&c, &opts(l, p, 1), float_of)?;
    }

    /// Sums in arrival order (`exact_sums = false`): one thread scatters
    /// each value to its entry, two gather each entry's values; both are
    /// the builder's in-order sums, `-0.0` and overflows included.
    #[test]
    fn fast_sums_refill_as_the_builder_assembles(c in (1usize..4).prop_flat_map(case), l in layout()) {
        let l = if c.shape.len() == 2 { l } else { OutputLayout::Coo };
        for threads in [1, 2] {
            let o = AssembleOptions { exact_sums: false, ..opts(l, DuplicatePolicy::Sum, threads) };
            check::<f64, f64>(&c, &o, float_of)?;
            check::<f32, f64>(&c, &o, float_of)?;
        }
    }

    #[test]
    fn matrix_integers_refill_as_the_builder_assembles(c in case(2), l in layout(), p in policy()) {
        check::<i32, i64>(&c, &opts(l, p, 2), int_of)?;
    }

    /// Bools (any true contribution makes a true sum) from bools and from
    /// 0/1 integers, and the half-width floats from f64 and f32 values:
    /// every value type is planned.
    #[test]
    fn bools_and_halves_refill_as_the_builder_assembles(c in (1usize..4).prop_flat_map(case), l in layout(), p in policy()) {
        let l = if c.shape.len() == 2 { l } else { OutputLayout::Coo };
        check::<coo_assembler::element::Bit, bool>(&c, &opts(l, p, 2), |x| x % 3 == 0)?;
        check::<coo_assembler::element::Bit, u8>(&c, &opts(l, p, 1), |x| x % 2)?;
        check::<coo_assembler::element::F16, f64>(&c, &opts(l, p, 2), |x| float_of(x) / 1e290)?;
        check::<coo_assembler::element::BF16, f32>(&c, &opts(l, p, 1), |x| float_of(x) as f32)?;
    }

    #[test]
    fn other_ranks_refill_as_the_builder_assembles(c in (1usize..5).prop_flat_map(case), p in policy()) {
        check::<f64, f64>(&c, &opts(OutputLayout::Coo, p, 1), float_of)?;
    }
}

/// A mesh-like input big enough for several threads: rows and columns
/// near each other, every entry hit several times.
fn mesh(n: usize) -> (Vec<u32>, Vec<u32>, Vec<f64>) {
    let side = 4000u32;
    let mut r = Vec::with_capacity(n);
    let mut c = Vec::with_capacity(n);
    let mut v = Vec::with_capacity(n);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for k in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let base = (k / 16) as u32 % side;
        r.push((base + (x % 4) as u32).min(side - 1));
        c.push((base + ((x >> 8) % 4) as u32).min(side - 1));
        v.push(((x >> 16) % 1000) as f64 * 0.1 - 50.0);
    }
    (r, c, v)
}

#[test]
fn every_thread_count_gives_the_same_bits_as_the_builder() {
    let (r, c, v) = mesh(300_000);
    let shape = [4000u64, 4000];
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    let want =
        builder_result(&shape, DType::F64, &o, &[r.clone(), c.clone()], &v).expect("builder");
    for threads in 1..=3 {
        let plan = Plan::new(
            &[&r[..], &c[..]],
            &shape,
            DType::F64,
            &opts(OutputLayout::Csr, DuplicatePolicy::Sum, threads),
            None,
        )
        .expect("plan");
        for t in 1..=3 {
            let p = plan.clone().with_threads(t);
            let got: Assembled<f64, i32> = p.assemble(&v, None).expect("refill");
            assert_eq!(
                flat_of(&got),
                want,
                "planned on {threads}, refilled on {t} threads"
            );
        }
    }
}

#[test]
fn element_plans_refill_as_push_element_assembles() {
    // 2x2 quads on a 5x5 grid of nodes, 4 dofs per element.
    let mut dofs = Vec::new();
    for ey in 0..4u32 {
        for ex in 0..4u32 {
            let n0 = ey * 5 + ex;
            dofs.extend_from_slice(&[n0, n0 + 1, n0 + 6, n0 + 5]);
        }
    }
    let ke: Vec<f64> = (0..dofs.len() / 4 * 16)
        .map(|i| (i % 7) as f64 - 2.5)
        .collect();
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    let plan = Plan::for_elements(&dofs, 4, [25, 25], DType::F64, &o, None).expect("plan");
    let got: Assembled<f64, u64> = plan.assemble(&ke, None).expect("refill");
    // The builder, through push_element.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("k.hrry");
    let mut b = Builder::new(
        &[25, 25],
        DType::F64,
        AssembleOptions {
            temp_dir: Some(dir.path().into()),
            ..o.clone()
        },
    )
    .expect("builder");
    for (e, el) in dofs.chunks(4).enumerate() {
        let d: Vec<u64> = el.iter().map(|&x| x as u64).collect();
        b.push_element(&d, &ke[e * 16..(e + 1) * 16]).expect("push");
    }
    b.finish(&path).expect("finish");
    let f = HurrayFile::open(&path).expect("open");
    let Tensor::Compressed(t) = f.tensor_view("coo").expect("tensor") else {
        panic!("a CSR tensor")
    };
    assert_eq!(flat_of(&got).values, t.values_bytes());
    assert_eq!(flat_of(&got).indices, t.indices());
    assert_eq!(flat_of(&got).pointers, t.pointers());
    assert_eq!(plan.contributions(), ke.len());
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    let r = [0u32, 1, 1];
    let c = [0u32, 1, 1];
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    let plan = Plan::new(&[&r[..], &c[..]], &[2, 2], DType::F64, &o, None).expect("plan");
    let e = plan
        .assemble_into(&[1.0f64, 2.0], &mut [0.0f64; 2], None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("2 values for a plan of 3 contributions"),
        "{e}"
    );
    let e = plan
        .assemble_into(&[1.0f64, 2.0, 3.0], &mut [0.0f64; 3], None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("a result of 3 values for a plan of 2 entries"),
        "{e}"
    );
    let e = plan
        .assemble_into(&[1.0f64, 2.0, 3.0], &mut [0.0f32; 2], None)
        .unwrap_err();
    assert!(e.to_string().contains("type f32"), "{e}");
    // Out-of-range and negative indices are named as a push names them.
    let e = Plan::new(
        &[&[0u32, 5][..], &[0u32, 0][..]],
        &[2, 2],
        DType::F64,
        &o,
        None,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::IndexOutOfRange {
                contribution: 1,
                dim: 0,
                index: 5,
                extent: 2
            }
        ),
        "{e}"
    );
    let e = Plan::new(
        &[&[0i64, 1][..], &[0i64, -1][..]],
        &[2, 2],
        DType::F64,
        &o,
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("contribution 1: index -1 in dimension 1 is negative"),
        "{e}"
    );
    // drop_zeros changes the pattern: refused, with the reason.
    let dz = AssembleOptions {
        drop_zeros: true,
        ..o.clone()
    };
    let e = Plan::new(&[&r[..], &c[..]], &[2, 2], DType::F64, &dz, None).unwrap_err();
    assert!(
        e.to_string().contains("drop_zeros changes the pattern"),
        "{e}"
    );
    // Duplicates under `error` are refused at planning time.
    let de = AssembleOptions {
        duplicates: DuplicatePolicy::Error,
        ..o.clone()
    };
    let e = Plan::new(&[&r[..], &c[..]], &[2, 2], DType::F64, &de, None).unwrap_err();
    assert!(
        matches!(&e, Error::DuplicateCoordinate { coordinate } if coordinate == &[1, 1]),
        "{e}"
    );
    // NaN under reject_nan: the first one in array order.
    let rn = AssembleOptions {
        non_finite: NonFinitePolicy::RejectNan,
        ..o.clone()
    };
    let p = Plan::new(&[&r[..], &c[..]], &[2, 2], DType::F64, &rn, None).expect("plan");
    let e = p
        .assemble_into(&[1.0, f64::NAN, f64::NAN], &mut [0.0f64; 2], None)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidValue {
                contribution: 1,
                ..
            }
        ),
        "{e}"
    );
    // A budget too small for the plan says what it needs.
    let small = AssembleOptions {
        memory_budget: 1 << 20,
        ..o
    };
    let n = 200_000usize;
    let big: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
    let e = Plan::new(
        &[&big[..], &big[..]],
        &[1000, 1000],
        DType::F64,
        &small,
        None,
    )
    .unwrap_err();
    assert!(matches!(e, Error::BudgetTooSmall { .. }), "{e}");
}

#[test]
fn integer_overflow_names_the_coordinate() {
    let r = [0u32, 1, 1];
    let c = [0u32, 0, 0];
    let o = opts(OutputLayout::Coo, DuplicatePolicy::Sum, 1);
    let p = Plan::new(&[&r[..], &c[..]], &[2, 1], DType::I8, &o, None).expect("plan");
    let mut out = [0i8; 2];
    p.assemble_into(&[1i64, 100, 27], &mut out, None)
        .expect("fits");
    assert_eq!(out, [1, 127]);
    let e = p
        .assemble_into(&[1i64, 100, 28], &mut out, None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::IntegerOverflow { coordinate, .. } if coordinate == &[1, 0]),
        "{e}"
    );
    let e = p
        .assemble_into(&[1i64, 300, 0], &mut out, None)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidValue {
                contribution: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn digests_tell_coordinates_apart_and_ignore_the_index_type() {
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    let a = Plan::new(
        &[&[0u32, 1][..], &[1u32, 0][..]],
        &[2, 2],
        DType::F64,
        &o,
        None,
    )
    .expect("a");
    let b = Plan::new(
        &[&[0i64, 1][..], &[1i64, 0][..]],
        &[2, 2],
        DType::F64,
        &o,
        None,
    )
    .expect("b");
    let c = Plan::new(
        &[&[1u32, 0][..], &[0u32, 1][..]],
        &[2, 2],
        DType::F64,
        &o,
        None,
    )
    .expect("c");
    assert_eq!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
    // Same structure, other contribution order: other digest.
    assert_eq!(
        a.indices::<u64>().expect("i"),
        c.indices::<u64>().expect("i")
    );
}

#[test]
fn a_stop_flag_stops_planning_and_refills() {
    let (r, c, v) = mesh(200_000);
    let stop = std::sync::atomic::AtomicBool::new(true);
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 2);
    let e = Plan::new(
        &[&r[..], &c[..]],
        &[4000, 4000],
        DType::F64,
        &o,
        Some(&stop),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    let p = Plan::new(&[&r[..], &c[..]], &[4000, 4000], DType::F64, &o, None).expect("plan");
    let mut out = vec![0.0f64; p.nnz()];
    let e = p.assemble_into(&v, &mut out, Some(&stop)).unwrap_err();
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    // Sums in arrival order on one thread: the refill that scatters.
    let mut fast = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    fast.exact_sums = false;
    let p = Plan::new(&[&r[..], &c[..]], &[4000, 4000], DType::F64, &fast, None).expect("plan");
    let e = p.assemble_into(&v, &mut out, Some(&stop)).unwrap_err();
    assert!(matches!(e, Error::Poisoned(_)), "{e}");
    let go = std::sync::atomic::AtomicBool::new(false);
    p.assemble_into(&v, &mut out, Some(&go))
        .expect("not stopped");
}

#[test]
fn a_saved_plan_loads_and_refills_the_same_bits() {
    let (r, c, v) = mesh(100_000);
    let dir = tempfile::tempdir().expect("dir");
    for layout in [OutputLayout::Csr, OutputLayout::Csc, OutputLayout::Coo] {
        let o = opts(layout, DuplicatePolicy::Sum, 2);
        let plan = Plan::new(&[&r[..], &c[..]], &[4000, 4000], DType::F64, &o, None).expect("plan");
        let path = dir.path().join(format!("{layout}.plan"));
        plan.save(&path).expect("save");
        let back = Plan::load(&path).expect("load");
        assert_eq!(back.digest(), plan.digest());
        assert_eq!(
            (back.nnz(), back.contributions(), back.layout()),
            (plan.nnz(), plan.contributions(), layout)
        );
        let a: Assembled<f64, u64> = plan.assemble(&v, None).expect("refill");
        let b: Assembled<f64, u64> = back.assemble(&v, None).expect("refill");
        assert_eq!(flat_of(&a), flat_of(&b));
        let bytes = std::fs::read(&path).expect("read");
        let c2 = Plan::from_bytes(bytes.clone()).expect("from bytes");
        assert_eq!(c2.digest(), plan.digest());
        // The file is a valid Hurray file: verify finds nothing.
        let f = HurrayFile::open(&path).expect("open");
        assert!(f.verify().is_empty(), "{:?}", f.verify());
        // One flipped bit anywhere in the order's values is refused.
        let mut bad = bytes.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x10;
        let e = Plan::from_bytes(bad).map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::InvalidFile { .. }), "{e}");
    }
    // A Hurray file that is not a plan says so.
    let o = opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1);
    let k = dir.path().join("k.hrry");
    let mut b = Builder::new(
        &[2, 2],
        DType::F64,
        AssembleOptions {
            temp_dir: Some(dir.path().into()),
            ..o
        },
    )
    .expect("b");
    b.push(&[0, 0], 1.0).expect("push");
    b.finish(&k).expect("finish");
    let e = Plan::load(&k).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("not a plan file"), "{e}");
}

#[test]
fn the_digest_does_not_depend_on_the_thread_count() {
    let (r, c, _) = mesh(300_000);
    let d: Vec<u64> = (1..=3)
        .map(|t| {
            Plan::new(
                &[&r[..], &c[..]],
                &[4000, 4000],
                DType::F64,
                &opts(OutputLayout::Csr, DuplicatePolicy::Sum, t),
                None,
            )
            .expect("plan")
            .digest()
        })
        .collect();
    assert_eq!(d[0], d[1]);
    assert_eq!(d[0], d[2]);
}

#[test]
fn damaged_plan_metadata_is_refused() {
    let (r, c, _) = mesh(1000);
    let plan = Plan::new(
        &[&r[..], &c[..]],
        &[4000, 4000],
        DType::F64,
        &opts(OutputLayout::Csr, DuplicatePolicy::Sum, 1),
        None,
    )
    .expect("plan");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("p.plan");
    plan.save(&path).expect("save");
    let bytes = std::fs::read(&path).expect("read");
    // The digest's bytes in the KV section, one bit flipped.
    let needle = plan.digest().to_le_bytes();
    let at = bytes
        .windows(8)
        .position(|w| w == needle)
        .expect("the digest is stored");
    let mut bad = bytes.clone();
    bad[at] ^= 1;
    let e = Plan::from_bytes(bad).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("do not match their check"), "{e}");
    // A policy name damaged into another valid one is caught too.
    let needle = b"sum";
    let at = bytes
        .windows(3)
        .position(|w| w == needle)
        .expect("the policy is stored");
    let mut bad = bytes.clone();
    bad[at..at + 3].copy_from_slice(b"max");
    let e = Plan::from_bytes(bad).map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::InvalidFile { .. }), "{e}");
}
