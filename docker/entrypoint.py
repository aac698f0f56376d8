"""The Docker image's entry point: the official mongo image's root-user variables, then bucketd.

With MONGO_INITDB_ROOT_USERNAME and MONGO_INITDB_ROOT_PASSWORD set (or their _FILE
variants, which name a file holding the value, as Docker secrets do), the server runs
with --auth, and on a data directory without users it first creates that user on
`admin` with the `root` role: a bucketd started on 127.0.0.1 only, on a free port, with
--auth and the command's storage options (--storageEngine, --postgresUri: on PostgreSQL
the user goes to the database, and of several servers starting on one database the first
creates it), takes the user through the localhost exception and is stopped cleanly. Without
the variables the command runs unchanged. MONGO_INITDB_DATABASE and
/docker-entrypoint-initdb.d scripts of the official image are not supported.

Usage (as the image's ENTRYPOINT): bucketd-entrypoint [bucketd] [options...]
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

import pymongo
from pymongo.errors import OperationFailure, PyMongoError

USER_VAR = "MONGO_INITDB_ROOT_USERNAME"
PASSWORD_VAR = "MONGO_INITDB_ROOT_PASSWORD"
DEFAULT_DBPATH = "/data/db"
START_TIMEOUT = 60.0
STORAGE_OPTIONS = ("--storageEngine", "--postgresUri")


class EntrypointError(Exception):
    """A misconfiguration: reported in one line, exit status 1."""


def setting(env: Mapping[str, str], name: str) -> str | None:
    """`name` from the environment or from the file `name`_FILE names, not both."""
    value, path = env.get(name), env.get(f"{name}_FILE")
    if value and path:
        raise EntrypointError(f"both {name} and {name}_FILE are set (but are exclusive)")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().rstrip("\n")
        except OSError as exc:
            raise EntrypointError(f"cannot read {name}_FILE {path}: {exc.strerror}") from None
    return value or None


def root_credentials(env: Mapping[str, str]) -> tuple[str, str] | None:
    user, password = setting(env, USER_VAR), setting(env, PASSWORD_VAR)
    if bool(user) != bool(password):
        raise EntrypointError(f"{USER_VAR} and {PASSWORD_VAR} must be set together")
    return (user, password) if user and password else None


def server_command(args: list[str]) -> list[str]:
    """The command to run: options alone are bucketd's."""
    if not args:
        return ["bucketd", "--bind_ip_all", "--dbpath", DEFAULT_DBPATH]
    return ["bucketd", *args] if args[0].startswith("-") else list(args)


def option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def storage_options(args: list[str]) -> list[str]:
    """The options of `args` that say where the data lives besides --dbpath (the storage
    engine and its database), for the server that creates the root user."""
    out: list[str] = []
    for name in STORAGE_OPTIONS:
        value = option(args, name)
        if value is not None:
            out += [name, value]
    return out


def ensure_root_user(server: list[str], dbpath: str, user: str, password: str,
                     storage: list[str] | None = None) -> bool:
    """Create the root user unless the data has users already; True when it was created.
    `server` is the bucketd command without options, `storage` the storage options
    (`storage_options`) of the server to come, so the user lands where its data does."""
    port = _free_port()
    proc = subprocess.Popen([*server, "--dbpath", dbpath, *(storage or []),
                             "--bind_ip", "127.0.0.1",
                             "--port", str(port), "--auth", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
            "127.0.0.1", port, directConnection=True, serverSelectionTimeoutMS=1000)
        with client:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                try:
                    client.admin.command("ping")
                    break
                except PyMongoError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                        raise EntrypointError(f"bucketd did not start for the root user: "
                                              f"{err.strip()[-500:]}") from None
                    time.sleep(0.2)
            try:
                client.admin.command("createUser", user, pwd=password, roles=["root"])
            except OperationFailure as exc:
                # 13: the localhost exception is closed, users exist; 51003: another
                # server on the same PostgreSQL database created it a moment ago
                if exc.code in (13, 51003):
                    return False
                raise EntrypointError(f"cannot create the root user: {exc}") from None
            return True
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = server_command(list(sys.argv[1:] if argv is None else argv))
    env = os.environ if env is None else env
    try:
        credentials = root_credentials(env)
        if credentials is not None and os.path.basename(args[0]) == "bucketd":
            if "--auth" not in args:
                args.append("--auth")
            dbpath = option(args, "--dbpath") or DEFAULT_DBPATH
            os.makedirs(dbpath, exist_ok=True)
            if ensure_root_user(args[:1], dbpath, *credentials, storage_options(args)):
                print(f"bucketd-entrypoint: created the root user {credentials[0]!r} on admin",
                      file=sys.stderr, flush=True)
    except EntrypointError as exc:
        print(f"bucketd-entrypoint: error: {exc}", file=sys.stderr)
        return 1
    os.execvp(args[0], args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
