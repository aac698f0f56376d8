//! MongoDB's order of raw BSON values (`storage/bson_order.py`, woCompare).
//!
//! Canonical type ranks first: MinKey < undefined < null < numbers < string/symbol <
//! object < array < binData < ObjectId < bool < date < timestamp < regex < DBPointer <
//! code < code-with-scope < MaxKey. Within a rank: numbers by exact value across
//! int32/int64/double with NaN below every other number (and equal to NaN); strings,
//! symbols and code by UTF-8 bytes; objects element by element (rank, field name,
//! value; shorter first); arrays element by element; binData by length, subtype, bytes;
//! ObjectId by bytes; bool false first; date by milliseconds; timestamp by (time,
//! increment); regex by pattern then options; code with scope by code then scope.
//! decimal128 and DBPointer are declined: not ordered here.

use std::cmp::Ordering;

use bson::raw::{RawArray, RawBsonRef, RawDocument};

use super::{Fail, MAX_DEPTH};

pub const RANK_MINKEY: i32 = -1;
pub const RANK_UNDEFINED: i32 = 0;
pub const RANK_NULL: i32 = 5;
pub const RANK_NUMBER: i32 = 10;
pub const RANK_STRING: i32 = 15;
pub const RANK_OBJECT: i32 = 20;
pub const RANK_ARRAY: i32 = 25;
pub const RANK_BINDATA: i32 = 30;
pub const RANK_OBJECTID: i32 = 35;
pub const RANK_BOOL: i32 = 40;
pub const RANK_DATE: i32 = 45;
pub const RANK_TIMESTAMP: i32 = 47;
pub const RANK_REGEX: i32 = 50;
pub const RANK_DBPOINTER: i32 = 55;
pub const RANK_CODE: i32 = 60;
pub const RANK_CODE_W_SCOPE: i32 = 65;
pub const RANK_MAXKEY: i32 = 100;

/// MongoDB's canonical type rank (`canonicalizeBSONType`).
pub fn rank(v: &RawBsonRef<'_>) -> i32 {
    match v {
        RawBsonRef::MinKey => RANK_MINKEY,
        RawBsonRef::Undefined => RANK_UNDEFINED,
        RawBsonRef::Null => RANK_NULL,
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => RANK_NUMBER,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => RANK_STRING,
        RawBsonRef::Document(_) => RANK_OBJECT,
        RawBsonRef::Array(_) => RANK_ARRAY,
        RawBsonRef::Binary(_) => RANK_BINDATA,
        RawBsonRef::ObjectId(_) => RANK_OBJECTID,
        RawBsonRef::Boolean(_) => RANK_BOOL,
        RawBsonRef::DateTime(_) => RANK_DATE,
        RawBsonRef::Timestamp(_) => RANK_TIMESTAMP,
        RawBsonRef::RegularExpression(_) => RANK_REGEX,
        RawBsonRef::DbPointer(_) => RANK_DBPOINTER,
        RawBsonRef::JavaScriptCode(_) => RANK_CODE,
        RawBsonRef::JavaScriptCodeWithScope(_) => RANK_CODE_W_SCOPE,
        RawBsonRef::MaxKey => RANK_MAXKEY,
    }
}

