//! The column builder in regular mode, and the uniform builder on top of it.
//!
//! Python reference: `storage/bsoncolumn/builder.py` (`BSONColumnBuilder`: `append`,
//! `skip`, `finalize`, with every value appended through one `EncodingState`). Objects
//! and arrays holding scalars (interleaved mode) are not handled here: the caller
//! declines them. Every operation either succeeds or leaves the builder as it was.

use super::encoder::EncodingState;
use super::simple8b::Fail;
use super::values::*;

/// A BSONColumn being built from scalar values and skipped rows.
#[derive(Debug, Clone, Default)]
pub struct ColumnBuilder {
    state: EncodingState,
    count: usize,
}

impl ColumnBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows so far, skipped rows included.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Append one scalar value (`t`, its BSON value bytes, already validated).
    pub fn append(&mut self, t: u8, v: &[u8]) -> Result<(), Fail> {
        if t == T_EOO {
            return self.skip(1);
        }
        if (t == T_OBJECT || t == T_ARRAY) && v.len() != 5 {
            return Err(Fail); // interleaved mode: not here
        }
        let snap = self.state.snapshot();
        let r = self.state.append(t, v);
        if r.is_err() {
            self.state.restore(&snap);
        } else {
            self.count += 1;
        }
        r
    }

    /// Append many values; on failure the builder is as before the call.
    pub fn extend<'a>(
        &mut self,
        values: impl IntoIterator<Item = (u8, &'a [u8])>,
    ) -> Result<(), Fail> {
        let snap = self.state.snapshot();
        let count = self.count;
        for (t, v) in values {
            let r = if t == T_EOO {
                self.state.skip()
            } else if (t == T_OBJECT || t == T_ARRAY) && v.len() != 5 {
                Err(Fail)
            } else {
                self.state.append(t, v)
            };
            if r.is_err() {
                self.state.restore(&snap);
                self.count = count;
                return r;
            }
            self.count += 1;
        }
        Ok(())
    }

    /// Append `n` skipped rows.
    pub fn skip(&mut self, n: usize) -> Result<(), Fail> {
        let snap = self.state.snapshot();
        for _ in 0..n {
            if let Err(f) = self.state.skip() {
                self.state.restore(&snap);
                return Err(f);
            }
        }
        self.count += n;
        Ok(())
    }

    /// The column of the rows so far (ending in 0x00); the builder stays usable.
    pub fn finalize(&mut self) -> Result<Vec<u8>, Fail> {
        self.state.finalize()
    }

    /// Bytes held (output and the pending state), for `__sizeof__`.
    pub fn heap_size(&self) -> usize {
        self.state.buf.capacity() + self.state.st.pvalue.capacity()
    }
}

/// Bytes per value of the types the uniform builder takes.
pub fn uniform_size(t: u8) -> Option<usize> {
    match t {
        T_INT32 => Some(4),
        T_INT64 | T_DATE | T_DOUBLE => Some(8),
        T_OID => Some(12),
        _ => None,
    }
}

/// A column of one fixed-size type (int32, int64, date, double, ObjectId) without skips,
/// keeping every value given to it.
#[derive(Debug, Clone)]
pub struct UniformBuilder {
    t: u8,
    size: usize,
    builder: ColumnBuilder,
    values: Vec<u8>,
}

impl UniformBuilder {
    /// None for a type it does not take.
    pub fn new(t: u8) -> Option<Self> {
        Some(UniformBuilder {
            t,
            size: uniform_size(t)?,
            builder: ColumnBuilder::new(),
            values: Vec::new(),
        })
    }

    pub fn type_byte(&self) -> u8 {
        self.t
    }

    pub fn value_size(&self) -> usize {
        self.size
    }

    pub fn count(&self) -> usize {
        self.builder.len()
    }

    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// Append the concatenated values; Err (builder unchanged) when the encoder cannot
    /// reproduce the reference. `values.len()` must be a multiple of the value size.
    pub fn extend(&mut self, values: &[u8]) -> Result<(), Fail> {
        if values.len() % self.size != 0 {
            return Err(Fail);
        }
        let t = self.t;
        self.builder
            .extend(values.chunks_exact(self.size).map(|v| (t, v)))?;
        self.values.extend_from_slice(values);
        Ok(())
    }

    pub fn finalize(&mut self) -> Result<Vec<u8>, Fail> {
        self.builder.finalize()
    }

    pub fn heap_size(&self) -> usize {
        self.builder.heap_size() + self.values.capacity()
    }
}

/// The finalized column of n >= 1 values of one uniform type, None when declined.
pub fn encode_uniform(t: u8, values: &[u8]) -> Option<Vec<u8>> {
    let mut b = UniformBuilder::new(t)?;
    b.extend(values).ok()?;
    b.finalize().ok()
}
