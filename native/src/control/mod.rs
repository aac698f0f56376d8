//! A bucket's `control.min` / `control.max` and its schema, over raw BSON.
//!
//! The reference is `storage/timeseries/minmax.py` (`MinMax`, `Schema`: MongoDB's FlatBSON
//! rules, the lock-step insertion order of fields, the array-entry claiming of `_search`
//! and its 12-step limit, the meta field skipped at the top level) with the value order
//! of `storage/bson_order.py`. This module reproduces their results on the measurements'
//! raw bytes: `order` compares raw values, `minmax` and `schema` keep the two trees,
//! `bindings` is the Python class `_native.Control`.
//!
//! The Python reference works on values decoded with `storage.bsonutil.CODEC_OPTIONS`,
//! and decoding changes a few values (a symbol becomes a string, undefined becomes
//! null, a sub-document with `$ref` becomes a `DBRef`, regex options are normalised,
//! a repeated field name keeps its first position and its last value). Where the result
//! would depend on that, or where the order is not reproduced (code with scope), the
//! work is *declined* (`Fail::Declined`) and the caller keeps the Python reference for
//! the bucket. A batch is checked whole before any of it is applied, so a declined or
//! malformed batch leaves the state as it was.

pub mod bindings;
pub mod minmax;
pub mod order;
pub mod schema;

use bson::raw::{CStr, CString, RawBsonRef, RawDocument};

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// Malformed BSON: `NativeError(InvalidBSON)`.
    Invalid(String),
    /// The Python reference would give a result this module does not reproduce.
    Declined(String),
}

impl From<bson::error::Error> for Fail {
    fn from(e: bson::error::Error) -> Self {
        Fail::Invalid(e.to_string())
    }
}

/// Deepest nesting accepted (the top-level document is depth 0); deeper is declined.
pub const MAX_DEPTH: usize = 200;

/// Steps of `_search`'s linear phase, the only one that claims array entries.
const MAX_LINEAR: usize = 12;

/// The name of a tree node: `None` for an entry created by an array element, which an
/// object may later claim (the reference's `ARRAY_NAME`).
pub(crate) trait Named {
    fn name(&self) -> Option<&str>;
    fn set_name(&mut self, name: CString);
    fn named(name: Option<CString>) -> Self;
}

/// Whether some child is called `name`.
fn has_name<N: Named>(children: &[N], name: &str) -> bool {
    children.iter().any(|c| c.name() == Some(name))
}

/// Renames an array entry; says whether that made two children of one name.
fn claim<N: Named>(children: &mut [N], i: usize, name: &CStr) -> bool {
    let dup = has_name(children, name.as_str());
    children[i].set_name(name.into());
    dup
}

/// `_search`: index of `name` in `children[start..stop]`, claiming an array entry met
/// within the first 12 steps, else `stop`.
fn search<N: Named>(
    children: &mut [N],
    start: usize,
    stop: usize,
    name: &CStr,
    dup: &mut bool,
) -> usize {
    let wanted = name.as_str();
    for (steps, i) in (start..stop).enumerate() {
        match children[i].name() {
            Some(n) if n == wanted => return i,
            None if steps < MAX_LINEAR => {
                *dup |= claim(children, i, name);
                return i;
            }
            _ => {}
        }
    }
    stop
}

/// `_locate`: the lock-step walk of one object's fields against a node's children.
pub(crate) struct Locator {
    it: usize,
    handled: usize,
    skipped: bool,
    /// Set when a claim or an insertion gave two children the same name (possible
    /// after an array became an object at a path); rendering then does as a dict does.
    pub dup: bool,
}

impl Locator {
    pub fn new() -> Self {
        Locator {
            it: 0,
            handled: 0,
            skipped: false,
            dup: false,
        }
    }

    /// A walk of `fields` fields (at least) into `children`: a node without children yet
    /// takes room for all of them at once, not growing child by child.
    pub fn with_room<N>(children: &mut Vec<N>, fields: usize) -> Self {
        if children.is_empty() {
            children.reserve_exact(fields);
        }
        Self::new()
    }

    fn insert<N: Named>(&mut self, children: &mut Vec<N>, at: usize, name: &CStr) {
        self.dup |= has_name(children, name.as_str());
        children.insert(at, N::named(Some(name.into())));
    }

    /// The index of the child for the next field, `name`, inserting it where the
    /// reference inserts it.
    pub fn locate<N: Named>(&mut self, children: &mut Vec<N>, name: &CStr) -> usize {
        let end = children.len();
        if self.it == end && self.skipped {
            self.it = search(children, self.handled, end, name, &mut self.dup);
        }
        if self.it == end {
            self.insert(children, end, name);
        } else {
            let it = self.it;
            match children[it].name() {
                None => self.dup |= claim(children, it, name),
                Some(n) if n == name.as_str() => {}
                Some(_) => {
                    let found = search(children, it + 1, end, name, &mut self.dup);
                    if found == end {
                        if self.skipped {
                            let back = search(children, self.handled, it, name, &mut self.dup);
                            if back == it {
                                self.insert(children, it, name);
                            } else {
                                self.it = back;
                            }
                        } else {
                            self.insert(children, it, name);
                        }
                    } else {
                        self.it = found;
                        self.skipped = true;
                    }
                }
            }
        }
        let at = self.it;
        self.it += 1;
        if !self.skipped {
            self.handled += 1;
        }
        at
    }
}

/// The documents of a batch: back to back from the start of `buf` when `offsets` is
/// None, else the one starting at each offset.
pub fn documents<'a>(buf: &'a [u8], offsets: Option<&[i64]>) -> Result<Vec<&'a RawDocument>, Fail> {
    let mut out = Vec::new();
    match offsets {
        Some(offs) => {
            out.reserve(offs.len());
            for (i, &off) in offs.iter().enumerate() {
                let pos = usize::try_from(off)
                    .map_err(|_| Fail::Invalid(format!("document {i}: negative offset {off}")))?;
                out.push(document_at(buf, pos, i)?.0);
            }
        }
        None => {
            let mut pos = 0;
            while pos < buf.len() {
                let (doc, next) = document_at(buf, pos, out.len())?;
                out.push(doc);
                pos = next;
            }
        }
    }
    Ok(out)
}

/// The document at `pos` (its int32 size checked against the buffer) and where it ends.
fn document_at(buf: &[u8], pos: usize, i: usize) -> Result<(&RawDocument, usize), Fail> {
    let bad = |what: &str| Fail::Invalid(format!("document {i} at {pos}: {what}"));
    let head = buf
        .get(pos..pos.saturating_add(4))
        .filter(|h| h.len() == 4)
        .ok_or_else(|| bad("runs past the end of the buffer"))?;
    let size = i32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if size < 5 {
        return Err(bad("invalid size"));
    }
    let end = pos
        .checked_add(size as usize)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| bad("runs past the end of the buffer"))?;
    let doc = RawDocument::from_bytes(&buf[pos..end]).map_err(|e| bad(&e.to_string()))?;
    Ok((doc, end))
}

/// Which decoded-value differences a check declines.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// For min/max: the values themselves are kept and compared.
    MinMax,
    /// For the schema: only the canonical type of each value matters.
    Schema,
}

/// One top-level field of a checked batch.
pub(crate) type Field<'a> = (&'a CStr, RawBsonRef<'a>);

/// A batch checked whole: every document's top-level fields (the skipped one left
/// out), parsed once and kept for the fold, and where each document's fields end.
pub(crate) struct Checked<'a> {
    pub fields: Vec<Field<'a>>,
    pub ends: Vec<usize>,
    /// Whether each document has the same field names, in order, as the one before.
    pub same_names: Vec<bool>,
}

impl<'a> Checked<'a> {
    /// Room for `docs` documents of about `fields` fields each.
    pub fn with_capacity(docs: usize, fields: usize) -> Self {
        Checked {
            fields: Vec::with_capacity(docs * fields.max(8)),
            ends: Vec::with_capacity(docs),
            same_names: Vec::with_capacity(docs),
        }
    }

    /// The documents' fields, one slice per document.
    pub fn documents(&self) -> impl Iterator<Item = &[Field<'a>]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let doc = &self.fields[start..end];
            start = end;
            doc
        })
    }
}

/// Checks a batch whole before any of it is applied: well-formed, not too deep, and
/// free of what decoding would change (see the module doc). Every document is read
/// before any value is checked, so a malformed one refuses the batch as InvalidBSON, as
/// the reference's decoding of the whole batch does.
pub(crate) fn check_batch<'a>(
    docs: &[&'a RawDocument],
    gate: Gate,
    skip: Option<&str>,
) -> Result<Checked<'a>, Fail> {
    let mut out = Checked::with_capacity(docs.len(), 8);
    for (i, d) in docs.iter().enumerate() {
        for item in d.iter() {
            let (key, value) = item.map_err(|e| in_document(i, e.into()))?;
            if skip == Some(key.as_str()) {
                continue; // the meta field: not part of min/max or the schema
            }
            out.fields.push((key, value));
        }
        out.ends.push(out.fields.len());
    }
    check_parsed(out, gate)
}

