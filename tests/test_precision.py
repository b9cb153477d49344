"""The precision-mode API: DEFAULT is the default, torch.tpu.precision is a setter and a context
manager, and torch.set_float32_matmul_precision maps onto it. (The error band of each mode's
products is tested with matmul in test_linalg.py and convolution in test_conv.py.)"""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, make, run_python

from torch_tpu.precision import Precision, precision


def bf16_rounded_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.bfloat16().double() @ b.bfloat16().double()


def mode_of_product(a: torch.Tensor, b: torch.Tensor) -> str:
    """Which arithmetic the tpu used for a @ b: the bf16-rounded product or the f32 one."""
    got = (a.to(TPU) @ b.to(TPU)).cpu().double()
    to_rounded = (got - bf16_rounded_product(a, b)).abs().max().item()
    to_exact = (got - a.double() @ b.double()).abs().max().item()
    assert min(to_rounded, to_exact) < 1e-4, (to_rounded, to_exact)
    return "DEFAULT" if to_rounded < to_exact else "f32"


def test_default_is_default_in_a_fresh_process():
    # (The autouse fixture sets HIGHEST in this process, so the default is checked in a new one.)
    result = run_python(
        "import torch\n"
        "a, b = torch.rand(64, 256) - 0.5, torch.rand(256, 48) - 0.5\n"
        "got = (a.to('tpu') @ b.to('tpu')).cpu().double()\n"
        "rounded = a.bfloat16().double() @ b.bfloat16().double()\n"
        "print(torch.tpu.precision().name, torch.get_float32_matmul_precision())\n"
        "print((got - rounded).abs().max().item(), (got - a.double() @ b.double()).abs().max().item())\n"
    )
    assert result.returncode == 0, result.stderr
    names, errors = result.stdout.split("\n")[:2]
    # DEFAULT on tpu, while the CPU keeps torch's own default.
    assert names == "DEFAULT highest"
    to_rounded, to_exact = map(float, errors.split())
    assert to_rounded < 1e-5 and to_exact > 1e-3


def test_setting_chosen_before_import_is_kept():
    result = run_python(
        "import torch\n"
        "torch.set_float32_matmul_precision('high')\n"
        "import torch_tpu\n"
        "print(torch.tpu.precision().name)\n",
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "HIGH"


@pytest.mark.parametrize(
    "name, expected", [("medium", Precision.DEFAULT), ("high", Precision.HIGH), ("highest", Precision.HIGHEST)]
)
def test_torch_setting_maps_onto_modes(name, expected):
    saved = torch.get_float32_matmul_precision()
    try:
        with precision(Precision.DEFAULT if expected != Precision.DEFAULT else Precision.HIGHEST):
            torch.set_float32_matmul_precision(name)
            assert precision() == expected
    finally:
        torch.set_float32_matmul_precision(saved)


def test_torch_setting_to_its_current_value_still_switches():
    # torch's own default is "highest": asking for it again must still give HIGHEST on tpu.
    assert torch.get_float32_matmul_precision() == "highest"
    a, b = make((32, 128)), make((128, 16))
    with precision(Precision.DEFAULT):
        assert mode_of_product(a, b) == "DEFAULT"
        torch.set_float32_matmul_precision("highest")
        assert precision() == Precision.HIGHEST
        assert mode_of_product(a, b) == "f32"


def test_unknown_torch_name_changes_nothing():
    with precision(Precision.HIGH):
        with pytest.warns(UserWarning, match="is not one of"):
            torch.set_float32_matmul_precision("fastest")
        assert precision() == Precision.HIGH
    assert torch.get_float32_matmul_precision() == "highest"


def test_tpu_setting_leaves_the_cpu_setting_alone():
    with precision("default"):
        assert torch.get_float32_matmul_precision() == "highest"


def test_setter_and_context_manager():
    assert precision() == Precision.HIGHEST  # the autouse fixture
    a, b = make((32, 128)), make((128, 16))
    with precision(Precision.DEFAULT) as mode:
        assert mode == Precision.DEFAULT
        assert mode_of_product(a, b) == "DEFAULT"
        with precision("highest"):
            assert mode_of_product(a, b) == "f32"
        assert precision() == Precision.DEFAULT
    assert precision() == Precision.HIGHEST
    precision("high")  # a plain call is a setter; the fixture restores HIGHEST afterwards
    assert precision() == Precision.HIGH


@pytest.mark.parametrize("name", ["DEFAULT", "default", "medium", " High ", "HIGHEST"])
def test_accepted_names(name):
    expected = {"default": "DEFAULT", "medium": "DEFAULT", "high": "HIGH", "highest": "HIGHEST"}[name.strip().lower()]
    with precision(name) as mode:
        assert mode.name == expected


@pytest.mark.parametrize("bad", ["low", "", 3, 1.5])
def test_bad_mode_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="unknown precision .*expected a torch.tpu.Precision or one of"):
        precision(bad)
    assert precision() == Precision.HIGHEST


