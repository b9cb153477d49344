"""Execution modes: fused eager (DeferAndFuse, the default), strict and debug."""

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


# ---- TorchTPU 0.2.0's names for the same modes ----


class EagerMode(enum.Enum):
    """TorchTPU's execution-mode names; each is one of torch_tpu's ExecutionMode values."""

    DEFER_NEVER = ExecutionMode.STRICT
    DEFER_AND_FUSE = ExecutionMode.DEFER_AND_FUSE
    DEFER_NEVER_AND_LAUNCH_BLOCKING = ExecutionMode.DEBUG

    @property
    def execution_mode(self) -> ExecutionMode:
        return self.value


def _to_execution_mode(mode) -> ExecutionMode:
    if isinstance(mode, EagerMode):
        return mode.value
    if isinstance(mode, str) and mode.strip().upper() in EagerMode.__members__:
        return EagerMode[mode.strip().upper()].value
    return _coerce(mode)


class set_eager_mode(execution_mode):  # noqa: N801 - a setter that is also a context manager
    """``torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)`` sets the mode now; used
    with ``with``, restores the previous one on exit. The same switch as ``execution_mode``."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        super().__init__(_to_execution_mode(mode))

    def __enter__(self):
        return EagerMode(self.mode)


def eager_mode() -> EagerMode:
    """The current mode, as a ``torch.tpu.EagerMode``."""
    return EagerMode(ExecutionMode(_C._get_mode()))
