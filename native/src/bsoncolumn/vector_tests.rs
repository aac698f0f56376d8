//! The shared vectors `tests/data/bsoncolumn.json` against the native encoder and decoder.
//!
//! Python reference: `tests/unit/storage/bsoncolumn/vectors.py` (the file's format) and
//! `test_vectors.py` (every vector encodes to its exact bytes). The JSON file is read
//! with a minimal reader here (the crate has no JSON dependency); the values document
//! with the `bson` crate's raw API.

use std::path::PathBuf;

use bson::RawDocument;

use super::builder::{encode_uniform, uniform_size, ColumnBuilder};
use super::decoder::{decode_column, decode_uniform, DecodeError};
use super::values::*;

/// A JSON value, as much of JSON as the vector file uses.
#[derive(Debug)]
enum Json {
    Null,
    Bool,
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            _ => panic!("not a string"),
        }
    }
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.s[self.pos] {
            b'{' => {
                self.pos += 1;
                let mut items = vec![];
                loop {
                    self.ws();
                    if self.s[self.pos] == b'}' {
                        self.pos += 1;
                        return Json::Obj(items);
                    }
                    let Json::Str(k) = self.value() else {
                        panic!("key")
                    };
                    self.ws();
                    assert_eq!(self.s[self.pos], b':');
                    self.pos += 1;
                    let v = self.value();
                    items.push((k, v));
                    self.ws();
                    if self.s[self.pos] == b',' {
                        self.pos += 1;
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                let mut items = vec![];
                loop {
                    self.ws();
                    if self.s[self.pos] == b']' {
                        self.pos += 1;
                        return Json::Arr(items);
                    }
                    items.push(self.value());
                    self.ws();
                    if self.s[self.pos] == b',' {
                        self.pos += 1;
                    }
                }
            }
            b'"' => {
                self.pos += 1;
                let mut out = String::new();
                loop {
                    let c = self.s[self.pos];
                    self.pos += 1;
                    match c {
                        b'"' => return Json::Str(out),
                        b'\\' => {
                            let e = self.s[self.pos];
                            self.pos += 1;
                            match e {
                                b'n' => out.push('\n'),
                                b't' => out.push('\t'),
                                b'u' => {
                                    let hex = std::str::from_utf8(&self.s[self.pos..self.pos + 4])
                                        .unwrap();
                                    self.pos += 4;
                                    let cp = u32::from_str_radix(hex, 16).unwrap();
                                    out.push(char::from_u32(cp).unwrap_or('?'));
                                }
                                other => out.push(other as char),
                            }
                        }
                        _ => {
                            // copy a UTF-8 sequence whole
                            let start = self.pos - 1;
                            let mut end = self.pos;
                            while end < self.s.len() && (self.s[end] & 0xC0) == 0x80 {
                                end += 1;
                            }
                            out.push_str(std::str::from_utf8(&self.s[start..end]).unwrap());
                            self.pos = end;
                        }
                    }
                }
            }
            b't' => {
                self.pos += 4;
                Json::Bool
            }
            b'f' => {
                self.pos += 5;
                Json::Bool
            }
            b'n' => {
                self.pos += 4;
                Json::Null
            }
            _ => {
                let start = self.pos;
                while self.pos < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.pos]) {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap();
                Json::Num(text.parse().unwrap())
            }
        }
    }
}

fn base64(text: &str) -> Vec<u8> {
    let mut out = vec![];
    let (mut acc, mut nbits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue, // '=' padding
        } as u32;
        acc = (acc << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
        }
    }
    out
}

/// One valid vector: its name, column and rows (None = skipped).
pub(crate) struct Vector {
    pub name: String,
    pub column: Vec<u8>,
    pub rows: Vec<Option<(u8, Vec<u8>)>>,
}

