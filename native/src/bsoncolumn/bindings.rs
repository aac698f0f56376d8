//! The Python API of the BSONColumn code (`storage._native`), kept thin.
//!
//! Python facade: `storage/bsoncolumn/native.py` (its docstring is the contract):
//! `encode_uniform`, `UniformBuilder`, `decode_uniform`, `pack_values`, `ColumnBuilder`,
//! `decode_column`, `decode_column_packed`, `decompress`, `decompress_rows`. Each entry runs
//! inside `boundary::guard`; the work on bytes runs with the GIL released (`py.detach`)
//! on bytes the call owns or an immutable `bytes` object it holds.

use std::borrow::Cow;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use super::builder::{self, uniform_size, BuildError, DEFAULT_MAX_VALUES};
use super::decoder::{self, DecodeError};
use super::document;
use super::values::*;
use crate::boundary::{guard, native_error, Declined};

/// MongoDB 8.0's code for a malformed column or appended value (BSONColumnError).
const INVALID_BSON_COLUMN: i32 = 6067602;

fn build_error(e: BuildError) -> PyErr {
    match e {
        BuildError::Declined => {
            Declined::new_err("the native builder cannot reproduce the Python builder here")
        }
        BuildError::Invalid(message) => native_error(INVALID_BSON_COLUMN, message),
    }
}

/// The bytes of a bytes-like object: borrowed from `bytes` (immutable), else a copy (a
/// bytearray could change while the GIL is released).
fn bytes_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    Ok(Cow::Owned(PyBuffer::<u8>::get(obj)?.to_vec(obj.py())?))
}

/// Releases the GIL for `work` only when there is enough of it to pay for that.
fn maybe_detach<T: Send>(py: Python<'_>, n: usize, work: impl FnOnce() -> T + Send) -> T {
    if n >= 4096 {
        py.detach(work)
    } else {
        work()
    }
}

/// encode_uniform(type_byte, values, /) -> bytes | None
///
/// The finalized BSONColumn of n values of one type (int32, int64, date, double,
/// ObjectId) given as their concatenated little-endian bytes; None for another type or
/// when the encoder cannot reproduce the Python builder.
#[pyfunction]
fn encode_uniform<'py>(
    py: Python<'py>,
    type_byte: i64,
    values: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    guard("encode_uniform", || {
        let data = bytes_of(values)?;
        let Some(size) = u8::try_from(type_byte).ok().and_then(uniform_size) else {
            return Ok(None);
        };
        if data.is_empty() || data.len() % size != 0 {
            return Err(PyValueError::new_err(
                "values must be a non-empty concatenation of fixed-size values",
            ));
        }
        let t = type_byte as u8;
        let data: &[u8] = &data;
        let out = maybe_detach(py, data.len(), || builder::encode_uniform(t, data));
        Ok(out.map(|b| PyBytes::new(py, &b)))
    })
}

/// UniformBuilder(type_byte, values=b'')
///
/// Incremental BSONColumn builder for values of one fixed-size type (int32, int64, date,
/// double, ObjectId) without skipped rows.
#[pyclass(name = "UniformBuilder", module = "storage._native")]
#[derive(Clone)]
struct PyUniformBuilder {
    inner: builder::UniformBuilder,
}

impl PyUniformBuilder {
    fn append(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let size = self.inner.value_size();
        if data.len() % size != 0 {
            return Err(PyValueError::new_err(format!(
                "values must be a concatenation of {size}-byte values"
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let inner = &mut self.inner;
        maybe_detach(py, data.len(), || inner.extend(data))
            .map_err(|_| Declined::new_err("the native encoder cannot reproduce these values"))
    }
}

#[pymethods]
impl PyUniformBuilder {
    #[new]
    #[pyo3(signature = (type_byte, values = None))]
    fn py_new(py: Python<'_>, type_byte: i64, values: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        guard("UniformBuilder", || {
            let Some(inner) = u8::try_from(type_byte)
                .ok()
                .and_then(builder::UniformBuilder::new)
            else {
                return Err(PyValueError::new_err(format!(
                    "UniformBuilder does not take BSON type {type_byte}"
                )));
            };
            let mut b = PyUniformBuilder { inner };
            if let Some(values) = values {
                b.append(py, &bytes_of(values)?)?;
            }
            Ok(b)
        })
    }

    /// extend(values) -> None
    ///
    /// Append n values given as their concatenated little-endian bytes. Raises Declined
    /// (builder unchanged) when the encoder cannot reproduce the Python builder.
    fn extend(&mut self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<()> {
        guard("UniformBuilder.extend", || {
            self.append(py, &bytes_of(values)?)
        })
    }

    /// finalize() -> bytes
    ///
    /// The column of the values appended so far (ending in 0x00); the builder stays
    /// usable. Raises Declined (builder unchanged) if the encoder gives up.
    fn finalize<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard("UniformBuilder.finalize", || {
            let inner = &mut self.inner;
            let out = maybe_detach(py, inner.values().len(), || inner.finalize());
            out.map(|b| PyBytes::new(py, &b))
                .map_err(|_| Declined::new_err("the native encoder cannot finish this column"))
        })
    }

    /// values() -> bytes
    ///
    /// Every value appended so far, concatenated.
    fn values<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.values())
    }

