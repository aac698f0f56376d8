//! Decoding BSONColumns: the uniform numeric decoder.
//!
//! Python reference: `storage/bsoncolumn/decoder.py` (the element stream `_Stream`) and
//! `storage/bsoncolumn/simple8b/decoding.py` (`decode_block`). `decode_uniform` takes the
//! columns whose rows all hold one of int64, int32, date or double (one type), without
//! skipped rows or interleaved sections; anything else, malformed input included, is
//! `None` and the Python decoder then produces the result or the proper error.

use super::simple8b::{block_layout, BlockLayout, RLE_MULTIPLIER};
use super::values::*;

/// A column decoded by `decode_uniform`: its type and `count` values (int64 for
/// int64/int32/date, the float64 bits for doubles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uniform {
    pub t: u8,
    pub values: Vec<u64>,
    pub count: usize,
}

impl Uniform {
    /// The values as little-endian bytes, 8 a value.
    pub fn le_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        #[cfg(target_endian = "little")]
        {
            // SAFETY: any initialized u64 memory is valid as bytes, u8 has alignment 1,
            // and the slice borrows `self.values` for its lifetime
            std::borrow::Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(self.values.as_ptr().cast::<u8>(), self.values.len() * 8)
            })
        }
        #[cfg(not(target_endian = "little"))]
        {
            std::borrow::Cow::Owned(self.values.iter().flat_map(|v| v.to_le_bytes()).collect())
        }
    }
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
    out: Vec<u64>,
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
        self.out.push(v);
    }
}

/// Pass 2, over a column `scan` accepted: false on a skipped row or a double control
/// whose last value does not re-encode at its scale.
fn fill(d: &[u8], s: &mut Fill, count: usize) -> bool {
    let mut pos = 0usize;
    let mut prev = 0u64; // what an RLE block repeats (skips never get here)
    let emitted = |s: &Fill| s.out.len();
    while pos < d.len() && d[pos] != 0 {
        let c = d[pos];
        if is_literal_control(c) {
            let size = numeric_size(c).unwrap_or(8);
            let raw = load_int(&d[pos + 2..pos + 2 + size], size);
            if emitted(s) >= count {
                return false;
            }
            s.out.push(raw);
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
        out: Vec::with_capacity(count),
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

// -- the general decoder of scalar columns ------------------------------------------------

/// Why a column was not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Malformed: the reference raises BSONColumnError.
    Malformed,
    /// An interleaved section or a literal holding a document: for the reference.
    Unsupported,
}

/// The rows of a column: per row its type (0 for a skipped row) and value bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rows {
    pub types: Vec<u8>,
    pub data: Vec<u8>,
    /// End of each row's value in `data` (a skipped row's value is empty).
    pub ends: Vec<usize>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.types.len()
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Row `i`: None for a skipped row, else (type, value bytes).
    pub fn get(&self, i: usize) -> Option<(u8, &[u8])> {
        let t = self.types[i];
        if t == T_EOO {
            return None;
        }
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some((t, &self.data[start..self.ends[i]]))
    }

    pub fn iter(&self) -> impl Iterator<Item = Option<(u8, &[u8])>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    fn push(&mut self, t: u8, v: &[u8]) {
        self.types.push(t);
        self.data.extend_from_slice(v);
        self.ends.push(self.data.len());
    }

    fn push_skip(&mut self) {
        self.types.push(T_EOO);
        self.ends.push(self.data.len());
    }
}

/// A decoded column and where it can be reopened: the offset and row of its last
/// literal (None when it has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub rows: Rows,
    pub anchor: Option<(usize, usize)>,
}

type DResult<T> = Result<T, DecodeError>;
use DecodeError::{Malformed, Unsupported};

/// Decoding state of one stream (`_Stream` of the reference).
struct Stream {
    lt: u8,
    lv: Vec<u8>,
    is128: bool,
    enc64: u64,
    enc128: u128,
    dod_enc: u64,
    dod: bool,
    scale: usize,
    s8b_last: Option<u128>,
}

impl Stream {
    fn new() -> Self {
        Stream {
            lt: 0,
            lv: Vec::new(),
            is128: false,
            enc64: 0,
            enc128: 0,
            dod_enc: 0,
            dod: false,
            scale: MEMORY_AS_INTEGER,
            s8b_last: Some(0),
        }
    }

