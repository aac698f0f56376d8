"""`.ci/compose.sh` end to end: a green runner passes it, a failing runner fails it.

Each case builds the image from scratch with podman and runs the compose scenario (minutes,
root, network), so it only runs when asked: ``BUCKETD_CI_COMPOSE_TESTS=1``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "compose.sh"

pytestmark = pytest.mark.skipif(os.environ.get("BUCKETD_CI_COMPOSE_TESTS") != "1",
                                reason="runs podman for minutes; opt in with "
                                       "BUCKETD_CI_COMPOSE_TESTS=1")


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("BUCKETD_CI_FORCE_FAIL", "BUCKETD_TESTS", "BUCKETD_CI_KEEP")}
    full_env.update(env)
    return subprocess.run([str(SCRIPT)], cwd=ROOT, env=full_env, capture_output=True,
                          text=True, timeout=1800)


def test_green_runner_passes_the_script() -> None:
    run = _run()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert " passed in " in run.stdout
    assert "compose scenario passed" in run.stdout


def test_failing_runner_fails_the_script() -> None:
    run = _run(BUCKETD_CI_FORCE_FAIL="1")
    # pytest's "tests failed" code, passed through compose: not a build or setup failure.
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-4000:]
    assert "this runner fails on purpose" in run.stdout
    assert "1 failed" in run.stdout
    assert "compose scenario FAILED (exit code 1)" in run.stdout
