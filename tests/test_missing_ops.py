"""Ops that had no tpu lowering, against PyTorch on the CPU: renorm, index_reduce (prod, mean,
amax, amin), nonzero_static, channel_shuffle, _batch_norm_with_update (and its functional form and
backward), segment_reduce with its backward, histogram and histogramdd. bf16 results are compared
with the CPU computing in f32 and rounding once, under a bf16 tolerance."""

from __future__ import annotations

import math
import re

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

BF16 = dict(rtol=2e-2, atol=2e-2)


pytestmark = pytest.mark.usefixtures("no_cpu_fallback")


def reference(fn, *inputs):
    """fn on the CPU; bf16 inputs computed in f32, the result rounded to bf16."""
    dtypes = [t.dtype for t in inputs if isinstance(t, torch.Tensor)]
    if torch.bfloat16 not in dtypes:
        return fn(*inputs)
    up = [t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 else t for t in inputs]
    result = fn(*up)
    if isinstance(result, tuple):
        return tuple(r.to(torch.bfloat16) if r.is_floating_point() else r for r in result)
    return result.to(torch.bfloat16)


def to_tpu(t):
    return t.to(TPU) if isinstance(t, torch.Tensor) else t


def check(fn, *inputs, **tol):
    expected = reference(fn, *inputs)
    actual = fn(*[to_tpu(t) for t in inputs])
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 for t in inputs):
        tol = dict(BF16, **tol)
    if isinstance(expected, tuple):
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, **tol)
    else:
        assert_close(actual, expected, **tol)


