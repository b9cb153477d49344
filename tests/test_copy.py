"""Copies, casts, host reads and buffer donation, compared with PyTorch on the CPU."""

from __future__ import annotations

import gc
import itertools
import math

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous, run_python

import torch_tpu

ALL_DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
]
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _range(dtype) -> tuple[float, float]:
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        return -1e4, 1e4
    info = torch.iinfo(dtype)
    return info.min, info.max


def cast_source(source: torch.dtype, target: torch.dtype) -> torch.Tensor:
    """Values of `source` whose cast to `target` PyTorch defines (no float to integer overflow)."""
    if source == torch.bool:
        return torch.tensor([True, False, True, True, False, False])
    special = [0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 1.5, -1.5, 2.9, -2.9, 100.7, -100.7, 127.0, 65504.0]
    random = (torch.rand(64) - 0.5) * 2000
    values = torch.cat([torch.tensor(special), random])
    if source.is_floating_point and (target.is_floating_point or target == torch.bool):
        values = torch.cat([values, torch.tensor([math.inf, -math.inf, math.nan, 1e30, -1e-30, 3e38])])
    if not source.is_floating_point:
        values = torch.cat([values.round(), torch.tensor([300.0, -300.0, 70000.0, -70000.0, 2.0**31 - 1, 2.0**40])])
        if source == torch.uint8:
            values = values.abs()
        lo, hi = _range(source)
        return values.to(torch.float64).clamp(lo, hi).to(torch.int64).to(source)
    values = values.to(source)
    if target not in (torch.bool, torch.uint8) and not target.is_floating_point:
        # Float to a too-small signed integer is undefined in C++; keep values that fit.
        lo, hi = _range(target)
        wide = values.to(torch.float64)
        values = values[(wide > lo - 1.0) & (wide < hi + 1.0)]
    return values


CAST_PAIRS = list(itertools.product(ALL_DTYPES, ALL_DTYPES))


def _assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.device.type == "cpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("source,target", CAST_PAIRS, ids=[f"{_name(a)}-{_name(b)}" for a, b in CAST_PAIRS])
def test_cast_every_pair(source, target):
    values = cast_source(source, target)
    expected = values.to(target)
    on_device = values.to(TPU)
    _assert_same(on_device.to(target).cpu(), expected)  # cast on the device
    _assert_same(values.to(TPU, target).cpu(), expected)  # upload with a cast
    _assert_same(on_device.to("cpu", target), expected)  # download with a cast
    _assert_same(torch.empty(values.shape, dtype=target).to(TPU).copy_(on_device).cpu(), expected)
    _assert_same(torch.empty(values.shape, dtype=target).to(TPU).copy_(values).cpu(), expected)
    _assert_same(torch.empty(values.shape, dtype=target).copy_(on_device), expected)


@pytest.mark.parametrize("source", FLOATS, ids=_name)
@pytest.mark.parametrize("target", [torch.int8, torch.int16, torch.int32, torch.int64], ids=_name)
def test_float_to_int_truncates_toward_zero(source, target):
    # Exactly representable in every float dtype, so only the cast rounds.
    values = torch.tensor([-2.75, -2.5, -2.25, -0.75, -0.0, 0.0, 0.75, 2.25, 2.5, 2.75, 126.5, -127.5]).to(source)
    result = values.to(TPU).to(target)
    assert result.cpu().tolist() == [-2, -2, -2, 0, 0, 0, 0, 2, 2, 2, 126, -127]
    assert_close(result, values.to(target))


@pytest.mark.parametrize("source", FLOATS, ids=_name)
def test_negative_float_to_uint8_wraps_like_torch(source):
    # c10 casts float to uint8 through int64, so -3.7 becomes 253 on every backend.
    values = torch.tensor([-3.7, -1.0, -0.5, -128.0, -255.0, 255.9, 0.0]).to(source)
    assert_close(values.to(TPU).to(torch.uint8), values.to(torch.uint8))


