//! The Python API of the bucket columns (`storage._native.BucketColumns`), kept thin.
//!
//! Python facade: `storage/timeseries/native_columns.py` (its docstring is the
//! contract). Each entry runs inside `boundary::guard`; an append works on the call's
//! immutable `bytes` (or a copy of another buffer) with the GIL released when the batch
//! is large enough to pay for that.

use std::borrow::Cow;

use bson::raw::RawDocumentBuf;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::columns::{warm, AppendError, Appended, BucketColumns, Row, Shapes};
use super::document::{build, data_len, with_data, Parts};
use crate::boundary::{guard, Declined};
use crate::control::bindings::Control;
use crate::control::Checked;
use crate::measurements::bindings::ScannedBatch;

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
fn documents<'b>(
    buffer: &'b [u8],
    offsets: &[u8],
    rows: impl ExactSizeIterator<Item = i32>,
) -> PyResult<Vec<&'b [u8]>> {
    Ok(documents_at(buffer, offsets, rows)?
        .into_iter()
        .map(|(_, d)| d)
        .collect())
}

/// `documents`, each with where it starts in `buffer`.
fn documents_at<'b>(
    buffer: &'b [u8],
    offsets: &[u8],
    rows: impl ExactSizeIterator<Item = i32>,
) -> PyResult<Vec<(usize, &'b [u8])>> {
    if offsets.len() % 8 != 0 {
        return Err(PyValueError::new_err(
            "offsets must hold 8 bytes a document",
        ));
    }
    let count = offsets.len() / 8;
    let mut docs = Vec::with_capacity(rows.len());
    for i in rows {
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
            Some(d) => docs.push((start, d)),
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
            let docs = match rows {
                Some(rows) => {
                    let rows = ints_of(rows, i32::to_le_bytes)?;
                    if rows.len() % 4 != 0 {
                        return Err(PyValueError::new_err("rows must hold 4 bytes a row"));
                    }
                    let rows = rows
                        .chunks_exact(4)
                        .map(|r| i32::from_le_bytes([r[0], r[1], r[2], r[3]]));
                    documents(&buffer, &offsets, rows)?
                }
                None => {
                    let n = i32::try_from(offsets.len() / 8)
                        .map_err(|_| PyValueError::new_err("too many documents"))?;
                    documents(&buffer, &offsets, 0..n)?
                }
            };
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
        Ok(basic_size(slf)? + slf.borrow().inner.heap_size())
    }

    /// footprint(control=None) -> (__sizeof__(), len(), compressed_size, the control's
    /// __sizeof__() or 0): what the catalog's memory accounting reads of a bucket's
    /// columns and control after each commit, in one call.
    #[pyo3(signature = (control=None))]
    fn footprint(
        slf: &Bound<'_, Self>,
        control: Option<PyRef<'_, Control>>,
    ) -> PyResult<(usize, usize, usize, usize)> {
        let basic = basic_size(slf)?;
        let this = slf.borrow();
        Ok((
            basic + this.inner.heap_size(),
            this.inner.len(),
            this.inner.compressed_size(),
            control.map_or(0, |c| c.__sizeof__()),
        ))
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

/// The one thread that folds the first half of a batch's buckets beside the calling
/// thread, on machines of more than two cores. Its own pool: the global one also runs the
/// analytics' block folds (`blocks`), and ingest would wait behind them for a free
/// thread; a fold never uses a second thread. None on two cores or fewer, where the
/// event loop (reading and scanning the next batch) and the clients want the other core:
/// there the calling thread waited for the pool's half longer than the half took it
/// (ingest's storage thread, per batch, 3.2 ms with the pool against 3.0 without). None
/// too when the thread cannot be started. Either way the caller folds everything.
fn fold_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores > 2).then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "bucketd-fold".into())
                .build()
                .ok()
        })?
    })
    .as_ref()
}

/// Each task folded (`fold_one`), in order: with `pool`, its thread folds the first half
/// while the calling thread folds the second.
fn fold_tasks(
    tasks: Vec<Task<'_>>,
    pool: Option<&rayon::ThreadPool>,
    skip_field: Option<&str>,
    whole: bool,
) -> Vec<Outcome> {
    let fold = |task| fold_one(task, skip_field, whole);
    match pool {
        // Handing the whole batch to the pool left the calling thread idle (and a second
        // pool thread woke too late to share the work evenly).
        Some(pool) if tasks.len() > 1 => {
            let mut tasks = tasks;
            let back = tasks.split_off(tasks.len() / 2);
            let mut out = Vec::new();
            let back: Vec<Outcome> = pool.in_place_scope(|s| {
                s.spawn(|_| out = tasks.into_iter().map(fold).collect());
                back.into_iter().map(fold).collect()
            });
            out.extend(back);
            out
        }
        _ => tasks.into_iter().map(fold).collect(),
    }
}

