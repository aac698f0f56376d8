//! The columns of one open bucket, appended to from raw measurement documents.
//!
//! Python reference: `storage/timeseries/columns.py` `Columns` (`append`, `from_data`,
//! `names`, `column_bytes`, `compressed_size`). Each document is iterated with the
//! `bson` crate's raw iterator (`RawDocument::iter_elements`); a value's bytes are the
//! `size()` bytes after its key, which is where that iterator read them. Every value goes
//! straight into its field's `ColumnBuilder`.
//!
//! An append is all or nothing: the builders of the call are copies, swapped in only
//! when every column finalized. It declines (`AppendError::Declined`, the columns as
//! they were) where the reference, not this code, must decide: an object or array with
//! fields, code with scope, a malformed document or value, a field twice in one
//! document, a state the encoder cannot reproduce.

use std::collections::HashMap;

use bson::raw::{CStr, RawDocument};

use crate::bsoncolumn::builder::{BuildError, ColumnBuilder};
use crate::bsoncolumn::values::{T_ARRAY, T_OBJECT};
use crate::control::Checked;
use crate::fixed_width::{fixed_width, is_fixed_width};
use crate::measurements::Scanned;

/// Why an append or a reopen did not happen (the columns are then as before the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// The Python reference must do this one; the message says why.
    Declined(&'static str),
}

impl From<BuildError> for AppendError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Declined => AppendError::Declined("the column builder declined a value"),
            // The reference decodes the measurement first and reports the proper error.
            BuildError::Invalid(_) => AppendError::Declined("a malformed value"),
        }
    }
}

/// One data field: its builder (None until a row decides it: the time field before the
/// first append) and its committed column (None until then).
#[derive(Debug, Clone)]
struct Field {
    name: Box<str>,
    builder: Option<ColumnBuilder>,
    column: Option<Box<[u8]>>,
}

/// A column changed by an append: field `field` (an index into `names()`), whether it is
/// new, and the offset of the first byte where it differs from its previous bytes
/// (0 for a new column), so the BinaryDiff is `(offset, column[offset..])`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub field: usize,
    pub is_new: bool,
    pub offset: usize,
}

/// What one append did: the changed columns in document order, the change in the total
/// size of the columns, and the bytes the rows add to the bucket as an uncompressed (v1)
/// bucket would hold them (per field but the skipped one, an element named by the row
/// number: type byte, the row's digits, NUL, the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub changes: Vec<Change>,
    pub delta: i64,
    pub uncompressed: usize,
}

/// Decimal digits of `n` (1 for 0), as the row's field name in a v1 bucket spells it.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Field counts from which an append looks names up in a hash map (below: a scan).
const SCAN_MAX: usize = 32;

/// The per-field column state of a bucket, with the committed bytes of each column.
#[derive(Debug, Clone, Default)]
pub struct BucketColumns {
    fields: Vec<Field>,
    count: usize,
    compressed_size: usize,
}

/// Bytes the allocator takes for an allocation of `n` bytes (none for `n == 0`).
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// Length of the longest common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    // compare 16-byte chunks first, then find the byte
    let mut i = 0;
    while i + 16 <= n && a[i..i + 16] == b[i..i + 16] {
        i += 16;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// A document to append: as it came (iterated here), or as the measurement scan read it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Row<'a> {
    Document(&'a [u8]),
    Shaped(ShapedRow<'a>),
}

/// A document the measurement scan read: its fields but the meta, in document order
/// (their names and types, the scan's shape), and where each value lies in the document.
/// Only shapes of fixed-width types (`is_fixed_width`) are read so.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShapedRow<'a> {
    pub doc: &'a [u8],
    pub names: &'a [&'a CStr],
    pub types: &'a [u8],
    pub spans: &'a [(u32, u32)],
}

