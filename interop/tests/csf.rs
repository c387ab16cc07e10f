//! CSF (issue 41) against the reference: hurray-io 0.1.0 has no CSF code,
//! so our CSF descriptors are decoded by hurray-core's descriptor codec,
//! and our `pos`/`crd` buffers are checked by its storage-invariant
//! validation and its element lookup, entry by entry, for several mode
//! orders (an out-of-core assembly with spills among them).

use coo_assembler::options::OutputLayout;
use coo_assembler::read::Tensor;
use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile};
use coo_assembler_testkit::{min_budget, xorshift};
use hurray_core::LayoutDescriptor;
use hurray_core::descriptor::TensorDescriptor;
use hurray_core::layout::addressing::csf::{element_offset, validate_index_buffers};

#[test]
fn reference_decodes_our_csf_and_finds_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [30u64, 1 << 20, 7, 12];
    let mut rnd = xorshift(7);
    let items: Vec<(Vec<u64>, f64)> = (0..8000)
        .map(|_| {
            let idx = vec![rnd(30), rnd(50) * 997, rnd(7), rnd(12)];
            (idx, rnd(1000) as f64 - 500.0)
        })
        .collect();
    for (order, budget) in [
        (None, 64 << 20),
        (Some(vec![3, 1, 0, 2]), min_budget(&shape, DType::F64, 2)),
        (Some(vec![2, 3, 1, 0]), 64 << 20),
    ] {
        let path = dir.path().join("t.hrry");
        let opts = AssembleOptions {
            layout: OutputLayout::Csf,
            mode_order: order.clone(),
            memory_budget: budget,
            threads: 2,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
        for (i, v) in &items {
            b.push(i, *v).unwrap();
        }
        b.finish(&path).unwrap();

        let f = HurrayFile::open(&path).unwrap();
        let Tensor::Csf(t) = f.only_tensor_view().unwrap() else {
            panic!("CSF expected");
        };
        // The descriptor through the reference codec.
        let bytes = std::fs::read(&path).unwrap();
        let at = descriptor_offset(&bytes);
        let desc = TensorDescriptor::decode(&bytes[at..]).unwrap();
        let LayoutDescriptor::Csf(csf) = &desc.layout else {
            panic!("the reference reads {:?}", desc.layout);
        };
        assert_eq!(csf.nnz, t.nnz());
        assert_eq!(csf.mode_order, t.mode_order());
        assert_eq!(desc.shape.dims(), shape);
        assert_eq!(desc.buffers.len(), 2 * shape.len() + 1);
        let rank = shape.len();
        let pos: Vec<&[u64]> = (0..rank).map(|l| t.pos(l)).collect();
        let crd: Vec<&[u64]> = (0..rank).map(|l| t.crd(l)).collect();
        for l in 0..rank {
            assert_eq!(desc.buffers[1 + 2 * l].byte_size(), 8 * pos[l].len() as u64);
            assert_eq!(desc.buffers[2 + 2 * l].byte_size(), 8 * crd[l].len() as u64);
        }
        // Its invariants, and its lookup of every entry.
        validate_index_buffers(csf.nnz, &csf.mode_order, &shape, &pos, &crd).unwrap();
        for (i, _) in &items {
            let ours = t.find(i).unwrap();
            let theirs = element_offset(i, &csf.mode_order, &pos, &crd).unwrap();
            assert!(ours.is_some());
            assert_eq!(ours, theirs, "{i:?} in {order:?}");
        }
        let absent = [29, 1, 6, 11];
        assert_eq!(
            t.find(&absent).unwrap(),
            element_offset(&absent, &csf.mode_order, &pos, &crd).unwrap()
        );
    }
}

/// The descriptor of the file's only tensor: the first index entry's
/// `descriptor_offset`, through our codec of the index.
fn descriptor_offset(bytes: &[u8]) -> usize {
    use coo_assembler::internals::hurray::{Trailer, index};
    let trailer = Trailer::decode(&bytes[bytes.len() - 40..], bytes.len() as u64).unwrap();
    let io = trailer.index_offset as usize;
    let il = trailer.index_length as usize;
    let entries = index::decode(&bytes[io..io + il], io as u64).unwrap();
    entries[0].descriptor_offset as usize
}
