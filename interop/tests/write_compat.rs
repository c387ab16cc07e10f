//! Files from our writer read back through the reference reader
//! (hurray-io 0.1.0), under both tail paddings.

use coo_assembler::DType;
use coo_assembler::internals::hurray::KvValue;
use coo_assembler::write::{FileWriter, TailPadding, WriteOptions};

#[tokio::test]
async fn reference_reader_reads_our_files() {
    for tail in [TailPadding::Alignment, TailPadding::Eight] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("compat.hurray");
        let opts = WriteOptions {
            tail_padding: tail,
            buffer_bytes: 4096,
            ..WriteOptions::default()
        };
        let mut fw = FileWriter::create(&p, opts).unwrap();
        fw.add_metadata("note", KvValue::String("compat".into()))
            .unwrap();
        let mut t = fw.begin_tensor("a", DType::F64, &[1000, 1000]).unwrap();
        for k in 0..2000u64 {
            t.push(&[k / 2, (k % 2) * 500 + k % 13], k as f64).unwrap();
        }
        let a = t.finish().unwrap();
        let e = fw.begin_tensor("empty", DType::I8, &[7]).unwrap();
        e.finish().unwrap();
        let mut t = fw.begin_tensor("c", DType::U32, &[2, 3, 4]).unwrap();
        t.push(&[0, 1, 2], 9u32).unwrap();
        t.push(&[1, 2, 3], 10u32).unwrap();
        let c = t.finish().unwrap();
        fw.finish().unwrap();

        let file = tokio::fs::File::open(&p).await.unwrap();
        let mut r = hurray_io::file::FileReader::open(file).await.unwrap();
        let names: Vec<&str> = r.tensor_names().collect();
        assert_eq!(names, ["a", "empty", "c"]);
        assert!(
            r.kv().iter().any(
                |(k, v)| k == "note" && *v == hurray_io::file::KvValue::String("compat".into())
            )
        );
        for (name, summary) in [("a", &a), ("c", &c)] {
            let t = r.read_tensor(name).await.unwrap();
            assert_eq!(t.buffers.len(), 2);
            assert_eq!(
                xxhash_rust::xxh3::xxh3_64(&t.buffers[0]),
                summary.values_xxh3,
                "{name} values, {tail:?}"
            );
            assert_eq!(
                xxhash_rust::xxh3::xxh3_64(&t.buffers[1]),
                summary.indices_xxh3,
                "{name} indices, {tail:?}"
            );
        }
        let t = r.read_tensor("empty").await.unwrap();
        assert!(t.buffers.iter().all(|b| b.is_empty()));
    }
}