    /// copy() -> UniformBuilder
    ///
    /// An independent builder in the same state.
    fn copy(&self) -> Self {
        self.clone()
    }

    fn __len__(&self) -> usize {
        self.inner.count()
    }

    fn __sizeof__(&self) -> usize {
        std::mem::size_of::<Self>() + self.inner.heap_size()
    }

    /// Number of values appended.
    #[getter]
    fn count(&self) -> usize {
        self.inner.count()
    }

    /// BSON type of the values.
    #[getter]
    fn type_byte(&self) -> u8 {
        self.inner.type_byte()
    }
}

/// decode_uniform(column, max_values=2**22, /) -> (type_byte, values, count) | None
///
/// Rows of a column holding only int64, int32, date or double values of one type without
/// skips: the type, their little-endian 8-byte values in a bytearray (int32 widened to
/// int64) and their number. None for any other column, or a malformed one.
#[pyfunction]
#[pyo3(signature = (column, max_values = 1 << 22, /))]
fn decode_uniform<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    max_values: i64,
) -> PyResult<Option<(u8, Bound<'py, PyByteArray>, usize)>> {
    guard("decode_uniform", || {
        let data = bytes_of(column)?;
        let max = usize::try_from(max_values).unwrap_or(0);
        let data: &[u8] = &data;
        let got = maybe_detach(py, data.len(), || decoder::decode_uniform(data, max));
        Ok(got.map(|u| (u.t, PyByteArray::new(py, &u.le_bytes()), u.count)))
    })
}

/// The int64 behind a decoded value of type `t` (a DatetimeMS' `_value` for dates), None
/// when it is not an int of the type's range.
fn value_int64(v: &Bound<'_, PyAny>, t: u8) -> Option<i64> {
    let num = if t == T_DATE {
        v.getattr("_value").ok()?
    } else {
        v.clone()
    };
    if !num.is_instance_of::<PyInt>() {
        return None;
    }
    let x: i64 = num.extract().ok()?;
    if t == T_INT32 && i32::try_from(x).is_err() {
        return None;
    }
    Some(x)
}

