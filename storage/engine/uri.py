"""Database URIs as they may be shown: logs, getCmdLineOpts and stats never carry a
password (kept apart from the engine so that reading the command line loads no driver)."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["redact_uri"]

_PASSWORD: Final = re.compile(r"(://[^:/@]*:)[^@/]*@")


def redact_uri(uri: str) -> str:
    """`uri` with the password of its user part replaced by ``<password>``."""
    return _PASSWORD.sub(r"\1<password>@", uri)
