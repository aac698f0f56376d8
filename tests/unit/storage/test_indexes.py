"""storage.indexes: index spec validation and key extraction, by MongoDB's rules."""

from __future__ import annotations

import math

import pytest
from bson import Decimal128, Int64

from storage.bsontext import to_mongo_string
from storage.errors import MongoError
from storage.indexes import (
    KeyGenerator,
    compare_index_specs,
    default_index_name,
    id_index_spec,
    validate_index_spec,
)
from storage.keystring import UNDEFINED, encode_key
from storage.vocabulary.error_codes import ErrorCode


def spec(key, **opts):
    return validate_index_spec({"key": key, "name": default_index_name(key), **opts},
                               compile_filter=lambda f: (lambda d: True))


def keys_of(key, doc, **opts):
    ks = KeyGenerator(spec(key, **opts)).keys(doc)
    return ks.values, ks


# --- key extraction ------------------------------------------------------------------------

N = None
KEY_CASES = [
    # (key pattern, document, expected keys (order irrelevant), multikey paths)
    ({"a": 1}, {"a": 1}, [(1,)], [[]]),
    ({"a": 1}, {}, [(N,)], [[]]),
    ({"a": 1}, {"a": None}, [(N,)], [[]]),
    ({"a": 1}, {"a": [1, 2, 3]}, [(1,), (2,), (3,)], [[0]]),
    ({"a": 1}, {"a": [1, 1, 1.0, Int64(1)]}, [(1,)], [[0]]),
    ({"a": 1}, {"a": []}, [(UNDEFINED,)], [[0]]),
    ({"a": 1}, {"a": [[1, 2], 3]}, [([1, 2],), (3,)], [[0]]),
    ({"a": 1}, {"a": [[]]}, [([],)], [[0]]),
    ({"a": 1}, {"a": [{"b": 1}]}, [({"b": 1},)], [[0]]),
    ({"a": 1}, {"a": {"b": [1]}}, [({"b": [1]},)], [[]]),
    ({"a.b": 1}, {"a": [{"b": 1}, {"b": 2}]}, [(1,), (2,)], [[0]]),
    ({"a.b": 1}, {"a": [{"b": 1}, {"c": 2}]}, [(1,), (N,)], [[0]]),
    ({"a.b": 1}, {"a": [1, {"b": 2}]}, [(N,), (2,)], [[0]]),
    ({"a.b": 1}, {"a": []}, [(N,)], [[0]]),
    ({"a.b": 1}, {"a": {"b": [1, 2]}}, [(1,), (2,)], [[1]]),
    ({"a.b": 1}, {"a": {"b": []}}, [(UNDEFINED,)], [[1]]),
    ({"a.b": 1}, {"a": 5}, [(N,)], [[]]),
    ({"a.b": 1}, {"a": [[{"b": 1}]]}, [(N,)], [[0]]),
    ({"a.b.c": 1}, {"a": [{"b": [{"c": 1}, {"c": 2}]}]}, [(1,), (2,)], [[0, 1]]),
    ({"a": 1, "b": 1}, {"a": [1, 2], "b": 3}, [(1, 3), (2, 3)], [[0], []]),
    ({"a": 1, "b": -1}, {"b": [1, 2]}, [(N, 1), (N, 2)], [[], [0]]),
    ({"a.b": 1, "a.c": 1}, {"a": [{"b": 1, "c": 2}, {"b": 3, "c": 4}]}, [(1, 2), (3, 4)],
     [[0], [0]]),
    ({"a.0": 1}, {"a": [5, 6]}, [(5,)], [[]]),
    ({"a.0.b": 1}, {"a": [{"b": 1}, {"b": 2}]}, [(1,)], [[]]),
    ({"a.0": 1}, {"a": [[1, 2]]}, [([1, 2],)], [[]]),
    ({"a.1": 1}, {"a": [5]}, [(N,)], [[0]]),
    ({"a.0": 1}, {"a": {"0": 7}}, [(7,)], [[]]),
    ({"_id": 1}, {"_id": 3, "a": [1]}, [(3,)], [[]]),
    ({"_id": 1}, {"a": 1}, [(N,)], [[]]),
]


