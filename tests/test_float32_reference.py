"""The CPU reference for half precision (float32_reference.py, active in every test through
conftest.py): accumulating kernels computed in float32 and rounded once, pointwise kernels and the
CPU's errors untouched."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import make
from float32_reference import Float32Reference


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_accumulating_kernels_are_float32_rounded_once(dtype):
    a, b = make((16, 64), dtype), make((64, 8), dtype)
    x, w = make((2, 3, 9, 9), dtype), make((4, 3, 3, 3), dtype)
    # Outside any mode, the kernels' own half-precision results (which vary by processor).
    with torch.utils._python_dispatch._disable_current_modes():
        wide_mm = (a.float() @ b.float()).to(dtype)
        wide_conv = F.conv2d(x.float(), w.float(), padding=1).to(dtype)
        wide_sum = a.float().sum(1).to(dtype)
    assert torch.equal(a @ b, wide_mm)
    assert torch.equal(F.conv2d(x, w, padding=1), wide_conv)
    assert torch.equal(a.sum(1), wide_sum)
    assert (a @ b).dtype == dtype and a.sum(1, dtype=torch.float32).dtype == torch.float32


def test_pointwise_kernels_keep_the_cpus_half_precision_semantics():
    x = make((64,), torch.bfloat16)
    with torch.utils._python_dispatch._disable_current_modes():
        native = [x * 0.1234567, x // 0.37, torch.nan_to_num(x / 0)]
    for got, want in zip([x * 0.1234567, x // 0.37, torch.nan_to_num(x / 0)], native, strict=True):
        assert torch.equal(got, want)


def test_in_place_and_out_variants_write_the_rounded_result_into_their_target():
    a, b = make((8, 32), torch.bfloat16), make((32, 4), torch.bfloat16)
    with torch.utils._python_dispatch._disable_current_modes():
        want = (a.float() @ b.float()).bfloat16()
    out = torch.empty(0, dtype=torch.bfloat16)
    result = torch.mm(a, b, out=out)
    assert result is out and torch.equal(out, want)
    target = torch.zeros(8, 4, dtype=torch.bfloat16)
    view = target[:, :2]
    view.addmm_(a, b[:, :2])
    assert torch.equal(target[:, :2], want[:, :2]) and torch.equal(
        target[:, 2:], torch.zeros(8, 2, dtype=torch.bfloat16)
    )


def test_the_cpus_errors_are_kept():
    a, b = make((2, 3), torch.bfloat16), make((4, 5), torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        a @ b
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        a.float() @ make((3, 2), torch.bfloat16)


def test_float32_work_and_other_devices_are_untouched():
    calls = []

    class Spy(Float32Reference):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_dispatch__(func, types, args, kwargs)

    a = make((4, 4))
    with Spy():
        result = a @ a
    assert calls and torch.equal(result, torch.mm(a, a))