/// pack_values(docs, name, type_byte, pytype, /) -> (values, lo, hi) | None
///
/// The values of field `name` of every dict in `docs`, all exactly of Python type
/// `pytype` (Int64, int as int32, float, DatetimeMS, ObjectId for type_byte 0x12, 0x10,
/// 0x01, 0x09, 0x07), packed as UniformBuilder.extend takes them, with the positions of
/// the first smallest and first largest (-1, -1 when a double is NaN). None when a dict
/// lacks the field or a value is not of that type or range.
#[pyfunction]
fn pack_values<'py>(
    py: Python<'py>,
    docs: &Bound<'py, PyList>,
    name: &Bound<'py, PyString>,
    type_byte: i64,
    pytype: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyBytes>, isize, isize)>> {
    guard("pack_values", || {
        let Some(t) = u8::try_from(type_byte).ok() else {
            return Ok(None);
        };
        let Some(size) = uniform_size(t) else {
            return Ok(None);
        };
        let n = docs.len();
        if n == 0 {
            return Ok(None);
        }
        let mut out = vec![0u8; n * size];
        let (mut lo, mut hi) = (0isize, 0isize);
        let (mut ilo, mut ihi) = (0i64, 0i64);
        let (mut dlo, mut dhi) = (0f64, 0f64);
        let (mut olo, mut ohi) = ([0u8; 12], [0u8; 12]);
        let (mut nan, mut seen) = (false, false);
        for (i, doc) in docs.iter().enumerate() {
            let Ok(doc) = doc.cast_exact::<PyDict>() else {
                return Ok(None);
            };
            let Some(v) = doc.get_item(name)? else {
                return Ok(None);
            };
            if !v.get_type().is(pytype) {
                return Ok(None);
            }
            let slot = &mut out[i * size..(i + 1) * size];
            let idx = i as isize;
            match t {
                T_DOUBLE => {
                    let Ok(f) = v.cast_exact::<PyFloat>() else {
                        return Ok(None);
                    };
                    let d = f.value();
                    slot.copy_from_slice(&d.to_bits().to_le_bytes());
                    if d.is_nan() {
                        nan = true;
                    } else {
                        if !seen || d < dlo {
                            dlo = d;
                            lo = idx;
                        }
                        if !seen || d > dhi {
                            dhi = d;
                            hi = idx;
                        }
                        seen = true;
                    }
                }
                T_OID => {
                    let Ok(raw) = v.getattr("_ObjectId__id") else {
                        return Ok(None);
                    };
                    let Ok(raw) = raw.cast::<PyBytes>() else {
                        return Ok(None);
                    };
                    let raw = raw.as_bytes();
                    if raw.len() != 12 {
                        return Ok(None);
                    }
                    slot.copy_from_slice(raw);
                    let mut o = [0u8; 12];
                    o.copy_from_slice(raw);
                    if i == 0 || o < olo {
                        olo = o;
                        lo = idx;
                    }
                    if i == 0 || o > ohi {
                        ohi = o;
                        hi = idx;
                    }
                }
                _ => {
                    let Some(x) = value_int64(&v, t) else {
                        return Ok(None);
                    };
                    if t == T_INT32 {
                        slot.copy_from_slice(&(x as i32).to_le_bytes());
                    } else {
                        slot.copy_from_slice(&x.to_le_bytes());
                    }
                    if i == 0 || x < ilo {
                        ilo = x;
                        lo = idx;
                    }
                    if i == 0 || x > ihi {
                        ihi = x;
                        hi = idx;
                    }
                }
            }
        }
        if nan {
            (lo, hi) = (-1, -1); // NaN orders below every number: the caller decides
        }
        Ok(Some((PyBytes::new(py, &out), lo, hi)))
    })
}

/// ColumnBuilder()
///
/// BSONColumn builder of scalar values with skipped rows and type changes, giving the
/// bytes of the Python `BSONColumnBuilder` (regular mode). Objects and arrays with
/// fields and code with scope raise Declined; malformed values raise NativeError
/// (6067602). A call that raises leaves the builder as it was.
#[pyclass(name = "ColumnBuilder", module = "storage._native")]
#[derive(Clone, Default)]
struct PyColumnBuilder {
    inner: builder::ColumnBuilder,
}

