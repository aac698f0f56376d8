//! The Python face of the scan: `scan_measurements(...) -> ScannedBatch`, coarse
//! accessors returning bytes (little-endian arrays for numpy) or a few small lists.
//! The GIL is released while the bytes are scanned; a panic becomes `NativeError`
//! (`boundary::guard`); a batch the reference reads differently raises `Declined`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::boundary::{guard, native_error, Declined};

use super::{scan, ScanFailure, ScanOptions, Scanned, DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE};

/// A scanned batch: what `MeasurementPreparer.prepare_all` and the catalog's grouping
/// compute, without a Python object per measurement.
#[pyclass(frozen, module = "storage._native")]
pub struct ScannedBatch {
    buf: Py<PyBytes>,
    meta_field: Option<String>,
    data: Scanned,
}

fn le_bytes<T: Copy, const N: usize>(
    py: Python<'_>,
    values: &[T],
    to: impl Fn(T) -> [u8; N],
) -> Py<PyBytes> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    PyBytes::new(py, &out).unbind()
}

impl ScannedBatch {
    /// The scanned bytes.
    pub(crate) fn buffer(&self) -> &Py<PyBytes> {
        &self.buf
    }

    /// The meta field the scan left out of the shapes.
    pub(crate) fn meta_field(&self) -> Option<&str> {
        self.meta_field.as_deref()
    }

    /// What the scan found.
    pub(crate) fn table(&self) -> &Scanned {
        &self.data
    }
}

#[pymethods]
impl ScannedBatch {
    /// Documents in the batch.
    #[getter]
    fn count(&self) -> usize {
        self.data.spans.len()
    }

    /// Documents looked at (fewer than `count` when an ordered batch stopped early).
    #[getter]
    fn scanned(&self) -> usize {
        self.data.scanned
    }

