//! The in-memory path (`coo_assembler::internals::assemble::direct`, issue 23) against the
//! builder: for random small inputs with heavy duplicates, every
//! duplicate policy, several element types, zeros dropped or kept, every
//! non-finite policy, one and two threads, bands and chunks small enough
//! that every band pass skips chunks and every bucket is split from its
//! neighbours, the result is what `Builder` + `finish` write, read back
//! bit for bit; and a failing input fails with the builder's error.

use coo_assembler::internals::assemble::direct::{
    self, Assembled, ComplexOut, DirectValue, OutIndex, OutValue,
};
use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, builder::PushValue,
    options::DuplicatePolicy, options::NonFinitePolicy, options::OutputLayout, read::Tensor,
};
use coo_assembler::{element::BF16 as bf16, element::F16 as f16};
use num_complex::Complex;
use proptest::prelude::*;

/// What a file holds for one tensor, in the shapes `Assembled` uses, the
/// values as their little-endian bytes.
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

/// The builder's result for the same contributions, read back.
fn builder_result<V: PushValue>(
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
    idx: &[Vec<u64>],
    values: &[V],
) -> Result<Flat, Error> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("b.hrry");
    let opts = AssembleOptions {
        temp_dir: Some(dir.path().to_path_buf()),
        // The reference is the sorters' path, not the kernel again.
        in_memory_kernel: false,
        ..opts.clone()
    };
    let mut b = Builder::new(shape, dtype, opts)?;
    let rank = shape.len();
    let mut tuple = vec![0u64; rank];
    for (i, &v) in values.iter().enumerate() {
        for (t, d) in tuple.iter_mut().zip(idx) {
            *t = d[i];
        }
        b.push(&tuple, v)?;
    }
    b.finish(&path)?;
    let f = HurrayFile::open(&path)?;
    let t = f.tensor_view("coo")?;
    Ok(match t {
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
        Tensor::Csf(_) => unreachable!("the kernel's tests write no CSF"),
    })
}

/// Our result, with the given tuning.
#[allow(clippy::too_many_arguments)]
fn direct_result<O: OutValue, J: OutIndex, V: DirectValue>(
    shape: &[u64],
    opts: &AssembleOptions,
    idx: &[Vec<i64>],
    values: &[V],
    threads: usize,
    band: u64,
    chunk: usize,
) -> Result<Flat, Error> {
    let p = direct::plan(shape, O::DTYPE, values.len() as u64, opts)
        .expect("small work fits the in-memory path")
        .with_threads(threads)
        .with_band_bytes(band)
        .with_chunk(chunk);
    let dims: Vec<&[i64]> = idx.iter().map(|d| d.as_slice()).collect();
    let a: Assembled<O, J> = p
        .assemble(&dims, values, None)?
        .expect("no bucket is too heavy here");
    Ok(flat_of(&a))
}

/// Ours for a complex tensor, with the given tuning.
fn direct_complex_result<O: ComplexOut, V: DirectValue>(
    shape: &[u64],
    opts: &AssembleOptions,
    idx: &[Vec<i64>],
    values: &[V],
    t: (usize, u64, usize),
) -> Result<Flat, Error> {
    let p = direct::plan(shape, O::DTYPE, values.len() as u64, opts)
        .expect("small work fits the in-memory path")
        .with_threads(t.0)
        .with_band_bytes(t.1)
        .with_chunk(t.2);
    let dims: Vec<&[i64]> = idx.iter().map(|d| d.as_slice()).collect();
    let a: Assembled<O, u64> = p
        .assemble_complex(&dims, values, None)?
        .expect("no bucket is too heavy here");
    Ok(flat_of(&a))
}

