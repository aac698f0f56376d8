"""SASL conversations (saslStart, saslContinue, hello's speculativeAuthenticate) as mongod
runs them, for SCRAM-SHA-1 and SCRAM-SHA-256.

A conversation lives on its connection (`ConnectionState.sasl`); a new saslStart
replaces it. Whatever goes wrong inside a step is logged with the real reason and
answered with AuthenticationFailed (18) "Authentication failed." only, after
`authFailedDelayMs` (an asyncio sleep: the loop keeps serving others). The classic
exchange takes three steps (the last an empty one); with `options: {skipEmptyExchange:
true}` it is done after the second. Payloads are never logged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from dataclasses import dataclass, field
from typing import Any, Final

from bson import Binary

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode, code_name

from ..context import ConnectionState, ServerState
from ..log import LOG
from .principals import UserName
from .scram import MECHANISMS, ScramError, ScramMechanism, ScramServer, parse_client_first
from .session import add_authenticated_user
from .users import UserStore, user_not_found

__all__ = ["SaslSession", "sasl_start", "sasl_continue", "authentication_failed",
           "log_success", "log_failure", "enabled_mechanisms", "EXTERNAL_DB"]

EXTERNAL_DB: Final = "$external"
_CONVERSATION_ID: Final = 1


def authentication_failed() -> MongoError:
    """All a client learns about a failed authentication."""
    return MongoError(ErrorCode.AuthenticationFailed, "Authentication failed.")


def enabled_mechanisms(server: ServerState) -> list[str]:
    """The `authenticationMechanisms` server parameter, as a list."""
    value = server.params.get("authenticationMechanisms")
    return [m.strip() for m in str(value).split(",") if m.strip()]


@dataclass(slots=True)
class SaslSession:
    """One connection's authentication conversation in progress."""

    mechanism: str
    db: str
    speculative: bool
    skip_empty_exchange: bool = False
    user: str = ""  # once the client-first message named one
    step: int = 0
    scram: ScramServer | None = None
    base64_payload: bool = False  # the client sends (and gets) payloads as base64 strings
    started: float = field(default_factory=time.perf_counter)


