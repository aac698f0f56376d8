//! Fuzzes the native control.min/max and schema (`native/src/control`) on arbitrary bytes.
//!
//! The first byte picks the meta field to skip and whether the rest is framed back to
//! back or at offsets; the rest is the batch. Nothing may panic; a batch that folds must
//! render control.min/max as well-formed documents that fold again (from_control), and a
//! failed batch must leave min/max as they were.
#![no_main]

use _native::control::minmax::MinMax;
use _native::control::schema::Schema;
use _native::control::{documents, Fail};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, buf)) = data.split_first() else {
        return;
    };
    let skip = match mode & 3 {
        0 => None,
        1 => Some("meta"),
        2 => Some("a"),
        _ => Some(""),
    };
    let offsets: Option<Vec<i64>> = (mode & 4 != 0).then(|| {
        // Every 7th byte position up to the end, some of them out of range.
        (0..buf.len() as i64 + 2).step_by(7).collect()
    });
    let docs = match documents(buf, offsets.as_deref()) {
        Ok(d) => d,
        Err(Fail::Invalid(_)) => return,
        Err(Fail::Declined(m)) => panic!("framing never declines: {m}"),
    };

    let mut mm = MinMax::new();
    let seed = documents(b"\x0c\x00\x00\x00\x10a\x00\x01\x00\x00\x00\x00", None)
        .expect("seed document");
    mm.update_batch(&seed, None).expect("seed folds");
    let before = (mm.min().expect("min"), mm.max().expect("max"));
    match mm.update_batch(&docs, skip) {
        Ok(()) => {
            let (lo, hi) = (mm.min().expect("min"), mm.max().expect("max"));
            for d in [&lo, &hi] {
                for item in d.iter() {
                    item.expect("rendered documents are well formed");
                }
            }
            let _ = MinMax::from_control(&lo, &hi).expect("control folds again");
            let _ = Schema::from_control(&lo, &hi);
        }
        Err(_) => {
            let after = (mm.min().expect("min"), mm.max().expect("max"));
            assert_eq!(before, after, "a failed batch changes nothing");
        }
    }

    let mut schema = Schema::new();
    let _ = schema.update_batch(&docs, skip);
});
