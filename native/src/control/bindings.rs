//! `_native.Control`: a bucket's min/max and schema for Python; thin over `minmax` and
//! `schema`. Every entry runs in `boundary::guard` and releases the GIL for the work.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::minmax::MinMax;
use super::schema::Schema;
use super::{check_parsed, documents, Checked, Fail, Gate};
use crate::boundary::{guard, native_error, Declined};

/// MongoDB's InvalidBSON.
const INVALID_BSON: i32 = 22;

fn to_py(f: Fail) -> PyErr {
    match f {
        Fail::Invalid(m) => native_error(INVALID_BSON, m),
        Fail::Declined(m) => Declined::new_err(m),
    }
}

/// Offsets as given: None, a list of ints, or bytes of little-endian int64s
/// (`array("q").tobytes()`).
fn offsets_arg(offsets: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<i64>>> {
    let Some(o) = offsets else { return Ok(None) };
    if o.is_none() {
        return Ok(None);
    }
    if let Ok(b) = o.cast::<PyBytes>() {
        let raw = b.as_bytes();
        if raw.len() % 8 != 0 {
            return Err(PyValueError::new_err(
                "offsets bytes: not a whole number of int64s",
            ));
        }
        return Ok(Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ));
    }
    if let Ok(l) = o.cast::<PyList>() {
        return Ok(Some(l.extract()?));
    }
    Err(PyTypeError::new_err(
        "offsets: None, a list of ints or bytes of int64s",
    ))
}

/// Batches from which an update releases the GIL: bytes without offsets, documents with.
const DETACH_BYTES: usize = 16 * 1024;
const DETACH_DOCUMENTS: usize = 64;

/// A bucket's control.min/control.max (`MinMax`) and schema (`Schema`).
#[pyclass(module = "storage._native", name = "Control")]
#[derive(Clone, Default)]
pub struct Control {
    minmax: MinMax,
    schema: Schema,
}

impl Control {
    /// Folds into min/max the top-level fields a caller collected while it iterated the
    /// documents (`BucketColumns::append_collecting`), without iterating them again
    /// (`update`'s work, for the fused bucket fold). All or nothing.
    pub(crate) fn fold_parsed(&mut self, parsed: Checked<'_>) -> Result<(), Fail> {
        self.minmax
            .update_checked(&check_parsed(parsed, Gate::MinMax)?)
    }

    /// control.min and control.max, None when they cannot be rendered (for the fused
    /// fold, which runs without the GIL).
    pub(crate) fn min_max_raw(&self) -> Option<(bson::RawDocumentBuf, bson::RawDocumentBuf)> {
        Some((self.minmax.min().ok()?, self.minmax.max().ok()?))
    }

    /// The control a stored bucket's control.min and control.max give (MinMax and
    /// Schema `from_control`); Err(reason) for a mixed-schema bucket.
    fn rebuilt(
        min: &bson::raw::RawDocument,
        max: &bson::raw::RawDocument,
    ) -> Result<Result<Control, String>, Fail> {
        let minmax = MinMax::from_control(min, max)?;
        Ok(match Schema::from_control(min, max)? {
            Some(schema) => Ok(Control { minmax, schema }),
            None => Err("schema change: the bucket's control has mixed types".into()),
        })
    }

    /// control.min and control.max (for the native bucket document).
    pub(crate) fn min_max(&self) -> PyResult<(bson::RawDocumentBuf, bson::RawDocumentBuf)> {
        Ok((
            self.minmax.min().map_err(to_py)?,
            self.minmax.max().map_err(to_py)?,
        ))
    }
}

#[pymethods]
impl Control {
    #[new]
    fn py_new() -> Self {
        Control::default()
    }

    /// Folds a batch of measurements (BSON documents back to back, or at `offsets`)
    /// into min/max, skipping `skip_field` (the meta field) at the top level. All or
    /// nothing: Declined or NativeError(InvalidBSON) leave the state unchanged.
    #[pyo3(signature = (documents, offsets=None, skip_field=None))]
    fn update(
        &mut self,
        py: Python<'_>,
        documents: &[u8],
        offsets: Option<&Bound<'_, PyAny>>,
        skip_field: Option<&str>,
    ) -> PyResult<()> {
        guard("Control.update", || {
            let offs = offsets_arg(offsets)?;
            let minmax = &mut self.minmax;
            let mut work = || {
                let docs = super::documents(documents, offs.as_deref())?;
                minmax.update_batch(&docs, skip_field)
            };
            // a few documents take less than releasing and re-taking the GIL, which
            // can wait for the thread that took it
            let many = offs.as_ref().map_or(documents.len() >= DETACH_BYTES, |o| {
                o.len() >= DETACH_DOCUMENTS
            });
            if many { py.detach(work) } else { work() }.map_err(to_py)
        })
    }