@pytest.mark.parametrize(("key", "doc", "expected", "multikey"), KEY_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in KEY_CASES])
def test_key_extraction(key, doc, expected, multikey):
    got, ks = keys_of(key, doc)
    dirs = [1 if v > 0 else -1 for v in key.values()]
    assert sorted(encode_key(k, dirs) for k in got) == sorted(encode_key(k, dirs) for k in expected)
    assert [sorted(p) for p in ks.multikey_paths] == multikey
    assert ks.is_multikey == (len(expected) > 1 or any(multikey))
    for enc, values in ks.entries:
        assert enc == encode_key(values, dirs)


SPARSE_CASES = [
    ({"a": 1}, {"b": 1}, []),
    ({"a": 1}, {"a": None}, [(N,)]),
    ({"a": 1, "b": 1}, {"a": 1}, [(1, N)]),
    ({"a": 1, "b": 1}, {"c": 1}, []),
    ({"a.b": 1}, {"a": [{"c": 1}]}, []),
    ({"a.b": 1}, {"a": [{"c": 1}, {"b": 2}]}, [(2,)]),
    ({"a": 1}, {"a": []}, [(UNDEFINED,)]),
]


@pytest.mark.parametrize(("key", "doc", "expected"), SPARSE_CASES)
def test_sparse_keys(key, doc, expected):
    got, _ = keys_of(key, doc, sparse=True)
    assert got == expected


def test_parallel_arrays():
    with pytest.raises(MongoError) as ei:
        keys_of({"a": 1, "b": 1}, {"a": [1, 2], "b": [1, 2]})
    assert ei.value.code == ErrorCode.CannotIndexParallelArrays == 171
    assert ei.value.errmsg == "cannot index parallel arrays [b] [a]"
    with pytest.raises(MongoError) as ei:
        keys_of({"a.x": 1, "b.y": 1}, {"a": {"x": [1]}, "b": [{"y": 1}]})
    assert ei.value.errmsg == "cannot index parallel arrays [b] [x]"


def test_ambiguous_positional_field():
    with pytest.raises(MongoError) as ei:
        keys_of({"a.0": 1}, {"a": [{"0": 1}]})
    assert ei.value.code == 16746


def test_descending_keys_encode_inverted():
    ks = KeyGenerator(spec({"a": -1})).keys({"a": 5})
    assert ks.entries[0][0] == encode_key([5], [-1])


# --- spec validation -------------------------------------------------------------------------

