//! The order-preserving index key of one BSON value (`storage/keystring.py`'s
//! `encode_value`, the reference), for the values a time-series meta holds: a series'
//! meta is keyed by every reopening query for it and by the index keys of each of its
//! buckets, and encoding a document in Python costs several times decoding it.
//!
//! Covered: null, MinKey, MaxKey, booleans, int32, doubles, int64 up to 2**53 in
//! magnitude (exact as doubles), strings, documents, arrays, binData, ObjectId, dates and
//! timestamps. Everything else (decimal128, larger int64, regex, code, symbol,
//! undefined, DBPointer, binData subtype 2), what the reference reads otherwise than the
//! bytes say (a document with a `$ref` field, which Python decodes as a DBRef, and one
//! naming a field twice, which it decodes as one field), and a document whose names are
//! not in byte order (a series key's are: `metadata.normalize_meta`) is declined: the
//! caller encodes it with the reference.

use bson::raw::{RawArray, RawBsonRef, RawDocument};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::boundary::guard;
use crate::control::MAX_DEPTH;

const KS_MINKEY: u8 = 0x0A;
const KS_NULL: u8 = 0x0E;
const KS_NUM_NAN: u8 = 0x10;
const KS_NUM_NEG_INF: u8 = 0x11;
const KS_NUM_FINITE: u8 = 0x13;
const KS_NUM_POS_INF: u8 = 0x15;
const KS_STRING: u8 = 0x1E;
const KS_OBJECT: u8 = 0x28;
const KS_ARRAY: u8 = 0x32;
const KS_BINDATA: u8 = 0x3C;
const KS_OID: u8 = 0x46;
const KS_FALSE: u8 = 0x50;
const KS_TRUE: u8 = 0x51;
const KS_DATE: u8 = 0x5A;
const KS_TIMESTAMP: u8 = 0x64;
const KS_MAXKEY: u8 = 0xF0;
const END: u8 = 0x00;
/// int64 values up to this magnitude are exact as doubles, and encode as them
const EXACT_AS_DOUBLE: u64 = 1 << 53;

/// The value is left to the Python reference.
#[derive(Debug, PartialEq, Eq)]
pub struct Declined;

/// The key of the value of a series key (`metadata.series_key`: one BSON element with an
/// empty name, as it would sit in a document).
pub fn encode_element(element: &[u8]) -> Result<Vec<u8>, Declined> {
    let len = i32::try_from(element.len() + 5).map_err(|_| Declined)?;
    let mut doc = Vec::with_capacity(element.len() + 5);
    doc.extend_from_slice(&len.to_le_bytes());
    doc.extend_from_slice(element);
    doc.push(0);
    let doc = RawDocument::from_bytes(&doc).map_err(|_| Declined)?;
    let mut elements = doc.iter();
    let (_, value) = elements.next().ok_or(Declined)?.map_err(|_| Declined)?;
    if elements.next().is_some() {
        return Err(Declined);
    }
    let mut out = Vec::with_capacity(element.len() + 16);
    encode_value(value, &mut out, 0)?;
    Ok(out)
}

/// Appends the key of `v` to `out`.
pub fn encode_value(v: RawBsonRef<'_>, out: &mut Vec<u8>, depth: usize) -> Result<(), Declined> {
    match v {
        RawBsonRef::Null => out.push(KS_NULL),
        RawBsonRef::MinKey => out.push(KS_MINKEY),
        RawBsonRef::MaxKey => out.push(KS_MAXKEY),
        RawBsonRef::Boolean(b) => out.push(if b { KS_TRUE } else { KS_FALSE }),
        RawBsonRef::Double(d) => double(d, out),
        RawBsonRef::Int32(i) => double(f64::from(i), out),
        RawBsonRef::Int64(i) if i.unsigned_abs() <= EXACT_AS_DOUBLE => double(i as f64, out),
        RawBsonRef::String(s) => {
            out.push(KS_STRING);
            string_body(s, out);
        }
        RawBsonRef::Document(d) => object(d, out, depth + 1)?,
        RawBsonRef::Array(a) => array(a, out, depth + 1)?,
        RawBsonRef::Binary(b) => {
            let subtype = u8::from(b.subtype);
            if subtype == 2 {
                return Err(Declined); // the old binary form: Python strips an inner length
            }
            let len = u32::try_from(b.bytes.len()).map_err(|_| Declined)?;
            out.push(KS_BINDATA);
            out.extend_from_slice(&len.to_be_bytes());
            out.push(subtype);
            out.extend_from_slice(b.bytes);
        }
        RawBsonRef::ObjectId(oid) => {
            out.push(KS_OID);
            out.extend_from_slice(&oid.bytes());
        }
        RawBsonRef::DateTime(dt) => {
            out.push(KS_DATE);
            // (ms + 2**63) mod 2**64: the sign bit flipped
            let biased = (dt.timestamp_millis() as u64) ^ (1 << 63);
            out.extend_from_slice(&biased.to_be_bytes());
        }
        RawBsonRef::Timestamp(ts) => {
            out.push(KS_TIMESTAMP);
            out.extend_from_slice(&ts.time.to_be_bytes());
            out.extend_from_slice(&ts.increment.to_be_bytes());
        }
        _ => return Err(Declined),
    }
    Ok(())
}

