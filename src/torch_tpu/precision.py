"""Matmul and convolution precision modes: DEFAULT (the default), HIGH and HIGHEST.

DEFAULT rounds f32 operands to bf16 and accumulates in f32, as a TPU does natively; HIGH takes
three bf16 passes (bf16x3); HIGHEST computes in f32. The mode is torch_tpu's own: it starts at
DEFAULT whatever torch's float32 matmul precision says, because torch's default ("highest") is
a CPU/CUDA default. ``torch.set_float32_matmul_precision`` still sets it (medium -> DEFAULT,
high -> HIGH, highest -> HIGHEST), while ``torch.tpu.precision`` leaves the CPU's setting alone.
"""

from __future__ import annotations

import enum
import functools

import torch

from torch_tpu import _C


class Precision(enum.Enum):
    DEFAULT = 0  # values match ops::Precision in csrc/ops/precision.h
    HIGH = 1
    HIGHEST = 2


# torch.set_float32_matmul_precision's names.
_FROM_TORCH = {"medium": Precision.DEFAULT, "high": Precision.HIGH, "highest": Precision.HIGHEST}


def _coerce(mode) -> Precision:
    if isinstance(mode, Precision):
        return mode
    if isinstance(mode, str):
        key = mode.strip().lower()
        if key in _FROM_TORCH:
            return _FROM_TORCH[key]
        if key.upper() in Precision.__members__:
            return Precision[key.upper()]
    names = [m.name for m in Precision] + list(_FROM_TORCH)
    raise ValueError(f"unknown precision {mode!r}; expected a torch.tpu.Precision or one of {names}")


class precision:  # noqa: N801 - used both as a function and a context manager
    """Sets the precision mode now; used with ``with``, restores the previous mode on exit.

    ``torch.tpu.precision(torch.tpu.Precision.HIGHEST)`` or ``with torch.tpu.precision("high"): ...``
    Called with no argument, returns the current mode.
    """

    def __new__(cls, mode=None):
        if mode is None:
            return Precision(_C._get_precision())
        return super().__new__(cls)

    def __init__(self, mode=None):
        self._previous = Precision(_C._get_precision())
        self.mode = _coerce(mode)
        _C._set_precision(self.mode.value)

    def __enter__(self):
        return self.mode

    def __exit__(self, *exc):
        _C._set_precision(self._previous.value)
        return False


def _forward_torch_setting() -> None:
    """Makes torch.set_float32_matmul_precision set the tpu mode too, even to its current value."""
    original = torch.set_float32_matmul_precision
    if getattr(original, "_torch_tpu_forwards", False):
        return

    @functools.wraps(original)
    def set_float32_matmul_precision(precision: str) -> None:
        original(precision)  # torch warns about, and ignores, a name it does not know
        mode = _FROM_TORCH.get(precision) if isinstance(precision, str) else None
        if mode is not None:
            _C._set_precision(mode.value)

    set_float32_matmul_precision._torch_tpu_forwards = True
    torch.set_float32_matmul_precision = set_float32_matmul_precision
    # A script that chose a precision before torch_tpu was imported keeps its choice.
    try:
        chosen = torch.get_float32_matmul_precision()
    except RuntimeError:  # torch refuses to answer after a mix of its legacy and new APIs
        chosen = "highest"
    if chosen != "highest":
        _C._set_precision(_FROM_TORCH[chosen].value)
