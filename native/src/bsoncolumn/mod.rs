//! BSONColumn, MongoDB's compressed column format, in the native core.
//!
//! Python reference: the package `storage/bsoncolumn/` (`builder.py` BSONColumnBuilder,
//! `encoding.py` EncodingState, `delta_encoders.py`, `simple8b/`, `decoder.py`,
//! `type_util.py`). That code is the specification: the bytes written here are the bytes
//! it writes. The algorithm is free of Python types (unit-testable and fuzzable);
//! `bindings` is the thin PyO3 layer registered in `storage._native`.
//!
//! - `elements`: raw scalar values (sizes, validation);
//! - `values`: numeric mappings of BSON values (zigzag, double scaling, ObjectId, ...);
//! - `simple8b`: the greedy Simple-8b block builder and block layouts;
//! - `encoder`: one stream of values (literals, deltas, control bytes);
//! - `builder`: the column builder (regular mode) and the uniform builder;
//! - `decoder`: decoding columns;
//! - `document`: the `{"<row>": value}` document of decoded rows (`decompress`);
//! - `fuzzing`: the properties the fuzz targets (`native/fuzz/fuzz_targets/bsoncolumn_*`)
//!   check.

pub mod builder;
pub mod decoder;
pub mod document;
pub mod elements;
pub mod encoder;
pub mod fuzzing;
pub mod simple8b;
pub mod values;

mod bindings;
pub use bindings::register;

#[cfg(test)]
mod vector_tests;
