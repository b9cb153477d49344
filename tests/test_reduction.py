"""Reductions, scans and softmax on the tpu device, compared with PyTorch on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import TOLERANCES, TPU, assert_close, make, noncontiguous

import torch_tpu

ALL_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]
FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
NUMERIC_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]
SHAPE = (4, 5, 6)
# (dim, keepdim): everything (twice), one dim, a negative dim, a list, an unsorted list with a negative dim.
DIMS = [(None, False), (None, True), (1, True), (-1, False), ((0, 2), True), ((2, -3), False)]


def dtype_cases(dtypes, all_cases, few_cases):
    """(dtype, *case) tuples: every case for float32, a few for each other dtype.

    Which dims are reduced does not depend on the dtype in the lowering, while what does (the
    accumulation type, promotion, identities) shows in any one reduction, so crossing every dim
    case with every dtype would only add compiles.
    """
    cases = [(torch.float32, *case) for case in all_cases]
    return cases + [(dtype, *case) for dtype in dtypes if dtype != torch.float32 for case in few_cases]


FEW_DIMS = [(None, False), ((0, 2), True)]


def sum_tolerance(dtype: torch.dtype, n: int) -> dict:
    """Tolerance for a float sum of n terms of magnitude <= 3.

    Both sides accumulate in f32 (half precision too) but in different orders, so the rounding
    error is a random walk of n steps of f32 epsilon times the term size: it grows like sqrt(n).
    A half-precision result is then rounded once more, which the dtype's own rtol covers.
    """
    base = dict(TOLERANCES.get(dtype, dict(rtol=0, atol=0)))
    if dtype.is_floating_point:
        f32_epsilon = 2.0**-23
        base["atol"] = max(base["atol"], 4 * math.sqrt(n) * 3 * f32_epsilon)  # 4 sigma
    return base


def reduce_kwargs(dim, keepdim):
    return {} if dim is None and not keepdim else dict(dim=dim, keepdim=keepdim)


def count(shape, dim) -> int:
    if dim is None:
        return math.prod(shape)
    dims = [dim] if isinstance(dim, int) else dim
    return math.prod(shape[d] for d in dims)


def ties(shape, dtype):
    """Inputs with many repeated values, so first-occurrence index rules matter."""
    if dtype == torch.bool:
        return make(shape, dtype)
    return make(shape, dtype, low=-3, high=3).round() if dtype.is_floating_point else make(shape, dtype, -3, 3)


# ---- sum, mean, prod, nansum, count_nonzero ----


@pytest.mark.parametrize("dtype,dim,keepdim", dtype_cases(ALL_DTYPES, DIMS, FEW_DIMS))
def test_sum(dtype, dim, keepdim):
    x = make(SHAPE, dtype)
    kwargs = reduce_kwargs(dim, keepdim)
    # Integer and bool sums promote to int64; assert_close checks the dtype.
    assert_close(x.to(TPU).sum(**kwargs), x.sum(**kwargs), **sum_tolerance(dtype, count(SHAPE, dim)))


@pytest.mark.parametrize(
    "dtype,result_dtype",
    [
        (torch.int32, torch.int32),
        (torch.int32, torch.float32),
        (torch.bool, torch.int32),
        (torch.float32, torch.bfloat16),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.int64),
    ],
)
def test_sum_dtype_argument(dtype, result_dtype):
    x = make(SHAPE, dtype)
    assert_close(x.to(TPU).sum(dtype=result_dtype), x.sum(dtype=result_dtype), **sum_tolerance(result_dtype, 120))
    assert_close(x.to(TPU).sum(1, dtype=result_dtype), x.sum(1, dtype=result_dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_sum_of_many_elements(dtype):
    n = 1 << 14
    x = make((n,), dtype)
    assert_close(x.to(TPU).sum(), x.sum(), **sum_tolerance(dtype, n))
    x2 = x.reshape(64, 256)
    assert_close(x2.to(TPU).sum(1), x2.sum(1), **sum_tolerance(dtype, 256))


@pytest.mark.parametrize("dtype,dim,keepdim", dtype_cases(FLOAT_DTYPES, DIMS, FEW_DIMS))
def test_mean(dtype, dim, keepdim):
    x = make(SHAPE, dtype)
    kwargs = reduce_kwargs(dim, keepdim)
    assert_close(x.to(TPU).mean(**kwargs), x.mean(**kwargs), **sum_tolerance(dtype, count(SHAPE, dim)))


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_mean_with_dtype_argument(dtype):
    x = make(SHAPE, dtype)
    assert_close(x.to(TPU).mean(dtype=torch.float32), x.mean(dtype=torch.float32))
    assert_close(x.to(TPU).mean((0, 1), dtype=torch.float32), x.mean((0, 1), dtype=torch.float32))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_mean_of_integers_raises_like_cpu(dtype):
    x = make(SHAPE, dtype)
    with pytest.raises(RuntimeError) as cpu_error:
        x.mean()
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype") as tpu_error:
        x.to(TPU).mean()
    assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


@pytest.mark.parametrize(
    "dtype,dim,keepdim", dtype_cases(ALL_DTYPES, [(None, False), (0, False), (-1, True)], [(-1, True)])
)
def test_prod(dtype, dim, keepdim):
    # Factors near 1 keep the product of 20 floats in range; small integers keep int32 exact.
    x = make((4, 5), dtype, low=0.5, high=1.6) if dtype.is_floating_point else make((4, 5), dtype, -3, 4)
    if dim is None:
        assert_close(x.to(TPU).prod(), x.prod())
    else:
        assert_close(x.to(TPU).prod(dim, keepdim=keepdim), x.prod(dim, keepdim=keepdim))


def test_prod_dtype_argument():
    x = make((3, 4), torch.int32, -3, 4)
    assert_close(x.to(TPU).prod(dtype=torch.float32), x.prod(dtype=torch.float32))
    assert_close(x.to(TPU).prod(1, dtype=torch.int32), x.prod(1, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_nansum(dtype):
    x = make(SHAPE, dtype)
    if dtype.is_floating_point:
        x[0, 1, 2] = x[3, 4, 5] = float("nan")
    assert_close(x.to(TPU).nansum(), x.nansum(), **sum_tolerance(dtype, 120))
    assert_close(x.to(TPU).nansum((0, 2)), x.nansum((0, 2)), **sum_tolerance(dtype, 24))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_count_nonzero(dtype):
    x = make(SHAPE, dtype, -2, 2)
    if dtype.is_floating_point:
        x = x.round()
    assert_close(torch.count_nonzero(x.to(TPU)), torch.count_nonzero(x))
    assert_close(torch.count_nonzero(x.to(TPU), dim=(0, 2)), torch.count_nonzero(x, dim=(0, 2)))
    assert_close(torch.count_nonzero(x.to(TPU), dim=-1), torch.count_nonzero(x, dim=-1))


# ---- amax/amin, max/min, argmax/argmin, aminmax ----


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize(
    "dtype,dim,keepdim", dtype_cases(ALL_DTYPES, [((), False), (1, True), ((2, -3), False)], [((0, 2), True)])
)
def test_amax_amin(op, dtype, dim, keepdim):
    x = make(SHAPE, dtype)
    assert_close(getattr(x.to(TPU), op)(dim, keepdim), getattr(x, op)(dim, keepdim))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_max_min_full(op, dtype):
    x = make(SHAPE, dtype)
    assert_close(getattr(x.to(TPU), op)(), getattr(x, op)())


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize(
    "dtype,dim,keepdim", dtype_cases(ALL_DTYPES, [(0, False), (-1, True), (1, False)], [(1, True)])
)
def test_max_min_dim(op, dtype, dim, keepdim):
    x = ties(SHAPE, dtype)
    values, indices = getattr(x.to(TPU), op)(dim, keepdim)
    expected = getattr(x, op)(dim, keepdim)
    assert_close(values, expected.values)
    # The index of the first occurrence of the extreme, as on the CPU.
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize(
    "dtype,dim,keepdim",
    dtype_cases(NUMERIC_DTYPES, [(None, False), (None, True), (0, False), (-1, True)], [(1, False)]),
)
def test_argmax_argmin(op, dtype, dim, keepdim):
    x = ties(SHAPE, dtype)
    assert_close(getattr(x.to(TPU), op)(dim, keepdim), getattr(x, op)(dim, keepdim))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_propagates(dtype):
    x = make((4, 6), dtype)
    x[1, 2] = x[1, 4] = x[3, 0] = float("nan")
    x[2, :] = float("nan")
    t = x.to(TPU)
    for name in ["max", "min", "argmax", "argmin", "amax", "amin"]:
        assert_close(getattr(t, name)(), getattr(x, name)())
    if dtype != torch.float32:
        return  # the NaN rules do not depend on the float type; the full reductions showed it
    for dim in [0, 1]:
        for name in ["max", "min"]:
            values, indices = getattr(t, name)(dim)
            expected = getattr(x, name)(dim)
            assert_close(values, expected.values)
            assert_close(indices, expected.indices)  # the first NaN
        for name in ["argmax", "argmin", "amax", "amin"]:
            assert_close(getattr(t, name)(dim), getattr(x, name)(dim))
    minimum, maximum = torch.aminmax(t, dim=1)
    assert_close(minimum, torch.aminmax(x, dim=1).min)
    assert_close(maximum, torch.aminmax(x, dim=1).max)


def test_infinities_and_extremes():
    x = torch.tensor([[-math.inf, -math.inf, -math.inf], [math.inf, 1.0, math.inf]])
    t = x.to(TPU)
    for name in ["max", "min"]:
        values, indices = getattr(t, name)(1)
        assert_close(values, getattr(x, name)(1).values)
        assert_close(indices, getattr(x, name)(1).indices)
    assert_close(t.argmax(1), x.argmax(1))
    assert_close(t.argmin(1), x.argmin(1))
    extremes = torch.tensor([torch.iinfo(torch.int64).min, torch.iinfo(torch.int64).max])
    assert_close(extremes.to(TPU).max(), extremes.max())
    assert_close(extremes.to(TPU).min(), extremes.min())
    assert_close(extremes.to(TPU).argmin(), extremes.argmin())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_aminmax(dtype):
    x = make(SHAPE, dtype)
    for kwargs in [{}, dict(dim=1), dict(dim=-1, keepdim=True)]:
        minimum, maximum = torch.aminmax(x.to(TPU), **kwargs)
        expected = torch.aminmax(x, **kwargs)
        assert_close(minimum, expected.min)
        assert_close(maximum, expected.max)


# ---- all/any ----


@pytest.mark.parametrize("op", ["all", "any"])
@pytest.mark.parametrize(
    "dtype,dim,keepdim",
    dtype_cases(ALL_DTYPES + [torch.uint8], [(None, False), (1, True), ((0, 2), False)], [(-1, False)]),
)
def test_all_any(op, dtype, dim, keepdim):
    # Mostly-true (or mostly-false) inputs, so both answers occur along each dim.
    x = make(SHAPE, torch.float32, 0, 1) < (0.9 if op == "all" else 0.1)
    x = x.to(dtype) if dtype != torch.float32 else x * make(SHAPE, dtype, 0.5, 2)
    kwargs = reduce_kwargs(dim, keepdim)
    # uint8 inputs give uint8 results, everything else bool.
    assert_close(getattr(x.to(TPU), op)(**kwargs), getattr(x, op)(**kwargs))


# ---- var/std ----


VARIANCE_CASES = [
    {},
    dict(dim=1),
    dict(dim=(0, 2), keepdim=True, correction=0),
    dict(dim=None, correction=2.5),
    dict(dim=(2, 0), unbiased=False),
]


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize(
    "dtype,kwargs", dtype_cases(FLOAT_DTYPES, [(c,) for c in VARIANCE_CASES], [({},), (dict(dim=-1),)])
)
def test_var_std(op, dtype, kwargs):
    x = make(SHAPE, dtype)
    assert_close(getattr(x.to(TPU), op)(**kwargs), getattr(x, op)(**kwargs), **sum_tolerance(dtype, 120))


def test_var_std_unbiased_positional():
    x = make(SHAPE)
    assert_close(x.to(TPU).var(False), x.var(False))
    assert_close(x.to(TPU).std(1, False, True), x.std(1, False, True))


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
@pytest.mark.parametrize("kwargs", [{}, dict(dim=1, keepdim=True), dict(dim=(0, -1), correction=0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_mean_std_mean(op, dtype, kwargs):
    x = make(SHAPE, dtype)
    spread, mean = getattr(torch, op)(x.to(TPU), **kwargs)
    expected_spread, expected_mean = getattr(torch, op)(x, **kwargs)
    assert_close(spread, expected_spread, **sum_tolerance(dtype, 120))
    assert_close(mean, expected_mean, **sum_tolerance(dtype, 120))


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
def test_var_of_one_element_is_nan_like_cpu():
    x = make((1, 3))
    assert_close(x.to(TPU).var(0), x.var(0))
    assert_close(x.to(TPU).std(0, correction=0), x.std(0, correction=0))


def test_var_correction_does_not_recompile():
    x = make((5, 7)).to(TPU)
    x.var(1, correction=0.5).cpu()
    before = torch_tpu.metrics.snapshot()["compiles"]
    for correction in [1.5, 2, 3.25]:
        assert_close(x.var(1, correction=correction), x.cpu().var(1, correction=correction))
    assert torch_tpu.metrics.snapshot()["compiles"] == before


def test_var_of_integers_raises_like_cpu():
    x = make(SHAPE, torch.int32)
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        x.var()
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        x.to(TPU).var()


# ---- vector norms ----


NORM_ORDERS = [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5]


@pytest.mark.parametrize("ord", NORM_ORDERS)
@pytest.mark.parametrize(
    "dtype,dim,keepdim",
    [
        (torch.float32, None, False),
        (torch.float32, (0, -1), True),
        (torch.bfloat16, 1, True),
    ],
)
def test_vector_norm(ord, dtype, dim, keepdim):
    x = make(SHAPE, dtype)
    x[0, 0, :2] = 0  # zeros matter for ord 0 and negative orders
    result = torch.linalg.vector_norm(x.to(TPU), ord, dim, keepdim)
    assert_close(result, torch.linalg.vector_norm(x, ord, dim, keepdim), **sum_tolerance(dtype, 120))


def test_vector_norm_dtype_argument_and_norm():
    x = make(SHAPE, torch.bfloat16)
    result = torch.linalg.vector_norm(x.to(TPU), 2, 1, dtype=torch.float32)
    assert_close(result, torch.linalg.vector_norm(x, 2, 1, dtype=torch.float32))
    y = make(SHAPE)
    assert_close(y.to(TPU).norm(), y.norm())
    assert_close(y.to(TPU).norm(3, 1, True), y.norm(3, 1, True))
    assert_close(y.to(TPU).norm(p="fro", dim=(0, 1)), y.norm(p="fro", dim=(0, 1)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_legacy_norm_overloads(dtype):
    # aten::norm, which C++ callers (F.pairwise_distance) reach; torch.norm itself mostly goes to
    # linalg_vector_norm.
    x = make(SHAPE, dtype)
    calls = [
        lambda t: torch.ops.aten.norm.Scalar(t, 3),
        lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1]),
        lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 0.5, [0, 2], True),
        lambda t: torch.ops.aten.norm.ScalarOpt_dim_dtype(t, 1, [-1], False, dtype=torch.float32),
        lambda t: torch.ops.aten.norm.ScalarOpt_dtype(t, math.inf, dtype=torch.float32),
    ]
    torch_tpu.metrics.reset()
    for call in calls:
        assert_close(call(x.to(TPU)), call(x))
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0


def test_vector_norm_order_does_not_recompile():
    x = make((5, 7)).to(TPU)
    torch.linalg.vector_norm(x, 3, 1).cpu()
    before = torch_tpu.metrics.snapshot()["compiles"]
    for ord in [4, 2.5, -3]:
        assert_close(torch.linalg.vector_norm(x, ord, 1), torch.linalg.vector_norm(x.cpu(), ord, 1))
    assert torch_tpu.metrics.snapshot()["compiles"] == before


def test_vector_norm_errors_like_cpu():
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point"):
        torch.linalg.vector_norm(make((3,), torch.int32).to(TPU))
    empty = torch.empty(0, 3)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.linalg.vector_norm(empty, math.inf, 0)
    with pytest.raises(RuntimeError) as tpu_error:
        torch.linalg.vector_norm(empty.to(TPU), math.inf, 0)
    assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


# ---- cumsum/cumprod ----


@pytest.mark.parametrize("dtype,dim", dtype_cases(ALL_DTYPES, [(0,), (-1,), (1,)], [(-1,)]))
def test_cumsum(dtype, dim):
    x = make(SHAPE, dtype)
    # Integer and bool cumulative sums promote to int64.
    assert_close(x.to(TPU).cumsum(dim), x.cumsum(dim), **sum_tolerance(dtype, SHAPE[dim]))


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_cumsum_lengths(n):
    # The CPU accumulates f32 in f64; our scan adds log2(n) f32 roundings per element.
    x = make((3, n))
    assert_close(x.to(TPU).cumsum(1), x.cumsum(1), **sum_tolerance(torch.float32, n))


def test_cumsum_dtype_argument_in_place_and_out():
    x = make(SHAPE, torch.int32)
    assert_close(x.to(TPU).cumsum(2, dtype=torch.float32), x.cumsum(2, dtype=torch.float32))
    assert_close(x.to(TPU).cumsum(0, dtype=torch.int32), x.cumsum(0, dtype=torch.int32))
    y = make(SHAPE)
    t = y.to(TPU)
    t.cumsum_(1)
    assert_close(t, y.clone().cumsum_(1))
    out = torch.empty(0, device=TPU)
    torch.cumsum(y.to(TPU), 0, out=out)
    assert_close(out, y.cumsum(0))


@pytest.mark.parametrize("dtype,dim", dtype_cases(ALL_DTYPES, [(0,), (-1,)], [(-1,)]))
def test_cumprod(dtype, dim):
    x = make((4, 6), dtype, low=0.5, high=1.6) if dtype.is_floating_point else make((4, 6), dtype, -3, 4)
    assert_close(x.to(TPU).cumprod(dim), x.cumprod(dim))


def test_cumsum_errors_like_cpu():
    with pytest.raises(IndexError, match="Dimension out of range"):
        make(SHAPE).to(TPU).cumsum(3)


# ---- cummax/cummin/logcumsumexp ----


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype,dim", dtype_cases(ALL_DTYPES, [(0,), (-1,), (1,)], [(-1,)]))
def test_cummax_cummin(op, dtype, dim):
    # Many ties: the CPU takes the later index of equal values.
    x = ties(SHAPE, dtype)
    values, indices = getattr(torch, op)(x.to(TPU), dim)
    expected = getattr(torch, op)(x, dim)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_nan_infinities_and_lengths(op):
    nan, inf = math.nan, math.inf
    x = torch.tensor([[1.0, nan, 2.0, nan, 5.0, -inf, inf], [-inf, -inf, 3.0, inf, inf, nan, 0.0]])
    expected = getattr(torch, op)(x, 1)
    values, indices = getattr(torch, op)(x.to(TPU), 1)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)
    for n in [1, 2, 33]:
        y = ties((2, n), torch.float32)
        assert_close(getattr(torch, op)(y.to(TPU), 1).indices, getattr(torch, op)(y, 1).indices)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_backward_out_and_scalars(op):
    x = make((3, 7), seed=1)
    tpu_x = x.to(TPU).requires_grad_()
    cpu_x = x.clone().requires_grad_()
    grad = make((3, 7), seed=2)
    getattr(torch, op)(tpu_x, 1).values.backward(grad.to(TPU))
    getattr(torch, op)(cpu_x, 1).values.backward(grad)
    assert_close(tpu_x.grad, cpu_x.grad)
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    result = getattr(torch, op)(noncontiguous(x.to(TPU)), 0, out=(values, indices))
    assert result.values is values and result.indices is indices
    expected = getattr(torch, op)(noncontiguous(x), 0)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)
    scalar = getattr(torch, op)(torch.tensor(2.5, device=TPU), 0)
    assert scalar.values.item() == 2.5 and scalar.indices.item() == 0 and scalar.indices.dim() == 0
    empty = getattr(torch, op)(torch.empty(0, 3, device=TPU), 0)
    assert empty.values.shape == (0, 3) and empty.indices.dtype == torch.int64
    with pytest.raises(IndexError, match="Dimension out of range"):
        getattr(torch, op)(x.to(TPU), 2)


@pytest.mark.parametrize("dtype,dim", dtype_cases(FLOAT_DTYPES, [(0,), (-1,), (1,)], [(-1,)]))
def test_logcumsumexp(dtype, dim):
    # A wide range checks the max-shifted form (exp(40) overflows f16).
    x = make(SHAPE, dtype, -40, 40)
    assert_close(torch.logcumsumexp(x.to(TPU), dim), torch.logcumsumexp(x, dim))


def test_logcumsumexp_special_values_backward_and_errors():
    nan, inf = math.nan, math.inf
    x = torch.tensor([[-inf, -inf, 0.0, inf, 1.0], [2.0, nan, 1.0, -inf, 3.0], [inf, inf, -inf, 0.0, 0.0]])
    assert_close(torch.logcumsumexp(x.to(TPU), 1), torch.logcumsumexp(x, 1))
    y = make((4, 9), seed=3)
    tpu_y, cpu_y = y.to(TPU).requires_grad_(), y.clone().requires_grad_()
    torch.logcumsumexp(tpu_y, 1).sum().backward()
    torch.logcumsumexp(cpu_y, 1).sum().backward()
    assert_close(tpu_y.grad, cpu_y.grad)
    out = torch.empty(0, device=TPU)
    assert torch.logcumsumexp(y.to(TPU), 0, out=out) is out
    assert_close(out, torch.logcumsumexp(y, 0))
    assert torch.logcumsumexp(torch.tensor(1.5, device=TPU), 0).item() == 1.5
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.logcumsumexp(torch.arange(4, device=TPU), 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.logcumsumexp(y.to(TPU), -3)


# ---- softmax ----


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype,dim", dtype_cases(FLOAT_DTYPES, [(0,), (-1,)], [(1,)]))
def test_softmax(op, dtype, dim):
    # A wide range checks that the max is subtracted (exp(40) overflows f16).
    x = make(SHAPE, dtype, -40, 40)
    assert_close(getattr(x.to(TPU), op)(dim), getattr(x, op)(dim))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dtype_argument_and_special_values(op):
    x = make((3, 5), torch.bfloat16)
    assert_close(getattr(x.to(TPU), op)(1, dtype=torch.float32), getattr(x, op)(1, dtype=torch.float32))
    y = torch.tensor([[0.0, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf], [math.nan, 0.0, 1.0]])
    assert_close(getattr(y.to(TPU), op)(1), getattr(y, op)(1))


@pytest.mark.parametrize("op", ["_softmax", "_log_softmax"])
def test_softmax_half_to_float(op):
    # The CPU kernel refuses half_to_float ("not supported on CPU"), so the reference is the
    # same computation in float32, which is what the flag means on accelerators.
    x = make((3, 5), torch.float16)
    result = getattr(torch, op)(x.to(TPU), 1, True)
    assert_close(result, getattr(torch, op)(x.float(), 1, False), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["_softmax", "_log_softmax"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_backward_data(op, dtype):
    x = make(SHAPE, dtype)
    grad = make(SHAPE, dtype)
    output = getattr(torch, op)(x, 1, False)
    backward = getattr(torch.ops.aten, op + "_backward_data")
    result = backward(grad.to(TPU), output.to(TPU), 1, dtype)
    assert_close(result, backward(grad, output, 1, dtype))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_autograd(op):
    x = make((3, 5))
    grad = make((3, 5))
    cpu = x.clone().requires_grad_()
    getattr(cpu, op)(1).backward(grad)
    tpu = x.to(TPU).requires_grad_()
    getattr(tpu, op)(1).backward(grad.to(TPU))
    assert_close(tpu.grad, cpu.grad)


# ---- layouts, 0-d inputs, empty inputs, out= ----

NONCONTIGUOUS_CASES = {
    "sum": lambda t: t.sum((0, 2)),
    "mean": lambda t: t.mean(-1, keepdim=True),
    "amax": lambda t: t.amax(1),
    "max_dim": lambda t: t.max(-1),
    "argmin": lambda t: t.argmin(1),
    "var": lambda t: t.var(-2),
    "norm": lambda t: torch.linalg.vector_norm(t, 3, -1),
    "cumsum": lambda t: t.cumsum(-1),
    "softmax": lambda t: t.softmax(-2),
    "any": lambda t: t.bool().any(-1),
}


@pytest.mark.parametrize("case", list(NONCONTIGUOUS_CASES))
def test_noncontiguous_input(case):
    op = NONCONTIGUOUS_CASES[case]
    x = make(SHAPE)
    t = noncontiguous(x.to(TPU))
    assert not t.is_contiguous()
    result, expected = op(t), op(noncontiguous(x))
    if isinstance(expected, tuple):
        for r, e in zip(result, expected, strict=False):
            assert_close(r, e)
    else:
        assert_close(result, expected)


ZERO_DIM_CASES = {
    "sum": lambda t: t.sum(),
    "sum_dim": lambda t: t.sum(0, keepdim=True),
    "mean": lambda t: t.mean(-1),
    "prod": lambda t: t.prod(0),
    "amax": lambda t: t.amax(),
    "max": lambda t: t.max(),
    "max_dim": lambda t: t.max(0),
    "argmax": lambda t: t.argmax(),
    "argmin_dim": lambda t: t.argmin(0, keepdim=True),
    "all": lambda t: t.all(),
    "any_dim": lambda t: t.any(0),
    "var": lambda t: t.var(correction=0),
    "std": lambda t: t.std(),
    "norm": lambda t: torch.linalg.vector_norm(t, 3),
    "cumsum": lambda t: t.cumsum(0),
    "cumprod": lambda t: t.cumprod(-1),
    "softmax": lambda t: t.softmax(0),
    "log_softmax": lambda t: t.log_softmax(-1),
}


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
@pytest.mark.parametrize("case", list(ZERO_DIM_CASES))
def test_zero_dim_input(case):
    op = ZERO_DIM_CASES[case]
    x = make((), torch.float32)
    result, expected = op(x.to(TPU)), op(x)
    if isinstance(expected, tuple):
        for r, e in zip(result, expected, strict=False):
            assert_close(r, e)
    else:
        assert_close(result, expected)


def test_empty_reductions_match_cpu():
    x = torch.empty(0, 3)
    t = x.to(TPU)
    assert_close(t.sum(), x.sum())
    assert_close(t.sum(0), x.sum(0))  # zeros
    assert_close(t.sum(1), x.sum(1))  # empty result
    assert_close(t.prod(0), x.prod(0))  # ones
    assert_close(t.mean(0), x.mean(0))  # NaN
    assert_close(t.bool().all(0), x.bool().all(0))
    assert_close(t.bool().any(0), x.bool().any(0))
    assert_close(t.cumsum(0), x.cumsum(0))
    assert_close(torch.linalg.vector_norm(t, 2, 0), torch.linalg.vector_norm(x, 2, 0))


@pytest.mark.parametrize(
    "name,call",
    [
        ("max_dim", lambda t: t.max(0)),
        ("min_dim", lambda t: t.min(0)),
        ("argmax_dim", lambda t: t.argmax(0)),
        ("amax_dim", lambda t: t.amax(0)),
        ("max", lambda t: t.max()),
        ("argmin", lambda t: t.argmin()),
    ],
)
def test_extremum_of_empty_raises_like_cpu(name, call):
    x = torch.empty(0, 3)
    with pytest.raises((IndexError, RuntimeError)) as cpu_error:
        call(x)
    with pytest.raises(cpu_error.type) as tpu_error:
        call(x.to(TPU))
    assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda t: t.sum(3), IndexError, "Dimension out of range"),
        (lambda t: t.sum((0, 0)), RuntimeError, "appears multiple times"),
        (lambda t: t.amax(-4), IndexError, "Dimension out of range"),
        (lambda t: t.max(5), IndexError, "Dimension out of range"),
        (lambda t: t.bool().argmax(), RuntimeError, "does not support bool input"),
        (lambda t: t.softmax(3), IndexError, "Dimension out of range"),
    ],
)
def test_argument_errors_like_cpu(call, error, message):
    x = make(SHAPE)
    with pytest.raises(error, match=message):
        call(x)
    with pytest.raises(error, match=message):
        call(x.to(TPU))


def test_out_variants_resize():
    x = make(SHAPE)
    t = x.to(TPU)
    out = torch.empty(0, device=TPU)
    torch.sum(t, 0, out=out)
    assert_close(out, x.sum(0))
    out = torch.empty(0, device=TPU)
    torch.mean(t, (0, 2), keepdim=True, out=out)
    assert_close(out, x.mean((0, 2), keepdim=True))
    out = torch.empty(0, device=TPU)
    torch.amax(t, -1, out=out)
    assert_close(out, x.amax(-1))
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    torch.argmax(t, 1, out=out)
    assert_close(out, x.argmax(1))
    flags = make(SHAPE, torch.bool)
    out = torch.empty(0, dtype=torch.bool, device=TPU)
    torch.any(flags.to(TPU), 1, out=out)
    assert_close(out, flags.any(1))
    values, indices = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.int64, device=TPU)
    torch.max(t, 1, keepdim=True, out=(values, indices))
    expected = x.max(1, keepdim=True)
    assert_close(values, expected.values)
    assert_close(indices, expected.indices)
    out = torch.empty(0, device=TPU)
    torch.linalg.vector_norm(t, 1, (0, 1), out=out)
    assert_close(out, torch.linalg.vector_norm(x, 1, (0, 1)))


def test_out_of_wrong_size_is_resized_with_warning_like_cpu():
    x = make(SHAPE)
    cpu_out = torch.empty(7)
    with pytest.warns(UserWarning, match="resized"):
        torch.sum(x, 0, out=cpu_out)
    tpu_out = torch.empty(7, device=TPU)
    with pytest.warns(UserWarning, match="resized"):
        torch.sum(x.to(TPU), 0, out=tpu_out)
    assert_close(tpu_out, cpu_out)


def test_out_dtype_decides_the_sum_dtype_like_cpu():
    # An int64 out= makes the CPU cast the input to int64 before summing.
    x = make(SHAPE)
    out = torch.empty(0, dtype=torch.int64, device=TPU)
    torch.sum(x.to(TPU), 0, out=out)
    assert_close(out, torch.sum(x, 0, out=torch.empty(0, dtype=torch.int64)))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda d: torch.any(torch.ones(2, 3).to(d), 0, out=torch.empty(0).to(d)), "any only supports bool"),
        (
            lambda d: torch.all(torch.ones(2, 3).to(d), out=torch.empty(0, dtype=torch.int32).to(d)),
            "all only supports bool tensor for result, got: Int",
        ),
        (
            lambda d: torch._softmax(torch.ones(2, 3).to(d), 0, False, out=torch.empty(0, dtype=torch.half).to(d)),
            "Expected out tensor to have dtype float, but got c10::Half instead",
        ),
        (
            lambda d: torch.ops.aten._softmax_backward_data(
                torch.ones(2, 3).to(d), torch.ones(2, 3, dtype=torch.double).to(d), 1, torch.float32
            ),
            "expected scalar type Float but found Double",
        ),
        (
            lambda d: torch.ops.aten._log_softmax_backward_data(
                torch.ones(2, 3, dtype=torch.half).to(d), torch.ones(2, 3).to(d), 1, torch.float32
            ),
            "expected scalar type Half but found Float",
        ),
        (lambda d: torch.ones(3, dtype=torch.int32).to(d).std(0), "std and var only support floating point"),
        (lambda d: torch.ones(3, dtype=torch.bool).to(d).var(), "std and var only support floating point"),
    ],
)
def test_kernel_checks_like_cpu(call, message):
    # Checks the CPU kernels make beyond the meta functions, with the same messages.
    with pytest.raises(RuntimeError, match=message):
        call("cpu")
    with pytest.raises(RuntimeError, match=message):
        call(TPU)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_integers_is_not_implemented_like_cpu(op):
    x = make((2, 3), torch.int32)
    with pytest.raises(NotImplementedError):
        getattr(x, op)(1)
    with pytest.raises(NotImplementedError):
        getattr(x.to(TPU), op)(1)