    /// Time of each measurement in ms since the epoch (int64; 0 where refused).
    fn times(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.times, i64::to_le_bytes)
    }

    /// Series index of each measurement (int32; -1 where refused or not scanned).
    fn series_of(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.series_of, i32::to_le_bytes)
    }

    /// Fields other than the meta, with the `_id` the Python path adds (int32).
    fn field_counts(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.field_counts, i32::to_le_bytes)
    }

    /// Total value bytes of those fields (int64).
    fn value_bytes(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.value_bytes, i64::to_le_bytes)
    }

    /// Longest value of those fields, at least 8 (int32).
    fn max_value_lens(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.max_value_lens, i32::to_le_bytes)
    }

    /// Whether the document has an `_id` (uint8 0/1).
    fn has_id(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.has_id, |b| [b as u8])
    }

    /// Whether a field other than the meta is an object or an array (uint8 0/1).
    fn nested(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.nested, |b| [b as u8])
    }

    /// The shape of each measurement, an index into `shapes()` (int32; -1 where refused).
    fn shape_of(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.shape_of, i32::to_le_bytes)
    }

    /// The batch's distinct shapes: per shape the (name, BSON type) of each field but the
    /// meta, in document order.
    fn shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<Bound<'py, PyList>> = self
            .data
            .shapes
            .iter()
            .map(|fields| PyList::new(py, fields.iter().map(|(n, t)| (n.as_str(), *t))))
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// (start, length) of each document in the buffer (int64 pairs).
    fn spans(&self, py: Python<'_>) -> Py<PyBytes> {
        let flat: Vec<i64> = self
            .data
            .spans
            .iter()
            .flat_map(|&(s, l)| [s as i64, l as i64])
            .collect();
        le_bytes(py, &flat, i64::to_le_bytes)
    }

    /// Number of series.
    #[getter]
    fn series_count(&self) -> usize {
        self.data.series.len()
    }

    /// Series keys in order of first appearance (b"" for the series without a meta).
    fn series_keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.data.series.iter().map(|s| PyBytes::new(py, &s.key)),
        )
    }

    /// Meta value sizes (type byte and value) of the series, 0 without a meta.
    fn series_meta_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.data.series.iter().map(|s| s.meta_value_size))
    }

    /// The normalised meta of series `j` as the BSON document {"": meta}, None without one.
    fn series_meta(&self, py: Python<'_>, j: usize) -> PyResult<Option<Py<PyBytes>>> {
        let s =
            self.data.series.get(j).ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err("series index out of range")
            })?;
        if s.key.is_empty() {
            return Ok(None);
        }
        let mut doc = Vec::with_capacity(s.key.len() + 5);
        doc.extend_from_slice(&((s.key.len() + 5) as i32).to_le_bytes());
        doc.extend_from_slice(&s.key);
        doc.push(0);
        Ok(Some(PyBytes::new(py, &doc).unbind()))
    }

    /// Accepted measurements series by series, each series' by time (int32).
    fn order(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.order, i32::to_le_bytes)
    }

    /// Series `j` is `order[starts[j]:starts[j + 1]]` (int32, series count + 1 entries).
    fn series_starts(&self, py: Python<'_>) -> Py<PyBytes> {
        le_bytes(py, &self.data.series_starts, i32::to_le_bytes)
    }

    /// Refused documents: (index, code, message), by index.
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<Bound<'py, PyTuple>> = self
            .data
            .errors
            .iter()
            .map(|e| (e.index, e.code, e.message.as_str()).into_pyobject(py))
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// The fields of document `i` but the meta, as the Python path's raw elements
    /// (name, type byte, value bytes), without the `_id` it adds to a document that has
    /// none; `NativeError(InvalidBSON)` for a document that is not valid.
    fn fields<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyList>> {
        let &(start, len) = self.data.spans.get(i).ok_or_else(|| {
            pyo3::exceptions::PyIndexError::new_err("document index out of range")
        })?;
        let buf = self.buf.bind(py).as_bytes();
        let doc = buf.get(start..start + len).unwrap_or_default();
        let fields = super::fields(doc, self.meta_field.as_deref())
            .map_err(|e| native_error(super::codes::INVALID_BSON, format!("Invalid BSON: {e}")))?;
        let items: Vec<Bound<'py, PyTuple>> = fields
            .iter()
            .map(|f| (f.name, f.type_byte, PyBytes::new(py, f.value)).into_pyobject(py))
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    /// The bytes of document `i` (for the Python path).
    fn document(&self, py: Python<'_>, i: usize) -> PyResult<Py<PyBytes>> {
        let &(start, len) = self.data.spans.get(i).ok_or_else(|| {
            pyo3::exceptions::PyIndexError::new_err("document index out of range")
        })?;
        let buf = self.buf.bind(py).as_bytes();
        let bytes = buf.get(start..start + len).unwrap_or_default();
        Ok(PyBytes::new(py, bytes).unbind())
    }
}

/// `scan_measurements(buf, time_field, meta_field=None, ordered=True, offsets=None,
/// max_depth=200, max_size=16 MiB) -> ScannedBatch`.
///
/// Raises `NativeError(code, message)` when the batch as a whole is unreadable and
/// `Declined(index, reason)` when a document needs the Python reference.
#[pyfunction]
#[pyo3(signature = (buf, time_field, meta_field=None, ordered=true, offsets=None,
                    max_depth=DEFAULT_MAX_DEPTH, max_size=DEFAULT_MAX_SIZE))]
#[allow(clippy::too_many_arguments)]
fn scan_measurements(
    py: Python<'_>,
    buf: Bound<'_, PyBytes>,
    time_field: &str,
    meta_field: Option<&str>,
    ordered: bool,
    offsets: Option<Vec<u64>>,
    max_depth: usize,
    max_size: usize,
) -> PyResult<ScannedBatch> {
    guard("scan_measurements", || {
        let bytes = buf.as_bytes();
        let opts = ScanOptions {
            time_field,
            meta_field,
            ordered,
            max_depth,
            max_size,
        };
        let result = py.detach(|| scan(bytes, offsets.as_deref(), &opts));
        match result {
            Ok(data) => Ok(ScannedBatch {
                buf: buf.clone().unbind(),
                meta_field: meta_field.map(str::to_string),
                data,
            }),
            Err(ScanFailure::Batch { code, message }) => Err(native_error(code, message)),
            Err(ScanFailure::Declined { index, reason }) => Err(Declined::new_err((index, reason))),
        }
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ScannedBatch>()?;
    m.add_function(wrap_pyfunction!(scan_measurements, m)?)?;
    Ok(())
}