def check_grad(fn, *inputs, **tol):
    """f32 input gradients of fn against the CPU's, for a random upstream gradient."""
    cpu = [t.detach().clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
    dev = [t.detach().to(TPU).requires_grad_() if t.is_floating_point() else t.to(TPU) for t in inputs]
    expected, actual = fn(*cpu), fn(*dev)
    upstream = make(expected.shape, expected.dtype, low=-1, high=1)
    expected.backward(upstream)
    actual.backward(upstream.to(TPU))
    for c, d in zip(cpu, dev, strict=True):
        if c.is_floating_point():
            assert_close(d.grad, c.grad, **tol)


def check_error(fn, *inputs, prefix=None):
    """The CPU's exception type and message (its first `prefix` characters, where PyTorch's meta
    function words the same error differently)."""
    with pytest.raises(Exception) as cpu_error:
        fn(*inputs)
    message = str(cpu_error.value).split("\n")[0][:prefix]
    with pytest.raises(type(cpu_error.value), match=re.escape(message) if message else None):
        fn(*[to_tpu(t) for t in inputs])


# ---- renorm ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("p", "dim"), [(2, 0), (1, 1), (3.5, -1), (math.inf, 1)])
def test_renorm(dtype, p, dim):
    x = make((4, 5, 3), dtype)
    # maxnorm between the slices' norms, so some are scaled and some are not.
    norms = torch.linalg.vector_norm(x.float(), p, [d for d in range(3) if d != dim % 3])
    maxnorm = norms.median().item()
    check(lambda t: torch.renorm(t, p, dim, maxnorm), x)


def test_renorm_noncontiguous_and_inplace():
    x = noncontiguous(make((6, 5)))
    check(lambda t: torch.renorm(t, 2, 1, 2.0), x)
    check(lambda t: t.clone().renorm_(2, 0, 2.0), x)


def test_renorm_grad():
    check_grad(lambda t: torch.renorm(t, 2, 0, 3.0), make((4, 6)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("x", "p", "dim", "maxnorm"),
    [
        (make((3, 4)), 0, 0, 1.0),
        (make((3, 4)), 2, 0, -1.0),
        (make((4,)), 2, 0, 1.0),
        (make((3, 4)), 2, 2, 1.0),
    ],
)
def test_renorm_errors(x, p, dim, maxnorm):
    check_error(lambda t: torch.renorm(t, p, dim, maxnorm), x)


def test_renorm_integer_error():
    # The meta function names the dtype "torch.int64" where the CPU kernel says "Long".
    check_error(lambda t: torch.renorm(t, 2, 0, 1.0), make((3, 4), torch.int64), prefix=-4)


# ---- index_reduce ----


def index_reduce_inputs(dtype, dim, shape=(5, 4, 3), k=7):
    x = make(shape, dtype, low=1 if dtype == torch.int64 else 0.5, high=4 if dtype == torch.int64 else 1.5)
    source_shape = list(shape)
    source_shape[dim] = k
    source = make(
        tuple(source_shape), dtype, low=-5 if dtype == torch.int64 else -2, high=5 if dtype == torch.int64 else 2
    )
    # Repeated rows and at least one untouched row.
    index = torch.randint(0, shape[dim] - 1, (k,))
    return x, index, source


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(dtype, reduce, include_self):
    x, index, source = index_reduce_inputs(dtype, 1)
    check(lambda t, i, s: t.index_reduce(1, i, s, reduce, include_self=include_self), x, index, source)


@pytest.mark.parametrize("dim", [0, -1])
def test_index_reduce_dims_noncontiguous_inplace(dim):
    x, index, source = index_reduce_inputs(torch.float32, dim)
    check(lambda t, i, s: t.clone().index_reduce_(dim, i, s, "amax", include_self=False), x, index, source)
    check(lambda t, i, s: t.index_reduce(dim, i, s, "mean"), noncontiguous(x), index, noncontiguous(source))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax"])
def test_index_reduce_grad(reduce):
    x, index, source = index_reduce_inputs(torch.float32, 0, shape=(5, 3), k=6)
    check_grad(
        lambda t, i, s: t.index_reduce(0, i, s, reduce, include_self=True), x, index, source, rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod"])
def test_index_reduce_nan_propagates(reduce):
    source = torch.tensor([1.0, math.nan, 2.0, -1.0])
    index = torch.tensor([0, 0, 1, 2])
    for include_self in (True, False):
        check(
            lambda t, i, s, keep=include_self: t.index_reduce(0, i, s, reduce, include_self=keep),
            torch.zeros(3),
            index,
            source,
        )


def test_index_reduce_errors():
    x, index, source = index_reduce_inputs(torch.float32, 0)
    check_error(lambda t, i, s: t.index_reduce(0, i, s, "sum"), x, index, source)
    check_error(lambda t, i, s: t.index_reduce(0, i, s, "prod"), x, index.float(), source)
    check_error(lambda t, i, s: t.index_reduce(0, i, s, "prod"), x, index[:3], source)


# ---- nonzero_static ----


@pytest.mark.parametrize(
    ("dtype", "size"),
    [(torch.float32, 0), (torch.float32, 3), (torch.float32, 40), (torch.int64, 3), (torch.bool, 40)],
)
def test_nonzero_static(dtype, size):
    x = make((4, 5), dtype)
    x = torch.where(make((4, 5), torch.bool), x, torch.zeros((), dtype=dtype))
    check(lambda t: torch.nonzero_static(t, size=size, fill_value=-7), x)


def test_nonzero_static_shapes():
    check(lambda t: torch.nonzero_static(t, size=4), noncontiguous(make((3, 4), torch.bool)))
    check(lambda t: torch.nonzero_static(t, size=2, fill_value=5), torch.tensor(1.5))
    check(lambda t: torch.nonzero_static(t, size=3), make((2, 0, 3)))
    check(lambda t: torch.nonzero_static(t, size=6), make((2, 3, 2), torch.int64, low=0, high=2))


def test_nonzero_static_errors():
    # PyTorch's meta function raises the CPU's RuntimeError in other words.
    check_error(lambda t: torch.nonzero_static(t, size=-1), make((3,)), prefix=0)


# ---- channel_shuffle ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize(("shape", "groups"), [((2, 6, 3), 3), ((1, 8, 2, 3), 2)])
def test_channel_shuffle(dtype, shape, groups):
    x = make(shape, dtype)
    check(lambda t: torch.nn.functional.channel_shuffle(t, groups), x)
    check(lambda t: torch.native_channel_shuffle(t, groups), x)


def test_channel_shuffle_grad_noncontiguous():
    check(lambda t: torch.channel_shuffle(t, 2), noncontiguous(make((3, 4, 5))))
    check_grad(lambda t: torch.channel_shuffle(t, 2), make((2, 4, 3)))


@pytest.mark.parametrize(("shape", "groups"), [((2, 5, 3), 2), ((2, 4, 3), 0), ((4, 6), 2)])
def test_channel_shuffle_errors(shape, groups):
    check_error(lambda t: torch.channel_shuffle(t, groups), make(shape))


# ---- _batch_norm_with_update ----


def batch_norm_inputs(dtype, channels=4):
    x = make((3, channels, 5), dtype)
    weight, bias = make((channels,), dtype), make((channels,), dtype)
    mean, var = make((channels,), dtype, low=-1, high=1), make((channels,), dtype, low=0.5, high=2)
    return x, weight, bias, mean, var


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_with_update(dtype):
    x, weight, bias, mean, var = batch_norm_inputs(dtype)
    cpu_stats = (mean.clone(), var.clone()) if dtype == torch.float32 else (mean.float(), var.float())
    cpu_args = (x.float(), weight.float(), bias.float()) if dtype == torch.bfloat16 else (x, weight, bias)
    expected = torch.ops.aten._batch_norm_with_update(*cpu_args, *cpu_stats, 0.1, 1e-5)
    stats = (mean.to(TPU), var.to(TPU))
    actual = torch.ops.aten._batch_norm_with_update(*[t.to(TPU) for t in (x, weight, bias)], *stats, 0.1, 1e-5)
    tol = BF16 if dtype == torch.bfloat16 else {}
    assert_close(actual[0], expected[0].to(dtype), **tol)
    assert_close(actual[1], expected[1].to(dtype), **tol)  # the input's dtype, as on the CPU
    assert_close(actual[2], expected[2].to(dtype), **tol)
    assert actual[3].shape == (0,) and actual[3].dtype == torch.uint8
    for a, e in zip(stats, cpu_stats, strict=True):  # running statistics updated in place
        assert_close(a, e.to(dtype), **tol)


def test_batch_norm_with_update_without_weight():
    x, _, _, mean, var = batch_norm_inputs(torch.float32)
    op = torch.ops.aten._batch_norm_with_update
    check(lambda *t: op(t[0], None, None, t[1], t[2], 0.1, 1e-5)[:3], x, mean, var)
    check_error(lambda *t: op(t[0], None, None, t[1], t[2], 0.1, 1e-5), make((4,)), mean, var)


def test_batch_norm_with_update_mixed_dtypes():
    # bf16 input with f32 parameters and statistics: f32 statistics, as on the CPU.
    x = make((3, 4, 5), torch.bfloat16)
    params = [make((4,)), make((4,)), make((4,), low=-1, high=1), make((4,), low=0.5, high=2)]
    op = torch.ops.aten._batch_norm_with_update
    expected = op(x.float(), *[p.clone() for p in params], 0.1, 1e-5)
    actual = op(x.to(TPU), *[p.to(TPU) for p in params], 0.1, 1e-5)
    assert_close(actual[0], expected[0].to(torch.bfloat16), **BF16)
    assert_close(actual[1], expected[1], **BF16)
    assert_close(actual[2], expected[2], **BF16)


def test_batch_norm_with_update_functional():
    x, weight, bias, mean, var = batch_norm_inputs(torch.float32)
    op = torch.ops.aten._batch_norm_with_update_functional
    check(lambda *t: op(*t, 0.2, 1e-3), x, weight, bias, mean, var)


def test_batch_norm_with_update_grad():
    x, weight, bias, mean, var = batch_norm_inputs(torch.float32)

    def fn(t, w, b, m=mean, v=var):
        stats = (m.clone(), v.clone()) if t.device.type == "cpu" else (m.to(TPU), v.to(TPU))
        out = torch.ops.aten._batch_norm_with_update(t, w, b, *stats, 0.1, 1e-5)[0]
        return out * out

    check_grad(fn, x, weight, bias, rtol=1e-4, atol=1e-4)


# ---- segment_reduce ----

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


def segment_inputs(dtype, lengths, inner=(3,)):
    data = make((sum(lengths), *inner), dtype, low=0.5, high=2)
    return data, torch.tensor(lengths)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize(
    ("dtype", "form"), [(torch.float32, "lengths"), (torch.float32, "offsets"), (torch.bfloat16, "lengths")]
)
def test_segment_reduce(dtype, reduce, form):
    data, lengths = segment_inputs(dtype, [2, 0, 3, 1])
    if form == "offsets":
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o), data, offsets)
    else:
        check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, unsafe=True), data, lengths)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_segment_reduce_initial_and_axis(reduce):
    data, lengths = segment_inputs(torch.float32, [1, 0, 4])
    check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=1.5), data, lengths)
    batched = make((2, 6, 3), low=0.5, high=2)
    lengths2 = torch.tensor([[2, 4], [3, 3]])
    check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, axis=1), batched, lengths2)
    # Offsets that skip leading rows.
    check(
        lambda d, o: torch.segment_reduce(d, reduce, offsets=o), noncontiguous(make((3, 6))).T, torch.tensor([1, 2, 5])
    )


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_segment_reduce_nan_propagates(reduce):
    data = torch.tensor([1.0, math.nan, 3.0, 0.5, math.nan])
    check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n), data, torch.tensor([2, 1, 2]))


