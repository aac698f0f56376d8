//! The measurement scan: a time-series insert batch read from its wire bytes.
//!
//! The reference is `storage/timeseries/measurements.py` (`MeasurementPreparer.prepare_all`
//! and `_prepare_general`) with `storage/timeseries/metadata.py` (`normalize_meta`,
//! `series_key`), and `storage/timeseries/bucket_catalog.py` `insert_batch` for the
//! grouping. For a batch of BSON documents back to back (an OP_MSG kind-1 sequence), the
//! scan, for each document in order:
//!
//! 1. reads it with the `bson` crate's raw API, recursing into every sub-document,
//!    array and code-with-scope scope: malformed BSON is MongoDB's InvalidBSON (22),
//!    nesting deeper than `maxBSONDepth` its Overflow (15) (`walk`);
//! 2. declines the whole batch (`ScanFailure::Declined`) when the document holds
//!    something the Python path reads back differently (`walk`'s quirks): the caller then
//!    uses the reference, so the two paths never disagree on a batch;
//! 3. refuses a document over 16 MiB with BSONObjectTooLarge (10334), the message of
//!    bucketd's ordinary inserts (the Python path has no such check before the bucket);
//! 4. takes the time field, which must be a BSON date, else BadValue (2) with the
//!    reference's message;
//! 5. normalises the meta field's value and finds its series (`meta`), the series key
//!    being the bytes of Python's `series_key(normalize_meta(meta))` (b"" without one);
//! 6. sizes the fields as `_prepare_general` does: every field but the meta (the time
//!    and `_id` included) counts, with the ObjectId `_id` the reference adds to a
//!    document without one (12 bytes); the longest value is at least 8 bytes.
//!
//! With `ordered`, the scan stops at the first refused document (as `prepare_all`
//! does). The series are in order of first appearance among the accepted documents,
//! and each series' measurements sorted by time, stably (the catalog's grouping).
//!
//! Nothing here touches Python: `bindings` is the thin layer that does.

pub mod bindings;
mod meta;
mod walk;

use std::collections::HashMap;

use ahash::RandomState;

use bson::raw::{RawBsonRef, RawDocument};

use crate::fixed_width::{fixed_width, is_fixed_width};
use walk::{Problem, Walker};

/// MongoDB's codes for what the scan refuses.
pub mod codes {
    pub const BAD_VALUE: i32 = 2;
    pub const OVERFLOW: i32 = 15;
    pub const INVALID_BSON: i32 = 22;
    pub const BSON_OBJECT_TOO_LARGE: i32 = 10334;
}

/// MongoDB's maxBSONDepth default (bucketd's server/parameters.py has the same).
pub const DEFAULT_MAX_DEPTH: usize = 200;
/// The largest maxBSONDepth MongoDB accepts; deeper limits are refused (they would only
/// deepen the recursion here).
pub const MAX_DEPTH_CEILING: usize = 1000;
/// BSONObjMaxUserSize: 16 MiB.
pub const DEFAULT_MAX_SIZE: usize = 16 * 1024 * 1024;

/// What the scan needs to know of the collection and the request.
#[derive(Debug, Clone)]
pub struct ScanOptions<'a> {
    pub time_field: &'a str,
    pub meta_field: Option<&'a str>,
    pub ordered: bool,
    pub max_depth: usize,
    pub max_size: usize,
}

/// One series of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// `series_key(normalize_meta(meta))`: b"" when the meta field is missing.
    pub key: Vec<u8>,
    /// `meta_value_size`: type byte and value bytes of the meta value (0 when missing).
    pub meta_value_size: usize,
}

/// A document refused with MongoDB's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasurementError {
    pub index: usize,
    pub code: i32,
    pub message: String,
}

