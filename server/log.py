"""Log lines in mongod's structured JSON form.

    {"t":{"$date":"2026-12-02T17:21:40.123+00:00"},"s":"I","c":"NETWORK","id":22943,
     "ctx":"listener","msg":"Connection accepted","attr":{...}}

Ids and messages follow mongod's where mongod logs the same event, so tools that
grep mongod logs (e.g. for "Waiting for connections", id 23016) work on ours. Large
attributes are truncated at `maxLogSizeKB` as mongod does (`log_format`), and the lines
kept for `getLog` are bounded as mongod's RamLog bounds them: the last 1024 lines, at
most 1 MiB together.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from typing import Any, TextIO

from storage.files import create_private_file

from .log_format import format_line

__all__ = ["StructuredLog", "LOG", "RAMLOG_MAX_LINES", "RAMLOG_MAX_BYTES"]

# mongod's RamLog (what getLog answers from) keeps this many lines, this many bytes
RAMLOG_MAX_LINES = 1024
RAMLOG_MAX_BYTES = 1024 * 1024


def _timestamp(now: float) -> str:
    ms = int(now * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{ms:03d}+00:00"


class StructuredLog:
    def __init__(self) -> None:
        self._out: TextIO = sys.stdout
        self._lock = threading.Lock()
        self.quiet = False
        self.verbosity = 0
        self.max_attribute_size_kb = 10  # the maxLogSizeKB parameter; 0: no truncation
        # The last lines, for `getLog: "global"`; warnings logged at startup separately.
        self.recent: deque[str] = deque(maxlen=RAMLOG_MAX_LINES)
        self._recent_bytes = 0
        self.total_lines = 0
        self.startup_warnings: list[str] = []

    def configure(self, path: str | None = None, *, quiet: bool = False,
                  append: bool = False) -> None:
        """Log to `path` (stdout without one). Without `append` an existing log is first
        renamed to `<path>.<UTC time>` as mongod does (logged on the console, 20697)."""
        if path:
            if not append and os.path.exists(path):
                renamed = path + "." + time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
                os.replace(path, renamed)
                self.info("CONTROL", 20697, "main", "Renamed existing log file",
                          oldLogPath=os.path.abspath(path), newLogPath=os.path.abspath(renamed))
            create_private_file(path)  # 0600, as mongod's files
            self._out = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.quiet = quiet

    def close(self) -> None:
        if self._out not in (sys.stdout, sys.stderr):
            self._out.close()
            self._out = sys.stdout

    def write(self, severity: str, component: str, log_id: int, ctx: str, msg: str,
              attr: dict[str, Any] | None = None) -> None:
        head: dict[str, Any] = {"t": {"$date": _timestamp(time.time())}, "s": severity,
                                "c": component, "id": log_id, "ctx": ctx, "msg": msg}
        text = format_line(head, attr, self.max_attribute_size_kb * 1024)
        with self._lock:
            self._remember(text)
            self.total_lines += 1
            try:
                self._out.write(text + "\n")
                self._out.flush()
            except (OSError, ValueError):
                pass  # a closed or full log must never take the server down

    def _remember(self, text: str) -> None:
        """Keep `text` for getLog; drop the oldest lines beyond RamLog's bounds (the newest
        line always stays)."""
        recent = self.recent
        if len(recent) == recent.maxlen:
            self._recent_bytes -= len(recent[0])
        recent.append(text)
        self._recent_bytes += len(text)
        while self._recent_bytes > RAMLOG_MAX_BYTES and len(recent) > 1:
            self._recent_bytes -= len(recent.popleft())

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
