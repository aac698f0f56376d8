//! PyO3 layer of block processing (Python facade: `query/timeseries/block_group.py`).
//!
//! `BlockGroup(time_field, fields, time_preds, row_preds, bin_ms, accs, row_ors, bests)`
//! holds one `$group`'s fold; `feed(buckets, classify)` takes a batch of stored buckets
//! (raw bytes, in scan order), asks `classify` the series class of each meta value not
//! seen before (-1: skip its buckets), then decodes and folds the batch, bucket by bucket
//! in order, on the thread pool while the caller reads the next batch (so SQLite's reading
//! and the fold overlap); `groups_per_meta()` and `documents(...)` give the results (see
//! `results`); `counters()` explain's counts. `Declined` means the Python path must
//! answer the query (the fold is then unusable).
//! `bucket_metas(buckets)` gives each bucket's meta as the document `{"m": meta}`.
//!
//! Values cross as (type byte, int64, float64): 0 missing, 10 null, 16 int32, 18 int64,
//! 1 double, 8 bool, 9 date.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};

use super::bucket::{head_doc, max_time, meta_doc, meta_key, read_rows, rows_at_time, Val};
use super::group::{AccOp, Arg, Best, Cmp, Fold, Kept, Plan, State};
use super::results::{self, ordered, Finish, OrderKey};
use super::Decline;
use crate::boundary::{guard, panicked, Declined};
use crate::bsoncolumn::values::*;

type ValueTuple = (u8, i64, f64);

fn val_of((t, i, f): ValueTuple) -> PyResult<Val> {
    Ok(match t {
        0 => Val::Missing,
        T_NULL => Val::Null,
        T_INT32 => Val::Int32(i32::try_from(i).map_err(|_| declined("an int32 out of range"))?),
        T_INT64 => Val::Int64(i),
        T_DOUBLE => Val::Double(f),
        T_BOOL => Val::Bool(i != 0),
        T_DATE => Val::Date(i),
        _ => return Err(declined("a constant of another type")),
    })
}

fn declined(why: &'static str) -> PyErr {
    Declined::new_err(why)
}

fn cmp_of(op: &str) -> PyResult<Cmp> {
    Cmp::parse(op).ok_or_else(|| declined("an unsupported comparison"))
}

#[pyclass(module = "storage._native")]
pub struct BlockGroup {
    fold: Option<Fold>,
    /// the number and series class of each meta value seen, by its `meta_key`
    metas: HashMap<Vec<u8>, (usize, i32)>,
    /// buckets fed of a class (not -1)
    matched: u64,
    /// the last batch fed, while the pool folds it
    in_flight: Option<InFlight>,
}

