"""What $setWindowFields computes: window bounds and window functions (the stage itself is
`query.stages.set_window_fields`)."""

from __future__ import annotations

from .bounds import WindowBounds, parse_window
from .functions import WINDOW_FUNCTION_NAMES, WindowFunction, parse_window_function

__all__ = ["WindowBounds", "WindowFunction", "parse_window",
           "parse_window_function", "WINDOW_FUNCTION_NAMES"]