# The initial value enters only the gradient of prod.
@pytest.mark.parametrize(("reduce", "initial"), [(r, None) for r in REDUCTIONS] + [("prod", 2.0)])
def test_segment_reduce_grad(reduce, initial):
    data, lengths = segment_inputs(torch.float32, [2, 0, 3, 1])
    if reduce in ("max", "min", "prod"):
        data[1, 0] = data[0, 0]  # a tie within a segment
        data[3, 1] = 0.0  # a zero in a product
    check_grad(
        lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=initial), data, lengths, rtol=1e-4, atol=1e-5
    )


def test_segment_reduce_grad_offsets_axis():
    check_grad(
        lambda d, o: torch.segment_reduce(d, "mean", offsets=o, axis=1),
        make((2, 5)),
        torch.tensor([[0, 2, 5], [1, 3, 4]]),
    )


def test_segment_reduce_errors():
    data, lengths = segment_inputs(torch.float32, [2, 3])
    check_error(lambda d, n: torch.segment_reduce(d, "foo", lengths=n), data, lengths)
    check_error(lambda d: torch.segment_reduce(d, "sum"), data)
    check_error(lambda d, n: torch.segment_reduce(d, "sum", lengths=n), data.long(), lengths)
    batched = torch.tensor([[2, 3], [1, 4]])
    check_error(lambda d, n: torch.segment_reduce(d, "sum", lengths=n), data, batched)
    check_error(lambda d, n: torch.segment_reduce(d, "sum", offsets=n), data, batched.cumsum(1))