    fn load_literal(&mut self, t: u8, v: &[u8]) {
        self.lt = t;
        self.lv.clear();
        self.lv.extend_from_slice(v);
        self.s8b_last = Some(0);
        self.scale = MEMORY_AS_INTEGER;
        if is_128(t) {
            self.is128 = true;
            self.dod = false;
            self.enc128 = match t {
                T_STRING | T_CODE => encode_string(&v[4..v.len() - 1]).unwrap_or(0),
                T_BINARY => encode_binary(&v[5..]).unwrap_or(0),
                _ => encode_decimal128(v),
            };
            return;
        }
        self.is128 = false;
        self.dod = is_delta_of_delta(t);
        let enc = match t {
            T_OID => encode_object_id(v),
            T_DATE | T_INT64 | T_TIMESTAMP => read_u64(v),
            T_BOOL => (v[0] != 0) as u64,
            T_INT32 => read_i32(v) as i64 as u64,
            _ => 0,
        };
        if self.dod {
            self.dod_enc = enc;
            self.enc64 = 0;
        } else {
            self.enc64 = enc;
        }
    }

    fn check_control(&mut self, control: u8) -> DResult<()> {
        let scale = scale_for_control(control).ok_or(Malformed)?;
        if self.is128 {
            if scale != MEMORY_AS_INTEGER {
                return Err(Malformed);
            }
            return Ok(());
        }
        if self.lt == T_DOUBLE {
            self.enc64 =
                encode_double(f64::from_bits(read_u64(&self.lv)), scale).ok_or(Malformed)?;
        } else if scale != MEMORY_AS_INTEGER {
            return Err(Malformed);
        }
        self.scale = scale;
        Ok(())
    }

    /// The row of one decoded Simple-8b value (None = a skipped row).
    fn value(&mut self, delta: Option<u128>, out: &mut Rows) -> DResult<()> {
        let Some(delta) = delta else {
            out.push_skip();
            return Ok(());
        };
        let lt = self.lt;
        if lt == 0 {
            return Err(Malformed); // a delta without a preceding value
        }
        if self.is128 {
            if delta == 0 {
                out.push(lt, &self.lv);
                return Ok(());
            }
            self.enc128 = self.enc128.wrapping_add(unzigzag128(delta));
            let enc = self.enc128;
            let v = match lt {
                T_STRING | T_CODE => {
                    // bytes, not text: MongoDB's BSONColumn does not validate UTF-8
                    let s = decode_string(enc);
                    let mut v = ((s.len() + 1) as i32).to_le_bytes().to_vec();
                    v.extend_from_slice(&s);
                    v.push(0);
                    v
                }
                T_BINARY => {
                    let size = read_i32(&self.lv);
                    if !(0..=16).contains(&size) {
                        return Err(Malformed);
                    }
                    let mut v = self.lv[..5].to_vec();
                    v.extend_from_slice(&enc.to_le_bytes()[..size as usize]);
                    if v[4] == 2 && !super::elements::valid_old_binary(&v) {
                        return Err(Malformed);
                    }
                    v
                }
                T_DECIMAL => enc.to_le_bytes().to_vec(),
                _ => return Err(Malformed),
            };
            out.push(lt, &v);
            self.lv = v;
            return Ok(());
        }
        let delta = delta as u64;
        if delta == 0 && !self.dod {
            out.push(lt, &self.lv);
            return Ok(());
        }
        self.enc64 = self.enc64.wrapping_add(unzigzag64(delta));
        let mut enc = self.enc64;
        if self.dod {
            self.dod_enc = self.dod_enc.wrapping_add(enc);
            enc = self.dod_enc;
        }
        let start = out.data.len();
        match lt {
            T_INT64 | T_DATE | T_TIMESTAMP => out.data.extend_from_slice(&enc.to_le_bytes()),
            T_DOUBLE => out
                .data
                .extend_from_slice(&decode_double(enc, self.scale).to_bits().to_le_bytes()),
            T_INT32 => out.data.extend_from_slice(&(enc as u32).to_le_bytes()),
            T_OID => {
                let unique = [self.lv[4], self.lv[5], self.lv[6], self.lv[7], self.lv[8]];
                out.data.extend_from_slice(&decode_object_id(enc, &unique));
            }
            T_BOOL => out.data.push((enc != 0) as u8),
            _ => return Err(Malformed),
        }
        out.types.push(lt);
        out.ends.push(out.data.len());
        self.lv.clear();
        self.lv.extend_from_slice(&out.data[start..]);
        Ok(())
    }
}

