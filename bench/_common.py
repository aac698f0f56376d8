"""Shared by the benchmark scripts: a server from this checkout, timing, RSS of a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from pytest_bucketd import BucketdProcess  # noqa: E402


@contextmanager
def bucketd(*extra: str) -> Iterator[BucketdProcess]:
    with tempfile.TemporaryDirectory(prefix="bucketd-bench-") as d:
        # BENCH_PROFILE=out.txt: the server runs under py-spy (collapsed stacks of every
        # thread written to out.txt when it stops; its CPU figures are then py-spy's);
        # with BENCH_PROFILE_GIL=1 only the samples of threads holding the GIL, with
        # BENCH_PROFILE_NATIVE=1 native frames too (the core's, SQLite's, libc's);
        # BENCH_PROFILE_RATE: samples per second (200 by default)
        profile = os.environ.get("BENCH_PROFILE")
        gil = ["--gil"] if os.environ.get("BENCH_PROFILE_GIL") == "1" else []
        rate = os.environ.get("BENCH_PROFILE_RATE", "200")
        spy = ["py-spy", "record", "--format", "raw", "--threads", "--rate", rate, *gil, *(["--native"] if os.environ.get("BENCH_PROFILE_NATIVE") else []),
               "-o", profile, "--"] if profile else []
        proc = BucketdProcess([*spy, sys.executable, "-m", "server"], dbpath=d,
                              extra_args=["--quiet", *extra])
        proc.start()
        if spy:
            # stopping stops the server under py-spy, which then writes its profile
            proc.stop = lambda timeout=30.0: _stop_profiled(proc, timeout)  # type: ignore[method-assign]
        try:
            yield proc
        finally:
            proc.stop()


def _stop_profiled(proc: BucketdProcess, timeout: float) -> int:
    assert proc.proc is not None
    children = subprocess.run(["pgrep", "-P", str(proc.proc.pid)], capture_output=True,
                              text=True).stdout.split()
    for pid in children:
        os.kill(int(pid), signal.SIGTERM)
    return proc.proc.wait(timeout)


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of a process, in MiB."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def percentiles(samples: list[float], ps: tuple[float, ...] = (50, 95, 99)) -> dict[float, float]:
    s = sorted(samples)
    return {p: s[min(len(s) - 1, int(p / 100 * len(s)))] for p in ps}
