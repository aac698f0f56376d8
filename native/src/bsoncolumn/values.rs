//! Numeric mappings of BSON values used by BSONColumn deltas.
//!
//! Python reference: `storage/bsoncolumn/type_util.py` and the type families of
//! `storage/bsoncolumn/control.py`. Integers wrap as two's complement (`wrapping_*`),
//! as `wrap64`/`wrap128` do there.

pub const T_EOO: u8 = 0x00;
pub const T_DOUBLE: u8 = 0x01;
pub const T_STRING: u8 = 0x02;
pub const T_OBJECT: u8 = 0x03;
pub const T_ARRAY: u8 = 0x04;
pub const T_BINARY: u8 = 0x05;
pub const T_UNDEFINED: u8 = 0x06;
pub const T_OID: u8 = 0x07;
pub const T_BOOL: u8 = 0x08;
pub const T_DATE: u8 = 0x09;
pub const T_NULL: u8 = 0x0A;
pub const T_REGEX: u8 = 0x0B;
pub const T_DBPOINTER: u8 = 0x0C;
pub const T_CODE: u8 = 0x0D;
pub const T_SYMBOL: u8 = 0x0E;
pub const T_CODEWSCOPE: u8 = 0x0F;
pub const T_INT32: u8 = 0x10;
pub const T_TIMESTAMP: u8 = 0x11;
pub const T_INT64: u8 = 0x12;
pub const T_DECIMAL: u8 = 0x13;
pub const T_MAXKEY: u8 = 0x7F;
pub const T_MINKEY: u8 = 0xFF;

/// Scale index meaning "the raw memory of the double" (and all integer streams).
pub const MEMORY_AS_INTEGER: usize = 5;
pub const SCALE_MULTIPLIER: [f64; 5] = [1.0, 10.0, 100.0, 10000.0, 100000000.0];
/// Control byte high nibble per scale index.
pub const CONTROL_FOR_SCALE: [u8; 6] = [0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0x80];
const SAFE53: f64 = 9007199254740992.0;

/// Types whose deltas are deltas of deltas.
pub fn is_delta_of_delta(t: u8) -> bool {
    matches!(t, T_OID | T_DATE | T_TIMESTAMP)
}

/// Types of the 128-bit encoder.
pub fn is_128(t: u8) -> bool {
    matches!(t, T_DECIMAL | T_BINARY | T_STRING | T_CODE)
}

/// A control byte that starts a literal (a BSON element).
pub fn is_literal_control(c: u8) -> bool {
    c & 0xE0 == 0 || c == T_MAXKEY || c == T_MINKEY
}

/// Scale index of a Simple-8b control byte, None for anything else.
pub fn scale_for_control(c: u8) -> Option<usize> {
    match c >> 4 {
        8 => Some(5),
        n @ 9..=13 => Some((n - 9) as usize),
        _ => None,
    }
}

pub fn zigzag64(v: u64) -> u64 {
    (v << 1) ^ (((v as i64) >> 63) as u64)
}

pub fn unzigzag64(u: u64) -> u64 {
    (u >> 1) ^ (u & 1).wrapping_neg()
}

pub fn zigzag128(v: u128) -> u128 {
    (v << 1) ^ (((v as i128) >> 127) as u128)
}

pub fn unzigzag128(u: u128) -> u128 {
    (u >> 1) ^ (u & 1).wrapping_neg()
}

/// The int64 stored for `val` at `scale`, or None when not exactly representable.
pub fn encode_double(val: f64, scale: usize) -> Option<u64> {
    if scale == MEMORY_AS_INTEGER {
        return Some(val.to_bits());
    }
    let mult = SCALE_MULTIPLIER[scale];
    let scaled = val * mult;
    if !(-SAFE53..=SAFE53).contains(&scaled) {
        return None; // also NaN
    }
    let mut n = scaled as i64; // truncates toward zero; exact within 2**53
    let frac = scaled - n as f64;
    if frac >= 0.5 {
        n += 1;
    } else if frac <= -0.5 {
        n -= 1;
    }
    let back = n as f64 / mult;
    if back != val || (val == 0.0 && val.is_sign_negative()) {
        return None;
    }
    Some(n as u64)
}

