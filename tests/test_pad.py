"""F.pad on tpu against the CPU, forward and backward, in every mode.

reflect and replicate reach the device as reflection_pad{1,2,3}d / replication_pad{1,2,3}d and
their _backward ops; constant and circular padding decompose into other ops (constant_pad_nd's
pad, slices and cat) and are checked here end to end.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTEGERS = [torch.int32, torch.int64]

# (input shape, padding): 1-D, 2-D and 3-D, batched and unbatched, uneven sides and zeros.
CASES = [
    ((2, 3, 7), (2, 3)),
    ((3, 6), (0, 4)),
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((3, 4, 5), (2, 2, 1, 3)),
    ((1, 2, 4, 5, 6), (1, 2, 0, 3, 2, 1)),
    ((2, 3, 4, 5), (3, 1, 2, 2, 1, 1)),
]


# A border element's gradient sums up to 8 * (pad + 1) terms. The CPU rounds every partial sum
# to half precision, we round once from f32, so the CPU's error (measured against float64: up to
# about 1% of the largest gradient in bfloat16) is bounded relative to the largest element.
GRAD_TOLERANCES = {torch.bfloat16: dict(rtol=2e-2, atol=3e-2), torch.float16: dict(rtol=2e-3, atol=4e-3)}


def grad_tolerance(expected: torch.Tensor):
    if expected.dtype not in GRAD_TOLERANCES:
        return {}
    tolerance = dict(GRAD_TOLERANCES[expected.dtype])
    tolerance["atol"] *= max(1.0, expected.abs().max().item())
    return tolerance


def check_pad(x: torch.Tensor, padding, mode: str, backward: bool = True, layout=None):
    cpu_x = x.clone().requires_grad_(backward)
    expected = F.pad(cpu_x, padding, mode=mode)
    tpu_x = x.to(TPU)
    if layout is not None:
        tpu_x = layout(tpu_x)
    tpu_x.requires_grad_(backward)
    actual = F.pad(tpu_x, padding, mode=mode)
    assert_close(actual, expected.detach())
    if not backward:
        return
    weights = make(expected.shape, x.dtype)
    (expected * weights).sum().backward()
    (actual * weights.to(TPU)).sum().backward()
    assert_close(tpu_x.grad, cpu_x.grad, **grad_tolerance(cpu_x.grad))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,padding", CASES)
def test_pad_float(mode, dtype, shape, padding):
    check_pad(make(shape, dtype), padding, mode)


# These modes decompose into ops tested elsewhere (and compile many small programs): float32 over
# every case, the half types over a 1-D and a 3-D case.
@pytest.mark.parametrize("mode", ["circular", "constant"])
@pytest.mark.parametrize(
    "dtype,shape,padding",
    [(torch.float32, shape, padding) for shape, padding in CASES]
    + [(dtype, *CASES[i]) for dtype in (torch.bfloat16, torch.float16) for i in (0, 4)],
)
def test_pad_decomposed_modes(mode, dtype, shape, padding):
    check_pad(make(shape, dtype), padding, mode)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("dtype", INTEGERS)
def test_pad_integer(mode, dtype):
    for shape, padding in CASES[::2]:
        x = make(shape, dtype)
        assert_close(F.pad(x.to(TPU), padding, mode=mode), F.pad(x, padding, mode=mode))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_noncontiguous(mode):
    check_pad(make((2, 3, 6, 5)), (2, 1, 1, 3), mode, layout=noncontiguous)
    check_pad(make((3, 7)), (3, 2), mode, layout=noncontiguous)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_negative_crops(mode):
    # A negative amount crops that side; the other side still pads from the original edge.
    check_pad(make((2, 3, 7)), (-2, 3), mode)
    check_pad(make((2, 6, 7)), (1, -1, -2, 2), mode)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_constant_value_and_modules(mode):
    x = make((2, 3, 5, 6))
    module = torch.nn.ReflectionPad2d(2) if mode == "reflect" else torch.nn.ReplicationPad2d((1, 2, 0, 3))
    assert_close(module(x.to(TPU)), module(x))
    assert_close(F.pad(x.to(TPU), (1, 1, 2, 0), value=-2.5), F.pad(x, (1, 1, 2, 0), value=-2.5))


def test_pad_out_variants():
    x = make((2, 3, 8))
    out = torch.empty(0, device=TPU)
    result = torch.ops.aten.reflection_pad1d.out(x.to(TPU), [2, 3], out=out)
    assert result is out
    assert_close(out, torch.ops.aten.reflection_pad1d(x, [2, 3]))
    y = make((1, 2, 3, 4, 5))
    out = torch.empty(0, device=TPU)
    torch.ops.aten.replication_pad3d.out(y.to(TPU), [1, 1, 2, 0, 0, 2], out=out)
    assert_close(out, torch.ops.aten.replication_pad3d(y, [1, 1, 2, 0, 0, 2]))


def test_pad_errors():
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(torch.ones(1, 2, 3, device=TPU), (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        torch.ops.aten.reflection_pad2d(torch.ones(1, 2, 3, 3, device=TPU), [1, 1, 3, 0])
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D input"):
        F.pad(torch.ones(5, device=TPU), (1, 1), mode="replicate")
    with pytest.raises(RuntimeError, match="Expected 2D or 3D"):
        torch.ops.aten.replication_pad1d(torch.ones(2, 2, 2, 5, device=TPU), [1, 1])
