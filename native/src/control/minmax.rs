//! `control.min` / `control.max` of a bucket: `MinMax` of `storage/timeseries/minmax.py`.
//!
//! One tree of nodes, one per path, each with a min side and a max side (unset, object,
//! array or a scalar value); children in the reference's insertion order. A batch is
//! checked whole (`check_batch`) before it is folded in, so folding cannot fail.

use std::cmp::Ordering;

use bson::oid::ObjectId;
use bson::raw::{
    CString, RawArrayBuf, RawBinaryRef, RawBsonRef, RawDocument, RawDocumentBuf, RawRegexRef,
};
use bson::spec::BinarySubtype;
use bson::{DateTime, Decimal128, Timestamp};

use super::order::{compare, rank, RANK_ARRAY, RANK_OBJECT};
use super::{check_batch, Checked, Fail, Field, Gate, Locator, Named};

/// A scalar kept as a min or a max: the types `check_batch` lets through.
#[derive(Clone, Debug)]
pub enum Value {
    MinKey,
    MaxKey,
    Null,
    Int32(i32),
    Int64(i64),
    Double(f64),
    Decimal128([u8; 16]),
    Str(Box<str>),
    Code(Box<str>),
    Binary(u8, Box<[u8]>),
    ObjectId([u8; 12]),
    Bool(bool),
    Date(i64),
    Timestamp(u32, u32),
    Regex(Box<(CString, CString)>),
}

impl Value {
    /// The value of a checked scalar; `Declined` for what the gate refuses.
    pub fn from_ref(v: RawBsonRef<'_>) -> Result<Value, Fail> {
        Ok(match v {
            RawBsonRef::MinKey => Value::MinKey,
            RawBsonRef::MaxKey => Value::MaxKey,
            RawBsonRef::Null => Value::Null,
            RawBsonRef::Int32(x) => Value::Int32(x),
            RawBsonRef::Int64(x) => Value::Int64(x),
            RawBsonRef::Double(x) => Value::Double(x),
            RawBsonRef::Decimal128(d) => Value::Decimal128(d.bytes()),
            RawBsonRef::String(s) => Value::Str(s.into()),
            RawBsonRef::JavaScriptCode(s) => Value::Code(s.into()),
            RawBsonRef::Binary(b) => Value::Binary(u8::from(b.subtype), b.bytes.into()),
            RawBsonRef::ObjectId(o) => Value::ObjectId(o.bytes()),
            RawBsonRef::Boolean(x) => Value::Bool(x),
            RawBsonRef::DateTime(d) => Value::Date(d.timestamp_millis()),
            RawBsonRef::Timestamp(t) => Value::Timestamp(t.time, t.increment),
            RawBsonRef::RegularExpression(r) => {
                Value::Regex(Box::new((r.pattern.into(), r.options.into())))
            }
            other => {
                return Err(Fail::Declined(format!(
                    "{:?} is not kept natively",
                    other.element_type()
                )))
            }
        })
    }