/// The type's `__basicsize__`, read once.
fn basic_size(slf: &Bound<'_, PyBucketColumns>) -> PyResult<usize> {
    static BASIC: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(n) = BASIC.get() {
        return Ok(*n);
    }
    let n: usize = slf.get_type().getattr("__basicsize__")?.extract()?;
    Ok(*BASIC.get_or_init(|| n))
}

/// The parts of a bucket document with control.min and control.max `min_max`.
fn parts<'a>(
    id: [u8; 12],
    version: i32,
    count: i32,
    meta_key: Option<&'a [u8]>,
    min_max: &'a (RawDocumentBuf, RawDocumentBuf),
) -> Parts<'a> {
    Parts {
        id,
        version,
        count,
        meta_key,
        min: &min_max.0,
        max: &min_max.1,
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
        let min_max = control.min_max()?;
        let parts = parts(id, version, count, meta_key, &min_max);
        let doc = build(&parts, columns.as_ref().map(|c| c.inner.column_bytes()))
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(PyBytes::new(py, doc.as_bytes()))
    })
}

/// bucket_document_with_data(view, columns) -> bytes
///
/// The bucket document `bucket_document` gives with `columns`, from the one it gives
/// without them (`view`: a fold's data-less view of the same state), its control and
/// meta not rendered again.
#[pyfunction]
fn bucket_document_with_data<'py>(
    py: Python<'py>,
    view: &[u8],
    columns: PyRef<'_, PyBucketColumns>,
) -> PyResult<Bound<'py, PyBytes>> {
    guard("bucket_document_with_data", || {
        let view = bson::raw::RawDocument::from_bytes(view)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let doc = with_data(view, columns.inner.column_bytes())
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(PyBytes::new(py, doc.as_bytes()))
    })
}

/// What `fold_buckets` gives Python for one bucket: the changed columns as int64
/// triples (field index, is_new, offset of the first changed byte), the change in column
/// size, the bucket document (None when not asked for), its data-less view, and the
/// document's size (these three None, None and 0 when the control declined the
/// measurements), and the rows' uncompressed size (`Appended::uncompressed`).
type Folded<'py> = (
    Bound<'py, PyBytes>,
    i64,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    usize,
    usize,
);

/// One bucket of a `fold_buckets` call, its objects borrowed for the call.
type Job<'py> = (
    PyRefMut<'py, Control>,
    PyRefMut<'py, PyBucketColumns>,
    Vec<i32>,
    Vec<u8>,
    i32,
    i32,
    Option<Vec<u8>>,
);

/// How one bucket's fold ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// The columns declined: nothing of the bucket changed.
    Declined,
    /// The columns took the measurements; the documents when the control did too.
    Folded(Appended, Option<Built>),
    /// A document could not be built (a name with a NUL, a bad meta key).
    Failed(String),
}

/// A folded bucket's documents: whole (when asked for), without `data`, and the size of
/// the whole one.
#[derive(Debug, PartialEq)]
struct Built {
    document: Option<RawDocumentBuf>,
    index: RawDocumentBuf,
    size: usize,
}

/// One bucket's part of a `fold_buckets` call, borrowed from its job.
struct Task<'a> {
    ctl: &'a mut Control,
    cols: &'a mut BucketColumns,
    /// None: a document is malformed (the bucket declines, as its columns would)
    docs: Option<Vec<Row<'a>>>,
    id: [u8; 12],
    version: i32,
    count: i32,
    meta_key: Option<&'a [u8]>,
}

