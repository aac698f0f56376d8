//! Decoding BSONColumns: the uniform numeric decoder.
//!
//! Python reference: `storage/bsoncolumn/decoder.py` (the element stream `_Stream`) and
//! `storage/bsoncolumn/simple8b/decoding.py` (`decode_block`). `decode_uniform` takes the
//! columns whose rows all hold one of int64, int32, date or double (one type), without
//! skipped rows or interleaved sections; anything else, malformed input included, is
//! `None` and the Python decoder then produces the result or the proper error.

use super::simple8b::{block_layout, BlockLayout, RLE_MULTIPLIER};
use super::values::*;

/// A column decoded by `decode_uniform`: its type and `count` little-endian 8-byte values
/// (int64 for int64/int32/date, the float64 bits for doubles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uniform {
    pub t: u8,
    pub values: Vec<u8>,
    pub count: usize,
}

fn numeric_size(t: u8) -> Option<usize> {
    match t {
        T_INT64 | T_DATE | T_DOUBLE => Some(8),
        T_INT32 => Some(4),
        _ => None,
    }
}

fn block_at(d: &[u8], pos: usize) -> u64 {
    read_u64(&d[pos..pos + 8])
}

fn load_int(v: &[u8], size: usize) -> u64 {
    if size == 4 {
        read_i32(v) as i64 as u64
    } else {
        read_u64(v)
    }
}

/// Pass 1: (type, rows) when the column has the supported shape and sound lengths.
fn scan(d: &[u8], max_values: usize) -> Option<(u8, usize)> {
    let end = d.len();
    let mut pos = 0usize;
    let mut total = 0usize;
    let mut t = 0u8;
    loop {
        let c = *d.get(pos)?;
        if c == 0 {
            if pos + 1 != end {
                return None;
            }
            break;
        }
        if is_literal_control(c) {
            let size = numeric_size(c)?;
            if t != 0 && c != t {
                return None;
            }
            t = c;
            if *d.get(pos + 1)? != 0 {
                return None;
            }
            let vs = pos + 2;
            if vs + size > end - 1 {
                return None; // the final EOO must follow
            }
            total += 1;
            pos = vs + size;
        } else {
            let scale = scale_for_control(c)?;
            if t == 0 || (scale != MEMORY_AS_INTEGER && t != T_DOUBLE) {
                return None;
            }
            let nb = (c & 0x0F) as usize + 1;
            if pos + 8 * nb + 1 >= end {
                return None;
            }
            for k in 0..nb {
                let block = block_at(d, pos + 1 + 8 * k);
                total += match block_layout(block) {
                    BlockLayout::Invalid => return None,
                    BlockLayout::Rle => {
                        (((block >> 4) & 0xF) + 1) as usize * RLE_MULTIPLIER as usize
                    }
                    BlockLayout::Values { n, .. } => n as usize,
                };
            }
            pos += 8 * nb + 1;
        }
        if total > max_values {
            return None;
        }
    }
    if t == 0 || total == 0 {
        return None;
    }
    Some((t, total))
}

struct Fill {
    t: u8,
    scale: usize,
    enc: u64,     // running value (dates: running delta)
    dod_enc: u64, // dates: running value
    last: f64,    // doubles: last value
    out: Vec<u8>,
}

impl Fill {
    fn emit(&mut self, zz: u64) {
        self.enc = self.enc.wrapping_add(unzigzag64(zz));
        let v = match self.t {
            T_INT32 => self.enc as u32 as i32 as i64 as u64,
            T_DATE => {
                self.dod_enc = self.dod_enc.wrapping_add(self.enc);
                self.dod_enc
            }
            T_DOUBLE => {
                self.last = decode_double(self.enc, self.scale);
                self.last.to_bits()
            }
            _ => self.enc,
        };
        self.out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Pass 2, over a column `scan` accepted: false on a skipped row or a double control
/// whose last value does not re-encode at its scale.
fn fill(d: &[u8], s: &mut Fill, count: usize) -> bool {
    let mut pos = 0usize;
    let mut prev = 0u64; // what an RLE block repeats (skips never get here)
    let emitted = |s: &Fill| s.out.len() / 8;
    while pos < d.len() && d[pos] != 0 {
        let c = d[pos];
        if is_literal_control(c) {
            let size = numeric_size(c).unwrap_or(8);
            let raw = load_int(&d[pos + 2..pos + 2 + size], size);
            if emitted(s) >= count {
                return false;
            }
            s.out.extend_from_slice(&raw.to_le_bytes());
            s.scale = MEMORY_AS_INTEGER;
            prev = 0;
            match c {
                T_DATE => {
                    s.dod_enc = raw;
                    s.enc = 0;
                }
                T_DOUBLE => {
                    s.last = f64::from_bits(raw);
                    s.enc = 0;
                }
                _ => s.enc = raw,
            }
            pos += 2 + size;
            continue;
        }
        let Some(scale) = scale_for_control(c) else {
            return false;
        };
        let nb = (c & 0x0F) as usize + 1;
        if s.t == T_DOUBLE {
            match encode_double(s.last, scale) {
                Some(e) => s.enc = e,
                None => return false,
            }
        }
        s.scale = scale;
        for k in 0..nb {
            let block = block_at(d, pos + 1 + 8 * k);
            match block_layout(block) {
                BlockLayout::Invalid => return false,
                BlockLayout::Rle => {
                    let reps = (((block >> 4) & 0xF) + 1) as usize * RLE_MULTIPLIER as usize;
                    if emitted(s) + reps > count {
                        return false;
                    }
                    for _ in 0..reps {
                        s.emit(prev);
                    }
                }
                BlockLayout::Values {
                    n,
                    width,
                    shift,
                    cbits,
                    mult,
                } => {
                    if emitted(s) + n as usize > count {
                        return false;
                    }
                    let mask = (1u64 << width) - 1;
                    let cmask = (1u64 << cbits) - 1;
                    let mut sh = shift;
                    for _ in 0..n {
                        let mut slot = (block >> sh) & mask;
                        sh += width;
                        if slot == mask {
                            return false; // a skipped row
                        }
                        if cbits != 0 {
                            let zeros = (((slot & cmask) * mult as u64) & 63) as u32;
                            slot = (slot >> cbits) << zeros;
                        }
                        s.emit(slot);
                        prev = slot;
                    }
                }
            }
        }
        pos += 8 * nb + 1;
    }
    emitted(s) == count
}

/// The rows of a column of one numeric type without skips (see the module doc).
pub fn decode_uniform(column: &[u8], max_values: usize) -> Option<Uniform> {
    let (t, count) = scan(column, max_values)?;
    let mut s = Fill {
        t,
        scale: MEMORY_AS_INTEGER,
        enc: 0,
        dod_enc: 0,
        last: 0.0,
        out: Vec::with_capacity(count * 8),
    };
    if !fill(column, &mut s, count) {
        return None;
    }
    Some(Uniform {
        t,
        values: s.out,
        count,
    })
}