/// A double: NaN and the infinities by their tags, a finite value (-0.0 as 0) as its
/// bits in an order-preserving form, marked exact.
fn double(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.push(KS_NUM_NAN);
    } else if d.is_infinite() {
        out.push(if d > 0.0 {
            KS_NUM_POS_INF
        } else {
            KS_NUM_NEG_INF
        });
    } else {
        let u = (d + 0.0).to_bits();
        let ordered = if u >> 63 == 1 { !u } else { u | (1 << 63) };
        out.push(KS_NUM_FINITE);
        out.extend_from_slice(&ordered.to_be_bytes());
        out.push(0); // exact: no fraction follows
    }
}

/// UTF-8 with 0x00 escaped as 00 FF, ended by 00 01.
fn string_body(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// The byte an object's element is ranked by: its value's tag, one for all numbers and
/// one for both booleans.
fn rank_byte(tag: u8) -> u8 {
    match tag {
        KS_NUM_NAN..=KS_NUM_POS_INF => KS_NUM_FINITE,
        KS_TRUE => KS_FALSE,
        t => t,
    }
}

fn object(d: &RawDocument, out: &mut Vec<u8>, depth: usize) -> Result<(), Declined> {
    if depth > MAX_DEPTH {
        return Err(Declined);
    }
    out.push(KS_OBJECT);
    let mut previous: Option<&str> = None;
    for element in d.iter() {
        let (name, value) = element.map_err(|_| Declined)?;
        let name = name.as_str();
        // a series key's objects are normalized (names in byte order): a name out of
        // order, or named twice, is declined, in one pass however many fields there are
        if name == "$ref" || previous.is_some_and(|p| p.as_bytes() >= name.as_bytes()) {
            return Err(Declined);
        }
        previous = Some(name);
        let rank_at = out.len();
        out.push(0); // the rank byte, once the value's tag is known
        string_body(name, out);
        let tag_at = out.len();
        encode_value(value, out, depth)?;
        out[rank_at] = rank_byte(out[tag_at]);
    }
    out.push(END);
    Ok(())
}

fn array(a: &RawArray, out: &mut Vec<u8>, depth: usize) -> Result<(), Declined> {
    if depth > MAX_DEPTH {
        return Err(Declined);
    }
    out.push(KS_ARRAY);
    for value in a {
        encode_value(value.map_err(|_| Declined)?, out, depth)?;
    }
    out.push(END);
    Ok(())
}

/// `_native.series_keystring(key)`: the index key of the meta value of a series key
/// (`metadata.series_key`); raises `Declined` for what the reference must encode.
#[pyfunction]
fn series_keystring<'py>(py: Python<'py>, key: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    guard("series_keystring", || match encode_element(key) {
        Ok(out) => Ok(PyBytes::new(py, &out)),
        Err(Declined) => Err(crate::boundary::Declined::new_err(
            "a meta value the reference encodes",
        )),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(series_keystring, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson};

    fn key_of(value: Bson) -> Result<Vec<u8>, Declined> {
        let raw = bson::RawDocumentBuf::try_from(&doc! { "": value }).unwrap();
        let bytes = raw.as_bytes();
        encode_element(&bytes[4..bytes.len() - 1])
    }

    #[test]
    fn numbers_equal_as_values_have_one_key() {
        let one = key_of(Bson::Int32(1)).unwrap();
        assert_eq!(one, key_of(Bson::Int64(1)).unwrap());
        assert_eq!(one, key_of(Bson::Double(1.0)).unwrap());
        assert_eq!(key_of(Bson::Double(-0.0)), key_of(Bson::Int32(0)));
        assert_eq!(key_of(Bson::Int64(1 << 60)), Err(Declined));
    }

    #[test]
    fn keys_sort_as_the_values_do() {
        let ordered = [
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Int32(-5),
            Bson::Double(-0.5),
            Bson::Int64(0),
            Bson::Double(2.5),
            Bson::Double(f64::INFINITY),
            Bson::String("".into()),
            Bson::String("a\0".into()),
            Bson::String("a\0b".into()),
            Bson::String("ab".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! { "a": 1 }),
            Bson::Document(doc! { "a": "x" }),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-1)),
            Bson::DateTime(bson::DateTime::from_millis(0)),
            Bson::MaxKey,
        ];
        let keys: Vec<Vec<u8>> = ordered.iter().map(|v| key_of(v.clone()).unwrap()).collect();
        for pair in keys.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
        }
    }

    #[test]
    fn what_python_reads_otherwise_is_declined() {
        let dbref = doc! { "$ref": "c", "$id": 1 };
        assert_eq!(key_of(Bson::Document(dbref.clone())), Err(Declined));
        assert_eq!(
            key_of(Bson::Array(vec![Bson::Document(dbref)])),
            Err(Declined)
        );
        let twice = bson::RawDocumentBuf::try_from(&doc! { "a": 1, "b": 2 }).unwrap();
        let twice: Vec<u8> = twice
            .as_bytes()
            .iter()
            .enumerate()
            .map(|(i, &b)| if b == b'b' && i > 4 { b'a' } else { b })
            .collect();
        let element: Vec<u8> = [&[0x03u8, 0x00][..], &twice].concat();
        assert_eq!(encode_element(&element), Err(Declined));
        // names out of byte order: not a series key's
        assert_eq!(
            key_of(Bson::Document(doc! { "b": 1, "a": 2 })),
            Err(Declined)
        );
        assert!(key_of(Bson::Document(doc! { "a": 1, "b": 2 })).is_ok());
        assert_eq!(encode_element(b"\x03\x00\x05\x00"), Err(Declined)); // cut short
    }
}
