"""$setWindowFields: window bounds, window functions and the stage itself."""

from __future__ import annotations

from .bounds import WindowBounds, parse_window
from .functions import WINDOW_FUNCTION_NAMES, WindowFunction, parse_window_function
from .stage import SetWindowFieldsStage

__all__ = ["SetWindowFieldsStage", "WindowBounds", "WindowFunction", "parse_window",
           "parse_window_function", "WINDOW_FUNCTION_NAMES"]
