use bson::oid::ObjectId;
use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{rawdoc, DateTime};

use super::*;

fn opts(ordered: bool) -> ScanOptions<'static> {
    ScanOptions {
        time_field: "t",
        meta_field: Some("m"),
        ordered,
        max_depth: DEFAULT_MAX_DEPTH,
        max_size: DEFAULT_MAX_SIZE,
    }
}

fn batch(docs: &[RawDocumentBuf]) -> Vec<u8> {
    docs.iter().flat_map(|d| d.as_bytes().to_vec()).collect()
}

fn key_of(value: RawBsonRef<'_>) -> Vec<u8> {
    let mut d = RawDocumentBuf::new();
    d.append(bson::raw::cstr!(""), value);
    let b = d.into_bytes();
    b[4..b.len() - 1].to_vec()
}

#[test]
fn groups_by_series_in_first_appearance_and_sorts_by_time() {
    let docs = [
        rawdoc! {"t": DateTime::from_millis(30), "m": {"b": 1, "a": 2}, "x": 1.5},
        rawdoc! {"t": DateTime::from_millis(10), "m": "s2"},
        rawdoc! {"t": DateTime::from_millis(-5), "m": {"a": 2, "b": 1}},
        rawdoc! {"t": DateTime::from_millis(30), "m": {"a": 2, "b": 1}},
        rawdoc! {"t": DateTime::from_millis(7)},
    ];
    let out = scan(&batch(&docs), None, &opts(true)).unwrap();
    assert_eq!(out.spans.len(), 5);
    assert!(out.errors.is_empty());
    assert_eq!(out.times, vec![30, 10, -5, 30, 7]);
    assert_eq!(out.series_of, vec![0, 1, 0, 0, 2]);
    assert_eq!(out.order, vec![2, 0, 3, 1, 4]);
    assert_eq!(out.series_starts, vec![0, 3, 4, 5]);
    let sorted = rawdoc! {"a": 2, "b": 1};
    assert_eq!(out.series[0].key, key_of(RawBsonRef::Document(&sorted)));
    assert_eq!(out.series[0].meta_value_size, 1 + sorted.as_bytes().len());
    assert_eq!(out.series[2].key, Vec::<u8>::new());
    assert_eq!(out.series[2].meta_value_size, 0);
    // fields: t, x and the added _id; values 8 + 8 + 12
    assert_eq!(out.field_counts[0], 3);
    assert_eq!(out.value_bytes[0], 28);
    assert_eq!(out.max_value_lens[0], 12);
    assert!(!out.has_id[0]);
}

#[test]
fn nested_meta_is_normalised_recursively_and_arrays_keep_order() {
    let docs = [
        rawdoc! {"t": DateTime::from_millis(1), "m": [{"z": 1, "y": {"q": 1, "p": 2}}, 3]},
        rawdoc! {"t": DateTime::from_millis(2), "m": [{"y": {"p": 2, "q": 1}, "z": 1}, 3]},
        rawdoc! {"t": DateTime::from_millis(3), "m": [3, {"y": {"p": 2, "q": 1}, "z": 1}]},
    ];
    let out = scan(&batch(&docs), None, &opts(true)).unwrap();
    assert_eq!(out.series_of, vec![0, 0, 1]);
}

#[test]
fn max_len_and_id() {
    let id = ObjectId::from_bytes([1; 12]);
    let docs = [
        rawdoc! {"_id": 5_i32, "t": DateTime::from_millis(1), "a": true},
        rawdoc! {"_id": id, "t": DateTime::from_millis(1), "s": "a longer string value"},
    ];
    let out = scan(&batch(&docs), None, &opts(true)).unwrap();
    assert_eq!(out.field_counts, vec![3, 3]);
    assert_eq!(out.value_bytes, vec![4 + 8 + 1, 12 + 8 + 4 + 22]);
    assert_eq!(out.max_value_lens, vec![8, 26]);
    assert_eq!(out.has_id, vec![true, true]);
}