#[pymethods]
impl BlockGroup {
    #[new]
    #[pyo3(signature = (time_field, fields, time_preds, row_preds, bin_ms, accs, row_ors=Vec::new(), bests=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        time_field: String,
        fields: Vec<String>,
        time_preds: Vec<(String, i64)>,
        row_preds: Vec<(usize, String, ValueTuple)>,
        bin_ms: Option<i64>,
        accs: Vec<(String, i64, ValueTuple)>,
        row_ors: Vec<Vec<Vec<(usize, String, ValueTuple)>>>,
        bests: Vec<(usize, bool, bool, usize, Vec<i64>, bool)>,
    ) -> PyResult<Self> {
        let time_preds = time_preds
            .iter()
            .map(|(op, ms)| Ok((cmp_of(op)?, *ms)))
            .collect::<PyResult<Vec<_>>>()?;
        let n = fields.len();
        let number = |c: usize, v: ValueTuple| -> PyResult<Val> {
            let v = val_of(v)?;
            if c >= n || !matches!(v, Val::Int32(_) | Val::Int64(_) | Val::Double(_)) {
                return Err(declined("a row predicate on another type"));
            }
            if matches!(v, Val::Double(d) if d.is_nan()) {
                return Err(declined("a NaN constant"));
            }
            Ok(v)
        };
        let preds = |ps: Vec<(usize, String, ValueTuple)>| {
            ps.into_iter()
                .map(|(c, op, v)| Ok((c, cmp_of(&op)?, number(c, v)?)))
                .collect::<PyResult<Vec<_>>>()
        };
        let row_ors = row_ors
            .into_iter()
            .map(|branches| {
                branches
                    .into_iter()
                    .map(preds)
                    .collect::<PyResult<Vec<_>>>()
            })
            .collect::<PyResult<Vec<_>>>()?;
        let row_preds = preds(row_preds)?;
        let arg_of = |arg: i64, v: ValueTuple| {
            Ok(match arg {
                -1 => Arg::Time,
                -2 => Arg::Const(val_of(v)?),
                c if c >= 0 && (c as usize) < n => Arg::Field(c as usize),
                _ => return Err(declined("an accumulator argument out of range")),
            })
        };
        let mut best_of = HashMap::new();
        let bests = bests
            .into_iter()
            .enumerate()
            .map(|(b, (acc, descending, largest, keep, outs, listed))| {
                let (_, key, _) = accs
                    .get(acc)
                    .ok_or_else(|| declined("a $top/$bottom without its accumulator"))?;
                best_of.insert(acc, b);
                Ok(Best {
                    key: arg_of(*key, (0, 0, 0.0))?,
                    descending,
                    largest,
                    n: keep.max(1),
                    outs: outs
                        .into_iter()
                        .map(|o| arg_of(o, (0, 0, 0.0)))
                        .collect::<PyResult<Vec<_>>>()?,
                    listed,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let accs = accs
            .into_iter()
            .enumerate()
            .map(|(i, (op, arg, v))| {
                let op = match op.as_str() {
                    "$count" => AccOp::Count,
                    "$sum" | "$avg" => AccOp::Sum,
                    "$min" => AccOp::Min,
                    "$max" => AccOp::Max,
                    "$first" => AccOp::First,
                    "$last" => AccOp::Last,
                    "$stdDevPop" | "$stdDevSamp" => AccOp::StdDev,
                    "$top" | "$bottom" | "$topN" | "$bottomN" => match best_of.get(&i) {
                        Some(&b) => AccOp::Best(b),
                        None => return Err(declined("a $top/$bottom without its spec")),
                    },
                    _ => return Err(declined("an unsupported accumulator")),
                };
                Ok((op, arg_of(arg, v)?))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let plan = Plan {
            time_field,
            fields,
            time_preds,
            row_preds,
            row_ors,
            bests,
            bin_ms,
            accs,
        };
        let fold = Fold::new(plan).map_err(|Decline(why)| declined(why))?;
        Ok(BlockGroup {
            fold: Some(fold),
            metas: HashMap::new(),
            matched: 0,
            in_flight: None,
        })
    }

    /// Decodes and folds `buckets` (scan order), each of the series class of its meta:
    /// `classify(meta)` gives the int series class (-1: skip its buckets) of a meta value
    /// not seen before (`{"m": meta}` bytes, None for none), in first-seen order.
    /// The batch is folded on the thread pool while the caller reads the next one: a
    /// batch's outcome (a decline) is reported by the next call.
    fn feed(
        &mut self,
        py: Python<'_>,
        buckets: &Bound<'_, PyList>,
        classify: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        guard("BlockGroup.feed", || {
            self.settle(py)?;
            let fold = self
                .fold
                .take()
                .ok_or_else(|| declined("a fold that declined"))?;
            let objs = buckets
                .iter()
                .map(|b| {
                    b.cast_into::<PyBytes>()
                        .map(Bound::unbind)
                        .map_err(PyErr::from)
                })
                .collect::<PyResult<Vec<_>>>()?;
            let mut batch = Vec::with_capacity(objs.len());
            let mut key = Vec::new();
            for b in &objs {
                let raw = b.as_bytes(py);
                meta_key(raw, &mut key).map_err(|Decline(why)| declined(why))?;
                let (meta, class) = match self.metas.get(key.as_slice()) {
                    Some(&known) => known,
                    None => {
                        let doc = meta_doc(raw).map_err(|Decline(why)| declined(why))?;
                        let arg = match &doc {
                            Some(m) => PyBytes::new(py, m).into_any(),
                            None => py.None().into_bound(py),
                        };
                        let class: i32 = classify.call1((arg,))?.extract()?;
                        let known = (self.metas.len(), class);
                        self.metas.insert(key.clone(), known);
                        known
                    }
                };
                batch.push(Pending {
                    bytes: raw.as_ptr(),
                    len: raw.len(),
                    meta,
                    class,
                });
            }
            let (tx, rx) = mpsc::channel();
            let batch = Batch(batch);
            rayon::spawn(move || {
                let batch = batch;
                let outcome = catch_unwind(AssertUnwindSafe(|| fold_batch(fold, &batch)));
                // the receiver is gone only if the BlockGroup was dropped without waiting
                let _ = tx.send(outcome);
            });
            self.in_flight = Some(InFlight {
                _buckets: objs,
                done: Mutex::new(rx),
            });
            Ok(())
        })
    }

    /// The number of groups of each meta value, by its number (for the memory limit:
    /// each group holds its meta value's `_id`).
    fn groups_per_meta(&mut self, py: Python<'_>) -> PyResult<Vec<u64>> {
        let metas = self.metas.len();
        let fold = self.settled(py)?;
        let mut counts = vec![0u64; metas];
        for g in &fold.groups {
            if let Some(c) = counts.get_mut(g.first_meta) {
                *c += 1;
            }
        }
        Ok(counts)
    }

    /// The groups' result documents `{"_id": ..., name: value, ...}` (dicts), ordered by
    /// `order` (per key: `(direction, None)` for the bin, `(1, ranks)` for ranks by meta
    /// number), or in first-seen order. A group's `_id` is its meta value's template with
    /// the value at each of `paths` (`[]`: the `_id` itself) replaced by what
    /// `bin_values(bin start)` gives for it (asked once a bin); `finish` names each
    /// accumulator (`$count`, `$sum`, `$avg`, `$stdDevPop`, `$stdDevSamp`, else a kept
    /// value); dates and int64s are made with `date_type` and `int64_type`.
    #[pyo3(signature = (templates, paths, bin_values, names, finish, order, date_type, int64_type))]
    #[allow(clippy::too_many_arguments)]
    fn documents<'py>(
        &mut self,
        py: Python<'py>,
        templates: Vec<Bound<'py, PyAny>>,
        paths: Vec<Vec<String>>,
        bin_values: &Bound<'py, PyAny>,
        names: Vec<String>,
        finish: Vec<String>,
        order: Vec<(i32, Option<Vec<u32>>)>,
        date_type: &Bound<'py, PyAny>,
        int64_type: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        guard("BlockGroup.documents", || {
            let fold = self.settled(py)?;
            let how = finish
                .iter()
                .map(|op| match op.as_str() {
                    "$count" => Finish::Count,
                    "$sum" => Finish::Total,
                    "$avg" => Finish::Average,
                    "$stdDevPop" => Finish::StdDevPop,
                    "$stdDevSamp" => Finish::StdDevSamp,
                    "$top" | "$bottom" => Finish::Best,
                    "$topN" | "$bottomN" => Finish::BestN,
                    _ => Finish::Kept,
                })
                .collect::<Vec<_>>();
            if names.len() != how.len() || fold.plan.accs.len() != how.len() {
                return Err(declined("accumulators that do not match the fold"));
            }
            let keys = order
                .into_iter()
                .map(|(dir, ranks)| match ranks {
                    None => OrderKey::Bin {
                        descending: dir < 0,
                    },
                    Some(r) => OrderKey::Meta(r),
                })
                .collect::<Vec<_>>();
            let idx = ordered(&fold.groups, &keys).map_err(|Decline(why)| declined(why))?;
            let names = names
                .iter()
                .map(|n| PyString::new(py, n))
                .collect::<Vec<_>>();
            let id_key = PyString::new(py, "_id");
            let mut bins: HashMap<i64, Vec<Bound<'py, PyAny>>> = HashMap::new();
            let out = PyList::empty(py);
            for i in idx {
                let g = &fold.groups[i];
                let template = templates
                    .get(g.first_meta)
                    .ok_or_else(|| declined("a group without a template"))?;
                let id = if paths.is_empty() {
                    template.clone()
                } else {
                    let values = match bins.entry(g.bin_start) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => {
                            let values: Vec<Bound<'py, PyAny>> =
                                bin_values.call1((g.bin_start,))?.extract()?;
                            if values.len() != paths.len() {
                                return Err(declined("bin values that do not match the paths"));
                            }
                            e.insert(values)
                        }
                    };
                    substituted(template, &paths, values)?
                };
                let doc = PyDict::new(py);
                doc.set_item(&id_key, id)?;
                for (((name, &h), state), (op, _)) in
                    names.iter().zip(&how).zip(&g.states).zip(&fold.plan.accs)
                {
                    if let (State::Best(slot), AccOp::Best(b)) = (state, op) {
                        let spec = &fold.plan.bests[*b];
                        let kept = &fold.kept[*slot];
                        let out = |k: &Kept| -> PyResult<Bound<'py, PyAny>> {
                            if spec.listed {
                                let items = PyList::empty(py);
                                for &v in &k.outs {
                                    items.append(py_out(py, v, date_type, int64_type)?)?;
                                }
                                Ok(items.into_any())
                            } else {
                                py_out(py, k.outs[0], date_type, int64_type)
                            }
                        };
                        let v = if h == Finish::Best {
                            match kept.first() {
                                Some(k) => out(k)?,
                                None => py.None().into_bound(py),
                            }
                        } else {
                            let all = PyList::empty(py);
                            for k in kept {
                                all.append(out(k)?)?;
                            }
                            all.into_any()
                        };
                        doc.set_item(name, v)?;
                        continue;
                    }
                    let v = results::finish(h, state)
                        .ok_or_else(|| declined("a state of another accumulator"))?;
                    doc.set_item(name, py_out(py, v, date_type, int64_type)?)?;
                }
                out.append(doc)?;
            }
            Ok(out)
        })
    }

    /// (buckets fed, buckets of a class, columns decoded, rows passing the filter)
    fn counters(&mut self, py: Python<'_>) -> PyResult<(usize, u64, u64, u64)> {
        self.settle(py)?;
        Ok(self.fold.as_ref().map_or((0, 0, 0, 0), |f| {
            (f.buckets, self.matched, f.columns_decoded, f.rows_passed)
        }))
    }
}

impl BlockGroup {
    /// The fold once the batch in flight is folded (a decline: it is unusable).
    fn settled(&mut self, py: Python<'_>) -> PyResult<&Fold> {
        self.settle(py)?;
        self.fold
            .as_ref()
            .ok_or_else(|| declined("a fold that declined"))
    }

    /// Waits for the batch in flight (the GIL released) and takes its outcome.
    fn settle(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(flight) = self.in_flight.take() else {
            return Ok(());
        };
        let outcome = py.detach(|| flight.wait());
        drop(flight); // the batch's bytes, released with the GIL held
        match outcome {
            Some(Ok(Ok((fold, matched)))) => {
                self.fold = Some(fold);
                self.matched += matched;
                Ok(())
            }
            Some(Ok(Err(Decline(why)))) => Err(declined(why)),
            Some(Err(payload)) => Err(panicked("BlockGroup.feed", payload)),
            None => Err(declined("the fold's worker stopped")),
        }
    }
}

impl Drop for BlockGroup {
    fn drop(&mut self) {
        // the pool may still be reading the batch's bytes: they outlive its work
        if let Some(flight) = self.in_flight.take() {
            flight.wait();
        }
    }
}

/// A bucket of a batch in flight: its bytes (owned by the batch's `Py<PyBytes>`), its
/// meta value's number and its series class.
struct Pending {
    bytes: *const u8,
    len: usize,
    meta: usize,
    class: i32,
}

struct Batch(Vec<Pending>);

// SAFETY: the pointers are into immutable `bytes` objects that `InFlight` keeps alive
// until the job has sent its outcome (`settle`, `Drop`), and the job only reads them.
unsafe impl Send for Batch {}
// SAFETY: as for `Send`: shared reads of immutable bytes.
unsafe impl Sync for Batch {}

type Outcome = std::thread::Result<Result<(Fold, u64), Decline>>;

/// A batch being folded on the pool.
struct InFlight {
    _buckets: Vec<Py<PyBytes>>,
    /// (a `Mutex` only so the pyclass is `Sync`: one thread ever waits)
    done: Mutex<Receiver<Outcome>>,
}

impl InFlight {
    /// The job's outcome (None if it vanished without one).
    fn wait(&self) -> Option<Outcome> {
        let rx = self.done.lock().unwrap_or_else(|e| e.into_inner());
        rx.recv().ok()
    }
}

/// Decodes and folds a batch's buckets one at a time, in order (a bucket's rows are
/// folded while they are in cache); the fold and the number of buckets of a class.
fn fold_batch(mut fold: Fold, batch: &Batch) -> Result<(Fold, u64), Decline> {
    let mut matched = 0;
    for b in &batch.0 {
        if b.class < 0 {
            fold.buckets += 1;
            continue;
        }
        // SAFETY: see `Batch`
        let raw = unsafe { std::slice::from_raw_parts(b.bytes, b.len) };
        let rows = read_rows(raw, &fold.plan.time_field, &fold.plan.fields)?;
        fold.feed(b.meta, b.class, &rows)?;
        matched += 1;
    }
    Ok((fold, matched))
}

/// `template` with the value at each of `paths` replaced by the value of the same index
/// (`[]`: the value itself); the documents on the way are copied, the template is shared
/// by its meta's groups.
fn substituted<'py>(
    template: &Bound<'py, PyAny>,
    paths: &[Vec<String>],
    values: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let mut id = template.clone();
    for (path, value) in paths.iter().zip(values) {
        let Some((last, inner)) = path.split_last() else {
            id = value.clone();
            continue;
        };
        let top = id.cast::<PyDict>().map_err(PyErr::from)?.copy()?;
        let mut cur = top.clone();
        for k in inner {
            let child = cur
                .get_item(k)?
                .ok_or_else(|| declined("a template without its bin"))?
                .cast_into::<PyDict>()
                .map_err(PyErr::from)?
                .copy()?;
            cur.set_item(k, &child)?;
            cur = child;
        }
        cur.set_item(last, value)?;
        id = top.into_any();
    }
    Ok(id)
}

/// An accumulator's value as the generic `$group` gives it in Python.
fn py_out<'py>(
    py: Python<'py>,
    v: Val,
    date_type: &Bound<'py, PyAny>,
    int64_type: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Val::Missing | Val::Null => py.None().into_bound(py),
        Val::Int32(i) => i.into_pyobject(py)?.into_any(),
        Val::Int64(i) => int64_type.call1((i,))?,
        Val::Double(d) => PyFloat::new(py, d).into_any(),
        Val::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Val::Date(ms) => date_type.call1((ms,))?,
    })
}

