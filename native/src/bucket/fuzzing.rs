//! The properties the fuzz target `native/fuzz/fuzz_targets/bucket_columns.rs` checks,
//! as a library function (the unit tests run it too).
//!
//! Python reference: `storage/timeseries/columns.py` `Columns`. Nothing here may panic
//! on any input; a failing assertion is a bug.

use bson::raw::{cstr, RawBsonRef, RawDocument, RawDocumentBuf};

use super::columns::{BucketColumns, Row, Shapes};
use crate::bsoncolumn::builder::DEFAULT_MAX_VALUES;
use crate::bsoncolumn::decoder::decode_column;
use crate::control::Checked;
use crate::measurements::{scan, ScanOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE};

/// Documents cut from `data` by their int32 sizes (a bad size ends the list; the bytes
/// then are the last, malformed, document).
fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut docs = Vec::new();
    let mut rest = data;
    while rest.len() >= 4 {
        let n = i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        match usize::try_from(n)
            .ok()
            .filter(|&n| n >= 5 && n <= rest.len())
        {
            Some(n) => {
                docs.push(&rest[..n]);
                rest = &rest[n..];
            }
            None => {
                docs.push(rest);
                break;
            }
        }
    }
    docs
}

/// Names, (name, column) pairs, count and size: all a caller can see of the columns.
type Snapshot = (Vec<String>, Vec<(String, Vec<u8>)>, usize, usize);

fn snapshot(c: &BucketColumns) -> Snapshot {
    (
        c.names().map(str::to_owned).collect(),
        c.column_bytes()
            .map(|(n, b)| (n.to_owned(), b.to_vec()))
            .collect(),
        c.count(),
        c.compressed_size(),
    )
}

