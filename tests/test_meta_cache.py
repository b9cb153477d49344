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


def test_changing_scalars_of_arithmetic_run_the_meta_function_once():
    # A training step passes new floats every step (a learning rate, Adam's step size): arithmetic
    # does not read their values in its meta function, so it is not run again for each.
    import torch_tpu

    cpu_p, cpu_a, cpu_d = make((5, 6)), make((5, 6)), make((5, 6)).abs() + 1
    p, a, d = cpu_p.to("tpu"), cpu_a.to("tpu"), cpu_d.to("tpu")
    ops = [
        lambda p, a, d, v: p.addcdiv_(a, d, value=v),
        lambda p, a, d, v: p.addcmul_(a, d, value=-v),
        lambda p, a, d, v: p.add_(a, alpha=v),
        lambda p, a, d, v: p.mul_(1 + v),
        lambda p, a, d, v: p.div_(1 + v),
        lambda p, a, d, v: p.lerp_(a, v),
        lambda p, a, d, v: torch.sub(p, d, alpha=v),
    ]
    for op in ops:
        op(p, a, d, 0.5)
        op(cpu_p, cpu_a, cpu_d, 0.5)
    torch_tpu.metrics.reset()
    for step in range(1, 6):
        v = 0.1 + step / 7
        for op in ops:
            assert_close(op(p, a, d, v), op(cpu_p, cpu_a, cpu_d, v))
    assert torch_tpu.metrics.snapshot()["meta_runs"] == 0
    # Integer scalars too, and an integer tensor's result type still follows each kind.
    ints = make((4,), torch.int64, low=0, high=9)
    tpu_ints = ints.to("tpu")
    for k in (3, 5, -2):
        assert_close(tpu_ints + k, ints + k)
        assert_close(tpu_ints * (k + 0.5), ints * (k + 0.5))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        tpu_ints.mul_(3.5)
    assert_close(tpu_ints.mul_(3), ints.mul_(3))
    bools = make((4,), torch.bool).to("tpu")
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        torch.add(tpu_ints, bools, alpha=True)
    assert_close(torch.add(bools, bools, alpha=True), torch.add(bools.cpu(), bools.cpu(), alpha=True))


def test_float_values_that_size_or_check_a_result_still_count():
    # arange sizes its result by its Scalar arguments; renorm, uniform_ and histc check values.
    for end in (2.5, 5.5, 2.5):
        assert_close(torch.arange(0, end, 0.5, device="tpu"), torch.arange(0, end, 0.5))
    x = make((3, 4)).to("tpu")
    x.renorm(2, 0, 1.0)
    x.uniform_(0.0, 1.0)
    torch.histc(x, bins=4, min=0.0, max=1.0)
    with pytest.raises(RuntimeError, match="expected maxnorm to be >= 0"):
        x.renorm(2, 0, -1.0)
    with pytest.raises(RuntimeError, match="expects to return a \\[from, to\\) range"):
        x.uniform_(1.0, 0.0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=4, min=1.0, max=0.0)


def test_a_sliding_range_runs_the_meta_function_once():
    # A decoding step's positions: arange(p, p + n) for a growing p is sized by n alone.
    import torch_tpu

    for p in range(3):
        torch.arange(p, p + 4, device="tpu")
        torch.arange(p + 0.25, p + 2.25, 0.5, device="tpu")
    torch_tpu.metrics.reset()
    for p in range(3, 9):
        assert_close(torch.arange(p, p + 4, device="tpu"), torch.arange(p, p + 4))
        assert_close(torch.arange(p + 0.25, p + 2.25, 0.5, device="tpu"), torch.arange(p + 0.25, p + 2.25, 0.5))
    assert torch_tpu.metrics.snapshot()["meta_runs"] == 0
    # Integer results of float bounds truncate each bound: the same span can give other lengths.
    for start in (0.5, -0.5, 1.5, -1.5):
        for dtype in (torch.int64, torch.int32):
            expected = torch.arange(start, start + 2, dtype=dtype)
            assert_close(torch.arange(start, start + 2, dtype=dtype, device="tpu"), expected)
    # The checks read the bounds and the step.
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(10, 6, device="tpu")
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        torch.arange(6, 10, -1, device="tpu")
    with pytest.raises(RuntimeError, match="unsupported range"):
        torch.arange(0.0, float("inf"), device="tpu")
