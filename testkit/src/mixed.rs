//! Files that hold more than one kind of tensor, written by the reference
//! writer (hurray-io 0.1.0): dense row-major and column-major tensors next
//! to a COO matrix, and the equivalent of the spec's conformance file
//! `files/basic.hrry` (two dense row-major tensors and two KV entries).

use super::reference::{block_on, descriptor};
use coo_assembler::DType;
use hurray_core::LayoutDescriptor;
use hurray_core::layout::CooLayout;
use hurray_io::file::{FileWriter, KvValue};

/// `weights`: f32 2 x 2, row-major.
pub const WEIGHTS: [f32; 4] = [1.5, -2.0, 0.25, 4.0];
/// `bias`: i8 [3], row-major (a 3-byte buffer: the next descriptor
/// follows at the next multiple of 8).
pub const BIAS: [i8; 3] = [1, -2, 3];
/// `x`: f64 [3], row-major: a vector for `K`.
pub const X: [f64; 3] = [1.0, 2.0, 3.0];
/// `K`: f64 3 x 3 COO, sorted: (0,0) 2, (1,2) -1, (2,1) 0.5.
pub const K: [((u64, u64), f64); 3] = [((0, 0), 2.0), ((1, 2), -1.0), ((2, 1), 0.5)];
/// `cols`: i32 2 x 3, column-major (element [i, j] at i + 2 j).
pub const COLS: [i32; 6] = [10, 20, 11, 21, 12, 22];

fn bytes_of<T: Copy, const W: usize>(v: &[T], le: impl Fn(T) -> [u8; W]) -> Vec<u8> {
    v.iter().flat_map(|&x| le(x)).collect()
}

/// One tensor for the reference writer: name, type, shape, layout, buffers.
type Spec<'a> = (&'a str, DType, Vec<u64>, LayoutDescriptor, Vec<Vec<u8>>);

fn write(tensors: &[Spec<'_>], kv: Vec<(String, KvValue)>) -> Vec<u8> {
    block_on(async {
        let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
        for (name, dt, shape, layout, bufs) in tensors {
            let b: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
            let d = descriptor(*dt, shape, layout.clone(), &b, None);
            w.write_tensor(name, &d, &b).await.unwrap();
        }
        w.finish(kv).await.unwrap()
    })
}

/// The spec's conformance file, regenerated: `weights` (float32 [2, 2])
/// and `bias` (int8 [3]), row-major, KV `producer` and `tensor_count`.
pub fn basic() -> Vec<u8> {
    write(
        &[
            (
                "weights",
                DType::F32,
                vec![2, 2],
                LayoutDescriptor::RowMajor,
                vec![bytes_of(&WEIGHTS, f32::to_le_bytes)],
            ),
            (
                "bias",
                DType::I8,
                vec![3],
                LayoutDescriptor::RowMajor,
                vec![bytes_of(&BIAS, i8::to_le_bytes)],
            ),
        ],
        vec![
            (
                "producer".into(),
                KvValue::String("hurray-conformance".into()),
            ),
            ("tensor_count".into(), KvValue::Int64(2)),
        ],
    )
}

/// Dense tensors around a COO matrix: `weights`, `bias`, `K`, `x`, `cols`.
pub fn mixed() -> Vec<u8> {
    let k_values = bytes_of(&K.map(|e| e.1), f64::to_le_bytes);
    let k_indices: Vec<u8> = K
        .iter()
        .flat_map(|((i, j), _)| [i.to_le_bytes(), j.to_le_bytes()])
        .flatten()
        .collect();
    write(
        &[
            (
                "weights",
                DType::F32,
                vec![2, 2],
                LayoutDescriptor::RowMajor,
                vec![bytes_of(&WEIGHTS, f32::to_le_bytes)],
            ),
            (
                "bias",
                DType::I8,
                vec![3],
                LayoutDescriptor::RowMajor,
                vec![bytes_of(&BIAS, i8::to_le_bytes)],
            ),
            (
                "K",
                DType::F64,
                vec![3, 3],
                LayoutDescriptor::Coo(CooLayout::new(3, true)),
                vec![k_values, k_indices],
            ),
            (
                "x",
                DType::F64,
                vec![3],
                LayoutDescriptor::RowMajor,
                vec![bytes_of(&X, f64::to_le_bytes)],
            ),
            (
                "cols",
                DType::I32,
                vec![2, 3],
                LayoutDescriptor::ColMajor,
                vec![bytes_of(&COLS, i32::to_le_bytes)],
            ),
        ],
        vec![("producer".into(), KvValue::String("reference".into()))],
    )
}
