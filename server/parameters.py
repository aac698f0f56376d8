"""Server parameters: defaults, types, and which may change at runtime.

Read by `getParameter`, changed by `setParameter` and `--setParameter`. The values
mirror mongod's (names, defaults); storage and the bucket catalog read them through
`ServerParameters.get`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["ParameterSpec", "PARAMETERS", "ServerParameters"]


@dataclass(frozen=True, slots=True)
class ParameterSpec:
    name: str
    default: Any
    kind: type  # int, float, bool, str or dict
    runtime: bool  # settable with the setParameter command
    minimum: int | None = None
    maximum: int | None = None


PARAMETERS: Final[dict[str, ParameterSpec]] = {p.name: p for p in (
    ParameterSpec("featureCompatibilityVersion", {"version": "8.0"}, dict, False),
    ParameterSpec("logLevel", 0, int, True, 0, 5),
    ParameterSpec("quiet", False, bool, True),
    ParameterSpec("maxLogSizeKB", 10, int, True, 0),
    ParameterSpec("slowOpThresholdMs", 100, int, True),
    ParameterSpec("cursorTimeoutMillis", 600_000, int, True, 0),
    ParameterSpec("ttlMonitorEnabled", True, bool, True),
    ParameterSpec("ttlMonitorSleepSecs", 60, int, True, 1),
    ParameterSpec("maxBSONDepth", 200, int, False, 21, 1000),
    ParameterSpec("internalQueryMaxBlockingSortMemoryUsageBytes", 100 * 1024 * 1024, int, True, 0),
    ParameterSpec("internalDocumentSourceGroupMaxMemoryBytes", 100 * 1024 * 1024, int, True, 0),
    ParameterSpec("allowDiskUseByDefault", True, bool, True),
    ParameterSpec("journalCommitInterval", 100, int, True, 1, 500),
    # Authentication (mongod's sasl_options.idl and auth_options.idl).
    ParameterSpec("scramIterationCount", 10_000, int, True, 5000),
    ParameterSpec("scramSHA256IterationCount", 15_000, int, True, 5000),
    ParameterSpec("authFailedDelayMs", 0, int, True, 0, 5000),
    ParameterSpec("authenticationMechanisms", "MONGODB-X509,SCRAM-SHA-1,SCRAM-SHA-256", str,
                  False),
    ParameterSpec("enableLocalhostAuthBypass", True, bool, False),
    # bucketd's limits on partly received messages (server/inbound.py says why these)
    ParameterSpec("incomingMessageTimeoutSecs", 60, int, True, 1),
    ParameterSpec("incomingMessageMinBytesPerSec", 4096, int, True, 1),
    ParameterSpec("incomingMessageMemoryLimitBytes", 0, int, True, 0),  # 0: automatic
    ParameterSpec("incomingMessageMemoryWaitSecs", 120, int, True, 1),
    # Time-series bucket catalog (mongod's timeseries.idl names and defaults).
    ParameterSpec("timeseriesBucketMaxCount", 1000, int, False, 1),
    ParameterSpec("timeseriesBucketMaxSize", 128_000, int, False, 1),
    ParameterSpec("timeseriesBucketMinCount", 10, int, False, 1),
    ParameterSpec("timeseriesBucketMinSize", 5120, int, False, 1),
    ParameterSpec("timeseriesLargeMeasurementThreshold", 32, int, False, 1),
    ParameterSpec("timeseriesIdleBucketExpiryMemoryUsageThreshold", 5, int, True),
    ParameterSpec("timeseriesIdleBucketExpiryMaxCountPerAttempt", 3, int, False, 2),
)}


def _coerce(spec: ParameterSpec, value: Any, *, from_string: bool) -> Any:
    kind = spec.kind
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if from_string and str(value).lower() in ("true", "1", "false", "0"):
                return str(value).lower() in ("true", "1")
            if isinstance(value, int | float):
                return bool(value)
            raise ValueError
        if kind is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float):
                if value != int(value):
                    raise ValueError
                value = int(value)
            out = int(value)
            if not -2**63 <= out < 2**63:
                raise ValueError
            if spec.minimum is not None and out < spec.minimum:
                raise MongoError(ErrorCode.BadValue,
                                 f"Invalid value for parameter {spec.name}: {out} is not greater "
                                 f"than or equal to {spec.minimum}")
            if spec.maximum is not None and out > spec.maximum:
                raise MongoError(ErrorCode.BadValue,
                                 f"Invalid value for parameter {spec.name}: {out} is not less "
                                 f"than or equal to {spec.maximum}")
            return out
        if kind is float:
            return float(value)
        if kind is str:
            return str(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite double
        pass
    raise MongoError(ErrorCode.BadValue, f"Invalid value for parameter {spec.name}: {value!r}")


class ServerParameters:
    """The live parameter values of one server."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {n: s.default for n, s in PARAMETERS.items()}

    def get(self, name: str) -> Any:
        return self._values[name]

    def all(self) -> dict[str, Any]:
        return dict(self._values)

    def set_startup(self, name: str, value: str) -> None:
        """Apply `--setParameter name=value`; raises ValueError with a one-line message."""
        spec = PARAMETERS.get(name)
        if spec is None or spec.kind is dict:
            raise ValueError(f"Unknown --setParameter '{name}'")
        try:
            self._values[name] = _coerce(spec, value, from_string=True)
        except MongoError as exc:
            raise ValueError(exc.errmsg) from None

    def set_runtime(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply the setParameter command; returns `was` (the previous value)."""
        if not changes:
            raise MongoError(ErrorCode.InvalidOptions,
                             "no option found to set, use help:true to see options ")
        coerced: list[tuple[str, Any]] = []
        for name, value in changes.items():
            spec = PARAMETERS.get(name)
            if spec is None:
                raise MongoError(ErrorCode.InvalidOptions,
                                 f"attempted to set unrecognized parameter [{name}], "
                                 "use help:true to see options ")
            if not spec.runtime:
                raise MongoError(ErrorCode.IllegalOperation,
                                 f"not allowed to change [{name}] at runtime")
            coerced.append((name, _coerce(spec, value, from_string=False)))
        was = self._values[coerced[0][0]]
        for name, value in coerced:
            self._values[name] = value
        return {"was": was}