/// The checks of `check_batch` on a batch read already: `out` holds the documents'
/// top-level fields (the skipped one left out) and where each document's fields end,
/// and gets `same_names` here.
pub(crate) fn check_parsed(mut out: Checked<'_>, gate: Gate) -> Result<Checked<'_>, Fail> {
    out.same_names.clear();
    let mut names: Vec<&str> = Vec::new();
    let mut prev = 0..0;
    let mut start = 0;
    for (i, &end) in out.ends.iter().enumerate() {
        let this = start..end;
        let fields = &out.fields[this.clone()];
        for &(_, value) in fields {
            check_value(value, gate, 0, &mut names).map_err(|f| in_document(i, f))?;
        }
        // Measurements mostly repeat the previous one's names: then they are distinct.
        let same = i > 0
            && this.len() == prev.len()
            && fields
                .iter()
                .zip(&out.fields[prev.clone()])
                .all(|(a, b)| a.0.as_str() == b.0.as_str());
        if !same {
            names.clear();
            names.extend(fields.iter().map(|f| f.0.as_str()));
            if has_duplicates(&mut names) {
                return Err(in_document(
                    i,
                    Fail::Declined("a field name is repeated".into()),
                ));
            }
        }
        out.same_names.push(same);
        prev = this;
        start = end;
    }
    Ok(out)
}

fn in_document(i: usize, f: Fail) -> Fail {
    match f {
        Fail::Invalid(m) => Fail::Invalid(format!("document {i}: {m}")),
        Fail::Declined(m) => Fail::Declined(format!("document {i}: {m}")),
    }
}

/// Checks a sub-document; `names` is scratch space, left as it was found.
fn check_doc<'a>(
    d: &'a RawDocument,
    gate: Gate,
    depth: usize,
    names: &mut Vec<&'a str>,
) -> Result<(), Fail> {
    if depth > MAX_DEPTH {
        return Err(Fail::Declined("nested too deeply".into()));
    }
    let base = names.len();
    for item in d.iter() {
        let (key, value) = item?;
        let key = key.as_str();
        if key == "$ref" {
            return Err(Fail::Declined(
                "a sub-document with $ref decodes as a DBRef".into(),
            ));
        }
        check_value(value, gate, depth, names)?;
        names.push(key);
    }
    let dup = has_duplicates(&mut names[base..]);
    names.truncate(base);
    if dup {
        return Err(Fail::Declined("a field name is repeated".into()));
    }
    Ok(())
}

fn check_value<'a>(
    v: RawBsonRef<'a>,
    gate: Gate,
    depth: usize,
    names: &mut Vec<&'a str>,
) -> Result<(), Fail> {
    match v {
        RawBsonRef::Document(d) => check_doc(d, gate, depth + 1, names),
        RawBsonRef::Array(a) => {
            if depth + 1 > MAX_DEPTH {
                return Err(Fail::Declined("nested too deeply".into()));
            }
            for e in a {
                check_value(e?, gate, depth + 1, names)?;
            }
            Ok(())
        }
        RawBsonRef::Undefined => Err(Fail::Declined("undefined decodes as null".into())),
        RawBsonRef::DbPointer(_) => Err(Fail::Declined("a DBPointer decodes as a DBRef".into())),
        RawBsonRef::Symbol(_) if gate == Gate::MinMax => {
            Err(Fail::Declined("a symbol decodes as a string".into()))
        }
        RawBsonRef::JavaScriptCodeWithScope(_) if gate == Gate::MinMax => Err(Fail::Declined(
            "code with scope is not ordered natively".into(),
        )),
        RawBsonRef::RegularExpression(r)
            if gate == Gate::MinMax && !canonical_regex_options(r.options.as_str()) =>
        {
            Err(Fail::Declined("regex options decode normalised".into()))
        }
        _ => Ok(()),
    }
}

/// Options the decoder gives back unchanged: distinct letters of "ilmsux", in order.
pub(crate) fn canonical_regex_options(options: &str) -> bool {
    let mut rest = "ilmsux";
    for c in options.chars() {
        match rest.find(c) {
            Some(i) => rest = &rest[i + 1..],
            None => return false,
        }
    }
    true
}

/// Whether two of `names` are equal (may reorder them).
fn has_duplicates(names: &mut [&str]) -> bool {
    if names.len() <= 16 {
        for (i, a) in names.iter().enumerate() {
            if names[..i].iter().any(|b| b.len() == a.len() && b == a) {
                return true;
            }
        }
        false
    } else {
        names.sort_unstable();
        names.windows(2).any(|w| w[0] == w[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_options() {
        assert!(canonical_regex_options(""));
        assert!(canonical_regex_options("imx"));
        assert!(canonical_regex_options("ilmsux"));
        assert!(!canonical_regex_options("mi"));
        assert!(!canonical_regex_options("ii"));
        assert!(!canonical_regex_options("a"));
    }

    #[test]
    fn duplicates() {
        assert!(!has_duplicates(&mut ["a", "b", "c"]));
        assert!(has_duplicates(&mut ["a", "b", "a"]));
        let mut many: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let mut refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(!has_duplicates(&mut refs));
        many.push("f3".into());
        let mut refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(has_duplicates(&mut refs));
    }

    #[test]
    fn framing() {
        assert!(matches!(documents(&[1, 0], None), Err(Fail::Invalid(_))));
        assert!(matches!(
            documents(&[4, 0, 0, 0], None),
            Err(Fail::Invalid(_))
        ));
        assert!(matches!(
            documents(&[9, 0, 0, 0, 0], None),
            Err(Fail::Invalid(_))
        ));
        assert_eq!(
            documents(&[5, 0, 0, 0, 0, 5, 0, 0, 0, 0], None)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(documents(&[5, 0, 0, 0, 0], Some(&[0, 0])).unwrap().len(), 2);
        assert!(matches!(
            documents(&[5, 0, 0, 0, 0], Some(&[-1])),
            Err(Fail::Invalid(_))
        ));
        assert!(matches!(
            documents(&[5, 0, 0, 0, 0], Some(&[3])),
            Err(Fail::Invalid(_))
        ));
    }
}
