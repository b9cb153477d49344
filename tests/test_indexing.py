"""Indexing and tensor manipulation (cat/stack, flip, roll, tril/triu, index, index_put,
index_select, gather, scatter*, take, put, index_add/copy/fill) against PyTorch on the CPU.

Indices are in range except in the out-of-range tests: on the device they are data. The device
checks them with the op; debug mode raises the CPU's error at the op, the other modes at the next
synchronization, as CUDA reports a device-side assert (csrc/aten/device_checks.h). ``x[mask] = values`` cannot check that ``values`` has one entry
per selected element.
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

ALL_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]
NUMERIC_DTYPES = [d for d in ALL_DTYPES if d != torch.bool]


def tpu(t):
    return t.to(TPU) if isinstance(t, torch.Tensor) else t


def same_on_both(fn, *args, **tolerance):
    """Runs ``fn`` on CPU copies and on tpu copies of ``args`` and compares the results (and the
    in-place-modified first argument)."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = [tpu(a) for a in args]
    expected, got = fn(*cpu_args), fn(*tpu_args)
    if isinstance(expected, (tuple, list)):
        for g, e in zip(got, expected, strict=False):
            assert_close(g, e, **tolerance)
    else:
        assert_close(got, expected, **tolerance)
    if isinstance(args[0], torch.Tensor):
        assert_close(tpu_args[0], cpu_args[0], **tolerance)
    return got


def both_raise(fn, exception, fragment, *args):
    with pytest.raises(exception, match=fragment):
        fn(*args)
    with pytest.raises(exception, match=fragment):
        fn(*[tpu(a) for a in args])


def unique_index(shape, size, dim):
    """An int64 index of `shape` whose entries along `dim` are distinct values below `size`."""
    order = torch.rand(shape[:dim] + (size,) + shape[dim + 1 :]).argsort(dim)
    return order.narrow(dim, 0, shape[dim]).contiguous()


# ---- cat / stack and the views around them ----


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dtype, dim):
    parts = [make((3, 4, 2), dtype), make((3, 4, 2), dtype)]
    sizes = list(parts[0].shape)
    sizes[dim] = 5
    parts.append(make(tuple(sizes), dtype))
    same_on_both(lambda *p: torch.cat(p, dim), *parts)


@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.int32, torch.float16),
        (torch.bool, torch.int64),
        (torch.int32, torch.int64),
        (torch.uint8, torch.int8),
        (torch.bool, torch.float32),
        (torch.bfloat16, torch.float16),
    ],
    ids=str,
)
def test_cat_promotes(dtypes):
    parts = [make((2, 3), dtypes[0]), make((4, 3), dtypes[1])]
    same_on_both(lambda a, b: torch.cat([a, b]), *parts)


def test_cat_skips_legacy_empty():
    same_on_both(lambda a, e, b: torch.cat([a, e, b], 1), make((2, 3)), torch.empty(0), make((2, 1)))
    same_on_both(lambda a, e: torch.cat([e, a, e]), make((2, 3)), torch.empty(0, 3))


def test_cat_noncontiguous_and_out():
    a, b = make((3, 4)), make((3, 4))
    got = torch.cat([noncontiguous(a.to(TPU)), noncontiguous(b.to(TPU))], 1)
    assert_close(got, torch.cat([a, b], 1))
    out = make((6, 4), torch.float64).to(TPU)  # out= of a wider dtype
    result = torch.cat([a.to(TPU), b.to(TPU)], out=out)
    assert result is out
    assert_close(out, torch.cat([a, b]).double())
    out = torch.empty(0).to(TPU)  # resized like the CPU's out=
    torch.cat([a.to(TPU), b.to(TPU)], -1, out=out)
    assert_close(out, torch.cat([a, b], -1))


def test_stack_family():
    a, b = make((3, 4)), make((3, 4))
    for dim in [0, 1, 2, -1]:
        same_on_both(lambda x, y, dim=dim: torch.stack([x, y], dim), a, b)
    for op in [torch.hstack, torch.vstack, torch.dstack, torch.column_stack]:
        same_on_both(lambda x, y, op=op: op([x, y]), a, b)
    out = torch.empty(0).to(TPU)
    torch.stack([a.to(TPU), b.to(TPU)], 1, out=out)
    assert_close(out, torch.stack([a, b], 1))


def test_split_chunk_narrow_roundtrip():
    x = make((6, 5))
    same_on_both(lambda t: torch.cat(torch.split(t, [1, 3, 2]), 0), x)
    same_on_both(lambda t: torch.cat(list(reversed(t.chunk(3, 1))), 1), x)
    same_on_both(lambda t: torch.cat([t.narrow(0, 4, 2), t.narrow(0, 0, 4)]), x)
    same_on_both(lambda t: torch.stack([t[None].squeeze(0), t.unsqueeze(2).squeeze(-1)]), x)
    same_on_both(lambda t: torch.cat(t.unbind(1)), x)