# ---- histogram, histogramdd ----


@pytest.mark.parametrize(
    ("dtype", "weighted", "density"),
    [
        (torch.float32, False, False),
        (torch.float32, True, False),
        (torch.float32, False, True),
        (torch.float32, True, True),
        (torch.float64, True, True),
    ],
)
def test_histogram(dtype, weighted, density):
    x = make((6, 7), dtype)
    weight = make((6, 7), dtype, low=0, high=1) if weighted else None
    check(lambda t, w: torch.histogram(t, 5, weight=w, density=density), x, weight)
    edges = torch.tensor([-2.0, -0.5, 0.0, 1.0, 2.5], dtype=dtype)
    check(lambda t, e, w: torch.histogram(t, e, weight=w, density=density), x, edges, weight)


def test_histogram_edge_cases():
    check(lambda t: torch.histogram(t, 4), noncontiguous(make((5, 6))))
    check(lambda t: torch.histogram(t, 3), torch.full((5,), 2.0))  # a one-point range
    check(lambda t: torch.histogram(t, 3), torch.empty(0))


@pytest.mark.parametrize("low,high", [(-1.0, 1.5), (0.5, 0.5), (-10.0, -5.0)])
def test_histogram_with_a_range(low, high):
    x = make((6, 7))
    check(lambda t: torch.histogram(t, 6, range=(low, high)), x)
    check(lambda t: flat(torch.histogramdd(t, [2, 3], range=[low, high, -1.0, 2.0])), make((9, 2)))


def flat(result):
    """histogramdd's (hist, [edges...]) as one tuple."""
    return (result[0], *result[1])


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(weighted, density):
    x = make((4, 5, 3))
    weight = make((4, 5), low=0, high=1) if weighted else None
    check(lambda t, w: flat(torch.histogramdd(t, [2, 3, 4], weight=w, density=density)), x, weight)
    edges = [torch.tensor([-3.0, 0.0, 3.0]), torch.tensor([-1.0, 0.5, 2.0]), torch.tensor([-2.0, -1.0, 1.0, 2.0])]
    check(lambda t, w, *e: flat(torch.histogramdd(t, list(e), weight=w, density=density)), x, weight, *edges)


def test_histogram_errors():
    x = make((10,))
    check_error(lambda t: torch.histogram(t, 0), x)
    check_error(lambda t, w: torch.histogram(t, 3, weight=w), x, make((9,)))
    check_error(lambda t, w: torch.histogram(t, 3, weight=w), x, make((10,), torch.float64))
    check_error(lambda t, e: torch.histogram(t, e), x, torch.tensor([0.0, 1.0], dtype=torch.float64))
    check_error(lambda t: torch.histogramdd(t, [3]), x)
    check_error(lambda t: torch.histogramdd(t, [3, 0]), make((5, 2)))
    check_error(lambda t: torch.histogramdd(t, [3, 3], range=[0.0, 1.0]), make((5, 2)))
    check_error(lambda t: torch.histogramdd(t, [3, 3], range=[0.0, 1.0, 2.0, 1.0]), make((5, 2)))
    # The CPU kernel's dtype error, raised here by the meta kernel, reads as an unsupported op.
    check_error(lambda t: torch.histogram(t, 3), make((10,), torch.int64), prefix=0)
