"""Aggregation stages, one module per stage or small family, registered in `STAGES`.

`register_stage(name, compiler)` lets other packages add stages (the time-series layer's
`$_internalUnpackBucket`). Importing this package registers the built-in stages.
"""

from __future__ import annotations

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


def _register_builtin_stages() -> None:
    import query.window  # noqa: F401  ($setWindowFields lives in its own package)

    from . import (  # noqa: F401  (registration side effects)  # noqa: F401
        basic,
        bucket,
        densify,
        facet,
        fill,
        group,
        lookup,
        out,
        sort,
        unsupported,
        unwind,
    )


_register_builtin_stages()
