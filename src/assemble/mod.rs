//! Assembly, in the order the data flows: pushers ([`builder`]) pack index
//! tuples into keys ([`key`]) and fill chunks; sorter threads ([`run`])
//! sort them ([`sort`]), combine equal keys ([`combine`], exact float sums
//! in [`exact`]) and encode runs ([`spill`]); `finish` ([`finish`]) merges
//! them ([`merge`]) and streams the result into the file writer. While
//! everything fits, the chunks wait unsorted ([`deferred`]) and `finish`
//! gives them to the in-memory kernel ([`direct`]) instead. The
//! budget is divided once, up front ([`plan`]); [`shared`] is what the
//! threads share. A builder asked to record its plan writes each
//! pusher's coordinates aside ([`record`]).

pub mod builder;
pub mod combine;
pub mod deferred;
/// In-memory assembly from arrays the caller holds (issue 23).
pub mod direct;
pub mod exact;
pub mod finish;
pub mod key;
pub mod merge;
pub mod plan;
pub mod record;
pub mod run;
pub mod shared;
pub mod sort;
pub mod spill;
pub mod summary;

/// Whether a tensor of `shape` can be stored in `layout`: a rank in
/// 1..=64 (2 for CSR and CSC) and no extent u64::MAX (which Hurray
/// reserves for dynamic shapes). The `Builder`'s and a plan's check.
pub(crate) fn check_shape(
    opts: &crate::options::AssembleOptions,
    shape: &[u64],
) -> crate::error::Result<()> {
    use crate::error::Error;
    if shape.is_empty() || shape.len() > crate::hurray::MAX_RANK {
        return Err(Error::InvalidShape {
            shape: shape.to_vec(),
            detail: format!("rank {} is out of 1..=64", shape.len()),
        });
    }
    if let Some(d) = shape.iter().position(|&e| e == u64::MAX) {
        return Err(Error::InvalidShape {
            shape: shape.to_vec(),
            detail: format!(
                "dimension {d} has extent u64::MAX, which Hurray reserves for dynamic shapes"
            ),
        });
    }
    opts.check_layout(shape.len())
}

/// What a value type asks of the assembly, checked where it is made: a
/// complex tensor is assembled as its two parts (a last dimension of
/// extent 2, summed exactly each), so its rank is at most 63, and it has
/// no order for `min` and `max`.
pub(crate) fn check_value_type(
    dtype: crate::element::DType,
    duplicates: crate::options::DuplicatePolicy,
    shape: &[u64],
) -> crate::error::Result<()> {
    use crate::error::Error;
    use crate::options::DuplicatePolicy;
    if !dtype.is_complex() {
        return Ok(());
    }
    if matches!(duplicates, DuplicatePolicy::Min | DuplicatePolicy::Max) {
        return Err(Error::InvalidOptions(format!(
            "duplicates={duplicates}: complex values have no order; use sum, last or error"
        )));
    }
    if shape.len() >= crate::hurray::MAX_RANK {
        return Err(Error::InvalidShape {
            shape: shape.to_vec(),
            detail: format!(
                "a complex tensor's rank is at most {} (its parts take a dimension)",
                crate::hurray::MAX_RANK - 1
            ),
        });
    }
    Ok(())
}

/// The refusals every plan makes, in memory or in parts on disk: the
/// options a fixed pattern cannot serve (every value type is planned).
pub(crate) fn check_plannable(
    dtype: crate::element::DType,
    opts: &crate::options::AssembleOptions,
    shape: &[u64],
) -> crate::error::Result<()> {
    use crate::error::Error;
    check_value_type(dtype, opts.duplicates, shape)?;
    if opts.drop_zeros {
        return Err(Error::InvalidOptions(
            "drop_zeros changes the pattern with the values, and a plan's pattern is fixed: \
             plan with drop_zeros off (explicit zeros are kept) and drop them from the result"
                .into(),
        ));
    }
    if opts.layout == crate::options::OutputLayout::Csf {
        return Err(Error::Unsupported(
            "plans hold coo, csr and csc results; a csf tensor is assembled, not planned: \
             plan in coo and convert each result"
                .into(),
        ));
    }
    Ok(())
}
