"""Automatic mixed precision on tpu: what ``torch.autocast("tpu")`` asks of ``torch.tpu``.

The casting itself is C++ (csrc/aten/autocast.cc: the AutocastPrivateUse1 kernels, with CUDA's op
lists). This module gives the device module the AMP functions that ``torch.autocast`` and
``torch.utils.checkpoint`` look up on a PrivateUse1 backend's module (``get_amp_supported_dtype``,
``_initialized``), the ``torch.cuda``-style helpers (``is_autocast_enabled``, ``get_autocast_dtype``,
their setters, ``is_bf16_supported``, ``torch.tpu.amp.autocast``), and makes bfloat16 the default
autocast dtype (PyTorch's default for PrivateUse1 is float16; TPUs compute in bfloat16).
``torch.amp.GradScaler("tpu")`` needs nothing here: its two ops are kernels in autocast.cc.

    with torch.autocast("tpu"):                       # bfloat16
        y = model(x)
    with torch.autocast("tpu", dtype=torch.float16):  # float16 is also supported
        y = model(x)

The default dtype is per thread in PyTorch: it is set for the thread that imports torch_tpu, and
autograd's threads inherit it. A thread started by the user begins with PyTorch's default
(float16) until it calls ``torch.tpu.amp.set_autocast_dtype(torch.bfloat16)`` or passes ``dtype``.
"""

from __future__ import annotations

import torch

__all__ = [
    "autocast",
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "is_autocast_enabled",
    "is_bf16_supported",
    "set_autocast_dtype",
    "set_autocast_enabled",
]

DEVICE_TYPE = "tpu"
DEFAULT_DTYPE = torch.bfloat16


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("tpu", dtype=...)`` accepts; any other warns and disables it."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled(DEVICE_TYPE)


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled(DEVICE_TYPE, enabled)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype(DEVICE_TYPE)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype(DEVICE_TYPE, dtype)


class autocast(torch.amp.autocast):  # noqa: N801 - mirrors torch.cuda.amp.autocast
    """``torch.autocast("tpu", ...)`` under the name ``torch.tpu.amp.autocast``."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True):
        super().__init__(DEVICE_TYPE, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class _Initialized:
    """``torch.tpu._initialized``, read by ``torch.utils.checkpoint``: only when it is true does a
    checkpoint stash the tpu RNG state and restore it for the recomputation, so that dropout draws
    the same mask twice. It is live (the device's state now), as ``torch.cuda._initialized`` is."""

    def __bool__(self) -> bool:
        from torch_tpu import _C

        return bool(_C._is_initialized())

    def __repr__(self) -> str:
        return repr(bool(self))


def _attach(device_module) -> None:
    """Gives ``torch.tpu`` the AMP functions (and ``torch.tpu.amp``) and sets the default dtype."""
    import sys

    device_module.amp = sys.modules[__name__]
    for name in __all__:
        if name != "autocast" and not hasattr(device_module, name):
            setattr(device_module, name, globals()[name])
    if not hasattr(device_module, "_initialized"):
        device_module._initialized = _Initialized()
    torch.set_autocast_dtype(DEVICE_TYPE, DEFAULT_DTYPE)


_attach(getattr(torch, DEVICE_TYPE))