/// bucket_metas(buckets) -> list[bytes | None]: each bucket's `{"m": meta}`, None for a
/// bucket without meta.
#[pyfunction]
fn bucket_metas<'py>(
    py: Python<'py>,
    buckets: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    guard("bucket_metas", || {
        let out = PyList::empty(py);
        for b in buckets.iter() {
            append_meta(&out, &meta_of(&b)?)?;
        }
        Ok(out)
    })
}

/// A stored bucket's meta element as `{"m": meta}` (None: no meta).
fn meta_of(bucket: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    let b = bucket.cast::<PyBytes>().map_err(PyErr::from)?;
    meta_doc(b.as_bytes()).map_err(|Decline(why)| declined(why))
}

/// Appends a meta value as `bucket_metas` gives it: its bytes, or None.
fn append_meta(out: &Bound<'_, PyList>, meta: &Option<Vec<u8>>) -> PyResult<()> {
    match meta {
        Some(m) => out.append(PyBytes::new(out.py(), m)),
        None => out.append(out.py().None()),
    }
}

/// bucket_heads(buckets, time_field) -> list[tuple[bytes | None, int | None]]: each
/// bucket's `{"m": meta}` (None without meta) and `control.max.<time_field>` in ms (None
/// when it is not a date), read without decoding the rest of the bucket.
#[pyfunction]
fn bucket_heads<'py>(
    py: Python<'py>,
    buckets: &Bound<'py, PyList>,
    time_field: &str,
) -> PyResult<Bound<'py, PyList>> {
    guard("bucket_heads", || {
        let out = PyList::empty(py);
        for b in buckets.iter() {
            let b = b.cast_into::<PyBytes>().map_err(PyErr::from)?;
            let meta = meta_doc(b.as_bytes()).map_err(|Decline(why)| declined(why))?;
            let t = max_time(b.as_bytes(), time_field).map_err(|Decline(why)| declined(why))?;
            out.append((meta.map(|m| PyBytes::new(py, &m)), t))?;
        }
        Ok(out)
    })
}

