//! Every tensor of a file as its descriptor describes it ([`TensorInfo`]),
//! and the dense tensors the reader locates but whose entries the sparse
//! operations do not serve ([`DenseTensor`]).
//!
//! A Hurray file is a container: next to the COO, CSR and CSC tensors the
//! views read, it may hold dense tensors (row-major, column-major) and
//! tensors of layouts this crate does not read (strided, tiled, CSF...).
//! Opening checks what the container says of them: the descriptor's
//! common fields, and for row-major and column-major tensors the buffer
//! (inside the file, aligned, at least as large as its shape and element
//! type need, zero padding before it). The operations that read entries
//! refuse them with [`Error::LayoutNotServed`], naming the layout.

use super::checksum::{self, SumCheck};
use super::{Backing, Desc, Listed, Stored};
use crate::element::{DType, group_digits};
use crate::error::{Error, Result};
use crate::hurray::kv::parse_checksum_key;
use crate::hurray::{DenseDescriptor, KvValue, LAYOUT_COO, Statistics};
use crate::layout::{Layout, describe_tag};
use std::path::Path;

/// One tensor of an open file as its descriptor describes it, whatever
/// its layout (see [`crate::HurrayFile::tensor_infos`]). Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    stored: &'a Stored,
    kv: &'a [(String, KvValue)],
}