/// The work of one bucket, without the GIL: append, fold, build (the whole document
/// only when `whole`).
fn fold_one(task: Task<'_>, skip_field: Option<&str>, whole: bool) -> Outcome {
    let Task {
        ctl,
        cols,
        docs,
        id,
        version,
        count,
        meta_key,
    } = task;
    let Some(docs) = docs else {
        return Outcome::Declined;
    };
    warm(&docs);
    // the columns read each document once, and hand the control its fields
    let mut fields = Some(Checked::with_capacity(docs.len(), cols.len()));
    let Ok(appended) = cols.append_collecting(docs, skip_field, Some(&mut fields)) else {
        return Outcome::Declined;
    };
    let folded = fields.is_some_and(|f| ctl.fold_parsed(f).is_ok());
    let Some(min_max) = folded.then(|| ctl.min_max_raw()).flatten() else {
        return Outcome::Folded(appended, None);
    };
    let parts = parts(id, version, count, meta_key, &min_max);
    let built = build(&parts, None::<std::iter::Empty<(&str, &[u8])>>).and_then(|index| {
        let (document, size) = if whole {
            let document = build(&parts, Some(cols.column_bytes()))?;
            let size = document.as_bytes().len();
            (Some(document), size)
        } else {
            (None, index.as_bytes().len() + data_len(cols.column_bytes()))
        };
        Ok(Built {
            document,
            index,
            size,
        })
    });
    match built {
        Ok(built) => Outcome::Folded(appended, Some(built)),
        Err(e) => Outcome::Failed(e.0),
    }
}

/// fold_buckets(buffer, offsets, skip_field, jobs, whole=True) -> list[(changes, delta,
/// document, index_document, size, uncompressed) | None]
///
/// The whole prepareCommit of several buckets in one call with the GIL released, the
/// buckets folded in parallel on more than two cores (`fold_pool`). `offsets` (int64s) is where each document of
/// `buffer` starts. Each job is (control, columns, rows, bucket_id, version, count,
/// meta_key): the documents `rows` (indexes into `offsets`, in commit order) are appended
/// to `columns` (as `BucketColumns.append`) and folded into `control`'s min/max (as
/// `Control.update`), and the bucket document of `count` rows is built without `data`
/// and, when `whole`, with it (as `bucket_document`), with the size of the whole one
/// either way. `changes` are the changed columns as int64 triples (field index in column
/// order, is_new, offset); `uncompressed` the bytes the rows add to a v1 bucket. Per
/// bucket: None when the columns declined (neither changed); the documents None and the
/// size 0 when the control declined after the columns were appended (the caller folds
/// min/max with the reference). A bucket's objects may appear in one job only.
///
/// `scanned`: the measurement scan of these documents (`scan_measurements` of `buffer`,
/// the same object, with `skip_field` as its meta field), whose table of where each
/// field's value lies lets the fold read a document of fixed-width fields without
/// iterating it again; ignored when it is not that scan, and for a document where the
/// scan framed another.
#[pyfunction]
#[pyo3(signature = (buffer, offsets, skip_field, jobs, whole = true, scanned = None))]
fn fold_buckets<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    skip_field: Option<&str>,
    jobs: Vec<Job<'py>>,
    whole: bool,
    scanned: Option<Bound<'py, ScannedBatch>>,
) -> PyResult<Vec<Option<Folded<'py>>>> {
    guard("fold_buckets", || {
        let table = scanned
            .as_ref()
            .map(Bound::get)
            .filter(|s| s.buffer().bind(py).as_any().is(buffer) && s.meta_field() == skip_field);
        let shapes = table.map(|s| Shapes::of(s.table()));
        let buffer = bytes_of(buffer)?;
        let offsets = ints_of(offsets, i64::to_le_bytes)?;
        let mut jobs = jobs;
        let mut work = Vec::with_capacity(jobs.len());
        let mut size = 0usize;
        for (_, _, rows, id, _, _, _) in &jobs {
            let id: [u8; 12] = id
                .as_slice()
                .try_into()
                .map_err(|_| PyValueError::new_err("bucket_id: 12 bytes"))?;
            // a malformed document declines its bucket, as the columns would
            let docs = documents_at(&buffer, &offsets, rows.iter().copied()).ok();
            size += docs
                .as_ref()
                .map_or(0, |d| d.iter().map(|x| x.1.len()).sum());
            let docs = docs.map(|docs| match (table, &shapes) {
                (Some(table), Some(shapes)) => docs
                    .into_iter()
                    .zip(rows)
                    .map(|(doc, &row)| shapes.row(table.table(), row, doc))
                    .collect(),
                _ => docs.into_iter().map(|(_, d)| Row::Document(d)).collect(),
            });
            work.push((docs, id));
        }
        let tasks: Vec<Task<'_>> = jobs
            .iter_mut()
            .zip(work)
            .map(
                |((ctl, cols, _, _, version, count, key), (docs, id))| Task {
                    ctl,
                    cols: &mut cols.inner,
                    docs,
                    id,
                    version: *version,
                    count: *count,
                    meta_key: key.as_deref(),
                },
            )
            .collect();
        let run = move || fold_tasks(tasks, fold_pool(), skip_field, whole);
        let outcomes = if size >= DETACH_BYTES {
            py.detach(run)
        } else {
            run()
        };
        let mut out = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            out.push(match outcome {
                Outcome::Declined => None,
                Outcome::Failed(why) => return Err(PyValueError::new_err(why)),
                Outcome::Folded(appended, built) => {
                    // (field, is_new, offset) as int64 triples: read only where a caller
                    // asks for the diffs, so no Python object per column here
                    let changes: Vec<u8> = appended
                        .changes
                        .iter()
                        .flat_map(|c| [c.field as i64, i64::from(c.is_new), c.offset as i64])
                        .flat_map(i64::to_le_bytes)
                        .collect();
                    let changes = PyBytes::new(py, &changes);
                    let (doc, index, size) = match built {
                        Some(b) => (
                            b.document.map(|d| PyBytes::new(py, d.as_bytes())),
                            Some(PyBytes::new(py, b.index.as_bytes())),
                            b.size,
                        ),
                        None => (None, None, 0),
                    };
                    Some((
                        changes,
                        appended.delta,
                        doc,
                        index,
                        size,
                        appended.uncompressed,
                    ))
                }
            });
        }
        Ok(out)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bucket_document, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_document_with_data, m)?)?;
    m.add_function(wrap_pyfunction!(fold_buckets, m)?)?;
    m.add_class::<PyBucketColumns>()?;
    Ok(())
}