def _payload(body: dict[str, Any], command: str, session: SaslSession | None) -> bytes:
    raw = body.get("payload")
    if raw is None:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.payload' is missing but a required field")
    if isinstance(raw, bytes):  # Binary is a bytes subclass
        return bytes(raw)
    if type(raw) is str:
        if session is not None:
            session.base64_payload = True
        try:
            return base64.b64decode(raw.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise MongoError(ErrorCode.BadValue, "Invalid base64 in SASL payload") from None
    raise MongoError(ErrorCode.TypeMismatch,
                     f"BSON field '{command}.payload' is the wrong type, expected types "
                     "'[string, binData]'")


def _reply(session: SaslSession, done: bool, payload: bytes) -> dict[str, Any]:
    out: Any = base64.b64encode(payload).decode() if session.base64_payload else Binary(payload)
    return {"conversationId": _CONVERSATION_ID, "done": done, "payload": out}


def _mechanism(server: ServerState, name: str, db: str) -> ScramMechanism:
    mech = MECHANISMS.get(name)
    if mech is None or name not in enabled_mechanisms(server):
        raise MongoError(ErrorCode.MechanismUnavailable,
                         f"Received authentication for mechanism {name} which is not enabled")
    if db == EXTERNAL_DB:
        raise MongoError(ErrorCode.MechanismUnavailable,
                         f"Unsupported mechanism '{name}' on authentication database '{db}'")
    return mech


async def sasl_start(server: ServerState, conn: ConnectionState, db: str,
                     body: dict[str, Any], *, speculative: bool = False) -> dict[str, Any]:
    """saslStart (or hello's speculative one): begin a conversation, answer step one."""
    conn.sasl = None
    name = body.get("mechanism")
    if name is None:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'saslStart.mechanism' is missing but a required field")
    if type(name) is not str:  # exactly: JavaScript code is a str subclass
        raise MongoError(ErrorCode.TypeMismatch,
                         "BSON field 'saslStart.mechanism' is the wrong type, expected type "
                         "'string'")
    mech = _mechanism(server, name, db)
    server.auth_counters.started(name, speculative)
    session = SaslSession(name, db, speculative)
    options = body.get("options")
    if options is not None:
        if not isinstance(options, dict):
            raise MongoError(ErrorCode.TypeMismatch,
                             "BSON field 'saslStart.options' is the wrong type, expected type "
                             "'object'")
        see = options.get("skipEmptyExchange")
        if see is not None:
            if not isinstance(see, bool):
                raise MongoError(ErrorCode.BadValue, "skipEmptyExchange must be boolean")
            session.skip_empty_exchange = see
    payload = _payload(body, "saslStart", session)
    conn.sasl = session
    return await _step(server, conn, session, mech, payload)


async def sasl_continue(server: ServerState, conn: ConnectionState, db: str,
                        body: dict[str, Any]) -> dict[str, Any]:
    session = conn.sasl
    if session is None:
        raise MongoError(ErrorCode.ProtocolError, "No SASL session state found")
    cid = body.get("conversationId")
    if isinstance(cid, bool) or not isinstance(cid, int | float):
        conn.sasl = None
        raise MongoError(ErrorCode.TypeMismatch,
                         "BSON field 'saslContinue.conversationId' is the wrong type, expected "
                         "type 'int'")
    if cid != _CONVERSATION_ID:
        conn.sasl = None
        raise MongoError(ErrorCode.ProtocolError, "sasl: Mismatched conversation id")
    if db != session.db:
        conn.sasl = None
        raise MongoError(ErrorCode.ProtocolError,
                         "Attempt to switch database target during SASL authentication.")
    payload = _payload(body, "saslContinue", session)
    return await _step(server, conn, session, MECHANISMS[session.mechanism], payload)


async def _step(server: ServerState, conn: ConnectionState, session: SaslSession,
                mech: ScramMechanism, payload: bytes) -> dict[str, Any]:
    session.step += 1
    try:
        if session.step == 1:
            out = await _first_step(server, session, mech, payload)
            return _reply(session, False, out)
        if session.step == 2:
            assert session.scram is not None
            out = _text(session.scram.client_final(_decode(payload)))
            if not session.skip_empty_exchange:
                return _reply(session, False, out)
        elif session.step > 3:
            raise ScramError(ErrorCode.AuthenticationFailed,
                             f"Invalid SCRAM authentication step: {session.step}")
        else:
            out = b""
    except (ScramError, MongoError) as exc:
        conn.sasl = None
        code = exc.code
        message = exc.message if isinstance(exc, ScramError) else exc.errmsg
        log_failure(conn, session.mechanism, UserName(session.user, session.db),
                    session.speculative, code, message, session.started)
        delay = server.params.get("authFailedDelayMs")
        if delay:
            await asyncio.sleep(delay / 1000.0)
        raise authentication_failed() from None
    conn.sasl = None
    name = UserName(session.user, session.db)
    record = await UserStore.for_server(server).load(name)
    if record is None:  # dropped mid-conversation
        log_failure(conn, session.mechanism, name, session.speculative,
                    ErrorCode.UserNotFound, user_not_found(name).errmsg, session.started)
        raise authentication_failed()
    try:
        add_authenticated_user(conn, record.authenticated())
    except MongoError as exc:
        log_failure(conn, session.mechanism, name, session.speculative, exc.code, exc.errmsg,
                    session.started)
        raise
    log_success(server, conn, session.mechanism, name, session.speculative, session.started)
    return _reply(session, True, out)


async def _first_step(server: ServerState, session: SaslSession, mech: ScramMechanism,
                      payload: bytes) -> bytes:
    first = parse_client_first(_decode(payload))
    session.user = first.user
    name = UserName(first.user, session.db)
    record = await UserStore.for_server(server).require(name)
    creds = record.credentials.get(mech.name)
    if creds is None:
        raise MongoError(ErrorCode.MechanismUnavailable,
                         f"Unable to use {mech.name} based authentication for user without any "
                         f"{mech.name} credentials registered")
    session.scram = ScramServer(mech, first, creds)
    return _text(session.scram.server_first())


def _decode(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(ErrorCode.BadValue, "SCRAM message is not valid UTF-8") from None


def _text(message: str) -> bytes:
    return message.encode("utf-8")


def _metrics(started: float) -> dict[str, Any]:
    return {"conversation_duration": {
        "micros": int((time.perf_counter() - started) * 1_000_000)}}


def log_success(server: ServerState, conn: ConnectionState, mechanism: str, name: UserName,
                speculative: bool, started: float) -> None:
    """mongod's two lines for a successful authentication (20250 unless quiet, 5286306),
    and the success counted."""
    server.auth_counters.succeeded(mechanism, speculative)
    ctx = f"conn{conn.id}"
    if not server.params.get("quiet") and not server.config.quiet:
        LOG.info("ACCESS", 20250, ctx, "Authentication succeeded", mechanism=mechanism,
                 speculative=speculative, principalName=name.user,
                 authenticationDatabase=name.db, remote=conn.remote, extraInfo={})
    LOG.info("ACCESS", 5286306, ctx, "Successfully authenticated", client=conn.remote,
             isSpeculative=speculative, isClusterMember=False, mechanism=mechanism,
             user=name.user, db=name.db, result=0, metrics=_metrics(started), extraInfo={})


def log_failure(conn: ConnectionState, mechanism: str, name: UserName, speculative: bool,
                code: int, message: str, started: float) -> None:
    """mongod's two lines for a failed authentication (20249, 5286307), with the real
    reason the client is not told."""
    ctx = f"conn{conn.id}"
    error = f"{code_name(code)}: {message}"
    LOG.info("ACCESS", 20249, ctx, "Authentication failed", mechanism=mechanism,
             speculative=speculative, principalName=name.user, authenticationDatabase=name.db,
             remote=conn.remote, extraInfo={}, error=error)
    LOG.info("ACCESS", 5286307, ctx, "Failed to authenticate", client=conn.remote,
             isSpeculative=speculative, isClusterMember=False, mechanism=mechanism,
             user=name.user, db=name.db, error=error, result=code, metrics=_metrics(started),
             extraInfo={})
