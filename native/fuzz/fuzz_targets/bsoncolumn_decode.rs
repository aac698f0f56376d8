//! Fuzz target: the native BSONColumn decoders on arbitrary bytes (the properties are
//! `_native::bsoncolumn::fuzzing::check_decode`; reference `storage/bsoncolumn/decoder.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    _native::bsoncolumn::fuzzing::check_decode(data);
});
