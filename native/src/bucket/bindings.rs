//! The Python API of the bucket columns (`storage._native.BucketColumns`), kept thin.
//!
//! Python facade: `storage/timeseries/native_columns.py` (its docstring is the
//! contract). Each entry runs inside `boundary::guard`; an append works on the call's
//! immutable `bytes` (or a copy of another buffer) with the GIL released when the batch
//! is large enough to pay for that.

use std::borrow::Cow;

use bson::raw::RawDocument;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::columns::{AppendError, BucketColumns};
use super::document::{build, Parts};
use crate::boundary::{guard, Declined};
use crate::control::bindings::Control;

/// Document bytes from which an append releases the GIL (below, the release and the
/// re-acquisition cost more than the work, and re-acquiring can wait for other threads).
const DETACH_BYTES: usize = 4096;

fn declined(e: AppendError) -> PyErr {
    let AppendError::Declined(why) = e;
    Declined::new_err(why)
}

/// The bytes of a bytes-like object: borrowed from `bytes` (immutable), else a copy.
fn bytes_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    Ok(Cow::Owned(PyBuffer::<u8>::get(obj)?.to_vec(obj.py())?))
}

/// Little-endian bytes of a buffer of fixed-size integers: `bytes` (or another byte
/// buffer) as they are, or an `array` / memoryview of the element type `T`.
fn ints_of<'a, T: pyo3::buffer::Element + Copy, const N: usize>(
    obj: &'a Bound<'_, PyAny>,
    to_le: impl Fn(T) -> [u8; N],
) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if obj.len().is_ok_and(|n| n == 0) {
        return Ok(Cow::Borrowed(&[])); // an empty array's buffer may not be aligned
    }
    if let Ok(buf) = PyBuffer::<T>::get(obj) {
        let v = buf.to_vec(obj.py())?;
        let mut out = Vec::with_capacity(v.len() * std::mem::size_of::<T>());
        for x in v {
            out.extend_from_slice(&to_le(x));
        }
        return Ok(Cow::Owned(out));
    }
    bytes_of(obj)
}

/// The documents `rows` picks: each starts at its int64 offset and is as long as its
/// int32 size says (checked to lie inside `buffer`; a size below 5 or past the end is
/// a malformed document: Declined).
fn documents<'b>(buffer: &'b [u8], offsets: &[u8], rows: &[u8]) -> PyResult<Vec<&'b [u8]>> {
    if offsets.len() % 8 != 0 || rows.len() % 4 != 0 {
        return Err(PyValueError::new_err(
            "offsets must hold 8 bytes a document and rows 4 bytes a row",
        ));
    }
    let count = offsets.len() / 8;
    let mut docs = Vec::with_capacity(rows.len() / 4);
    for r in rows.chunks_exact(4) {
        let i = i32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let Some(i) = usize::try_from(i).ok().filter(|&i| i < count) else {
            return Err(PyValueError::new_err(format!(
                "row {i} is not a document index"
            )));
        };
        let o = &offsets[i * 8..i * 8 + 8];
        let start = i64::from_le_bytes([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]]);
        let Some(start) = usize::try_from(start)
            .ok()
            .filter(|&s| s.saturating_add(4) <= buffer.len())
        else {
            return Err(PyValueError::new_err(format!(
                "offset {start} of document {i} is outside the buffer"
            )));
        };
        let h = &buffer[start..start + 4];
        let size = i32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let doc = usize::try_from(size)
            .ok()
            .filter(|&n| n >= 5)
            .and_then(|n| buffer.get(start..start.checked_add(n)?));
        match doc {
            Some(d) => docs.push(d),
            None => return Err(Declined::new_err("a malformed document")),
        }
    }
    Ok(docs)
}

/// BucketColumns(time_field=None)
///
/// The BSONColumns of one open bucket (`storage.timeseries.columns.Columns`), fed with
/// raw measurement documents. A call that raises leaves the columns as they were.
#[pyclass(name = "BucketColumns", module = "storage._native")]
#[derive(Clone, Default)]
struct PyBucketColumns {
    inner: BucketColumns,
}

type PyChange<'py> = (String, Bound<'py, PyBytes>, bool, usize);

#[pymethods]
impl PyBucketColumns {
    #[new]
    #[pyo3(signature = (time_field = None))]
    fn py_new(time_field: Option<&str>) -> Self {
        PyBucketColumns {
            inner: BucketColumns::new(time_field),
        }
    }