@pytest.mark.parametrize("source", [torch.float32, torch.float64], ids=_name)
@pytest.mark.parametrize("target", [torch.int8, torch.int16], ids=_name)
def test_float_to_small_int_out_of_range_like_cpu(source, target):
    # Out of range is undefined in C++; the CPU converts through int32 and keeps the low bits.
    values = torch.tensor([200.3, -200.3, 70000.5, -70000.5, 40000.0]).to(source)
    assert_close(values.to(TPU).to(target), values.to(target))


@pytest.mark.parametrize("source", FLOATS, ids=_name)
def test_float_to_bool_is_nonzero(source):
    values = torch.tensor([0.0, -0.0, 0.5, -2.0, math.nan, math.inf, -math.inf, 1e-3]).to(source)
    result = values.to(TPU).to(torch.bool)
    assert result.cpu().tolist() == [False, False, True, True, True, True, True, True]
    assert_close(result, values.to(torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool], ids=_name)
def test_cast_of_noncontiguous_views(dtype):
    cpu = make((4, 6), dtype)
    tpu = cpu.to(TPU)
    for view in (lambda x: x.t(), lambda x: x[1:, ::2], lambda x: x[:1].expand(3, 6), lambda x: x.diagonal()):
        expected = view(cpu).to(torch.float16)
        actual = view(tpu).to(torch.float16)
        assert actual.is_contiguous() == expected.is_contiguous()
        assert_close(actual, expected, rtol=0, atol=0)
    assert_close(noncontiguous(tpu).to(torch.int64), noncontiguous(cpu).to(torch.int64), rtol=0, atol=0)


def test_to_same_dtype_returns_self_and_copy_true_copies():
    tpu = make((3,)).to(TPU)
    assert tpu.to(torch.float32) is tpu
    assert tpu.to(TPU) is tpu
    copied = tpu.to(TPU, copy=True)
    assert copied is not tpu and copied.data_ptr() != tpu.data_ptr()
    assert_close(copied, tpu.cpu())


# ---- Host <-> device transfers ----


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_name)
def test_roundtrip_every_dtype(dtype):
    cpu = make((5, 7), dtype)
    tpu = cpu.to(TPU)
    assert tpu.device == torch.device("tpu", 0) and tpu.dtype == dtype
    _assert_same(tpu.cpu(), cpu)
    _assert_same(noncontiguous(cpu).to(TPU).cpu(), noncontiguous(cpu))
    _assert_same(tpu[1:, ::3].cpu(), cpu[1:, ::3])


def test_non_blocking_copies():
    cpu = make((64, 32))
    tpu = cpu.to(TPU, non_blocking=True)
    back = tpu.add(1).to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    _assert_same(back, cpu + 1)
    pinned = torch.empty_like(cpu)
    pinned.copy_(tpu, non_blocking=True)
    torch.tpu.synchronize()
    _assert_same(pinned, cpu)
    target = torch.empty(64, 32).to(TPU)
    target.copy_(cpu, non_blocking=True)
    _assert_same(target.cpu(), cpu)


def test_tensor_tpu_method_and_module_tpu():
    cpu = make((3, 4))
    moved = cpu.tpu()
    assert moved.device == torch.device("tpu", 0)
    _assert_same(moved.cpu(), cpu)
    assert cpu.tpu(0).device == torch.device("tpu", 0)
    assert moved.is_tpu and not cpu.is_tpu

    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 3)
    weight, bias = linear.weight.detach().clone(), linear.bias.detach().clone()
    assert linear.tpu() is linear
    for parameter in linear.parameters():
        assert parameter.device == torch.device("tpu", 0) and isinstance(parameter, torch.nn.Parameter)
    _assert_same(linear.weight.detach().cpu(), weight)
    _assert_same(linear.bias.detach().cpu(), bias)
    linear.to("cpu")
    assert linear.weight.device.type == "cpu"
    _assert_same(linear.weight.detach(), weight)