    pub fn as_ref(&self) -> RawBsonRef<'_> {
        match self {
            Value::MinKey => RawBsonRef::MinKey,
            Value::MaxKey => RawBsonRef::MaxKey,
            Value::Null => RawBsonRef::Null,
            Value::Int32(x) => RawBsonRef::Int32(*x),
            Value::Int64(x) => RawBsonRef::Int64(*x),
            Value::Double(x) => RawBsonRef::Double(*x),
            Value::Decimal128(d) => RawBsonRef::Decimal128(Decimal128::from_bytes(*d)),
            Value::Str(s) => RawBsonRef::String(s),
            Value::Code(s) => RawBsonRef::JavaScriptCode(s),
            Value::Binary(t, b) => RawBsonRef::Binary(RawBinaryRef {
                subtype: BinarySubtype::from(*t),
                bytes: b,
            }),
            Value::ObjectId(o) => RawBsonRef::ObjectId(ObjectId::from_bytes(*o)),
            Value::Bool(x) => RawBsonRef::Boolean(*x),
            Value::Date(ms) => RawBsonRef::DateTime(DateTime::from_millis(*ms)),
            Value::Timestamp(time, increment) => RawBsonRef::Timestamp(Timestamp {
                time: *time,
                increment: *increment,
            }),
            Value::Regex(r) => RawBsonRef::RegularExpression(RawRegexRef {
                pattern: &r.0,
                options: &r.1,
            }),
        }
    }

    fn rank(&self) -> i32 {
        rank(&self.as_ref())
    }

    /// Bytes owned on the heap.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(s) | Value::Code(s) => s.len(),
            Value::Binary(_, b) => b.len(),
            Value::Regex(r) => {
                std::mem::size_of::<(CString, CString)>() + r.0.as_str().len() + r.1.as_str().len()
            }
            _ => 0,
        }
    }

    /// Overwrites `self` with `v`, reusing its allocation when the kinds match.
    fn assign(&mut self, v: RawBsonRef<'_>) -> Result<(), Fail> {
        match (&mut *self, v) {
            (Value::Int64(x), RawBsonRef::Int64(y)) => *x = y,
            (Value::Int32(x), RawBsonRef::Int32(y)) => *x = y,
            (Value::Double(x), RawBsonRef::Double(y)) => *x = y,
            (Value::Date(x), RawBsonRef::DateTime(y)) => *x = y.timestamp_millis(),
            _ => *self = Value::from_ref(v)?,
        }
        Ok(())
    }
}

/// One side (min or max) of a node.
#[derive(Clone, Debug)]
pub enum Side {
    Unset,
    Object,
    Array,
    Value(Value),
}

/// One path.
#[derive(Clone, Debug)]
pub struct Node {
    name: Option<CString>,
    min: Side,
    max: Side,
    /// Two children have one name (see `Locator::dup`): render as a dict would.
    dup: bool,
    children: Vec<Node>,
}

impl Named for Node {
    fn name(&self) -> Option<&str> {
        self.name.as_ref().map(|n| n.as_str())
    }
    fn set_name(&mut self, name: CString) {
        self.name = Some(name);
    }
    fn named(name: Option<CString>) -> Self {
        Node {
            name,
            min: Side::Unset,
            max: Side::Unset,
            dup: false,
            children: Vec::new(),
        }
    }
}

impl Node {
    fn heap_size(&self) -> usize {
        let own = self.name.as_ref().map_or(0, |n| n.as_str().len())
            + side_heap(&self.min)
            + side_heap(&self.max)
            + self.children.capacity() * std::mem::size_of::<Node>();
        own + self.children.iter().map(Node::heap_size).sum::<usize>()
    }
}

fn side_heap(s: &Side) -> usize {
    match s {
        Side::Value(v) => v.heap_size(),
        _ => 0,
    }
}

/// The field-wise minimum and maximum of a bucket's measurements.
#[derive(Clone, Debug)]
pub struct MinMax {
    root: Node,
}

impl Default for MinMax {
    fn default() -> Self {
        Self::new()
    }
}

impl MinMax {
    pub fn new() -> Self {
        let mut root = Node::named(None);
        root.min = Side::Object;
        root.max = Side::Object;
        MinMax { root }
    }

    /// Folds the batch in, document by document (`MinMax.update` for each, or
    /// `update_many`); `skip` is the meta field. All or nothing.
    pub fn update_batch(&mut self, docs: &[&RawDocument], skip: Option<&str>) -> Result<(), Fail> {
        self.update_checked(&check_batch(docs, Gate::MinMax, skip)?)
    }

