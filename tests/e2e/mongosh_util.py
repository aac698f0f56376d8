"""Run mongosh scripts against the test server and read back their JSON output."""

from __future__ import annotations

import json
import subprocess

import pytest

from ..conftest import mongosh_path


def run_mongosh(uri: str, script: str, timeout: float = 60.0) -> tuple[dict, str]:
    """Run `script` with --eval; it must end by printing one JSON line (EJSON relaxed)."""
    exe = mongosh_path()
    if exe is None:
        pytest.fail("mongosh is not installed (the README test command installs it)")
    res = subprocess.run([exe, uri if uri else "--nodb", "--quiet", "--eval", script],
                         capture_output=True, text=True, timeout=timeout)
    output = res.stdout + res.stderr
    assert res.returncode == 0, output
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), output
            except json.JSONDecodeError:
                continue  # the shell's own echo of a result, not our EJSON line
    raise AssertionError(f"no JSON line in mongosh output:\n{output}")
