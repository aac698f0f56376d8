//! The properties the fuzz targets check, as library functions (also run by unit tests
//! over mutated vectors, so they hold without a fuzzer too).
//!
//! Python reference: `storage/bsoncolumn/decoder.py` and `BSONColumnBuilder.from_column`
//! in `storage/bsoncolumn/builder.py`. Nothing here may panic on any input; the
//! assertions state invariants between the native decoders and the builder, and a
//! failing one is a bug.

use super::builder::ColumnBuilder;
use super::decoder::{decode_column, decode_uniform};
use super::document::{picked_document, rows_document};

const MAX: usize = 1 << 16;

/// Both decoders on arbitrary bytes: what the uniform decoder takes the general one
/// decodes to as many rows; a decoded column re-encodes and decodes to the same rows;
/// its document (`decompress`) holds one element per present row, as does the document
/// of every row picked in reverse (`decompress_rows`).
pub fn check_decode(data: &[u8]) {
    let uniform = decode_uniform(data, MAX);
    let Ok(decoded) = decode_column(data, MAX) else {
        assert!(
            uniform.is_none(),
            "the uniform decoder took a column the general one rejects"
        );
        return;
    };
    if let Some(u) = uniform {
        assert_eq!(u.count, decoded.rows.len());
    }
    let present = decoded.rows.iter().filter(|r| r.is_some()).count();
    if let Some(doc) = rows_document(&decoded.rows) {
        assert_eq!(document_elements(&doc), present);
    }
    let reversed: Vec<usize> = (0..decoded.rows.len() + 1).rev().collect();
    if let Some(doc) = picked_document(&decoded.rows, &reversed) {
        assert_eq!(document_elements(&doc), present);
    }
    let mut b = ColumnBuilder::new();
    if b.extend(decoded.rows.iter()).is_ok() {
        let column = b.finalize().expect("finalize after a successful extend");
        let again = decode_column(&column, MAX).expect("the builder's column decodes");
        assert_eq!(again.rows, decoded.rows);
    }
}

/// Reopening arbitrary bytes as a builder: it keeps the rows, finalizes to a column of
/// the same rows and takes more values.
pub fn check_reopen(data: &[u8]) {
    let Ok(mut b) = ColumnBuilder::from_column(data) else {
        return;
    };
    let before = decode_column(data, 1 << 22).expect("a reopened column decodes");
    assert_eq!(b.len(), before.rows.len());
    let Ok(column) = b.finalize() else {
        return;
    };
    let after = decode_column(&column, 1 << 22).expect("the reopened column decodes");
    assert_eq!(after.rows, before.rows);
    let more: [Option<(u8, &[u8])>; 3] = [None, Some((0x10, &[1, 0, 0, 0])), Some((0x01, &[0; 8]))];
    if b.extend(more).is_ok() {
        let column = b.finalize().expect("finalize after a successful extend");
        let rows = decode_column(&column, 1 << 22).expect("decodes").rows;
        assert_eq!(rows.len(), before.rows.len() + 3);
    }
}

/// The number of elements of a document `rows_document` wrote, checking its framing
/// (the length prefix, the names, each value's extent as `decode_column` validated it).
fn document_elements(doc: &[u8]) -> usize {
    assert_eq!(
        u32::from_le_bytes([doc[0], doc[1], doc[2], doc[3]]) as usize,
        doc.len()
    );
    assert_eq!(doc.last(), Some(&0));
    let mut pos = 4;
    let mut n = 0;
    while doc[pos] != 0 {
        let t = doc[pos];
        let name_end = pos + 1 + doc[pos + 1..].iter().position(|&b| b == 0).expect("a name");
        assert!(doc[pos + 1..name_end].iter().all(u8::is_ascii_digit));
        let size = match super::elements::check_value(t, doc, name_end + 1, doc.len() - 1) {
            super::elements::Check::Valid(size) => size,
            _ => panic!("an invalid value in the document"),
        };
        pos = name_end + 1 + size;
        n += 1;
    }
    assert_eq!(pos + 1, doc.len());
    n
}