impl<'a> TensorInfo<'a> {
    pub(super) fn new(stored: &'a Stored, kv: &'a [(String, KvValue)]) -> TensorInfo<'a> {
        TensorInfo { stored, kv }
    }

    /// Tensor name.
    pub fn name(&self) -> &'a str {
        match self.stored {
            Stored::Served(t) => &t.name,
            Stored::Listed(l) => &l.name,
        }
    }

    /// The Hurray layout tag.
    pub fn layout_tag(&self) -> u8 {
        match self.stored {
            Stored::Served(t) => match &t.desc {
                Desc::Coo(_) => LAYOUT_COO,
                Desc::Compressed(d) => d.layout_tag(),
                Desc::Csf(_) => crate::hurray::LAYOUT_CSF,
            },
            Stored::Listed(l) => l.layout_tag(),
        }
    }

    /// The layout, when the spec names its tag (a file opened permissive
    /// may hold a tag it does not).
    pub fn layout(&self) -> Option<Layout> {
        Layout::from_tag(self.layout_tag())
    }

    /// The layout in words: "sparse COO", "dense row-major", or what the
    /// spec says of an unnamed tag.
    pub fn layout_text(&self) -> String {
        describe_tag(self.layout_tag())
    }

    /// Whether the views read it ([`crate::HurrayFile::tensor_view`]):
    /// COO, CSR and CSC (without quantization).
    pub fn is_served(&self) -> bool {
        matches!(self.stored, Stored::Served(_))
    }

    /// The element type tag.
    pub fn type_tag(&self) -> u8 {
        match self.stored {
            Stored::Served(t) => t.desc.dtype().tag(),
            Stored::Listed(l) => match &l.desc {
                Listed::Dense(d) => d.dtype.tag(),
                Listed::Other(h) => h.type_tag,
            },
        }
    }

    /// The element type, when it is one this crate reads.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_tag(self.type_tag()).ok()
    }

    /// The element type in words: its name, or its tag when this crate
    /// does not read it.
    pub fn dtype_text(&self) -> String {
        match self.dtype() {
            Some(d) => d.to_string(),
            None => format!("element type tag 0x{:02x}", self.type_tag()),
        }
    }

    /// Shape.
    pub fn shape(&self) -> &'a [u64] {
        match self.stored {
            Stored::Served(t) => t.desc.shape(),
            Stored::Listed(l) => match &l.desc {
                Listed::Dense(d) => &d.shape,
                Listed::Other(h) => &h.shape,
            },
        }
    }

    /// Stored entries of a sparse tensor the reader serves (a dense
    /// tensor stores every element: `None`, as for unread layouts).
    pub fn nnz(&self) -> Option<u64> {
        match self.stored {
            Stored::Served(t) => Some(t.desc.nnz()),
            Stored::Listed(_) => None,
        }
    }

    /// The statistics section, when the tensor has one the reader decoded
    /// (COO, CSR, CSC, row-major, column-major).
    pub fn statistics(&self) -> Option<&'a Statistics> {
        match self.stored {
            Stored::Served(t) => t.desc.statistics(),
            Stored::Listed(l) => match &l.desc {
                Listed::Dense(d) => d.statistics.as_ref(),
                Listed::Other(_) => None,
            },
        }
    }

    /// Absolute offset of its first buffer and the bytes from there to
    /// the end of its last one (the index entry's `data_offset` and
    /// `data_length`, as checked at open).
    pub fn data(&self) -> (u64, u64) {
        let r = match self.stored {
            Stored::Served(t) => {
                let used: Vec<_> = [&t.values, &t.indices, &t.pointers]
                    .into_iter()
                    .filter(|r| !r.is_empty())
                    .collect();
                match (used.first(), used.last()) {
                    (Some(a), Some(b)) => a.start..b.end,
                    _ => t.descriptor.end..t.descriptor.end,
                }
            }
            Stored::Listed(l) => l.data.clone(),
        };
        (r.start as u64, (r.end - r.start) as u64)
    }

    /// What `verify` checks of a tensor the reader does not serve, in one
    /// sentence (`None` for COO, CSR and CSC, whose content it reads).
    pub fn verify_note(&self) -> Option<String> {
        let Stored::Listed(l) = self.stored else {
            return None;
        };
        let what = format!(
            "tensor {:?} ({}, {}) is {}",
            l.name,
            self.dtype_text(),
            shape_text(self.shape()),
            self.layout_text()
        );
        let (off, len) = self.data();
        Some(match &l.desc {
            Listed::Dense(d) => {
                let need = d
                    .payload_bytes()
                    .map_or("more than 2^64".into(), |b| group_digits(b.into()));
                let sums = if self.stored_checksums() > 0 {
                    "its stored checksum was compared"
                } else {
                    "it carries no stored checksum"
                };
                format!(
                    "{what}: its descriptor and its buffer were checked ({} bytes at byte {off}, inside the file, aligned, holding the {need} bytes its shape and type need from byte_offset {}); {sums}; its values are not read (verify reads the entries of {} tensors)",
                    group_digits(d.buffer.byte_size.into()),
                    d.byte_offset,
                    crate::layout::SERVED
                )
            }
            Listed::Other(_) => format!(
                "{what}: its descriptor's common fields were checked and its data ({} bytes at byte {off}) lie inside the file; the layout's own fields and the data are not read (verify reads {} tensors and checks the buffers of row-major and column-major ones)",
                group_digits(len.into()),
                crate::layout::SERVED
            ),
        })
    }

    /// How many of its buffers carry a checksum our writer stored (0 for
    /// another writer's file, and for layouts whose buffers are not known).
    pub fn stored_checksums(&self) -> usize {
        let buffers: &[&str] = match self.stored {
            Stored::Served(_) => match self.layout().and_then(Layout::served) {
                Some(l) => l.buffer_names(),
                None => &[],
            },
            Stored::Listed(l) => match &l.desc {
                Listed::Dense(_) => &["values"],
                Listed::Other(_) => &[],
            },
        };
        self.kv
            .iter()
            .filter_map(|(k, _)| parse_checksum_key(k))
            .filter(|&(t, b)| t == self.name() && buffers.contains(&b))
            .count()
    }
}

/// "2 x 2", or "scalar" for rank 0.
fn shape_text(shape: &[u64]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(|&e| group_digits(e.into()))
        .collect::<Vec<_>>()
        .join(" x ")
}

/// A dense (row-major or column-major) tensor of an open file: its
/// buffer, located and checked at open. Cheap to copy.
#[derive(Clone, Copy)]
pub struct DenseTensor<'a> {
    name: &'a str,
    desc: &'a DenseDescriptor,
    /// The whole buffer.
    buffer: &'a [u8],
    /// Its absolute file offset.
    offset: u64,
    kv: &'a [(String, KvValue)],
    sums: SumCheck<'a>,
    mapped: super::release::Mapped<'a>,
}

impl std::fmt::Debug for DenseTensor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseTensor")
            .field("name", &self.name)
            .field("descriptor", self.desc)
            .field("offset", &self.offset)
            .finish()
    }
}

/// What the dense reader serves, for [`Error::LayoutNotServed`].
const DENSE_SERVED: &str = "dense row-major and column-major tensors";

