//! Raw scalar BSON values, the unit BSONColumn works on: their sizes and validation.
//!
//! Python reference: `storage/bsoncolumn/rawbson.py` (`value_size`, `validate_value`,
//! `check_old_binary`). Only scalar values are read here (lengths, terminators; strings
//! and regexes are bytes, not checked to be UTF-8, as in MongoDB's BSONColumn);
//! values holding documents (non-empty objects and arrays, code with scope) are
//! `Unsupported`: the caller declines them and the Python reference does the work.

use super::values::*;

/// What a value is, for the native path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A valid scalar value of this size.
    Valid(usize),
    /// Malformed: the reference raises BSONColumnError.
    Invalid,
    /// Valid or not, a value holding a document: for the reference to handle.
    Unsupported,
}

/// Whether `t` is a BSON type a column may hold.
pub fn is_valid_type(t: u8) -> bool {
    (0x01..=0x13).contains(&t) || t == T_MINKEY || t == T_MAXKEY
}

#[inline]
fn fixed_size(t: u8) -> Option<usize> {
    Some(match t {
        T_DOUBLE | T_DATE | T_TIMESTAMP | T_INT64 => 8,
        T_UNDEFINED | T_NULL | T_MINKEY | T_MAXKEY => 0,
        T_OID => 12,
        T_BOOL => 1,
        T_INT32 => 4,
        T_DECIMAL => 16,
        _ => return None,
    })
}

fn i32_at(buf: &[u8], pos: usize, end: usize) -> Option<i64> {
    if pos + 4 > end {
        return None;
    }
    Some(read_i32(&buf[pos..pos + 4]) as i64)
}

fn cstring_end(buf: &[u8], pos: usize, end: usize) -> Option<usize> {
    buf.get(pos..end)?
        .iter()
        .position(|&b| b == 0)
        .map(|i| pos + i + 1)
}

/// Size of the value of type `t` at `pos`, checked to fit before `end`.
fn value_size(t: u8, buf: &[u8], pos: usize, end: usize) -> Option<usize> {
    let size = match fixed_size(t) {
        Some(s) => s,
        None => match t {
            T_STRING | T_CODE | T_SYMBOL => {
                let n = i32_at(buf, pos, end)?;
                if n < 1 {
                    return None;
                }
                4 + n as usize
            }
            T_OBJECT | T_ARRAY | T_CODEWSCOPE => {
                let n = i32_at(buf, pos, end)?;
                if n < 5 {
                    return None;
                }
                n as usize
            }
            T_BINARY => {
                let n = i32_at(buf, pos, end)?;
                if n < 0 {
                    return None;
                }
                5 + n as usize
            }
            T_REGEX => cstring_end(buf, cstring_end(buf, pos, end)?, end)? - pos,
            T_DBPOINTER => {
                let n = i32_at(buf, pos, end)?;
                if n < 1 {
                    return None;
                }
                4 + n as usize + 12
            }
            _ => return None,
        },
    };
    if pos.checked_add(size)? > end {
        return None;
    }
    Some(size)
}

fn valid_string(v: &[u8]) -> bool {
    // int32 length (already checked) + bytes + NUL
    v.last() == Some(&0)
}

/// Subtype 2 (old binary) repeats its length inside: int32 n, then n bytes.
pub fn valid_old_binary(v: &[u8]) -> bool {
    v.len() >= 9 && read_i32(&v[5..9]) as i64 == v.len() as i64 - 9
}

/// Check the value of type `t` at `buf[pos..end]` (it may be followed by more bytes).
pub fn check_value(t: u8, buf: &[u8], pos: usize, end: usize) -> Check {
    if !is_valid_type(t) {
        return Check::Invalid;
    }
    if t == T_CODEWSCOPE {
        return Check::Unsupported;
    }
    let Some(size) = value_size(t, buf, pos, end) else {
        return Check::Invalid;
    };
    let v = &buf[pos..pos + size];
    let ok = match t {
        T_STRING | T_CODE | T_SYMBOL => valid_string(v),
        T_OBJECT | T_ARRAY => {
            if size != 5 {
                return Check::Unsupported;
            }
            v == [5, 0, 0, 0, 0]
        }
        T_DBPOINTER => valid_string(&v[..size - 12]),
        T_BOOL => v[0] <= 1,
        T_BINARY => v[4] != 2 || valid_old_binary(v),
        _ => true,
    };
    if ok {
        Check::Valid(size)
    } else {
        Check::Invalid
    }
}

/// Check a whole value (`v` is exactly the value's bytes).
#[inline]
pub fn check_element(t: u8, v: &[u8]) -> Check {
    if let Some(size) = fixed_size(t) {
        // the common case first: a fixed size, and only bool restricts the bytes
        return if v.len() == size && (t != T_BOOL || v[0] <= 1) {
            Check::Valid(size)
        } else {
            Check::Invalid
        };
    }
    match check_value(t, v, 0, v.len()) {
        Check::Valid(n) if n != v.len() => Check::Invalid,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_scalars() {
        assert_eq!(check_element(T_INT32, &[1, 0, 0, 0]), Check::Valid(4));
        assert_eq!(check_element(T_INT32, &[1, 0, 0]), Check::Invalid);
        assert_eq!(check_element(T_STRING, b"\x02\0\0\0a\0"), Check::Valid(6));
        // not UTF-8: bytes to a column, as in MongoDB's BSONColumn
        assert_eq!(
            check_element(T_STRING, b"\x02\0\0\0\xff\0"),
            Check::Valid(6)
        );
        assert_eq!(check_element(T_REGEX, b"\xff\0\0"), Check::Valid(3));
        assert_eq!(check_element(T_STRING, b"\x02\0\0\0ab"), Check::Invalid);
        assert_eq!(check_element(T_BOOL, &[2]), Check::Invalid);
        assert_eq!(check_element(T_OBJECT, &[5, 0, 0, 0, 0]), Check::Valid(5));
        assert_eq!(
            check_element(T_OBJECT, b"\x0c\0\0\0\x0aa\0\0\0\0\0\0"),
            Check::Unsupported
        );
        assert_eq!(check_element(T_REGEX, b"a\0i\0"), Check::Valid(4));
        assert_eq!(check_element(0x14, &[]), Check::Invalid);
        assert_eq!(
            check_element(T_BINARY, &[0xff, 0xff, 0xff, 0xff, 0]),
            Check::Invalid
        );
    }
}
