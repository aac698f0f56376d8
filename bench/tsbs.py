"""A TSBS-shaped generator (devops cpu-only): 100 hosts, 10 string tags, 10 metrics.

Metrics are clamped random walks in 0..100 every 10 s per host, as int64 (`kind="int"`)
or as doubles with two decimals (`kind="double"`). Deterministic for a given seed.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator

from bson import Int64

FIELDS = [f"usage_{n}" for n in ("user", "system", "idle", "nice", "iowait", "irq", "softirq",
                                 "steal", "guest", "guest_nice")]
START = dt.datetime(2024, 1, 1)


def host_tags(h: int) -> dict[str, str]:
    return {"hostname": f"host_{h}", "region": f"region_{h % 3}",
            "datacenter": f"dc_{h % 6}", "rack": str(h % 10), "os": "Ubuntu16.10",
            "arch": "x64", "team": ("SF", "NYC", "LON")[h % 3], "service": str(h % 20),
            "service_version": str(h % 2), "service_environment": ("prod", "test")[h % 2]}


def measurements(n: int, *, hosts: int = 100, kind: str = "int", seed: int = 1,
                 start: int = 0) -> Iterator[dict]:
    """Measurement `start` .. `start + n - 1` of the series (round-robin over hosts)."""
    rnd = random.Random(seed)
    tags = [host_tags(h) for h in range(hosts)]
    walk = [[rnd.uniform(0, 100) for _ in FIELDS] for _ in range(hosts)]
    for i in range(start + n):
        h = i % hosts
        w = walk[h]
        for k in range(len(FIELDS)):
            w[k] = min(100.0, max(0.0, w[k] + rnd.uniform(-5, 5)))
        if i < start:
            continue
        doc: dict = {"time": START + dt.timedelta(seconds=10 * (i // hosts)), "tags": tags[h]}
        if kind == "int":
            for name, v in zip(FIELDS, w):
                doc[name] = Int64(int(v))
        else:
            for name, v in zip(FIELDS, w):
                doc[name] = round(v, 2)
        yield doc
