//! Simple-8b: the greedy block builder and the block layout tables.
//!
//! Python reference: `storage/bsoncolumn/simple8b/builder.py` (`Simple8bBuilder`,
//! `pending_value`) and `simple8b/selectors.py` (the tables). The builder's output decides
//! byte identity, so every check happens in the order of the reference. Values are kept
//! as `u128` (the 64-bit streams never set the high half); a skip is a pending entry
//! without a value. States the reference would fail on (an `IndexError`, an assertion)
//! are `Err(Fail)` here.

/// The encoder met a state the Python reference would fail on: the caller declines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fail;

pub const RLE_SELECTOR: u64 = 15;
pub const RLE_MULTIPLIER: u64 = 120;
pub const MAX_RLE_COUNT: u64 = 16;

pub const TZ_BITS: [u32; 4] = [0, 4, 4, 5];
pub const MIN_DATA_BITS: [u8; 4] = [1, 2, 4, 4];
const MIN_SELECTOR: [usize; 4] = [1, 1, 1, 8];
const MAX_SELECTOR: [usize; 4] = [14, 9, 7, 13];
pub const INTS: [[u32; 16]; 4] = [
    [0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    [0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0],
    [0, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0, 6, 5, 4, 3, 2, 1, 0, 0],
];
pub const BITS: [[u32; 16]; 4] = [
    [64, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60, 64],
    [64, 2, 3, 4, 5, 7, 10, 14, 24, 52, 64, 64, 64, 64, 64, 64],
    [64, 4, 5, 7, 10, 14, 24, 52, 0, 0, 64, 64, 64, 64, 64, 64],
    [64, 0, 0, 0, 0, 0, 0, 0, 4, 6, 9, 13, 23, 51, 64, 64],
];

/// The selector index of the largest block without unused slots for `n` pending values.
fn selector_for_count(n: usize, ext: usize) -> usize {
    (MIN_SELECTOR[ext]..MAX_SELECTOR[ext])
        .find(|&idx| n >= INTS[ext][idx] as usize)
        .unwrap_or(MAX_SELECTOR[ext])
}

/// A value waiting for its block: the value (`value()`, `None` for a skip), the bits it
/// needs under the base / seven / eight-small / eight-large selectors and the trailing
/// zeros stored for the last three. The value is kept as two halves so that the entry
/// is 24 bytes, not the 48 an `Option<u128>` would align it to: an open bucket holds one
/// per value not yet in a block, per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    halves: [u64; 2],
    skip: bool,
    pub bits: [u8; 4],
    pub tz: [u8; 3],
}

impl Pending {
    pub fn value(&self) -> Option<u128> {
        (!self.skip).then(|| u128::from(self.halves[0]) | (u128::from(self.halves[1]) << 64))
    }
}

const SKIP: Pending = Pending {
    halves: [0; 2],
    skip: true,
    bits: [0; 4],
    tz: [0; 3],
};

fn bit_length(v: u128) -> u32 {
    128 - v.leading_zeros()
}

/// Bits needed so that the value is not all ones (all ones marks a skip); for 128-bit
/// values with a non-zero high half the plain bit length.
fn count_bits(v: u128, is128: bool) -> u32 {
    if is128 && v >> 64 != 0 {
        bit_length(v)
    } else {
        // v < 2**64 here (64-bit streams never exceed it), so v + 1 does not overflow
        bit_length(v + 1)
    }
}

/// The pending entry of `v`, or None when Simple-8b cannot store it.
pub fn pending_value(v: u128, is128: bool) -> Option<Pending> {
    let all_ones = if is128 { u128::MAX } else { u64::MAX as u128 };
    if v == all_ones || (!is128 && v > all_ones) {
        return None;
    }
    let tz = if v != 0 { v.trailing_zeros() } else { 0 };
    let bits = count_bits(v, is128);
    let t7 = tz.min(15);
    let mut m7 = bits - t7;
    let t8s = tz.min(60) & !3;
    let mut m8s = bits - t8s;
    let t8l = tz.min(124) & !3;
    let mut m8l = bits - t8l;
    if tz == 15 {
        m7 = count_bits(v >> tz, is128);
    } else if tz == 60 {
        m8s = count_bits(v >> tz, is128);
    }
    if is128 && tz == 124 {
        m8l = count_bits(v >> tz, is128);
    }
    if bits > 60 && m7 + 4 > 56 && m8s + 4 > 56 && m8l + 5 > 56 {
        return None;
    }
    Some(Pending {
        halves: [v as u64, (v >> 64) as u64],
        skip: false,
        bits: [bits as u8, m7 as u8, m8s as u8, m8l as u8],
        tz: [t7 as u8, t8s as u8, t8l as u8],
    })
}