impl<'a> DenseTensor<'a> {
    /// The view of `s`, or an error naming its layout when it is not
    /// row-major or column-major (or has features the dense codec does
    /// not decode).
    pub(super) fn of(
        s: &'a Stored,
        backing: &'a Backing,
        kv: &'a [(String, KvValue)],
        file: Option<&'a Path>,
    ) -> Result<DenseTensor<'a>> {
        let not_dense = |name: &str, tag: u8| Error::LayoutNotServed {
            tensor: name.to_string(),
            layout: describe_tag(tag),
            op: "the dense reader".into(),
            served: DENSE_SERVED,
        };
        let l = match s {
            Stored::Listed(l) => l,
            Stored::Served(t) => {
                return Err(not_dense(&t.name, TensorInfo::new(s, kv).layout_tag()));
            }
        };
        let Listed::Dense(desc) = &l.desc else {
            return Err(not_dense(&l.name, l.layout_tag()));
        };
        Ok(DenseTensor {
            name: &l.name,
            desc,
            buffer: &backing.bytes()[l.data.clone()],
            offset: l.data.start as u64,
            kv,
            sums: SumCheck {
                sums: &l.sums,
                file,
            },
            mapped: backing.mapped(),
        })
    }

    /// Tensor name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Row-major or column-major.
    pub fn layout(&self) -> Layout {
        if self.desc.column_major {
            Layout::ColumnMajor
        } else {
            Layout::RowMajor
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.desc.dtype
    }

    /// Shape (rank 0: a scalar).
    pub fn shape(&self) -> &'a [u64] {
        &self.desc.shape
    }

    /// The decoded descriptor.
    pub fn descriptor(&self) -> &'a DenseDescriptor {
        self.desc
    }

    /// The elements' bytes, little-endian, in the layout's order (from
    /// `byte_offset`, `product(shape) * width` bytes).
    pub fn values_bytes(&self) -> &'a [u8] {
        // Inside the buffer: checked at open (byte_size >= byte_offset +
        // payload); an empty slice only if that ever failed.
        let start = self.desc.byte_offset as usize;
        self.desc
            .payload_bytes()
            .and_then(|n| self.buffer.get(start..start.checked_add(n as usize)?))
            .unwrap_or(&[])
    }

    /// Every element widened to f64, in the layout's order (64-bit
    /// integers beyond 2^53 round), after the stored checksum, if any, is
    /// checked. Running out of memory is [`Error::OutOfMemory`].
    pub fn to_f64(&self) -> Result<Vec<f64>> {
        self.check_checksums()?;
        let d = self.desc.dtype;
        let w = d.width();
        let bytes = self.values_bytes();
        let n = match d {
            DType::Bool => self.desc.elements().unwrap_or(0) as usize,
            _ => bytes.len() / w,
        };
        let mut out = Vec::new();
        out.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
            what: "the values of a dense tensor",
            bytes: (n as u64).saturating_mul(8),
        })?;
        if d.is_bool() {
            out.extend((0..n).map(|i| f64::from((bytes[i / 8] >> (i % 8)) & 1)));
        } else {
            out.extend(bytes.chunks_exact(w).map(|b| d.decode(b).to_f64()));
        }
        Ok(out)
    }

    /// Check the checksum our writer would have stored for the buffer
    /// (`coo_assembler.xxh3.<name>.values`), once per open file; a buffer
    /// without one (another writer's file) passes.
    pub fn check_checksums(&self) -> Result<()> {
        self.check_checksums_with(false)
    }

    /// [`DenseTensor::check_checksums`], the pages behind the hash given
    /// back whatever the buffer's size when `release` (a reader bound by
    /// a memory budget, such as a refill reading a plan file).
    pub fn check_checksums_with(&self, release: bool) -> Result<()> {
        checksum::check_releasing(
            Some(&self.sums),
            self.name,
            self.kv,
            &[("values", self.buffer, self.offset)],
            self.mapped,
            release,
        )
    }

    /// How many buffers carry a stored checksum (0 or 1).
    pub fn stored_checksums(&self) -> usize {
        checksum::count(
            Some(&self.sums),
            self.name,
            self.kv,
            &[("values", self.buffer, self.offset)],
        )
    }
}
