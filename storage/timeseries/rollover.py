"""Why and how an open bucket stops taking measurements (MongoDB's rollover.h).

`RolloverReason` says why a measurement cannot go into the open bucket of its series;
`rollover_action` maps it to what happens to that bucket:

| reason          | action     | the old bucket afterwards                               |
|-----------------|------------|---------------------------------------------------------|
| kNone           | kNone      | stays open                                              |
| kTimeForward    | kSoftClose | closed in memory, may be reopened by a later query      |
| kTimeBackward   | kArchive   | kept as an archived entry (id + min time) for reopening |
| kCount          | kHardClose | closed                                                  |
| kSchemaChange   | kHardClose | closed                                                  |
| kCachePressure  | kHardClose | closed                                                  |
| kSize           | kHardClose | closed                                                  |

A bucket that still has uncommitted measurements keeps its action pending until the
batch that wrote them is committed (`BucketCatalog.commit`).
"""

from __future__ import annotations

import enum

__all__ = ["RolloverAction", "RolloverReason", "rollover_action"]


class RolloverAction(enum.IntEnum):
    kNone = 0
    kArchive = 1
    kSoftClose = 2
    kHardClose = 3


class RolloverReason(enum.IntEnum):
    kNone = 0
    kTimeForward = 1
    kTimeBackward = 2
    kCount = 3
    kSchemaChange = 4
    kCachePressure = 5
    kSize = 6


_ACTIONS = {
    RolloverReason.kNone: RolloverAction.kNone,
    RolloverReason.kTimeForward: RolloverAction.kSoftClose,
    RolloverReason.kTimeBackward: RolloverAction.kArchive,
    RolloverReason.kCount: RolloverAction.kHardClose,
    RolloverReason.kSchemaChange: RolloverAction.kHardClose,
    RolloverReason.kCachePressure: RolloverAction.kHardClose,
    RolloverReason.kSize: RolloverAction.kHardClose,
}


def rollover_action(reason: RolloverReason) -> RolloverAction:
    """getRolloverAction."""
    return _ACTIONS[reason]
