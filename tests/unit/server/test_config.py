"""mongod's flags and YAML config; invalid input is one line on stderr and exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from server.config import DEFAULT_DBPATH, ConfigError, parse_args


def test_defaults() -> None:
    cfg = parse_args([])
    assert (cfg.port, cfg.bind_ip, cfg.dbpath) == (27017, ["127.0.0.1"], DEFAULT_DBPATH)


def test_flags() -> None:
    cfg = parse_args(["--port", "1234", "--bind_ip", "127.0.0.1,::1", "--dbpath", "/x",
                      "--logpath", "/tmp/l.log", "--quiet", "--maxConns", "7",
                      "--setParameter", "timeseriesBucketMaxCount=10",
                      "--setParameter", "ttlMonitorSleepSecs=3"])
    assert cfg.port == 1234 and cfg.bind_ip == ["127.0.0.1", "::1"]
    assert cfg.dbpath == "/x" and cfg.logpath == "/tmp/l.log" and cfg.quiet
    assert cfg.max_conns == 7
    assert cfg.set_parameters == {"timeseriesBucketMaxCount": "10", "ttlMonitorSleepSecs": "3"}
    assert cfg.parsed()["net"] == {"bindIp": "127.0.0.1,::1", "port": 1234,
                                   "maxIncomingConnections": 7}
    assert parse_args(["--bind_ip_all"]).bind_ip == ["0.0.0.0", "::"]


def test_config_file_and_precedence(tmp_path) -> None:
    f = tmp_path / "mongod.conf"
    f.write_text("net:\n  port: 4000\n  bindIp: 0.0.0.0\nstorage:\n  dbPath: /data\n"
                 "systemLog:\n  path: /var/log/b.log\nsetParameter:\n  cursorTimeoutMillis: 5\n")
    cfg = parse_args(["--config", str(f)])
    assert (cfg.port, cfg.bind_ip, cfg.dbpath, cfg.logpath) == (4000, ["0.0.0.0"], "/data",
                                                                "/var/log/b.log")
    assert cfg.set_parameters == {"cursorTimeoutMillis": "5"}
    assert parse_args(["--config", str(f), "--port", "5000"]).port == 5000
    assert cfg.parsed()["config"] == str(f)


@pytest.mark.parametrize("argv,fragment", [
    (["--nope"], "unrecognized arguments"),
    (["--port", "x"], "invalid int value"),
    (["--setParameter", "novalue"], "name=value"),
    (["--maxConns", "0"], "maxConns"),
])
def test_invalid_flags(argv: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_args(argv)


@pytest.mark.parametrize("content,fragment", [
    ("net: [1, 2\n", "not valid YAML"),
    ("net:\n  port: 70000\n", "net.port"),
    ("bogus:\n  a: 1\n", "^Unrecognized option: bogus$"),
    ("net:\n  nope: 1\n", "^Unrecognized option: net.nope$"),
    ("systemLog:\n  logAppend: 3\n", "systemLog.logAppend must be true or false"),
    ("- 1\n", "mapping"),
])
def test_invalid_config_files(tmp_path, content: str, fragment: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        parse_args(["--config", str(f)])


def test_cli_exit_code_2_with_one_line(tmp_path) -> None:
    for argv in (["--bogus"], ["--config", str(tmp_path / "missing.yaml")],
                 ["--setParameter", "noSuchParam=1", "--port", "0", "--dbpath", str(tmp_path)]):
        res = subprocess.run([sys.executable, "-m", "server", *argv], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 2, (argv, res.stderr, res.stdout)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("bucketd: error:"), res.stderr


def test_storage_engine_flags_and_yaml(tmp_path) -> None:
    assert parse_args([]).storage_engine == "sqlite"
    uri = "postgresql://u:secret@db.example:5432/bucketd"
    cfg = parse_args(["--storageEngine", "postgresql", "--postgresUri", uri])
    assert (cfg.storage_engine, cfg.postgres_uri) == ("postgresql", uri)
    shown = cfg.parsed()["storage"]
    assert shown["engine"] == "postgresql"
    assert shown["postgresql"] == {"uri": "postgresql://u:<password>@db.example:5432/bucketd"}
    assert "secret" not in " ".join(cfg.argv)
    f = tmp_path / "mongod.conf"
    f.write_text(f"storage:\n  engine: postgresql\n  postgresql:\n    uri: {uri}\n")
    cfg = parse_args(["--config", str(f)])
    assert (cfg.storage_engine, cfg.postgres_uri) == ("postgresql", uri)
    assert parse_args(["--config", str(f), "--storageEngine", "sqlite"]).storage_engine == "sqlite"
    # an unknown name is refused at start-up by storage, as mongod does (18656)
    assert parse_args(["--storageEngine", "rocks"]).storage_engine == "rocks"


@pytest.mark.parametrize("argv,content,fragment", [
    (["--storageEngine", "postgresql"], None, "needs --postgresUri"),
    (["--postgresUri", "mysql://x"], None, "postgresql:// URI"),
    ([], "storage:\n  postgresql:\n    host: x\n", "storage.postgresql.host"),
    ([], "storage:\n  postgresql: 1\n", "must be a mapping"),
    ([], "storage:\n  engine: 5\n", "storage.engine"),
])
def test_invalid_storage_engine_options(tmp_path, argv, content, fragment) -> None:
    if content is not None:
        f = tmp_path / "c.yaml"
        f.write_text(content)
        argv = [*argv, "--config", str(f)]
    with pytest.raises(ConfigError, match=fragment):
        parse_args(argv)