/// The same error: same variant, and the same contribution or coordinate.
fn same_error(a: &Error, b: &Error) -> bool {
    match (a, b) {
        (
            Error::IndexOutOfRange {
                contribution: c1,
                dim: d1,
                index: i1,
                ..
            },
            Error::IndexOutOfRange {
                contribution: c2,
                dim: d2,
                index: i2,
                ..
            },
        ) => (c1, d1, i1) == (c2, d2, i2),
        (
            Error::InvalidValue {
                contribution: c1, ..
            },
            Error::InvalidValue {
                contribution: c2, ..
            },
        ) => c1 == c2,
        (
            Error::DuplicateCoordinate { coordinate: c1 },
            Error::DuplicateCoordinate { coordinate: c2 },
        ) => c1 == c2,
        (
            Error::IntegerOverflow { coordinate: c1, .. },
            Error::IntegerOverflow { coordinate: c2, .. },
        ) => c1 == c2,
        _ => false,
    }
}

const POLICIES: [DuplicatePolicy; 5] = [
    DuplicatePolicy::Sum,
    DuplicatePolicy::Min,
    DuplicatePolicy::Max,
    DuplicatePolicy::Last,
    DuplicatePolicy::Error,
];

/// A random input: index arrays (with a few out-of-range or negative
/// entries when `bad`), values drawn from a small set so that duplicates
/// cancel, tie and overflow.
#[derive(Clone, Debug)]
struct Case {
    shape: Vec<u64>,
    idx: Vec<Vec<i64>>,
    /// Value codes, mapped per element type.
    codes: Vec<u8>,
}

fn case(rank: usize, bad: bool, max_extent: u64) -> impl Strategy<Value = Case> {
    let shape = proptest::collection::vec(1u64..max_extent, rank);
    (shape, 0usize..400).prop_flat_map(move |(shape, n)| {
        let dims: Vec<_> = shape
            .iter()
            .map(|&e| {
                let lo = if bad { -1i64 } else { 0 };
                let hi = if bad { e as i64 + 1 } else { e as i64 };
                // Mostly a narrow band, so that coordinates repeat.
                proptest::collection::vec(
                    prop_oneof![8 => 0..(e as i64).min(4), 4 => 0..e as i64, 1 => lo..hi],
                    n,
                )
            })
            .collect();
        (Just(shape), dims, proptest::collection::vec(any::<u8>(), n))
            .prop_map(|(shape, idx, codes)| Case { shape, idx, codes })
    })
}

/// Float values with cancellations, ties of signed zeros, specials.
fn float_of(c: u8) -> f64 {
    const F: [f64; 16] = [
        1.0,
        -1.0,
        0.5,
        1e16,
        -1e16,
        0.1,
        -0.0,
        0.0,
        3.0,
        1e-300,
        2.5,
        -2.5,
        65504.0,
        1e308,
        f64::INFINITY,
        f64::NAN,
    ];
    // Specials rarely: most values are finite.
    let v = F[(c % 16) as usize];
    if !v.is_finite() && c < 200 { 1.25 } else { v }
}

fn int_of(c: u8) -> i64 {
    const I: [i64; 8] = [1, -1, 2, 100, -100, 0, 127, -128];
    I[(c % 8) as usize]
}

/// Run one case for element type O (values V) through both paths and
/// compare; `tuning` is (threads, band bytes, chunk).
fn check<O: OutValue, V: DirectValue>(
    c: &Case,
    dtype: DType,
    opts: &AssembleOptions,
    values: &[V],
    tuning: (usize, u64, usize),
) -> Result<(), TestCaseError> {
    let ours =
        direct_result::<O, u64, V>(&c.shape, opts, &c.idx, values, tuning.0, tuning.1, tuning.2);
    check_against_builder(c, dtype, opts, values, ours)
}

/// Compare `ours` with the builder's result for the same case.
fn check_against_builder<V: DirectValue>(
    c: &Case,
    dtype: DType,
    opts: &AssembleOptions,
    values: &[V],
    ours: Result<Flat, Error>,
) -> Result<(), TestCaseError> {
    let bad_negative = c.idx.iter().flatten().any(|&x| x < 0);
    if bad_negative {
        // The builder cannot take negative indices: ours names the first
        // refused contribution; a negative one is an InvalidArgument.
        let Err(e) = ours else {
            return Err(TestCaseError::fail("a negative index was accepted"));
        };
        prop_assert!(
            matches!(
                e,
                Error::InvalidArgument(_)
                    | Error::IndexOutOfRange { .. }
                    | Error::InvalidValue { .. }
            ),
            "{e}"
        );
        return Ok(());
    }
    let idx: Vec<Vec<u64>> = c
        .idx
        .iter()
        .map(|d| d.iter().map(|&x| x as u64).collect())
        .collect();
    let theirs = builder_result(&c.shape, dtype, opts, &idx, values);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
        (Err(a), Err(b)) => prop_assert!(same_error(&a, &b), "ours: {a}\nbuilder: {b}"),
        (a, b) => prop_assert!(false, "ours: {a:?}\nbuilder: {b:?}"),
    }
    Ok(())
}

