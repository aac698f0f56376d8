"""Aggregation stages, one module per stage or small family, registered in `STAGES`.

`register_stage(name, compiler)` lets other packages add stages (the time-series layer's
`$_internalUnpackBucket`). This file is the index of the built-in stages: Python runs it
before any module of the package, so `STAGES` holds them all before a pipeline compiles.
"""

from __future__ import annotations

from . import (  # noqa: F401  (each registers its stages)
    basic,
    bucket,
    densify,
    facet,
    fill,
    group,
    lookup,
    out,
    project,
    set_window_fields,
    sort,
    unpack_bucket,
    unsupported,
    unwind,
)
from .base import (
    FIRST_STAGE_ONLY,
    LAST_STAGE_ONLY,
    STAGES,
    Env,
    Stage,
    compile_stage,
    register_stage,
)

__all__ = ["STAGES", "Stage", "Env", "register_stage", "compile_stage", "FIRST_STAGE_ONLY",
           "LAST_STAGE_ONLY"]