def test_torch_tpu_module_exposes_the_api():
    assert torch.tpu.Precision is Precision
    assert torch.tpu.precision is precision
    with torch.tpu.precision(torch.tpu.Precision.HIGH):
        assert torch.tpu.precision() == torch.tpu.Precision.HIGH


def test_new_torch_precision_api_does_not_break_tpu_ops():
    # After torch's new per-backend API is used alongside the legacy one, torch refuses to report
    # a single float32 matmul precision; tpu products must not depend on asking it. CUDA's 'tf32'
    # maps to HIGH, as set_float32_matmul_precision("high") (TF32 on CUDA) does.
    result = run_python(
        "import torch\n"
        "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
        "a = torch.rand(8, 8)\n"
        "print(torch.allclose((a.to('tpu') @ a.to('tpu')).cpu(), a @ a, rtol=1e-2, atol=1e-2),"
        " torch.tpu.precision().name)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True HIGH"


@pytest.mark.parametrize("chosen", ["medium", "high", "highest"])
def test_torch_compile_keeps_the_mode_that_set_float32_matmul_precision_chose(chosen):
    # Dynamo saves and restores torch's fp32 settings around each frame; writing back the value a
    # setting already had (medium reads back as CUDA's "tf32") must not change the tpu mode, or a
    # compiled graph would multiply at another precision than eager code.
    result = run_python(
        "import torch, torch_tpu\n"
        f"torch.set_float32_matmul_precision({chosen!r})\n"
        "before = torch.tpu.precision().name\n"
        "f = torch.compile(lambda a, b: a @ b, backend='tpu')\n"
        "a = torch.rand(16, 16, device='tpu')\n"
        "same = torch.equal(f(a, a).cpu(), (a @ a).cpu())\n"
        "print(before, torch.tpu.precision().name, same)\n"
    )
    assert result.returncode == 0, result.stderr
    expected = {"medium": "DEFAULT", "high": "HIGH", "highest": "HIGHEST"}[chosen]
    assert result.stdout.split() == [expected, expected, "True"]


def test_mode_switch_is_not_hidden_by_the_compile_cache():
    a, b = make((8, 64)), make((64, 8))
    results = {}
    for mode in ["HIGHEST", "DEFAULT", "HIGH", "HIGHEST"]:
        with precision(mode):
            results.setdefault(mode, []).append((a.to(TPU) @ b.to(TPU)).cpu())
    assert torch.equal(results["HIGHEST"][0], results["HIGHEST"][1])
    assert not torch.equal(results["HIGHEST"][0], results["DEFAULT"][0])
    assert not torch.equal(results["HIGH"][0], results["DEFAULT"][0])
    torch.testing.assert_close(results["DEFAULT"][0].double(), bf16_rounded_product(a, b), rtol=1e-6, atol=1e-5)