    /// `update_batch` of a batch checked already (for `Gate::MinMax`).
    pub(crate) fn update_checked(&mut self, checked: &Checked<'_>) -> Result<(), Fail> {
        let mut run: Vec<&[Field<'_>]> = Vec::new();
        let mut in_run = false;
        for (fields, &same) in checked.documents().zip(&checked.same_names) {
            // The root's children only change outside runs: a document named like the
            // one before, which followed, follows too.
            in_run = (same && in_run) || follows(&self.root.children, fields);
            if in_run {
                run.push(fields);
                continue;
            }
            fold_run(&mut self.root, &run)?;
            run.clear();
            update_obj(&mut self.root, fields.iter().map(|&f| Ok(f)), true, true)?;
        }
        fold_run(&mut self.root, &run)
    }

    /// `MinMax.from_control`: the state rebuilt from control.min and control.max.
    pub fn from_control(min: &RawDocument, max: &RawDocument) -> Result<MinMax, Fail> {
        let mut mm = MinMax::new();
        mm.update_batch(&[min, max], None)?;
        Ok(mm)
    }

    /// `control.min` as a BSON document.
    pub fn min(&self) -> Result<RawDocumentBuf, Fail> {
        render_obj(&self.root, true)
    }

    /// `control.max` as a BSON document.
    pub fn max(&self) -> Result<RawDocumentBuf, Fail> {
        render_obj(&self.root, false)
    }

    /// Bytes owned on the heap.
    pub fn heap_size(&self) -> usize {
        self.root.heap_size()
    }

    /// The minimum and maximum of top-level field `name` in milliseconds, when both are
    /// dates (a bucket's time field): None otherwise, or when two fields share the name.
    pub fn date_bounds(&self, name: &str) -> Option<(i64, i64)> {
        let mut found = self.root.children.iter().filter(|c| c.name() == Some(name));
        let node = found.next()?;
        if node.dup || found.next().is_some() {
            return None;
        }
        match (&node.min, &node.max) {
            (Side::Value(Value::Date(lo)), Side::Value(Value::Date(hi))) => Some((*lo, *hi)),
            _ => None,
        }
    }
}

/// Whether a measurement's fields are the root's first children, in order: the
/// lock-step walk then gives field `j` to child `j` and changes nothing else.
fn follows(children: &[Node], fields: &[Field<'_>]) -> bool {
    fields.len() <= children.len()
        && fields
            .iter()
            .zip(children)
            .all(|(f, c)| c.name() == Some(f.0.as_str()))
}

/// Folds a run of measurements that each `follows` the root, child by child: the
/// children are independent, so this is the fold document by document. A child's run
/// of scalars reduces to its first minimum and first maximum (what the reference's
/// `update_many` does for a family of comparable scalars, here for any scalars).
fn fold_run(root: &mut Node, run: &[&[Field<'_>]]) -> Result<(), Fail> {
    let width = run.iter().map(|f| f.len()).max().unwrap_or(0);
    for (j, child) in root.children.iter_mut().enumerate().take(width) {
        if let Some((lo, hi)) = numeric_extremes(run, j) {
            update_scalar(child, lo, true, false)?;
            update_scalar(child, hi, false, true)?;
            continue;
        }
        let mut lo: Option<RawBsonRef<'_>> = None;
        let mut hi: Option<RawBsonRef<'_>> = None;
        for fields in run {
            let Some(&(_, v)) = fields.get(j) else {
                continue;
            };
            match v {
                RawBsonRef::Document(_) | RawBsonRef::Array(_) => {
                    flush(child, &mut lo, &mut hi)?;
                    update(child, v, true, true)?;
                }
                _ => {
                    if lo.map_or(Ok(true), |l| compare(v, l).map(|o| o == Ordering::Less))? {
                        lo = Some(v);
                    }
                    if hi.map_or(Ok(true), |h| compare(v, h).map(|o| o == Ordering::Greater))? {
                        hi = Some(v);
                    }
                }
            }
        }
        flush(child, &mut lo, &mut hi)?;
    }
    Ok(())
}

/// The first minimum and first maximum of field `j` over the run when its values are all
/// int64, all int32, all dates or all doubles but NaN (a column's values mostly are):
/// compared as plain numbers, which is their order. None for any other run.
fn numeric_extremes<'a>(
    run: &[&[Field<'a>]],
    j: usize,
) -> Option<(RawBsonRef<'a>, RawBsonRef<'a>)> {
    let mut values = run.iter().filter_map(|f| f.get(j).map(|&(_, v)| v));
    macro_rules! extremes {
        ($first:expr, $variant:ident, |$x:ident| $read:expr) => {{
            let (mut lo, mut hi) = ($first, $first);
            for v in values {
                let RawBsonRef::$variant($x) = v else {
                    return None;
                };
                let x = $read;
                // strictly: of equal values (-0.0 and 0.0) the first one stays
                if x < lo {
                    lo = x;
                } else if x > hi {
                    hi = x;
                }
            }
            (lo, hi)
        }};
    }
    Some(match values.next()? {
        RawBsonRef::Int64(first) => {
            let (lo, hi) = extremes!(first, Int64, |n| n);
            (RawBsonRef::Int64(lo), RawBsonRef::Int64(hi))
        }
        RawBsonRef::Int32(first) => {
            let (lo, hi) = extremes!(first, Int32, |n| n);
            (RawBsonRef::Int32(lo), RawBsonRef::Int32(hi))
        }
        RawBsonRef::DateTime(first) => {
            let first = first.timestamp_millis();
            let (lo, hi) = extremes!(first, DateTime, |d| d.timestamp_millis());
            (
                RawBsonRef::DateTime(DateTime::from_millis(lo)),
                RawBsonRef::DateTime(DateTime::from_millis(hi)),
            )
        }
        RawBsonRef::Double(first) if !first.is_nan() => {
            // NaN orders below every number: left to the general fold
            let (lo, hi) = extremes!(first, Double, |d| if d.is_nan() {
                return None;
            } else {
                d
            });
            (RawBsonRef::Double(lo), RawBsonRef::Double(hi))
        }
        _ => return None,
    })
}

fn flush<'a>(
    node: &mut Node,
    lo: &mut Option<RawBsonRef<'a>>,
    hi: &mut Option<RawBsonRef<'a>>,
) -> Result<(), Fail> {
    if let Some(v) = lo.take() {
        update_scalar(node, v, true, false)?;
    }
    if let Some(v) = hi.take() {
        update_scalar(node, v, false, true)?;
    }
    Ok(())
}

/// The fields of an object (or of a measurement, its meta field left out) folded into
/// `node`'s children.
fn update_obj<'a>(
    node: &mut Node,
    fields: impl Iterator<Item = Result<Field<'a>, Fail>>,
    umin: bool,
    umax: bool,
) -> Result<(), Fail> {
    let mut loc = Locator::with_room(&mut node.children, fields.size_hint().0);
    for item in fields {
        let (key, value) = item?;
        let at = loc.locate(&mut node.children, key);
        update(&mut node.children[at], value, umin, umax)?;
    }
    node.dup |= loc.dup;
    Ok(())
}

fn update(node: &mut Node, value: RawBsonRef<'_>, umin: bool, umax: bool) -> Result<(), Fail> {
    match value {
        RawBsonRef::Document(d) => {
            let mut umin = umin;
            let mut umax = umax;
            if umin {
                umin = match &node.min {
                    Side::Object | Side::Unset | Side::Array => true,
                    Side::Value(v) => v.rank() > RANK_OBJECT,
                };
                if umin && !matches!(node.min, Side::Object) {
                    node.min = Side::Object;
                    node.children.iter_mut().for_each(|c| c.min = Side::Unset);
                }
            }
            if umax {
                umax = match &node.max {
                    Side::Object | Side::Unset => true,
                    Side::Array => false,
                    Side::Value(v) => v.rank() < RANK_OBJECT,
                };
                if umax && !matches!(node.max, Side::Object) {
                    node.max = Side::Object;
                    node.children.iter_mut().for_each(|c| c.max = Side::Unset);
                }
            }
            if umin || umax {
                update_obj(node, d.iter().map(|r| r.map_err(Fail::from)), umin, umax)?;
            }
        }
        RawBsonRef::Array(a) => {
            let mut umin = umin;
            let mut umax = umax;
            if umin {
                umin = match &node.min {
                    Side::Array | Side::Unset => true,
                    Side::Object => false,
                    Side::Value(v) => v.rank() > RANK_ARRAY,
                };
                if umin && !matches!(node.min, Side::Array) {
                    node.min = Side::Array;
                    node.children.iter_mut().for_each(|c| c.min = Side::Unset);
                }
            }
            if umax {
                umax = match &node.max {
                    Side::Array | Side::Unset | Side::Object => true,
                    Side::Value(v) => v.rank() < RANK_ARRAY,
                };
                if umax && !matches!(node.max, Side::Array) {
                    node.max = Side::Array;
                    node.children.iter_mut().for_each(|c| c.max = Side::Unset);
                }
            }
            if umin || umax {
                for (i, elem) in a.into_iter().enumerate() {
                    let elem = elem?;
                    if i == node.children.len() {
                        node.children.push(Node::named(None));
                    }
                    update(&mut node.children[i], elem, umin, umax)?;
                }
            }
        }
        scalar => update_scalar(node, scalar, umin, umax)?,
    }
    Ok(())
}

/// `_update_scalar`: a value that is neither an object nor an array.
fn update_scalar(node: &mut Node, v: RawBsonRef<'_>, umin: bool, umax: bool) -> Result<(), Fail> {
    if umin {
        let replace = match &node.min {
            Side::Unset => true,
            Side::Value(x) => compare(v, x.as_ref())? == Ordering::Less,
            Side::Object => rank(&v) < RANK_OBJECT,
            Side::Array => rank(&v) < RANK_ARRAY,
        };
        if replace {
            set(&mut node.min, v)?;
        }
    }
    if umax {
        let replace = match &node.max {
            Side::Unset => true,
            Side::Value(x) => compare(v, x.as_ref())? == Ordering::Greater,
            Side::Object => rank(&v) > RANK_OBJECT,
            Side::Array => rank(&v) > RANK_ARRAY,
        };
        if replace {
            set(&mut node.max, v)?;
        }
    }
    Ok(())
}

fn set(side: &mut Side, v: RawBsonRef<'_>) -> Result<(), Fail> {
    match side {
        Side::Value(x) => x.assign(v),
        _ => {
            *side = Side::Value(Value::from_ref(v)?);
            Ok(())
        }
    }
}

fn side(node: &Node, use_min: bool) -> &Side {
    if use_min {
        &node.min
    } else {
        &node.max
    }
}

fn render_obj(node: &Node, use_min: bool) -> Result<RawDocumentBuf, Fail> {
    let mut out = RawDocumentBuf::new();
    if node.dup {
        // Two children of one name: a dict keeps the first position and the last value.
        let mut kept: Vec<(&CString, &Node)> = Vec::new();
        for c in &node.children {
            if matches!(side(c, use_min), Side::Unset) {
                continue;
            }
            let name = c.name.as_ref().ok_or_else(unnamed)?;
            match kept.iter_mut().find(|(n, _)| n.as_str() == name.as_str()) {
                Some(slot) => slot.1 = c,
                None => kept.push((name, c)),
            }
        }
        for (name, c) in kept {
            append_side(&mut out, name, c, use_min)?;
        }
    } else {
        for c in &node.children {
            if matches!(side(c, use_min), Side::Unset) {
                continue;
            }
            let name = c.name.as_ref().ok_or_else(unnamed)?;
            append_side(&mut out, name, c, use_min)?;
        }
    }
    Ok(out)
}

fn unnamed() -> Fail {
    Fail::Declined("an array entry is set in an object".into())
}

fn append_side(
    out: &mut RawDocumentBuf,
    name: &CString,
    c: &Node,
    use_min: bool,
) -> Result<(), Fail> {
    match side(c, use_min) {
        Side::Value(v) => out.append(name, v.as_ref()),
        Side::Object => out.append(name, render_obj(c, use_min)?),
        Side::Array => out.append(name, render_arr(c, use_min)?),
        Side::Unset => {}
    }
    Ok(())
}

fn render_arr(node: &Node, use_min: bool) -> Result<RawArrayBuf, Fail> {
    let mut out = RawArrayBuf::new();
    for c in &node.children {
        match side(c, use_min) {
            Side::Value(v) => out.push(v.as_ref()),
            Side::Object => out.push(render_obj(c, use_min)?),
            Side::Array => out.push(render_arr(c, use_min)?),
            Side::Unset => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod bench {
    use super::*;
    use crate::control::schema::Schema;
    use crate::control::{check_batch, documents};

    /// One phase over a batch of TSBS-like measurements, 200 times; for `perf stat`:
    /// `PHASE=update perf stat -e instructions target/release/deps/_native-* \
    ///  time_a_tsbs --ignored` after writing the batch to /tmp/control_bench/tsbs1000.bson.
    #[test]
    #[ignore]
    fn time_a_tsbs_batch() {
        let buf = std::fs::read("/tmp/control_bench/tsbs1000.bson").unwrap();
        let docs = documents(&buf, None).unwrap();
        let phase = std::env::var("PHASE").unwrap_or_default();
        let mut mm = MinMax::new();
        let mut s = Schema::new();
        let t = std::time::Instant::now();
        for _ in 0..200 {
            match phase.as_str() {
                "update" => mm.update_batch(&docs, Some("tags")).unwrap(),
                "check" => {
                    std::hint::black_box(check_batch(&docs, Gate::MinMax, Some("tags")).unwrap());
                }
                "iter" => {
                    for d in &docs {
                        for item in d.iter() {
                            std::hint::black_box(item.unwrap());
                        }
                    }
                }
                "schema" => {
                    s.update_batch(&docs, Some("tags")).unwrap();
                }
                _ => {}
            }
        }
        let ns = t.elapsed().as_secs_f64() / (200 * docs.len()) as f64 * 1e9;
        println!("{phase}: {ns:.0} ns/doc (wall)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    /// A batch folded at once (runs of plain numbers take `numeric_extremes`) gives what
    /// the documents folded one by one give, for the values whose order is not the
    /// plain numbers': -0.0 against 0.0 (the first stays), NaN, mixed numeric types.
    #[test]
    fn a_run_of_numbers_folds_as_its_documents_one_by_one() {
        let columns: Vec<Vec<bson::Bson>> = vec![
            vec![
                0.0.into(),
                (-0.0).into(),
                1.5.into(),
                (-2.0).into(),
                (-2.0).into(),
            ],
            vec![(-0.0).into(), 0.0.into(), f64::NAN.into(), 3.0.into()],
            vec![5i64.into(), (-7i64).into(), 5i64.into(), i64::MAX.into()],
            vec![1i32.into(), 1i64.into(), 0.5.into(), 1i32.into()],
            vec![
                DateTime::from_millis(-5).into(),
                DateTime::from_millis(7).into(),
                DateTime::from_millis(-5).into(),
            ],
            vec![3i32.into(), (-3i32).into(), f64::NAN.into()],
        ];
        for values in columns {
            let docs: Vec<RawDocumentBuf> = values
                .iter()
                .map(|v| {
                    let mut d = RawDocumentBuf::new();
                    d.append(
                        bson::raw::cstr!("x"),
                        bson::RawBson::try_from(v.clone()).unwrap(),
                    );
                    d
                })
                .collect();
            let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
            let mut batch = MinMax::new();
            batch.update_batch(&refs, None).unwrap();
            let mut one = MinMax::new();
            for d in &refs {
                one.update_batch(&[d], None).unwrap();
            }
            // bytes, so that the sign of a zero kept counts
            let (lo, hi) = (batch.min().unwrap(), batch.max().unwrap());
            let (lo1, hi1) = (one.min().unwrap(), one.max().unwrap());
            assert_eq!(lo.as_bytes(), lo1.as_bytes(), "{values:?}");
            assert_eq!(hi.as_bytes(), hi1.as_bytes(), "{values:?}");
        }
    }

    #[test]
    fn date_bounds_are_the_time_field_extremes_and_nothing_else() {
        let (a, b, c) = (
            rawdoc! {"t": DateTime::from_millis(-5_000), "x": 1, "d": DateTime::from_millis(1)},
            rawdoc! {"t": DateTime::from_millis(9_000), "x": 2},
            rawdoc! {"t": DateTime::from_millis(2_000), "x": 3, "d": "text"},
        );
        let mut mm = MinMax::new();
        mm.update_batch(&[&a, &b, &c], None).unwrap();
        assert_eq!(mm.date_bounds("t"), Some((-5_000, 9_000)));
        // a number, a field that is not there, one whose min and max differ in type
        assert_eq!(mm.date_bounds("x"), None);
        assert_eq!(mm.date_bounds("missing"), None);
        assert_eq!(mm.date_bounds("d"), None);
    }
}
