//! The per-bucket work of the time-series write path, in the native core.
//!
//! Python reference: `storage/timeseries/columns.py` (`Columns`, MongoDB's
//! MeasurementMap): one BSONColumn builder per data field, the time field first, then
//! fields in order of first appearance; a field first seen at row k starts with k
//! skipped rows and a field missing from a measurement gets a skipped row. The bytes,
//! the column order, the changes and the size deltas are those of the reference.
//!
//! - `columns`: `BucketColumns`, fed with raw measurement documents (the `bson` crate's
//!   raw iterator), free of Python types (unit-tested and fuzzed:
//!   `native/fuzz/fuzz_targets/bucket_columns.rs`, properties in `fuzzing`);
//! - `bindings`: the thin PyO3 class `storage._native.BucketColumns` (facade
//!   `storage/timeseries/native_columns.py`).

pub mod columns;
pub mod document;
pub mod fuzzing;

mod bindings;
pub use bindings::register;