/// Values of one block; `prev` is what an RLE block repeats.
fn decode_block(
    block: u64,
    prev: Option<u128>,
    is128: bool,
    out: &mut Vec<Option<u128>>,
) -> DResult<()> {
    match block_layout(block) {
        BlockLayout::Invalid => Err(Malformed),
        BlockLayout::Rle => {
            let n = (((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER;
            out.extend(std::iter::repeat(prev).take(n as usize));
            Ok(())
        }
        BlockLayout::Values {
            n,
            width,
            shift,
            cbits,
            mult,
        } => {
            let mask = (1u64 << width) - 1;
            let cmask = (1u64 << cbits) - 1;
            let mut sh = shift;
            for _ in 0..n {
                let slot = (block >> sh) & mask;
                sh += width;
                if slot == mask {
                    out.push(None);
                    continue;
                }
                if cbits == 0 {
                    out.push(Some(slot as u128));
                    continue;
                }
                let mut zeros = ((slot & cmask) * mult as u64) as u32;
                let value = (slot >> cbits) as u128;
                if is128 {
                    // bits shifted past 128 are dropped, as the reference's mask does
                    out.push(Some(value.checked_shl(zeros).unwrap_or(0)));
                } else {
                    zeros &= 63;
                    out.push(Some(((value as u64) << zeros) as u128));
                }
            }
            Ok(())
        }
    }
}

/// The literal at `pos`: (type, value range) after checking it.
fn literal(data: &[u8], pos: usize) -> DResult<(u8, usize, usize)> {
    let end = data.len();
    let t = data[pos];
    if pos + 1 >= end || data[pos + 1] != 0 {
        return Err(Malformed);
    }
    let vs = pos + 2;
    // the literal must be followed by at least the final EOO
    match super::elements::check_value(t, data, vs, end - 1) {
        super::elements::Check::Valid(size) => Ok((t, vs, vs + size)),
        super::elements::Check::Invalid => Err(Malformed),
        super::elements::Check::Unsupported => Err(Unsupported),
    }
}

/// Every row of a column of scalar values (see `DecodeError` for what is not decoded),
/// with at most `max_values` rows.
pub fn decode_column(data: &[u8], max_values: usize) -> DResult<Decoded> {
    let end = data.len();
    if end == 0 {
        return Err(Malformed);
    }
    let mut rows = Rows::default();
    let mut anchor = None;
    let mut stream = Stream::new();
    let mut pos = 0usize;
    let mut deltas: Vec<Option<u128>> = Vec::new();
    loop {
        let &control = data.get(pos).ok_or(Malformed)?;
        if control == 0 {
            if pos + 1 != end {
                return Err(Malformed);
            }
            return Ok(Decoded { rows, anchor });
        }
        if is_literal_control(control) {
            anchor = Some((pos, rows.len()));
            let (t, vs, ve) = literal(data, pos)?;
            if rows.len() + 1 > max_values {
                return Err(Malformed);
            }
            stream.load_literal(t, &data[vs..ve]);
            rows.push(t, &data[vs..ve]);
            pos = ve;
        } else if matches!(control, 0xF0..=0xF2) {
            return Err(Unsupported);
        } else {
            let nblocks = (control & 0x0F) as usize + 1;
            let size = 8 * nblocks;
            if pos + size + 1 >= end {
                return Err(Malformed);
            }
            stream.check_control(control)?;
            let mut total = 0usize;
            for k in 0..nblocks {
                let block = read_u64(&data[pos + 1 + 8 * k..]);
                let n = super::simple8b::block_count(block) as usize;
                if n == 0 {
                    return Err(Malformed);
                }
                total += n;
            }
            if rows.len() + total > max_values {
                return Err(Malformed);
            }
            deltas.clear();
            let mut prev = stream.s8b_last;
            for k in 0..nblocks {
                let block = read_u64(&data[pos + 1 + 8 * k..]);
                decode_block(block, prev, stream.is128, &mut deltas)?;
                prev = *deltas.last().ok_or(Malformed)?;
            }
            stream.s8b_last = prev;
            for &d in &deltas {
                stream.value(d, &mut rows)?;
            }
            pos += size + 1;
        }
    }
}
