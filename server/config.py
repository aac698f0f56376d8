"""Command-line flags and YAML config files, with mongod's names.

`parse_args(argv)` returns a `Config` or raises `ConfigError` (one line; the caller
prints it and exits with status 2). Precedence as mongod: command-line flags override
the config file, which overrides the defaults.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from storage.engine.uri import redact_uri

from .parameters import ServerParameters
from .tls.options import (
    TlsConfig,
    TlsOptionError,
    add_tls_arguments,
    censor_argv,
    tls_config_from,
)

__all__ = ["Config", "ConfigError", "parse_args", "DEFAULT_DBPATH"]

DEFAULT_PORT = 27017
DEFAULT_BIND_IP = "127.0.0.1"
# The embedded default keeps data in a local folder next to where the server starts.
DEFAULT_DBPATH = os.path.join(".", "data", "db")
DEFAULT_MAX_CONNS = 1_000_000
DEFAULT_STORAGE_ENGINE = "sqlite"


class ConfigError(Exception):
    """Invalid flags or config file: reported as one line, exit status 2."""


@dataclass(slots=True)
class Config:
    port: int = DEFAULT_PORT
    bind_ip: list[str] = field(default_factory=lambda: [DEFAULT_BIND_IP])
    dbpath: str = DEFAULT_DBPATH
    storage_engine: str = DEFAULT_STORAGE_ENGINE  # --storageEngine / storage.engine
    postgres_uri: str | None = None  # --postgresUri / storage.postgresql.uri
    logpath: str | None = None
    log_append: bool = False  # --logappend / systemLog.logAppend: else an old log is renamed
    quiet: bool = False
    max_conns: int = DEFAULT_MAX_CONNS
    slowms: int = 100
    repair: bool = False  # --repair: drop unreadable catalog entries, then exit
    metrics_port: int | None = None
    auth: bool = False  # --auth / security.authorization: enabled
    metrics_bind_ip: list[str] = field(default_factory=lambda: [DEFAULT_BIND_IP])
    tls: TlsConfig = field(default_factory=TlsConfig)
    config_file: str | None = None
    set_parameters: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)

    def parsed(self) -> dict[str, Any]:
        """The `parsed` document of getCmdLineOpts, shaped like mongod's."""
        out: dict[str, Any] = {}
        if self.config_file:
            out["config"] = self.config_file
        out["net"] = {"bindIp": ",".join(self.bind_ip), "port": self.port}
        if self.max_conns != DEFAULT_MAX_CONNS:
            out["net"]["maxIncomingConnections"] = self.max_conns
        if self.tls.given:
            out["net"]["tls"] = self.tls.parsed()
        if self.set_parameters:
            out["setParameter"] = dict(self.set_parameters)
        out["storage"] = {"dbPath": self.dbpath}
        if self.storage_engine != DEFAULT_STORAGE_ENGINE:
            out["storage"]["engine"] = self.storage_engine
        if self.postgres_uri is not None:
            out["storage"]["postgresql"] = {"uri": redact_uri(self.postgres_uri)}
        if self.logpath or self.quiet:
            log: dict[str, Any] = {}
            if self.logpath:
                log.update(destination="file", path=self.logpath)
                if self.log_append:
                    log["logAppend"] = True
            if self.quiet:
                log["quiet"] = True
            out["systemLog"] = log
        if self.auth:
            out["security"] = {"authorization": "enabled"}
        if self.slowms != 100:
            out["operationProfiling"] = {"slowOpThresholdMs": self.slowms}
        return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(message)


