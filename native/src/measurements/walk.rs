//! Validation of one value, recursively: well-formed BSON (through the `bson` crate's raw
//! API), the nesting limit, and what the Python reference would not read back as it was
//! written (a *quirk*: the caller declines the batch and lets the reference do it).
//!
//! Depth counts as MongoDB's `validateBSON` counts frames: the top-level document is
//! depth 0, each embedded document or array one more, and a code-with-scope two more for
//! its scope (one frame for the element, one for the scope document). A depth above the
//! limit is MongoDB's Overflow.
//!
//! Quirks, each a place where pymongo's decoding (the Python path's `decode`) and
//! re-encoding (`to_element`, `series_key`) change the bytes: duplicate field names (a
//! dict keeps the last value at the first position), array keys other than "0", "1", …
//! (pymongo ignores them and writes canonical ones), a sub-document with `$ref` and `$id`
//! (decoded as a `DBRef`, re-encoded in its own field order and not normalized as a
//! meta), Symbol (read back as a string), Undefined (as null), DBPointer (as a DBRef
//! document), and regex options that are not pymongo's canonical "ilmsux" subsequence
//! (unknown letters dropped, the rest sorted).

use bson::error::ErrorKind;
use bson::raw::{RawBsonRef, RawIter};

/// Why a value is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not well-formed BSON (InvalidBSON); the crate's description.
    Invalid(String),
    /// Nested deeper than the limit (Overflow), which it names.
    TooDeep(usize),
    /// Not readable here, but maybe by the reference: decline.
    Unreadable(&'static str),
}

/// Walks values, noting the first quirk seen.
pub struct Walker<'a> {
    pub max_depth: usize,
    pub quirk: Option<&'static str>,
    /// Scratch stack of field names for the duplicate check (shared by all levels).
    names: Vec<&'a str>,
}

/// Field names beyond which the duplicate check sorts instead of comparing pairs.
const PAIRWISE_MAX: usize = 16;

impl<'a> Walker<'a> {
    pub fn new(max_depth: usize) -> Self {
        Walker {
            max_depth,
            quirk: None,
            names: Vec::new(),
        }
    }

    /// Ready for the next document (the scratch space is kept).
    pub fn reset(&mut self) {
        self.quirk = None;
        self.names.clear();
    }

    fn note(&mut self, quirk: &'static str) {
        if self.quirk.is_none() {
            self.quirk = Some(quirk);
        }
    }

