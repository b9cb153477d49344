"""Views, aliasing and writes through views, compared with PyTorch on the CPU.

Views are metadata-only on the tpu device exactly as on the CPU: every view shares its base's
storage, has the CPU's sizes, strides and storage offset, and sees every write into the storage.
"""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check_view(fn, cpu_input: torch.Tensor, tpu_input: torch.Tensor) -> None:
    """`fn` on the tpu matches the CPU in metadata and values, and aliases its input."""
    expected = _outputs(fn(cpu_input))
    actual = _outputs(fn(tpu_input))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape
        assert a.stride() == e.stride()
        assert a.storage_offset() == e.storage_offset()
        assert a.is_contiguous() == e.is_contiguous()
        assert a.untyped_storage().data_ptr() == tpu_input.untyped_storage().data_ptr()
        assert a._is_view() == e._is_view()
        assert_close(a, e, rtol=0, atol=0)


# (name, input shape, view function). Every function returns one or more views of its input.
VIEW_CASES = [
    ("transpose", (3, 4, 5), lambda x: x.transpose(0, 2)),
    ("transpose_neg", (3, 4, 5), lambda x: x.transpose(-1, -2)),
    ("permute", (3, 4, 5), lambda x: x.permute(2, 0, 1)),
    ("t", (3, 4), lambda x: x.t()),
    ("mT", (2, 3, 4), lambda x: x.mT),
    ("slice_step", (6, 8), lambda x: x[1::2, ::3]),
    ("slice_step_3d", (4, 6, 5), lambda x: x[::3, 1:5:2, 2:]),
    ("slice_end", (6, 8), lambda x: x[-3:, :-2]),
    ("narrow", (6, 8), lambda x: x.narrow(1, 2, 3)),
    ("select", (4, 5, 6), lambda x: x[2]),
    ("select_inner", (4, 5, 6), lambda x: x[:, :, 3]),
    ("select_negative", (4, 5), lambda x: x.select(1, -1)),
    ("select_to_0d", (7,), lambda x: x[3]),
    ("expand", (1, 4), lambda x: x.expand(3, 4)),
    ("expand_new_dims", (4,), lambda x: x.expand(2, 3, 4)),
    ("expand_middle", (3, 1, 4), lambda x: x.expand(3, 5, 4)),
    ("expand_0d", (), lambda x: x.expand(2, 3)),
    ("diagonal", (4, 4), lambda x: x.diagonal()),
    ("diagonal_offset", (4, 5), lambda x: x.diagonal(1)),
    ("diagonal_negative_offset", (5, 4), lambda x: x.diagonal(-2)),
    ("diagonal_dims", (3, 4, 5), lambda x: x.diagonal(0, 0, 2)),
    ("diagonal_dims_offset", (3, 4, 5), lambda x: x.diagonal(-1, 2, 1)),
    ("as_strided", (4, 6), lambda x: x.as_strided((3, 2), (6, 2))),
    ("as_strided_offset", (4, 6), lambda x: x.as_strided((2, 3), (1, 4), 5)),
    ("as_strided_overlapping", (12,), lambda x: x.as_strided((4, 3), (2, 1), 1)),
    ("as_strided_zero_stride", (6,), lambda x: x.as_strided((3, 2), (0, 2), 1)),
    ("unfold", (10,), lambda x: x.unfold(0, 3, 2)),
    ("unfold_overlapping", (3, 8), lambda x: x.unfold(1, 4, 1)),
    ("unfold_2d_dim0", (7, 3), lambda x: x.unfold(0, 2, 3)),
    ("view", (4, 6), lambda x: x.view(2, 12)),
    ("view_infer", (4, 6), lambda x: x.view(-1, 3)),
    ("view_as", (4, 6), lambda x: x.view_as(torch.empty(8, 3))),
    ("view_0d", (1,), lambda x: x.view(())),
    ("view_from_0d", (), lambda x: x.view(1, 1)),
    ("reshape_contiguous", (4, 6), lambda x: x.reshape(3, 8)),
    ("reshape_of_transpose_view", (4, 6), lambda x: x.t().reshape(6, 2, 2)),
    ("flatten", (2, 3, 4), lambda x: x.flatten()),
    ("flatten_range", (2, 3, 4, 5), lambda x: x.flatten(1, 2)),
    ("squeeze", (1, 3, 1, 4), lambda x: x.squeeze()),
    ("squeeze_dim", (1, 3, 1, 4), lambda x: x.squeeze(2)),
    ("squeeze_dims", (1, 3, 1, 4), lambda x: x.squeeze((0, 2))),
    ("unsqueeze", (3, 4), lambda x: x.unsqueeze(1)),
    ("unsqueeze_end", (3, 4), lambda x: x.unsqueeze(-1)),
    ("split", (7, 4), lambda x: x.split(3)),
    ("split_sizes", (7, 4), lambda x: x.split([1, 2, 1], dim=1)),
    ("chunk", (7, 4), lambda x: x.chunk(3)),
    ("chunk_dim", (3, 8), lambda x: x.chunk(4, dim=1)),
    ("unbind", (3, 4), lambda x: x.unbind(0)),
    ("unbind_dim", (3, 4), lambda x: x.unbind(1)),
    ("movedim", (2, 3, 4), lambda x: x.movedim(0, -1)),
    ("swapaxes", (2, 3, 4), lambda x: x.swapaxes(0, 1)),
    ("indexing_mix", (4, 5, 6), lambda x: x[1:, None, ..., ::2]),
    ("ellipsis_select", (4, 5, 6), lambda x: x[..., 0]),
    ("chained", (6, 8), lambda x: x[1:].t()[::2].unsqueeze(0).expand(2, -1, -1)),
    ("alias", (3, 4), lambda x: torch.ops.aten.alias(x)),
    ("detach", (3, 4), lambda x: x.detach()),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape,fn", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_view_matches_cpu(name, shape, fn, dtype):
    cpu = make(shape, dtype)
    check_view(fn, cpu, cpu.to(TPU))


NONCONTIGUOUS_CASES = [c for c in VIEW_CASES if len(c[1]) >= 2 and not c[0].startswith(("view", "as_strided"))]


@pytest.mark.parametrize("name,shape,fn", NONCONTIGUOUS_CASES, ids=[c[0] for c in NONCONTIGUOUS_CASES])
def test_view_of_noncontiguous_matches_cpu(name, shape, fn):
    cpu = noncontiguous(make(shape))
    tpu = noncontiguous(cpu.to(TPU))
    assert tpu.stride() == cpu.stride()
    expected = _outputs(fn(cpu))
    actual = _outputs(fn(tpu))
    for a, e in zip(actual, expected, strict=True):
        assert a.stride() == e.stride() and a.storage_offset() == e.storage_offset()
        # reshape/flatten copy exactly when the CPU copies.
        cpu_shares = e.untyped_storage().data_ptr() == cpu.untyped_storage().data_ptr()
        assert (a.untyped_storage().data_ptr() == tpu.untyped_storage().data_ptr()) == cpu_shares
        assert_close(a, e, rtol=0, atol=0)


def test_as_strided_reads_storage_beyond_the_view():
    # as_strided addresses the whole storage, not the view it is called on.
    cpu = make((10,))
    tpu = cpu.to(TPU)
    check_view(lambda x: x[2:5].as_strided((2, 3), (3, 1), 4), cpu, tpu)


def test_view_on_offset_base_keeps_offset():
    cpu = make((6, 8))
    tpu = cpu.to(TPU)
    check_view(lambda x: x[2:][1:, 3:].view(-1, 5)[1:], cpu, tpu)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.t().view(-1),
        lambda x: x.view(5),
        lambda x: x.expand(2, 4),
        lambda x: x.narrow(1, 3, 2),
        lambda x: x.diagonal(0, 0, 0),
        lambda x: x.unfold(1, 5, 1),
        lambda x: x.as_strided((3, 3), (1, 1), 20),
        lambda x: x.squeeze(5),
        lambda x: x[5],
        lambda x: x.split([1, 1], 0),
    ],
    ids=[
        "view_stride",
        "view_size",
        "expand",
        "narrow",
        "diagonal",
        "unfold",
        "as_strided",
        "squeeze",
        "index",
        "split",
    ],
)
def test_view_errors_match_cpu(fn):
    cpu = make((3, 4))
    with pytest.raises(Exception) as expected:
        fn(cpu)
    with pytest.raises(type(expected.value)) as actual:
        fn(cpu.to(TPU))
    assert str(actual.value) == str(expected.value)