@pytest.mark.parametrize(
    "data,dtype",
    [
        ([1.5, -2.0, 3.25], None),
        ([[1, 2], [3, 4]], None),
        ([True, False], None),
        ([1, 2, 3], torch.bfloat16),
        ([0.5, 1.5], torch.float16),
        (7, torch.int8),
        (2.5, None),
    ],
)
def test_torch_tensor_on_device(data, dtype):
    expected = torch.tensor(data, dtype=dtype)
    actual = torch.tensor(data, dtype=dtype, device="tpu")
    assert actual.device == torch.device("tpu", 0)
    _assert_same(actual.cpu(), expected)
    assert_close(torch.as_tensor(data, dtype=dtype, device=TPU), expected)


def test_cross_device_copies():
    code = """
import torch, torch_tpu
assert torch.tpu.device_count() == 2, torch.tpu.device_count()
cpu = torch.randn(4, 6)
a = cpu.to("tpu:0")
b = a.to("tpu:1")
assert b.device == torch.device("tpu", 1), b.device
assert torch.equal(b.cpu(), cpu)
c = b.add(1).to("tpu:0")
assert c.device == torch.device("tpu", 0), c.device
assert torch.equal(c.cpu(), cpu + 1)
# A strided view crosses devices, and a dtype change happens on the way.
d = a.t()[1::2].to("tpu:1", torch.float64)
assert d.device.index == 1 and d.dtype == torch.float64
assert torch.equal(d.cpu(), cpu.t()[1::2].double())
# copy_ into a view on the other device writes through to its base.
base = torch.zeros(4, 6).to("tpu:1")
base[:, 2:4].copy_(a[:, :2])
expected = torch.zeros(4, 6)
expected[:, 2:4] = cpu[:, :2]
assert torch.equal(base.cpu(), expected)
# Never-written storage moves as zeros (empty's contents are unspecified, but reading is safe).
torch.empty(3, device="tpu:0").to("tpu:1").cpu()
with torch.tpu.device(1):
    assert torch.empty(2, device="tpu").device.index == 1
print("ok")
"""
    result = run_python(code, TORCH_TPU_NUM_DEVICES="2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


# ---- copy_ ----


def test_copy_into_views_from_cpu_and_tpu():
    cpu = make((4, 6))
    tpu = cpu.to(TPU)
    src = make((4, 3))
    cpu[:, ::2].copy_(src)
    tpu[:, ::2].copy_(src)
    assert_close(tpu, cpu)
    src_t = make((3, 4))
    cpu[:, 1::2].copy_(src_t.t())
    tpu[:, 1::2].copy_(src_t.to(TPU).t())
    assert_close(tpu, cpu)
    cpu.diagonal().copy_(cpu[0, :4])
    tpu.diagonal().copy_(tpu[0, :4])
    assert_close(tpu, cpu)


@pytest.mark.parametrize(
    "source_dtype,target_dtype",
    [
        (torch.float32, torch.int32),
        (torch.int64, torch.bfloat16),
        (torch.bool, torch.float16),
        (torch.float64, torch.bool),
    ],
)
@pytest.mark.parametrize("source_device", ["cpu", "tpu"])
def test_copy_into_view_with_dtype_conversion(source_dtype, target_dtype, source_device):
    cpu = make((5, 4), target_dtype)
    tpu = cpu.to(TPU)
    src = make((2, 4), source_dtype)
    cpu[1::2].copy_(src)
    tpu[1::2].copy_(src.to(source_device))
    assert_close(tpu, cpu, rtol=0, atol=0)


@pytest.mark.parametrize("source_device", ["cpu", "tpu"])
@pytest.mark.parametrize("shape", [(), (1,), (2,), (3, 1), (1, 2)], ids=str)
def test_copy_broadcasts_smaller_source(shape, source_device):
    cpu = make((3, 4), torch.int32)
    tpu = cpu.to(TPU)
    src = make(shape, torch.int32)
    cpu[:, 1:3].copy_(src)
    tpu[:, 1:3].copy_(src.to(source_device))
    assert_close(tpu, cpu)
    whole = make((4,) if len(shape) < 2 else (1, 4), torch.int32)
    cpu.t()[1:].t().copy_(whole[..., 1:])
    tpu.t()[1:].t().copy_(whole[..., 1:].to(source_device))
    assert_close(tpu, cpu)


def test_copy_to_host_into_views_and_with_broadcast():
    tpu = make((4, 3)).to(TPU)
    expected_host = torch.zeros(3, 8)
    expected_host[:, ::2].copy_(tpu.cpu().t())
    host = torch.zeros(3, 8)
    host[:, ::2].copy_(tpu.t())
    _assert_same(host, expected_host)
    row = torch.zeros(5, 3)
    row.copy_(tpu[2])
    _assert_same(row, tpu.cpu()[2].expand(5, 3))


@pytest.mark.parametrize(
    "target_shape,source_shape",
    [((3, 4), (3, 3)), ((3,), (2, 3)), ((3, 4), (2, 3, 4)), ((2, 2), (4,))],
    ids=["mismatch", "more_dims", "batch", "flat"],
)
@pytest.mark.parametrize("source_device", ["cpu", "tpu"])
def test_copy_shape_errors_match_cpu(target_shape, source_shape, source_device):
    with pytest.raises(RuntimeError) as expected:
        torch.zeros(target_shape).copy_(torch.zeros(source_shape))
    with pytest.raises(RuntimeError) as actual:
        torch.zeros(target_shape).to(TPU).copy_(torch.zeros(source_shape).to(source_device))
    assert str(actual.value) == str(expected.value)
    with pytest.raises(RuntimeError) as actual:
        torch.zeros(target_shape).copy_(torch.zeros(source_shape).to(TPU))
    assert str(actual.value) == str(expected.value)


OVERLAP_CASES = [
    lambda x: x[1:].copy_(x[:-1]),
    lambda x: x[:-1].copy_(x[1:]),
    lambda x: x.view(3, 3).t().copy_(x.view(3, 3)),
    lambda x: x[:1].expand(4).copy_(x[:4]),
]


@pytest.mark.parametrize("fn", OVERLAP_CASES, ids=["shift_right", "shift_left", "transpose", "expanded_target"])
def test_overlapping_copy_raises_like_cpu(fn):
    cpu = torch.arange(9.0)
    with pytest.raises(RuntimeError) as expected:
        fn(cpu)
    tpu = cpu.to(TPU)
    with pytest.raises(RuntimeError) as actual:
        fn(tpu)
    assert str(actual.value) == str(expected.value)
    _assert_same(tpu.cpu(), cpu)  # nothing was written


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[:4].copy_(x[5:]),
        lambda x: x[::2].copy_(x[1:2].expand(5)),
        lambda x: x.view(3, 3)[0].copy_(x.view(3, 3)[2]),
        lambda x: x.copy_(x),
        lambda x: x.view(3, 3).copy_(x.view(3, 3)),
        lambda x: x[:1].expand(4).copy_(x[:1].expand(4)),
        # Interleaved columns are too hard for PyTorch's overlap check; the CPU copies in order,
        # reading each element before it is overwritten.
        lambda x: x.view(3, 3)[:, :2].copy_(x.view(3, 3)[:, 1:]),
    ],
    ids=["disjoint", "broadcast_read", "rows", "self", "same_view", "same_expanded", "columns"],
)
def test_copy_within_one_storage_matches_cpu(fn):
    cpu = torch.arange(9.0)
    tpu = cpu.to(TPU)
    fn(cpu)
    fn(tpu)
    _assert_same(tpu.cpu(), cpu)


