"""Fast OpInfo conformance subset: PyTorch's own samples for common ops, which the backend
implements, so every sample must match the CPU (tools/conformance.py runs the whole op_db)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tpu  # noqa: F401

_TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "conformance.py"
_spec = importlib.util.spec_from_file_location("conformance", _TOOL)
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)
# The OpInfo database is loaded once per module: one worker runs the whole file under pytest-xdist.
pytestmark = pytest.mark.xdist_group("conformance")

SAMPLES = 3
FLOAT32_OPS = [
    "add", "mul", "sub", "div.no_rounding_mode", "exp", "log", "sum", "mean", "amax", "matmul",
    "mm", "cat", "index_select", "gather", "where", "clamp", "softmax", "log_softmax",
    "transpose", "reshape", "neg", "abs", "max.reduction_with_dim", "permute",
]  # fmt: skip
BFLOAT16_OPS = ["add", "mul", "exp", "sum", "matmul", "softmax"]


@pytest.fixture(scope="module")
def opinfos():
    return {op.full_name: op for op in conformance.load_op_db()}


def _check(op, dtype_name, backward):
    records = list(conformance.run_op(op, (dtype_name,), max_samples=SAMPLES, backward=backward))
    assert records, f"{op.full_name} produced no {dtype_name} samples"
    failures = [r for r in records if r["status"] != conformance.PASS]
    assert not failures, "\n".join(f"{r['phase']} #{r['sample']}: {r['status']}: {r['message']}" for r in failures)


@pytest.mark.parametrize("name", FLOAT32_OPS)
def test_float32_forward_and_backward(opinfos, name):
    _check(opinfos[name], "float32", backward=True)


@pytest.mark.parametrize("name", BFLOAT16_OPS)
def test_bfloat16_forward(opinfos, name):
    _check(opinfos[name], "bfloat16", backward=False)


def test_compare_detects_mismatch():
    expected = torch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError, match="output"):
        conformance.compare(torch.tensor([1.0, 2.5], device="tpu"), expected, torch.float32)
    with pytest.raises(AssertionError, match=r"output\[1\]"):
        conformance.compare((expected.to("tpu"), torch.zeros(2, device="tpu")), (expected, expected), torch.float32)
    with pytest.raises(AssertionError, match="dtype"):
        conformance.compare(torch.tensor([1, 2], device="tpu"), expected, torch.float32)
    with pytest.raises(AssertionError, match="!="):
        conformance.compare(3, 4, torch.float32)
    # NaNs in the same places match; bf16 widens the tolerance.
    conformance.compare(torch.tensor([float("nan")], device="tpu"), torch.tensor([float("nan")]), torch.float32)
    conformance.compare(torch.tensor([1.01], device="tpu"), torch.tensor([1.0]), torch.bfloat16)


def test_views_keep_strides_and_storage_offset():
    base = torch.arange(24.0).reshape(4, 6)
    view = base[1:, ::2]
    moved = conformance._to_tpu(view)
    assert moved.device.type == "tpu"
    assert (moved.stride(), moved.storage_offset()) == (view.stride(), view.storage_offset())
    assert torch.equal(moved.cpu(), view)


def _sample(*args, **kwargs):
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(*args, **kwargs)


def test_forward_statuses():
    x = torch.arange(4.0)
    run = conformance.run_forward
    assert run(lambda t: t * 2, _sample(x), torch.float32) == (conformance.PASS, "")
    # The CPU raises: tpu must raise the same type.
    assert run(lambda t: t.reshape(7), _sample(x), torch.float32)[0] == conformance.PASS
    status, message = run(lambda t: t.reshape(7) if t.device.type == "cpu" else t, _sample(x), torch.float32)
    assert status == conformance.FAIL and "tpu does not" in message
    # Only tpu raises, or gives other values.
    assert (
        run(lambda t: t if t.device.type == "cpu" else t.reshape(7), _sample(x), torch.float32)[0] == conformance.ERROR
    )
    assert run(lambda t: t if t.device.type == "cpu" else t + 1, _sample(x), torch.float32)[0] == conformance.FAIL


def test_backward_compares_gradients():
    x = torch.arange(4.0, requires_grad=True)
    assert conformance.run_backward(lambda t: t.exp(), _sample(x), torch.float32) == (conformance.PASS, "")
    wrong_grad = conformance.run_backward(
        lambda t: t.exp() if t.device.type == "cpu" else t.detach().exp() + t * 0, _sample(x), torch.float32
    )
    assert wrong_grad[0] == conformance.FAIL and "grad[0]" in wrong_grad[1]


def test_tied_indices_are_accepted_only_where_they_point_at_equal_values():
    accept = conformance.accept_tied_indices
    x = torch.tensor([[2.0, 1.0, 2.0, float("nan"), 1.0]])
    expected = x.sort(1)  # values [1, 1, 2, 2, nan]
    tie_swapped = torch.tensor([[4, 1, 2, 0, 3]], device="tpu")
    actual = (expected.values.to("tpu"), tie_swapped)
    conformance.compare(accept("sort", _sample(x, 1), actual, expected), expected, torch.float32)
    conformance.compare(
        accept("argsort", _sample(x, 1), tie_swapped, expected.indices), expected.indices, torch.float32
    )
    wrong = [
        torch.tensor([[4, 0, 2, 1, 3]], device="tpu"),  # a 2 where the CPU has a 1
        torch.tensor([[1, 1, 2, 0, 3]], device="tpu"),  # a repeated index
        torch.tensor([[1, 4, 2, 0, 5]], device="tpu"),  # out of range
    ]
    for index in wrong:
        with pytest.raises(AssertionError):
            conformance.compare(accept("sort", _sample(x, 1), (actual[0], index), expected), expected, torch.float32)
    # A stable sort must give the CPU's order exactly.
    stable = _sample(x, dim=1, stable=True)
    with pytest.raises(AssertionError):
        conformance.compare(accept("sort", stable, actual, expected), expected, torch.float32)
    # kthvalue without keepdim: one index per row, ties allowed.
    y = torch.tensor([[3, 1, 3], [5, 5, 0]])
    kth = y.kthvalue(2, 1)
    tpu_kth = (kth.values.to("tpu"), torch.tensor([2, 0], device="tpu"))
    conformance.compare(accept("kthvalue", _sample(y, 2, 1), tpu_kth, kth), kth, torch.int64)


def test_eigenvalues_are_compared_in_the_cpus_order(opinfos):
    # linalg.eig's eigenvalues come in no specified order: tpu's, in its own order, are put in the
    # CPU's (with their eigenvector columns) and pass; values that differ still fail.
    expected = (torch.tensor([[3.0 + 1j, 3.0 - 1j, -2.0 + 0j]]), torch.tensor([[[0.1, 0.2, 0.3]] * 3]))
    permuted = (expected[0][:, [2, 0, 1]].to("tpu"), expected[1][..., [2, 0, 1]].to("tpu"))
    aligned = conformance.align_eigenvalues("linalg.eig", permuted, expected)
    conformance.compare(aligned, expected, torch.complex64)
    assert conformance.align_eigenvalues("linalg.svd", permuted, expected) is permuted
    wrong = (permuted[0] + 1e-3, permuted[1])
    with pytest.raises(AssertionError, match=r"output\[0\]"):
        conformance.compare(conformance.align_eigenvalues("linalg.eig", wrong, expected), expected, torch.complex64)
    _check(opinfos["linalg.eig"], "complex64", backward=False)


def test_random_ops_are_skipped(opinfos):
    assert conformance.skip_reason(opinfos["bernoulli"])
    assert conformance.skip_reason(opinfos["nn.functional.dropout"])
    assert conformance.skip_reason(opinfos["empty_like"])
    assert conformance.skip_reason(opinfos["add"]) is None
    assert conformance.skip_reason(opinfos["nn.functional.normalize"]) is None


def test_not_implemented_is_classified(opinfos):
    # to_sparse reaches aten::_to_sparse, which has no lowering (tpu has no sparse layouts): not an
    # error, not a pass.
    records = list(conformance.run_op(opinfos["to_sparse"], ("float32",), max_samples=1, backward=False))
    assert [r["status"] for r in records] == [conformance.NOT_IMPLEMENTED]


def test_cli_reports_a_crash_and_continues(tmp_path):
    # A worker that dies mid-op (here: killed by SIGSEGV from a sitecustomize hook) costs only that
    # op; the next op still runs in a fresh worker. The hook fires when the worker opens its progress
    # file to write the next record while the last one written is a `mul` sample: an audit hook runs
    # in the worker's own thread, so the kill lands at that point on every machine, however fast.
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import json, os, signal, sys\n"
        "if '--worker' in sys.argv:\n"
        "    progress = sys.argv[sys.argv.index('--progress') + 1]\n"
        "    def kill_after_mul(event, args):\n"
        "        if event == 'open' and args[0] == progress and 'w' in str(args[1]):\n"
        "            try:\n"
        "                with open(progress) as f:\n"
        "                    last = json.load(f)['op']\n"
        "            except (OSError, ValueError):\n"
        "                return\n"
        "            if last == 'mul':\n"
        "                os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    sys.addaudithook(kill_after_mul)\n"
    )
    out = tmp_path / "out.json"
    markdown = tmp_path / "out.md"
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    args = ["--ops", "mul,neg", "--dtypes", "float32", "--max-samples", "2", "--no-backward", "--quiet"]
    args += ["--json", str(out), "--markdown", str(markdown)]
    done = subprocess.run([sys.executable, str(_TOOL), *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["per_op"]["mul"]["crash"] == 1
    neg = report["per_op"]["neg"]
    assert neg["pass"] >= 1 and neg["crash"] == neg["fail"] == neg["error"] == 0
    assert "crash" in markdown.read_text()