def test_cat_errors():
    both_raise(
        lambda a, b: torch.cat([a, b]),
        RuntimeError,
        "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1",
        make((2, 3)),
        make((2, 4)),
    )
    both_raise(
        lambda a: torch.cat([a]),
        RuntimeError,
        r"zero-dimensional tensor \(at position 0\) cannot be concatenated",
        torch.tensor(1.0),
    )
    both_raise(lambda a: torch.cat([a], 2), IndexError, "Dimension out of range", make((2, 3)))
    both_raise(
        lambda a, b: torch.stack([a, b]),
        RuntimeError,
        r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[3, 2\] at entry 1",
        make((2, 3)),
        make((3, 2)),
    )


# ---- flip / roll / tril / triu ----


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_flip(dtype):
    x = make((3, 4, 5), dtype)
    for dims in [(-1,), (0, 2), ()]:
        same_on_both(lambda t, dims=dims: t.flip(dims), x)
    assert_close(noncontiguous(x.to(TPU)).flip(1), x.flip(1))
    same_on_both(lambda t: t.flip(0), torch.tensor(2.5))  # 0-d
    same_on_both(lambda t: torch.rot90(t, 1, (0, 2)), x)
    same_on_both(lambda t: torch.fliplr(t), x)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roll(dtype):
    x = make((4, 5), dtype)
    for shifts, dims in [(-2, 1), (7, -1), ((1, -3), (0, 1)), (-11, None)]:
        same_on_both(lambda t, shifts=shifts, dims=dims: t.roll(shifts, dims), x)
    assert_close(noncontiguous(x.to(TPU)).roll(2, 1), x.roll(2, 1))
    same_on_both(lambda t: t.roll(1), torch.tensor(2.5))  # 0-d


def test_flip_roll_errors():
    both_raise(lambda t: t.roll((1, 2), (0,)), RuntimeError, "shifts and dimensions must align", make((2, 3)))
    both_raise(lambda t: t.roll(1, 2), IndexError, "Dimension out of range", make((2, 3)))
    # PyTorch's meta function words the repeated-dim error differently from the CPU kernel.
    both_raise(lambda t: t.flip(0, 0), RuntimeError, None, make((2, 3)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["tril", "triu"])
def test_triangle(dtype, op):
    for shape, diagonal in [((4, 4), 0), ((3, 5), -2), ((3, 5), 7), ((2, 5, 3), 1)]:
        same_on_both(lambda t, diagonal=diagonal: getattr(t, op)(diagonal), make(shape, dtype))
    x = make((4, 3), dtype)
    same_on_both(lambda t: getattr(t, op + "_")(-1), x)  # in place
    out = torch.empty(0, dtype=dtype).to(TPU)
    getattr(torch, op)(x.to(TPU), 1, out=out)
    assert_close(out, getattr(torch, op)(x, 1))
    assert_close(getattr(noncontiguous(x.to(TPU)), op)(), getattr(x, op)())


def test_triangle_errors():
    both_raise(torch.tril, RuntimeError, "tril: input tensor must have at least 2 dimensions", make((3,)))
    both_raise(torch.triu, RuntimeError, "triu: input tensor must have at least 2 dimensions", make((3,)))


# ---- gathers: index_select, gather, take, x[idx] ----


@pytest.mark.parametrize(
    "dtype, index_dtype",
    [(d, torch.int64) for d in ALL_DTYPES] + [(torch.float32, torch.int32), (torch.bool, torch.int32)],
)
def test_index_select(dtype, index_dtype):
    x = make((4, 5, 3), dtype)
    for dim in [0, -1]:
        index = torch.randint(0, x.shape[dim], (7,), dtype=index_dtype)
        same_on_both(lambda t, i, dim=dim: t.index_select(dim, i), x, index)
    same_on_both(lambda t, i: t.index_select(1, i), x, torch.tensor(2, dtype=index_dtype))  # 0-d index
    same_on_both(lambda t, i: t.index_select(0, i), torch.tensor(1.5), torch.tensor([0]))  # 0-d self
    index = torch.tensor([4, 0, 4], dtype=index_dtype)
    assert_close(noncontiguous(x.to(TPU)).index_select(1, noncontiguous(index.to(TPU))), x.index_select(1, index))
    out = torch.empty(0, dtype=dtype).to(TPU)
    torch.index_select(x.to(TPU), 1, index.to(TPU), out=out)
    assert_close(out, x.index_select(1, index))


def test_index_select_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i: t.index_select(0, i),
        IndexError,
        r"index_select\(\): Index is supposed to be a vector",
        x,
        torch.zeros(1, 1, dtype=torch.long),
    )
    both_raise(
        lambda t, i: t.index_select(0, i),
        RuntimeError,
        r"index_select\(\): Expected dtype int32 or int64 for index",
        x,
        torch.zeros(1),
    )
    # PyTorch's meta function raises its own IndexError for a bad dim.
    both_raise(lambda t, i: t.index_select(2, i), IndexError, None, x, torch.zeros(1, dtype=torch.long))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather(dtype):
    x = make((4, 5, 3), dtype)
    for dim in [0, 1, -1]:
        shape = [3, 4, 2]
        shape[dim] = 6
        index = torch.randint(0, x.shape[dim], shape)
        same_on_both(lambda t, i, dim=dim: t.gather(dim, i), x, index)
    index = torch.randint(0, 5, (4, 2, 3), dtype=torch.int32)
    same_on_both(lambda t, i: torch.gather(t, 1, i, sparse_grad=True), x, index)
    rows = index.long().clamp(0, 3)
    assert_close(noncontiguous(x.to(TPU)).gather(0, rows.to(TPU)), x.gather(0, rows))
    same_on_both(lambda t, i: t.gather(0, i), torch.tensor(1.5), torch.tensor(0))  # 0-d
    out = torch.empty(0, dtype=dtype).to(TPU)
    torch.gather(x.to(TPU), 1, index.to(TPU), out=out)
    assert_close(out, x.gather(1, index))


