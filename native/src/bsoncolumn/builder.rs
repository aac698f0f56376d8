//! The column builder in regular mode, and the uniform builder on top of it.
//!
//! Python reference: `storage/bsoncolumn/builder.py` (`BSONColumnBuilder`: `append`,
//! `skip`, `finalize`, with every value appended through one `EncodingState`). Objects
//! and arrays holding scalars (interleaved mode) are not handled here: the caller
//! declines them. Every operation either succeeds or leaves the builder as it was.

use super::decoder::decode_column;
use super::elements::{check_element, is_valid_type, Check};
use super::encoder::EncodingState;
use super::simple8b::Fail;
use super::values::*;

/// Why a builder did not take what it was given (it is then as before the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The native path cannot reproduce the reference here (interleaved objects, code
    /// with scope, a state the reference fails on): use the Python builder.
    Declined,
    /// A malformed value: the reference raises BSONColumnError with this message.
    Invalid(&'static str),
}

impl From<Fail> for BuildError {
    fn from(_: Fail) -> Self {
        BuildError::Declined
    }
}

/// Rows a decoded column may hold (the reference's DEFAULT_MAX_VALUES).
pub const DEFAULT_MAX_VALUES: usize = 1 << 22;

/// Where a builder was (`ColumnBuilder::checkpoint`), to go back there.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    snap: super::encoder::Snapshot,
    count: usize,
}

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

    /// Append one row without taking a snapshot (the callers do).
    fn push(&mut self, row: Option<(u8, &[u8])>) -> Result<(), BuildError> {
        match row {
            None | Some((T_EOO, _)) => self.state.skip()?,
            Some((t, v)) => match check_element(t, v) {
                Check::Valid(_) => self.state.append(t, v)?,
                Check::Unsupported => return Err(BuildError::Declined),
                Check::Invalid if !is_valid_type(t) => {
                    return Err(BuildError::Invalid(
                        "Invalid BSON type appended to BSON Column",
                    ))
                }
                Check::Invalid => {
                    return Err(BuildError::Invalid(
                        "Malformed BSON value appended to BSON Column",
                    ))
                }
            },
        }
        self.count += 1;
        Ok(())
    }

    /// Append one row: a value (`t`, its BSON value bytes; type 0 is a skip).
    pub fn append(&mut self, t: u8, v: &[u8]) -> Result<(), BuildError> {
        self.extend(std::iter::once(Some((t, v))))
    }

    /// Append rows (None = a skipped row); on failure the builder is as before the call.
    pub fn extend<'a>(
        &mut self,
        rows: impl IntoIterator<Item = Option<(u8, &'a [u8])>>,
    ) -> Result<(), BuildError> {
        let snap = self.state.snapshot();
        let count = self.count;
        self.extend_from_checkpoint(rows).inspect_err(|_| {
            self.state.restore(snap);
            self.count = count;
        })
    }

    /// `extend` for a caller holding a `checkpoint` of this builder: on failure the
    /// builder is part-way, for the caller to roll back (no snapshot of its own).
    pub fn extend_from_checkpoint<'a>(
        &mut self,
        rows: impl IntoIterator<Item = Option<(u8, &'a [u8])>>,
    ) -> Result<(), BuildError> {
        for row in rows {
            self.push(row)?;
        }
        Ok(())
    }

    /// Append values of a fixed-size type `t` whose every byte pattern is valid (int32,
    /// int64, date, double, ObjectId, timestamp, decimal128), `size` bytes each.
    pub(crate) fn extend_fixed(&mut self, t: u8, size: usize, values: &[u8]) -> Result<(), Fail> {
        debug_assert!(uniform_size(t) == Some(size) || matches!(t, T_TIMESTAMP | T_DECIMAL));
        let snap = self.state.snapshot();
        for v in values.chunks_exact(size) {
            if let Err(f) = self.state.append(t, v) {
                self.state.restore(snap);
                return Err(f);
            }
        }
        self.count += values.len() / size;
        Ok(())
    }

    /// The builder's state now, cheaper than a clone: the output bytes are not copied
    /// (later appends only add to them, and the one control byte they may change is kept).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            snap: self.state.snapshot(),
            count: self.count,
        }
    }

    /// Back to `c`, taken from this builder with nothing but appends and finalizes since.
    pub fn rollback(&mut self, c: Checkpoint) {
        self.state.restore(c.snap);
        self.count = c.count;
    }

    /// Append `n` skipped rows.
    pub fn skip(&mut self, n: usize) -> Result<(), BuildError> {
        self.extend(std::iter::repeat(None).take(n))
    }

    /// The column of the rows so far (ending in 0x00); the builder stays usable.
    pub fn finalize(&mut self) -> Result<Vec<u8>, BuildError> {
        Ok(self.state.finalize()?)
    }

    /// Bytes held (output, last value and the values waiting for a block), for
    /// `__sizeof__`.
    pub fn heap_size(&self) -> usize {
        self.state.buf.capacity() + self.state.st.heap_size()
    }

    /// A builder in the state of the one that wrote `column` (`from_column` of the
    /// reference): the bytes before its last literal are kept, the rows from there on
    /// are appended again. Declined for columns the native decoder does not take
    /// (malformed ones included: the reference then raises).
    pub fn from_column(column: &[u8]) -> Result<Self, BuildError> {
        let decoded =
            decode_column(column, DEFAULT_MAX_VALUES).map_err(|_| BuildError::Declined)?;
        let (prefix, first) = decoded.anchor.map_or((0, 0), |(pos, row)| (pos, row));
        let mut b = ColumnBuilder::new();
        b.state.buf.extend_from_slice(&column[..prefix]);
        b.count = first;
        b.extend((first..decoded.rows.len()).map(|i| decoded.rows.get(i)))?;
        Ok(b)
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
        self.builder.extend_fixed(t, self.size, values)?;
        self.values.extend_from_slice(values);
        Ok(())
    }

    pub fn finalize(&mut self) -> Result<Vec<u8>, Fail> {
        self.builder.finalize().map_err(|_| Fail)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_extend_leaves_the_builder_as_it_was() {
        let mut b = ColumnBuilder::new();
        b.extend([Some((T_INT32, &[1u8, 0, 0, 0][..])), None])
            .unwrap();
        let before = b.finalize().unwrap();
        let bad: [Option<(u8, &[u8])>; 2] = [
            Some((T_INT64, &[5, 0, 0, 0, 0, 0, 0, 0])),
            Some((T_BOOL, &[2])),
        ];
        assert!(matches!(b.extend(bad), Err(BuildError::Invalid(_))));
        let doc: &[u8] = b"\x0c\0\0\0\x10a\0\x01\0\0\0\0";
        assert_eq!(b.append(T_OBJECT, doc), Err(BuildError::Declined));
        assert_eq!(b.len(), 2);
        assert_eq!(b.finalize().unwrap(), before);
    }

    #[test]
    fn an_empty_builder_is_an_empty_column() {
        assert_eq!(ColumnBuilder::new().finalize().unwrap(), vec![0]);
        let mut b = ColumnBuilder::new();
        b.skip(3).unwrap();
        let column = b.finalize().unwrap();
        let mut again = ColumnBuilder::from_column(&column).unwrap();
        assert_eq!(again.len(), 3);
        assert_eq!(again.finalize().unwrap(), column);
    }

    #[test]
    fn uniform_builder_rejects_other_types_and_partial_values() {
        assert!(UniformBuilder::new(T_STRING).is_none());
        let mut u = UniformBuilder::new(T_INT64).unwrap();
        assert!(u.extend(&[0; 7]).is_err());
        u.extend(&[0; 16]).unwrap();
        assert_eq!(u.count(), 2);
        assert_eq!(
            encode_uniform(T_INT64, &[0; 16]),
            Some(u.finalize().unwrap())
        );
    }
}
