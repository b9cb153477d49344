"""TorchTPU-compatible API surface."""

from __future__ import annotations

import torch


def tpu_device(index: int | None = None) -> torch.device:
    """The process's tpu device (the current one unless ``index`` is given)."""
    return torch.device("tpu", torch.tpu.current_device() if index is None else index)


def device_count() -> int:
    return torch.tpu.device_count()