/// Where the builder's blocks go. `write` gets each finished block and the builder as
/// it is right after the block left it (the double encoder reads what is pending).
pub trait BlockSink {
    fn write(&mut self, block: u64, builder: &Simple8bBuilder);
}

/// A sink that only notes whether anything was written (trial re-encodings).
#[derive(Default)]
pub struct NoteWrites {
    pub wrote: bool,
}

impl BlockSink for NoteWrites {
    fn write(&mut self, _block: u64, _builder: &Simple8bBuilder) {
        self.wrote = true;
    }
}

/// Greedy Simple-8b encoder with RLE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simple8bBuilder {
    pub is128: bool,
    pub rle_count: u64,
    /// Last value of the previous block for RLE; `None` means a skip. Starts at 0.
    pub last: Option<u128>,
    curr_max: [u8; 4],
    last_valid_ext: usize,
    possible: [bool; 4],
    pub pending: Vec<Pending>,
}

impl Simple8bBuilder {
    pub fn new(is128: bool) -> Self {
        Simple8bBuilder {
            is128,
            rle_count: 0,
            last: Some(0),
            curr_max: MIN_DATA_BITS,
            last_valid_ext: 0,
            possible: [true; 4],
            pending: Vec::with_capacity(8),
        }
    }

    fn reset_possible(&mut self) {
        self.possible = [true; 4];
    }

    pub fn rle_possible(&self) -> bool {
        self.pending.is_empty() || self.rle_count != 0
    }

    /// Append a value: Ok(false) (and no change) when Simple-8b cannot store it.
    pub fn append(&mut self, value: u128, w: &mut impl BlockSink) -> Result<bool, Fail> {
        if self.rle_possible() {
            if self.last == Some(value) {
                self.rle_count += 1;
                self.last_valid_ext = 0;
                self.reset_possible();
                return Ok(true);
            }
            self.rle_terminate(w)?;
        }
        self.append_value(value, true, w)
    }

    pub fn skip(&mut self, w: &mut impl BlockSink) -> Result<(), Fail> {
        if self.rle_possible() {
            if self.last.is_none() {
                self.rle_count += 1;
                self.last_valid_ext = 0;
                self.reset_possible();
                return Ok(());
            }
            self.rle_terminate(w)?;
        }
        self.append_skip(true, w)
    }

    pub fn flush(&mut self, w: &mut impl BlockSink) -> Result<(), Fail> {
        self.rle_terminate(w)?;
        if !self.pending.is_empty() {
            while !self.pending.is_empty() {
                let block = self.encode_largest(self.last_valid_ext)?;
                w.write(block, self);
            }
            self.rle_count = 0;
        }
        Ok(())
    }

    pub fn initialize_rle_from(&mut self, other: &Simple8bBuilder) {
        if other.rle_possible() {
            self.last = other.last;
        }
    }