    /// Checks a value found at `depth` (the depth of the document holding it).
    pub fn value(&mut self, value: RawBsonRef<'a>, depth: usize) -> Result<(), Problem> {
        match value {
            RawBsonRef::Document(d) => {
                self.enter(depth + 1)?;
                self.elements(d.iter_elements(), depth + 1, false)
            }
            RawBsonRef::Array(a) => {
                self.enter(depth + 1)?;
                self.elements(a.iter_elements(), depth + 1, true)
            }
            RawBsonRef::JavaScriptCodeWithScope(c) => {
                self.enter(depth + 1)?;
                self.enter(depth + 2)?;
                self.elements(c.scope.iter_elements(), depth + 2, false)
            }
            RawBsonRef::Symbol(_) => {
                self.note("a Symbol value");
                Ok(())
            }
            RawBsonRef::Undefined => {
                self.note("an Undefined value");
                Ok(())
            }
            RawBsonRef::DbPointer(_) => {
                self.note("a DBPointer value");
                Ok(())
            }
            RawBsonRef::RegularExpression(re) => {
                if !canonical_regex_options(re.options.as_str()) {
                    self.note("regex options not in pymongo's order");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn enter(&self, depth: usize) -> Result<(), Problem> {
        if depth > self.max_depth {
            Err(Problem::TooDeep(self.max_depth))
        } else {
            Ok(())
        }
    }

    /// Checks the elements of a document (or array) at `depth`.
    pub fn elements(
        &mut self,
        iter: RawIter<'a>,
        depth: usize,
        array: bool,
    ) -> Result<(), Problem> {
        let base = self.names.len();
        let mut result = Ok(());
        for (i, elem) in iter.enumerate() {
            let elem = match elem {
                Ok(e) => e,
                Err(e) => {
                    result = Err(
                        if array && matches!(e.kind, ErrorKind::Utf8Encoding { .. }) {
                            // an array key (or a regex) that is not UTF-8: pymongo skips
                            // array keys unread, so only the reference can tell
                            Problem::Unreadable("an array key (or regex) that is not UTF-8")
                        } else {
                            Problem::Invalid(e.to_string())
                        },
                    );
                    break;
                }
            };
            let key = elem.key().as_str();
            if array {
                if !is_index(key, i) {
                    self.note("array keys that are not 0, 1, ...");
                }
            } else {
                self.names.push(key);
            }
            let value = match elem.value() {
                Ok(v) => v,
                Err(e) => {
                    result = Err(Problem::Invalid(e.to_string()));
                    break;
                }
            };
            if let Err(p) = self.value(value, depth) {
                result = Err(p);
                break;
            }
        }
        if result.is_ok() && !array {
            self.check_names(base);
        }
        self.names.truncate(base);
        result
    }

    /// Notes duplicate names and `$ref`+`$id` among the names pushed since `base`.
    fn check_names(&mut self, base: usize) {
        let names = &self.names[base..];
        let dbref = names.contains(&"$ref") && names.contains(&"$id");
        let duplicates = has_duplicates(names);
        if dbref {
            self.note("a sub-document with $ref and $id (pymongo's DBRef)");
        }
        if duplicates {
            self.note("duplicate field names");
        }
    }

    /// Notes duplicates among the top-level names (collected by the caller).
    pub fn top_level_duplicates(&mut self, names: &[&str]) {
        if has_duplicates(names) {
            self.note("duplicate field names");
        }
    }
}

/// Whether `names` holds a name twice.
pub fn has_duplicates(names: &[&str]) -> bool {
    if names.len() <= PAIRWISE_MAX {
        for (i, a) in names.iter().enumerate() {
            if names[i + 1..].contains(a) {
                return true;
            }
        }
        false
    } else {
        let mut sorted: Vec<&str> = names.to_vec();
        sorted.sort_unstable();
        sorted.windows(2).any(|w| w[0] == w[1])
    }
}

/// Whether `key` is the decimal form of `index` (what pymongo writes for array keys).
fn is_index(key: &str, index: usize) -> bool {
    let mut buf = [0u8; 20];
    let mut n = index;
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    key.as_bytes() == &buf[at..]
}

/// Whether regex options are a strictly increasing subsequence of "ilmsux", the only
/// form pymongo re-encodes unchanged.
fn canonical_regex_options(options: &str) -> bool {
    const ORDER: &[u8] = b"ilmsux";
    let mut next = 0;
    for c in options.bytes() {
        match ORDER[next..].iter().position(|&o| o == c) {
            Some(p) => next += p + 1,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_keys() {
        assert!(is_index("0", 0));
        assert!(is_index("10", 10));
        assert!(!is_index("01", 1));
        assert!(!is_index("1", 0));
        assert!(is_index("18446744073709551615", usize::MAX));
    }

    #[test]
    fn regex_options() {
        assert!(canonical_regex_options(""));
        assert!(canonical_regex_options("imx"));
        assert!(canonical_regex_options("ilmsux"));
        assert!(!canonical_regex_options("xi"));
        assert!(!canonical_regex_options("ii"));
        assert!(!canonical_regex_options("z"));
    }

    #[test]
    fn duplicates() {
        assert!(!has_duplicates(&["a", "b"]));
        assert!(has_duplicates(&["a", "b", "a"]));
        let many: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
        let mut refs: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
        assert!(!has_duplicates(&refs));
        refs.push("f7");
        assert!(has_duplicates(&refs));
    }
}
