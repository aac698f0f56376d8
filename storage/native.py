"""The native core (the Rust crate in `native/`), when the install built it.

`core` is the extension module `storage._native`, or None where no Rust toolchain was
there at install time, or when the environment says `BUCKETD_NATIVE=0` (read at import:
the Python reference everywhere, for comparisons and for CI's run of the Python path);
every user of it has the Python reference to fall back on.
`describe()` is what the server logs at start-up about the path in use. `check(call)`
runs a native call and turns its `NativeError(code, message)` into `MongoError`, the one
error type the layers above render.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from storage.errors import MongoError

__all__ = ["AVAILABLE", "check", "core", "describe"]

core: ModuleType | None
_DISABLED = os.environ.get("BUCKETD_NATIVE") == "0"
if _DISABLED:
    core = None
else:
    try:
        import storage._native as core
    except ImportError:  # built without Rust: the Python reference does the work
        core = None

AVAILABLE: bool = core is not None


class _NeverRaised(Exception):
    """Stands for `Declined` when the native core is not there."""


# raised by the core for work it leaves to the Python reference (what it was asked to do
# is left undone)
Declined: type[Exception] = core.Declined if core is not None else _NeverRaised

T = TypeVar("T")


def describe() -> dict[str, Any]:
    """{path: "native", version} or {path: "python"}: for the start-up log."""
    if _DISABLED:
        return {"path": "python", "reason": "BUCKETD_NATIVE=0"}
    if core is None:
        return {"path": "python", "reason": "storage._native was not built"}
    return {"path": "native", "version": core.version()}


def check(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, with a `NativeError` raised as the `MongoError` it carries."""
    assert core is not None
    try:
        return call(*args)
    except core.NativeError as e:
        code, message = e.args
        raise MongoError(code, message) from None