# ---- view(dtype): the same bytes read as another dtype ----

DTYPE_VIEW_CASES = [
    (torch.float32, torch.int32),
    (torch.int32, torch.float32),
    (torch.bfloat16, torch.int16),
    (torch.int16, torch.bfloat16),
    (torch.float16, torch.bfloat16),
    (torch.float32, torch.uint8),
    (torch.uint8, torch.float32),
    (torch.float32, torch.bfloat16),
    (torch.bfloat16, torch.float32),
    (torch.int64, torch.int32),
    (torch.int32, torch.int64),
    (torch.float64, torch.int64),
    (torch.int8, torch.uint8),
    (torch.bool, torch.uint8),
    (torch.int16, torch.int8),
]


@pytest.mark.parametrize("source,target", DTYPE_VIEW_CASES, ids=lambda d: str(d).replace("torch.", ""))
def test_view_dtype_matches_cpu(source, target):
    cpu = make((3, 8), source)
    tpu = cpu.to(TPU)
    expected = cpu.view(target)
    actual = tpu.view(target)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert actual.untyped_storage().data_ptr() == tpu.untyped_storage().data_ptr()
    # Compare bits, so NaN payloads from reinterpretation compare exactly.
    assert torch.equal(actual.cpu().view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize("source,target", [(torch.float32, torch.int16), (torch.int16, torch.float32)])
def test_view_dtype_of_sliced_view(source, target):
    # A view of rows (storage offset, stride(-1) == 1) reinterpreted as another dtype.
    cpu = make((4, 8), source)
    tpu = cpu.to(TPU)
    expected = cpu[1:3, 2:6].view(target)
    actual = tpu[1:3, 2:6].view(target)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert actual.storage_offset() == expected.storage_offset()
    assert torch.equal(actual.cpu().view(torch.uint8), expected.contiguous().view(torch.uint8))


@pytest.mark.parametrize(
    "fn",
    [lambda x: x[:, ::2].view(torch.uint8), lambda x: x[:, :3].view(torch.float64)],
    ids=["stride", "size"],
)
def test_view_dtype_errors_match_cpu(fn):
    cpu = make((3, 4))
    with pytest.raises(RuntimeError) as expected:
        fn(cpu)
    with pytest.raises(RuntimeError) as actual:
        fn(cpu.to(TPU))
    assert str(actual.value) == str(expected.value)


def test_write_through_dtype_view_is_visible_in_base():
    cpu = make((4, 6))
    tpu = cpu.to(TPU)
    cpu.view(torch.int32)[1].add_(1)
    tpu.view(torch.int32)[1].add_(1)
    assert torch.equal(tpu.cpu(), cpu)
    cpu.view(torch.uint8)[2, 4:9].add_(3)
    tpu.view(torch.uint8)[2, 4:9].add_(3)
    assert torch.equal(tpu.cpu(), cpu)


def test_write_to_base_is_visible_in_dtype_view():
    cpu = make((4, 6))
    tpu = cpu.to(TPU)
    cpu_bits, tpu_bits = cpu.view(torch.int16), tpu.view(torch.int16)
    cpu.add_(1.5)
    tpu.add_(1.5)
    assert torch.equal(tpu_bits.cpu(), cpu_bits)


# ---- Aliasing: a write through one tensor is visible through every tensor sharing storage ----


def test_select_sees_later_inplace_on_base():
    cpu = make((3, 4))
    tpu = cpu.to(TPU)
    y_cpu, y_tpu = cpu[1], tpu[1]
    cpu.add_(1)
    tpu.add_(1)
    assert_close(y_tpu, y_cpu, rtol=0, atol=0)


def test_write_through_view_visible_in_base_and_other_views():
    cpu = make((4, 6))
    tpu = cpu.to(TPU)
    views = [lambda x: x.t(), lambda x: x[:, 1:4], lambda x: x.view(-1)[5:17], lambda x: x.unfold(1, 2, 2)]
    cpu_views = [v(cpu) for v in views]
    tpu_views = [v(tpu) for v in views]
    cpu[1:3, 2:5].add_(10)
    tpu[1:3, 2:5].add_(10)
    assert_close(tpu, cpu, rtol=0, atol=0)
    for a, e in zip(tpu_views, cpu_views, strict=True):
        assert_close(a, e, rtol=0, atol=0)


def test_write_through_transposed_view_visible_in_select():
    cpu = make((3, 5), torch.int64)
    tpu = cpu.to(TPU)
    cpu_row, tpu_row = cpu[2], tpu[2]
    cpu.t()[1:4].add_(7)
    tpu.t()[1:4].add_(7)
    assert_close(tpu_row, cpu_row)
    assert_close(tpu, cpu)


def test_views_keep_storage_alive():
    tpu = make((4, 4)).to(TPU)
    expected = tpu.cpu()[1:, 2]
    view = tpu[1:, 2]
    del tpu
    assert_close(view, expected, rtol=0, atol=0)


def test_storage_is_shared_and_clone_is_not():
    tpu = make((4, 6)).to(TPU)
    storage = tpu.untyped_storage()
    assert storage.nbytes() == 4 * 6 * 4
    assert storage.device == tpu.device
    for view in (tpu.t(), tpu[1:, ::2], tpu.view(torch.uint8), tpu.expand(2, 4, 6), tpu.diagonal()):
        assert view.untyped_storage().data_ptr() == storage.data_ptr()
    assert tpu.clone().untyped_storage().data_ptr() != storage.data_ptr()
    assert tpu.contiguous().data_ptr() == tpu.data_ptr()
    assert tpu.t().contiguous().data_ptr() != tpu.data_ptr()
    assert tpu[1:].data_ptr() == tpu.data_ptr() + 6 * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_contiguous_of_views_matches_cpu(dtype):
    cpu = make((4, 6, 5), dtype)
    tpu = cpu.to(TPU)
    for fn in (lambda x: x.permute(2, 0, 1), lambda x: x[:, ::2], lambda x: x[1].t(), lambda x: x[:1].expand(3, 6, 5)):
        expected = fn(cpu).contiguous()
        actual = fn(tpu).contiguous()
        assert actual.is_contiguous() and actual.stride() == expected.stride()
        assert_close(actual, expected, rtol=0, atol=0)


# ---- In-place ops on views ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
@pytest.mark.parametrize(
    "view",
    [
        lambda x: x[:, 1::2],
        lambda x: x.t(),
        lambda x: x.diagonal(),
        lambda x: x.diagonal(-1),
        lambda x: x[2],
        lambda x: x[:, 3],
        lambda x: x[1:3, 1:4],
        lambda x: x.view(-1)[3:20:4],
        lambda x: x.unfold(1, 2, 2),
        lambda x: x.as_strided((2, 2), (7, 1), 3),
    ],
    ids=["strided_cols", "t", "diagonal", "subdiagonal", "row", "col", "block", "flat_step", "unfold", "as_strided"],
)
def test_inplace_add_on_view(view, dtype):
    cpu = make((5, 6), dtype)
    tpu = cpu.to(TPU)
    other = make(view(cpu).shape, dtype)
    view(cpu).add_(other)
    result = view(tpu).add_(other.to(TPU))
    assert result.data_ptr() == view(tpu).data_ptr()
    assert_close(tpu, cpu)
    view(cpu).add_(3)
    view(tpu).add_(3)
    assert_close(tpu, cpu)


def test_inplace_on_noncontiguous_base():
    cpu = noncontiguous(make((4, 5)))
    tpu = noncontiguous(cpu.to(TPU))
    base_before = tpu._base.cpu()
    cpu[1:, ::2].add_(2.5)
    tpu[1:, ::2].add_(2.5)
    assert_close(tpu, cpu)
    # The elements of the base outside the view are untouched.
    expected_base = base_before.clone()
    expected_base.as_strided(tpu.shape, tpu.stride())[1:, ::2].add_(2.5)
    assert torch.equal(tpu._base.cpu(), expected_base)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_inplace_reading_expanded_tensor(dtype):
    cpu = make((4, 5), dtype)
    tpu = cpu.to(TPU)
    row_cpu = make((1, 5), dtype)
    row_tpu = row_cpu.to(TPU)
    cpu.add_(row_cpu.expand(4, 5))
    tpu.add_(row_tpu.expand(4, 5))
    assert_close(tpu, cpu)
    col_cpu = make((4,), dtype)
    col_tpu = col_cpu.to(TPU)
    cpu.add_(col_cpu[:, None].expand(4, 5), alpha=2)
    tpu.add_(col_tpu[:, None].expand(4, 5), alpha=2)
    assert_close(tpu, cpu)


def test_inplace_reading_disjoint_part_of_same_storage():
    cpu = make((6, 4))
    tpu = cpu.to(TPU)
    cpu[3:].add_(cpu[:3])
    tpu[3:].add_(tpu[:3])
    assert_close(tpu, cpu)
    cpu[::2].add_(cpu[1::2])
    tpu[::2].add_(tpu[1::2])
    assert_close(tpu, cpu)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:1].expand(4).add_(1),
        lambda x: x.view(2, 2).add_(x.view(2, 2)[0]),
        lambda x: x[1:].add_(x[:-1]),
    ],
    ids=["expanded_self", "row_of_self", "shifted_self"],
)
def test_inplace_overlap_errors_match_cpu(fn):
    with pytest.raises(RuntimeError) as expected:
        fn(torch.arange(4.0))
    with pytest.raises(RuntimeError) as actual:
        fn(torch.arange(4.0).to(TPU))
    assert str(actual.value) == str(expected.value)