BAD_SPECS = [
    ({"key": {"a": 0}, "name": "a_0"}, 67, "Values in the index key pattern cannot be 0."),
    ({"key": {"a": math.nan}, "name": "x"}, 67, "cannot be NaN"),
    ({"key": {"a": True}, "name": "x"}, 67, "cannot be of type bool"),
    ({"key": {"a": {"b": 1}}, "name": "x"}, 67, "cannot be of type object"),
    ({"key": {}, "name": "x"}, 67, "Index keys cannot be empty."),
    ({"key": {"a": "foo"}, "name": "x"}, 67, "Unknown index plugin 'foo'"),
    ({"key": {"a": "text", "b": "hashed"}, "name": "x"}, 67, "more than one index plugin"),
    ({"key": {"a..b": 1}, "name": "x"}, 67, "cannot contain an empty field"),
    ({"key": {"$a": 1}, "name": "x"}, 67, "field name starts with '$'"),
    ({"key": {"a": ""}, "name": "x"}, 67, "cannot be empty strings"),
    ({"key": "a", "name": "x"}, 14, "The field 'key' must be an object, but got string"),
    ({"key": {"a": 1}, "name": 5}, 14, "The field 'name' must be a string, but got int"),
    ({"key": {"a": 1}}, 9, "The 'name' field is a required property"),
    ({"name": "x"}, 9, "The 'key' field is a required property"),
    ({"key": {"a": 1}, "name": "x", "foo": 1}, 197,
     "The field 'foo' is not valid for an index specification."),
    ({"key": {"a": 1}, "name": "x", "unique": "yes"}, 14, "which is not convertible to bool"),
    ({"key": {"a": 1}, "name": "x", "v": 3}, 67, "cannot create an index with v=3"),
    ({"key": {"a": 1}, "name": "x", "v": 1.5}, 2, "representable as a 32-bit integer"),
    ({"key": {"a": 1}, "name": "x", "hidden": 1}, 14, "must be a bool"),
    ({"key": {"a": 1}, "name": "x", "sparse": True, "partialFilterExpression": {"a": 1}}, 67,
     'cannot mix "partialFilterExpression" and "sparse" options'),
    ({"key": {"a": 1}, "name": "x", "partialFilterExpression": 5}, 14, "must be an object"),
    ({"key": {"a": 1}, "name": "_id_"}, 2, "The index name '_id_' is reserved"),
    ({"key": {"a": 1}, "name": "*"}, 2, "The index name '*' is not valid."),
    ({"key": {"_id": 1}, "name": "_id_", "unique": True}, 197,
     "is not valid for an _id index specification"),
    ({"key": {"_id": 1}, "name": "_id_", "hidden": True}, 197,
     "is not valid for an _id index specification"),
    ({"key": {"a": 1}, "name": "x", "expireAfterSeconds": "1"}, 67, "must be numeric"),
    ({"key": {"a": 1}, "name": "x", "expireAfterSeconds": -1}, 67, "cannot be less than 0"),
    ({"key": {"a": 1}, "name": "x", "expireAfterSeconds": 2**31}, 67, "32-bit integer"),
    ({"key": {"a": 1}, "name": "x", "expireAfterSeconds": math.nan}, 67, "must not be NaN"),
    ({"key": {"a": 1, "b": 1}, "name": "x", "expireAfterSeconds": 10}, 67,
     "TTL indexes are single-field indexes"),
    ({"key": {"a": 1}, "name": "x", "weights": {"a": 1}}, 67,
     "can only be specified with text indexes"),
    ({"key": {"a": 1}, "name": "", }, 67, "index name cannot be empty"),
    ({"key": {"a": 1}, "name": "x", "storageEngine": {}}, 67, "Empty \"storageEngine\""),
    ({"key": {"a": "2dsphere"}, "name": "x"}, 238, "does not build '2dsphere' indexes"),
    ({"key": {"a": "text"}, "name": "x"}, 238, "does not build 'text' indexes"),
    ({"key": {"a": "hashed"}, "name": "x"}, 238, "does not build 'hashed' indexes"),
    ({"key": {"$**": 1}, "name": "x"}, 238, "does not build 'wildcard' indexes"),
    ({"key": {"a": 1}, "name": "x", "collation": {"locale": "fr", "strength": 0}}, 9,
     "must be an integer 1 through 5"),
    ({"key": {"a": 1}, "name": "x", "collation": "fr"}, 14, "must be an object"),
    ({"key": {"a": 1}, "name": "x", "collation": {}}, 2, "cannot be an empty object"),
]


@pytest.mark.parametrize(("raw", "code", "fragment"), BAD_SPECS,
                         ids=[str(c[0]) for c in BAD_SPECS])
def test_bad_specs(raw, code, fragment):
    with pytest.raises(MongoError) as ei:
        validate_index_spec(raw, compile_filter=lambda f: (lambda d: True))
    assert ei.value.code == code
    assert fragment in ei.value.errmsg


def test_bad_spec_message_has_mongodb_context():
    with pytest.raises(MongoError) as ei:
        validate_index_spec({"key": {"a": 0}, "name": "a_0"})
    assert ei.value.errmsg == ('Error in specification { key: { a: 0 }, name: "a_0" } :: caused '
                               'by :: Values in the index key pattern cannot be 0.')


def test_partial_filter_goes_through_the_compiler():
    def refuse(f):
        raise MongoError(ErrorCode.CannotCreateIndex, "Expression not supported in partial index")

    with pytest.raises(MongoError) as ei:
        validate_index_spec({"key": {"a": 1}, "name": "x", "partialFilterExpression": {"a": 1}},
                            compile_filter=refuse)
    assert ei.value.code == 67 and "Expression not supported" in ei.value.errmsg
    with pytest.raises(MongoError) as ei:
        validate_index_spec({"key": {"a": 1}, "name": "x", "partialFilterExpression": {"a": 1}})
    assert ei.value.code == ErrorCode.NotImplemented


