"""The shared BSONColumn test vectors (tests/data/bsoncolumn.json)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

PATH = Path(__file__).resolve().parents[3] / "data" / "bsoncolumn.json"


@dataclass(frozen=True)
class Vector:
    name: str
    origin: str
    column: bytes
    values: bytes  # BSON document {"0": v0, ...}; missing keys are skipped rows
    count: int


def _load() -> tuple[list[Vector], list[tuple[str, bytes]]]:
    data = json.loads(PATH.read_text())
    valid = [
        Vector(
            v["name"],
            v["origin"],
            base64.b64decode(v["column_b64"]),
            base64.b64decode(v["values_bson_b64"]),
            v["count"],
        )
        for v in data["valid"]
    ]
    invalid = [(v["name"], base64.b64decode(v["column_b64"])) for v in data["invalid"]]
    return valid, invalid


VALID, INVALID = _load()
