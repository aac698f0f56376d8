//! The measurement scan on arbitrary bytes: never a panic, and a result that holds
//! together (one entry per document, the order a permutation of the accepted
//! measurements grouped by series and sorted by time, errors by index, an ordered scan
//! stopping at its first error, series keys unique and already normalised, each accepted
//! document scanned alone giving what the batch gave).
//!
//! Input: a control byte, then the batch. Control bits: 0 ordered; 1 frame by offsets
//! (the next byte is how many cut points, each two more bytes, little-endian, taken
//! modulo the batch length and sorted) instead of by length prefixes; 2 a meta field;
//! 3 a small depth limit (21, maxBSONDepth's floor) instead of 200; 4 a small size limit.
#![no_main]

use _native::measurements::{fields, scan, ScanFailure, ScanOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let ordered = control & 1 != 0;
    let (offsets, buf) = if control & 2 != 0 {
        let Some((&n, rest)) = rest.split_first() else {
            return;
        };
        let need = 2 * n as usize;
        if rest.len() < need {
            return;
        }
        let (cuts, buf) = rest.split_at(need);
        let mut offsets: Vec<u64> = cuts
            .chunks_exact(2)
            .map(|c| u64::from(u16::from_le_bytes([c[0], c[1]])) % (buf.len() as u64 + 1))
            .collect();
        offsets.sort_unstable();
        (Some(offsets), buf)
    } else {
        (None, rest)
    };
    let opts = ScanOptions {
        time_field: "t",
        meta_field: if control & 4 != 0 { Some("m") } else { None },
        ordered,
        max_depth: if control & 8 != 0 { 21 } else { 200 },
        max_size: if control & 16 != 0 {
            64
        } else {
            16 * 1024 * 1024
        },
    };
    let out = match scan(buf, offsets.as_deref(), &opts) {
        Ok(out) => out,
        Err(ScanFailure::Batch { code, .. }) => {
            assert!(code == 2 || code == 22);
            return;
        }
        Err(ScanFailure::Declined { .. }) => return,
    };
    let n = out.spans.len();
    if let Some(o) = &offsets {
        assert_eq!(n, o.len());
    }
    for v in [out.times.len(), out.series_of.len(), out.field_counts.len()] {
        assert_eq!(v, n);
    }
    assert!(out.scanned <= n);
    for &(s, l) in &out.spans {
        assert!(s + l <= buf.len());
    }
    // errors by index; with `ordered`, one at most and the scan ends there
    assert!(out.errors.windows(2).all(|w| w[0].index < w[1].index));
    if ordered {
        assert!(out.errors.len() <= 1);
        if let Some(e) = out.errors.first() {
            assert_eq!(out.scanned, e.index + 1);
        }
    } else {
        assert_eq!(out.scanned, n);
    }
    // the order: every accepted measurement once, series by series, by time
    let accepted: Vec<usize> = (0..n).filter(|&i| out.series_of[i] >= 0).collect();
    assert_eq!(accepted.len() + out.errors.len() + (n - out.scanned), n);
    assert_eq!(out.series_starts.len(), out.series.len() + 1);
    assert_eq!(out.order.len(), accepted.len());
    let mut seen = vec![false; n];
    for (j, w) in out.series_starts.windows(2).enumerate() {
        let members = &out.order[w[0] as usize..w[1] as usize];
        assert!(!members.is_empty());
        for pair in members.windows(2) {
            let (a, b) = (pair[0] as usize, pair[1] as usize);
            assert!(out.times[a] < out.times[b] || (out.times[a] == out.times[b] && a < b));
        }
        for &i in members {
            assert_eq!(out.series_of[i as usize], j as i32);
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        }
    }
    // each accepted measurement scanned alone gives what the batch gave (the per-batch
    // meta cache and the scratch space carry nothing over)
    for &i in &accepted {
        let (s, l) = out.spans[i];
        let alone = scan(&buf[s..s + l], None, &opts).expect("an accepted document scans alone");
        assert!(alone.errors.is_empty());
        assert_eq!(alone.times[0], out.times[i]);
        assert_eq!(alone.field_counts[0], out.field_counts[i]);
        assert_eq!(alone.value_bytes[0], out.value_bytes[i]);
        assert_eq!(alone.max_value_lens[0], out.max_value_lens[i]);
        assert_eq!(alone.has_id[0], out.has_id[i]);
        assert_eq!(alone.nested[0], out.nested[i]);
        assert_eq!(alone.series[0], out.series[out.series_of[i] as usize]);
        // its fields (the added _id aside) are what the counts and sizes say
        let fields =
            fields(&buf[s..s + l], opts.meta_field).expect("an accepted document's fields");
        let added = if out.has_id[i] { 0 } else { 1 };
        assert_eq!(fields.len() as i32 + added, out.field_counts[i]);
        let total: usize = fields.iter().map(|f| f.value.len()).sum();
        assert_eq!(total as i64 + 12 * i64::from(added), out.value_bytes[i]);
    }
    // series keys: unique, the meta-less one empty, each a valid element that a second
    // scan (as the meta of a document) keeps as it is
    for (j, s) in out.series.iter().enumerate() {
        assert!(out.series[..j].iter().all(|o| o.key != s.key));
        if s.key.is_empty() {
            assert_eq!(s.meta_value_size, 0);
            continue;
        }
        assert_eq!(s.meta_value_size + 1, s.key.len());
        let mut doc = Vec::new();
        // {t: Date(0), m: <the key's value>}
        let body_len = (1 + 2 + 8) + (1 + 2 + s.key.len() - 2) + 1;
        doc.extend_from_slice(&((4 + body_len) as i32).to_le_bytes());
        doc.extend_from_slice(&[9, b't', 0]);
        doc.extend_from_slice(&0i64.to_le_bytes());
        doc.push(s.key[0]);
        doc.extend_from_slice(b"m\0");
        doc.extend_from_slice(&s.key[2..]);
        doc.push(0);
        let again = ScanOptions {
            meta_field: Some("m"),
            ordered: true,
            max_depth: 1000,
            max_size: usize::MAX,
            ..opts.clone()
        };
        let re = scan(&doc, None, &again).expect("a series key scans again");
        assert!(re.errors.is_empty());
        assert_eq!(re.series[0].key, s.key);
    }
});