/// woCompare of two values; `Declined` for decimal128 and DBPointer, `Invalid` for
/// malformed nested bytes.
pub fn compare(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Result<Ordering, Fail> {
    compare_at(a, b, 0)
}

fn compare_at(a: RawBsonRef<'_>, b: RawBsonRef<'_>, depth: usize) -> Result<Ordering, Fail> {
    let (ra, rb) = (rank(&a), rank(&b));
    if ra != rb {
        return Ok(ra.cmp(&rb));
    }
    Ok(match (a, b) {
        (RawBsonRef::Int32(x), RawBsonRef::Int32(y)) => x.cmp(&y),
        (RawBsonRef::Int64(x), RawBsonRef::Int64(y)) => x.cmp(&y),
        (RawBsonRef::Double(x), RawBsonRef::Double(y)) => cmp_f64(x, y),
        _ if ra == RANK_NUMBER => cmp_numbers(number(a)?, number(b)?),
        _ if ra == RANK_STRING || ra == RANK_CODE => text(a).cmp(text(b)),
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => compare_docs(x, y, depth + 1)?,
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => compare_arrays(x, y, depth + 1)?,
        (RawBsonRef::Binary(x), RawBsonRef::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then(u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then(x.bytes.cmp(y.bytes)),
        (RawBsonRef::ObjectId(x), RawBsonRef::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (RawBsonRef::Boolean(x), RawBsonRef::Boolean(y)) => x.cmp(&y),
        (RawBsonRef::DateTime(x), RawBsonRef::DateTime(y)) => {
            x.timestamp_millis().cmp(&y.timestamp_millis())
        }
        (RawBsonRef::Timestamp(x), RawBsonRef::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (RawBsonRef::RegularExpression(x), RawBsonRef::RegularExpression(y)) => x
            .pattern
            .as_str()
            .cmp(y.pattern.as_str())
            .then(x.options.as_str().cmp(y.options.as_str())),
        (RawBsonRef::JavaScriptCodeWithScope(x), RawBsonRef::JavaScriptCodeWithScope(y)) => {
            match x.code.cmp(y.code) {
                Ordering::Equal => compare_docs(x.scope, y.scope, depth + 1)?,
                o => o,
            }
        }
        (RawBsonRef::DbPointer(_), _) => {
            return Err(Fail::Declined("DBPointer is not ordered natively".into()))
        }
        _ => Ordering::Equal, // MinKey, undefined, null, MaxKey: one value each
    })
}

/// The bytes a string-like value is ordered by.
fn text<'a>(v: RawBsonRef<'a>) -> &'a str {
    match v {
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => s,
        _ => "",
    }
}

fn compare_docs(a: &RawDocument, b: &RawDocument, depth: usize) -> Result<Ordering, Fail> {
    if depth > MAX_DEPTH {
        return Err(Fail::Declined("nested too deeply".into()));
    }
    let (mut ia, mut ib) = (a.iter(), b.iter());
    loop {
        match (ia.next().transpose()?, ib.next().transpose()?) {
            (None, None) => return Ok(Ordering::Equal),
            (None, Some(_)) => return Ok(Ordering::Less),
            (Some(_), None) => return Ok(Ordering::Greater),
            (Some((ka, va)), Some((kb, vb))) => {
                let o = rank(&va).cmp(&rank(&vb)).then(ka.as_str().cmp(kb.as_str()));
                let o = match o {
                    Ordering::Equal => compare_at(va, vb, depth)?,
                    o => o,
                };
                if o != Ordering::Equal {
                    return Ok(o);
                }
            }
        }
    }
}

fn compare_arrays(a: &RawArray, b: &RawArray, depth: usize) -> Result<Ordering, Fail> {
    if depth > MAX_DEPTH {
        return Err(Fail::Declined("nested too deeply".into()));
    }
    let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
    loop {
        match (ia.next().transpose()?, ib.next().transpose()?) {
            (None, None) => return Ok(Ordering::Equal),
            (None, Some(_)) => return Ok(Ordering::Less),
            (Some(_), None) => return Ok(Ordering::Greater),
            (Some(va), Some(vb)) => {
                let o = compare_at(va, vb, depth)?;
                if o != Ordering::Equal {
                    return Ok(o);
                }
            }
        }
    }
}

/// A number as ordered here.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn number(v: RawBsonRef<'_>) -> Result<Num, Fail> {
    match v {
        RawBsonRef::Int32(x) => Ok(Num::Int(i64::from(x))),
        RawBsonRef::Int64(x) => Ok(Num::Int(x)),
        RawBsonRef::Double(x) => Ok(Num::Float(x)),
        _ => Err(Fail::Declined("decimal128 is not ordered natively".into())),
    }
}

fn cmp_numbers(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => cmp_f64(x, y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

/// Doubles with NaN below every number and equal to itself; -0.0 equals 0.0.
pub fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// An int64 against a double, exactly (no rounding of the integer to a double).
pub fn cmp_int_float(i: i64, f: f64) -> Ordering {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= TWO_63 {
        return Ordering::Less;
    }
    if f < -TWO_63 {
        return Ordering::Greater;
    }
    let t = f.trunc(); // in [-2^63, 2^63): exact as an i64
    match i.cmp(&(t as i64)) {
        Ordering::Equal => {
            if f > t {
                Ordering::Less
            } else if f < t {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::raw::{RawBinaryRef, RawDocumentBuf};
    use bson::spec::BinarySubtype;
    use bson::{rawdoc, DateTime, Decimal128, Timestamp};

    fn cmp(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
        compare(a, b).unwrap()
    }

    fn bin(subtype: u8, bytes: &[u8]) -> RawBsonRef<'_> {
        RawBsonRef::Binary(RawBinaryRef {
            subtype: BinarySubtype::from(subtype),
            bytes,
        })
    }

    /// Pairs in strictly increasing order.
    #[test]
    fn a_table_of_increasing_pairs() {
        use RawBsonRef as V;
        let two53 = 9_007_199_254_740_992_i64;
        let d1 = rawdoc! { "a": 1 };
        let d2 = rawdoc! { "a": 2 };
        let d3 = rawdoc! { "b": 0 };
        let d4 = rawdoc! { "a": 1, "b": 0 };
        let d5 = rawdoc! { "a": "x" };
        let pairs: Vec<(RawBsonRef<'_>, RawBsonRef<'_>)> = vec![
            (V::MinKey, V::Undefined),
            (V::Undefined, V::Null),
            (V::Null, V::Double(f64::NAN)),
            (V::Double(f64::NAN), V::Double(f64::NEG_INFINITY)),
            (V::Double(f64::NEG_INFINITY), V::Int64(i64::MIN)),
            (V::Int64(i64::MIN), V::Int32(i32::MIN)),
            (V::Int32(-1), V::Double(-0.5)),
            (V::Double(-0.5), V::Int32(0)),
            (V::Double(two53 as f64), V::Int64(two53 + 1)),
            (V::Int64(two53 + 1), V::Double((two53 + 2) as f64)),
            (V::Int64(i64::MAX), V::Double(9_223_372_036_854_775_808.0)),
            (
                V::Double(9_223_372_036_854_775_808.0),
                V::Double(f64::INFINITY),
            ),
            (V::Double(f64::INFINITY), V::String("")),
            (V::String(""), V::Symbol("a")),
            (V::String("a"), V::String("ab")),
            (V::String("ab"), V::String("b")),
            (V::String("z"), V::String("é")),
            (V::String("\u{ffff}"), V::String("\u{1f600}")),
            (V::String("\u{1f600}"), V::Document(&d1)),
            (V::Document(&d1), V::Document(&d4)),
            (V::Document(&d4), V::Document(&d2)),
            (V::Document(&d2), V::Document(&d3)),
            (V::Document(&d3), V::Document(&d5)), // rank before field name
            (V::Document(&d5), bin(0, b"")),
            (bin(0, b"z"), bin(1, b"a")),
            (bin(1, b"a"), bin(1, b"b")),
            (bin(0x80, b"b"), bin(0, b"aa")),
            (bin(0, b"aa"), V::ObjectId(ObjectId::from_bytes([0; 12]))),
            (
                V::ObjectId(ObjectId::from_bytes([0; 12])),
                V::ObjectId(ObjectId::from_bytes([1; 12])),
            ),
            (
                V::ObjectId(ObjectId::from_bytes([0xff; 12])),
                V::Boolean(false),
            ),
            (V::Boolean(false), V::Boolean(true)),
            (
                V::Boolean(true),
                V::DateTime(DateTime::from_millis(i64::MIN)),
            ),
            (
                V::DateTime(DateTime::from_millis(-1)),
                V::DateTime(DateTime::from_millis(0)),
            ),
            (
                V::DateTime(DateTime::from_millis(i64::MAX)),
                V::Timestamp(Timestamp {
                    time: 0,
                    increment: 0,
                }),
            ),
            (
                V::Timestamp(Timestamp {
                    time: 1,
                    increment: u32::MAX,
                }),
                V::Timestamp(Timestamp {
                    time: 2,
                    increment: 0,
                }),
            ),
            (
                V::Timestamp(Timestamp {
                    time: u32::MAX,
                    increment: 0,
                }),
                V::JavaScriptCode(""),
            ),
            (V::JavaScriptCode("a"), V::JavaScriptCode("b")),
            (V::JavaScriptCode("z"), V::MaxKey),
        ];
        for (a, b) in pairs {
            assert_eq!(cmp(a, b), Ordering::Less, "{a:?} < {b:?}");
            assert_eq!(cmp(b, a), Ordering::Greater, "{b:?} > {a:?}");
            assert_eq!(cmp(a, a), Ordering::Equal, "{a:?} = itself");
        }
    }

    #[test]
    fn equal_across_number_types() {
        use RawBsonRef as V;
        assert_eq!(cmp(V::Int32(1), V::Double(1.0)), Ordering::Equal);
        assert_eq!(cmp(V::Int64(1), V::Int32(1)), Ordering::Equal);
        assert_eq!(cmp(V::Double(-0.0), V::Int32(0)), Ordering::Equal);
        assert_eq!(
            cmp(V::Double(f64::NAN), V::Double(-f64::NAN)),
            Ordering::Equal
        );
        assert_eq!(cmp(V::MinKey, V::MinKey), Ordering::Equal);
        assert_eq!(cmp(V::String("a"), V::Symbol("a")), Ordering::Equal);
    }

    #[test]
    fn int_against_float_at_the_edges() {
        assert_eq!(
            cmp_int_float(i64::MIN, -9_223_372_036_854_775_808.0),
            Ordering::Equal
        );
        assert_eq!(cmp_int_float(i64::MIN, -9.3e18), Ordering::Greater);
        assert_eq!(cmp_int_float(i64::MAX, 9.2e18), Ordering::Greater);
        assert_eq!(cmp_int_float(-3, -2.5), Ordering::Less);
        assert_eq!(cmp_int_float(-2, -2.5), Ordering::Greater);
        assert_eq!(cmp_int_float(2, 2.5), Ordering::Less);
        assert_eq!(cmp_int_float(0, f64::MIN_POSITIVE), Ordering::Less);
        assert_eq!(cmp_int_float(0, f64::NAN), Ordering::Greater);
    }

    #[test]
    fn arrays_element_by_element_shorter_first() {
        let a = rawdoc! { "v": [1, 2] };
        let b = rawdoc! { "v": [1, 2, 0] };
        let c = rawdoc! { "v": [1, 3] };
        fn get(d: &RawDocumentBuf) -> RawBsonRef<'_> {
            d.get("v").unwrap().unwrap()
        }
        let (ga, gb, gc) = (get(&a), get(&b), get(&c));
        assert_eq!(cmp(ga, gb), Ordering::Less);
        assert_eq!(cmp(gb, gc), Ordering::Less);
    }

    #[test]
    fn declines_what_it_does_not_order() {
        let d = RawBsonRef::Decimal128(Decimal128::from_bytes([0; 16]));
        assert!(matches!(
            compare(d, RawBsonRef::Int32(1)),
            Err(Fail::Declined(_))
        ));
        assert_eq!(compare(d, RawBsonRef::String("")).unwrap(), Ordering::Less);
    }
}
