"""currentOp: the operations in progress, as `$currentOp` with a filter, in one reply.

As mongod runs it: `{$currentOp: {idleConnections: $all, allUsers: !$ownOps,
truncateOps: true}}`, then a `$match` of the command's other fields, gathered into
`inprog`.
"""

from __future__ import annotations

from typing import Any, Final

from query.match import compile_filter

from ..context import CommandRequest
from ..current_op import CurrentOpOptions, report
from ..generic_args import GENERIC_ARGUMENTS

_OWN: Final = frozenset({"$all", "$ownOps", "$truncateOps"})


def _truthy(value: Any) -> bool:
    return value is not None and value is not False and value != 0


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    flt = {k: v for i, (k, v) in enumerate(body.items())
           if i and k not in _OWN and k not in GENERIC_ARGUMENTS}
    matcher = compile_filter(flt) if flt else None
    options = CurrentOpOptions(all_users=not _truthy(body.get("$ownOps")),
                               idle_connections=_truthy(body.get("$all")),
                               truncate_ops=True)
    docs = report(req.server, req.conn, options)
    return {"inprog": [d for d in docs if matcher is None or matcher.matches(d)]}