fn tuning() -> impl Strategy<Value = (usize, u64, usize)> {
    (
        1usize..=2,
        prop_oneof![Just(64u64), Just(200), Just(1 << 20)],
        prop_oneof![Just(1usize), Just(7), Just(4096)],
    )
}

fn options(
    layout: OutputLayout,
    policy: usize,
    drop_zeros: bool,
    non_finite: usize,
    exact: bool,
) -> AssembleOptions {
    AssembleOptions {
        layout,
        duplicates: POLICIES[policy],
        drop_zeros,
        non_finite: [
            NonFinitePolicy::Keep,
            NonFinitePolicy::RejectNan,
            NonFinitePolicy::RejectNonFinite,
        ][non_finite],
        exact_sums: exact,
        memory_budget: 64 << 20,
        threads: 2,
        ..AssembleOptions::default()
    }
}

fn layout() -> impl Strategy<Value = OutputLayout> {
    prop_oneof![
        Just(OutputLayout::Csr),
        Just(OutputLayout::Csc),
        Just(OutputLayout::Coo)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Matrices of float types, every layout and policy.
    #[test]
    fn floats_match_the_builder(
        c in case(2, false, 24),
        l in layout(),
        policy in 0usize..5,
        drop_zeros in any::<bool>(),
        non_finite in 0usize..3,
        exact in prop_oneof![4 => Just(true), 1 => Just(false)],
        dt in 0usize..4,
        t in tuning(),
    ) {
        let opts = options(l, policy, drop_zeros, non_finite, exact);
        let v: Vec<f64> = c.codes.iter().map(|&k| float_of(k)).collect();
        match dt {
            0 => check::<f64, f64>(&c, DType::F64, &opts, &v, t)?,
            1 => check::<f32, f64>(&c, DType::F32, &opts, &v, t)?,
            2 => check::<f16, f64>(&c, DType::F16, &opts, &v, t)?,
            _ => check::<bf16, f64>(&c, DType::BF16, &opts, &v, t)?,
        }
    }

    /// Matrices of integer types: sums that overflow, extremes, last.
    #[test]
    fn integers_match_the_builder(
        c in case(2, false, 24),
        l in layout(),
        policy in 0usize..5,
        drop_zeros in any::<bool>(),
        dt in 0usize..5,
        t in tuning(),
    ) {
        let opts = options(l, policy, drop_zeros, 0, true);
        let v: Vec<i64> = c.codes.iter().map(|&k| int_of(k)).collect();
        match dt {
            0 => check::<i8, i64>(&c, DType::I8, &opts, &v, t)?,
            1 => check::<u8, i64>(&c, DType::U8, &opts, &v, t)?,
            2 => check::<i32, i64>(&c, DType::I32, &opts, &v, t)?,
            3 => check::<u16, i64>(&c, DType::U16, &opts, &v, t)?,
            _ => check::<u64, i64>(&c, DType::U64, &opts, &v, t)?,
        }
    }

    /// Out-of-range and negative indices: the builder's error, naming the
    /// first refused contribution.
    #[test]
    fn bad_indices_fail_as_the_builder_does(
        c in case(2, true, 24),
        l in layout(),
        t in tuning(),
    ) {
        let opts = options(l, 0, false, 0, true);
        let v: Vec<f64> = c.codes.iter().map(|&k| float_of(k)).collect();
        check::<f64, f64>(&c, DType::F64, &opts, &v, t)?;
    }

    /// Rank 1, 3 and 4 (COO, bucketed by the packed key's top bits; the
    /// larger extents make keys of more than 22 bits, so that a bucket
    /// holds several coordinates).
    #[test]
    fn other_ranks_match_the_builder(
        c in prop_oneof![Just(1usize), Just(3), Just(4)]
            .prop_flat_map(|r| prop_oneof![case(r, false, 24), case(r, false, 5000)]),
        policy in 0usize..5,
        t in tuning(),
    ) {
        let opts = options(OutputLayout::Coo, policy, false, 0, true);
        let v: Vec<f64> = c.codes.iter().map(|&k| float_of(k)).collect();
        check::<f64, f64>(&c, DType::F64, &opts, &v, t)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Complex tensors (issue 22 on the issue-23 kernel): each part summed
    /// exactly on its own, `last`, `error`, zeros dropped when both parts
    /// are, the non-finite policies on either part; complex128 and
    /// complex64, from complex and from real values; matrices in every
    /// layout and ranks 1 and 3.
    #[test]
    fn complex_matches_the_builder(
        c in prop_oneof![3 => case(2, false, 24), 1 => case(1, false, 24), 1 => case(3, false, 24)],
        l in layout(),
        policy in prop_oneof![Just(0usize), Just(3), Just(4)],
        drop_zeros in any::<bool>(),
        non_finite in 0usize..3,
        exact in prop_oneof![4 => Just(true), 1 => Just(false)],
        form in 0usize..3,
        t in tuning(),
    ) {
        let l = if c.shape.len() == 2 { l } else { OutputLayout::Coo };
        let opts = options(l, policy, drop_zeros, non_finite, exact);
        let re: Vec<f64> = c.codes.iter().map(|&k| float_of(k)).collect();
        let im: Vec<f64> = c.codes.iter().map(|&k| float_of(k.rotate_left(3) ^ 0x5a)).collect();
        match form {
            0 => {
                let v: Vec<Complex<f64>> = re.iter().zip(&im).map(|(&r, &i)| Complex::new(r, i)).collect();
                let ours = direct_complex_result::<Complex<f64>, _>(&c.shape, &opts, &c.idx, &v, t);
                check_against_builder(&c, DType::C128, &opts, &v, ours)?;
            }
            1 => {
                let v: Vec<Complex<f32>> =
                    re.iter().zip(&im).map(|(&r, &i)| Complex::new(r as f32, i as f32)).collect();
                let ours = direct_complex_result::<Complex<f32>, _>(&c.shape, &opts, &c.idx, &v, t);
                check_against_builder(&c, DType::C64, &opts, &v, ours)?;
            }
            _ => {
                let ours = direct_complex_result::<Complex<f64>, _>(&c.shape, &opts, &c.idx, &re, t);
                check_against_builder(&c, DType::C128, &opts, &re, ours)?;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Bool tensors (patterns, graphs): any true contribution makes a true
    /// sum, min / max / last / error as the builder, zeros (false) dropped
    /// on request; from bool values and from integers 0 and 1; matrices in
    /// every layout and rank 3.
    #[test]
    fn bools_match_the_builder(
        c in prop_oneof![3 => case(2, false, 24), 1 => case(3, false, 24)],
        l in layout(),
        policy in 0usize..5,
        drop_zeros in any::<bool>(),
        from_ints in any::<bool>(),
        t in tuning(),
    ) {
        let l = if c.shape.len() == 2 { l } else { OutputLayout::Coo };
        let opts = options(l, policy, drop_zeros, 0, true);
        let v: Vec<bool> = c.codes.iter().map(|&k| k % 3 == 0).collect();
        if from_ints {
            let v: Vec<u8> = v.iter().map(|&b| u8::from(b)).collect();
            check::<coo_assembler::element::Bit, u8>(&c, DType::Bool, &opts, &v, t)?;
        } else {
            check::<coo_assembler::element::Bit, bool>(&c, DType::Bool, &opts, &v, t)?;
        }
    }
}

/// Complex values have no order: min and max are refused by the builder
/// and leave the in-memory path declined, not wrong.
#[test]
fn complex_extremes_are_not_planned() {
    let opts = AssembleOptions {
        duplicates: DuplicatePolicy::Max,
        ..AssembleOptions::default()
    };
    assert!(direct::plan(&[3, 3], DType::C128, 4, &opts).is_none());
    assert!(Builder::new(&[3, 3], DType::C128, opts).is_err());
}

/// A complex group longer than the reducer's stack slice (64 parts) is
/// combined slice by slice: its sum is still exact, its `last` the last.
#[test]
fn long_complex_groups_are_exact() {
    let n = 1000usize;
    let rows: Vec<i64> = vec![1; n];
    let cols: Vec<i64> = (0..n as i64).map(|i| i % 2).collect();
    // Terms whose naive sum loses the small ones entirely.
    let v: Vec<Complex<f64>> = (0..n)
        .map(|i| match i % 4 {
            0 => Complex::new(1e16, -3.0),
            1 => Complex::new(1.0, 1e-20),
            2 => Complex::new(-1e16, 3.0),
            _ => Complex::new(0.5, 0.25),
        })
        .collect();
    for policy in [DuplicatePolicy::Sum, DuplicatePolicy::Last] {
        let opts = AssembleOptions {
            duplicates: policy,
            ..AssembleOptions::default()
        };
        let c = Case {
            shape: vec![2, 2],
            idx: vec![rows.clone(), cols.clone()],
            codes: Vec::new(),
        };
        let ours = direct_complex_result::<Complex<f64>, _>(
            &c.shape,
            &opts,
            &c.idx,
            &v,
            (2, 1 << 20, 4096),
        )
        .expect("assembles");
        let idx: Vec<Vec<u64>> = c
            .idx
            .iter()
            .map(|d| d.iter().map(|&x| x as u64).collect())
            .collect();
        let theirs = builder_result(&c.shape, DType::C128, &opts, &idx, &v).expect("assembles");
        assert_eq!(ours, theirs, "{policy}");
        let got: Vec<f64> = ours
            .values
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        if policy == DuplicatePolicy::Sum {
            // Column 0 holds terms 0 and 2 (cancel) per 4; column 1 holds 1 and 3.
            assert_eq!(got, vec![0.0, 0.0, 375.0, 250.0 * 0.25 + 250.0 * 1e-20]);
        }
    }
}

/// Index arrays of every integer type give the same result.
#[test]
fn every_index_type_gives_the_same_result() {
    let rows: Vec<i64> = (0..5000).map(|i| (i * 7919) % 97).collect();
    let cols: Vec<i64> = (0..5000).map(|i| (i * 104729) % 89).collect();
    let vals: Vec<f64> = (0..5000).map(|i| (i % 13) as f64 * 0.1 - 0.6).collect();
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        ..AssembleOptions::default()
    };
    let run = |r: &[u64], c: &[u64]| -> Flat {
        let a: Assembled<f64, i32> =
            direct::assemble_matrix([97, 89], r, c, &vals, &opts, None).expect("assembled");
        flat_of(&a)
    };
    let r64: Vec<u64> = rows.iter().map(|&x| x as u64).collect();
    let c64: Vec<u64> = cols.iter().map(|&x| x as u64).collect();
    let want = run(&r64, &c64);
    macro_rules! same {
        ($t:ty) => {{
            let r: Vec<$t> = rows.iter().map(|&x| x as $t).collect();
            let c: Vec<$t> = cols.iter().map(|&x| x as $t).collect();
            let a: Assembled<f64, i64> =
                direct::assemble_matrix([97, 89], &r, &c, &vals, &opts, None).expect("assembled");
            assert_eq!(flat_of(&a), want, "{}", stringify!($t));
        }};
    }
    same!(i32);
    same!(i64);
    same!(u32);
    same!(u64);
    let b = builder_result(&[97, 89], DType::F64, &opts, &[r64, c64], &vals).expect("built");
    assert_eq!(b, want);
}

/// A negative index is refused, naming its position and dimension.
#[test]
fn a_negative_index_names_its_position() {
    let rows = [0i32, 1, 2, -3, 1];
    let cols = [0i32, 1, 2, 0, -1];
    let vals = [1.0f64; 5];
    let r: Result<Assembled<f64, i32>, _> = direct::assemble_matrix(
        [3, 3],
        &rows,
        &cols,
        &vals,
        &AssembleOptions::default(),
        None,
    );
    match r {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("contribution 3") && m.contains("-3") && m.contains("dimension 0"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// A set stop flag stops the assembly with an error.
#[test]
fn a_stop_flag_stops() {
    let rows: Vec<u32> = (0..100_000).map(|i| i % 1000).collect();
    let vals = vec![1.0f64; rows.len()];
    let stop = std::sync::atomic::AtomicBool::new(true);
    let r: Result<Assembled<f64, i32>, _> = direct::assemble_matrix(
        [1000, 1000],
        &rows,
        &rows,
        &vals,
        &AssembleOptions::default(),
        Some(&stop),
    );
    assert!(matches!(r, Err(Error::Stopped)), "{r:?}");
}

/// A bucket heavier than the budget's share of a worker: the kernel
/// declines, and the one door takes the builder, out of core, for the same
/// bytes.
#[test]
fn a_bucket_too_heavy_for_the_budget_is_left_to_the_builder() {
    let n = 200_000usize;
    let rows = vec![0u32; n];
    let cols: Vec<u32> = (0..n as u32).collect();
    let vals = vec![1.0f64; n];
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opts = AssembleOptions {
        memory_budget: 4 << 20,
        temp_dir: Some(dir.path().to_path_buf()),
        ..AssembleOptions::default()
    };
    let shape = [4, n as u64];
    let p = direct::plan(&shape, DType::F64, n as u64, &opts).expect("a plan");
    let r: Option<Assembled<f64, i64>> =
        p.assemble(&[&rows, &cols], &vals, None).expect("no error");
    assert!(r.is_none());
    let a: Assembled<f64, i64> =
        direct::assemble_matrix(shape, &rows, &cols, &vals, &opts, None).expect("no error");
    let idx = [
        rows.iter().map(|&r| u64::from(r)).collect(),
        cols.iter().map(|&c| u64::from(c)).collect(),
    ];
    let b = builder_result(&shape, DType::F64, &opts, &idx, &vals).expect("the builder");
    assert_eq!(flat_of(&a), b);
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("the folder").count(),
        0
    );
}

/// Work whose counts alone outgrow the budget (a tall matrix, a small
/// budget): the one door assembles it out of core, in every layout, the
/// same bytes as the builder; a stop flag stops it, leaving nothing.
#[test]
fn work_beyond_the_budget_comes_back_in_memory_through_the_builder() {
    let n = 300_000usize;
    let m = 2_000_000u64;
    let rows: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % m as i64).collect();
    let cols: Vec<i64> = (0..n as i64).map(|i| (i * 104_729 + 3) % 1000).collect();
    let vals: Vec<f64> = (0..n).map(|i| (i % 17) as f64 - 8.5).collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let opts = AssembleOptions {
            memory_budget: 4 << 20,
            temp_dir: Some(dir.path().to_path_buf()),
            layout,
            ..AssembleOptions::default()
        };
        let shape = [m, m];
        assert!(
            layout == OutputLayout::Csc
                || direct::plan(&shape, DType::F64, n as u64, &opts).is_none()
        );
        let a: Assembled<f64, i64> =
            direct::assemble_in_memory(&shape, DType::F64, &[&rows, &cols], &vals, &opts, None)
                .expect("assembled");
        let idx = [
            rows.iter().map(|&r| r as u64).collect(),
            cols.iter().map(|&c| c as u64).collect(),
        ];
        let b = builder_result(&shape, DType::F64, &opts, &idx, &vals).expect("the builder");
        assert_eq!(flat_of(&a), b, "{layout:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("the folder").count(),
            0
        );
        let stop = std::sync::atomic::AtomicBool::new(true);
        let r: Result<Assembled<f64, i64>, _> = direct::assemble_in_memory(
            &shape,
            DType::F64,
            &[&rows, &cols],
            &vals,
            &opts,
            Some(&stop),
        );
        assert!(matches!(r, Err(Error::Stopped)), "{r:?}");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("the folder").count(),
            0
        );
    }
}
