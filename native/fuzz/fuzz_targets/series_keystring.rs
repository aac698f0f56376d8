//! Fuzz target: the native index key of a series' meta value (`_native::keystring`,
//! reference `storage/keystring.py`) on arbitrary bytes: declined or a key, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(key) = _native::keystring::encode_element(data) {
        assert!(!key.is_empty());
    }
});
