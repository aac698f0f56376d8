"""Log lines in mongod's structured JSON form.

    {"t":{"$date":"2026-12-02T17:21:40.123+00:00"},"s":"I","c":"NETWORK","id":22943,
     "ctx":"listener","msg":"Connection accepted","attr":{...}}

Ids and messages follow mongod's where mongod logs the same event, so tools that
grep mongod logs (e.g. for "Waiting for connections", id 23016) work on ours.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, TextIO

from bson import json_util

__all__ = ["StructuredLog", "LOG"]

_JSON_OPTS = json_util.JSONOptions(json_mode=json_util.JSONMode.RELAXED)


def _timestamp(now: float) -> str:
    ms = int(now * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{ms:03d}+00:00"


class StructuredLog:
    def __init__(self) -> None:
        self._out: TextIO = sys.stdout
        self._lock = threading.Lock()
        self.quiet = False
        self.verbosity = 0
        # The last lines, for `getLog: "global"`; warnings logged at startup separately.
        self.recent: deque[str] = deque(maxlen=1024)
        self.total_lines = 0
        self.startup_warnings: list[str] = []

    def configure(self, path: str | None = None, *, quiet: bool = False) -> None:
        if path:
            self._out = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.quiet = quiet

    def close(self) -> None:
        if self._out not in (sys.stdout, sys.stderr):
            self._out.close()
            self._out = sys.stdout

    def write(self, severity: str, component: str, log_id: int, ctx: str, msg: str,
              attr: dict[str, Any] | None = None) -> None:
        line: dict[str, Any] = {"t": {"$date": _timestamp(time.time())}, "s": severity,
                                "c": component, "id": log_id, "ctx": ctx, "msg": msg}
        if attr:
            line["attr"] = attr
        text = json_util.dumps(line, json_options=_JSON_OPTS, separators=(",", ":"))
        with self._lock:
            self.recent.append(text)
            self.total_lines += 1
            try:
                self._out.write(text + "\n")
                self._out.flush()
            except (OSError, ValueError):
                pass  # a closed or full log must never take the server down

    def info(self, component: str, log_id: int, ctx: str, msg: str, **attr: Any) -> None:
        self.write("I", component, log_id, ctx, msg, attr)

    def warning(self, component: str, log_id: int, ctx: str, msg: str, **attr: Any) -> None:
        self.write("W", component, log_id, ctx, msg, attr)

    def error(self, component: str, log_id: int, ctx: str, msg: str, **attr: Any) -> None:
        self.write("E", component, log_id, ctx, msg, attr)

    def debug(self, component: str, log_id: int, ctx: str, msg: str, **attr: Any) -> None:
        if self.verbosity > 0:
            self.write("D1", component, log_id, ctx, msg, attr)


LOG = StructuredLog()
