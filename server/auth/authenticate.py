"""The `authenticate` command's mechanisms (MONGODB-X509, as in mongod), by name.

An unknown mechanism fails as mongod's does; a handler's failure is logged with its
reason and answered AuthenticationFailed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import ConnectionState, ServerState
from .principals import UserName
from .sasl import authentication_failed, log_failure, log_success
from .session import add_authenticated_user
from .users import UserRecord
from .x509 import MONGODB_X509, authenticate_x509

__all__ = ["MECHANISMS", "AuthenticateHandler", "authenticate"]

# (server, conn, db, command body) -> the user it proves to be, or MongoError.
AuthenticateHandler = Callable[[ServerState, ConnectionState, str, dict[str, Any]],
                               Awaitable[UserRecord]]

MECHANISMS: Final[dict[str, AuthenticateHandler]] = {MONGODB_X509: authenticate_x509}


async def authenticate(server: ServerState, conn: ConnectionState, db: str,
                       body: dict[str, Any], *, speculative: bool = False
                       ) -> dict[str, Any]:
    mechanism = body.get("mechanism")
    if type(mechanism) is not str or not mechanism:
        raise MongoError(ErrorCode.BadValue, "Auth mechanism not specified")
    handler = MECHANISMS.get(mechanism)
    if handler is None:
        raise MongoError(ErrorCode.MechanismUnavailable,
                         f"Unsupported mechanism '{mechanism}' on authentication database "
                         f"'{db}'")
    started = time.perf_counter()
    server.auth_counters.started(mechanism, speculative)
    user = body.get("user")
    claimed = UserName(user if isinstance(user, str) else "", db)
    try:
        record = await handler(server, conn, db, body)
    except MongoError as exc:
        log_failure(conn, mechanism, claimed, speculative, exc.code, exc.errmsg, started)
        raise authentication_failed() from None
    try:
        add_authenticated_user(conn, record.authenticated())
    except MongoError as exc:  # already someone else: mongod's own error, not code 18
        log_failure(conn, mechanism, record.name, speculative, exc.code, exc.errmsg, started)
        raise
    log_success(server, conn, mechanism, record.name, speculative, started)
    return {"dbname": record.name.db, "user": record.name.user}
