//! Block processing of time-series reads: `[$match] $group` folded over the columns of
//! stored buckets without a Python object per value.
//!
//! Python reference: `query/timeseries/columnar_group.py` (the plan, the numpy fold) and
//! the generic `$group` (`query/stages/group.py`, `query/accumulators.py`,
//! `query/expressions/reducers.py` `SumState`): what is computed here is what those
//! accumulators reach folding the same rows one by one, in scan order.
//!
//! - `bucket`: one stored bucket (raw BSON, read with the `bson` crate's raw API) to typed
//!   rows of the needed columns;
//! - `group`: the row filter, the group key (series class, `$dateTrunc` bin) and the
//!   partial accumulator states per group;
//! - `results`: the groups' output order under a fused `$sort` and their values;
//! - `bindings`: the PyO3 layer (`BlockGroup`, `bucket_metas`).
//!
//! Anything the reference would answer differently is declined (`Decline`), never
//! approximated: the Python path then answers the whole query.

pub mod bucket;
pub mod group;
pub mod results;

mod bindings;
pub use bindings::register;

/// This input is left to the Python path; the message says why (for tests and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline(pub &'static str);
