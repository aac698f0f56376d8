"""`storage.interrupt`: a killed operation stops at a scan's next chunk, not before its
work starts or after it ends, and storage work done for nobody is never interrupted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from storage import interrupt
from storage.catalog import Catalog
from storage.errors import MongoError


@dataclass
class Op:
    killed: MongoError | None = None


def killed() -> Op:
    return Op(MongoError(11601, "operation was interrupted"))


@pytest.fixture(params=["memory", "sqlite"])
def catalog(request: pytest.FixtureRequest, tmp_path) -> Catalog:
    cat = Catalog.open(str(tmp_path / "db") if request.param == "sqlite" else None,
                       engine=request.param)
    coll = cat.get_or_create_collection("db", "c")
    coll.insert_many([{"_id": i, "x": i} for i in range(3000)])
    return cat


def test_a_scan_stops_at_a_chunk_once_its_operation_is_killed(catalog: Catalog) -> None:
    op = Op()
    coll = catalog.get_collection("db", "c")
    assert coll is not None

    def scan() -> int:
        n = 0
        for _rid, _raw in coll.scan():
            n += 1
            if n == 500:
                op.killed = MongoError(11601, "operation was interrupted")
        return n

    with pytest.raises(MongoError) as err:
        interrupt.run_for(op, scan)
    assert err.value.code == 11601
    assert interrupt._current is None  # restored


def test_a_killed_operation_does_not_start(catalog: Catalog) -> None:
    ran = []
    with pytest.raises(MongoError):
        interrupt.run_for(killed(), ran.append, 1)
    assert ran == []


def test_index_scans_check_too(catalog: Catalog) -> None:
    coll = catalog.get_collection("db", "c")
    assert coll is not None
    with pytest.raises(MongoError):
        interrupt.run_for(killed(), lambda: list(coll.index_scan("_id_")))
    assert len(interrupt.run_for(Op(), lambda: list(coll.index_scan("_id_")))) == 3000


def test_work_for_nobody_is_never_interrupted(catalog: Catalog) -> None:
    coll = catalog.get_collection("db", "c")
    assert coll is not None
    assert len(interrupt.run_for(None, lambda: list(coll.scan()))) == 3000
    interrupt.check()
