"""Run Node.js driver scripts against the test server."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import ROOT


def node_modules() -> Path | None:
    """The node_modules holding the `mongodb` driver (this checkout's, else main's)."""
    for base in (ROOT / ".ci" / "node" / "node_modules", Path("/work/main/.ci/node/node_modules")):
        if (base / "mongodb").is_dir():
            return base
    return None


def run_node(script: str, timeout: float = 60.0) -> str:
    """Run `script` with `node -e` and the driver on its path; its stdout (skips the test
    when Node or the driver is not installed; fails it when the script fails)."""
    modules = node_modules()
    node = shutil.which("node")
    if modules is None or node is None:
        pytest.skip("the Node.js driver is not installed")
    res = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "NODE_PATH": str(modules)})
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout
