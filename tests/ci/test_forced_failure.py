"""A test that fails on purpose, only when ``BUCKETD_CI_FORCE_FAIL=1``.

`.ci/compose.sh` runs it as the compose test-runner under that variable to show that a
failing runner fails the CI run. Everywhere else it is skipped.
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.skipif(os.environ.get("BUCKETD_CI_FORCE_FAIL") != "1",
                    reason="only fails on purpose under BUCKETD_CI_FORCE_FAIL=1")
def test_forced_failure() -> None:
    pytest.fail("BUCKETD_CI_FORCE_FAIL=1: this runner fails on purpose")
