"""Built-in role names, loopback detection for the localhost exception, and --auth."""

from __future__ import annotations

import pytest

from server.auth.builtin_role_names import ADMIN_ONLY_ROLES, DATABASE_ROLES, is_builtin_role
from server.auth.gate import is_loopback
from server.auth.principals import RoleName
from server.config import ConfigError, parse_args


def test_builtin_roles() -> None:
    assert not DATABASE_ROLES & ADMIN_ONLY_ROLES
    assert is_builtin_role(RoleName("readWrite", "test"))
    assert is_builtin_role(RoleName("root", "admin"))
    assert not is_builtin_role(RoleName("root", "test"))
    assert not is_builtin_role(RoleName("read", "$external"))
    assert not is_builtin_role(RoleName("readwrite", "test"))  # names are case-sensitive


@pytest.mark.parametrize("remote, loopback", [
    ("127.0.0.1:5000", True), ("127.9.9.9:1", True), ("[::1]:5000", True),
    ("10.0.0.1:5000", False), ("[fe80::1]:1", False), ("garbage", False),
])
def test_is_loopback(remote: str, loopback: bool) -> None:
    assert is_loopback(remote) is loopback


def test_auth_flags(tmp_path) -> None:
    assert parse_args([]).auth is False
    cfg = parse_args(["--auth"])
    assert cfg.auth is True and cfg.parsed()["security"] == {"authorization": "enabled"}
    assert "security" not in parse_args([]).parsed()
    f = tmp_path / "mongod.conf"
    f.write_text("security:\n  authorization: enabled\n")
    assert parse_args(["--config", str(f)]).auth is True
    assert parse_args(["--config", str(f), "--noauth"]).auth is False
    f.write_text("security:\n  authorization: disabled\n")
    assert parse_args(["--config", str(f)]).auth is False
    f.write_text("security:\n  authorization: maybe\n")
    with pytest.raises(ConfigError, match="authorization"):
        parse_args(["--config", str(f)])
    with pytest.raises(ConfigError):
        parse_args(["--auth", "--noauth"])


def test_scram_iteration_parameters_have_mongods_minimum() -> None:
    with pytest.raises(ConfigError, match="5000"):
        parse_args(["--setParameter", "scramIterationCount=4999"])
    cfg = parse_args(["--setParameter", "scramSHA256IterationCount=5000"])
    assert cfg.set_parameters["scramSHA256IterationCount"] == "5000"
