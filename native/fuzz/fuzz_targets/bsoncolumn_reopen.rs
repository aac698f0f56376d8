//! Fuzz target: reopening arbitrary bytes as a column builder (the properties are
//! `_native::bsoncolumn::fuzzing::check_reopen`; reference
//! `BSONColumnBuilder.from_column` in `storage/bsoncolumn/builder.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    _native::bsoncolumn::fuzzing::check_reopen(data);
});
