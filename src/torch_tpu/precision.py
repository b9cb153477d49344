"""Matmul and convolution precision modes: DEFAULT (the default), HIGH and HIGHEST.

DEFAULT rounds f32 operands to bf16 and accumulates in f32, as a TPU does natively; HIGH takes
three bf16 passes (bf16x3); HIGHEST computes in f32. The mode is torch_tpu's own: it starts at
DEFAULT whatever torch's float32 matmul precision says, because torch's default ("highest") is
a CPU/CUDA default. ``torch.set_float32_matmul_precision`` still sets it (medium -> DEFAULT,
high -> HIGH, highest -> HIGHEST), while ``torch.tpu.precision`` leaves the CPU's setting alone.

PyTorch's newer per-backend switches set it as well (see ``_follow_fp32_precision``):
``torch.backends.fp32_precision`` and, because code moves from CUDA to tpu by changing the device
string, ``torch.backends.cuda.matmul.fp32_precision``. "ieee" -> HIGHEST, "tf32" -> HIGH (TF32's
10-bit mantissa lies between bf16's 8 bits and f32's 24, and bf16x3 is the pass count that meets
it, as JAX maps "tensorfloat32" to HIGH), "bf16" -> DEFAULT; "none" hands the choice back.
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


# torch.backends' fp32_precision values.
_FROM_FP32_PRECISION = {"ieee": Precision.HIGHEST, "tf32": Precision.HIGH, "bf16": Precision.DEFAULT}
# The tpu mode in force before a torch fp32_precision setting took over, restored when the setting
# goes back to "none" (as `with torch.backends.flags(fp32_precision=...)` does on exit).
_before_fp32_setting: list[Precision] = []


def _fp32_setting() -> str:
    """The fp32 precision torch's settings ask of accelerator matmuls: CUDA's matmul setting as
    torch resolves it (it inherits torch.backends.fp32_precision), else the generic one."""
    getter = torch._C._get_fp32_precision_getter
    chosen = getter("cuda", "matmul")
    return chosen if chosen != "none" else getter("generic", "all")


def _apply_fp32_setting() -> None:
    mode = _FROM_FP32_PRECISION.get(_fp32_setting())
    if mode is None:
        if _before_fp32_setting:
            _C._set_precision(_before_fp32_setting.pop().value)
        return
    if not _before_fp32_setting:
        _before_fp32_setting.append(Precision(_C._get_precision()))
    _C._set_precision(mode.value)


def _follow_fp32_precision() -> None:
    """Makes torch's fp32_precision settings (torch.backends.fp32_precision, the per-backend
    ``...fp32_precision`` attributes and ``torch.backends.flags``) set the tpu mode too. Every one
    of them goes through ``torch._C._set_fp32_precision_setter``, looked up at each call."""
    original = torch._C._set_fp32_precision_setter
    if getattr(original, "_torch_tpu_forwards", False):
        return

    def set_fp32_precision(backend, op, precision):
        before = _fp32_setting()
        result = original(backend, op, precision)  # torch validates, and sets the CPU/CUDA side
        # Only a change counts: torch.compile saves and restores these settings around each
        # frame, and writing back the value they already had must not override the tpu mode
        # (set_float32_matmul_precision("medium") reads back as "tf32", which would mean HIGH).
        if _fp32_setting() != before:
            _apply_fp32_setting()
        return result

    set_fp32_precision._torch_tpu_forwards = True
    torch._C._set_fp32_precision_setter = set_fp32_precision
    if _fp32_setting() in _FROM_FP32_PRECISION:  # chosen before torch_tpu was imported
        _apply_fp32_setting()


class allow_excess_precision(precision):  # noqa: N801 - used both as a function and a context manager
    """TorchTPU's switch, mapped onto the precision mode (torch_tpu's reading of the name).

    "Excess" precision is more than the TPU's native matmul arithmetic (DEFAULT: bf16 operands).
    ``allow_excess_precision(False)`` sets DEFAULT; ``allow_excess_precision(True)`` allows more:
    it keeps a mode already above DEFAULT (HIGH or HIGHEST) and otherwise sets HIGHEST. Used with
    ``with``, it restores the previous mode on exit. Called with no argument, it says whether the
    current mode is above DEFAULT.
    """

    def __new__(cls, allow=None):
        if allow is None:
            return Precision(_C._get_precision()) != Precision.DEFAULT
        return object.__new__(cls)

    def __init__(self, allow=None):
        if not isinstance(allow, bool):
            raise TypeError(f"allow_excess_precision expects a bool, got {type(allow).__name__}")
        current = Precision(_C._get_precision())
        excess = current if current != Precision.DEFAULT else Precision.HIGHEST
        super().__init__(excess if allow else Precision.DEFAULT)
