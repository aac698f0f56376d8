"""profile: a database's profiling level (0-2), the server's slowms and sampleRate.

Answers the settings as they were (`was`, `slowms`, `sampleRate`, and `filter` when one
was set), then applies the new ones; a level outside 0-2 only reads them, as in mongod.
`slowms` is the server's `slowOpThresholdMs`: it also decides the "Slow query" log line.
"""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..log import LOG
from ._args import check_fields, get_int

_NOTE = ("When a filter expression is set, slowms and sampleRate are not used for profiling "
         "and slow-query log lines.")


def _sample_rate(body: dict[str, Any]) -> float | None:
    if "sampleRate" not in body:
        return None
    value = body["sampleRate"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'profile.sampleRate' is the "
                         f"wrong type '{type_name(value)}', expected type 'double'")
    if not 0.0 <= value <= 1.0:
        raise MongoError(ErrorCode.BadValue, "'sampleRate' must be between 0.0 and 1.0 "
                         "inclusive")
    return float(value)


def _filter(body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """(given, the new filter: None to unset)."""
    if "filter" not in body:
        return False, None
    value = body["filter"]
    if isinstance(value, dict):
        return True, value
    if value == "unset":
        return True, None
    raise MongoError(ErrorCode.BadValue, "Expected an object, or the string 'unset'.")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "profile", ("slowms", "sampleRate", "filter"))
    level = get_int(body, "profile", "profile")
    assert level is not None
    slowms = get_int(body, "profile", "slowms")
    rate = _sample_rate(body)
    filter_given, new_filter = _filter(body)
    settings = req.server.profile
    params = req.server.params
    old: dict[str, Any] = {"level": settings.level(req.db),
                           "slowms": int(params.get("slowOpThresholdMs")),
                           "sampleRate": settings.sample_rate}
    old_filter = settings.filter_of(req.db)
    reply: dict[str, Any] = {"was": old["level"], "slowms": old["slowms"],
                             "sampleRate": old["sampleRate"]}
    if old_filter is not None:
        reply["filter"] = old_filter
        old["filter"] = old_filter
    if old_filter is not None or (filter_given and new_filter is not None):
        reply["note"] = _NOTE
    if filter_given:
        settings.set_filter(req.db, new_filter)
    if 0 <= level <= 2:
        settings.set_level(req.db, level)
    if slowms is not None:
        params.set_runtime({"slowOpThresholdMs": slowms})
    if rate is not None:
        settings.sample_rate = rate
    if not (0 <= level <= 2) and slowms is None and rate is None and not filter_given:
        return reply
    new: dict[str, Any] = {"level": settings.level(req.db),
                           "slowms": int(params.get("slowOpThresholdMs")),
                           "sampleRate": settings.sample_rate}
    if settings.filter_of(req.db) is not None:
        new["filter"] = settings.filter_of(req.db)
    LOG.info("COMMAND", 48742, f"conn{req.conn.id}", "Profiler settings changed", **{
        "from": old, "to": new})
    return reply