/// The (type, value bytes) of each element of a document, by row index key.
fn rows_of(doc_bytes: &[u8], count: usize) -> Vec<Option<(u8, Vec<u8>)>> {
    let doc = RawDocument::from_bytes(doc_bytes).expect("values document");
    let mut rows = vec![None; count];
    let mut offset = 4usize;
    for elem in doc.iter_elements() {
        let elem = elem.expect("element");
        let key = elem.key().as_str();
        let t = elem.element_type() as u8;
        // the element's value follows its type byte and key: its size is the crate's
        let start = offset + 1 + key.len() + 1;
        let value = doc_bytes[start..start + elem.size()].to_vec();
        offset = start + elem.size();
        let row: usize = key.parse().expect("row index");
        rows[row] = Some((t, value));
    }
    rows
}

pub(crate) fn load() -> Vec<Vector> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/bsoncolumn.json");
    let text = std::fs::read(&path).expect("tests/data/bsoncolumn.json");
    let json = Reader { s: &text, pos: 0 }.value();
    let Some(Json::Arr(valid)) = json.get("valid") else {
        panic!("no valid vectors")
    };
    valid
        .iter()
        .map(|v| {
            let count = match v.get("count") {
                Some(Json::Num(n)) => *n as usize,
                _ => panic!("count"),
            };
            Vector {
                name: v.get("name").unwrap().str().to_string(),
                column: base64(v.get("column_b64").unwrap().str()),
                rows: rows_of(&base64(v.get("values_bson_b64").unwrap().str()), count),
            }
        })
        .collect()
}

/// The type and concatenated values of a vector of one uniform type without skips.
fn uniform(v: &Vector) -> Option<(u8, Vec<u8>)> {
    let first = v.rows.first()?.as_ref()?.0;
    uniform_size(first)?;
    let mut values = vec![];
    for r in &v.rows {
        let (t, val) = r.as_ref()?;
        if *t != first {
            return None;
        }
        values.extend_from_slice(val);
    }
    Some((first, values))
}

#[test]
fn vector_file_loads() {
    let vs = load();
    assert_eq!(vs.len(), 172);
}

#[test]
fn uniform_vectors_encode_to_their_bytes() {
    let mut checked = 0;
    let mut types = std::collections::BTreeSet::new();
    for v in load() {
        let Some((t, values)) = uniform(&v) else {
            continue;
        };
        let got = encode_uniform(t, &values);
        assert_eq!(
            got.as_deref(),
            Some(v.column.as_slice()),
            "vector {}",
            v.name
        );
        checked += 1;
        types.insert(t);
    }
    assert!(checked >= 40, "{checked} uniform vectors");
    assert_eq!(types.len(), 5);
}

#[test]
fn uniform_numeric_vectors_decode_to_their_values() {
    let mut checked = 0;
    for v in load() {
        let got = decode_uniform(&v.column, 1 << 22);
        let Some((t, values)) = uniform(&v).filter(|(t, _)| *t != T_OID) else {
            assert!(got.is_none(), "vector {} is not uniform numeric", v.name);
            continue;
        };
        let got = got.unwrap_or_else(|| panic!("vector {} declined", v.name));
        assert_eq!(got.t, t, "vector {}", v.name);
        let widened: Vec<u8> = if t == T_INT32 {
            values
                .chunks_exact(4)
                .flat_map(|c| (read_i32(c) as i64).to_le_bytes())
                .collect()
        } else {
            values
        };
        assert_eq!(*got.le_bytes(), widened[..], "vector {}", v.name);
        checked += 1;
    }
    assert!(checked >= 30, "{checked} decoded");
}

/// The vectors of scalar values only (objects and arrays need interleaved mode).
pub(crate) fn scalar_vectors() -> Vec<Vector> {
    load()
        .into_iter()
        .filter(|v| {
            v.rows
                .iter()
                .flatten()
                .all(|(t, val)| !matches!(*t, T_OBJECT | T_ARRAY) || val.len() == 5)
        })
        .collect()
}

fn rows_view(v: &Vector) -> impl Iterator<Item = Option<(u8, &[u8])>> + '_ {
    v.rows
        .iter()
        .map(|r| r.as_ref().map(|(t, val)| (*t, val.as_slice())))
}