def test_copy_returns_self_and_keeps_metadata():
    base = torch.zeros(4, 6).to(TPU)
    view = base[1:, ::2]
    result = view.copy_(make((3, 3)))
    assert result is view
    assert view.stride() == (6, 2) and view.storage_offset() == 6


def test_clone_and_contiguous_preserve_dtype_view_bytes():
    cpu = make((4, 4))
    tpu = cpu.to(TPU)
    assert torch.equal(tpu.view(torch.int32).clone().cpu(), cpu.view(torch.int32))
    assert torch.equal(tpu.view(torch.uint8)[:, 3::4].contiguous().cpu(), cpu.view(torch.uint8)[:, 3::4])


def test_untyped_storage_roundtrip():
    cpu = make((3, 4))
    tpu = cpu.to(TPU)
    storage = tpu.untyped_storage()
    host = storage.cpu()
    assert host.nbytes() == cpu.untyped_storage().nbytes()
    assert bytes(host) == bytes(cpu.untyped_storage())


# ---- Host reads ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=_name)
def test_reading_never_written_tensor(dtype):
    # empty()'s contents are unspecified, but reading them (as printing, or the CPU fallback's
    # copy of an out= argument, do) must work: this used to dereference a missing buffer.
    fresh = torch.empty(2, 3, dtype=dtype, device=TPU)
    host = fresh.cpu()
    assert host.shape == (2, 3) and host.dtype == dtype
    assert len(torch.empty(5, dtype=dtype, device=TPU).tolist()) == 5
    assert torch.empty(4, 4, dtype=dtype, device=TPU)[1:, ::2].cpu().shape == (3, 2)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_name)