/// The scan's result; per-measurement vectors have one entry per document of the batch
/// (zeros, and series -1, for refused documents and those after an ordered stop).
#[derive(Debug, Clone, Default)]
pub struct Scanned {
    /// (start, length) of each document in the buffer.
    pub spans: Vec<(usize, usize)>,
    /// Documents looked at (all of them, unless an ordered batch stopped early).
    pub scanned: usize,
    pub times: Vec<i64>,
    pub series_of: Vec<i32>,
    pub field_counts: Vec<i32>,
    pub value_bytes: Vec<i64>,
    pub max_value_lens: Vec<i32>,
    pub has_id: Vec<bool>,
    /// Some field other than the meta is an object or an array (no `signature` then).
    pub nested: Vec<bool>,
    /// The shape of each measurement: an index into `shapes` (-1 where refused).
    pub shape_of: Vec<i32>,
    /// The distinct shapes of the batch in order of first appearance: the (name, BSON
    /// type) of each field but the meta, in document order.
    pub shapes: Vec<Vec<(String, u8)>>,
    /// Where the values of each accepted measurement's fields but the meta lie in its
    /// document, (start, end) in document order (its shape's fields): the measurement's
    /// are `value_spans[spans_at[i]..]`, as many as its shape has (`spans_at` is
    /// `u32::MAX` where refused), so that the bucket fold reads them without iterating
    /// the document again.
    pub value_spans: Vec<(u32, u32)>,
    pub spans_at: Vec<u32>,
    pub series: Vec<Series>,
    /// Accepted measurements, series by series, each series' by time (stable).
    pub order: Vec<i32>,
    /// Series `j`'s measurements are `order[series_starts[j]..series_starts[j + 1]]`.
    pub series_starts: Vec<i32>,
    pub errors: Vec<MeasurementError>,
}

/// Why the scan gives no result for the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanFailure {
    /// The batch as a whole is unreadable (a document's length runs past the buffer,
    /// offsets out of order, a limit out of range): one error for the call.
    Batch { code: i32, message: String },
    /// A document the Python reference reads differently; the caller should use it.
    Declined { index: usize, reason: &'static str },
}

fn batch_error(code: i32, message: String) -> ScanFailure {
    ScanFailure::Batch { code, message }
}

/// Splits `buf` into documents: by `offsets` (each document runs to the next offset, the
/// last to the end), or by the length prefix of each document when there are none.
pub fn frame(buf: &[u8], offsets: Option<&[u64]>) -> Result<Vec<(usize, usize)>, ScanFailure> {
    let mut spans = Vec::new();
    match offsets {
        Some(offsets) => {
            let mut bounds = Vec::with_capacity(offsets.len() + 1);
            for &o in offsets {
                bounds.push(usize::try_from(o).unwrap_or(usize::MAX));
            }
            bounds.push(buf.len());
            for (i, w) in bounds.windows(2).enumerate() {
                if w[0] > w[1] || w[1] > buf.len() {
                    return Err(batch_error(
                        codes::BAD_VALUE,
                        format!("document offsets out of order or past the batch at document {i}"),
                    ));
                }
                spans.push((w[0], w[1] - w[0]));
            }
        }
        None => {
            let mut pos = 0;
            while pos < buf.len() {
                let len = buf
                    .get(pos..pos + 4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(i32::from_le_bytes);
                let Some(len) = len else {
                    return Err(batch_error(
                        codes::INVALID_BSON,
                        format!(
                            "BSON document {} runs past the end of the batch",
                            spans.len()
                        ),
                    ));
                };
                if len < 5 {
                    return Err(batch_error(
                        codes::INVALID_BSON,
                        format!("BSON document {} has an invalid size: {len}", spans.len()),
                    ));
                }
                let len = len as usize;
                if len > buf.len() - pos {
                    return Err(batch_error(
                        codes::INVALID_BSON,
                        format!(
                            "BSON document {} runs past the end of the batch",
                            spans.len()
                        ),
                    ));
                }
                spans.push((pos, len));
                pos += len;
            }
        }
    }
    Ok(spans)
}

/// What one accepted measurement contributes.
struct One<'a> {
    time: i64,
    /// The meta element's bytes (for the per-batch cache) and value, if present.
    meta: Option<(&'a [u8], RawBsonRef<'a>)>,
    field_count: i32,
    value_bytes: i64,
    max_value_len: i32,
    has_id: bool,
    nested: bool,
}

