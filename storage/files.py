"""The modes of the files and directories the server creates: owner-only, as mongod's.

mongod clears the group and other bits of its umask at start-up (unless told to honour
the system's), so everything it creates is 0600 and every directory 0700. bucketd does
the same (`restrict_umask`, for the files SQLite and the temporary-file module create)
and, for the files and directories it creates itself, sets those modes explicitly, so
they hold whatever umask the process was started with.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["FILE_MODE", "DIR_MODE", "restrict_umask", "make_dirs", "create_private_file"]

FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700


def restrict_umask() -> None:
    """Keep the owner's bits of the process umask and clear group's and other's."""
    os.umask(os.umask(0o077) | 0o077)


def make_dirs(path: str) -> None:
    """Create `path` and any missing parent, each new one with mode 0700 (an existing
    directory keeps its mode)."""
    missing: list[str] = []
    cur = os.path.abspath(path)
    while not os.path.isdir(cur):
        missing.append(cur)
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue
        os.chmod(d, DIR_MODE)


def create_private_file(path: str) -> bool:
    """Create `path` empty with mode 0600 unless it exists; True when it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True
