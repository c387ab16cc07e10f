//! A refill whose values are pushed one contribution (or one element
//! matrix) at a time, in the order the plan was made: what a code that
//! assembles by pushing (a [`crate::Builder`] that recorded its plan) does
//! at the next step with the new values alone.

use super::Plan;
use super::file::RefillSummary;
use crate::assemble::direct::{DirectValue, OutValue};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Values pushed for one refill of a [`Plan`]; see [`Plan::refill`].
pub struct Refill<'p, V> {
    plan: &'p Plan,
    values: Vec<V>,
}

impl Plan {
    /// Start a refill whose values are pushed ([`Refill::push`],
    /// [`Refill::push_many`]) in the plan's order: for a plan a builder
    /// recorded, the order of its pushes (pushers by creation, then push
    /// order), one value per contribution, skipped ones included. The
    /// room for every value is taken here (`OutOfMemory` if there is
    /// none).
    pub fn refill<V: DirectValue>(&self) -> Result<Refill<'_, V>> {
        let n = self.contributions();
        let mut values = Vec::new();
        values
            .try_reserve_exact(n)
            .map_err(|_| Error::OutOfMemory {
                what: "the refill's values",
                bytes: (n * std::mem::size_of::<V>()) as u64,
            })?;
        Ok(Refill { plan: self, values })
    }
}

impl Plan {
    /// A refill whose values are pushed has `pushed` and takes `more`:
    /// refused (`InvalidArgument`, saying how many) past the plan's
    /// contributions. The rule of [`Refill::push`], for front ends that
    /// gather the values themselves.
    pub fn check_pushed(&self, pushed: usize, more: usize) -> Result<()> {
        let n = self.contributions();
        if pushed.saturating_add(more) > n {
            return Err(Error::InvalidArgument(format!(
                "refill: {} values pushed for a plan of {n} contributions",
                pushed.saturating_add(more)
            )));
        }
        Ok(())
    }
}

impl<V: DirectValue> Refill<'_, V> {
    /// Push the next contribution's value.
    #[inline]
    pub fn push(&mut self, v: V) -> Result<()> {
        self.room(1)?;
        self.values.push(v);
        Ok(())
    }

    /// Push the next `values.len()` values (an element matrix's, row-major,
    /// as `push_element` took them).
    pub fn push_many(&mut self, values: &[V]) -> Result<()> {
        self.room(values.len())?;
        self.values.extend_from_slice(values);
        Ok(())
    }

    /// Values pushed so far.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// No value pushed yet.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    #[inline]
    fn room(&self, more: usize) -> Result<()> {
        self.plan.check_pushed(self.values.len(), more)
    }

    /// The pushed values, checked to be one per contribution.
    fn complete(&self) -> Result<&[V]> {
        let n = self.plan.contributions();
        if self.values.len() != n {
            return Err(Error::InvalidArgument(format!(
                "refill: {} values pushed for a plan of {n} contributions",
                self.values.len()
            )));
        }
        Ok(&self.values)
    }

    /// Refill `out` (one value per entry, storage order) with the pushed
    /// values: [`Plan::assemble_into`] of them. The refill may go on:
    /// [`Refill::clear`] starts the next step's pushes.
    pub fn assemble_into<O: OutValue>(
        &self,
        out: &mut [O],
        stop: Option<&AtomicBool>,
    ) -> Result<()> {
        self.plan.assemble_into(self.complete()?, out, stop)
    }

    /// Forget the values pushed (the room stays): the next step's pushes.
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// Write the result of the pushed values to `output` as a Hurray file,
    /// atomically: the bytes a builder's `finish` writes for the same
    /// pushes ([`Plan::assemble_to_file`]). `inputs` are files the output
    /// must not name.
    pub fn write(&self, output: &Path, inputs: &[&Path]) -> Result<RefillSummary> {
        self.plan.assemble_to_file(self.complete()?, output, inputs)
    }
}

impl Plan {
    /// Write the result of `values` (one per contribution, in the plan's
    /// order) to `output` as a Hurray file, atomically, the tensor named as
    /// `Builder` names it: the bytes an assembly of the same contributions
    /// writes. `inputs` are files the output must not name.
    pub fn assemble_to_file<V: DirectValue>(
        &self,
        values: &[V],
        output: &Path,
        inputs: &[&Path],
    ) -> Result<RefillSummary> {
        let n = values.len();
        crate::with_element_type!(self.dtype(), real T => self.write_refill::<T>(
            n,
            output,
            inputs,
            |out: &mut [T]| self.assemble_into(values, out, None)
        ), complex C => self.write_refill::<C>(n, output, inputs, |out: &mut [C]| {
            self.assemble_complex_into(values, out, None)
        }))
    }
}