enum Refusal {
    Error(i32, String),
    Quirk(&'static str),
}

impl From<Problem> for Refusal {
    fn from(p: Problem) -> Self {
        match p {
            Problem::Invalid(what) => {
                Refusal::Error(codes::INVALID_BSON, format!("Invalid BSON: {what}"))
            }
            Problem::TooDeep(max) => Refusal::Error(
                codes::OVERFLOW,
                format!("BSONObj exceeded maximum nested object depth: {max}"),
            ),
            Problem::Unreadable(why) => Refusal::Quirk(why),
        }
    }
}

fn invalid(e: impl std::fmt::Display) -> Refusal {
    Refusal::Error(codes::INVALID_BSON, format!("Invalid BSON: {e}"))
}

/// One field of a measurement as the Python path's `RawElement`: name, BSON type byte,
/// value bytes (borrowed from the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a str,
    pub type_byte: u8,
    pub value: &'a [u8],
}

/// The fields of a document other than the meta, in document order (what
/// `measurements.elements` gives, without the `_id` it adds to a document that has none).
pub fn fields<'a>(doc: &'a [u8], meta_field: Option<&str>) -> Result<Vec<Field<'a>>, String> {
    let raw = RawDocument::from_bytes(doc).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut at = 4usize;
    for elem in raw.iter_elements() {
        let elem = elem.map_err(|e| e.to_string())?;
        let name = elem.key().as_str();
        let type_byte = elem.element_type() as u8;
        let start = at;
        let value_start = start.saturating_add(2 + name.len());
        at = value_start.saturating_add(elem.size());
        if doc.get(start) != Some(&type_byte) {
            return Err("element not where its size says".to_string());
        }
        let value = doc
            .get(value_start..at)
            .ok_or_else(|| "element past the document".to_string())?;
        if meta_field != Some(name) {
            out.push(Field {
                name,
                type_byte,
                value,
            });
        }
    }
    Ok(out)
}

/// The bytes of the reference's BadValue for a missing or non-date time.
pub fn time_error_message(time_field: &str) -> String {
    format!("'{time_field}' must be present and contain a valid BSON UTC datetime value")
}