/// The measurement scan of `buf` for the tests: time field "time", meta field "tags".
#[cfg(test)]
fn scan_tagged(buf: &[u8]) -> crate::measurements::Scanned {
    use crate::measurements::{scan, ScanOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE};
    let opts = ScanOptions {
        time_field: "time",
        meta_field: Some("tags"),
        ordered: false,
        max_depth: DEFAULT_MAX_DEPTH,
        max_size: DEFAULT_MAX_SIZE,
    };
    scan(buf, None, &opts).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::{cstr, rawdoc, DateTime};

    /// Measurements of `buckets` buckets, `rows` each, back to back: a time, an int, a
    /// double, a bool, an `_id` after them (none in the last bucket), and in the third
    /// row of each bucket a string (a shape the table does not read).
    fn measurements(buckets: usize, rows: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for b in 0..buckets {
            for r in 0..rows {
                let mut d = rawdoc! {
                    "time": DateTime::from_millis((r * 1000) as i64),
                    "a": (b * r) as i64,
                    "tags": {"host": format!("h{b}")},
                    "x": r as f64 / 3.0,
                    "ok": r % 2 == 0,
                };
                if b + 1 < buckets {
                    d.append(
                        cstr!("_id"),
                        ObjectId::from_bytes([(b * rows + r) as u8; 12]),
                    );
                }
                if r % 3 == 2 {
                    d.append(cstr!("s"), format!("v{r}"));
                }
                out.extend_from_slice(d.as_bytes());
            }
        }
        out
    }

    /// Folds the buckets (`rows` documents each) with `pool`, reading the documents from
    /// the scan's table when `table`: the outcomes, every bucket's columns and min/max,
    /// and how many rows the table gave.
    fn fold_with(
        pool: Option<&rayon::ThreadPool>,
        table: bool,
    ) -> (Vec<Outcome>, Vec<Vec<Vec<u8>>>, usize) {
        let (buckets, rows) = (7, 5);
        let buf = measurements(buckets, rows);
        let scanned = scan_tagged(&buf);
        let shapes = Shapes::of(&scanned);
        let docs: Vec<&[u8]> = scanned.spans.iter().map(|&(s, n)| &buf[s..s + n]).collect();
        let all: Vec<Row<'_>> = docs
            .iter()
            .enumerate()
            .map(|(i, &doc)| match table {
                true => shapes.row(&scanned, i as i32, (scanned.spans[i].0, doc)),
                false => Row::Document(doc),
            })
            .collect();
        let shaped = all.iter().filter(|r| matches!(r, Row::Shaped(_))).count();
        let mut state: Vec<(Control, BucketColumns)> = (0..buckets)
            .map(|_| (Control::default(), BucketColumns::new(Some("time"))))
            .collect();
        let tasks = state
            .iter_mut()
            .enumerate()
            .map(|(b, (ctl, cols))| Task {
                ctl,
                cols,
                docs: Some(all[b * rows..(b + 1) * rows].to_vec()),
                id: [b as u8; 12],
                version: 2,
                count: rows as i32,
                meta_key: None,
            })
            .collect();
        let outcomes = fold_tasks(tasks, pool, Some("tags"), true);
        let state = state
            .iter()
            .map(|(ctl, c)| {
                let (min, max) = ctl.min_max_raw().unwrap();
                let mut bytes: Vec<Vec<u8>> = c.column_bytes().map(|(_, b)| b.to_vec()).collect();
                bytes.extend([min.as_bytes().to_vec(), max.as_bytes().to_vec()]);
                bytes
            })
            .collect();
        (outcomes, state, shaped)
    }

    /// The pool's half and the calling thread's give what one thread folding every
    /// bucket gives, in the buckets' order (the pool is off on two cores, as in CI).
    #[test]
    fn a_fold_split_over_the_pool_is_the_fold_on_one_thread() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let (split, split_state, _) = fold_with(Some(&pool), false);
        let (one, one_state, _) = fold_with(None, false);
        assert_eq!(split.len(), 7);
        assert_same_fold((split, split_state), (one, one_state));
    }

    /// Two folds of the buckets that folded every one whole, to the same outcomes and
    /// state.
    fn assert_same_fold(
        a: (Vec<Outcome>, Vec<Vec<Vec<u8>>>),
        b: (Vec<Outcome>, Vec<Vec<Vec<u8>>>),
    ) {
        assert!(a.0.iter().all(|o| matches!(o, Outcome::Folded(_, Some(_)))));
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1);
    }

    /// Documents read from the scan's table fold as the documents iterated do: the same
    /// columns, min/max and documents, the rows of other shapes iterated among them.
    #[test]
    fn a_fold_from_the_scans_table_is_the_fold_of_the_documents() {
        let (table, table_state, shaped) = fold_with(None, true);
        let (docs, docs_state, none) = fold_with(None, false);
        // every row but the 7 with a string (rows without an _id too)
        assert_eq!((shaped, none), (28, 0));
        assert_same_fold((table, table_state), (docs, docs_state));
    }

    /// A document the scan framed elsewhere (offsets other than the scan's) is iterated,
    /// not read from the table.
    #[test]
    fn the_table_reads_only_the_documents_the_scan_framed() {
        let buf = measurements(1, 2);
        let scanned = scan_tagged(&buf);
        let shapes = Shapes::of(&scanned);
        let (start, len) = scanned.spans[0];
        let doc = &buf[start..start + len];
        assert!(matches!(
            shapes.row(&scanned, 0, (start, doc)),
            Row::Shaped(_)
        ));
        assert!(matches!(
            shapes.row(&scanned, 1, (start, doc)),
            Row::Document(_)
        ));
        assert!(matches!(
            shapes.row(&scanned, 0, (start + 1, doc)),
            Row::Document(_)
        ));
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// The fold of 100 buckets taking 10 TSBS measurements each (ROWS), 36 times, the documents
    /// iterated and read from the scan's table; for `perf`: write the documents (grouped
    /// by host, 1000 per round) to /tmp/fold_bench/tsbs36k.bson, then
    /// `cargo test --release time_a_fold -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn time_a_fold() {
        let buf = std::fs::read("/tmp/fold_bench/tsbs36k.bson").unwrap();
        let scanned = scan_tagged(&buf);
        let shapes = Shapes::of(&scanned);
        // ROWS=1: a bucket takes one measurement a round (the high-cardinality shape)
        let per_bucket: usize = std::env::var("ROWS").map_or(10, |r| r.parse().unwrap());
        for table in [false, true] {
            let rows: Vec<Row<'_>> = scanned
                .spans
                .iter()
                .enumerate()
                .map(|(i, &(s, n))| match table {
                    true => shapes.row(&scanned, i as i32, (s, &buf[s..s + n])),
                    false => Row::Document(&buf[s..s + n]),
                })
                .collect();
            let t = std::time::Instant::now();
            for _ in 0..5 {
                let mut buckets: Vec<(Control, BucketColumns)> = (0..100)
                    .map(|_| (Control::default(), BucketColumns::new(Some("time"))))
                    .collect();
                for round in 0..36 {
                    for (b, (ctl, cols)) in buckets.iter_mut().enumerate() {
                        let at = round * 1000 + b * 10;
                        let task = Task {
                            ctl,
                            cols,
                            docs: Some(rows[at..at + per_bucket].to_vec()),
                            id: [0; 12],
                            version: 2,
                            count: (round as i32 + 1) * 10,
                            meta_key: None,
                        };
                        std::hint::black_box(fold_one(task, Some("tags"), false));
                    }
                }
            }
            let us = t.elapsed().as_secs_f64() / (5 * 36 * 100) as f64 * 1e6;
            println!("fold (table {table}): {us:.2} µs per bucket of {per_bucket}");
        }
    }
}