    /// from_data(data, count) -> BucketColumns
    ///
    /// The columns of a stored bucket of `count` rows, `data` a sequence of (name,
    /// column bytes) in column order. Raises Declined when a column cannot be continued
    /// natively (interleaved sections, documents, malformed columns).
    #[staticmethod]
    fn from_data(py: Python<'_>, data: &Bound<'_, PyAny>, count: usize) -> PyResult<Self> {
        guard("BucketColumns.from_data", || {
            let mut items: Vec<(String, Vec<u8>)> = Vec::new();
            for item in data.try_iter()? {
                let (name, column): (String, Bound<'_, PyAny>) = item?.extract()?;
                items.push((name, bytes_of(&column)?.into_owned()));
            }
            let size: usize = items.iter().map(|(_, c)| c.len()).sum();
            let reopen = || {
                BucketColumns::from_data(
                    items.iter().map(|(n, c)| (n.as_str(), c.as_slice())),
                    count,
                )
            };
            let inner = if size >= DETACH_BYTES {
                py.detach(reopen)
            } else {
                reopen()
            }
            .map_err(declined)?;
            Ok(PyBucketColumns { inner })
        })
    }

    /// append(buffer, offsets, rows, skip_field=None) -> (changes, delta)
    ///
    /// Append the documents of `buffer` that `rows` names, in that order: `offsets`
    /// holds each document's start in `buffer` (little-endian int64 bytes or an
    /// `array('q')`; a document is as long as its int32 size says), `rows` the document
    /// indexes (little-endian int32 bytes or an `array('i')`; None: every document of
    /// `offsets` in order). `offsets` other than `bytes` is copied whole on each call:
    /// for a few rows of a large batch, pass the starts of those documents only (the
    /// facade does) and `rows=None`. `skip_field` (the meta field) is left out.
    /// Returns, per column in column order, (name, column bytes, is_new, offset of the
    /// first byte that differs from the previous column; 0 when new), and the change in
    /// total column size. Raises Declined (columns unchanged) for an object or array
    /// with fields, code with scope, a malformed document, a field twice in a document.
    #[pyo3(signature = (buffer, offsets, rows, skip_field = None))]
    fn append<'py>(
        &mut self,
        py: Python<'py>,
        buffer: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
        rows: Option<&Bound<'py, PyAny>>,
        skip_field: Option<&str>,
    ) -> PyResult<(Bound<'py, PyList>, i64)> {
        guard("BucketColumns.append", || {
            let buffer = bytes_of(buffer)?;
            let offsets = ints_of(offsets, i64::to_le_bytes)?;
            let all: Vec<u8>;
            let rows = match rows {
                Some(rows) => ints_of(rows, i32::to_le_bytes)?,
                None => {
                    let n = i32::try_from(offsets.len() / 8)
                        .map_err(|_| PyValueError::new_err("too many documents"))?;
                    all = (0..n).flat_map(i32::to_le_bytes).collect();
                    Cow::Borrowed(&all[..])
                }
            };
            let docs = documents(&buffer, &offsets, &rows)?;
            let size: usize = docs.iter().map(|d| d.len()).sum();
            let inner = &mut self.inner;
            let mut work = move || inner.append(docs.iter().copied(), skip_field);
            let done = if size >= DETACH_BYTES {
                py.detach(work)
            } else {
                work()
            }
            .map_err(declined)?;
            let changes = PyList::empty(py);
            for c in &done.changes {
                let (name, column) = self.inner.field(c.field);
                let change: PyChange<'py> = (
                    name.to_owned(),
                    PyBytes::new(py, column.unwrap_or_default()),
                    c.is_new,
                    c.offset,
                );
                changes.append(change)?;
            }
            Ok((changes, done.delta))
        })
    }

    /// names() -> list[str]: the fields in column order (time field first).
    fn names(&self) -> Vec<&str> {
        self.inner.names().collect()
    }

    /// column_bytes() -> list[tuple[str, bytes]]: each committed column, in order.
    fn column_bytes<'py>(&self, py: Python<'py>) -> Vec<(&str, Bound<'py, PyBytes>)> {
        self.inner
            .column_bytes()
            .map(|(n, c)| (n, PyBytes::new(py, c)))
            .collect()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.inner.contains(name)
    }

    /// copy() -> BucketColumns: independent columns in the same state.
    fn copy(&self) -> Self {
        self.clone()
    }

    /// Bytes held: this object (its type's basic size) and the heap of every builder
    /// and committed column.
    fn __sizeof__(slf: &Bound<'_, Self>) -> PyResult<usize> {
        let basic: usize = slf.get_type().getattr("__basicsize__")?.extract()?;
        Ok(basic + slf.borrow().inner.heap_size())
    }

    /// Fields (columns and the time field before its first append).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Rows appended (or reopened).
    #[getter]
    fn count(&self) -> usize {
        self.inner.count()
    }

    /// Total bytes of the committed columns.
    #[getter]
    fn compressed_size(&self) -> usize {
        self.inner.compressed_size()
    }
}

