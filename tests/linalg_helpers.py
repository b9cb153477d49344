"""Inputs and checks shared by the matrix decomposition tests (test_linalg_decompositions.py,
test_linalg_qr.py, test_linalg_spectral.py)."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import TPU, make


def well_conditioned(shape, dtype=torch.float32):
    """Matrices (square or not) with a weighted diagonal, so pivots, R's diagonal and solves stay
    away from zero."""
    a = make(shape, torch.float64, low=-1, high=1)
    k = min(shape[-2], shape[-1])
    eye = torch.eye(shape[-2], shape[-1], dtype=torch.float64)
    return (a + 2 * eye if k else a).to(dtype)


def tpu_leaf(t):
    """A copy of CPU tensor ``t`` on tpu, as a leaf that records gradients."""
    return t.detach().to(TPU).requires_grad_()


def cpu_error(fn, *args, **kwargs):
    """The type and first line of the error ``fn`` raises on the CPU."""
    with pytest.raises(Exception) as caught:
        fn(*args, **kwargs)
    return caught.type, str(caught.value).split("\n")[0]


def assert_same_error(fn, *cpu_args, **kwargs):
    """``fn`` on the tpu copies of ``cpu_args`` raises the CPU's error."""
    kind, message = cpu_error(fn, *cpu_args, **kwargs)
    with pytest.raises(kind, match=re.escape(message)):
        fn(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in cpu_args], **kwargs)