def test_normalized_document():
    s = validate_index_spec({"name": "n", "key": {"a": 1, "b": -1.0}, "unique": 1, "ns": "x.y",
                             "background": True, "sparse": False})
    assert list(s.document.items()) == [("v", 2), ("unique", True), ("key", {"a": 1, "b": -1.0}),
                                        ("name", "n"), ("background", True), ("sparse", False)]
    assert s.unique and not s.sparse and s.directions == (1, -1) and s.fields == ("a", "b")
    s = validate_index_spec({"key": {"a": 1}, "name": "t", "expireAfterSeconds": 3600,
                             "collation": {"locale": "simple"}})
    assert s.is_ttl and s.expire_after_seconds == 3600 and "collation" not in s.document
    assert validate_index_spec({"key": {"_id": 1}, "name": "whatever"}).name == "_id_"
    assert validate_index_spec({"key": {"_id": 1.0}, "name": "_id_"}).is_id_index
    assert not validate_index_spec({"key": {"_id": -1}, "name": "_id_-1"}).is_id_index
    assert validate_index_spec({"key": {"a": Decimal128("-2")}, "name": "d"}).directions == (-1,)


def test_id_index_spec():
    s = id_index_spec()
    assert s.document == {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    assert s.unique and s.is_id_index


def test_default_index_name():
    assert default_index_name({"a": 1, "b": -1}) == "a_1_b_-1"
    assert default_index_name({"a.b": Int64(1)}) == "a.b_1"
    assert default_index_name({"loc": "2dsphere"}) == "loc_2dsphere"


def test_compare_index_specs():
    a = spec({"a": 1})
    assert compare_index_specs(spec({"a": 1}), a) == "identical"
    assert compare_index_specs(spec({"a": 1.0}), a) == "identical"
    assert compare_index_specs(spec({"a": -1}), a) == "different"
    assert compare_index_specs(spec({"a": 1}, unique=True), a) == "different"
    assert compare_index_specs(spec({"a": 1}, sparse=True), a) == "different"
    assert compare_index_specs(spec({"a": 1}, partialFilterExpression={"b": 1}), a) == "different"
    assert compare_index_specs(spec({"a": 1}, expireAfterSeconds=5), a) == "equivalent"
    assert compare_index_specs(spec({"a": 1}, hidden=True), a) == "identical"
    assert compare_index_specs(spec({"a": 1}, background=True), a) == "identical"


def test_to_mongo_string():
    from bson import ObjectId, Regex, Timestamp
    from bson.binary import Binary
    from bson.datetime_ms import DatetimeMS

    doc = {"a": 1, "b": 1.0, "c": "x", "d": None, "e": [1, 2.5], "f": {}, "g": [],
           "h": ObjectId("0123456789abcdef01234567"), "i": DatetimeMS(5), "j": True,
           "k": Regex("a.b", "i"), "l": Timestamp(1, 2), "m": Binary(b"\x01\x02", 0),
           "n": Int64(3), "o": Decimal128("1.50"), "p": 1e20, "q": math.inf}
    assert to_mongo_string(doc) == (
        '{ a: 1, b: 1.0, c: "x", d: null, e: [ 1, 2.5 ], f: {}, g: [], '
        "h: ObjectId('0123456789abcdef01234567'), i: new Date(5), j: true, k: /a.b/i, "
        "l: Timestamp(1, 2), m: BinData(0, 0102), n: 3, o: 1.50, p: 1e+20.0, q: inf.0 }")
    assert to_mongo_string("x" * 200).endswith('..."')
    assert to_mongo_string(Binary(bytes(range(16)), 4)) == \
        'UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")'


def test_collated_index_spec_and_keys() -> None:
    from storage.collation import parse_collation
    s = validate_index_spec({"key": {"a": 1}, "name": "a_ci",
                             "collation": {"locale": "en", "strength": 2}})
    ci = parse_collation({"locale": "en", "strength": 2})
    assert ci is not None and s.document["collation"] == ci.document
    gen = KeyGenerator(s)
    assert gen.keys({"a": "ABC"}).values == gen.keys({"a": "abc"}).values
    assert gen.keys({"a": 5}).values == [(5,)]
    inherited = validate_index_spec({"key": {"b": 1}, "name": "b_1"},
                                    default_collation=ci.document)
    assert inherited.document["collation"] == ci.document
    simple = validate_index_spec({"key": {"b": 1}, "name": "b_1", "collation":
                                  {"locale": "simple"}}, default_collation=ci.document)
    assert "collation" not in simple.document
    assert compare_index_specs(s, validate_index_spec({"key": {"a": 1}, "name": "a_ci"})) == \
        "different"
