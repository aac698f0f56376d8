"""Making a user's SCRAM credentials from a password, off the event loop.

PBKDF2 at mongod's iteration counts (`scramIterationCount`, `scramSHA256IterationCount`)
takes milliseconds of CPU per mechanism, so it runs in a worker thread
(`asyncio.to_thread`): createUser and updateUser never stall the other connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ServerState
from .scram import MECHANISMS, ScramCredentials, derive_credentials, prepare_password

__all__ = ["make_credentials"]


def _derive_all(user: str, password: str, plan: list[tuple[str, int]], digested: bool
                ) -> dict[str, ScramCredentials]:
    out: dict[str, ScramCredentials] = {}
    for name, iterations in plan:
        mech = MECHANISMS[name]
        try:
            prepared = prepare_password(mech, user, password, digested=digested)
        except ValueError as exc:  # SASLprep refused it (prohibited or unassigned code points)
            raise MongoError(ErrorCode.BadValue, f"Error preparing password for "
                                                 f"{name}: {exc}") from None
        out[name] = derive_credentials(mech, prepared, iterations)
    return out


async def make_credentials(server: ServerState, user: str, password: str,
                           mechanisms: Sequence[str], *, digested: bool = False
                           ) -> dict[str, ScramCredentials]:
    """Credentials for each of `mechanisms` (SCRAM-SHA-1 first, as mongod stores them)."""
    ordered = [m for m in MECHANISMS if m in mechanisms]
    plan = [(m, int(server.params.get(MECHANISMS[m].iteration_parameter))) for m in ordered]
    return await asyncio.to_thread(_derive_all, user, password, plan, digested)
