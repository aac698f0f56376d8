//! The metaField value normalised as MongoDB normalises it (`storage/timeseries/metadata.py`
//! `normalize_meta`): the fields of every object sorted by the bytes of their names
//! (stable, recursively), arrays in their order with their elements normalised, every
//! other value as it is. The series key is that value as a BSON element with an empty
//! name, without the document around it: the bytes of Python's
//! `series_key(normalize_meta(meta))`.
//!
//! Only called on values the walk has validated (and found free of quirks), so the
//! crate's errors cannot happen here; they are passed on all the same, never unwrapped.

use bson::error::Error;
use bson::raw::{CStr, RawArray, RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

/// The series key of a (validated) meta value.
pub fn series_key(value: RawBsonRef<'_>) -> Result<Vec<u8>, Error> {
    let mut doc = RawDocumentBuf::new();
    let empty: &CStr = "".try_into()?;
    append_normalized(&mut doc, empty, value)?;
    let bytes = doc.into_bytes();
    // length prefix (4 bytes) and the trailing NUL dropped: type byte, "\0", value bytes
    Ok(bytes
        .get(4..bytes.len().saturating_sub(1))
        .unwrap_or_default()
        .to_vec())
}

fn append_normalized(
    out: &mut RawDocumentBuf,
    key: &CStr,
    value: RawBsonRef<'_>,
) -> Result<(), Error> {
    match value {
        RawBsonRef::Document(d) => out.append(key, normalized_document(d)?),
        RawBsonRef::Array(a) => out.append(key, normalized_array(a)?),
        other => out.append(key, other),
    }
    Ok(())
}

fn normalized_document(doc: &RawDocument) -> Result<RawDocumentBuf, Error> {
    let mut items: Vec<(&CStr, RawBsonRef<'_>)> = doc.iter().collect::<Result<_, _>>()?;
    // a stable sort on the UTF-8 bytes of the names, as Python's sorted(..., key=bytes)
    items.sort_by(|a, b| a.0.as_str().as_bytes().cmp(b.0.as_str().as_bytes()));
    let mut out = RawDocumentBuf::new();
    for (k, v) in items {
        append_normalized(&mut out, k, v)?;
    }
    Ok(out)
}

fn normalized_array(array: &RawArray) -> Result<RawArrayBuf, Error> {
    let mut out = RawArrayBuf::new();
    for v in array {
        match v? {
            RawBsonRef::Document(d) => out.push(normalized_document(d)?),
            RawBsonRef::Array(a) => out.push(normalized_array(a)?),
            other => out.push(other),
        }
    }
    Ok(out)
}
