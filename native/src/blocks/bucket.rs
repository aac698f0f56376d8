//! One stored bucket as typed rows: its meta element, its times and the needed columns.
//!
//! Python reference: `storage/timeseries/unpack.py` (`numeric_bucket`, `unpack_columns`):
//! rows are the values of the time column in stored order; a column shorter than the
//! time column, or skipping a row, leaves that row's field missing. Version 1
//! (uncompressed) buckets, columns that are not BinData subtype 7, malformed columns and
//! values of types other than int32/int64/double/bool/date/null are declined.

use bson::raw::{RawBsonRef, RawDocument};
use bson::spec::BinarySubtype;

use super::Decline;
use crate::bsoncolumn::decoder::{decode_column, decode_uniform};
use crate::bsoncolumn::values::*;

/// A row's value of one field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    Missing,
    Null,
    Int32(i32),
    Int64(i64),
    Double(f64),
    Bool(bool),
    Date(i64),
}

/// Rows of one bucket: the time of each row and each needed column (same length).
#[derive(Debug, Default)]
pub struct Rows {
    pub times: Vec<i64>,
    pub columns: Vec<Vec<Val>>,
}

/// The most rows a column of one bucket may hold (the reference's decoding bound).
const MAX_ROWS: usize = 1 << 22;

fn column_bytes<'a>(data: &'a RawDocument, name: &str) -> Result<Option<&'a [u8]>, Decline> {
    match data.get(name) {
        Ok(None) => Ok(None),
        Ok(Some(RawBsonRef::Binary(b))) if b.subtype == BinarySubtype::Column => Ok(Some(b.bytes)),
        _ => Err(Decline("a data field that is not a BSONColumn")),
    }
}

/// The rows of a column as values (a skipped row is `Missing`).
pub fn decode_values(column: &[u8]) -> Result<Vec<Val>, Decline> {
    if let Some(u) = decode_uniform(column, MAX_ROWS) {
        let ints = u.values.iter().map(|&v| v as i64);
        return Ok(match u.t {
            T_INT32 => ints.map(|v| Val::Int32(v as i32)).collect(),
            T_INT64 => ints.map(Val::Int64).collect(),
            T_DATE => ints.map(Val::Date).collect(),
            T_DOUBLE => ints
                .map(|v| Val::Double(f64::from_bits(v as u64)))
                .collect(),
            _ => return Err(Decline("an unexpected uniform column type")),
        });
    }
    let decoded = decode_column(column, MAX_ROWS).map_err(|_| Decline("a column not decoded"))?;
    decoded
        .rows
        .iter()
        .map(|row| {
            Ok(match row {
                None => Val::Missing,
                Some((T_INT32, v)) => Val::Int32(read_i32(v)),
                Some((T_INT64, v)) => Val::Int64(read_u64(v) as i64),
                Some((T_DATE, v)) => Val::Date(read_u64(v) as i64),
                Some((T_DOUBLE, v)) => Val::Double(f64::from_bits(read_u64(v))),
                Some((T_BOOL, v)) if v == [0] || v == [1] => Val::Bool(v[0] == 1),
                Some((T_NULL, _)) => Val::Null,
                _ => return Err(Decline("a value of a type block processing leaves alone")),
            })
        })
        .collect()
}

/// The rows of `raw` (a stored bucket): its times, and the columns of `fields`, each as
/// long as the time column (a field absent from the bucket is all `Missing`).
pub fn read_rows(raw: &[u8], time_field: &str, fields: &[String]) -> Result<Rows, Decline> {
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    let control = match doc.get("control") {
        Ok(Some(RawBsonRef::Document(c))) => c,
        _ => return Err(Decline("a bucket without control")),
    };
    match control.get("version") {
        Ok(Some(RawBsonRef::Int32(2 | 3))) => {}
        _ => return Err(Decline("not a compressed bucket")),
    }
    let data = match doc.get("data") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        Ok(None) => return Ok(Rows::default()),
        _ => return Err(Decline("a data region that is not a document")),
    };
    if data.is_empty() {
        return Ok(Rows::default());
    }
    let Some(time_col) = column_bytes(data, time_field)? else {
        return Err(Decline("no time column")); // the reference raises 5346700
    };
    let times = match decode_uniform(time_col, MAX_ROWS) {
        // the usual time column: straight to milliseconds, no value per row in between
        Some(u) if u.t == T_DATE => u.values.into_iter().map(|v| v as i64).collect(),
        _ => decode_values(time_col)?
            .into_iter()
            .map(|v| match v {
                Val::Date(ms) => Ok(ms),
                _ => Err(Decline("a time that is not a date")),
            })
            .collect::<Result<Vec<i64>, Decline>>()?,
    };
    let n = times.len();
    let mut columns = Vec::with_capacity(fields.len());
    for f in fields {
        let mut vals = match column_bytes(data, f)? {
            Some(c) => decode_values(c)?,
            None => Vec::new(),
        };
        if vals.len() > n {
            return Err(Decline("a column longer than the time column"));
        }
        vals.resize(n, Val::Missing);
        columns.push(vals);
    }
    Ok(Rows { times, columns })
}

