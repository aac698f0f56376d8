"""The log options as mongod has them: `--quiet` drops the connection lines (22943,
22944, 51800), `--logpath` without `--logappend` renames an existing log to `<path>.<UTC time>`
(20697) and with it appends, unknown config keys stop the start ("Unrecognized option",
exit 2), and a failed start logs the exit code it exits with."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pymongo

from ..conftest import start_server

SERVER = [sys.executable, "-m", "server"]


def _ids(text: str) -> list[int]:
    return [json.loads(line)["id"] for line in text.splitlines() if line.startswith("{")]


def _connect_once(uri: str) -> None:
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000) as c:
        c.admin.command("ping")


def test_quiet_drops_the_connection_lines(tmp_path: Path) -> None:
    for quiet in (False, True):
        proc = start_server(tmp_path / str(quiet), *(["--quiet"] if quiet else []))
        try:
            _connect_once(proc.uri)
            with pymongo.MongoClient(proc.uri) as c:
                assert c.admin.command("getParameter", 1, quiet=1)["quiet"] is quiet
        finally:
            proc.stop()
        ids = _ids(proc.log_text())
        assert (22943 in ids, 22944 in ids, 51800 in ids) == (not quiet,) * 3, ids


def _run_with_logpath(tmp_path: Path, log: Path, *extra: str) -> None:
    """Start a server logging to `log`, wait for it to listen, stop it."""
    proc = subprocess.Popen([*SERVER, "--port", "0", "--dbpath", str(tmp_path / "db"),
                             "--logpath", str(log), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if log.exists() and "Waiting for connections" in log.read_text():
                break
            time.sleep(0.1)
        else:
            raise AssertionError("no 'Waiting for connections' in " + str(log))
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.stdout is not None
    proc.stdout.close()


def test_an_old_log_is_renamed_unless_log_append(tmp_path: Path) -> None:
    log = tmp_path / "bucketd.log"
    log.write_text("old line\n")
    _run_with_logpath(tmp_path, log)
    renamed = [p for p in tmp_path.iterdir() if p.name.startswith("bucketd.log.")]
    assert len(renamed) == 1 and renamed[0].read_text() == "old line\n"
    suffix = renamed[0].name[len("bucketd.log."):]
    assert time.strptime(suffix, "%Y-%m-%dT%H-%M-%S")
    assert "old line" not in log.read_text()
    first_run = log.read_text()

    _run_with_logpath(tmp_path, log, "--logappend")
    assert log.read_text().startswith(first_run)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("bucketd.log.")]) == 1


def test_log_append_from_the_config_file(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("kept\n")
    config = tmp_path / "c.yaml"
    config.write_text(f"systemLog:\n  destination: file\n  path: {log}\n  logAppend: true\n")
    _run_with_logpath(tmp_path, log, "--config", str(config))
    assert log.read_text().startswith("kept\n")


def test_unknown_config_keys_stop_the_start(tmp_path: Path) -> None:
    for content, key in (("storage:\n  dbPath: x\n  wiredTigr: {}\n", "storage.wiredTigr"),
                         ("sytemLog:\n  quiet: true\n", "sytemLog")):
        config = tmp_path / "c.yaml"
        config.write_text(content)
        res = subprocess.run([*SERVER, "--config", str(config)], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 2
        assert res.stderr.strip() == f"bucketd: error: Unrecognized option: {key}"


def test_a_failed_start_logs_its_exit_code(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([*SERVER, "--port", str(port), "--dbpath", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 48
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    shutting_down = [ln for ln in lines if ln["id"] == 23138]
    assert [ln["attr"]["exitCode"] for ln in shutting_down] == [48]