/// Rows of `extend(elements)`: owned copies of the value bytes (read with the GIL).
fn rows_of_list(elements: &Bound<'_, PyList>) -> PyResult<(Vec<u8>, Vec<u8>, Vec<usize>)> {
    let n = elements.len();
    let (mut types, mut data, mut ends) =
        (Vec::with_capacity(n), Vec::new(), Vec::with_capacity(n));
    for e in elements.iter() {
        if e.is_none() {
            types.push(T_EOO);
        } else {
            let (t, v): (u8, Bound<'_, PyAny>) = e.extract()?;
            types.push(t);
            data.extend_from_slice(&bytes_of(&v)?);
        }
        ends.push(data.len());
    }
    Ok((types, data, ends))
}

fn packed_rows<'a>(
    types: &'a [u8],
    data: &'a [u8],
    ends: &'a [usize],
) -> impl Iterator<Item = Option<(u8, &'a [u8])>> + 'a {
    (0..types.len()).map(move |i| {
        let start = if i == 0 { 0 } else { ends[i - 1] };
        match types[i] {
            T_EOO => None,
            t => Some((t, &data[start..ends[i]])),
        }
    })
}

impl PyColumnBuilder {
    fn extend_rows(
        &mut self,
        py: Python<'_>,
        types: &[u8],
        data: &[u8],
        ends: &[usize],
    ) -> PyResult<()> {
        let inner = &mut self.inner;
        maybe_detach(py, types.len() * 8 + data.len(), || {
            inner.extend(packed_rows(types, data, ends))
        })
        .map_err(build_error)
    }
}

#[pymethods]
impl PyColumnBuilder {
    #[new]
    fn py_new() -> Self {
        Self::default()
    }

    /// extend(elements) -> None
    ///
    /// Append rows: each (type byte, value bytes) or None for a skipped row (type 0 is
    /// a skip too).
    fn extend(&mut self, py: Python<'_>, elements: &Bound<'_, PyList>) -> PyResult<()> {
        guard("ColumnBuilder.extend", || {
            let (types, data, ends) = rows_of_list(elements)?;
            self.extend_rows(py, &types, &data, &ends)
        })
    }

    /// extend_packed(types, values, ends) -> None
    ///
    /// Append rows given packed: `types` one byte a row (0 = skipped), `values` the
    /// concatenated value bytes, `ends` the end offset of each row's value in `values`
    /// as little-endian uint32 (4 bytes a row).
    fn extend_packed(
        &mut self,
        py: Python<'_>,
        types: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        ends: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        guard("ColumnBuilder.extend_packed", || {
            let types = bytes_of(types)?;
            let data = bytes_of(values)?;
            let raw_ends = bytes_of(ends)?;
            if raw_ends.len() != 4 * types.len() {
                return Err(PyValueError::new_err("ends must hold 4 bytes per row"));
            }
            let ends: Vec<usize> = raw_ends
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
                .collect();
            let mut prev = 0;
            for &e in &ends {
                if e < prev || e > data.len() {
                    return Err(PyValueError::new_err(
                        "ends must be increasing offsets into values",
                    ));
                }
                prev = e;
            }
            self.extend_rows(py, &types, &data, &ends)
        })
    }

    /// skip(n=1) -> None
    ///
    /// Append `n` skipped rows.
    #[pyo3(signature = (n = 1))]
    fn skip(&mut self, py: Python<'_>, n: usize) -> PyResult<()> {
        guard("ColumnBuilder.skip", || {
            let inner = &mut self.inner;
            maybe_detach(py, n, || inner.skip(n)).map_err(build_error)
        })
    }

    /// finalize() -> bytes
    ///
    /// The column of the rows so far (ending in 0x00); the builder stays usable.
    fn finalize<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard("ColumnBuilder.finalize", || {
            let inner = &mut self.inner;
            let out = maybe_detach(py, inner.len(), || inner.finalize()).map_err(build_error)?;
            Ok(PyBytes::new(py, &out))
        })
    }

    /// from_column(column) -> ColumnBuilder
    ///
    /// A builder in the state of the one that wrote `column` (BSONColumnBuilder.
    /// from_column). Raises Declined when the native decoder does not take the column
    /// (interleaved sections, documents, malformed input).
    #[staticmethod]
    fn from_column(py: Python<'_>, column: &Bound<'_, PyAny>) -> PyResult<Self> {
        guard("ColumnBuilder.from_column", || {
            let data = bytes_of(column)?;
            let data: &[u8] = &data;
            let inner = maybe_detach(py, data.len(), || builder::ColumnBuilder::from_column(data))
                .map_err(build_error)?;
            Ok(PyColumnBuilder { inner })
        })
    }

    /// copy() -> ColumnBuilder
    fn copy(&self) -> Self {
        self.clone()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __sizeof__(&self) -> usize {
        std::mem::size_of::<Self>() + self.inner.heap_size()
    }
}

/// decode_column(column, max_values=2**22, /) -> list[tuple[int, bytes] | None] | None
///
/// Every row of a column of scalar values: (type byte, value bytes), None for a skipped
/// row; what `decoder.decode_elements` gives. None when the native decoder does not take
/// the column (interleaved sections, documents) or it is malformed (the Python decoder
/// then raises the proper error).
#[pyfunction]
#[pyo3(signature = (column, max_values = DEFAULT_MAX_VALUES as i64, /))]
fn decode_column<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    max_values: i64,
) -> PyResult<Option<Bound<'py, PyList>>> {
    guard("decode_column", || {
        let data = bytes_of(column)?;
        let max = usize::try_from(max_values).unwrap_or(0);
        let data: &[u8] = &data;
        let got = maybe_detach(py, data.len(), || decoder::decode_column(data, max));
        let rows = match got {
            Ok(d) => d.rows,
            Err(DecodeError::Malformed | DecodeError::Unsupported) => return Ok(None),
        };
        let list = PyList::empty(py);
        for row in rows.iter() {
            match row {
                None => list.append(py.None())?,
                Some((t, v)) => list.append((t, PyBytes::new(py, v)))?,
            }
        }
        Ok(Some(list))
    })
}

