"""The Docker image's entry point (docker/entrypoint.py), without containers: the official
mongo image's MONGO_INITDB_ROOT_* variables create a root user once and turn on --auth."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pymongo
import pytest
from pymongo.errors import OperationFailure

from ..conftest import ROOT, SERVER_CMD, engine_args, start_server

_spec = importlib.util.spec_from_file_location("docker_entrypoint",
                                               ROOT / "docker" / "entrypoint.py")
assert _spec is not None and _spec.loader is not None
entrypoint = importlib.util.module_from_spec(_spec)
sys.modules["docker_entrypoint"] = entrypoint
_spec.loader.exec_module(entrypoint)


def test_the_root_user_is_created_once_and_auth_is_on(tmp_path: Path) -> None:
    # on the engine the tests run on: on PostgreSQL the user must land in the database
    storage = entrypoint.storage_options([*engine_args(str(tmp_path)), "--quiet"])
    assert entrypoint.ensure_root_user(SERVER_CMD, str(tmp_path), "admin", "s3cret",
                                       storage) is True
    # a second start finds users: nothing created, the password not reset
    assert entrypoint.ensure_root_user(SERVER_CMD, str(tmp_path), "admin", "other",
                                       storage) is False
    proc = start_server(tmp_path, "--auth")
    try:
        with pymongo.MongoClient(proc.uri, username="admin", password="s3cret") as root:
            info = root.admin.command("connectionStatus")["authInfo"]
            assert info["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}]
            root.app.things.insert_one({"x": 1})
        with pymongo.MongoClient(proc.uri) as anonymous, \
                pytest.raises(OperationFailure) as exc:
            anonymous.app.things.find_one()
        assert exc.value.code == 13
        with pymongo.MongoClient(proc.uri, username="admin", password="other") as wrong, \
                pytest.raises(OperationFailure) as bad:
            wrong.admin.command("ping")
        assert bad.value.code == 18
    finally:
        proc.stop()


def test_storage_options_go_to_the_server_that_creates_the_user() -> None:
    args = ["bucketd", "--bind_ip_all", "--storageEngine", "postgresql",
            "--postgresUri=postgresql://u:p@db/x", "--dbpath", "/data/db"]
    assert entrypoint.storage_options(args) == [
        "--storageEngine", "postgresql", "--postgresUri", "postgresql://u:p@db/x"]
    assert entrypoint.storage_options(["bucketd", "--dbpath", "/data/db"]) == []


def test_settings_and_files(tmp_path: Path) -> None:
    secret = tmp_path / "pwd"
    secret.write_text("from-a-file\n")
    assert entrypoint.root_credentials({"MONGO_INITDB_ROOT_USERNAME": "root",
                                        "MONGO_INITDB_ROOT_PASSWORD_FILE": str(secret)}) == (
        "root", "from-a-file")
    assert entrypoint.root_credentials({}) is None
    for bad in ({"MONGO_INITDB_ROOT_USERNAME": "root"},
                {"MONGO_INITDB_ROOT_USERNAME": "root", "MONGO_INITDB_ROOT_PASSWORD": "p",
                 "MONGO_INITDB_ROOT_PASSWORD_FILE": str(secret)},
                {"MONGO_INITDB_ROOT_USERNAME": "root",
                 "MONGO_INITDB_ROOT_PASSWORD_FILE": str(tmp_path / "missing")}):
        with pytest.raises(entrypoint.EntrypointError):
            entrypoint.root_credentials(bad)
    assert entrypoint.server_command([]) == ["bucketd", "--bind_ip_all", "--dbpath", "/data/db"]
    assert entrypoint.server_command(["--port", "1"]) == ["bucketd", "--port", "1"]
    assert entrypoint.server_command(["bucketd-run-tests"]) == ["bucketd-run-tests"]
    assert entrypoint.option(["bucketd", "--dbpath", "/x"], "--dbpath") == "/x"


def test_a_misconfiguration_exits_1_before_starting_anything(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "docker" / "entrypoint.py"),
                          "--dbpath", str(tmp_path / "db")],
                         env={"MONGO_INITDB_ROOT_USERNAME": "root", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "must be set together" in res.stderr
    assert not (tmp_path / "db").exists()
