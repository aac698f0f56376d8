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
//! decimal128 is ordered exactly against every number (against a double, by orders of
//! magnitude and, when close, exact integer arithmetic); DBPointer is declined. A decimal128 is read as `bson.Decimal128.to_decimal` reads it (a
//! coefficient past 34 digits, or the "11" combination form, is zero; every NaN equal).

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
        _ if ra == RANK_NUMBER => cmp_numbers(number(a)?, number(b)?)?,
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
    Dec(Dec),
}

fn number(v: RawBsonRef<'_>) -> Result<Num, Fail> {
    match v {
        RawBsonRef::Int32(x) => Ok(Num::Int(i64::from(x))),
        RawBsonRef::Int64(x) => Ok(Num::Int(x)),
        RawBsonRef::Double(x) => Ok(Num::Float(x)),
        RawBsonRef::Decimal128(d) => Ok(Num::Dec(Dec::from_bytes(d.bytes()))),
        _ => Err(Fail::Invalid("not a number".into())),
    }
}

fn cmp_numbers(a: Num, b: Num) -> Result<Ordering, Fail> {
    Ok(match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => cmp_f64(x, y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
        (Num::Dec(x), Num::Dec(y)) => x.cmp(&y),
        (Num::Dec(x), Num::Int(y)) => x.cmp(&Dec::from_i64(y)),
        (Num::Int(x), Num::Dec(y)) => Dec::from_i64(x).cmp(&y),
        (Num::Dec(x), Num::Float(y)) => cmp_dec_float(x, y)?,
        (Num::Float(x), Num::Dec(y)) => cmp_dec_float(y, x)?.reverse(),
    })
}

/// A decimal128's value: NaN (below every number), an infinity, or
/// (-1)^neg * coef * 10^exp.
#[derive(Clone, Copy, Debug)]
pub enum Dec {
    Nan,
    Inf { neg: bool },
    Finite { neg: bool, coef: u128, exp: i32 },
}

const DEC_MAX_COEF: u128 = 10u128.pow(34) - 1;
const DEC_BIAS: i32 = 6176;

impl Dec {
    /// From BSON's little-endian BID bytes.
    pub fn from_bytes(b: [u8; 16]) -> Dec {
        let bits = u128::from_le_bytes(b);
        let high = (bits >> 64) as u64;
        let neg = high >> 63 == 1;
        if (high >> 58) & 0x1f == 0x1f {
            return Dec::Nan; // NaN and sNaN
        }
        if (high >> 58) & 0x1f == 0x1e {
            return Dec::Inf { neg };
        }
        if (high >> 61) & 3 == 3 {
            // the "11" form: a coefficient past 2^113, read as zero
            let exp = ((high >> 47) & 0x3fff) as i32 - DEC_BIAS;
            return Dec::Finite { neg, coef: 0, exp };
        }
        let exp = ((high >> 49) & 0x3fff) as i32 - DEC_BIAS;
        let coef = bits & ((1u128 << 113) - 1);
        let coef = if coef > DEC_MAX_COEF { 0 } else { coef };
        Dec::Finite { neg, coef, exp }
    }

    fn from_i64(i: i64) -> Dec {
        Dec::Finite {
            neg: i < 0,
            coef: u128::from(i.unsigned_abs()),
            exp: 0,
        }
    }

    /// -1, 0 or 1 for the sign, None for NaN.
    fn sign(&self) -> Option<i8> {
        match *self {
            Dec::Nan => None,
            Dec::Inf { neg } => Some(if neg { -1 } else { 1 }),
            Dec::Finite { coef: 0, .. } => Some(0),
            Dec::Finite { neg, .. } => Some(if neg { -1 } else { 1 }),
        }
    }