/// The meta element of a stored bucket as the document `{"m": meta}` (None: no meta).
pub fn meta_doc(raw: &[u8]) -> Result<Option<Vec<u8>>, Decline> {
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    match doc.get("meta") {
        Ok(None) => Ok(None),
        Ok(Some(v)) => {
            let mut out = bson::RawDocumentBuf::new();
            out.append(bson::raw::cstr!("m"), v);
            Ok(Some(out.into_bytes()))
        }
        Err(_) => Err(Decline("a malformed bucket")),
    }
}

/// Writes into `key` a name of a stored bucket's meta value: equal keys for equal stored
/// values (the type, then the value's bytes); empty for a bucket without meta.
pub fn meta_key(raw: &[u8], key: &mut Vec<u8>) -> Result<(), Decline> {
    key.clear();
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    let v = match doc.get("meta") {
        Ok(None) => return Ok(()),
        Ok(Some(v)) => v,
        Err(_) => return Err(Decline("a malformed bucket")),
    };
    key.push(v.element_type() as u8);
    match v {
        RawBsonRef::Document(d) => key.extend_from_slice(d.as_bytes()),
        RawBsonRef::Array(a) => key.extend_from_slice(a.as_bytes()),
        RawBsonRef::String(s) => key.extend_from_slice(s.as_bytes()),
        _ => key.extend(meta_doc(raw)?.unwrap_or_default()),
    }
    Ok(())
}

/// `control.max.<time_field>` of a stored bucket in ms (None: absent or not a date).
pub fn max_time(raw: &[u8], time_field: &str) -> Result<Option<i64>, Decline> {
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    let Ok(Some(RawBsonRef::Document(control))) = doc.get("control") else {
        return Ok(None);
    };
    let Ok(Some(RawBsonRef::Document(max))) = control.get("max") else {
        return Ok(None);
    };
    Ok(match max.get(time_field) {
        Ok(Some(RawBsonRef::DateTime(t))) => Some(t.timestamp_millis()),
        _ => None,
    })
}

/// A stored bucket without its `data` region: every other top-level element, in order.
pub fn head_doc(raw: &[u8]) -> Result<Vec<u8>, Decline> {
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    let mut out = bson::RawDocumentBuf::new();
    for element in doc.iter() {
        let (name, value) = element.map_err(|_| Decline("a malformed bucket"))?;
        if name.as_str() != "data" {
            out.append(name, value);
        }
    }
    Ok(out.into_bytes())
}

/// One row's present data fields: (name, BSON type, value bytes), in data order.
pub type RowElements = Vec<(String, u8, Vec<u8>)>;

