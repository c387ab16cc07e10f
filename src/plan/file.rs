//! A refill from files: the values of one step in an `.npy` file (1-D,
//! any integer or float type, converted as a push converts) or a raw
//! binary file (little-endian values of the plan's element type), the
//! result written as a Hurray file in the plan's layout, atomically. What
//! the CLI's `refill` runs.

use super::Plan;
use super::lanes::{Lanes, Target, input_error};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::fs::output::{FileId, ReplaceInput};
use crate::input::read_npy_header;
use crate::options::AssembleOptions;
use crate::write::{FileWriter, WriteOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What [`Plan::refill_file`] wrote.
#[derive(Clone, Debug)]
pub struct RefillSummary {
    /// The output file.
    pub path: PathBuf,
    /// Values read.
    pub contributions: u64,
    /// Entries written.
    pub nnz: u64,
    /// The output file's size.
    pub bytes: u64,
    /// The result's layout.
    pub layout: crate::options::OutputLayout,
    /// The result's element type.
    pub dtype: DType,
    /// Parts the plan was refilled in (1 for a plan held in memory).
    pub parts: usize,
}

pub(super) fn id_of(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| FileId::of(&m, path))
}

impl Plan {
    /// Read the values in `values` (`.npy`, recognised by its magic, or
    /// raw little-endian values of the plan's element type), refill, and
    /// write the result to `output` as a Hurray file (the tensor named as
    /// `Builder` names it). `inputs` are files the output must not name
    /// (the plan file, when the plan came from one); the values file is
    /// one too.
    pub fn refill_file(
        &self,
        values: &Path,
        output: &Path,
        inputs: &[&Path],
    ) -> Result<RefillSummary> {
        let mut src = ValuesFile::open(values, self.dtype, self.contributions() as u64)?;
        let (dtype, big_endian) = (src.dtype, src.big_endian);
        let want = src.data_bytes;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(want as usize)
            .map_err(|_| Error::OutOfMemory {
                what: "the refill's values",
                bytes: want,
            })?;
        src.reader
            .by_ref()
            .take(want)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", values, e))?;
        if bytes.len() as u64 != want {
            return Err(input_error(
                values,
                "the file shrank while it was read".into(),
            ));
        }
        let target = Target {
            dtype: self.dtype,
            policy: self.non_finite,
        };
        target.check_readable(dtype, values)?;
        let mut lanes = target.empty();
        target.append(&bytes, dtype, big_endian, 0, &mut lanes)?;
        drop(bytes);
        let n = self.contributions();
        let mut inputs = inputs.to_vec();
        inputs.push(values);
        let inputs = &inputs[..];
        match lanes {
            Lanes::Real(l) => {
                crate::with_element_type!(self.dtype, real T => self.write_refill::<T>(
                n,
                output,
                inputs,
                |out: &mut [T]| self.assemble_lanes_into(&l, out)
            ), complex _C => Err(super::lanes::changed()))
            }
            Lanes::Complex(l) => crate::with_element_type!(self.dtype, real _T => {
                Err(super::lanes::changed())
            }, complex C => self.write_refill::<C>(n, output, inputs, |o| {
                self.assemble_complex_lanes_into(&l, o)
            })),
        }
    }

    /// Write the result `fill` makes (from `n` values) to `output`,
    /// atomically; `output` may not be one of `inputs`.
    pub(super) fn write_refill<O: Element + Default>(
        &self,
        n: usize,
        output: &Path,
        inputs: &[&Path],
        fill: impl FnOnce(&mut [O]) -> Result<()>,
    ) -> Result<RefillSummary> {
        // The output rule first: nothing is computed for an output that
        // would destroy an input.
        let ids: Vec<FileId> = inputs.iter().filter_map(|p| id_of(p)).collect();
        let refs: Vec<&FileId> = ids.iter().collect();
        let mut w =
            FileWriter::create_for(output, WriteOptions::default(), &refs, ReplaceInput::Refuse)?;
        let mut out = Vec::new();
        out.try_reserve_exact(self.nnz())
            .map_err(|_| Error::OutOfMemory {
                what: "the refill's result",
                bytes: self.nnz() as u64 * std::mem::size_of::<O>() as u64,
            })?;
        out.resize(self.nnz(), O::default());
        fill(&mut out)?;
        let name = AssembleOptions::default().tensor_name;
        {
            let mut t = w.begin_tensor_as(&name, self.dtype, &self.shape, self.layout)?;
            t.reserve_indices(self.nnz() as u64)?;
            if self.layout.is_compressed() {
                // A major index at a time: its checks and pointer paid once.
                self.each_run(|major, entries, minors| match out.get(entries) {
                    Some(vals) => t.push_run(major, minors, vals),
                    None => Err(Error::Poisoned("refill (the plan's pointers)")),
                })?;
            } else {
                let mut err = Ok(());
                self.each_coordinate(|e, idx| {
                    if err.is_ok() {
                        err = t.push(idx, out[e]);
                    }
                });
                err?;
            }
            t.finish()?;
        }
        let s = w.finish()?;
        Ok(RefillSummary {
            path: s.path,
            contributions: n as u64,
            nnz: self.nnz() as u64,
            bytes: s.bytes,
            layout: self.layout,
            dtype: self.dtype,
            parts: 1,
        })
    }
}

