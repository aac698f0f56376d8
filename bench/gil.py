"""Does the native core release the GIL while it works? A Python thread counting in a
loop beside the catalog shows it: its pace *during* each native call of the ingest path
(the measurement scan, the buckets' fold) against its pace with the GIL to itself, and
against a C call that keeps the GIL (`sum` over a range, which runs no bytecode).

A pace near the solo pace means the call ran without the GIL (the counter ran beside it
on the other core); near zero means the call held it. TSBS batches, in process.

Usage: python bench/gil.py [--measurements 100000]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from catalog import _batches  # noqa: E402

from storage import native  # noqa: E402
from storage.timeseries import native_scan  # noqa: E402
from storage.timeseries.bucket_catalog import BucketCatalog  # noqa: E402
from storage.timeseries.options import parse_timeseries_options  # noqa: E402


class Counter:
    """A thread counting as fast as the GIL lets it."""

    def __init__(self) -> None:
        self.n = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop:
            self.n += 1

    def __enter__(self) -> Counter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()


class Watch:
    """Wraps a function: time spent in it and what the counter did meanwhile."""

    def __init__(self, counter: Counter, fn: Callable[..., Any]) -> None:
        self.counter, self.fn, self.seconds, self.counts = counter, fn, 0.0, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        c0, t0 = self.counter.n, time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.counts += self.counter.n - c0

    def pace(self) -> float:
        return self.counts / self.seconds if self.seconds else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measurements", type=int, default=100_000)
    args = ap.parse_args()
    core = native.core
    if core is None:
        sys.exit("the native core is not built")
    batches = _batches(args.measurements, 100)
    opts = parse_timeseries_options({"timeField": "time", "metaField": "tags"})
    sys.setswitchinterval(0.0005)  # hand the GIL over often, as a busy server does
    with Counter() as counter:
        c0, t0 = counter.n, time.perf_counter()
        time.sleep(0.5)
        solo = (counter.n - c0) / (time.perf_counter() - t0)
        holds = Watch(counter, sum)
        for _ in range(20):
            holds(range(2_000_000))
        scan = Watch(counter, core.scan_measurements)
        fold = Watch(counter, core.fold_buckets)
        core.scan_measurements, core.fold_buckets = scan, fold  # type: ignore[method-assign]
        try:
            cat = BucketCatalog()
            for b in batches:
                native_scan.prescan(b.buffer, opts, False, offsets=b.offsets)
                cat.commit(cat.insert_batch("bench.cpu", opts, b, None, ordered=False))
        finally:
            core.scan_measurements, core.fold_buckets = scan.fn, fold.fn  # type: ignore[method-assign]
    print(f"{args.measurements:,} TSBS measurements in batches of 1000; counter pace "
          "(increments/s) while each call runs:")
    print(f"  the counter alone            {solo:14,.0f}")
    for name, w in (("sum(range(...)) (keeps it)", holds), ("scan_measurements", scan),
                    ("fold_buckets", fold)):
        print(f"  {name:28} {w.pace():14,.0f}   {w.pace() / solo:5.2f} of alone, "
              f"{w.seconds:.2f} s in the calls")


if __name__ == "__main__":
    main()