def test_gather_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i: t.gather(0, i),
        RuntimeError,
        "Index tensor must have the same number of dimensions as input tensor",
        x,
        torch.zeros(1, dtype=torch.long),
    )
    both_raise(
        lambda t, i: t.gather(1, i),
        RuntimeError,
        r"Size does not match at dimension 0 expected index \[3, 1\] to be no larger than self \[2, 3\]",
        x,
        torch.zeros(3, 1, dtype=torch.long),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_take(dtype):
    x = make((3, 4), dtype)
    index = torch.randint(-12, 12, (2, 5))  # negative indices count from the end
    same_on_both(torch.take, x, index)
    assert_close(noncontiguous(x.to(TPU)).take(index.to(TPU)), x.take(index))
    both_raise(torch.take, RuntimeError, r"take\(\): Expected a long tensor for index", x, index.int())


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_advanced_index(dtype):
    x = make((4, 5, 6), dtype)
    i = torch.randint(-4, 4, (3,))  # negative indices wrap, as on the CPU
    j = torch.randint(-5, 5, (2, 1))
    k = torch.randint(0, 6, (3,), dtype=torch.int32)
    cases = [
        lambda t, i, j, k: t[i],
        lambda t, i, j, k: t[:, j],
        lambda t, i, j, k: t[i, j],  # broadcast to (2, 3)
        lambda t, i, j, k: t[:, j, k],  # adjacent: the index dims stay in place
        lambda t, i, j, k: t[i, :, k],  # not adjacent: the index dims go first
        lambda t, i, j, k: t[..., k],
        lambda t, i, j, k: t[None, i, 1:4],
        lambda t, i, j, k: t[i, 2],
        lambda t, i, j, k: t[i, j, k],
    ]
    if dtype not in (torch.float32, torch.int64):
        cases = cases[2:5]  # the layouts do not depend on the dtype: the element type is enough
    for case in cases:
        same_on_both(case, x, i, j, k)
    assert_close(noncontiguous(x.to(TPU))[:, j.to(TPU)], x[:, j])


def test_advanced_index_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i: t[i],
        IndexError,
        "tensors used as indices must be long, int, byte or bool tensors",
        x,
        torch.zeros(1),
    )
    both_raise(
        lambda t, i, j: t[i, j],
        IndexError,
        r"shape mismatch: indexing tensors could not be broadcast together with shapes \[2\], \[3\]",
        x,
        torch.zeros(2, dtype=torch.long),
        torch.zeros(3, dtype=torch.long),
    )
    both_raise(
        lambda t, i: t[i, i, i],
        IndexError,
        "too many indices for tensor of dimension 2",
        x,
        torch.zeros(1, dtype=torch.long),
    )


# ---- scatters: index_put, put, index_add/copy/fill, scatter* ----


