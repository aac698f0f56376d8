"""Command `let` resolution (`query.variables`): evaluated once with $$NOW, earlier
variables visible to later ones, and mongod's codes for bad names and field reads."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Timestamp
from bson.datetime_ms import DatetimeMS

from query.match import compile_filter
from query.variables import CommandVariables, resolve_constants, resolve_let
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

NOW = DatetimeMS(1_700_000_000_123)


def test_let_is_evaluated_once_in_order() -> None:
    v = resolve_let({"a": {"$add": [1, 2]}, "b": {"$multiply": ["$$a", 10]},
                     "when": "$$NOW", "gone": "$$REMOVE", "é": "x"}, now=NOW)
    assert v.user == {"a": 3, "b": 30, "when": NOW, "gone": MISSING, "é": "x"}
    values = v.values()
    assert values["NOW"] == NOW and "CLUSTER_TIME" not in values


def test_values_carry_cluster_time_and_constants_override() -> None:
    v = CommandVariables(NOW, Timestamp(5, 1), {"x": 1})
    assert v.values() == {"NOW": NOW, "CLUSTER_TIME": Timestamp(5, 1), "x": 1}
    assert v.with_constants({"x": 2, "y": 3}).values()["x"] == 2
    assert v.with_constants(None) is v


def test_filters_read_let_values_and_a_fixed_now() -> None:
    values = resolve_let({"lim": 2}, now=NOW).values()
    m = compile_filter({"$expr": {"$and": [{"$gte": ["$v", "$$lim"]},
                                           {"$eq": ["$$NOW", NOW]}]}}, variables=values)
    assert [d["v"] for d in ({"v": i} for i in range(4)) if m.matches(d)] == [2, 3]


@pytest.mark.parametrize(("let", "code", "message"), [
    ({"Upper": 1}, 16867, "'Upper' starts with an invalid character for a user variable name"),
    ({"_x": 1}, 16867, "'_x' starts with an invalid character for a user variable name"),
    ({"1x": 1}, 16867, "'1x' starts with an invalid character for a user variable name"),
    ({"": 1}, 16866, "empty variable names are not allowed"),
    ({"a.b": 1}, 16868, "'a.b' contains an invalid character for a variable name: '.'"),
    ({"a b": 1}, 16868, "'a b' contains an invalid character for a variable name: ' '"),
    ({"NOW": NOW}, 4738901, "Attempt to set internal constant: NOW"),
    ({"CLUSTER_TIME": 1}, 4738901, "Attempt to set internal constant: CLUSTER_TIME"),
    ({"ROOT": 1}, 16867, "'ROOT' starts with an invalid character"),
    ({"x": "$a"}, 4890500, "Command let Expression tried to access a field"),
    ({"x": {"$add": ["$a.b", 1]}}, 4890500, "Command let Expression tried to access a field"),
    ({"x": "$$ROOT"}, 4890500, "Command let Expression tried to access a field"),
    ({"x": "$$y"}, 17276, "Use of undefined variable: y"),
    ({"x": {"$bogus": 1}}, 168, "Unrecognized expression '$bogus'"),
])
def test_bad_let(let: dict[str, Any], code: int, message: str) -> None:
    with pytest.raises(MongoError) as exc:
        resolve_let(let)
    assert exc.value.code == code
    assert message in exc.value.errmsg


def test_constants_are_values_with_read_rules() -> None:
    assert resolve_constants({"A": {"$add": [1]}, "b_2": 1}) == {"A": {"$add": [1]}, "b_2": 1}
    assert resolve_constants(None) == {}
    for bad, code in (({"": 1}, 16866), ({"_a": 1}, 16867), ({"NOW": 1}, 17275)):
        with pytest.raises(MongoError) as exc:
            resolve_constants(bad)
        assert exc.value.code == code