def _parser() -> _Parser:
    p = _Parser(prog="bucketd", add_help=True,
                description="A MongoDB 8.0-compatible server built around time-series collections.",
                epilog="other commands:\n  bucketd inspect FILE.bson... | --uri URI -c COLL\n"
                       "                        look inside time-series buckets (dumps or a "
                       "server);\n                        see `bucketd inspect --help`",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, help=f"port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--bind_ip", help="comma-separated addresses to listen on (default 127.0.0.1)")
    p.add_argument("--bind_ip_all", action="store_true", help="listen on all addresses")
    p.add_argument("--dbpath", help=f"data directory (default {DEFAULT_DBPATH}, created if missing)")
    p.add_argument("--storageEngine",
                   help="storage engine: sqlite (default, in --dbpath) or postgresql")
    p.add_argument("--postgresUri", help="postgresql://... of the database for "
                   "--storageEngine postgresql (storage.postgresql.uri)")
    p.add_argument("--config", "-f", help="YAML configuration file with mongod's keys")
    p.add_argument("--logpath", help="write the log to this file instead of stdout")
    p.add_argument("--logappend", action="store_true",
                   help="append to --logpath instead of renaming the old log")
    p.add_argument("--quiet", action="store_true",
                   help="do not log connections and authentications")
    p.add_argument("--maxConns", type=int, help="maximum number of simultaneous connections")
    p.add_argument("--slowms", type=int, help="slow operation threshold in ms (default 100)")
    p.add_argument("--metricsPort", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--repair", action="store_true",
                   help="remove catalog entries that cannot be read (and their data), then exit")
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--auth", action="store_true", default=None,
                      help="require clients to authenticate (security.authorization)")
    auth.add_argument("--noauth", dest="auth", action="store_false",
                      help="do not require authentication (the default)")
    p.add_argument("--metricsBindIp",
                   help="comma-separated addresses for --metricsPort (default 127.0.0.1)")
    p.add_argument("--setParameter", action="append", default=[], metavar="NAME=VALUE",
                   help="set a server parameter (repeatable)")
    add_tls_arguments(p)
    return p


def _get(doc: dict[str, Any], dotted: str) -> Any:
    cur: Any = doc
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


_KNOWN_CONFIG_KEYS = {
    "net": {"port", "bindIp", "bindIpAll", "maxIncomingConnections", "tls"},
    "storage": {"dbPath", "journal", "engine", "postgresql"},
    "systemLog": {"path", "destination", "quiet", "logAppend", "verbosity"},
    "setParameter": None,
    "operationProfiling": {"slowOpThresholdMs", "mode"},
    "processManagement": {"fork", "pidFilePath", "timeZoneInfo"},
    "metrics": {"port", "bindIp"},
    "security": {"authorization"},
}


def _load_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f" (line {line + 1})" if line is not None else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"config file {path} must be a YAML mapping")
    for section, value in doc.items():
        if section not in _KNOWN_CONFIG_KEYS:
            raise ConfigError(f"Unrecognized option: {section}")
        allowed = _KNOWN_CONFIG_KEYS[section]
        if allowed is None:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"config file option {section} must be a mapping")
        for key in value:
            if key not in allowed:
                raise ConfigError(f"Unrecognized option: {section}.{key}")
    pg = _get(doc, "storage.postgresql")
    if pg is not None:
        if not isinstance(pg, dict):
            raise ConfigError("config file option storage.postgresql must be a mapping")
        for key in pg:
            if key != "uri":
                raise ConfigError(f"Unrecognized option: storage.postgresql.{key}")
    return doc


def _flag(given: bool, file_doc: dict[str, Any], key: str) -> bool:
    """A switch: the command line's, else the config file's boolean."""
    value = _get(file_doc, key)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return bool(given or value)


def _port(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"{what} must be an integer between 0 and 65535, got {value!r}")
    return value


def _auth(flag: bool | None, configured: Any) -> bool:
    if flag is not None:
        return flag
    if configured is None:
        return False
    if configured not in ("enabled", "disabled"):
        raise ConfigError("security.authorization must be 'enabled' or 'disabled', got "
                          f"{configured!r}")
    return bool(configured == "enabled")


def _addresses(value: Any, what: str) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a comma-separated string, got {value!r}")
    return [a.strip() for a in value.split(",") if a.strip()]


def _storage_engine(cfg: Config, ns: argparse.Namespace, file_doc: dict[str, Any]) -> None:
    """--storageEngine and --postgresUri (or storage.engine, storage.postgresql.uri). An
    unknown engine name is the storage layer's to refuse at start-up, as mongod does."""
    engine = ns.storageEngine if ns.storageEngine is not None else _get(file_doc, "storage.engine")
    if engine is not None:
        if not isinstance(engine, str) or not engine:
            raise ConfigError(f"storage.engine must be a non-empty string, got {engine!r}")
        cfg.storage_engine = engine
    uri = ns.postgresUri if ns.postgresUri is not None else _get(file_doc,
                                                                 "storage.postgresql.uri")
    if uri is not None:
        if not isinstance(uri, str) or not uri.startswith(("postgresql://", "postgres://")):
            raise ConfigError("storage.postgresql.uri must be a postgresql:// URI, got "
                              f"{redact_uri(uri) if isinstance(uri, str) else uri!r}")
        cfg.postgres_uri = uri
    if cfg.storage_engine == "postgresql" and cfg.postgres_uri is None:
        raise ConfigError("--storageEngine postgresql needs --postgresUri "
                          "(storage.postgresql.uri)")