OUT_OVERLAP_CASES = [
    lambda x: torch.add(x, 1, out=x[:1].expand(4)),
    lambda x: torch.add(x[:3], 1, out=x[1:]),
]


@pytest.mark.parametrize("fn", OUT_OVERLAP_CASES, ids=["expanded_out", "shifted_out"])
def test_out_overlap_errors_match_cpu(fn):
    with pytest.raises(RuntimeError) as expected:
        fn(torch.arange(4.0))
    with pytest.raises(RuntimeError) as actual:
        fn(torch.arange(4.0).to(TPU))
    assert str(actual.value) == str(expected.value)


def test_inplace_mul_on_transpose():
    cpu = make((3, 4))
    tpu = cpu.to(TPU)
    cpu.t().mul_(2)
    tpu.t().mul_(2)
    assert_close(tpu, cpu)
    factors = make((2, 1))
    cpu[:, ::2].t().mul_(factors)
    tpu[:, ::2].t().mul_(factors.to(TPU))
    assert_close(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_fill_diagonal_view(dtype):
    cpu = make((4, 5), dtype)
    tpu = cpu.to(TPU)
    cpu.diagonal().fill_(0)
    tpu.diagonal().fill_(0)
    assert_close(tpu, cpu)
    cpu.diagonal(1).fill_(1)
    tpu.diagonal(1).fill_(1)
    assert_close(tpu, cpu)
    cpu[:, 1::2].fill_(True)
    tpu[:, 1::2].fill_(True)
    assert_close(tpu, cpu)


# ---- out= tensors ----


def test_out_is_resized_like_cpu():
    a, b = make((3, 4)), make((3, 4))
    expected = torch.add(a, b, out=torch.empty(0))
    out = torch.empty(0).to(TPU)
    result = torch.add(a.to(TPU), b.to(TPU), out=out)
    assert result is out
    assert out.shape == expected.shape and out.stride() == expected.stride()
    assert_close(out, expected)


def test_out_with_wrong_shape_warns_and_resizes_like_cpu():
    a, b = make((3, 4)), make((3, 4))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        expected = torch.add(a, b, out=torch.empty(5))
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        out = torch.empty(5).to(TPU)
        torch.add(a.to(TPU), b.to(TPU), out=out)
    assert out.shape == expected.shape
    assert_close(out, expected)


def test_out_growing_storage_keeps_aliasing_of_tensor():
    # Resizing a tensor to more elements than its storage holds replaces the storage's buffer;
    # the tensor object itself stays the out= target.
    a = make((64,))
    out = torch.empty(2).to(TPU)
    torch.add(a.to(TPU), 1, out=out)
    assert out.untyped_storage().nbytes() >= 64 * 4
    assert_close(out, a + 1)


def test_out_view_writes_through_to_base():
    a, b = make((3, 2)), make((3, 2))
    base_cpu = make((3, 4))
    base_tpu = base_cpu.to(TPU)
    torch.add(a, b, out=base_cpu[:, ::2])
    torch.add(a.to(TPU), b.to(TPU), out=base_tpu[:, ::2])
    assert_close(base_tpu, base_cpu)
    torch.add(a.t(), b.t(), out=base_cpu.t()[1::2])
    torch.add(a.t().to(TPU), b.t().to(TPU), out=base_tpu.t()[1::2])
    assert_close(base_tpu, base_cpu)


def test_0d_views():
    cpu = make((5,), torch.int64)
    tpu = cpu.to(TPU)
    cpu[2].add_(100)
    tpu[2].add_(100)
    assert_close(tpu, cpu)
    assert tpu[2].dim() == 0 and tpu[2].storage_offset() == 2
    scalar_cpu = make((), torch.float32)
    scalar_tpu = scalar_cpu.to(TPU)
    check_view(lambda x: x.expand(3), scalar_cpu, scalar_tpu)
    check_view(lambda x: x.unsqueeze(0).view(1, 1, 1), scalar_cpu, scalar_tpu)


def test_strided_reads_at_many_offsets_reuse_one_program():
    import torch_tpu

    cpu = make((16, 8))
    tpu = cpu.to(TPU)
    tpu[0].add(1).cpu()  # compile once
    before = torch_tpu.metrics.snapshot()["compiles"]
    for i in range(1, 16):
        assert_close(tpu[i].add(1), cpu[i] + 1)
    assert torch_tpu.metrics.snapshot()["compiles"] == before


def _alias_scenario(x):
    """Writes through views of several layouts and dtypes, interleaved with reads."""
    row, transposed = x[1], x.t()
    x[:, 1::2].add_(1)
    transposed[2:].add_(row[:1])
    flat = x.view(-1)[3:7].add(transposed[0, :1])
    x.diagonal().copy_(flat)
    bits = x.view(torch.int32)[0]
    bits.add_(3)
    x[2].copy_(x[0])
    return [x, row, transposed, flat, bits]


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_aliasing_in_every_execution_mode(mode):
    import torch_tpu

    cpu = make((4, 4))
    expected = _alias_scenario(cpu.clone())
    with torch_tpu.execution_mode(mode):
        actual = _alias_scenario(cpu.to(TPU))
        for a, e in zip(actual, expected, strict=True):
            assert torch.equal(a.cpu(), e)


def test_mixed_width_writes_into_one_storage():
    cpu = torch.arange(10, dtype=torch.uint8)
    tpu = cpu.to(TPU)
    for x in (cpu, tpu):
        halves = x.view(torch.int16)  # 5 elements over the 10 bytes
        x.add_(1)
        halves[1:4].add_(300)
        x[4:8].view(torch.float32).copy_(torch.tensor([1.5]))
        halves[0].add_(1)
    assert torch.equal(tpu.cpu(), cpu)
    floats_cpu = make((3, 5))
    floats_tpu = floats_cpu.to(TPU)
    for x in (floats_cpu, floats_tpu):
        x.view(torch.int16)[:, 3:7].copy_(torch.tensor([1, 2, 3, 4], dtype=torch.int16))
    assert torch.equal(floats_tpu.cpu().view(torch.int32), floats_cpu.view(torch.int32))


def test_empty_views_and_writes():
    cpu = make((4, 3))
    tpu = cpu.to(TPU)
    check_view(lambda x: x[2:2], cpu, tpu)
    check_view(lambda x: x[:, 3:], cpu, tpu)
    tpu[1:1].add_(5)
    tpu[:, :0].copy_(torch.empty(4, 0))
    assert_close(tpu, cpu, rtol=0, atol=0)
    assert tpu[:0].cpu().shape == (0, 3)
