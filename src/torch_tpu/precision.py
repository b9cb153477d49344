"""Matmul and convolution precision modes (DEFAULT, HIGH, HIGHEST)."""

from __future__ import annotations

import enum

import torch


class Precision(enum.Enum):
    DEFAULT = "medium"
    HIGH = "high"
    HIGHEST = "highest"


def precision(mode: Precision | str | None = None) -> Precision:
    """Sets the precision mode (also via torch.set_float32_matmul_precision); returns the current one."""
    if mode is not None:
        if isinstance(mode, str):
            mode = Precision[mode.upper()]
        torch.set_float32_matmul_precision(mode.value)
    return {"medium": Precision.DEFAULT, "high": Precision.HIGH, "highest": Precision.HIGHEST}[
        torch.get_float32_matmul_precision()
    ]