def test_item_every_dtype(dtype):
    cpu = make((3, 4), dtype)
    tpu = cpu.to(TPU)
    for index in [(0, 0), (1, 2), (2, 3)]:
        value = tpu[index].item()
        assert type(value) is type(cpu[index].item())
        assert value == cpu[index].item()
    assert tpu[1:2, 3:4].item() == cpu[1:2, 3:4].item()
    assert cpu[0, 0].reshape(()).to(TPU).item() == cpu[0, 0].item()


def test_item_special_values():
    values = torch.tensor([math.inf, -math.inf, math.nan, -0.0, 1e-40])
    tpu = values.to(TPU)
    assert tpu[0].item() == math.inf and tpu[1].item() == -math.inf
    assert math.isnan(tpu[2].item())
    assert math.copysign(1.0, tpu[3].item()) == -1.0
    assert tpu[4].item() == values[4].item()
    big = torch.tensor([2**62 + 1, -(2**63)], dtype=torch.int64)
    assert big.to(TPU)[0].item() == 2**62 + 1 and big.to(TPU)[1].item() == -(2**63)


def test_item_and_bool_errors_match_cpu():
    cpu = make((3, 4))
    for fn in (lambda x: x.item(), lambda x: bool(x), lambda x: float(x), lambda x: int(x)):
        with pytest.raises(Exception) as expected:
            fn(cpu)
        with pytest.raises(type(expected.value)) as actual:
            fn(cpu.to(TPU))
        assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_name)
def test_tolist_every_dtype(dtype):
    cpu = make((3, 4), dtype)
    tpu = cpu.to(TPU)
    assert tpu.tolist() == cpu.tolist()
    assert tpu.t()[::2].tolist() == cpu.t()[::2].tolist()
    assert tpu[1, 2].tolist() == cpu[1, 2].tolist()
    assert torch.empty(0, 3).to(TPU).tolist() == []


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_name)
def test_python_number_conversions(dtype):
    cpu = make((1,), dtype)
    tpu = cpu.to(TPU)
    assert bool(tpu) == bool(cpu)
    assert int(tpu) == int(cpu)
    assert float(tpu) == float(cpu)
    zero = torch.zeros((), dtype=dtype)
    assert bool(zero.to(TPU)) is False


