//! The reference implementation (hurray-core / hurray-io 0.1.0) driven
//! synchronously, for the interop tests: one way to build its descriptors,
//! write a file with its writer and read one with its reader.

use coo_assembler::DType;
use hurray_core::descriptor::Statistics;
use hurray_core::{
    BufferHandle, DeviceTag, ElementType, LayoutDescriptor, Shape, SyncMode, TensorDescriptor,
};
use hurray_io::file::{FileComposite, FileReader, FileTensor, FileWriter, KvValue};
use std::future::Future;
use std::path::Path;

/// Runs `fut` on a fresh single-threaded runtime (the reference API is async).
pub fn block_on<T>(fut: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(fut)
}

/// A CPU buffer of `len` bytes at the 4096-byte alignment we also write.
pub fn buffer(len: usize) -> BufferHandle {
    BufferHandle::new(len as u64, 4096, DeviceTag::Cpu, SyncMode::ProducerSynced).unwrap()
}

/// A version-1 descriptor of a tensor whose buffers are `buffers`, in order.
pub fn descriptor(
    dtype: DType,
    shape: &[u64],
    layout: LayoutDescriptor,
    buffers: &[&[u8]],
    stats: Option<Statistics>,
) -> TensorDescriptor {
    TensorDescriptor::new(
        1,
        0,
        ElementType::from_tag(dtype.tag()).unwrap(),
        Shape::new(shape.to_vec()).unwrap(),
        0,
        layout,
        buffers.iter().map(|b| buffer(b.len())).collect(),
        None,
        None,
        stats,
        None,
    )
    .unwrap()
}

/// A whole file from the reference writer: `(name, descriptor, buffers)`
/// per tensor, in order, no KV metadata.
pub fn write(tensors: &[(&str, &TensorDescriptor, &[&[u8]])]) -> Vec<u8> {
    block_on(async {
        let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
        for (name, d, bufs) in tensors {
            w.write_tensor(name, d, bufs).await.unwrap();
        }
        w.finish(vec![]).await.unwrap()
    })
}

/// A file opened by the reference reader, which panics (fails the test)
/// on anything it refuses.
pub struct RefFile {
    rt: tokio::runtime::Runtime,
    reader: FileReader<tokio::fs::File>,
}

impl RefFile {
    pub fn open(path: &Path) -> RefFile {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let reader = rt.block_on(async {
            let file = tokio::fs::File::open(path).await.unwrap();
            FileReader::open(file).await.unwrap()
        });
        RefFile { rt, reader }
    }

    pub fn names(&self) -> Vec<String> {
        self.reader.tensor_names().map(String::from).collect()
    }

    pub fn kv(&self) -> Vec<(String, KvValue)> {
        self.reader.kv().to_vec()
    }

    pub fn tensor(&mut self, name: &str) -> FileTensor {
        self.rt.block_on(self.reader.read_tensor(name)).unwrap()
    }

    pub fn composite(&mut self, name: &str) -> FileComposite {
        self.rt.block_on(self.reader.read_composite(name)).unwrap()
    }
}

/// The shape and the member count of the partition composite `name` in
/// the file at `path`, as the reference reader (`read_composite`) decodes
/// it: it panics when the reader refuses the file.
pub fn composite_members(path: &Path, name: &str) -> (Vec<u64>, usize) {
    block_on(async {
        let file = tokio::fs::File::open(path).await.unwrap();
        let mut r = FileReader::open(file).await.unwrap();
        let c = r.read_composite(name).await.unwrap();
        (c.head.shape.dims().to_vec(), c.members.len())
    })
}
