"""The memoized meta run (csrc/aten/meta_cache.h): repeat calls skip PyTorch's meta functions,
but every check a meta function makes still applies to every call."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import assert_close, make


def test_repeated_op_results_stay_correct_across_shapes_and_dtypes():
    for _ in range(3):
        for shape, dtype in [((4, 5), torch.float32), ((4, 5), torch.int32), ((5, 4), torch.float32)]:
            a, b = make(shape, dtype), make(shape[-1:], dtype)
            assert_close(a.to("tpu") * b.to("tpu"), a * b)
            assert_close(a.to("tpu").t() * 2, a.t() * 2)


def test_errors_are_raised_after_a_cached_success():
    x = make((3, 4)).to("tpu")
    x + make((4,)).to("tpu")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            x + make((5,)).to("tpu")


def test_value_dependent_checks_run_for_new_values():
    ints = make((6,), torch.int64, low=1, high=5).to("tpu")
    assert_close(ints.pow(2), ints.cpu().pow(2))
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        ints.pow(-1)


def test_out_resize_warns_on_every_resize():
    x = make((3, 4)).to("tpu")
    for _ in range(2):
        out = torch.empty(5, device="tpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.add(x, 1, out=out)
        assert any("was resized" in str(w.message) for w in caught)
        assert out.shape == (3, 4)


def test_in_place_on_differently_strided_views():
    cpu = make((6, 6))
    tpu = cpu.to("tpu")
    for view in (lambda t: t[:, ::2], lambda t: t.t()[1:], lambda t: t[::3]):
        view(cpu).add_(1)
        view(tpu).add_(1)
        assert_close(tpu, cpu)