#[test]
fn time_errors_ordered_and_unordered() {
    let docs = [
        rawdoc! {"t": DateTime::from_millis(1)},
        rawdoc! {"t": 5_i64},
        rawdoc! {"x": 1},
        rawdoc! {"t": DateTime::from_millis(2)},
    ];
    let buf = batch(&docs);
    let msg = "'t' must be present and contain a valid BSON UTC datetime value";
    let out = scan(&buf, None, &opts(true)).unwrap();
    assert_eq!(out.scanned, 2);
    assert_eq!(
        out.errors,
        vec![MeasurementError {
            index: 1,
            code: codes::BAD_VALUE,
            message: msg.into()
        }]
    );
    assert_eq!(out.order, vec![0]);
    let out = scan(&buf, None, &opts(false)).unwrap();
    assert_eq!(out.scanned, 4);
    assert_eq!(
        out.errors.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(out.order, vec![0, 3]);
    assert_eq!(out.series_of, vec![0, -1, -1, 0]);
}

#[test]
fn invalid_documents_with_offsets() {
    let good = rawdoc! {"t": DateTime::from_millis(1)};
    let mut bad = good.as_bytes().to_vec();
    bad[4] = 0x42; // unknown type
    let mut buf = good.as_bytes().to_vec();
    let second = buf.len() as u64;
    buf.extend_from_slice(&bad);
    let third = buf.len() as u64;
    buf.extend_from_slice(&[1, 2, 3]);
    let fourth = buf.len() as u64;
    buf.extend_from_slice(good.as_bytes());
    let out = scan(&buf, Some(&[0, second, third, fourth]), &opts(false)).unwrap();
    let codes_: Vec<(usize, i32)> = out.errors.iter().map(|e| (e.index, e.code)).collect();
    assert_eq!(
        codes_,
        vec![(1, codes::INVALID_BSON), (2, codes::INVALID_BSON)]
    );
    assert_eq!(out.order, vec![0, 3]);
}

#[test]
fn framing_errors_are_for_the_batch() {
    let good = rawdoc! {"t": DateTime::from_millis(1)};
    let mut buf = good.as_bytes().to_vec();
    buf.extend_from_slice(&[200, 0, 0, 0, 0]);
    assert!(matches!(
        scan(&buf, None, &opts(false)),
        Err(ScanFailure::Batch { code: 22, .. })
    ));
    assert!(matches!(
        scan(&buf, Some(&[3, 1]), &opts(false)),
        Err(ScanFailure::Batch { code: 2, .. })
    ));
    assert_eq!(scan(&[], None, &opts(true)).unwrap().spans.len(), 0);
}

fn nested(depth: usize) -> RawDocumentBuf {
    let mut d = rawdoc! {"x": 1};
    for _ in 0..depth {
        d = rawdoc! {"a": d};
    }
    d
}

#[test]
fn depth_limit_is_overflow() {
    let ok = {
        let mut d = nested(DEFAULT_MAX_DEPTH);
        d.append(bson::raw::cstr!("t"), DateTime::from_millis(1));
        d
    };
    let deep = {
        let mut d = nested(DEFAULT_MAX_DEPTH + 1);
        d.append(bson::raw::cstr!("t"), DateTime::from_millis(1));
        d
    };
    let out = scan(&batch(&[ok, deep]), None, &opts(false)).unwrap();
    assert_eq!(out.errors.len(), 1);
    assert_eq!(
        (out.errors[0].index, out.errors[0].code),
        (1, codes::OVERFLOW)
    );
}

#[test]
fn a_meta_seen_before_is_not_walked_again_but_a_refused_one_is() {
    let with_meta = |m: RawDocumentBuf, t: i64| {
        let mut d = rawdoc! {"t": DateTime::from_millis(t)};
        d.append(bson::raw::cstr!("m"), m);
        d
    };
    let deep = nested(DEFAULT_MAX_DEPTH + 1);
    let fine = rawdoc! {"b": 1, "a": "x"};
    let docs = [
        with_meta(deep.clone(), 1),
        with_meta(fine.clone(), 2),
        with_meta(deep, 3),
        with_meta(fine, 4),
    ];
    let out = scan(&batch(&docs), None, &opts(false)).unwrap();
    let refused: Vec<_> = out.errors.iter().map(|e| (e.index, e.code)).collect();
    assert_eq!(refused, [(0, codes::OVERFLOW), (2, codes::OVERFLOW)]);
    assert_eq!(out.series_of[1], out.series_of[3]);
    assert_eq!(out.series.len(), 1);
}

#[test]
fn size_limit() {
    let doc = rawdoc! {"t": DateTime::from_millis(1), "s": "x".repeat(100)};
    let mut o = opts(true);
    o.max_size = 50;
    let out = scan(doc.as_bytes(), None, &o).unwrap();
    assert_eq!(out.errors[0].code, codes::BSON_OBJECT_TOO_LARGE);
}

#[test]
fn quirks_decline() {
    let cases = [
        rawdoc! {"t": DateTime::from_millis(1), "s": bson::RawBsonRef::Symbol("x")},
        rawdoc! {"t": DateTime::from_millis(1), "u": bson::RawBsonRef::Undefined},
        rawdoc! {"t": DateTime::from_millis(1), "d": {"$ref": "c", "$id": 1}},
        rawdoc! {"t": DateTime::from_millis(1), "m": {"a": {"a": 1, "a": 2}}},
        rawdoc! {"t": DateTime::from_millis(1), "t": DateTime::from_millis(2)},
        rawdoc! {"t": DateTime::from_millis(1), "r": bson::Regex { pattern: "a".try_into().unwrap(), options: "xi".try_into().unwrap() }},
    ];
    for c in cases {
        assert!(
            matches!(
                scan(c.as_bytes(), None, &opts(true)),
                Err(ScanFailure::Declined { index: 0, .. })
            ),
            "{c:?}"
        );
    }
    // after an ordered stop, a quirk is never looked at
    let buf = batch(&[
        rawdoc! {"x": 1},
        rawdoc! {"t": DateTime::from_millis(1), "u": bson::RawBsonRef::Undefined},
    ]);
    assert_eq!(scan(&buf, None, &opts(true)).unwrap().errors.len(), 1);
}

#[test]
fn arbitrary_bytes_never_panic() {
    // a small deterministic sweep; the fuzz target does the real work
    let good = rawdoc! {"t": DateTime::from_millis(1), "m": {"a": [1, {"b": "c"}]}, "v": 2.5};
    let bytes = good.as_bytes();
    for i in 0..bytes.len() {
        for v in [0u8, 1, 2, 3, 4, 0x7f, 0xff] {
            let mut b = bytes.to_vec();
            b[i] = v;
            let _ = scan(&b, None, &opts(false));
            let _ = scan(&b, Some(&[0, i as u64]), &opts(false));
        }
    }
}

#[test]
fn fields_are_the_raw_elements_without_the_meta() {
    let doc = rawdoc! {"t": DateTime::from_millis(1), "m": {"a": 1}, "s": "é", "n": bson::RawBsonRef::Null};
    let got = fields(doc.as_bytes(), Some("m")).unwrap();
    let one = 1i64.to_le_bytes();
    let want = vec![
        Field {
            name: "t",
            type_byte: 0x09,
            value: &one,
        },
        Field {
            name: "s",
            type_byte: 0x02,
            value: &[3, 0, 0, 0, 0xc3, 0xa9, 0],
        },
        Field {
            name: "n",
            type_byte: 0x0a,
            value: &[],
        },
    ];
    assert_eq!(got, want);
    assert_eq!(fields(doc.as_bytes(), None).unwrap().len(), 4);
    assert!(fields(&doc.as_bytes()[1..], None).is_err());
}

#[test]
fn shapes_are_the_field_names_and_types_but_the_meta() {
    let docs = [
        rawdoc! {"t": DateTime::from_millis(1), "m": "a", "x": 1.5, "y": 2_i64},
        rawdoc! {"t": DateTime::from_millis(2), "x": 2.5, "m": {"k": 1}, "y": 3_i64},
        rawdoc! {"t": DateTime::from_millis(3), "m": "a", "x": 1_i32, "y": 2_i64},
        rawdoc! {"t": "not a date", "m": "a"},
        rawdoc! {"y": 2_i64, "t": DateTime::from_millis(4), "x": 0.5},
    ];
    let out = scan(&batch(&docs), None, &opts(false)).unwrap();
    assert_eq!(out.shape_of, vec![0, 0, 1, -1, 2]);
    let named = |f: &[(&str, u8)]| -> Vec<(String, u8)> {
        f.iter().map(|&(n, t)| (n.to_string(), t)).collect()
    };
    assert_eq!(
        out.shapes,
        vec![
            named(&[("t", 0x09), ("x", 0x01), ("y", 0x12)]),
            named(&[("t", 0x09), ("x", 0x10), ("y", 0x12)]),
            named(&[("y", 0x12), ("t", 0x09), ("x", 0x01)]),
        ]
    );
}
