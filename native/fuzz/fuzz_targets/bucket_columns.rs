//! Fuzz target: arbitrary bytes as measurement documents appended to bucket columns (the
//! properties are `_native::bucket::fuzzing::check_append`; reference `Columns` in
//! `storage/timeseries/columns.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    _native::bucket::fuzzing::check_append(data);
});