/// What an append collected for the control's fold: each document's top-level fields as
/// iterating it gives them (the skipped one left out), or None when a value does not read.
fn check_collected(batch: &[&[u8]], skip: &str, got: Option<Checked<'_>>) {
    let mut want: Vec<(&str, RawBsonRef<'_>)> = Vec::new();
    let mut ends = Vec::new();
    let mut readable = true;
    for d in batch {
        let doc = RawDocument::from_bytes(d).expect("an appended document is well-formed");
        for item in doc.iter() {
            match item {
                Ok((k, v)) if k.as_str() != skip => want.push((k.as_str(), v)),
                Ok(_) => {}
                Err(_) => readable = false,
            }
        }
        ends.push(want.len());
    }
    match got {
        None => assert!(
            !readable,
            "the fields of readable documents were not collected"
        ),
        Some(got) => {
            assert!(readable, "an unreadable value was collected");
            // compared as bytes (a NaN is not equal to itself)
            let bytes = |(k, v): (&str, RawBsonRef<'_>)| {
                let mut d = RawDocumentBuf::new();
                d.append(cstr!(""), v);
                (k.to_owned(), d.into_bytes())
            };
            let fields: Vec<_> = got
                .fields
                .iter()
                .map(|(k, v)| bytes((k.as_str(), *v)))
                .collect();
            assert_eq!(fields, want.into_iter().map(bytes).collect::<Vec<_>>());
            assert_eq!(got.ends, ends);
        }
    }
}

/// Arbitrary bytes as measurement documents (the first byte picks the meta field and
/// where the batch splits): an append either fails leaving the columns as they were or
/// gives columns that decode to `count` rows, whose changes hold, and that reopen to
/// columns continuing alike.
pub fn check_append(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let docs = split(rest);
    let skip = ["m", "tags", ""][sel as usize % 3];
    check_table(rest, skip);
    let cut = (sel as usize / 3) % (docs.len() + 1);
    let mut c = BucketColumns::new(Some("t"));
    for batch in [&docs[..cut], &docs[cut..]] {
        let before = snapshot(&c);
        let prev: Vec<Option<Vec<u8>>> = (0..c.len())
            .map(|i| c.field(i).1.map(<[u8]>::to_vec))
            .collect();
        let mut fields = Some(Checked::with_capacity(batch.len(), 8));
        let appended = c.append_collecting(
            batch.iter().copied().map(Row::Document),
            Some(skip),
            Some(&mut fields),
        );
        let Ok(done) = appended else {
            assert_eq!(snapshot(&c), before, "a failed append changed the columns");
            continue;
        };
        check_collected(batch, skip, fields);
        let mut delta = 0i64;
        for ch in &done.changes {
            let (_, column) = c.field(ch.field);
            let column = column.expect("a changed column has bytes");
            match prev.get(ch.field).cloned().flatten() {
                Some(p) => {
                    assert!(!ch.is_new);
                    assert_eq!(p[..ch.offset], column[..ch.offset]);
                    assert!(
                        ch.offset == p.len().min(column.len()) || p[ch.offset] != column[ch.offset]
                    );
                    delta += column.len() as i64 - p.len() as i64;
                }
                None => {
                    assert!(ch.is_new && ch.offset == 0);
                    delta += column.len() as i64;
                }
            }
        }
        assert_eq!(delta, done.delta);
        for (_, column) in c.column_bytes() {
            let rows = decode_column(column, DEFAULT_MAX_VALUES)
                .expect("a built column decodes")
                .rows
                .len();
            assert_eq!(rows, c.count());
        }
    }
    let data: Vec<(String, Vec<u8>)> = snapshot(&c).1;
    let Ok(mut again) = BucketColumns::from_data(
        data.iter().map(|(n, b)| (n.as_str(), b.as_slice())),
        c.count(),
    ) else {
        return;
    };
    let mut c2 = c.clone();
    let (a, b) = (
        again.append(docs.iter().copied(), Some(skip)),
        c2.append(docs.iter().copied(), Some(skip)),
    );
    assert_eq!(a.is_ok(), b.is_ok());
    if a.is_ok() {
        assert_eq!(
            snapshot(&again).1,
            snapshot(&c2).1,
            "reopened columns continue alike"
        );
    }
}

/// Documents the measurement scan read append from its table (`Row::Shaped`, for those of
/// fixed-width fields) as they do iterated: the same result, the same columns.
fn check_table(buf: &[u8], skip: &str) {
    let opts = ScanOptions {
        time_field: "t",
        meta_field: Some(skip),
        ordered: false,
        max_depth: DEFAULT_MAX_DEPTH,
        max_size: DEFAULT_MAX_SIZE,
    };
    let Ok(scanned) = scan(buf, None, &opts) else {
        return;
    };
    let shapes = Shapes::of(&scanned);
    let docs: Vec<&[u8]> = scanned.spans.iter().map(|&(s, n)| &buf[s..s + n]).collect();
    let rows = docs
        .iter()
        .enumerate()
        .map(|(i, &doc)| shapes.row(&scanned, i as i32, (scanned.spans[i].0, doc)));
    let (mut a, mut b) = (BucketColumns::new(Some("t")), BucketColumns::new(Some("t")));
    let (mut fa, mut fb) = (
        Some(Checked::with_capacity(docs.len(), 8)),
        Some(Checked::with_capacity(docs.len(), 8)),
    );
    let from_table = a.append_collecting(rows, Some(skip), Some(&mut fa));
    let iterated = b.append_collecting(
        docs.iter().copied().map(Row::Document),
        Some(skip),
        Some(&mut fb),
    );
    assert_eq!(
        from_table, iterated,
        "the table appends as the documents do"
    );
    assert_eq!(
        snapshot(&a),
        snapshot(&b),
        "the table gives the documents' columns"
    );
    if from_table.is_ok() {
        // as text: a NaN is not equal to itself
        let fields =
            |c: &Option<Checked<'_>>| c.as_ref().map(|c| format!("{:?}", (&c.fields, &c.ends)));
        assert_eq!(
            fields(&fa),
            fields(&fb),
            "the table collects the documents' fields"
        );
    }
}
