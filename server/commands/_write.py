"""Shared by the write commands: write concern, writeErrors, document validators, and
telling the bucket catalog about direct writes to a time-series buckets collection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..document_validation import make_validator
from ..namespaces import BUCKETS_PREFIX

__all__ = ["WriteConcern", "parse_write_concern", "make_validator",
           "check_batch_size", "after_direct_write"]

MAX_WRITE_BATCH = 100_000


@dataclass(frozen=True, slots=True)
class WriteConcern:
    """A command's parsed `writeConcern`: `w` (a count or a tag name) and `j` (journaled)."""

    w: int | str = 1
    j: bool = False


def parse_write_concern(body: dict[str, Any]) -> WriteConcern:
    wc = body.get("writeConcern")
    if wc is None:
        return WriteConcern()
    if not isinstance(wc, dict):
        raise MongoError(ErrorCode.TypeMismatch, "writeConcern must be an object")
    w = wc.get("w", 1)
    if not isinstance(w, int | str) or isinstance(w, bool):
        raise MongoError(ErrorCode.FailedToParse, "w has to be a number or string")
    if isinstance(w, int) and w < 0:
        raise MongoError(ErrorCode.FailedToParse, "w cannot be a negative value")
    j = wc.get("j", False)
    if not isinstance(j, bool | int | float):
        raise MongoError(ErrorCode.FailedToParse, "j must be numeric or a boolean value")
    fsync = bool(wc.get("fsync", False))
    if bool(j) and fsync:
        raise MongoError(ErrorCode.FailedToParse, "fsync and j options cannot be used together")
    return WriteConcern(w, bool(j) or fsync)


def check_batch_size(n: int, command: str) -> None:
    if n == 0 or n > MAX_WRITE_BATCH:
        raise MongoError(ErrorCode.InvalidLength,
                         f"Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {n} "
                         "operations.")


def after_direct_write(req: Any, db: str, name: str) -> None:
    """A write command wrote collection `name` (storage thread): when that is a buckets
    collection, the write bypassed the bucket catalog, which forgets what it held."""
    if name.startswith(BUCKETS_PREFIX) and req.server.timeseries is not None:
        req.server.timeseries.bucket_write_bypassed(db, name)
