"""Execution modes: strict (default), debug and fused eager (DeferAndFuse)."""

from __future__ import annotations

import enum

from torch_tpu import _C


class ExecutionMode(enum.Enum):
    STRICT = 0
    DEBUG = 1
    DEFER_AND_FUSE = 2


def _coerce(mode) -> ExecutionMode:
    if isinstance(mode, ExecutionMode):
        return mode
    if isinstance(mode, str):
        key = mode.strip().upper().replace("-", "_").replace(" ", "_")
        aliases = {"FUSED": "DEFER_AND_FUSE", "DEFERANDFUSE": "DEFER_AND_FUSE", "EAGER": "STRICT"}
        key = aliases.get(key, key)
        if key in ExecutionMode.__members__:
            return ExecutionMode[key]
    raise ValueError(f"unknown execution mode {mode!r}; expected one of {[m.name.lower() for m in ExecutionMode]}")


class execution_mode:  # noqa: N801 - used both as a function and a context manager
    """Sets the mode now; used with ``with``, restores the previous mode on exit.

    ``torch_tpu.execution_mode("debug")`` or ``with torch_tpu.execution_mode("defer_and_fuse"): ...``
    Called with no argument, returns the current mode.
    """

    def __new__(cls, mode=None):
        if mode is None:
            return ExecutionMode(_C._get_mode())
        return super().__new__(cls)

    def __init__(self, mode=None):
        self._previous = ExecutionMode(_C._get_mode())
        self.mode = _coerce(mode)
        _C._set_mode(self.mode.value)

    def __enter__(self):
        return self.mode

    def __exit__(self, *exc):
        _C._set_mode(self._previous.value)
        return False