    /// Values not yet written, in order (an ongoing RLE run first); None is a skip.
    pub fn pending_values(&self) -> impl Iterator<Item = Option<u128>> + '_ {
        std::iter::repeat(self.last)
            .take(self.rle_count as usize)
            .chain(self.pending.iter().map(Pending::value))
    }

    pub fn pending_len(&self) -> usize {
        self.rle_count as usize + self.pending.len()
    }

    fn fits(&mut self, b: [u8; 4]) -> bool {
        let n = self.pending.len() as u32 + 1;
        const WIDTH: [u32; 4] = [0, 4, 4, 5];
        const DATA: [u32; 4] = [60, 56, 56, 56];
        for ext in 0..4 {
            if self.possible[ext] {
                let m = self.curr_max[ext].max(b[ext]) as u32;
                if (m + WIDTH[ext]) * n <= DATA[ext] {
                    self.last_valid_ext = ext;
                    return true;
                }
                self.possible[ext] = false;
            }
        }
        false
    }

    fn push(&mut self, p: Pending) {
        for k in 0..4 {
            self.curr_max[k] = self.curr_max[k].max(p.bits[k]);
        }
        self.pending.push(p);
    }

    fn append_value(
        &mut self,
        value: u128,
        try_rle: bool,
        w: &mut impl BlockSink,
    ) -> Result<bool, Fail> {
        match pending_value(value, self.is128) {
            None => Ok(false),
            Some(p) => {
                self.append_pending(p, try_rle, w)?;
                Ok(true)
            }
        }
    }

    fn append_pending(
        &mut self,
        p: Pending,
        try_rle: bool,
        w: &mut impl BlockSink,
    ) -> Result<(), Fail> {
        if self.fits(p.bits) {
            self.push(p);
            return Ok(());
        }
        let last_pending = self.pending.last().ok_or(Fail)?.value();
        loop {
            if self.pending.is_empty() {
                return Err(Fail); // the reference would index an empty list
            }
            let block = self.encode_largest(self.last_valid_ext)?;
            w.write(block, self);
            if self.fits(p.bits) {
                break;
            }
        }
        if try_rle && self.pending.is_empty() && last_pending == p.value() {
            self.rle_count = 1;
            self.last = last_pending;
            self.last_valid_ext = 0;
            self.reset_possible();
        } else {
            self.push(p);
        }
        Ok(())
    }

    fn append_skip(&mut self, try_rle: bool, w: &mut impl BlockSink) -> Result<(), Fail> {
        if let Some(last) = self.pending.last() {
            let last_is_skip = last.skip;
            if !self.fits(MIN_DATA_BITS) {
                let block = self.encode_largest(self.last_valid_ext)?;
                w.write(block, self);
                self.last_valid_ext = 0;
            }
            if self.pending.is_empty() && last_is_skip && try_rle {
                self.rle_count = 1;
                self.last = None;
                return Ok(());
            }
        }
        self.pending.push(SKIP);
        Ok(())
    }

    fn rle_terminate(&mut self, w: &mut impl BlockSink) -> Result<(), Fail> {
        let mut count = self.rle_count / RLE_MULTIPLIER;
        if count >= 1 {
            // the values of an RLE block leave the count before the sink sees the
            // builder: the double encoder walks back over what is still pending to find
            // the value ending the block
            while count > MAX_RLE_COUNT {
                self.rle_count -= RLE_MULTIPLIER * MAX_RLE_COUNT;
                w.write(RLE_SELECTOR | ((MAX_RLE_COUNT - 1) << 4), self);
                count -= MAX_RLE_COUNT;
            }
            self.rle_count -= RLE_MULTIPLIER * count;
            w.write(RLE_SELECTOR | ((count - 1) << 4), self);
        }
        while self.rle_count > 0 {
            match self.last {
                None => self.append_skip(false, w)?,
                Some(v) => {
                    // a value that was pending once is always storable again
                    if !self.append_value(v, false, w)? {
                        return Err(Fail);
                    }
                }
            }
            self.rle_count -= 1;
        }
        self.last = Some(0);
        if self.pending.is_empty() {
            self.last_valid_ext = 0;
            self.reset_possible();
        }
        Ok(())
    }

    fn encode_largest(&mut self, ext: usize) -> Result<u64, Fail> {
        let n = self.pending.len();
        let idx = selector_for_count(n.min(60), ext);
        let ints = INTS[ext][idx] as usize;
        if n == 0 || ints == 0 || ints > n {
            return Err(Fail);
        }
        let base_sel: u128 = match ext {
            0 => idx as u128,
            1 => 7,
            _ => 8,
        };
        let mut shift = 4 + if base_sel == 7 || base_sel == 8 { 4 } else { 0 };
        let width = BITS[ext][idx] + TZ_BITS[ext];
        let mask: u128 = (1u128 << width) - 1;
        let mut word: u128 = base_sel | if ext != 0 { (idx as u128) << 4 } else { 0 };
        for p in &self.pending[..ints] {
            let slot = match p.value() {
                None => mask,
                Some(v) => match ext {
                    0 => v,
                    1 => {
                        let tz = p.tz[0] as u32;
                        tz as u128 | ((v >> tz) << 4)
                    }
                    _ => {
                        let nib = (p.tz[ext - 1] >> 2) as u32;
                        nib as u128 | ((v >> (nib << 2)) << TZ_BITS[ext])
                    }
                },
            };
            // bits shifted past 128 cannot matter: the word is cut to 64 bits
            word |= slot.checked_shl(shift).unwrap_or(0);
            shift += width;
        }
        self.pending.drain(..ints);
        let mut cm = MIN_DATA_BITS;
        for p in &self.pending {
            for (m, &b) in cm.iter_mut().zip(&p.bits) {
                *m = (*m).max(b);
            }
        }
        self.curr_max = cm;
        self.reset_possible();
        Ok(word as u64)
    }
}

/// How one block reads back (decoding side).
#[derive(Debug, Clone, Copy)]
pub enum BlockLayout {
    /// Not a valid selector / extension.
    Invalid,
    /// `(ext + 1) * 120` repeats of the last value of the previous block.
    Rle,
    /// `n` slots of `width` bits from bit `shift`; the low `cbits` of a slot count
    /// trailing zeros (times `mult`), the rest is the value.
    Values {
        n: u32,
        width: u32,
        shift: u32,
        cbits: u32,
        mult: u32,
    },
}