    fn cmp(&self, other: &Dec) -> Ordering {
        let (sa, sb) = match (self.sign(), other.sign()) {
            (None, None) => return Ordering::Equal,
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(a), Some(b)) => (a, b),
        };
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        let magnitude = match (*self, *other) {
            (Dec::Inf { .. }, Dec::Inf { .. }) => Ordering::Equal,
            (Dec::Inf { .. }, _) => Ordering::Greater,
            (_, Dec::Inf { .. }) => Ordering::Less,
            (
                Dec::Finite {
                    coef: ca, exp: ea, ..
                },
                Dec::Finite {
                    coef: cb, exp: eb, ..
                },
            ) => cmp_magnitudes(ca, ea, cb, eb),
            _ => Ordering::Equal, // NaN handled above
        };
        if sa < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

fn digits(c: u128) -> i32 {
    let mut n = 1;
    let mut x = c;
    while x >= 10 {
        x /= 10;
        n += 1;
    }
    n
}

/// ca * 10^ea against cb * 10^eb, both coefficients nonzero and at most 35 digits.
fn cmp_magnitudes(ca: u128, ea: i32, cb: u128, eb: i32) -> Ordering {
    let (da, db) = (digits(ca), digits(cb));
    match (da + ea).cmp(&(db + eb)) {
        Ordering::Equal => {}
        o => return o,
    }
    // Same order of magnitude: the one with the larger exponent has fewer digits, and
    // scaled to the other's exponent it has as many (at most 35: fits in a u128).
    if ea >= eb {
        (ca * 10u128.pow((ea - eb) as u32)).cmp(&cb)
    } else {
        ca.cmp(&(cb * 10u128.pow((eb - ea) as u32)))
    }
}

/// A decimal128 against a double, exactly.
fn cmp_dec_float(d: Dec, f: f64) -> Result<Ordering, Fail> {
    if f.is_nan() {
        return Ok(if matches!(d, Dec::Nan) {
            Ordering::Equal
        } else {
            Ordering::Greater
        });
    }
    if f.is_infinite() {
        return Ok(d.cmp(&Dec::Inf { neg: f < 0.0 }));
    }
    let sf: i8 = if f == 0.0 {
        0
    } else if f < 0.0 {
        -1
    } else {
        1
    };
    let sd = match d.sign() {
        None => return Ok(Ordering::Less),
        Some(s) => s,
    };
    if sd != sf || sd == 0 {
        return Ok(sd.cmp(&sf));
    }
    let magnitude = match d {
        Dec::Finite { coef, exp, .. } => cmp_dec_float_magnitude(coef, exp, f.abs()),
        _ => Ordering::Greater, // an infinity against a finite double
    };
    Ok(if sf < 0 {
        magnitude.reverse()
    } else {
        magnitude
    })
}

/// coef * 10^exp against a finite positive double, both nonzero.
fn cmp_dec_float_magnitude(coef: u128, exp: i32, f: f64) -> Ordering {
    // Orders of magnitude first: |f| in [10^(af-1), 10^af), af off by at most one.
    let ad = digits(coef) + exp;
    let af = f.log10().floor() as i32 + 1;
    if ad >= af + 2 {
        return Ordering::Greater;
    }
    if ad <= af - 2 {
        return Ordering::Less;
    }
    // Close: exponents are now bounded (the double's decade), so compare integers:
    // coef * 10^exp vs m * 2^k, both sides times 10^max(0,-exp) * 2^max(0,-k).
    let bits = f.to_bits();
    let raw_exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, k) = if raw_exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), raw_exp - 1075)
    };
    let (e10, e2) = (exp.min(0).unsigned_abs(), k.min(0).unsigned_abs());
    let mut left = Big::from(coef);
    left.mul_pow10(exp.max(0).unsigned_abs());
    left.shl(e2);
    let mut right = Big::from(u128::from(m));
    right.shl(k.max(0).unsigned_abs());
    right.mul_pow10(e10);
    left.cmp(&right)
}

/// A non-negative integer of u32 limbs, least significant first: just enough for
/// `cmp_dec_float_magnitude`.
struct Big(Vec<u32>);