/// rows_at_time(bucket, time_field, t, keep=None) -> list[list[tuple[str, int, bytes]]]:
/// the rows of a stored bucket whose time is `t` (ms), each as its present data fields
/// but the time (restricted to `keep`): (name, BSON type, value bytes) in data order.
#[pyfunction]
#[pyo3(name = "rows_at_time", signature = (bucket, time_field, t, keep = None))]
fn py_rows_at_time<'py>(
    py: Python<'py>,
    bucket: &Bound<'py, PyBytes>,
    time_field: &str,
    t: i64,
    keep: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyList>> {
    guard("rows_at_time", || {
        let rows = rows_at_time(bucket.as_bytes(), time_field, t, keep.as_deref())
            .map_err(|Decline(why)| declined(why))?;
        let out = PyList::empty(py);
        for row in rows {
            let fields = PyList::empty(py);
            for (name, ty, v) in row {
                fields.append((name, ty, PyBytes::new(py, &v)))?;
            }
            out.append(fields)?;
        }
        Ok(out)
    })
}

/// bucket_head(bucket) -> bytes: the stored bucket without its `data` region (what a
/// bucket-level filter reads), None when it is malformed.
#[pyfunction]
fn bucket_head<'py>(py: Python<'py>, bucket: &Bound<'py, PyBytes>) -> Option<Bound<'py, PyBytes>> {
    head_doc(bucket.as_bytes())
        .ok()
        .map(|h| PyBytes::new(py, &h))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BlockGroup>()?;
    m.add_function(wrap_pyfunction!(bucket_metas, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_heads, m)?)?;
    m.add_function(wrap_pyfunction!(py_rows_at_time, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_head, m)?)
}