/// One document scanned; `seen_meta(raw)`: whether a document scanned before had a meta
/// element of exactly these bytes (its walk is then skipped: it passed).
#[allow(clippy::too_many_arguments)]
fn scan_one<'a>(
    bytes: &'a [u8],
    opts: &ScanOptions<'_>,
    walker: &mut Walker<'a>,
    names: &mut Vec<&'a str>,
    shape: &mut Vec<u8>,
    value_spans: &mut Vec<(u32, u32)>,
    seen_meta: impl Fn(&[u8]) -> bool,
) -> Result<One<'a>, Refusal> {
    let doc = RawDocument::from_bytes(bytes).map_err(invalid)?;
    walker.reset();
    names.clear();
    shape.clear();
    let mut time = None;
    let mut meta = None;
    let mut one = One {
        time: 0,
        meta: None,
        field_count: 0,
        value_bytes: 0,
        max_value_len: 0,
        has_id: false,
        nested: false,
    };
    // where each element starts: the crate's iteration order and sizes (type byte, name,
    // its NUL, value), only to find the meta element's bytes for the series cache
    let mut at = 4usize;
    for elem in doc.iter_elements() {
        let elem = elem.map_err(invalid)?;
        let key = elem.key().as_str();
        let size = elem.size();
        let start = at;
        // the value after the type byte, the name and its NUL
        let value_start = start.saturating_add(2 + key.len());
        at = value_start.saturating_add(size);
        names.push(key);
        // a fixed-width value read from its bytes, as the element would give it; any other
        // (or one that is not valid) through the element, which says what is wrong
        let t = elem.element_type() as u8;
        let fixed = if is_fixed_width(t) && bytes.get(start) == Some(&t) {
            bytes.get(value_start..at).and_then(|v| fixed_width(t, v))
        } else {
            None
        };
        let value = match fixed {
            Some(v) => v,
            None => elem.value().map_err(invalid)?,
        };
        if opts.meta_field == Some(key) {
            // the element's bytes, if they are where the sizes say (else no caching)
            let raw = bytes
                .get(start..at)
                .filter(|r| r.first() == Some(&t))
                .filter(|r| r.get(1..1 + key.len()) == Some(key.as_bytes()))
                .unwrap_or_default();
            // the same bytes in a document scanned before passed this walk already
            if raw.is_empty() || !seen_meta(raw) {
                walker.value(value, 0)?;
            }
            meta = Some((raw, value));
            continue;
        }
        walker.value(value, 0)?;
        if key == opts.time_field {
            time = Some(value);
        }
        if key == "_id" {
            one.has_id = true;
        }
        // (a document is far below 4 GiB: the buffer is a message's)
        value_spans.push((
            u32::try_from(value_start).unwrap_or(u32::MAX),
            u32::try_from(at).unwrap_or(u32::MAX),
        ));
        // the shape's key: type byte, name and NUL per field (names hold no NUL)
        shape.push(t);
        shape.extend_from_slice(key.as_bytes());
        shape.push(0);
        one.field_count += 1;
        one.value_bytes += size as i64;
        one.max_value_len = one
            .max_value_len
            .max(i32::try_from(size).unwrap_or(i32::MAX));
        if matches!(value, RawBsonRef::Document(_) | RawBsonRef::Array(_)) {
            one.nested = true;
        }
    }
    walker.top_level_duplicates(names);
    if let Some(q) = walker.quirk {
        return Err(Refusal::Quirk(q));
    }
    if bytes.len() > opts.max_size {
        return Err(Refusal::Error(
            codes::BSON_OBJECT_TOO_LARGE,
            format!(
                "object to insert too large. size in bytes: {}, max size: {}",
                bytes.len(),
                opts.max_size
            ),
        ));
    }
    match time {
        Some(RawBsonRef::DateTime(t)) => one.time = t.timestamp_millis(),
        _ => {
            return Err(Refusal::Error(
                codes::BAD_VALUE,
                time_error_message(opts.time_field),
            ))
        }
    }
    if !one.has_id {
        // the reference gives the document an ObjectId `_id` first
        one.field_count += 1;
        one.value_bytes += 12;
        one.max_value_len = one.max_value_len.max(12);
    }
    if one.field_count > 0 {
        one.max_value_len = one.max_value_len.max(8);
    }
    one.meta = meta;
    Ok(one)
}