#[test]
fn scalar_vectors_encode_to_their_bytes() {
    let mut checked = 0;
    for v in scalar_vectors() {
        let mut b = ColumnBuilder::new();
        b.extend(rows_view(&v)).unwrap();
        assert_eq!(b.len(), v.rows.len());
        assert_eq!(b.finalize().unwrap(), v.column, "vector {}", v.name);
        // one by one, finalizing on the way, gives the same bytes
        let mut b = ColumnBuilder::new();
        for (i, r) in rows_view(&v).enumerate() {
            match r {
                None => b.skip(1).unwrap(),
                Some((t, val)) => b.append(t, val).unwrap(),
            }
            if i % 7 == 3 {
                b.finalize().unwrap();
            }
        }
        assert_eq!(b.finalize().unwrap(), v.column, "vector {}", v.name);
        checked += 1;
    }
    assert!(checked >= 100, "{checked} scalar vectors");
}

#[test]
fn scalar_vectors_decode_to_their_rows() {
    let mut checked = 0;
    for v in load() {
        let got = decode_column(&v.column, 1 << 22);
        let scalar = v
            .rows
            .iter()
            .flatten()
            .all(|(t, val)| !matches!(*t, T_OBJECT | T_ARRAY | T_CODEWSCOPE) || val.len() == 5);
        let got = match got {
            Ok(d) => d,
            Err(DecodeError::Unsupported) if !scalar => continue,
            Err(e) => panic!("vector {}: {e:?}", v.name),
        };
        let rows: Vec<_> = got.rows.iter().collect();
        let want: Vec<_> = rows_view(&v).collect();
        assert_eq!(rows, want, "vector {}", v.name);
        checked += 1;
    }
    assert!(checked >= 100, "{checked} decoded");
}

#[test]
fn scalar_vectors_reopen() {
    let mut checked = 0;
    for v in scalar_vectors() {
        let Ok(mut b) = ColumnBuilder::from_column(&v.column) else {
            panic!("vector {} declined", v.name);
        };
        assert_eq!(b.len(), v.rows.len());
        assert_eq!(b.finalize().unwrap(), v.column, "vector {}", v.name);
        // reopen the first half and append the rest
        let half = v.rows.len() / 2;
        let mut head = ColumnBuilder::new();
        head.extend(rows_view(&v).take(half)).unwrap();
        let mut b = ColumnBuilder::from_column(&head.finalize().unwrap()).unwrap();
        b.extend(rows_view(&v).skip(half)).unwrap();
        assert_eq!(
            b.finalize().unwrap(),
            v.column,
            "vector {} from half",
            v.name
        );
        checked += 1;
    }
    assert!(checked >= 100, "{checked} reopened");
}

#[test]
fn invalid_vectors_do_not_decode() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/bsoncolumn.json");
    let text = std::fs::read(&path).unwrap();
    let json = Reader { s: &text, pos: 0 }.value();
    let Some(Json::Arr(invalid)) = json.get("invalid") else {
        panic!("no invalid vectors")
    };
    for v in invalid {
        let column = base64(v.get("column_b64").unwrap().str());
        assert!(
            decode_column(&column, 1 << 22).is_err(),
            "{}",
            v.get("name").unwrap().str()
        );
        assert!(decode_uniform(&column, 1 << 22).is_none());
        assert!(ColumnBuilder::from_column(&column).is_err());
    }
}

/// A small deterministic generator (xorshift) for the mutation tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Mutations of every vector: byte flips, truncations, insertions, duplicated spans.
fn mutants(rounds: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = vec![];
    for v in load() {
        for _ in 0..rounds {
            let mut c = v.column.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(c.len());
                match rng.below(5) {
                    0 => c[at] ^= 1 << rng.below(8),
                    1 => c[at] = rng.next() as u8,
                    2 => c.truncate(at),
                    3 => c.insert(at, rng.next() as u8),
                    _ => {
                        let end = (at + 1 + rng.below(16)).min(c.len());
                        let span = c[at..end].to_vec();
                        c.splice(at..at, span);
                    }
                }
                if c.is_empty() {
                    break;
                }
            }
            out.push(c);
        }
        out.push(v.column.clone());
    }
    out
}

#[test]
fn mutated_vectors_keep_the_fuzz_properties() {
    for c in mutants(40) {
        super::fuzzing::check_decode(&c);
        super::fuzzing::check_reopen(&c);
    }
}