impl Big {
    fn from(x: u128) -> Big {
        Big((0..4).map(|i| (x >> (32 * i)) as u32).collect())
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_small(1_000_000_000);
            n -= 9;
        }
        self.mul_small(10u32.pow(n));
    }

    fn shl(&mut self, n: u32) {
        let (words, bits) = ((n / 32) as usize, n % 32);
        if bits > 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let v = (*limb << bits) | carry;
                carry = *limb >> (32 - bits);
                *limb = v;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat(0).take(words));
    }

    fn cmp(&self, other: &Big) -> Ordering {
        fn trimmed(v: &[u32]) -> &[u32] {
            let n = v.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
            &v[..n]
        }
        let (a, b) = (trimmed(&self.0), trimmed(&other.0));
        a.len()
            .cmp(&b.len())
            .then_with(|| a.iter().rev().cmp(b.iter().rev()))
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

    fn dec(s: &str) -> Decimal128 {
        s.parse().unwrap()
    }

    #[test]
    fn decimals_exactly() {
        use RawBsonRef as V;
        let d = |s: &str| V::Decimal128(dec(s));
        let less = [
            (d("NaN"), d("-Infinity")),
            (d("NaN"), V::Double(f64::NEG_INFINITY)),
            (d("-Infinity"), V::Int64(i64::MIN)),
            (d("-1E+100"), V::Double(-1e99)),
            (V::Int64(i64::MIN), d("-9223372036854775807")),
            (d("-0.5"), d("-0")),
            (d("0"), d("1E-6176")),
            (d("1.0"), d("1.01")),
            (d("0.1"), V::Double(0.1)), // 0.1 as a double is a little more
            (d("0.1000000000000000055511151231257827"), V::Double(0.1)),
            (V::Double(0.1), d("0.1000000000000000055511151231257828")),
            (V::Double(5e-324), d("5E-324")),
            (d("4.9E-324"), V::Double(5e-324)),
            (V::Double(1e308), d("1.0000000000000001E+308")),
            (d("1.5"), V::Double(1.75)),
            (V::Int32(9), d("9.000000000000000000000000000000001")),
            (d("9007199254740993"), V::Double(9007199254740994.0)),
            (V::Double(9007199254740992.0), d("9007199254740993")),
            (d("1E+6111"), d("Infinity")),
            (V::Double(f64::MAX), d("1E+309")),
        ];
        for (a, b) in less {
            assert_eq!(cmp(a, b), Ordering::Less, "{a:?} < {b:?}");
            assert_eq!(cmp(b, a), Ordering::Greater, "{b:?} > {a:?}");
        }
        let equal = [
            (d("1"), d("1.000")),
            (d("-0"), d("0E+10")),
            (d("0"), V::Double(-0.0)),
            (d("NaN"), V::Double(f64::NAN)),
            (d("1.5"), V::Double(1.5)),
            (d("-100"), V::Int32(-100)),
            (d("Infinity"), V::Double(f64::INFINITY)),
            (d("1E+3"), V::Int64(1000)),
        ];
        for (a, b) in equal {
            assert_eq!(cmp(a, b), Ordering::Equal, "{a:?} = {b:?}");
        }
        // A coefficient past 34 digits reads as zero.
        let mut big = [0xffu8; 16];
        big[14] = 0x01;
        big[15] = 0x30; // exponent 0, coefficient 2^113 - 1
        assert_eq!(
            cmp(V::Decimal128(Decimal128::from_bytes(big)), V::Int32(0)),
            Ordering::Equal
        );
    }

    #[test]
    fn declines_what_it_does_not_order() {
        let mut bytes = vec![0u8; 4];
        bytes.extend_from_slice(b"\x0cp\x00\x02\x00\x00\x00n\x00");
        bytes.extend_from_slice(&[0; 12]);
        bytes.push(0);
        let n = bytes.len() as i32;
        bytes[..4].copy_from_slice(&n.to_le_bytes());
        let doc = RawDocument::from_bytes(&bytes).unwrap();
        let p = doc.get("p").unwrap().unwrap();
        assert!(matches!(p, RawBsonRef::DbPointer(_)));
        assert!(matches!(compare(p, p), Err(Fail::Declined(_))));
        assert_eq!(
            compare(p, RawBsonRef::String("")).unwrap(),
            Ordering::Greater
        );
    }
}
