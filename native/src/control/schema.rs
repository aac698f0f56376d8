//! The schema of a bucket: `Schema` of `storage/timeseries/minmax.py`.
//!
//! The type (object, array or canonical scalar rank) of every path; an update that
//! changes a path's type fails, which is how the catalog sees `kSchemaChange`. Like the
//! reference, a failed update may leave the schema partly updated (the bucket is closed).

use bson::raw::{CString, RawBsonRef, RawDocument};

use super::order::rank;
use super::{check_batch, Fail, Field, Gate, Locator, Named};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unset,
    Object,
    Array,
    Value(i32),
}

#[derive(Clone, Debug)]
struct SNode {
    name: Option<CString>,
    state: State,
    children: Vec<SNode>,
}

impl Named for SNode {
    fn name(&self) -> Option<&str> {
        self.name.as_ref().map(|n| n.as_str())
    }
    fn set_name(&mut self, name: CString) {
        self.name = Some(name);
    }
    fn named(name: Option<CString>) -> Self {
        SNode {
            name,
            state: State::Unset,
            children: Vec::new(),
        }
    }
}

impl SNode {
    fn heap_size(&self) -> usize {
        self.name.as_ref().map_or(0, |n| n.as_str().len())
            + self.children.capacity() * std::mem::size_of::<SNode>()
            + self.children.iter().map(SNode::heap_size).sum::<usize>()
    }
}

/// The type of every path of a bucket's measurements.
#[derive(Clone, Debug)]
pub struct Schema {
    root: SNode,
}

impl Default for Schema {
    fn default() -> Self {
        Self::new()
    }
}

impl Schema {
    pub fn new() -> Self {
        let mut root = SNode::named(None);
        root.state = State::Object;
        Schema { root }
    }

    /// `Schema.compatible` for each document in turn: the index of the first one that
    /// changes a path's type (the schema then partly updated with it), else None. The
    /// batch is checked whole first: a declined or malformed batch changes nothing.
    pub fn update_batch(
        &mut self,
        docs: &[&RawDocument],
        skip: Option<&str>,
    ) -> Result<Option<usize>, Fail> {
        let checked = check_batch(docs, Gate::Schema, skip)?;
        for (i, fields) in checked.documents().enumerate() {
            if !update_obj(&mut self.root, fields.iter().map(|&f| Ok(f)))? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// `Schema.from_control`; `Ok(None)` for a mixed-schema bucket (`SchemaChange`).
    pub fn from_control(min: &RawDocument, max: &RawDocument) -> Result<Option<Schema>, Fail> {
        let mut s = Schema::new();
        Ok(match s.update_batch(&[min, max], None)? {
            None => Some(s),
            Some(_) => None,
        })
    }

    /// Bytes owned on the heap.
    pub fn heap_size(&self) -> usize {
        self.root.heap_size()
    }
}

fn update_obj<'a>(
    node: &mut SNode,
    fields: impl Iterator<Item = Result<Field<'a>, Fail>>,
) -> Result<bool, Fail> {
    let mut loc = Locator::with_room(&mut node.children, fields.size_hint().0);
    for item in fields {
        let (key, value) = item?;
        let at = loc.locate(&mut node.children, key);
        if !update(&mut node.children[at], value)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn update(node: &mut SNode, value: RawBsonRef<'_>) -> Result<bool, Fail> {
    match value {
        RawBsonRef::Document(d) => {
            match node.state {
                State::Unset => {
                    node.state = State::Object;
                    node.children
                        .iter_mut()
                        .for_each(|c| c.state = State::Unset);
                }
                State::Object => {}
                _ => return Ok(false),
            }
            update_obj(node, d.iter().map(|r| r.map_err(Fail::from)))
        }
        RawBsonRef::Array(a) => {
            match node.state {
                State::Unset => {
                    node.state = State::Array;
                    node.children
                        .iter_mut()
                        .for_each(|c| c.state = State::Unset);
                }
                State::Array => {}
                _ => return Ok(false),
            }
            for (i, elem) in a.into_iter().enumerate() {
                let elem = elem?;
                if i == node.children.len() {
                    node.children.push(SNode::named(None));
                }
                if !update(&mut node.children[i], elem)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        scalar => {
            let r = rank(&scalar);
            match node.state {
                State::Unset => {
                    node.state = State::Value(r);
                    Ok(true)
                }
                State::Value(s) => Ok(s == r),
                _ => Ok(false),
            }
        }
    }
}
