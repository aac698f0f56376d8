"""The native core's boundary: which path is in use, and a panic becomes an error."""

from __future__ import annotations

import pytest

from storage import native
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

needs_native = pytest.mark.skipif(not native.AVAILABLE, reason="native core not built")


def test_describe_names_the_path_in_use() -> None:
    got = native.describe()
    assert got["path"] == ("native" if native.AVAILABLE else "python")


@needs_native
def test_describe_gives_the_crate_version() -> None:
    assert native.core is not None
    assert native.describe()["version"] == native.core.version()


@needs_native
def test_a_panic_becomes_an_internal_error_for_that_call_only() -> None:
    assert native.core is not None
    with pytest.raises(MongoError) as caught:
        native.check(native.core.panic_for_test)
    assert caught.value.code == ErrorCode.InternalError
    assert "deliberate panic" in str(caught.value)
    # the module still works afterwards
    assert native.core.version()
