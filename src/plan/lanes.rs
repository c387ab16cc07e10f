//! A refill's values read from a file, turned into the lanes the
//! reducers take as they are read: each value converted and checked as a
//! push of it into the plan's element type would be, so that a refused
//! value is named by its position before anything is reduced.
//!
//! Why lanes: a values file may hold any of the 15 element types and a
//! plan has one of 15, and the refill kernel compiled for every pair was
//! most of the library's machine code. Converted here (a loop per value
//! type), the kernel is compiled once per plan type.

use crate::assemble::combine::value_refusal;
use crate::assemble::direct::input::{Checked, ComplexChecked, Source};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::options::NonFinitePolicy;
use std::path::Path;

/// A values file that cannot serve the plan, named.
pub(super) fn input_error(path: &Path, detail: String) -> Error {
    Error::InvalidArgument(format!("values file {}: {detail}", path.display()))
}

/// The values of `path`, as `V`, from `bytes` little-endian (big-endian
/// with `big_endian`: each number's bytes reversed, each part's for a
/// complex value).
pub(super) fn decode<V: bytemuck::Pod + Element>(bytes: &[u8], big_endian: bool) -> Vec<V> {
    if !big_endian {
        // One copy, whatever the alignment of `bytes`.
        let mut v = vec![V::zeroed(); bytes.len() / std::mem::size_of::<V>()];
        let n = std::mem::size_of_val(v.as_slice());
        bytemuck::cast_slice_mut::<V, u8>(&mut v).copy_from_slice(&bytes[..n]);
        return v;
    }
    let w = std::mem::size_of::<V>();
    // A complex value is two numbers of half its width.
    let unit = if V::DTYPE.is_complex() { w / 2 } else { w };
    bytes
        .chunks_exact(w)
        .map(|c| {
            let mut b = [0u8; 16];
            b[..w].copy_from_slice(c);
            if big_endian {
                b[..w].chunks_exact_mut(unit).for_each(|n| n.reverse());
            }
            bytemuck::pod_read_unaligned(&b[..w])
        })
        .collect()
}

/// Lanes of a real plan's values (`u64`: the value's raw form) or of a
/// complex plan's (`[u64; 2]`: both parts').
pub(crate) enum Lanes {
    /// A real plan's.
    Real(Vec<u64>),
    /// A complex plan's.
    Complex(Vec<[u64; 2]>),
}

/// A lane type of [`Lanes`]: `u64` for a real plan, `[u64; 2]` for a
/// complex one.
pub(crate) trait LaneOf: bytemuck::Pod + Send + Sync {
    /// The lanes of `l`, which are of this type (the plan's kind chose
    /// both).
    fn of(l: Lanes) -> Vec<Self>;
    /// `v` as lanes (the inverse of [`LaneOf::of`]).
    fn lanes(v: Vec<Self>) -> Lanes;
}

impl LaneOf for u64 {
    fn of(l: Lanes) -> Vec<u64> {
        match l {
            Lanes::Real(v) => v,
            Lanes::Complex(_) => Vec::new(),
        }
    }
    fn lanes(v: Vec<u64>) -> Lanes {
        Lanes::Real(v)
    }
}

impl LaneOf for [u64; 2] {
    fn of(l: Lanes) -> Vec<[u64; 2]> {
        match l {
            Lanes::Complex(v) => v,
            Lanes::Real(_) => Vec::new(),
        }
    }
    fn lanes(v: Vec<[u64; 2]>) -> Lanes {
        Lanes::Complex(v)
    }
}

/// The error a refill reports for a lane the reducers refused: lanes are
/// checked when made, so only values changed under the refill get here.
pub(crate) fn changed() -> Error {
    Error::Poisoned("refill (a value checked before changed)")
}

/// What the values of a file become for a plan of `dtype` values under
/// `policy`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub(crate) dtype: DType,
    pub(crate) policy: NonFinitePolicy,
}

impl Target {
    /// Empty lanes of this plan's kind.
    pub(crate) fn empty(&self) -> Lanes {
        if self.dtype.is_complex() {
            Lanes::Complex(Vec::new())
        } else {
            Lanes::Real(Vec::new())
        }
    }

    /// A values file (`path`) of `src` values can refill this plan: complex
    /// values refill only a complex plan.
    pub(crate) fn check_readable(&self, src: DType, path: &std::path::Path) -> Result<()> {
        if src.is_complex() && !self.dtype.is_complex() {
            return Err(input_error(
                path,
                format!("values of type {} are not read", src.name()),
            ));
        }
        Ok(())
    }

    /// Bytes per lane.
    /// Whether values of type `src` (`big_endian` or not) are their own
    /// lanes, byte for byte: f64 into f64 and complex128 into complex128,
    /// every value kept, little-endian (no conversion, no check; what
    /// `raw_value` would give).
    pub(crate) fn bytes_are_lanes(&self, src: DType, big_endian: bool) -> bool {
        src == self.dtype
            && matches!(src, DType::F64 | DType::C128)
            && self.policy == NonFinitePolicy::Keep
            && !big_endian
            && cfg!(target_endian = "little")
    }

    pub(crate) fn lane_bytes(&self) -> usize {
        if self.dtype.is_complex() { 16 } else { 8 }
    }

    /// Append the lanes of `bytes`, values of type `src` (each number's
    /// bytes reversed with `big_endian`), numbered from `first` in the
    /// file, to `out`; the push's error for the first refused one.
    pub(crate) fn append(
        &self,
        bytes: &[u8],
        src: DType,
        big_endian: bool,
        first: u64,
        out: &mut Lanes,
    ) -> Result<()> {
        if src.is_complex() && !self.dtype.is_complex() {
            // The callers refuse these first, naming the file.
            return Err(Error::InvalidArgument(format!(
                "values of type {} are not read",
                src.name()
            )));
        }
        crate::with_element_type!(src, V => {
            let values = decode::<V>(bytes, big_endian);
            match out {
                Lanes::Real(l) => {
                    let to = Checked { dtype: self.dtype, policy: self.policy };
                    self.convert(&values, &to, first, l)
                }
                Lanes::Complex(l) => {
                    let part = self.dtype.complex_part().unwrap_or(self.dtype);
                    let to = ComplexChecked { part, policy: self.policy };
                    self.convert(&values, &to, first, l)
                }
            }
        })
    }

    fn convert<V, S>(&self, values: &[V], to: &S, first: u64, out: &mut Vec<S::L>) -> Result<()>
    where
        V: crate::assemble::combine::PushValue,
        S: Source<V>,
    {
        out.try_reserve(values.len())
            .map_err(|_| Error::OutOfMemory {
                what: "the refill's values",
                bytes: (values.len() * self.lane_bytes()) as u64,
            })?;
        for (i, &v) in values.iter().enumerate() {
            match to.lane(v) {
                Some(l) => out.push(l),
                None => {
                    let at = first + i as u64;
                    return Err(
                        value_refusal(v, self.dtype, self.policy, at).unwrap_or_else(changed)
                    );
                }
            }
        }
        Ok(())
    }
}
