"""Authentication counters: serverStatus's `security.authentication`, as mongod 8.0 keeps
them (its AuthCounter).

Per mechanism: `authenticate` counts every conversation started (saslStart, authenticate,
or one started inside hello) and every one that succeeded; `speculativeAuthenticate`
counts those started inside hello; `clusterAuthenticate` those of cluster members (none
here: bucketd has no keyFile). `saslSupportedMechsReceived` counts hellos asking for a
user's mechanisms. Only enabled mechanisms are counted (mongod refuses the others before
counting); MONGODB-X509 and SCRAM-SHA-256 are always listed, as in mongod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from bson import Int64

__all__ = ["AuthCounters"]

_ALWAYS_LISTED: Final = ("MONGODB-X509", "SCRAM-SHA-256")
_KINDS: Final = ("speculativeAuthenticate", "clusterAuthenticate", "authenticate")


@dataclass(slots=True)
class AuthCounters:
    sasl_supported_mechs_received: int = 0
    # (mechanism, kind, "received" | "successful") -> count
    _counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def started(self, mechanism: str, speculative: bool) -> None:
        self._counts[(mechanism, "authenticate", "received")] += 1
        if speculative:
            self._counts[(mechanism, "speculativeAuthenticate", "received")] += 1

    def succeeded(self, mechanism: str, speculative: bool) -> None:
        self._counts[(mechanism, "authenticate", "successful")] += 1
        if speculative:
            self._counts[(mechanism, "speculativeAuthenticate", "successful")] += 1

    def document(self, enabled: Iterable[str]) -> dict[str, Any]:
        """The `authentication` section; mechanisms in mongod's (sorted) order."""
        names = sorted({*enabled, *_ALWAYS_LISTED})
        return {
            "saslSupportedMechsReceived": self.sasl_supported_mechs_received,
            "mechanisms": {
                name: {kind: {"received": Int64(self._counts[(name, kind, "received")]),
                              "successful": Int64(self._counts[(name, kind, "successful")])}
                       for kind in _KINDS}
                for name in names},
        }
