//! A compressed bucket document built from a bucket's native state, byte for byte what
//! `storage/timeseries/bucket_document.py` `build_bucket_document` encodes:
//! `{_id, control: {version, min, max, count}, meta?, data: {name: BinData(7)}}`, the
//! version and count as int32 (Python ints that fit), data in column order. Without
//! `data`, the same document is the catalog's data-less view of the bucket (what index
//! maintenance reads).

use bson::oid::ObjectId;
use bson::raw::{cstr, CStr, RawBinaryRef, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::spec::BinarySubtype;

/// Why a document cannot be built (a name with a NUL, a meta key that is not an element).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

fn err(e: impl std::fmt::Display) -> BuildError {
    BuildError(e.to_string())
}

/// The parts of a bucket document.
pub struct Parts<'a> {
    pub id: [u8; 12],
    pub version: i32,
    pub count: i32,
    /// The series key: the meta element with an empty name (type byte, NUL, value);
    /// None without a meta.
    pub meta_key: Option<&'a [u8]>,
    pub min: &'a RawDocument,
    pub max: &'a RawDocument,
}

/// Builds the document, with `data` from `columns` when given.
pub fn build<'c>(
    parts: &Parts<'_>,
    columns: Option<impl Iterator<Item = (&'c str, &'c [u8])>>,
) -> Result<RawDocumentBuf, BuildError> {
    let mut control = RawDocumentBuf::new();
    control.append(cstr!("version"), parts.version);
    control.append(cstr!("min"), parts.min);
    control.append(cstr!("max"), parts.max);
    control.append(cstr!("count"), parts.count);
    let mut doc = RawDocumentBuf::new();
    doc.append(cstr!("_id"), ObjectId::from_bytes(parts.id));
    doc.append(cstr!("control"), control);
    let meta_doc;
    if let Some(key) = parts.meta_key {
        // the key is an element named "": as the one element of a document it reads back
        let mut bytes = Vec::with_capacity(key.len() + 5);
        bytes.extend_from_slice(&((key.len() + 5) as i32).to_le_bytes());
        bytes.extend_from_slice(key);
        bytes.push(0);
        meta_doc = RawDocumentBuf::from_bytes(bytes).map_err(err)?;
        let value = meta_doc
            .get("")
            .map_err(err)?
            .ok_or_else(|| BuildError("the meta key holds no element".into()))?;
        doc.append(cstr!("meta"), value);
    }
    if let Some(columns) = columns {
        doc.append(cstr!("data"), data_document(columns)?);
    }
    Ok(doc)
}

/// The document `build` makes with `data`, from the one it made without (`view`, its
/// data-less view): `data` is its last field. The bucket's control and meta are not
/// rendered again.
pub fn with_data<'c>(
    view: &RawDocument,
    columns: impl Iterator<Item = (&'c str, &'c [u8])> + Clone,
) -> Result<RawDocumentBuf, BuildError> {
    let mut bytes = Vec::with_capacity(view.as_bytes().len() + data_len(columns.clone()));
    bytes.extend_from_slice(view.as_bytes());
    let mut doc = RawDocumentBuf::from_bytes(bytes).map_err(err)?;
    doc.append(cstr!("data"), data_document(columns)?);
    Ok(doc)
}

/// `data`: one BinData (subtype 7) element per column, in column order.
fn data_document<'c>(
    columns: impl Iterator<Item = (&'c str, &'c [u8])>,
) -> Result<RawDocumentBuf, BuildError> {
    let mut data = RawDocumentBuf::new();
    for (name, column) in columns {
        let name: &CStr = name.try_into().map_err(err)?;
        data.append(
            name,
            RawBsonRef::Binary(RawBinaryRef {
                subtype: BinarySubtype::Column,
                bytes: column,
            }),
        );
    }
    Ok(data)
}

/// The bytes `data` adds to the document `build` makes without it: the element's type
/// and name, and the sub-document of one BinData element per column. With this, the size
/// of a document not built yet is known from its data-less view.
pub fn data_len<'c>(columns: impl Iterator<Item = (&'c str, &'c [u8])>) -> usize {
    // type byte + "data\0"; the sub-document's length, each element (type, name, NUL,
    // binary length, subtype, bytes), and its terminating NUL
    let elements: usize = columns
        .map(|(n, c)| 1 + n.len() + 1 + 4 + 1 + c.len())
        .sum();
    1 + 5 + 4 + elements + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn layout_and_types() {
        let min = rawdoc! {"t": 1_i64};
        let max = rawdoc! {"t": 2_i64};
        let key = {
            let d = rawdoc! {"": {"a": 1_i32}};
            d.as_bytes()[4..d.as_bytes().len() - 1].to_vec()
        };
        let parts = Parts {
            id: [7; 12],
            version: 2,
            count: 3,
            meta_key: Some(&key),
            min: &min,
            max: &max,
        };
        let cols = [("t", &b"\x00"[..]), ("v", &b"\x01\x00"[..])];
        let doc = build(&parts, Some(cols.iter().map(|&(n, c)| (n, c)))).unwrap();
        let want = rawdoc! {
            "_id": ObjectId::from_bytes([7; 12]),
            "control": {"version": 2_i32, "min": {"t": 1_i64}, "max": {"t": 2_i64}, "count": 3_i32},
            "meta": {"a": 1_i32},
            "data": {
                "t": bson::Binary { subtype: BinarySubtype::Column, bytes: vec![0] },
                "v": bson::Binary { subtype: BinarySubtype::Column, bytes: vec![1, 0] },
            },
        };
        assert_eq!(doc.as_bytes(), want.as_bytes());
        let light = build(&parts, None::<std::iter::Empty<(&str, &[u8])>>).unwrap();
        assert!(light.get("data").unwrap().is_none());
        let columns = cols.iter().map(|&(n, c)| (n, c));
        assert_eq!(
            light.as_bytes().len() + data_len(columns),
            doc.as_bytes().len()
        );
        assert_eq!(
            with_data(&light, cols.iter().map(|&(n, c)| (n, c)))
                .unwrap()
                .as_bytes(),
            doc.as_bytes()
        );
        let no_columns = build(&parts, Some(std::iter::empty::<(&str, &[u8])>())).unwrap();
        assert_eq!(
            light.as_bytes().len() + data_len(std::iter::empty()),
            no_columns.as_bytes().len()
        );
        assert!(build(
            &Parts {
                meta_key: Some(b"\x10"),
                ..parts
            },
            None::<std::iter::Empty<_>>
        )
        .is_err());
    }
}
