//! BSON values of a fixed width (int32, int64, double, date, ObjectId, bool, null) read
//! from their bytes, without the raw element's `value()` and the copy of its result: the
//! measurement scan and the fold read most measurement fields so.

use bson::oid::ObjectId;
use bson::raw::RawBsonRef;
use bson::DateTime;

use crate::bsoncolumn::values::{T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64, T_NULL, T_OID};

/// The value of an element of a fixed-width type (int32, int64, double, date, ObjectId,
/// bool, null) from the value bytes the raw iterator or the scan delimited (what
/// `RawElement::value` gives, without its call and the copy of its result: most
/// measurement fields are these); None for any other type, or bytes that are not such a
/// value.
#[inline]
pub(crate) fn fixed_width(t: u8, v: &[u8]) -> Option<RawBsonRef<'_>> {
    Some(match (t, v.len()) {
        (T_INT64, 8) => RawBsonRef::Int64(i64::from_le_bytes(v.try_into().ok()?)),
        (T_DOUBLE, 8) => RawBsonRef::Double(f64::from_le_bytes(v.try_into().ok()?)),
        (T_DATE, 8) => RawBsonRef::DateTime(DateTime::from_millis(i64::from_le_bytes(
            v.try_into().ok()?,
        ))),
        (T_INT32, 4) => RawBsonRef::Int32(i32::from_le_bytes(v.try_into().ok()?)),
        (T_OID, 12) => RawBsonRef::ObjectId(ObjectId::from_bytes(v.try_into().ok()?)),
        (T_BOOL, 1) if v[0] <= 1 => RawBsonRef::Boolean(v[0] == 1),
        (T_NULL, 0) => RawBsonRef::Null,
        _ => return None,
    })
}

/// Whether `fixed_width` reads values of type `t`.
pub(crate) fn is_fixed_width(t: u8) -> bool {
    matches!(
        t,
        T_INT64 | T_DOUBLE | T_DATE | T_INT32 | T_OID | T_BOOL | T_NULL
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn a_fixed_width_value_is_the_elements() {
        let doc = rawdoc! {
            "a": 7i64, "b": -1.5f64, "c": DateTime::from_millis(-5), "d": 3i32,
            "e": ObjectId::from_bytes([1; 12]), "f": true, "g": false, "h": bson::RawBson::Null,
            "s": "text", "o": {"x": 1},
        };
        let bytes = doc.as_bytes();
        let mut at = 4usize;
        for elem in doc.iter_elements() {
            let elem = elem.unwrap();
            let t = elem.element_type() as u8;
            let start = at + 2 + elem.key().as_str().len();
            at = start + elem.size();
            let got = fixed_width(t, &bytes[start..at]);
            assert_eq!(got.is_some(), is_fixed_width(t), "{}", elem.key().as_str());
            if let Some(v) = got {
                assert_eq!(v, elem.value().unwrap());
            }
        }
        // a bool byte other than 0 or 1 is not a value
        assert_eq!(fixed_width(T_BOOL, &[2]), None);
        assert_eq!(fixed_width(T_INT64, &[0; 7]), None);
    }
}
