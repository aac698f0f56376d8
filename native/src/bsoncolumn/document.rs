//! The document `{"<row>": value, ...}` of decoded rows, skipped rows omitted.
//!
//! Python reference: `rows_to_document` in `storage/bsoncolumn/api.py` (what
//! `decompress` returns): the same bytes, under the same size bound (over it the
//! reference raises BSONColumnError; here the result is `None` and the caller asks the
//! reference, which then words the error).

use super::decoder::Rows;

/// The bound on a decompressed column's document: 16 MiB + 16 KiB.
pub const MAX_DECOMPRESSED_SIZE: usize = 16 * 1024 * 1024 + 16 * 1024;

/// The document of every row, each present row under its decimal index; None over
/// `MAX_DECOMPRESSED_SIZE`.
pub fn rows_document(rows: &Rows) -> Option<Vec<u8>> {
    write(rows.len(), rows.data.len(), |i| rows.get(i))
}

/// The document of the rows at `positions`, each under its index in `positions`; a
/// position past the last row is absent (trailing skipped rows are not encoded). None
/// over `MAX_DECOMPRESSED_SIZE`.
pub fn picked_document(rows: &Rows, positions: &[usize]) -> Option<Vec<u8>> {
    let n = rows.len();
    write(positions.len(), 0, |k| {
        let i = positions[k];
        if i < n {
            rows.get(i)
        } else {
            None
        }
    })
}

fn write<'a>(
    n: usize,
    hint: usize,
    row: impl Fn(usize) -> Option<(u8, &'a [u8])>,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity((5 + hint + 8 * n).min(MAX_DECOMPRESSED_SIZE));
    out.extend_from_slice(&[0; 4]);
    for i in 0..n {
        let Some((t, v)) = row(i) else {
            continue;
        };
        out.push(t);
        push_index(&mut out, i);
        out.extend_from_slice(v);
        if out.len() + 1 > MAX_DECOMPRESSED_SIZE {
            return None;
        }
    }
    out.push(0);
    let size = out.len() as u32; // at most MAX_DECOMPRESSED_SIZE
    out[..4].copy_from_slice(&size.to_le_bytes());
    Some(out)
}

/// `i` in decimal and the NUL ending a BSON field name.
fn push_index(out: &mut Vec<u8>, mut i: usize) {
    let mut buf = [0u8; 20];
    let mut p = buf.len();
    loop {
        p -= 1;
        buf[p] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[p..]);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsoncolumn::builder::ColumnBuilder;
    use crate::bsoncolumn::decoder::decode_column;

    fn rows_of(values: &[Option<(u8, &[u8])>]) -> Rows {
        let mut b = ColumnBuilder::new();
        b.extend(values.iter().copied()).unwrap();
        decode_column(&b.finalize().unwrap(), 1 << 22).unwrap().rows
    }

    #[test]
    fn present_rows_under_their_index() {
        let rows = rows_of(&[Some((0x10, &[1, 0, 0, 0])), None, Some((0x0A, &[]))]);
        let doc = rows_document(&rows).unwrap();
        let mut want = vec![0u8; 4];
        want.extend_from_slice(b"\x100\x00\x01\x00\x00\x00\x0a2\x00\x00");
        let len = want.len() as u32;
        want[..4].copy_from_slice(&len.to_le_bytes());
        assert_eq!(doc, want);
    }

    #[test]
    fn picked_rows_under_their_place_in_the_pick() {
        let one = 1i32.to_le_bytes();
        let two = 2i32.to_le_bytes();
        let rows = rows_of(&[Some((0x10, &one)), None, Some((0x10, &two))]);
        let doc = picked_document(&rows, &[2, 1, 0, 9]).unwrap();
        let mut want = vec![0u8; 4];
        want.extend_from_slice(b"\x100\x00\x02\x00\x00\x00\x102\x00\x01\x00\x00\x00\x00");
        let len = want.len() as u32;
        want[..4].copy_from_slice(&len.to_le_bytes());
        assert_eq!(doc, want);
        assert_eq!(picked_document(&rows, &[]).unwrap(), vec![5, 0, 0, 0, 0]);
    }

    #[test]
    fn indexes_in_decimal() {
        for (i, s) in [(0usize, "0"), (9, "9"), (10, "10"), (1234567, "1234567")] {
            let mut out = Vec::new();
            push_index(&mut out, i);
            assert_eq!(out, [s.as_bytes(), &[0]].concat());
        }
    }

    #[test]
    fn over_the_size_bound_is_none() {
        let s = vec![b'x'; 1 << 20];
        let mut v = ((s.len() + 1) as i32).to_le_bytes().to_vec();
        v.extend_from_slice(&s);
        v.push(0);
        let values: Vec<Option<(u8, &[u8])>> = (0..17).map(|_| Some((0x02, &v[..]))).collect();
        let rows = rows_of(&values);
        assert!(rows_document(&rows).is_none());
        assert!(picked_document(&rows, &[0, 1, 2]).is_some());
    }
}
