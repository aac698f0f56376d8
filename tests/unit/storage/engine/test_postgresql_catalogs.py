"""Two catalogs (two processes) on one PostgreSQL schema: one's DDL reaches the other at
`refresh_if_changed`, handles of unchanged collections stay, dropped ones fail, the
listeners hear of it, and a stale catalog may not change the shared one. Runs when
BUCKETD_TEST_POSTGRES_URI names a server (tests/engines.py)."""

from __future__ import annotations

import os

import pytest

from storage.catalog import Catalog, CatalogChange
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from tests.engines import postgres_scratch, postgres_uri_env

pytestmark = pytest.mark.skipif(not os.environ.get(postgres_uri_env),
                                reason=f"needs {postgres_uri_env} (a PostgreSQL server)")


@pytest.fixture
def two():
    scratch = postgres_scratch()
    schema = scratch.new_schema()
    a = Catalog.open(engine="postgresql", uri=scratch.database(), schema=schema)
    b = Catalog.open(engine="postgresql", uri=scratch.database(), schema=schema)
    yield a, b
    a.close()
    b.close()
    scratch.drop_schema(schema)


def test_ddl_of_one_reaches_the_other_at_refresh(two) -> None:
    a, b = two
    heard: list[CatalogChange] = []
    b.add_refresh_listener(heard.append)
    assert b.refresh_if_changed() is None  # nothing moved: one query, no reload
    a.create_collection("d", "keep")
    a.create_collection("d", "gone")
    keep_b = b.get_collection("d", "keep")
    assert keep_b is None
    change = b.refresh_if_changed()
    assert change is not None and change.namespaces == {"d.keep", "d.gone"}
    assert heard == [change] and not change.dropped
    keep_b = b.get_collection("d", "keep")
    gone_b = b.get_collection("d", "gone")
    assert keep_b is not None and gone_b is not None
    keep_b.insert_one({"_id": 1})
    assert a.get_collection("d", "keep").count() == 1  # type: ignore[union-attr]

    a.get_collection("d", "keep").create_indexes([{"key": {"x": 1}, "name": "x_1"}])  # type: ignore[union-attr]
    a.drop_collection("d", "gone")
    change = b.refresh_if_changed()
    assert change is not None and change.dropped_namespaces == {"d.gone"}
    assert change.namespaces == {"d.keep", "d.gone"}
    assert b.get_collection("d", "keep") is keep_b  # the handle of a changed one stays
    assert [ix.name for ix in keep_b.entry.indexes] == ["_id_", "x_1"]
    keep_b.insert_one({"_id": 2, "x": 5})
    with pytest.raises(MongoError) as ei:
        gone_b.insert_one({"_id": 1})
    assert ei.value.code == ErrorCode.NamespaceNotFound
    assert b.refresh_if_changed() is None


def test_a_stale_catalog_gets_a_write_conflict_then_refreshes(two) -> None:
    a, b = two
    a.create_collection("d", "x")
    with pytest.raises(MongoError) as ei:  # b does not know of d.x yet
        b.create_collection("d", "x")
    assert ei.value.code == ErrorCode.WriteConflict
    assert b.entry("d", "x") is None  # nothing half-done
    b.refresh_if_changed()
    with pytest.raises(MongoError) as ei:
        b.create_collection("d", "x")
    assert ei.value.code == ErrorCode.NamespaceExists


def test_own_ddl_needs_no_refresh(two) -> None:
    a, _b = two
    a.create_collection("d", "x")
    a.drop_collection("d", "x")
    assert a.refresh_if_changed() is None