/// Scans a batch (see the module's documentation).
pub fn scan(
    buf: &[u8],
    offsets: Option<&[u64]>,
    opts: &ScanOptions<'_>,
) -> Result<Scanned, ScanFailure> {
    if opts.max_depth > MAX_DEPTH_CEILING {
        return Err(batch_error(
            codes::BAD_VALUE,
            format!("max depth {} is above {MAX_DEPTH_CEILING}", opts.max_depth),
        ));
    }
    let spans = frame(buf, offsets)?;
    let n = spans.len();
    let mut out = Scanned {
        times: vec![0; n],
        series_of: vec![-1; n],
        field_counts: vec![0; n],
        value_bytes: vec![0; n],
        max_value_lens: vec![0; n],
        has_id: vec![false; n],
        nested: vec![false; n],
        shape_of: vec![-1; n],
        spans_at: vec![u32::MAX; n],
        ..Scanned::default()
    };
    // SipHash, the std default, was a tenth of the scan; ahash is keyed at random too,
    // and these keys are bytes a client chose
    let mut shape_ids: HashMap<Vec<u8>, i32, RandomState> = HashMap::default();
    let mut shape: Vec<u8> = Vec::with_capacity(256);
    // the shape of the document before, looked up without hashing when it repeats
    let mut last_shape: (Vec<u8>, i32) = (Vec::new(), -1);
    let mut by_key: HashMap<Vec<u8>, i32, RandomState> = HashMap::default();
    // meta element bytes -> series: identical bytes need no normalisation
    let mut by_raw: HashMap<&[u8], i32, RandomState> = HashMap::default();
    let mut members: Vec<Vec<i32>> = Vec::new();
    let mut names: Vec<&str> = Vec::with_capacity(32);
    let mut walker = Walker::new(opts.max_depth);
    for (i, &(start, len)) in spans.iter().enumerate() {
        if opts.ordered && !out.errors.is_empty() {
            break;
        }
        out.scanned = i + 1;
        let bytes = buf.get(start..start + len).unwrap_or_default();
        let seen = |raw: &[u8]| by_raw.contains_key(raw);
        let spans_at = out.value_spans.len();
        let scanned = scan_one(
            bytes,
            opts,
            &mut walker,
            &mut names,
            &mut shape,
            &mut out.value_spans,
            seen,
        );
        let one = match scanned {
            Ok(one) => one,
            Err(Refusal::Error(code, message)) => {
                out.value_spans.truncate(spans_at);
                out.errors.push(MeasurementError {
                    index: i,
                    code,
                    message,
                });
                continue;
            }
            Err(Refusal::Quirk(reason)) => return Err(ScanFailure::Declined { index: i, reason }),
        };
        let series = match one.meta {
            None => series_index(&mut by_key, &mut out.series, &mut members, Vec::new(), 0),
            Some((raw, value)) => match by_raw.get(raw) {
                Some(&s) => s,
                None => {
                    let key = meta::series_key(value).map_err(|e| {
                        batch_error(codes::INVALID_BSON, format!("Invalid BSON: {e}"))
                    })?;
                    let size = key.len().saturating_sub(1); // type byte + value (name "" and its NUL out)
                    let s = series_index(&mut by_key, &mut out.series, &mut members, key, size);
                    if !raw.is_empty() {
                        by_raw.insert(raw, s);
                    }
                    s
                }
            },
        };
        out.spans_at[i] = u32::try_from(spans_at).unwrap_or(u32::MAX);
        out.times[i] = one.time;
        out.series_of[i] = series;
        out.field_counts[i] = one.field_count;
        out.value_bytes[i] = one.value_bytes;
        out.max_value_lens[i] = one.max_value_len;
        out.has_id[i] = one.has_id;
        out.nested[i] = one.nested;
        out.shape_of[i] = if last_shape.1 >= 0 && last_shape.0 == shape {
            last_shape.1
        } else {
            let id = match shape_ids.get(shape.as_slice()) {
                Some(&id) => id,
                None => {
                    let id = out.shapes.len() as i32;
                    out.shapes.push(shape_fields(&shape));
                    shape_ids.insert(shape.clone(), id);
                    id
                }
            };
            last_shape.0.clone_from(&shape);
            last_shape.1 = id;
            id
        };
        if let Some(m) = members.get_mut(series as usize) {
            m.push(i as i32);
        }
    }
    out.series_starts.push(0);
    for mut m in members {
        m.sort_by_key(|&i| out.times[i as usize]); // stable, as list.sort
        out.order.extend_from_slice(&m);
        out.series_starts.push(out.order.len() as i32);
    }
    out.spans = spans;
    Ok(out)
}

/// The (name, type) pairs of a shape key (see `scan_one`).
fn shape_fields(key: &[u8]) -> Vec<(String, u8)> {
    let mut out = Vec::new();
    let mut rest = key;
    while let Some((&type_byte, tail)) = rest.split_first() {
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        out.push((
            String::from_utf8_lossy(&tail[..end]).into_owned(),
            type_byte,
        ));
        rest = tail.get(end + 1..).unwrap_or_default();
    }
    out
}

fn series_index(
    by_key: &mut HashMap<Vec<u8>, i32, RandomState>,
    series: &mut Vec<Series>,
    members: &mut Vec<Vec<i32>>,
    key: Vec<u8>,
    meta_value_size: usize,
) -> i32 {
    if let Some(&s) = by_key.get(&key) {
        return s;
    }
    let s = series.len() as i32;
    by_key.insert(key.clone(), s);
    series.push(Series {
        key,
        meta_value_size,
    });
    members.push(Vec::new());
    s
}

#[cfg(test)]
mod tests;