/// A values file opened for a refill, positioned at its first value.
pub(super) struct ValuesFile {
    pub(super) reader: std::io::BufReader<std::fs::File>,
    /// The values' element type (the plan's for a raw file).
    pub(super) dtype: DType,
    pub(super) big_endian: bool,
    /// Bytes of values: one per contribution of the plan (checked).
    pub(super) data_bytes: u64,
    /// Where the values start in the file (after an `.npy` header).
    pub(super) data_at: u64,
}

impl ValuesFile {
    /// Open `path` (`.npy`, recognised by its magic, or raw little-endian
    /// values of `plan_dtype`) for a plan of `n` contributions: a file of
    /// another shape or length is refused, saying which.
    pub(super) fn open(path: &Path, plan_dtype: DType, n: u64) -> Result<ValuesFile> {
        use std::io::Seek;
        let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        let mut magic = [0u8; 6];
        let npy = len >= 6 && {
            f.read_exact(&mut magic)
                .map_err(|e| Error::io("read", path, e))?;
            &magic == b"\x93NUMPY"
        };
        f.rewind().map_err(|e| Error::io("seek", path, e))?;
        let mut r = std::io::BufReader::with_capacity(1 << 20, f);
        let name = path.display().to_string();
        let (dtype, big_endian) = if npy {
            let h = read_npy_header(&mut r, &name)?;
            if h.shape.len() != 1 {
                return Err(input_error(
                    path,
                    format!("a 1-D array is needed, got shape {:?}", h.shape),
                ));
            }
            (h.dtype(), h.big_endian)
        } else if plan_dtype == DType::Bool {
            // One byte per contribution, read as a number so that a byte
            // other than 0 or 1 is refused (naming it): such a file is
            // not the bools it claims to be.
            (DType::U8, false)
        } else {
            (plan_dtype, false)
        };
        let at = r
            .stream_position()
            .map_err(|e| Error::io("seek", path, e))?;
        let have = len.saturating_sub(at);
        let want = n.saturating_mul(dtype.width() as u64);
        if have != want {
            return Err(input_error(
                path,
                format!(
                    "{have} bytes of {} values where the plan takes {n} values ({want} bytes){}",
                    dtype.name(),
                    if npy {
                        ""
                    } else {
                        "; raw files hold little-endian values of the plan's element type"
                    }
                ),
            ));
        }
        Ok(ValuesFile {
            reader: r,
            dtype,
            big_endian,
            data_bytes: want,
            data_at: at,
        })
    }
}

/// Refill the plan file `plan` (either kind: a plan held in memory,
/// [`Plan::save`], is loaded; a plan kept in parts,
/// [`super::PlanFile::create`], is refilled part by part within
/// `opts.memory_budget`) with the values file `values`, into the Hurray
/// file `output`. What the CLI's `refill` runs.
pub fn refill_plan_file(
    plan: &Path,
    values: &Path,
    output: &Path,
    opts: &AssembleOptions,
) -> Result<RefillSummary> {
    let f = crate::read::HurrayFile::open(plan)?;
    let h = super::store::Header::read(&f, &plan.display().to_string())?;
    drop(f);
    if h.version == super::store::PARTED_VERSION {
        super::PlanFile::open(plan)?.refill_file(values, output, &[plan], opts)
    } else {
        Plan::load(plan)?
            .with_threads(opts.threads)
            .refill_file(values, output, &[plan])
    }
}