/// decode_column_packed(column, max_values=2**22, /) -> (types, values, ends) | None
///
/// `decode_column` in the packed form `ColumnBuilder.extend_packed` takes: one type byte
/// a row (0 = skipped), the concatenated value bytes, and each row's end offset in
/// them as little-endian uint32. None as for `decode_column` (and for values beyond
/// 4 GiB).
#[pyfunction]
#[pyo3(signature = (column, max_values = DEFAULT_MAX_VALUES as i64, /))]
#[allow(clippy::type_complexity)]
fn decode_column_packed<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    max_values: i64,
) -> PyResult<
    Option<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )>,
> {
    guard("decode_column_packed", || {
        let data = bytes_of(column)?;
        let max = usize::try_from(max_values).unwrap_or(0);
        let data: &[u8] = &data;
        let got = maybe_detach(py, data.len(), || {
            let rows = decoder::decode_column(data, max).ok()?.rows;
            let mut ends = Vec::with_capacity(4 * rows.ends.len());
            for &e in &rows.ends {
                ends.extend_from_slice(&u32::try_from(e).ok()?.to_le_bytes());
            }
            Some((rows.types, rows.data, ends))
        });
        Ok(got.map(|(t, v, e)| {
            (
                PyBytes::new(py, &t),
                PyBytes::new(py, &v),
                PyBytes::new(py, &e),
            )
        }))
    })
}

/// decompress(column, max_values=2**22, /) -> bytes | None
///
/// The document `{"<row>": value}` of a column of scalar values (skipped rows omitted):
/// the bytes of the reference `rows_to_document(decode_elements(column))`. None where
/// `decode_column` is None, and over the size bound (the reference then raises).
#[pyfunction]
#[pyo3(signature = (column, max_values = DEFAULT_MAX_VALUES as i64, /))]
fn decompress<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    max_values: i64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    guard("decompress", || {
        let data = bytes_of(column)?;
        let max = usize::try_from(max_values).unwrap_or(0);
        let data: &[u8] = &data;
        let got = maybe_detach(py, data.len(), || {
            document::rows_document(&decoder::decode_column(data, max).ok()?.rows)
        });
        Ok(got.map(|d| PyBytes::new(py, &d)))
    })
}

/// decompress_rows(column, positions, max_values=2**22, /) -> bytes | None
///
/// The document of the rows at `positions` (ints >= 0) of a column of scalar values,
/// each under its index in `positions` (`{"0": row[positions[0]], ...}`), absent where
/// that row is skipped or past the column's end. None as for `decompress`.
#[pyfunction]
#[pyo3(signature = (column, positions, max_values = DEFAULT_MAX_VALUES as i64, /))]
fn decompress_rows<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    positions: Vec<usize>,
    max_values: i64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    guard("decompress_rows", || {
        let data = bytes_of(column)?;
        let max = usize::try_from(max_values).unwrap_or(0);
        let data: &[u8] = &data;
        let got = maybe_detach(py, data.len(), || {
            document::picked_document(&decoder::decode_column(data, max).ok()?.rows, &positions)
        });
        Ok(got.map(|d| PyBytes::new(py, &d)))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyColumnBuilder>()?;
    m.add_function(wrap_pyfunction!(decode_column, m)?)?;
    m.add_function(wrap_pyfunction!(decode_column_packed, m)?)?;
    m.add_function(wrap_pyfunction!(decompress, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_rows, m)?)?;
    m.add_function(wrap_pyfunction!(encode_uniform, m)?)?;
    m.add_function(wrap_pyfunction!(decode_uniform, m)?)?;
    m.add_function(wrap_pyfunction!(pack_values, m)?)?;
    m.add_class::<PyUniformBuilder>()?;
    Ok(())
}