/// Read a byte of each value the scan's table locates in `rows`, so that their cache
/// lines are fetched together (the loads are independent) rather than a row at a time as
/// the fold reaches them: a series' rows lie far apart in a batch.
pub(crate) fn warm(rows: &[Row<'_>]) {
    let mut x = 0u8;
    for row in rows {
        if let Row::Shaped(s) = row {
            for &(start, _) in s.spans {
                x ^= s.doc.get(start as usize).copied().unwrap_or(0);
            }
        }
    }
    std::hint::black_box(x);
}

/// The scan's shapes a fold reads from its table: per shape, its field names and types
/// when every type has a fixed width (`is_fixed_width`), else None (such documents are
/// iterated).
pub(crate) struct Shapes<'a> {
    of: Vec<Option<(Vec<&'a CStr>, Vec<u8>)>>,
}

impl<'a> Shapes<'a> {
    pub(crate) fn of(scanned: &'a Scanned) -> Self {
        let of = scanned
            .shapes
            .iter()
            .map(|fields| {
                let names = fields
                    .iter()
                    .map(|(name, _)| <&CStr>::try_from(name.as_str()).ok())
                    .collect::<Option<Vec<_>>>()?;
                let types: Vec<u8> = fields.iter().map(|&(_, t)| t).collect();
                types
                    .iter()
                    .all(|&t| is_fixed_width(t))
                    .then_some((names, types))
            })
            .collect();
        Shapes { of }
    }

    /// Document `row` of the batch (`doc`: where it starts in the scanned buffer, and its
    /// bytes) as the fold reads it: from the table only when the scan framed the document
    /// there and so.
    pub(crate) fn row(
        &'a self,
        scanned: &'a Scanned,
        row: i32,
        (start, doc): (usize, &'a [u8]),
    ) -> Row<'a> {
        let shaped = usize::try_from(row).ok().and_then(|r| {
            if scanned.spans.get(r) != Some(&(start, doc.len())) {
                return None;
            }
            let shape = usize::try_from(*scanned.shape_of.get(r)?).ok()?;
            let (names, types) = self.of.get(shape)?.as_ref()?;
            let at = *scanned.spans_at.get(r)? as usize;
            let spans = scanned.value_spans.get(at..at.checked_add(types.len())?)?;
            Some(ShapedRow {
                doc,
                names,
                types,
                spans,
            })
        });
        shaped.map_or(Row::Document(doc), Row::Shaped)
    }
}

/// One value of an append: its field (existing index, or `fields.len()` + position among
/// the new names), its row in the call, its type and value bytes.
struct Value<'a> {
    field: usize,
    row: usize,
    t: u8,
    v: &'a [u8],
}

impl BucketColumns {
    /// Empty columns; the time field's column comes first (as `Columns(time_field)`).
    pub fn new(time_field: Option<&str>) -> Self {
        let mut c = BucketColumns::default();
        if let Some(tf) = time_field {
            c.fields.push(Field {
                name: tf.into(),
                builder: None,
                column: None,
            });
        }
        c
    }