    /// Records the documents' types in the schema, one by one: the index of the first
    /// document that changes a path's type (kSchemaChange; the schema is then partly
    /// updated with it, as the reference's is), else None.
    #[pyo3(signature = (documents, offsets=None, skip_field=None))]
    fn schema_update(
        &mut self,
        py: Python<'_>,
        documents: &[u8],
        offsets: Option<&Bound<'_, PyAny>>,
        skip_field: Option<&str>,
    ) -> PyResult<Option<usize>> {
        guard("Control.schema_update", || {
            let offs = offsets_arg(offsets)?;
            let schema = &mut self.schema;
            py.detach(|| {
                let docs = super::documents(documents, offs.as_deref())?;
                schema.update_batch(&docs, skip_field)
            })
            .map_err(to_py)
        })
    }

    /// `Schema.compatible` for one document: records its types, False on a change.
    #[pyo3(signature = (document, skip_field=None))]
    fn schema_compatible(&mut self, document: &[u8], skip_field: Option<&str>) -> PyResult<bool> {
        guard("Control.schema_compatible", || {
            let doc = single(document).map_err(to_py)?;
            let r = self
                .schema
                .update_batch(&[doc], skip_field)
                .map_err(to_py)?;
            Ok(r.is_none())
        })
    }

    /// control.min as BSON (what `bson.encode(MinMax.min())` gives).
    fn min_bson<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard("Control.min_bson", || {
            let doc = self.minmax.min().map_err(to_py)?;
            Ok(PyBytes::new(py, doc.as_bytes()))
        })
    }

    /// control.max as BSON (what `bson.encode(MinMax.max())` gives).
    fn max_bson<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard("Control.max_bson", || {
            let doc = self.minmax.max().map_err(to_py)?;
            Ok(PyBytes::new(py, doc.as_bytes()))
        })
    }

    /// `MinMax.from_control` and `Schema.from_control` from a stored bucket's
    /// control.min and control.max; ValueError for a mixed-schema bucket (SchemaChange).
    #[staticmethod]
    fn from_control(py: Python<'_>, min_bytes: &[u8], max_bytes: &[u8]) -> PyResult<Control> {
        guard("Control.from_control", || {
            py.detach(|| Control::rebuilt(single(min_bytes)?, single(max_bytes)?))
                .map_err(to_py)?
                .map_err(PyValueError::new_err)
        })
    }

    /// What `from_control` gives for this control's own control.min and control.max: the
    /// state a bucket written from it has when reopened from storage (ValueError as
    /// `from_control`'s).
    /// Small work: the GIL is kept (the storage thread would wait to take it back).
    fn reopened(&self) -> PyResult<Control> {
        guard("Control.reopened", || {
            let (min, max) = (
                self.minmax.min().map_err(to_py)?,
                self.minmax.max().map_err(to_py)?,
            );
            Control::rebuilt(&min, &max)
                .map_err(to_py)?
                .map_err(PyValueError::new_err)
        })
    }

    /// control.min.<field> and control.max.<field> in milliseconds when both are dates
    /// (the time field's), else None: what an index on them keys, without rendering.
    fn date_bounds(&self, field: &str) -> Option<(i64, i64)> {
        self.minmax.date_bounds(field)
    }

    fn copy(&self) -> Control {
        self.clone()
    }

    fn __copy__(&self) -> Control {
        self.clone()
    }

    /// The object with the heap its trees own.
    pub(crate) fn __sizeof__(&self) -> usize {
        std::mem::size_of::<Self>() + self.minmax.heap_size() + self.schema.heap_size()
    }
}

/// One document, filling its buffer exactly.
fn single(buf: &[u8]) -> Result<&bson::raw::RawDocument, Fail> {
    let docs = documents(buf, Some(&[0]))?;
    match docs.first() {
        Some(d) if d.as_bytes().len() == buf.len() => Ok(d),
        _ => Err(Fail::Invalid("trailing bytes after the document".into())),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Control>()
}