/// The rows of a stored bucket whose time is `t` (ms): each row's data fields but the
/// time field, restricted to `keep` when given. Declines what `read_rows` declines but
/// for value types: any scalar type is returned as its bytes; a column holding objects or
/// arrays (interleaved) is declined.
pub fn rows_at_time(
    raw: &[u8],
    time_field: &str,
    t: i64,
    keep: Option<&[String]>,
) -> Result<Vec<RowElements>, Decline> {
    let times = read_rows(raw, time_field, &[])?.times;
    let picked: Vec<usize> = (0..times.len()).filter(|&r| times[r] == t).collect();
    let mut out: Vec<RowElements> = vec![Vec::new(); picked.len()];
    if picked.is_empty() {
        return Ok(out);
    }
    let doc = RawDocument::from_bytes(raw).map_err(|_| Decline("a malformed bucket"))?;
    let Ok(Some(RawBsonRef::Document(data))) = doc.get("data") else {
        return Err(Decline("a data region that is not a document"));
    };
    for element in data.iter() {
        let (name, value) = element.map_err(|_| Decline("a malformed data region"))?;
        let name = name.as_str();
        if name == time_field || keep.is_some_and(|k| !k.iter().any(|f| f == name)) {
            continue;
        }
        let RawBsonRef::Binary(b) = value else {
            return Err(Decline("a data field that is not a BSONColumn"));
        };
        if b.subtype != BinarySubtype::Column {
            return Err(Decline("a data field that is not a BSONColumn"));
        }
        if let Some(u) = decode_uniform(b.bytes, MAX_ROWS) {
            // a numeric column without skips: its 8-byte values, no element per row
            if u.count > times.len() {
                return Err(Decline("a column longer than the time column"));
            }
            for (k, &r) in picked.iter().enumerate() {
                if r < u.count {
                    let v = u.values[r].to_le_bytes();
                    let bytes = if u.t == T_INT32 {
                        v[..4].to_vec()
                    } else {
                        v.to_vec()
                    };
                    out[k].push((name.to_string(), u.t, bytes));
                }
            }
            continue;
        }
        let rows = decode_column(b.bytes, MAX_ROWS)
            .map_err(|_| Decline("a column not decoded"))?
            .rows;
        if rows.len() > times.len() {
            return Err(Decline("a column longer than the time column"));
        }
        for (k, &r) in picked.iter().enumerate() {
            if r < rows.len() {
                if let Some((ty, v)) = rows.get(r) {
                    out[k].push((name.to_string(), ty, v.to_vec()));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsoncolumn::builder::encode_uniform;
    use bson::rawdoc;
    use bson::spec::BinarySubtype;
    use bson::{Binary, DateTime};

    fn column(t: u8, values: &[i64]) -> Binary {
        let bytes: Vec<u8> = if t == T_INT32 {
            values
                .iter()
                .flat_map(|&v| (v as i32).to_le_bytes())
                .collect()
        } else {
            values.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
        Binary {
            subtype: BinarySubtype::Column,
            bytes: encode_uniform(t, &bytes).expect("a uniform column"),
        }
    }

    #[test]
    fn reads_the_needed_columns_and_pads_short_ones() {
        let raw = rawdoc! {
            "_id": 1_i32,
            "control": {"version": 2_i32, "min": {"t": DateTime::from_millis(5)},
                        "max": {"t": DateTime::from_millis(7)}, "count": 3_i32},
            "meta": {"h": "a"},
            "data": {"t": column(T_DATE, &[5, 6, 7]), "x": column(T_INT64, &[1, 2]),
                     "y": column(T_INT32, &[4, 5, 6])},
        };
        let rows = read_rows(raw.as_bytes(), "t", &["x".into(), "z".into()]).unwrap();
        assert_eq!(rows.times, vec![5, 6, 7]);
        assert_eq!(
            rows.columns[0],
            vec![Val::Int64(1), Val::Int64(2), Val::Missing]
        );
        assert_eq!(rows.columns[1], vec![Val::Missing; 3]);
        assert_eq!(max_time(raw.as_bytes(), "t"), Ok(Some(7)));
        let head = rawdoc! {
            "_id": 1_i32,
            "control": {"version": 2_i32, "min": {"t": DateTime::from_millis(5)},
                        "max": {"t": DateTime::from_millis(7)}, "count": 3_i32},
            "meta": {"h": "a"},
        };
        assert_eq!(head_doc(raw.as_bytes()), Ok(head.into_bytes()));
        let at6 = rows_at_time(raw.as_bytes(), "t", 6, None).unwrap();
        let two = 2_i64.to_le_bytes().to_vec();
        let five = 5_i32.to_le_bytes().to_vec();
        assert_eq!(
            at6,
            vec![vec![
                ("x".into(), T_INT64, two),
                ("y".into(), T_INT32, five)
            ]]
        );
        let at7 = rows_at_time(raw.as_bytes(), "t", 7, Some(&["x".into()])).unwrap();
        assert_eq!(at7, vec![vec![]]); // x has no value at row 2, y is not kept
        assert!(rows_at_time(raw.as_bytes(), "t", 8, None)
            .unwrap()
            .is_empty());
        let meta = meta_doc(raw.as_bytes()).unwrap().unwrap();
        assert_eq!(meta, rawdoc! {"m": {"h": "a"}}.into_bytes());
    }

    #[test]
    fn declines_v1_buckets_and_foreign_columns() {
        let v1 =
            rawdoc! {"control": {"version": 1_i32}, "data": {"t": {"0": DateTime::from_millis(1)}}};
        assert!(read_rows(v1.as_bytes(), "t", &[]).is_err());
        let plain = rawdoc! {"control": {"version": 2_i32}, "data": {"t": column(T_DATE, &[1]), "x": 3_i32}};
        assert!(read_rows(plain.as_bytes(), "t", &["x".into()]).is_err());
        let strings = rawdoc! {"control": {"version": 2_i32}, "data": {"t": column(T_INT64, &[1])}};
        assert!(read_rows(strings.as_bytes(), "t", &[]).is_err()); // times not dates
        let empty = rawdoc! {"control": {"version": 3_i32}, "data": {}};
        assert_eq!(
            read_rows(empty.as_bytes(), "t", &[]).unwrap().times,
            Vec::<i64>::new()
        );
        assert_eq!(meta_doc(empty.as_bytes()), Ok(None));
        assert_eq!(max_time(empty.as_bytes(), "t"), Ok(None));
    }
}