def parse_args(argv: list[str]) -> Config:
    ns = _parser().parse_args(argv)
    cfg = Config(argv=[redact_uri(a) for a in censor_argv(list(argv))])
    file_doc: dict[str, Any] = {}
    if ns.config:
        cfg.config_file = ns.config
        file_doc = _load_config_file(ns.config)

    port = ns.port if ns.port is not None else _get(file_doc, "net.port")
    if port is not None:
        cfg.port = _port(port, "--port" if ns.port is not None else "net.port")

    if ns.bind_ip_all or _get(file_doc, "net.bindIpAll") is True:
        cfg.bind_ip = ["0.0.0.0", "::"]
    else:
        bind = ns.bind_ip if ns.bind_ip is not None else _get(file_doc, "net.bindIp")
        if bind is not None:
            if not isinstance(bind, str) or not bind.strip():
                raise ConfigError(f"bindIp must be a comma-separated string, got {bind!r}")
            cfg.bind_ip = [a.strip() for a in bind.split(",") if a.strip()]

    dbpath = ns.dbpath if ns.dbpath is not None else _get(file_doc, "storage.dbPath")
    if dbpath is not None:
        if not isinstance(dbpath, str) or not dbpath:
            raise ConfigError(f"dbPath must be a non-empty string, got {dbpath!r}")
        cfg.dbpath = dbpath

    _storage_engine(cfg, ns, file_doc)

    logpath = ns.logpath if ns.logpath is not None else _get(file_doc, "systemLog.path")
    if logpath is not None:
        if not isinstance(logpath, str) or not logpath:
            raise ConfigError(f"systemLog.path must be a non-empty string, got {logpath!r}")
        cfg.logpath = logpath
    cfg.quiet = _flag(ns.quiet, file_doc, "systemLog.quiet")
    cfg.log_append = _flag(ns.logappend, file_doc, "systemLog.logAppend")
    cfg.repair = bool(ns.repair)

    max_conns = ns.maxConns if ns.maxConns is not None else _get(
        file_doc, "net.maxIncomingConnections")
    if max_conns is not None:
        if isinstance(max_conns, bool) or not isinstance(max_conns, int) or max_conns < 1:
            raise ConfigError(f"maxConns must be a positive integer, got {max_conns!r}")
        cfg.max_conns = max_conns

    slowms = ns.slowms if ns.slowms is not None else _get(
        file_doc, "operationProfiling.slowOpThresholdMs")
    if slowms is not None:
        if isinstance(slowms, bool) or not isinstance(slowms, int):
            raise ConfigError(f"slowms must be an integer, got {slowms!r}")
        cfg.slowms = slowms

    metrics = ns.metricsPort if ns.metricsPort is not None else _get(file_doc, "metrics.port")
    if metrics is not None:
        cfg.metrics_port = _port(metrics, "--metricsPort")
    metrics_bind = ns.metricsBindIp if ns.metricsBindIp is not None else _get(
        file_doc, "metrics.bindIp")
    if metrics_bind is not None:
        cfg.metrics_bind_ip = _addresses(metrics_bind, "metricsBindIp")

    try:
        cfg.tls = tls_config_from(ns, _get(file_doc, "net.tls"))
    except TlsOptionError as exc:
        raise ConfigError(str(exc)) from None

    cfg.auth = _auth(ns.auth, _get(file_doc, "security.authorization"))

    params = _get(file_doc, "setParameter") or {}
    if not isinstance(params, dict):
        raise ConfigError("setParameter in the config file must be a mapping")
    cfg.set_parameters = {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                          for k, v in params.items()}
    for item in ns.setParameter:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--setParameter expects name=value, got {item!r}")
        cfg.set_parameters[name] = value
    check = ServerParameters()
    for name, value in cfg.set_parameters.items():
        try:
            check.set_startup(name, value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return cfg