pub fn decode_double(v: u64, scale: usize) -> f64 {
    if scale >= MEMORY_AS_INTEGER {
        return f64::from_bits(v);
    }
    v as i64 as f64 / SCALE_MULTIPLIER[scale]
}

/// Encoded with the lowest scale >= `min_scale`; memory always succeeds.
pub fn scale_and_encode_double(val: f64, min_scale: usize) -> (u64, usize) {
    for scale in min_scale..MEMORY_AS_INTEGER {
        if let Some(enc) = encode_double(val, scale) {
            return (enc, scale);
        }
    }
    (val.to_bits(), MEMORY_AS_INTEGER)
}

/// 7 bytes of an ObjectId: | C2 | TS3 | C1 | TS2 | C0 | TS1 | TS0 | from the low byte up
/// (the 5 process-unique bytes 4..9 are left out).
pub fn encode_object_id(o: &[u8]) -> u64 {
    o[11] as u64
        | (o[3] as u64) << 8
        | (o[10] as u64) << 16
        | (o[2] as u64) << 24
        | (o[9] as u64) << 32
        | (o[1] as u64) << 40
        | (o[0] as u64) << 48
}

/// Inverse of `encode_object_id` given the unique bytes 4..9.
pub fn decode_object_id(v: u64, unique: &[u8]) -> [u8; 12] {
    let b = v.to_le_bytes();
    [
        b[6], b[5], b[3], b[1], unique[0], unique[1], unique[2], unique[3], unique[4], b[4], b[2],
        b[0],
    ]
}

/// A string of at most 16 bytes not starting with NUL as its reversed bytes.
pub fn encode_string(s: &[u8]) -> Option<u128> {
    if s.len() > 16 || s.first() == Some(&0) {
        return None;
    }
    Some(s.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128))
}

/// Inverse of `encode_string`: the bytes of the value with trailing zero bytes stripped.
pub fn decode_string(v: u128) -> Vec<u8> {
    let raw = v.to_le_bytes();
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    raw[..end].iter().rev().copied().collect()
}

/// binData bytes (at most 16) as a little-endian integer.
pub fn encode_binary(b: &[u8]) -> Option<u128> {
    if b.len() > 16 {
        return None;
    }
    let mut raw = [0u8; 16];
    raw[..b.len()].copy_from_slice(b);
    Some(u128::from_le_bytes(raw))
}

pub fn encode_decimal128(v: &[u8]) -> u128 {
    let mut raw = [0u8; 16];
    raw.copy_from_slice(&v[..16]);
    u128::from_le_bytes(raw)
}

pub fn read_i32(v: &[u8]) -> i32 {
    i32::from_le_bytes([v[0], v[1], v[2], v[3]])
}

pub fn read_u64(v: &[u8]) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&v[..8]);
    u64::from_le_bytes(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips() {
        for v in [0u64, 1, u64::MAX, 1 << 63, 12345] {
            assert_eq!(unzigzag64(zigzag64(v)), v);
        }
        assert_eq!(zigzag64((-1i64) as u64), 1);
        assert_eq!(zigzag128(u128::MAX), 1);
    }

    #[test]
    fn doubles_scale_like_the_reference() {
        assert_eq!(scale_and_encode_double(1.5, 0), (15, 1));
        assert_eq!(scale_and_encode_double(-0.0, 0).1, MEMORY_AS_INTEGER);
        assert_eq!(scale_and_encode_double(f64::NAN, 0).1, MEMORY_AS_INTEGER);
        assert_eq!(encode_double(3.0, 0), Some(3));
    }

    #[test]
    fn strings_reverse() {
        assert_eq!(encode_string(b"ab"), Some(0x6162));
        assert_eq!(decode_string(0x6162), b"ab");
        assert_eq!(encode_string(b"\0a"), None);
    }
}