    /// The columns of a stored bucket of `count` rows (`Columns.from_data`): each builder
    /// continues its column without recompressing it. Declined when the native builder
    /// cannot continue a column (or a name comes twice).
    pub fn from_data<'a>(
        data: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        count: usize,
    ) -> Result<Self, AppendError> {
        let mut c = BucketColumns {
            count,
            ..Default::default()
        };
        for (name, column) in data {
            if c.position(name).is_some() {
                return Err(AppendError::Declined("a column name comes twice"));
            }
            let builder = ColumnBuilder::from_column(column).map_err(|_| {
                AppendError::Declined("a column the native builder cannot continue")
            })?;
            c.compressed_size += column.len();
            c.fields.push(Field {
                name: name.into(),
                builder: Some(builder),
                column: Some(column.into()),
            });
        }
        Ok(c)
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }

    /// Rows appended (or reopened).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Total bytes of the committed columns.
    pub fn compressed_size(&self) -> usize {
        self.compressed_size
    }

    /// Field names in column order (the time field first, then first appearance).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| &*f.name)
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Name and committed column of field `i` (None before its first append).
    pub fn field(&self, i: usize) -> (&str, Option<&[u8]>) {
        let f = &self.fields[i];
        (&f.name, f.column.as_deref())
    }

    /// (name, committed column) of every field that has one, in column order.
    pub fn column_bytes(&self) -> impl Iterator<Item = (&str, &[u8])> + Clone {
        self.fields
            .iter()
            .filter_map(|f| f.column.as_deref().map(|c| (&*f.name, c)))
    }

    /// Heap bytes held: the field table, names, builders and committed columns, each
    /// allocation counted as the allocator's chunk for it (glibc: 8 bytes of header,
    /// rounded up to 16, at least 32), so the figure bounds the real footprint.
    pub fn heap_size(&self) -> usize {
        chunk(self.fields.capacity() * std::mem::size_of::<Field>())
            + self
                .fields
                .iter()
                .map(|f| {
                    chunk(f.name.len())
                        // a builder holds three buffers (its output, the last value
                        // and the values waiting for a block)
                        + f.builder.as_ref().map_or(0, |b| chunk(b.heap_size()) + 48)
                        + f.column.as_ref().map_or(0, |c| chunk(c.len()))
                })
                .sum::<usize>()
    }

    /// Append the measurements `docs` (each a whole BSON document), leaving out the field
    /// named `skip_field` (the meta field). All or nothing.
    pub fn append<'a>(
        &mut self,
        docs: impl IntoIterator<Item = &'a [u8]>,
        skip_field: Option<&str>,
    ) -> Result<Appended, AppendError> {
        self.append_collecting(docs.into_iter().map(Row::Document), skip_field, None)
    }

    /// `append`, handing each document's top-level fields (the skipped one left out) to
    /// `collect` as it reads them, for the control's fold to take without iterating the
    /// documents again. A value the control cannot read leaves `collect` None (the
    /// columns decide for themselves). A document is given whole or as the scan read it
    /// (`Row`).
    pub(crate) fn append_collecting<'a>(
        &mut self,
        docs: impl IntoIterator<Item = Row<'a>>,
        skip_field: Option<&str>,
        collect: Option<&mut Option<Checked<'a>>>,
    ) -> Result<Appended, AppendError> {
        let (new_names, values, n) = self.parse(docs, skip_field, collect)?;
        if n == 0 {
            return Ok(Appended {
                changes: Vec::new(),
                delta: 0,
                uncompressed: 0,
            });
        }
        let base = self.count;
        let uncompressed = values
            .iter()
            .map(|v| 2 + digits(base + v.row) + v.v.len())
            .sum();
        let existing = self.fields.len();
        let total = existing + new_names.len();
        // values by field (stable: rows stay in order)
        let mut starts = vec![0usize; total + 1];
        for v in &values {
            starts[v.field + 1] += 1;
        }
        for i in 0..total {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut order = vec![0usize; values.len()];
        for (i, v) in values.iter().enumerate() {
            order[next[v.field]] = i;
            next[v.field] += 1;
        }
        // Existing builders are appended to in place from a checkpoint (rolled back if any
        // column fails), new fields get builders of their own: no column is copied whole
        // but by its finalize.
        let mut checkpoints = Vec::with_capacity(existing);
        let mut fresh: Vec<ColumnBuilder> = Vec::with_capacity(total - existing);
        let mut columns = Vec::with_capacity(total);
        let mut failed = None;
        for f in 0..total {
            let mine = &order[starts[f]..starts[f + 1]];
            let mut k = 0;
            let rows = (0..n).map(|r| match mine.get(k) {
                Some(&i) if values[i].row == r => {
                    k += 1;
                    Some((values[i].t, values[i].v))
                }
                _ => None,
            });
            let existing_builder = self.fields.get_mut(f).and_then(|x| x.builder.as_mut());
            let b = match existing_builder {
                Some(b) => {
                    checkpoints.push((f, b.checkpoint()));
                    b
                }
                None => {
                    let mut b = ColumnBuilder::new();
                    if let Err(e) = b.skip(base) {
                        failed = Some(e);
                        break;
                    }
                    fresh.push(b);
                    fresh.last_mut().expect("just pushed")
                }
            };
            // an existing builder failing part-way is rolled back to its checkpoint below,
            // a fresh one dropped
            match b.extend_from_checkpoint(rows).and_then(|()| b.finalize()) {
                Ok(column) => columns.push(column),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            for (f, c) in checkpoints {
                if let Some(b) = self.fields[f].builder.as_mut() {
                    b.rollback(c);
                }
            }
            return Err(e.into());
        }
        let mut fresh = fresh.into_iter();
        // every column finalized: commit
        if !new_names.is_empty() {
            self.fields.reserve_exact(new_names.len());
            for name in &new_names {
                self.fields.push(Field {
                    name: (*name).into(),
                    builder: None,
                    column: None,
                });
            }
        }
        let mut changes = Vec::with_capacity(total);
        let mut delta = 0i64;
        for (f, column) in columns.into_iter().enumerate() {
            let field = &mut self.fields[f];
            if field.builder.is_none() {
                field.builder = fresh.next();
            }
            let change = match &field.column {
                None => {
                    delta += column.len() as i64;
                    Change {
                        field: f,
                        is_new: true,
                        offset: 0,
                    }
                }
                Some(prev) => {
                    delta += column.len() as i64 - prev.len() as i64;
                    Change {
                        field: f,
                        is_new: false,
                        offset: common_prefix(prev, &column),
                    }
                }
            };
            changes.push(change);
            field.column = Some(column.into_boxed_slice());
        }
        self.count = base + n;
        self.compressed_size = (self.compressed_size as i64 + delta) as usize;
        Ok(Appended {
            changes,
            delta,
            uncompressed,
        })
    }

    /// Every value of `docs` but the `skip_field` ones, with its field (an existing
    /// index, or `fields.len()` + position in the new names returned), in row order; and
    /// the number of documents.
    #[allow(clippy::type_complexity)]
    fn parse<'a>(
        &self,
        docs: impl IntoIterator<Item = Row<'a>>,
        skip_field: Option<&str>,
        mut collect: Option<&mut Option<Checked<'a>>>,
    ) -> Result<(Vec<&'a str>, Vec<Value<'a>>, usize), AppendError> {
        const MALFORMED: AppendError = AppendError::Declined("a malformed document");
        let existing = self.fields.len();
        let mut names: Vec<&str> = self.fields.iter().map(|f| &*f.name).collect();
        let mut new_names: Vec<&'a str> = Vec::new();
        let docs = docs.into_iter();
        // documents mostly have the fields the columns have
        let mut values: Vec<Value<'a>> = Vec::with_capacity(docs.size_hint().0 * existing);
        // per field, the last row (+1) that gave it a value
        let mut seen: Vec<usize> = vec![0; existing];
        let mut map: Option<HashMap<&str, usize>> = None;
        let mut hint = 0usize;
        // one value of a field other than the skipped one
        let mut add = |row: usize, key: &'a str, t: u8, v: &'a [u8]| {
            if (t == T_OBJECT || t == T_ARRAY) && v.len() != 5 {
                return Err(AppendError::Declined("an object or array with fields"));
            }
            let field = if names.get(hint) == Some(&key) {
                hint
            } else {
                if map.is_none() && names.len() > SCAN_MAX {
                    map = Some(names.iter().enumerate().map(|(i, k)| (*k, i)).collect());
                }
                let found = match &map {
                    Some(m) => m.get(key).copied(),
                    None => names.iter().position(|k| *k == key),
                };
                match found {
                    Some(i) => i,
                    None => {
                        let i = names.len();
                        names.push(key);
                        new_names.push(key);
                        seen.push(0);
                        if let Some(m) = &mut map {
                            m.insert(key, i);
                        }
                        i
                    }
                }
            };
            hint = field + 1;
            if seen[field] == row + 1 {
                return Err(AppendError::Declined("a field twice in one document"));
            }
            seen[field] = row + 1;
            values.push(Value { field, row, t, v });
            Ok(())
        };
        let mut n = 0usize;
        for (row, doc) in docs.enumerate() {
            n = row + 1;
            match doc {
                Row::Document(doc) => {
                    let raw = RawDocument::from_bytes(doc).map_err(|_| MALFORMED)?;
                    let mut pos = 4usize;
                    for element in raw.iter_elements() {
                        let element = element.map_err(|_| MALFORMED)?;
                        let name = element.key();
                        let key: &'a str = name.as_str();
                        // the iterator read the type byte, the key and its NUL, then the
                        // value
                        let start = pos + 1 + key.len() + 1;
                        let end = start + element.size();
                        pos = end;
                        let v = doc.get(start..end).ok_or(MALFORMED)?;
                        let t = element.element_type() as u8;
                        if let Some(slot) = collect.as_deref_mut() {
                            // the skipped field's value is read too, as iterating the
                            // document reads it (the control's own `update` refuses a
                            // batch it cannot read)
                            match (
                                slot.as_mut(),
                                fixed_width(t, v).map_or_else(|| element.value(), Ok),
                            ) {
                                (Some(_), Ok(_)) if skip_field == Some(key) => {}
                                (Some(fields), Ok(value)) => fields.fields.push((name, value)),
                                _ => *slot = None,
                            }
                        }
                        if skip_field != Some(key) {
                            add(row, key, t, v)?;
                        }
                    }
                }
                Row::Shaped(s) => {
                    // the scan read the document (the skipped field is not among these)
                    let fields = s.names.iter().zip(s.types).zip(s.spans);
                    for ((&name, &t), &(start, end)) in fields {
                        let v = s.doc.get(start as usize..end as usize).ok_or(MALFORMED)?;
                        let value = fixed_width(t, v).ok_or(MALFORMED)?;
                        if let Some(Some(fields)) = collect.as_deref_mut() {
                            fields.fields.push((name, value));
                        }
                        add(row, name.as_str(), t, v)?;
                    }
                }
            }
            if let Some(Some(fields)) = collect.as_deref_mut() {
                fields.ends.push(fields.fields.len());
            }
        }
        Ok((new_names, values, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsoncolumn::values::{T_DATE, T_INT32, T_STRING};
    use bson::rawdoc;

    fn column(rows: &[Option<(u8, &[u8])>]) -> Vec<u8> {
        let mut b = ColumnBuilder::new();
        b.extend(rows.iter().copied()).unwrap();
        b.finalize().unwrap()
    }

    fn i32v(x: i32) -> [u8; 4] {
        x.to_le_bytes()
    }

    #[test]
    fn first_appearance_order_and_skips() {
        let d1 = rawdoc! {"a": 1, "t": bson::DateTime::from_millis(7), "m": {"x": 1}};
        let d2 = rawdoc! {"b": "s", "t": bson::DateTime::from_millis(8)};
        let mut c = BucketColumns::new(Some("t"));
        let done = c.append([d1.as_bytes(), d2.as_bytes()], Some("m")).unwrap();
        assert_eq!(c.names().collect::<Vec<_>>(), ["t", "a", "b"]);
        let s = b"\x02\0\0\0s\0";
        let expected = [
            column(&[
                Some((T_DATE, &7i64.to_le_bytes())),
                Some((T_DATE, &8i64.to_le_bytes())),
            ]),
            column(&[Some((T_INT32, &i32v(1))), None]),
            column(&[None, Some((T_STRING, s))]),
        ];
        let got: Vec<&[u8]> = c.column_bytes().map(|(_, b)| b).collect();
        assert_eq!(got, expected.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(done.changes.iter().all(|ch| ch.is_new && ch.offset == 0));
        assert_eq!(
            done.delta,
            expected.iter().map(|e| e.len() as i64).sum::<i64>()
        );
        assert_eq!(c.compressed_size() as i64, done.delta);
        // a third row without "a" or "b": skips for both
        let d3 = rawdoc! {"t": bson::DateTime::from_millis(9)};
        let done = c.append([d3.as_bytes()], Some("m")).unwrap();
        assert_eq!(done.changes.len(), 3);
        assert!(done.changes.iter().all(|ch| !ch.is_new));
        let a = column(&[Some((T_INT32, &i32v(1))), None, None]);
        assert_eq!(c.field(1).1.unwrap(), a.as_slice());
        assert_eq!(c.count(), 3);
    }

    #[test]
    fn a_declined_append_leaves_the_columns() {
        let mut c = BucketColumns::new(Some("t"));
        let ok = rawdoc! {"t": 1, "a": 2};
        c.append([ok.as_bytes()], None).unwrap();
        let before = c.clone();
        let nested = rawdoc! {"t": 1, "z": {"x": 1}};
        let arr = rawdoc! {"t": 1, "z": [1]};
        let mut dup = rawdoc! {"t": 1, "q": 1};
        dup.append(bson::cstr!("q"), 2);
        for bad in [
            nested.as_bytes(),
            arr.as_bytes(),
            dup.as_bytes(),
            &b"\x05\0\0\0\x01"[..],
        ] {
            assert!(c.append([ok.as_bytes(), bad], None).is_err());
            assert_eq!(
                c.names().collect::<Vec<_>>(),
                before.names().collect::<Vec<_>>()
            );
            assert!(c.column_bytes().eq(before.column_bytes()));
            assert_eq!(c.count(), 1);
        }
        // empty objects and arrays are scalars to a column
        let empty = rawdoc! {"t": 1, "e": {}, "f": []};
        c.append([empty.as_bytes()], None).unwrap();
    }

    #[test]
    fn reopened_columns_continue_alike() {
        let mut c = BucketColumns::new(Some("t"));
        let docs: Vec<_> = (0..50)
            .map(|i| rawdoc! {"t": bson::DateTime::from_millis(i * 1000), "v": i * 3, "s": "ab"})
            .collect();
        c.append(docs[..30].iter().map(|d| d.as_bytes()), None)
            .unwrap();
        let data: Vec<(String, Vec<u8>)> = c
            .column_bytes()
            .map(|(n, b)| (n.to_owned(), b.to_vec()))
            .collect();
        let mut r =
            BucketColumns::from_data(data.iter().map(|(n, b)| (n.as_str(), b.as_slice())), 30)
                .unwrap();
        assert_eq!(r.compressed_size(), c.compressed_size());
        let a = c
            .append(docs[30..].iter().map(|d| d.as_bytes()), None)
            .unwrap();
        let b = r
            .append(docs[30..].iter().map(|d| d.as_bytes()), None)
            .unwrap();
        assert_eq!(a, b);
        assert!(c.column_bytes().eq(r.column_bytes()));
        assert!(BucketColumns::from_data([("a", &b"\x01"[..])], 1).is_err());
        assert!(BucketColumns::from_data([("a", &[0u8][..]), ("a", &[0u8][..])], 0).is_err());
    }

    #[test]
    fn many_fields_use_the_map() {
        let mut d = bson::RawDocumentBuf::new();
        for i in 0..100 {
            d.append(bson::raw::CString::try_from(format!("f{i}")).unwrap(), i);
        }
        let mut r = bson::RawDocumentBuf::new();
        for i in (0..100).rev() {
            r.append(bson::raw::CString::try_from(format!("f{i}")).unwrap(), i);
        }
        let mut c = BucketColumns::new(None);
        c.append([d.as_bytes(), r.as_bytes()], None).unwrap();
        assert_eq!(c.len(), 100);
        c.append([r.as_bytes()], None).unwrap();
        assert_eq!(c.len(), 100);
        assert_eq!(
            c.field(5).1.unwrap(),
            column(&[
                Some((T_INT32, &i32v(5))),
                Some((T_INT32, &i32v(5))),
                Some((T_INT32, &i32v(5)))
            ])
        );
    }

    #[test]
    fn sizes() {
        // the field table holds builders inline: keep this in view when it grows
        assert!(
            std::mem::size_of::<Field>() <= 320,
            "{}",
            std::mem::size_of::<Field>()
        );
        assert_eq!(chunk(0), 0);
        assert_eq!(chunk(1), 32);
        assert_eq!(chunk(24), 32);
        assert_eq!(chunk(25), 48);
    }

    #[test]
    fn common_prefix_finds_the_first_difference() {
        assert_eq!(common_prefix(b"", b"abc"), 0);
        let a: Vec<u8> = (0..40).collect();
        let mut b = a.clone();
        b[33] = 0;
        assert_eq!(common_prefix(&a, &b), 33);
        assert_eq!(common_prefix(&a, &a[..20]), 20);
    }

    #[test]
    fn fuzz_property_holds_on_samples() {
        let d1 = rawdoc! {"t": 1, "m": {"x": 1}, "a": "é", "b": 1.5};
        let d2 = rawdoc! {"b": 2, "t": 2, "c": []};
        let mut data = vec![3u8];
        data.extend_from_slice(d1.as_bytes());
        data.extend_from_slice(d2.as_bytes());
        for sel in 0..12u8 {
            data[0] = sel;
            super::super::fuzzing::check_append(&data);
            for cut in [1, 7, 20, data.len() - 1] {
                super::super::fuzzing::check_append(&data[..cut]);
                let mut bad = data.clone();
                bad[cut] ^= 0x5a;
                super::super::fuzzing::check_append(&bad);
            }
        }
    }

    #[test]
    fn a_column_failing_after_others_were_extended_rolls_them_all_back() {
        let d1 = rawdoc! {"t": bson::DateTime::from_millis(7), "a": 1, "b": true};
        let mut c = BucketColumns::new(Some("t"));
        c.append([d1.as_bytes()], None).unwrap();
        let before: Vec<(String, Vec<u8>)> = c
            .column_bytes()
            .map(|(n, b)| (n.to_owned(), b.to_vec()))
            .collect();
        // "t" and "a" take their values before "b" meets a bool that is neither 0 nor 1
        let good = rawdoc! {"t": bson::DateTime::from_millis(8), "a": 2, "b": true};
        let mut bad = good.as_bytes().to_vec();
        let at = bad.len() - 2;
        bad[at] = 2;
        assert!(c.append([good.as_bytes(), &bad[..]], None).is_err());
        let after: Vec<(String, Vec<u8>)> = c
            .column_bytes()
            .map(|(n, b)| (n.to_owned(), b.to_vec()))
            .collect();
        assert_eq!(after, before);
        assert_eq!(c.count(), 1);
        // and the builders continue as if the failed call never happened
        let mut fresh = BucketColumns::new(Some("t"));
        fresh.append([d1.as_bytes()], None).unwrap();
        c.append([good.as_bytes()], None).unwrap();
        fresh.append([good.as_bytes()], None).unwrap();
        assert!(c.column_bytes().eq(fresh.column_bytes()));
    }
}
