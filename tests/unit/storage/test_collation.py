"""Collation documents parsed with mongod's codes, and strings compared through ICU."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64

from storage.bson_order import sort_key
from storage.collation import COLLATION_VERSION, collation_key_fn, parse_collation
from storage.errors import MongoError


def _c(spec: dict[str, Any]) -> Any:
    c = parse_collation(spec)
    assert c is not None
    return c


def test_simple_is_no_collator() -> None:
    assert parse_collation({"locale": "simple"}) is None
    assert collation_key_fn(None) is sort_key


def test_normalised_document_fills_every_field() -> None:
    assert _c({"locale": "en_US", "strength": Int64(2)}).document == {
        "locale": "en_US", "caseLevel": False, "caseFirst": "off", "strength": 2,
        "numericOrdering": False, "alternate": "non-ignorable", "maxVariable": "punct",
        "normalization": False, "backwards": False, "version": COLLATION_VERSION}
    # fr_CA's ICU default is backwards secondary ordering.
    assert _c({"locale": "fr_CA"}).document["backwards"] is True
    assert _c({"locale": "en", "version": "57.1", "strength": 1.0}).document["strength"] == 1


@pytest.mark.parametrize(("spec", "code", "text"), [
    # the IDL parser's refusals (mongod's `Collation` struct, basic_types.idl)
    ({}, 40414, "BSON field 'collation.locale' is missing but a required field"),
    ({"locale": None}, 40414, "BSON field 'collation.locale' is missing"),
    ({"locale": 1}, 14, "BSON field 'collation.locale' is the wrong type 'int', expected type "
                        "'string'"),
    ({"locale": ""}, 2, "Field 'locale' cannot be the empty string in: { locale: \"\" }"),
    ({"locale": "a\0b"}, 2, "cannot contain null byte"),
    ({"locale": "xx"}, 2, "Field 'locale' is invalid in: { locale: \"xx\" }"),
    ({"locale": "EN"}, 2, "Did you mean 'en'?"),
    ({"locale": "en@collation=<"}, 2, "Field 'locale' is invalid in"),   # ICU cannot parse it
    ({"locale": "en", "strength": 2**70}, 51024,
     "BSON field 'strength' value must be <= 5, actual value '2147483647'"),
    ({"locale": "simple", "strength": 1}, 9, "If locale=simple, no other fields"),
    ({"locale": "en", "strength": 0}, 9, "Field 'strength' must be an integer 1 through 5. Got: 0"),
    ({"locale": "en", "strength": 6}, 51024, "BSON field 'strength' value must be <= 5, "
                                             "actual value '6'"),
    ({"locale": "en", "strength": -1}, 51024, "value must be >= 0, actual value '-1'"),
    ({"locale": "en", "strength": Decimal128("NaN")}, 9, "must be an integer 1 through 5"),
    ({"locale": "en", "strength": "2"}, 14, "BSON field 'collation.strength' is the wrong type "
                                            "'string', expected types [long, int, decimal, "
                                            "double]"),
    ({"locale": "en", "caseLevel": 1}, 14, "BSON field 'collation.caseLevel' is the wrong type "
                                           "'int', expected type 'bool'"),
    ({"locale": "en", "numericOrdering": "yes"}, 14, "numericOrdering"),
    ({"locale": "en", "caseFirst": "first"}, 2,
     "Enumeration value 'first' for field 'collation.caseFirst' is not a valid value."),
    ({"locale": "en", "alternate": "x"}, 2,
     "Enumeration value 'x' for field 'collation.alternate' is not a valid value."),
    ({"locale": "en", "maxVariable": "x"}, 2, "for field 'collation.maxVariable'"),
    ({"locale": "en", "version": "58.2"}, 161, "Requested collation version 58.2"),
    ({"locale": "en", "strenght": 2}, 40415, "BSON field 'collation.strenght' is an unknown "
                                             "field."),
])
def test_refusals(spec: dict[str, Any], code: int, text: str) -> None:
    """mongod's codes and messages: the IDL parser's first, then the collator factory's."""
    with pytest.raises(MongoError) as e:
        parse_collation(spec)
    assert e.value.code == code
    assert text in str(e.value)


def test_strength_two_ignores_case_not_accents() -> None:
    c = _c({"locale": "en", "strength": 2})
    assert c.compare("abc", "ABC") == 0
    assert c.compare("resume", "résumé") != 0
    assert _c({"locale": "en", "strength": 1}).compare("resume", "Résumé") == 0
    assert _c({"locale": "en"}).compare("abc", "ABC") != 0


def test_german_phonebook() -> None:
    c = _c({"locale": "de@collation=phonebook"})
    assert sorted(["Alpha", "Ärger", "Affe"], key=c.key) == ["Ärger", "Affe", "Alpha"]
    plain = _c({"locale": "de"})
    assert sorted(["Alpha", "Ärger", "Affe"], key=plain.key) == ["Affe", "Alpha", "Ärger"]


def test_french_backwards() -> None:
    words = ["cote", "côte", "coté", "côté"]
    assert sorted(words, key=_c({"locale": "fr"}).key) == ["cote", "coté", "côte", "côté"]
    assert sorted(words, key=_c({"locale": "fr", "backwards": True}).key) == \
        ["cote", "côte", "coté", "côté"]


def test_numeric_ordering_and_alternate() -> None:
    assert sorted(["10", "9", "2"], key=_c({"locale": "en", "numericOrdering": True}).key) == \
        ["2", "9", "10"]
    assert sorted(["10", "9", "2"], key=_c({"locale": "en"}).key) == ["10", "2", "9"]
    shifted = _c({"locale": "en", "alternate": "shifted"})
    assert shifted.compare("a-b", "ab") == 0 and shifted.compare("a b", "ab") == 0
    space = _c({"locale": "en", "alternate": "shifted", "maxVariable": "space"})
    assert space.compare("a b", "ab") == 0 and space.compare("a-b", "ab") != 0
    assert _c({"locale": "en"}).compare("a b", "ab") != 0


def test_case_first_upper() -> None:
    assert sorted(["a", "A"], key=_c({"locale": "en", "caseFirst": "upper"}).key) == ["A", "a"]
    assert sorted(["a", "A"], key=_c({"locale": "en", "caseFirst": "lower"}).key) == ["a", "A"]


def test_non_strings_keep_bson_order_strings_nested_are_collated() -> None:
    c = _c({"locale": "en", "strength": 2})
    assert c.compare(1, 1.0) == 0
    assert c.compare(5, "a") < 0          # numbers below strings whatever the collation
    assert c.compare({"a": "X"}, {"a": "x"}) == 0
    assert c.compare(["B", 1], ["b", 1]) == 0
    assert c.compare({"A": 1}, {"a": 1}) != 0   # field names are not collated
    assert c.compare(["a"], ["b"]) < 0


def test_strength_is_read_as_safe_int() -> None:
    # safeNumberInt: a fractional strength is truncated, as the IDL parser reads it
    assert _c({"locale": "en", "strength": 2.5}).document["strength"] == 2


def test_create_names_its_field() -> None:
    with pytest.raises(MongoError) as e:
        parse_collation({}, "create.collation")
    assert str(e.value) == "BSON field 'create.collation.locale' is missing but a required field"
