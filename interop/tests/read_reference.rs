//! Interoperability: files written by the reference writer (hurray-io 0.1.0)
//! open, read and verify with our reader.

use coo_assembler::HurrayFile;
use coo_assembler::Value;
use hurray_core::{
    BufferHandle, DeviceTag, ElementType, LayoutDescriptor, Shape, SyncMode, TensorDescriptor,
};
use hurray_io::file::{FileWriter, KvValue};

fn coo_desc(shape: &[u64], nnz: u64, values: usize, indices: usize) -> TensorDescriptor {
    TensorDescriptor::new(
        1,
        0,
        ElementType::Float32,
        Shape::new(shape.to_vec()).unwrap(),
        0,
        LayoutDescriptor::Coo(hurray_core::layout::CooLayout::new(nnz, true)),
        vec![
            BufferHandle::new(
                values as u64,
                4096,
                DeviceTag::Cpu,
                SyncMode::ProducerSynced,
            )
            .unwrap(),
            BufferHandle::new(
                indices as u64,
                4096,
                DeviceTag::Cpu,
                SyncMode::ProducerSynced,
            )
            .unwrap(),
        ],
        None,
        None,
        None,
        None,
    )
    .unwrap()
}

#[tokio::test]
async fn worked_example_from_the_reference_writer() {
    let vals: Vec<u8> = [1.5f32, -0.5, 2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let idx: Vec<u8> = [0u64, 1, 2, 0, 3, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
    w.write_tensor(
        "coo",
        &coo_desc(&[4, 4], 3, vals.len(), idx.len()),
        &[&vals, &idx],
    )
    .await
    .unwrap();
    let bytes = w.finish(vec![]).await.unwrap();
    assert_eq!(bytes.len(), 8325, "the worked example of layouts/coo.md");
    let f = HurrayFile::from_bytes(bytes).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(t.get(&[2, 0]).unwrap(), Value::Float(-0.5));
    assert_eq!(t.get(&[1, 1]).unwrap(), Value::Float(0.0));
    assert_eq!(t.values::<f32>().unwrap(), &[1.5, -0.5, 2.0]);
    // No checksums stored: verify says so in a note, and nothing else.
    let p = f.verify();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].severity, coo_assembler::read::Severity::Note);
    assert_eq!(
        p[0].to_string(),
        "note: tensor \"coo\" carries no stored checksums (written by another writer): its \
         layout and content rules were checked, its bytes could not be"
    );
}

#[tokio::test]
async fn several_tensors_and_kv_without_the_flag() {
    let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
    let mut hashes = vec![];
    for (name, n) in [("a", 1u64), ("b", 600), ("e", 0)] {
        let vals: Vec<u8> = (0..n)
            .flat_map(|i| (i as f32 + 1.0).to_le_bytes())
            .collect();
        let idx: Vec<u8> = (0..n)
            .flat_map(|i| [i / 10, i % 10])
            .flat_map(|v| v.to_le_bytes())
            .collect();
        hashes.push((
            format!("coo_assembler.xxh3.{name}.values"),
            KvValue::Uint64(xxhash_rust::xxh3::xxh3_64(&vals)),
        ));
        hashes.push((
            format!("coo_assembler.xxh3.{name}.indices"),
            KvValue::Uint64(xxhash_rust::xxh3::xxh3_64(&idx)),
        ));
        w.write_tensor(
            name,
            &coo_desc(&[100, 10], n, vals.len(), idx.len()),
            &[&vals, &idx],
        )
        .await
        .unwrap();
    }
    let bytes = w.finish(hashes).await.unwrap();
    let f = HurrayFile::from_bytes(bytes).unwrap();
    assert_eq!(f.kv().len(), 6);
    assert_eq!(f.tensor_names().collect::<Vec<_>>(), ["a", "b", "e"]);
    let b = f.tensor("b").unwrap();
    assert_eq!(b.get(&[59, 9]).unwrap(), Value::Float(600.0));
    assert_eq!(b.prefix_range(&[3]).unwrap(), 30..40);
    assert_eq!(f.tensor("e").unwrap().nnz(), 0);
    let p = f.verify();
    assert!(p.iter().all(|p| p.rule == "no-checksums"), "{p:?}");
}