/// bucket_document(bucket_id, version, count, meta_key, control, columns=None) -> bytes
///
/// The compressed bucket document of a bucket whose control and columns are native
/// (`build_bucket_document`'s bytes): `bucket_id` the 12 ObjectId bytes, `meta_key` the
/// series key (None without a meta). Without `columns`, the document without `data`.
#[pyfunction]
#[pyo3(signature = (bucket_id, version, count, meta_key, control, columns=None))]
fn bucket_document<'py>(
    py: Python<'py>,
    bucket_id: &[u8],
    version: i32,
    count: i32,
    meta_key: Option<&[u8]>,
    control: PyRef<'_, Control>,
    columns: Option<PyRef<'_, PyBucketColumns>>,
) -> PyResult<Bound<'py, PyBytes>> {
    guard("bucket_document", || {
        let id: [u8; 12] = bucket_id
            .try_into()
            .map_err(|_| PyValueError::new_err("bucket_id: 12 bytes"))?;
        let (min, max) = control.min_max()?;
        let parts = Parts {
            id,
            version,
            count,
            meta_key,
            min: &min,
            max: &max,
        };
        let doc = build(&parts, columns.as_ref().map(|c| c.inner.column_bytes()))
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(PyBytes::new(py, doc.as_bytes()))
    })
}

/// What `fold_bucket` gives Python: the changed columns as (name, is_new, offset of the
/// first changed byte), the change in column size, and the bucket document and its
/// data-less view (None when the control declined the batch).
type Folded<'py> = (
    Vec<(String, bool, usize)>,
    i64,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
);

/// fold_bucket(control, columns, buffer, starts, skip_field, bucket_id, version, count,
/// meta_key) -> (changes, delta, document, index_document)
///
/// One bucket's whole prepareCommit in one call: the documents of `buffer` starting at
/// `starts` (int64s, in commit order) appended to `columns` (as `append`), folded into
/// `control`'s min/max (as `Control.update`), and the bucket document of `count` rows
/// built with and without `data` (as `bucket_document`). The columns are appended
/// first: when they decline, Declined is raised and neither changed. When the control
/// declines after that, the columns stay appended and both documents are None (the
/// caller folds min/max with the reference). The GIL is released for the work.
#[pyfunction]
#[pyo3(signature = (control, columns, buffer, starts, skip_field, bucket_id, version, count, meta_key))]
#[allow(clippy::too_many_arguments)]
fn fold_bucket<'py>(
    py: Python<'py>,
    mut control: PyRefMut<'_, Control>,
    mut columns: PyRefMut<'_, PyBucketColumns>,
    buffer: &Bound<'py, PyAny>,
    starts: &Bound<'py, PyAny>,
    skip_field: Option<&str>,
    bucket_id: &[u8],
    version: i32,
    count: i32,
    meta_key: Option<&[u8]>,
) -> PyResult<Folded<'py>> {
    guard("fold_bucket", || {
        let id: [u8; 12] = bucket_id
            .try_into()
            .map_err(|_| PyValueError::new_err("bucket_id: 12 bytes"))?;
        let buffer = bytes_of(buffer)?;
        let starts = ints_of(starts, i64::to_le_bytes)?;
        let n = i32::try_from(starts.len() / 8)
            .map_err(|_| PyValueError::new_err("too many documents"))?;
        let all: Vec<u8> = (0..n).flat_map(i32::to_le_bytes).collect();
        let docs = documents(&buffer, &starts, &all)?;
        let size: usize = docs.iter().map(|d| d.len()).sum();
        let inner = &mut columns.inner;
        let ctl = &mut *control;
        let mut work = move || -> PyResult<_> {
            let appended = inner
                .append(docs.iter().copied(), skip_field)
                .map_err(declined)?;
            let raw: Result<Vec<&RawDocument>, _> =
                docs.iter().map(|d| RawDocument::from_bytes(d)).collect();
            let folded = raw.is_ok_and(|raw| ctl.fold(&raw, skip_field).is_ok());
            if !folded {
                return Ok((appended, None));
            }
            let (min, max) = ctl.min_max()?;
            let parts = Parts {
                id,
                version,
                count,
                meta_key,
                min: &min,
                max: &max,
            };
            let bad = |e: super::document::BuildError| PyValueError::new_err(e.0);
            let doc = build(&parts, Some(inner.column_bytes())).map_err(bad)?;
            let index = build(&parts, None::<std::iter::Empty<(&str, &[u8])>>).map_err(bad)?;
            Ok((appended, Some((doc, index))))
        };
        let (appended, built) = if size >= DETACH_BYTES {
            py.detach(work)
        } else {
            work()
        }?;
        let changes = appended
            .changes
            .iter()
            .map(|c| {
                let (name, _) = columns.inner.field(c.field);
                (name.to_owned(), c.is_new, c.offset)
            })
            .collect();
        let (doc, index) = match built {
            Some((d, i)) => (
                Some(PyBytes::new(py, d.as_bytes())),
                Some(PyBytes::new(py, i.as_bytes())),
            ),
            None => (None, None),
        };
        Ok((changes, appended.delta, doc, index))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bucket_document, m)?)?;
    m.add_function(wrap_pyfunction!(fold_bucket, m)?)?;
    m.add_class::<PyBucketColumns>()?;
    Ok(())
}
