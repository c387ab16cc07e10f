//! Assembly, in the order the data flows: pushers ([`builder`]) pack index
//! tuples into keys ([`key`]) and fill chunks; sorter threads ([`run`])
//! sort them ([`sort`]), combine equal keys ([`combine`], exact float sums
//! in [`exact`]) and encode runs ([`spill`]); `finish` ([`finish`]) merges
//! them ([`merge`]) and streams the result into the file writer. The
//! budget is divided once, up front ([`plan`]); [`shared`] is what the
//! threads share.

pub(crate) mod builder;
pub(crate) mod combine;
/// In-memory assembly from arrays the caller holds (issue 23).
pub mod direct;
pub(crate) mod shared;
internal_mod!(exact);
pub(crate) mod finish;
internal_mod!(key);
pub(crate) mod merge;
pub(crate) mod plan;
pub(crate) mod run;
internal_mod!(sort);
pub(crate) mod spill;
