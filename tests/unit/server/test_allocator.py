"""The allocator's settings: applied where the C library is glibc, skipped elsewhere."""

from __future__ import annotations

import ctypes
import platform

import pytest

from server import allocator
from server.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD, tune_allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_both_settings() -> None:
    assert tune_allocator() == {"trimThreshold": TRIM_THRESHOLD,
                                "mmapThreshold": MMAP_THRESHOLD}


def test_without_a_c_library_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library(*_args: object, **_kw: object) -> None:
        raise OSError("no libc here")

    monkeypatch.setattr(allocator.ctypes, "CDLL", no_library)
    assert tune_allocator() == {}


def test_a_refused_setting_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing:
        def __init__(self) -> None:
            self.mallopt = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int)(
                lambda param, _value: 1 if param == -1 else 0)

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *_a, **_k: Refusing())
    assert tune_allocator() == {"trimThreshold": TRIM_THRESHOLD}