def assign(t, index, value):
    t[index] = value
    return t


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_put(dtype):
    x = make((4, 5, 3), dtype)
    i = unique_index((3,), 4, 0) - 4  # distinct, negative
    j = unique_index((2, 1), 5, 0)
    scalar = make((1,), dtype).item()
    same_on_both(lambda t, i: assign(t, i, scalar), x, i)
    same_on_both(lambda t, i, v: assign(t, i, v), x, i, make((3, 5, 3), dtype))
    same_on_both(lambda t, j, v: assign(t, (slice(None), j.squeeze(1)), v), x, j, make((3,), dtype))  # broadcast
    same_on_both(lambda t, i, j, v: assign(t, (i, j, slice(None)), v), x, i, j, make((2, 3, 3), dtype))
    same_on_both(lambda t, i, v: assign(t, (i, slice(None), 1), v), x, i, make((3, 5), dtype))
    same_on_both(lambda t, i, v: t.index_put((i,), v), x, i, make((5, 3), dtype))  # functional


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_index_put_accumulate(dtype):
    x = make((4, 3), dtype)
    i = torch.tensor([0, 2, 0, 0, -1])  # duplicates add up
    values = make((5, 3), dtype)
    tolerance = dict(rtol=2e-2, atol=5e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    same_on_both(lambda t, i, v: t.index_put_((i,), v, accumulate=True), x, i, values, **tolerance)
    same_on_both(
        lambda t, i, j, v: t.index_put_((i, j), v, accumulate=True),
        x,
        i,
        torch.tensor([1, 1, 1, 2, 1]),
        make((5,), dtype),
        **tolerance,
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_masked_index_put(dtype):
    # The count of selected elements is data; the lowering never needs it on the host.
    x = make((4, 5), dtype)
    rows = torch.tensor([True, False, True, True])
    mask = make((4, 5), torch.bool)
    count = int(mask.sum())
    scalar = make((1,), dtype).item()
    same_on_both(lambda t, m: assign(t, m, scalar), x, mask)
    same_on_both(lambda t, m, v: assign(t, m, v), x, mask, make((count,), dtype))
    same_on_both(lambda t, m, v: assign(t, m, v), x, rows, make((3, 5), dtype))
    same_on_both(lambda t, m, v: assign(t, m, v), x, rows, make((5,), dtype))
    same_on_both(lambda t, m, v: assign(t, (slice(None), m), v), make((2, 4, 5), dtype), mask, make((2, count), dtype))
    if dtype != torch.bool:
        same_on_both(lambda t, m, v: t.index_put_((m,), v, accumulate=True), x, mask, make((count,), dtype))


def test_index_put_errors():
    both_raise(
        lambda t, i, v: t.index_put_((i,), v),
        RuntimeError,
        "Index put requires the source and destination dtypes match, got Half for the destination and Float for the source",
        make((3,), torch.float16),
        torch.tensor([0]),
        make((1,)),
    )
    # Values that do not broadcast to the indexed rows [2, 3] (x[i] = v strips leading 1s first).
    for value_shape in [(3, 3), (1, 2, 3), (2, 2)]:
        both_raise(
            lambda t, i, v: t.index_put_((i,), v),
            RuntimeError,
            re.escape(
                f"shape mismatch: value tensor of shape {list(value_shape)} cannot be broadcast to "
                "indexing result of shape [2, 3]"
            ),
            make((4, 3)),
            torch.tensor([0, 2]),
            make(value_shape),
        )
    for dtype in [torch.float32, torch.int16, torch.int8]:
        both_raise(
            lambda t, i, v: t.index_put_((i,), v),
            IndexError,
            "tensors used as indices must be long, int, byte or bool tensors",
            make((4,)),
            torch.tensor([0, 2]).to(dtype),
            make((1,)),
        )


@pytest.mark.parametrize("shape, mask_shape", [((2,), (3,)), ((2, 3), (2, 2)), ((2, 3), (3,))])
def test_index_put_with_a_mask_of_another_shape_raises_the_cpu_error(shape, mask_shape):
    # Checked at the call (shapes, not values), with the CPU's IndexError naming both shapes.
    mask = torch.rand(mask_shape) < 0.5
    with pytest.raises(IndexError) as expected:
        torch.zeros(shape).index_put_((mask,), torch.tensor(1.0))
    for mode in ["debug", "strict", "defer_and_fuse"]:
        with torch_tpu.execution_mode(mode):
            with pytest.raises(IndexError) as raised:
                torch.zeros(shape, device=TPU).index_put_((mask.to(TPU),), torch.tensor(1.0, device=TPU))
        assert str(raised.value).splitlines()[0] == str(expected.value).splitlines()[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_put(dtype):
    x = make((3, 4), dtype)
    index = unique_index((5,), 12, 0) - 6  # negative indices count from the end
    same_on_both(lambda t, i, v: t.put_(i, v), x, index, make((5,), dtype))
    same_on_both(lambda t, i, v: t.put(i.view(1, 5), v.view(5, 1)), x, index, make((5,), dtype))
    if dtype != torch.bool:
        dup = torch.tensor([1, 1, -11, 5])
        same_on_both(lambda t, i, v: t.put_(i, v, accumulate=True), x, dup, make((4,), dtype))


def test_put_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i, v: t.put_(i, v),
        RuntimeError,
        r"put_\(\): Expected a long tensor for index, but got Int",
        x,
        torch.zeros(2, dtype=torch.int32),
        make((2,)),
    )
    both_raise(
        lambda t, i, v: t.put_(i, v),
        RuntimeError,
        r"put_\(\): self and source expected to have the same dtype, but got self.dtype = Float and source.dtype = Double",
        x,
        torch.zeros(2, dtype=torch.long),
        make((2,), torch.float64),
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_add_copy_fill(dtype):
    x = make((4, 5), dtype)
    scalar = make((1,), dtype).item()
    tolerance = dict(rtol=2e-2, atol=5e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    for dim in [0, -1]:
        n = x.shape[dim]
        dup = torch.randint(0, n, (6,))
        source_shape = list(x.shape)
        source_shape[dim] = 6
        source = make(tuple(source_shape), dtype)
        same_on_both(lambda t, i, s, dim=dim: t.index_add(dim, i, s), x, dup, source, **tolerance)
        if dtype != torch.bool:
            same_on_both(lambda t, i, s, dim=dim: t.index_add_(dim, i, s, alpha=3), x, dup, source, **tolerance)
        unique = unique_index((3,), n, 0)
        source_shape[dim] = 3
        same_on_both(lambda t, i, s, dim=dim: t.index_copy(dim, i, s), x, unique, make(tuple(source_shape), dtype))
        same_on_both(lambda t, i, dim=dim: t.index_fill_(dim, i, scalar), x, dup)
        same_on_both(lambda t, i, dim=dim: t.index_fill_(dim, i, scalar), x, dup - n)  # from the end
        same_on_both(lambda t, i, v, dim=dim: t.index_fill(dim, i, v), x, dup, make((), dtype))  # 0-d tensor value
    same_on_both(lambda t, i, s: t.index_add_(0, i, s), make((), dtype), torch.tensor([0]), make((), dtype))  # 0-d
    assert_close(
        noncontiguous(x.to(TPU)).index_fill(1, torch.tensor([0, 3]).to(TPU), 0),
        x.index_fill(1, torch.tensor([0, 3]), 0),
    )


def test_index_add_copy_fill_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i: t.index_fill_(0, i, 1.0),
        IndexError,
        r"index_fill_\(\): Expected dtype int64 for index",
        x,
        torch.zeros(2, dtype=torch.int32),
    )
    both_raise(
        lambda t, i, s: t.index_add(0, i, s),
        RuntimeError,
        r"source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = \[2, 3\] source.shape = \[2, 4\]",
        x,
        torch.zeros(2, dtype=torch.long),
        make((2, 4)),
    )
    both_raise(
        lambda t, i, s: t.index_copy(0, i, s),
        IndexError,
        r"index_copy_\(\): Number of indices \(2\) should be equal to source.size\(dim\) \(1\)",
        x,
        torch.zeros(2, dtype=torch.long),
        make((1, 3)),
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter(dtype):
    x = make((4, 5), dtype)
    index = unique_index((3, 4), 5, 1)  # distinct targets: scatter with duplicates is unordered
    src = make((4, 6), dtype)  # larger than index: only the index-shaped corner is used
    same_on_both(lambda t, i, s: t.scatter(1, i, s), x, index, src)
    scalar = make((1,), dtype).item()
    same_on_both(lambda t, i: t.scatter_(1, i, scalar), x, index)
    index0 = unique_index((3, 5), 4, 0)
    same_on_both(lambda t, i, s: t.scatter_(0, i, s), x, index0, make((3, 5), dtype))
    same_on_both(lambda t, i, s: torch.scatter(t, -1, i.int(), s), x, index, src)  # int32 index
    same_on_both(lambda t, i, s: t.scatter(0, i, s), make((), dtype), torch.tensor(0), make((), dtype))  # 0-d
    assert_close(noncontiguous(x.to(TPU)).scatter(1, index.to(TPU), src.to(TPU)), x.scatter(1, index, src))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter_add(dtype):
    x = make((4, 5), dtype)
    index = torch.randint(0, 5, (4, 7))
    src = make((4, 7), dtype)
    tolerance = dict(rtol=2e-2, atol=5e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    same_on_both(lambda t, i, s: t.scatter_add(1, i, s), x, index, src, **tolerance)
    same_on_both(
        lambda t, i, s: t.scatter_add_(0, i, s), x, torch.randint(0, 4, (6, 5)), make((6, 5), dtype), **tolerance
    )


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce(dtype, reduce):
    x = make((4, 5), dtype, -3, 3)
    index = torch.randint(0, 5, (4, 3))
    same_on_both(
        lambda t, i, s: t.scatter(1, i, s, reduce=reduce), x, index, make((4, 3), dtype, -3, 3), rtol=1e-5, atol=1e-5
    )
    same_on_both(lambda t, i: t.scatter_(1, i, 2, reduce=reduce), x, index)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    low, high = (-2, 3) if reduce == "prod" else (None, None)
    x = make((4, 5), dtype, low, high)
    index = torch.randint(0, 5, (4, 6))
    src = make((4, 6), dtype, low, high)
    tolerance = dict(rtol=2e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    if not dtype.is_floating_point:
        tolerance = {}
    same_on_both(
        lambda t, i, s: t.scatter_reduce(1, i, s, reduce, include_self=include_self), x, index, src, **tolerance
    )


def test_scatter_errors():
    x = make((2, 3))
    both_raise(
        lambda t, i, s: t.scatter(0, i, s),
        RuntimeError,
        r"scatter\(\): Expected self.dtype to be equal to src.dtype",
        x,
        torch.zeros(1, 1, dtype=torch.long),
        make((1, 1), torch.float64),
    )
    both_raise(
        lambda t, i, s: t.scatter_reduce(0, i, s, "foo"),
        RuntimeError,
        "reduce argument must be either sum, prod, mean, amax or amin, got foo",
        x,
        torch.zeros(1, 1, dtype=torch.long),
        make((1, 1)),
    )
    both_raise(
        lambda t, i, s: t.scatter_reduce(0, i, s, "mean"),
        NotImplementedError,
        "not (currently )?implemented",
        x.bool(),
        torch.zeros(1, 1, dtype=torch.long),
        make((1, 1), torch.bool),
    )


# ---- masked_scatter ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("mask_shape", [(4, 5), (5,), (4, 1), ()])
def test_masked_scatter(dtype, mask_shape):
    self_, mask = make((4, 5), dtype), make(mask_shape, torch.bool)
    source = make((4, 6), dtype)  # more elements than the mask can select
    expected = self_.masked_scatter(mask, source)
    assert_close(self_.to(TPU).masked_scatter(mask.to(TPU), source.to(TPU)), expected)
    inplace = noncontiguous(self_.to(TPU))
    inplace.masked_scatter_(mask.to(TPU), source.to(TPU))
    assert_close(inplace, expected)


def test_masked_scatter_exact_size_source_and_grad():
    x, mask = make((3, 4)), make((3, 4), torch.bool)
    source = make((int(mask.sum()),)).requires_grad_(True)
    tpu_source = source.detach().to(TPU).requires_grad_(True)
    expected = x.masked_scatter(mask, source)
    got = x.to(TPU).masked_scatter(mask.to(TPU), tpu_source)
    assert_close(got.detach(), expected.detach())
    grad = make((3, 4))
    expected.backward(grad)
    got.backward(grad.to(TPU))
    assert_close(tpu_source.grad, source.grad)


def test_cpu_index_tensors_are_accepted_as_on_cuda():
    """Advanced indexing with index tensors on the CPU (Hugging Face's assisted decoding does
    t[:, torch.tensor([0])]): CUDA copies them to the device, and so does tpu."""
    x = make((4, 5))
    rows, columns, mask = torch.tensor([2, 0, 2]), torch.tensor([1, 4]), torch.tensor([True, False, True, True])
    for fn in [
        lambda t: t[:, columns],
        lambda t: t[rows],
        lambda t: t[rows, columns[:1]],
        lambda t: t[mask],
    ]:
        leaf_cpu, leaf_tpu = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
        expected, got = fn(leaf_cpu), fn(leaf_tpu)
        assert_close(got, expected)
        grad = make(expected.shape)
        expected.backward(grad)
        got.backward(grad.to(TPU))
        assert_close(leaf_tpu.grad, leaf_cpu.grad)
    values = make((3, 5))
    same_on_both(lambda t, v: t.index_put_((rows,), v, accumulate=True), x, values)
    same_on_both(lambda t: t.index_put_((rows, columns[:1]), torch.tensor(7.0)), x)
    # Values (not indices) must still be on the tensor's device, as on CUDA.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x.to(TPU).index_put_((rows,), values)


# Out-of-range indices: debug mode raises the CPU's error at the op. The CPU's
# wording depends on its kernel's path (index_select along dim 1 of a matrix has another), so the
# ops index a vector, or a matrix through two index tensors.
OUT_OF_RANGE_OPS = {
    "index": lambda x, i: x.view(1, 5)[torch.zeros_like(i), i],
    "index_put_": lambda x, i: x.index_put_((i,), torch.tensor(9.0)),
    "index_select": lambda x, i: x.index_select(0, i),
    "embedding": lambda x, i: torch.nn.functional.embedding(i, x.view(5, 1)),
    "gather": lambda x, i: x.gather(0, i),
    "scatter_": lambda x, i: x.scatter_(0, i, 9.0),
    "scatter_add_": lambda x, i: x.scatter_add_(0, i, torch.ones(i.numel(), device=x.device)),
    "index_add_": lambda x, i: x.index_add_(0, i, torch.ones(i.numel(), device=x.device)),
    "index_copy_": lambda x, i: x.index_copy_(0, i, torch.ones(i.numel(), device=x.device)),
    "index_fill_": lambda x, i: x.index_fill_(0, i, 9.0),
    "take": lambda x, i: x.take(i),
    "put_": lambda x, i: x.put_(i, torch.ones(i.numel(), device=x.device)),
    # Class targets (3 samples of 5 classes) and embedding_bag's indices (one bag of 3 of 5 rows).
    "nll_loss": lambda x, i: torch.nn.functional.nll_loss(x.view(1, 5).expand(3, 5), i),
    "cross_entropy": lambda x, i: torch.nn.functional.cross_entropy(x.view(1, 5).expand(3, 5), i, reduction="none"),
    "nll_loss2d": lambda x, i: torch.nn.functional.nll_loss(x.view(1, 5, 1, 1).expand(1, 5, 3, 1), i.view(1, 3, 1)),
    "multi_margin_loss": lambda x, i: torch.nn.functional.multi_margin_loss(x.view(1, 5).expand(3, 5), i),
    # A sample's target classes, ended by -1 (which is never out of range); the CPU checks them all.
    "multilabel_margin_loss": lambda x, i: torch.nn.functional.multilabel_margin_loss(
        x, torch.cat([i, i.new_full((2,), -1)])
    ),
    # Indices into each output plane of 5 (a plane of 5x1: max_unpool1d is max_unpool2d's).
    "max_unpool1d": lambda x, i: torch.nn.functional.max_unpool1d(
        x[:3].view(1, 1, 3), i.view(1, 1, 3), 2, output_size=(5,)
    ),
    "embedding_bag": lambda x, i: torch.nn.functional.embedding_bag(i, x.view(5, 1), i.new_zeros(1)),
    "embedding_bag_max": lambda x, i: torch.nn.functional.embedding_bag(i, x.view(5, 1), i.new_zeros(1), mode="max"),
}


@pytest.mark.parametrize("bad", [5, -1, -6, 12])
@pytest.mark.parametrize("op", list(OUT_OF_RANGE_OPS))
def test_debug_mode_raises_the_cpu_error_for_an_index_out_of_range(op, bad):
    # Indices into 5 elements, one of them `bad`: some ops accept a negative one (it counts from
    # the end), others refuse it. Indices are distinct, so index_copy_ and put_ are deterministic.
    x = make((5,))
    index = torch.randperm(5)[:3]
    index[torch.randint(0, 3, ()).item()] = bad
    fn = OUT_OF_RANGE_OPS[op]
    try:
        expected = fn(x.clone(), index)
    except (IndexError, RuntimeError) as error:
        expected = error
    with torch_tpu.execution_mode("debug"):
        if isinstance(expected, Exception):
            with pytest.raises(type(expected)) as raised:
                fn(x.to(TPU), index.to(TPU))
            assert str(raised.value).splitlines()[0] == str(expected).splitlines()[0]
        else:
            assert_close(fn(x.to(TPU), index.to(TPU)), expected)


def test_debug_mode_raises_before_an_in_place_op_writes():
    # Nothing is lost: the CPU raises before it writes, and so does debug mode.
    x = make((5,))
    target = x.to(TPU)
    with torch_tpu.execution_mode("debug"):
        with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
            target.index_put_((torch.tensor([1, 7], device=TPU),), torch.tensor(9.0, device=TPU))
        with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 5"):
            target.scatter_(0, torch.tensor([0, 5], device=TPU), 9.0)
    assert_close(target, x)


def test_strict_mode_reads_back_only_the_index_check():
    # The op waits for nothing: it reads nothing back. The next synchronization reads its
    # device-side check, two i64 (the first index out of range and its position), and not the
    # index tensor.
    x, index = make((3, 5)).to(TPU), torch.tensor([4, 0, 2, 1, 3, 0, 2]).to(TPU)
    with torch_tpu.execution_mode("strict"):
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()
        result = x.index_select(1, index)
        assert torch_tpu.metrics.snapshot()["transfers_to_host"] == before["transfers_to_host"]
        torch.tpu.synchronize()
        after = torch_tpu.metrics.snapshot()
        assert after["transfers_to_host"] - before["transfers_to_host"] == 1
        assert after["bytes_to_host"] - before["bytes_to_host"] == 16
    assert_close(result, x.cpu().index_select(1, index.cpu()))


def first_line(error):
    return str(error).splitlines()[0]


def cpu_outcome(fn, x, index):
    try:
        return fn(x.clone(), index)
    except (IndexError, RuntimeError) as error:
        return error


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("bad", [5, -1, -6, 12])
@pytest.mark.parametrize("op", list(OUT_OF_RANGE_OPS))
def test_an_index_out_of_range_raises_the_cpu_error_at_the_next_host_read(op, bad, mode):
    # The op itself records and returns; the host read of its result raises what the CPU raised
    # at the op, naming the op's line. An index the CPU accepts (a negative one, for some ops)
    # gives the CPU's result.
    x = make((5,))
    index = torch.randperm(5)[:3]
    index[torch.randint(0, 3, ()).item()] = bad
    fn = OUT_OF_RANGE_OPS[op]
    expected = cpu_outcome(fn, x, index)
    with torch_tpu.execution_mode(mode):
        target = x.to(TPU)
        result = fn(target, index.to(TPU))
        if isinstance(expected, Exception):
            with pytest.raises(type(expected)) as raised:
                result.cpu()
            assert first_line(raised.value) == first_line(expected)
            # It names the op and the Python line that recorded it.
            assert re.search(r"device-side check of aten::\w+\S* at \S+\.py:\d+", str(raised.value))
            torch.tpu.synchronize()  # the check was reported once
        else:
            assert_close(result, expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_synchronize_and_unrelated_host_reads_report_a_failed_index_check(mode):
    # As with CUDA's device-side asserts, the error comes at whatever synchronizes next.
    with torch_tpu.execution_mode(mode):
        x = make((4, 3)).to(TPU)
        rows = x.index_select(0, torch.tensor([0, 4], device=TPU))  # noqa: F841
        with pytest.raises(IndexError, match="index out of range in self"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()  # reported, then done with
        y = x.index_select(0, torch.tensor([3, 1], device=TPU))
        x.gather(1, torch.tensor([[0, 3]], device=TPU))
        with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
            (x.sum() * 2).item()
        assert_close(y, x.cpu().index_select(0, torch.tensor([3, 1])))


def test_a_failed_check_among_many_unsynchronized_ones_waits_for_the_synchronization():
    # Past 1024 unread checks, recording reads the launched ones back, but raises nothing itself:
    # the failure waits for the next synchronization, which raises it.
    with torch_tpu.execution_mode("strict"):
        x = make((4, 3)).to(TPU)
        x.index_select(0, torch.tensor([9], device=TPU))
        good = torch.tensor([1, 2], device=TPU)
        for _ in range(1100):
            x.index_select(0, good)
        with pytest.raises(IndexError, match="index out of range in self"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_loss_checks_every_target_but_its_ignored_one(mode):
    # The CPU skips ignore_index, in range or not; the check takes it as a runtime scalar, so a new
    # one compiles nothing new.
    x = make((4, 5))
    with torch_tpu.execution_mode(mode):
        for step, ignore_index in enumerate((-100, 12, 7)):
            target = torch.tensor([1, ignore_index, 4, 0])
            expected = torch.nn.functional.cross_entropy(x, target, ignore_index=ignore_index)
            loss = torch.nn.functional.cross_entropy(x.to(TPU), target.to(TPU), ignore_index=ignore_index)
            assert_close(loss, expected)
            if step == 1:
                compiles = torch_tpu.metrics.snapshot()["compiles"]
        assert torch_tpu.metrics.snapshot()["compiles"] == compiles
        loss = torch.nn.functional.cross_entropy(x.to(TPU), torch.tensor([1, 12, 4, 0], device=TPU), ignore_index=7)
        with pytest.raises(IndexError, match="Target 12 is out of bounds."):
            loss.item()


def test_in_range_and_empty_indices_raise_nothing():
    with torch_tpu.execution_mode("strict"):
        x = make((4, 3)).to(TPU)
        x.index_select(0, torch.tensor([], dtype=torch.long, device=TPU))
        x[torch.tensor([-4, 3], dtype=torch.int32, device=TPU)]
        x.take(torch.tensor([[0, 11], [-12, 5]], device=TPU))
        torch.tpu.synchronize()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_repeated_step_with_index_checks_compiles_nothing(mode):
    # Fused mode's cuts settle over the first steps (its loop detector); after them, nothing new.
    x = make((6, 4)).to(TPU)
    with torch_tpu.execution_mode(mode):
        for step in range(6):
            index = torch.randint(0, 6, (3,)).to(TPU)
            total = x.index_select(0, index).sum() + x.gather(1, index.view(3, 1) % 4).sum()
            total.item()
            if step == 2:
                compiles = torch_tpu.metrics.snapshot()["compiles"]
        assert torch_tpu.metrics.snapshot()["compiles"] == compiles