/// The layout of a block from its low byte.
#[inline]
pub fn block_layout(block: u64) -> BlockLayout {
    LAYOUTS[(block & 0xFF) as usize]
}

/// `block_layout` for every low byte, computed at compile time.
static LAYOUTS: [BlockLayout; 256] = {
    let mut table = [BlockLayout::Invalid; 256];
    let mut low = 0;
    while low < 256 {
        table[low] = layout_of(low as u64);
        low += 1;
    }
    table
};

const fn layout_of(block: u64) -> BlockLayout {
    const EXT7: [i8; 16] = [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1];
    const EXT8: [i8; 16] = [0, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, -1, -1];
    const MULTS: [u32; 4] = [0, 1, 4, 4];
    let mut selector = (block & 0xF) as usize;
    let nibble = ((block >> 4) & 0xF) as usize;
    if selector == 0 {
        return BlockLayout::Invalid;
    }
    if selector == RLE_SELECTOR as usize {
        return BlockLayout::Rle;
    }
    let mut ext = 0usize;
    let mut ext_bits = 0u32;
    if selector == 7 || selector == 8 {
        let e = if selector == 7 {
            EXT7[nibble]
        } else {
            EXT8[nibble]
        };
        if e < 0 {
            return BlockLayout::Invalid;
        }
        ext = e as usize;
        if ext != 0 {
            selector = nibble;
        }
        ext_bits = 4;
    }
    let cbits = TZ_BITS[ext];
    let width = BITS[ext][selector] + cbits;
    let shift = 4 + ext_bits;
    if width == 0 || width >= 64 {
        return BlockLayout::Invalid;
    }
    let mut n = 0;
    let mut s = shift;
    loop {
        n += 1;
        s += width;
        if s + width > 64 {
            break;
        }
    }
    BlockLayout::Values {
        n,
        width,
        shift,
        cbits,
        mult: MULTS[ext],
    }
}

/// Number of values (skips included) a block holds; 0 for an invalid one.
pub fn block_count(block: u64) -> u64 {
    match block_layout(block) {
        BlockLayout::Invalid => 0,
        BlockLayout::Rle => (((block >> 4) & 0xF) + 1) * RLE_MULTIPLIER,
        BlockLayout::Values { n, .. } => n as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Vec<u64>);
    impl BlockSink for Collect {
        fn write(&mut self, block: u64, _b: &Simple8bBuilder) {
            self.0.push(block);
        }
    }

    #[test]
    fn alternating_bits_pack_thirty_to_a_block() {
        // 0 needs 1 bit, 1 needs 2 (all ones marks a skip): 30 two-bit slots a block
        let mut b = Simple8bBuilder::new(false);
        let mut out = Collect(vec![]);
        for k in 0..61u128 {
            assert!(b.append(k & 1, &mut out).unwrap());
        }
        b.flush(&mut out).unwrap();
        assert_eq!(out.0[0] & 0xF, 2);
        assert_eq!(block_count(out.0[0]), 30);
        assert_eq!(out.0.iter().map(|&w| block_count(w)).sum::<u64>(), 61);
    }

    /// Notes, at each write, how many values the builder still holds.
    struct Left(Vec<(u64, usize)>);
    impl BlockSink for Left {
        fn write(&mut self, block: u64, b: &Simple8bBuilder) {
            self.0.push((block, b.pending_len()));
        }
    }

    #[test]
    fn an_rle_block_has_left_the_builder_when_the_sink_sees_it() {
        // a block of 30 two-bit values, then an RLE run of 17 * 120 + 5 repeats: two RLE
        // blocks (16 * 120 and 120) and 5 values left when a new value ends the run
        let mut b = Simple8bBuilder::new(false);
        let mut out = Left(vec![]);
        for _ in 0..(30 + 17 * 120 + 5) {
            assert!(b.append(2, &mut out).unwrap());
        }
        assert!(b.append(4, &mut out).unwrap());
        let rle: Vec<_> = out.0.iter().filter(|(w, _)| w & 0xF == 0xF).collect();
        assert_eq!(rle.len(), 2);
        assert_eq!(block_count(rle[0].0), 16 * 120);
        assert_eq!(rle[0].1, 120 + 5);
        assert_eq!(block_count(rle[1].0), 120);
        assert_eq!(rle[1].1, 5);
    }

    #[test]
    fn all_ones_is_not_storable() {
        assert!(pending_value(u64::MAX as u128, false).is_none());
        assert!(pending_value(u128::MAX, true).is_none());
        assert!(pending_value(0, false).is_some());
    }
}