def test_numpy_raises_like_other_devices():
    tpu = make((2, 3)).to(TPU)
    with pytest.raises(TypeError) as actual:
        tpu.numpy()
    assert str(actual.value) == (
        "can't convert tpu:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
    )
    assert (tpu.cpu().numpy() == tpu.cpu().numpy()).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool], ids=_name)
def test_equal_matches_cpu(dtype):
    a = make((3, 4), dtype)
    b = a.clone()
    b[1, 2] = not b[1, 2].item() if dtype == torch.bool else b[1, 2] + 1
    cases = [
        (a, a.clone()),
        (a, b),
        (a, a[:2]),
        (a, a.t().contiguous().t()),
        (a, a.reshape(4, 3)),
        (a, a.to(torch.float64)),
        (a[:, ::2], a.clone()[:, ::2]),
        (torch.empty(0, 3, dtype=dtype), torch.empty(0, 3, dtype=dtype)),
    ]
    for x, y in cases:
        assert torch.equal(x.to(TPU), y.to(TPU)) == torch.equal(x, y)
    nan = torch.tensor([math.nan])
    assert torch.equal(nan.to(TPU), nan.to(TPU)) == torch.equal(nan, nan)


def test_equal_across_devices_raises():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.equal(torch.zeros(2).to(TPU), torch.zeros(2))


def test_python_comparison_of_reduction():
    cpu = make((5, 5))
    tpu = cpu.to(TPU)
    taken = "positive" if tpu.sum() > 0 else "negative"
    assert taken == ("positive" if cpu.sum() > 0 else "negative")
    assert bool(tpu.sum() > 1e9) is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool], ids=_name)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (1200,)], ids=str)
def test_repr_matches_cpu(dtype, shape):
    cpu = make(shape, dtype) * (100 if dtype.is_floating_point else 1)
    tpu = cpu.to(TPU)
    text = repr(tpu)
    assert "device='tpu:0'" in text

    # The CPU repr plus the device suffix (which may move later suffixes to a new line).
    def normalized(r: str) -> str:
        return " ".join(r.split()).replace(", device='tpu:0'", "")

    assert normalized(text) == normalized(repr(cpu))
    assert str(tpu) == text


# ---- Buffer donation and memory accounting ----


@pytest.fixture
def quiet_memory():
    """Frees earlier tests' garbage and holds the collector off, so only this test moves the stats."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_inplace_update_donates_buffer_and_functional_op_allocates(quiet_memory):
    n = 4 * 1024 * 1024
    nbytes = n * 4
    tpu = torch.ones(n).to(TPU)
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    assert base >= nbytes

    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    donated_before = torch_tpu.metrics.snapshot()["donated_buffers"]
    tpu.add_(1)
    torch.tpu.synchronize()
    # The old buffer is donated to the program, so the update needs no second tensor's memory.
    assert torch_tpu.metrics.snapshot()["donated_buffers"] == donated_before + 1
    assert torch.tpu.memory_allocated() == base
    assert torch.tpu.max_memory_allocated() < base + nbytes

    torch.tpu.reset_peak_memory_stats()
    result = tpu + 1
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == base + nbytes
    assert torch.tpu.max_memory_allocated() >= base + nbytes
    assert result[:2].tolist() == [3.0, 3.0]
    assert tpu[:2].tolist() == [2.0, 2.0]

    del result
    assert torch.tpu.memory_allocated() == base
    del tpu
    assert torch.tpu.memory_allocated() == base - nbytes


def test_inplace_update_with_live_view_still_donates(quiet_memory):
    # Views share the storage, not a buffer: the storage's old value has no other reader.
    n = 1024 * 1024
    tpu = torch.zeros(n).to(TPU)
    view = tpu[10:20]
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    tpu.add_(2)
    torch.tpu.synchronize()
    assert torch.tpu.max_memory_allocated() < base + n * 4
    assert view.tolist() == [2.0] * 10
