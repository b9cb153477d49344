#!/usr/bin/env python3
"""OpInfo conformance harness: runs PyTorch's own OpInfo samples on the tpu device and compares
every result (and, for float32, every input gradient) with the CPU.

Usage:
    python tools/conformance.py --json out.json --markdown docs/conformance.md
    python tools/conformance.py --ops add,mul,softmax --dtypes float32 --max-samples 3

Ops run in worker subprocesses, a chunk of ops each, reporting one JSON line per sample. Before
each sample a worker writes what it is about to run to a progress file, so when a worker dies
(segfault, abort) the parent reports a "crash" for that op and starts a new worker on the ops
after it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

# Outcomes of one sample.
PASS, FAIL, ERROR, NOT_IMPLEMENTED, CRASH = "pass", "fail", "error", "not_implemented", "crash"
STATUSES = (PASS, FAIL, ERROR, NOT_IMPLEMENTED, CRASH)

DTYPE_NAMES = ("float32", "bfloat16", "int64", "bool", "complex64")
BF16_TOLERANCE = dict(rtol=1.6e-2, atol=1e-2)

# Ops whose outputs are random (or uninitialized memory), so no CPU result can check them.
# Ops that PyTorch itself marks as non-deterministic for test_compare_cpu, or with
# has_nondeterministic_output, are found automatically (see skip_reason); these are the rest.
RANDOM_OPS = {
    "randn": "random output",
    "randint": "random output",
    "normal.number_mean": "random output",
    "nn.functional.alpha_dropout": "random output (dropout mask)",
    "nn.functional.feature_alpha_dropout.with_train": "random output (dropout mask)",
}

# Op families for the per-family rates (first match wins; the OpInfo subclass decides first).
LINALG_OPS = set(
    """
    mm bmm matmul addmm addmv addbmm baddbmm addr mv dot vdot inner outer ger kron tensordot einsum
    chain_matmul cholesky cholesky_solve cholesky_inverse triangular_solve lu lu_solve lu_unpack qr svd
    pinverse inverse det logdet slogdet matrix_exp geqrf ormqr symeig trace tril triu cross cdist
    __rmatmul__ addmm.decomposed nn.functional.linear nn.functional.bilinear svd_lowrank pca_lowrank
    _addmm_activation
    """.split()
)
INDEXING_OPS = set(
    """
    cat concat concatenate stack hstack vstack dstack column_stack row_stack split split_with_sizes
    tensor_split chunk unbind hsplit vsplit dsplit index_select index_add index_copy index_fill
    index_put index_reduce gather scatter scatter_add scatter_reduce take take_along_dim put masked_fill
    masked_scatter masked_select where nonzero nonzero_static argwhere reshape reshape_as view view_as
    flatten unflatten squeeze unsqueeze transpose permute movedim moveaxis swapaxes swapdims t T mT H mH
    adjoint expand expand_as expand_copy broadcast_to broadcast_tensors repeat repeat_interleave tile
    flip fliplr flipud roll rot90 narrow narrow_copy select select_scatter slice slice_scatter diagonal
    diagonal_scatter diag diag_embed diagflat as_strided as_strided_scatter unfold unfold_copy
    atleast_1d atleast_2d atleast_3d ravel contiguous clone view_copy resize_ resize_as_ __getitem__
    __setitem__ sort argsort msort topk kthvalue unique unique_consecutive searchsorted bucketize
    block_diag meshgrid cartesian_prod combinations triu_indices tril_indices squeeze_copy permute_copy
    transpose_copy t_copy alias_copy
    """.split()
)

NN_OPS = set(
    """
    softmax log_softmax _softmax_backward_data _log_softmax_backward_data native_layer_norm
    native_batch_norm _native_batch_norm_legit native_dropout_backward _upsample_bilinear2d_aa
    """.split()
)


def family_of(op) -> str:
    """A coarse family for the per-family table."""
    kind = type(op).__name__
    name = op.name
    if kind == "UnaryUfuncInfo":
        return "elementwise unary"
    if kind == "BinaryUfuncInfo":
        return "elementwise binary"
    if kind == "ReductionOpInfo":
        return "reductions"
    if kind == "ShapeFuncInfo" or name in INDEXING_OPS or name.split(".")[0] in INDEXING_OPS:
        return "indexing/manipulation"
    if name.startswith("linalg.") or name in LINALG_OPS:
        return "linalg"
    if name.startswith("nn.functional.") or name in NN_OPS:
        return "nn.functional"
    return "other"


def _skip_decorator_reasons(op) -> list[str]:
    """Reasons of the unittest.skip decorators an OpInfo applies to test_compare_cpu (or to
    every test): the reason string lives in the decorator's closure."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    reasons = []
    for info in op.decorators:
        if not isinstance(info, DecorateInfo) or info.test_name not in (None, "test_compare_cpu"):
            continue
        for decorator in info.decorators:
            for cell in getattr(decorator, "__closure__", None) or ():
                if isinstance(cell.cell_contents, str):
                    reasons.append(cell.cell_contents)
    return reasons


def skip_reason(op) -> str | None:
    """Why an OpInfo is not compared at all (random or uninitialized outputs), or None."""
    if op.full_name in RANDOM_OPS:
        return RANDOM_OPS[op.full_name]
    if getattr(op, "has_nondeterministic_output", False):
        return "has_nondeterministic_output (uninitialized or random values)"
    for reason in _skip_decorator_reasons(op):
        if "deterministic" in reason:
            return f"PyTorch skips test_compare_cpu: {reason}"
    return None


def load_op_db():
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


# ----------------------------------------------------------------------------------------
# Running one sample


# Tensor arguments that PyTorch requires on the host whatever the device of the op: OpInfo name
# -> positions in sample.args that stay on the CPU.
HOST_ARGS = {"tensor_split": (0,)}


def _to_tpu(value, requires_grad: bool = False):
    """A tpu copy of a CPU tensor with the same sizes, strides and storage offset (a view keeps
    the rest of its storage, which as_strided can reach); a CPU device becomes tpu; Python
    scalars and everything else stay as they are."""
    import torch

    if isinstance(value, torch.Tensor):
        value_cpu = value.detach()
        if value_cpu.layout != torch.strided or (value_cpu.is_contiguous() and value_cpu.storage_offset() == 0):
            moved = value_cpu.to("tpu")
        else:
            storage_numel = value_cpu.untyped_storage().nbytes() // value_cpu.element_size()
            whole = value_cpu.as_strided((storage_numel,), (1,), 0).to("tpu")
            moved = whole.as_strided(value_cpu.size(), value_cpu.stride(), value_cpu.storage_offset()).detach()
        if requires_grad and value.requires_grad:
            moved.requires_grad_(True)
        return moved
    if isinstance(value, torch.device) and value.type == "cpu":
        return torch.device("tpu")
    if isinstance(value, str) and value == "cpu":
        return "tpu"
    return value


def _tpu_sample(op, sample, requires_grad: bool = False):
    from torch.testing._internal.opinfo.core import SampleInput
    from torch.utils._pytree import tree_map

    def move(value):
        return tree_map(lambda v: _to_tpu(v, requires_grad), value)

    host = HOST_ARGS.get(getattr(op, "full_name", None), ())
    args = [arg if i in host else move(arg) for i, arg in enumerate(sample.args)]
    return SampleInput(
        move(sample.input),
        args=tuple(args),
        kwargs=move(dict(sample.kwargs)),
        output_process_fn_grad=sample.output_process_fn_grad,
    )


def _tolerance(expected, sample_dtype):
    """torch.testing defaults for the result's dtype, widened to bf16's when the sample is
    bf16 (its intermediates are bf16 even when a result is float32)."""
    import torch

    if isinstance(expected, torch.Tensor) and sample_dtype == torch.bfloat16 and expected.is_floating_point():
        return BF16_TOLERANCE
    if isinstance(expected, torch.Tensor) and expected.dtype == torch.bfloat16:
        return BF16_TOLERANCE
    return {}


def compare(actual, expected, sample_dtype, path: str = "output") -> None:
    """Raises AssertionError when the tpu result differs from the CPU one."""
    import torch

    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        if actual.device.type != "tpu" and expected.device.type == "cpu":
            raise AssertionError(f"{path}: result is on {actual.device}, expected tpu")
        torch.testing.assert_close(
            actual.detach().cpu(),
            expected.detach(),
            equal_nan=True,
            msg=lambda m: f"{path}: {m}",
            **_tolerance(expected, sample_dtype),
        )
    elif isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected a sequence of {len(expected)}, got {type(actual).__name__}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            compare(a, e, sample_dtype, f"{path}[{i}]")
    elif isinstance(expected, float) and isinstance(actual, float):
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif not (actual == expected):
        raise AssertionError(f"{path}: {actual!r} != {expected!r}")


# Ops whose index output may differ from the CPU's among tied values, where either index is right:
# op name -> (position among the sample's args of dim, of keepdim or None).
TIED_INDEX_OPS = {"sort": (0, None), "argsort": (0, None), "topk": (1, None), "kthvalue": (1, 2)}


def _argument(sample, position, name, default):
    return sample.args[position] if position < len(sample.args) else sample.kwargs.get(name, default)


def accept_tied_indices(op_name, sample, actual, expected):
    """`actual` with its index output replaced by the CPU's where the two differ only among ties:
    every index is in range, points at the value the CPU's index points at and, for sort, argsort
    and topk, is distinct along dim. Otherwise (and for stable sorts, which must match exactly)
    `actual` unchanged, so compare() reports the difference."""
    import torch

    if op_name not in TIED_INDEX_OPS or sample.kwargs.get("stable", False):
        return actual
    x = sample.input
    single = op_name == "argsort"
    got, want = (actual, expected) if single else (actual[1], expected[1])
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or got.shape != want.shape or got.dtype != want.dtype:
        return actual
    dim_position, keepdim_position = TIED_INDEX_OPS[op_name]
    dim = _argument(sample, dim_position, "dim", -1)
    index, reference = got.detach().cpu(), want
    if keepdim_position is not None and not _argument(sample, keepdim_position, "keepdim", False):
        index, reference = index.unsqueeze(dim), reference.unsqueeze(dim)
    if index.numel() == 0 or index.min() < 0 or index.max() >= x.shape[dim]:
        return actual
    if op_name != "kthvalue" and index.shape[dim] > 1 and not (index.sort(dim).values.diff(dim=dim) > 0).all():
        return actual
    try:
        torch.testing.assert_close(x.gather(dim, index), x.gather(dim, reference), rtol=0, atol=0, equal_nan=True)
    except AssertionError:
        return actual
    return want.to(got.device) if single else (actual[0], want.to(got.device))


# Ops whose eigenvalues come in no specified order ("not guaranteed to be in any specific order",
# torch.linalg.eig's documentation): LAPACK's is the order its QR iteration deflated them in.
EIGENVALUE_ORDER_OPS = {"linalg.eig", "linalg.eigvals"}


def align_eigenvalues(op_name, actual, expected):
    """`actual` (eigenvalues, or the OpInfo's (eigenvalues, |eigenvectors|)) with each matrix's
    eigenvalues, and their eigenvector columns, reordered to the CPU's: each CPU eigenvalue takes
    the nearest tpu one not yet taken, nearest pairs first. compare() then checks the values."""
    import torch

    if op_name not in EIGENVALUE_ORDER_OPS:
        return actual
    values = actual[0] if isinstance(actual, tuple) else actual
    reference = expected[0] if isinstance(expected, tuple) else expected
    if not isinstance(reference, torch.Tensor) or values.shape != reference.shape or values.numel() == 0:
        return actual
    _tests_on_path()
    from eigenvalue_order import matched_order

    order = matched_order(values.detach().cpu(), reference.detach().cpu()).to(values.device)
    aligned = values.gather(-1, order)
    if not isinstance(actual, tuple):
        return aligned
    vectors = actual[1]
    columns = order.unsqueeze(-2).expand(vectors.shape)
    return (aligned, vectors.gather(-1, columns), *actual[2:])


def _is_tpu_not_implemented(exc: BaseException) -> bool:
    return isinstance(exc, NotImplementedError) and "tpu" in str(exc)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    return text[:400]


def _float_tensors(value) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _grad_inputs(sample) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    leaves = tree_leaves([sample.input, list(sample.args), dict(sample.kwargs)])
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _cpu_fallbacks() -> int:
    import torch_tpu.metrics

    return int(torch_tpu.metrics.snapshot().get("cpu_fallbacks", 0))


def _tests_on_path():
    """Makes tests/'s plain helper modules (no pytest) importable."""
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def _cpu_reference(dtype):
    """For bf16 samples the CPU side computes its accumulating kernels in f32 and rounds once, as
    the tests do (tests/float32_reference.py): the CPU's own bf16 kernels differ between AVX2 and
    AVX-512 machines, and sum in bf16 where tpu accumulates in f32."""
    import contextlib

    import torch

    if dtype != torch.bfloat16:
        return contextlib.nullcontext()
    _tests_on_path()
    from float32_reference import Float32Reference

    return Float32Reference()


def run_forward(op, sample, dtype) -> tuple[str, str]:
    """(status, message) of one forward sample."""
    try:
        tpu_sample = _tpu_sample(op, sample)  # before the CPU run, which may modify its inputs in place
    except Exception as exc:  # noqa: BLE001 (e.g. a sparse or complex input tpu cannot hold)
        return (NOT_IMPLEMENTED if _is_tpu_not_implemented(exc) else ERROR), f"moving the sample: {_short(exc)}"
    cpu_exc = None
    try:
        with _cpu_reference(dtype):
            expected = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
    except Exception as exc:  # noqa: BLE001 (any CPU exception is a valid expectation)
        cpu_exc = exc
    fallbacks = _cpu_fallbacks()
    try:
        actual = tpu_sample.output_process_fn_grad(op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs))
    except Exception as exc:  # noqa: BLE001
        if _is_tpu_not_implemented(exc):
            return NOT_IMPLEMENTED, _short(exc)
        if cpu_exc is not None:
            if type(exc) is type(cpu_exc):
                return PASS, f"both raise {type(exc).__name__}"
            return FAIL, f"CPU raises {type(cpu_exc).__name__}, tpu raises {_short(exc)}"
        return ERROR, _short(exc)
    if _cpu_fallbacks() != fallbacks:
        return NOT_IMPLEMENTED, "ran through the CPU fallback"
    if cpu_exc is not None:
        return FAIL, f"CPU raises {_short(cpu_exc)}; tpu does not"
    try:
        actual = accept_tied_indices(getattr(op, "name", None), sample, actual, expected)
        actual = align_eigenvalues(getattr(op, "name", None), actual, expected)
        compare(actual, expected, dtype)  # reading the values also surfaces asynchronous errors
    except AssertionError as exc:
        return FAIL, _short(exc)
    except Exception as exc:  # noqa: BLE001
        return (NOT_IMPLEMENTED if _is_tpu_not_implemented(exc) else ERROR), _short(exc)
    return PASS, ""


def run_backward(op, sample, dtype) -> tuple[str, str] | None:
    """(status, message) of the input gradients of one sample, or None when the sample has no
    differentiable output (or the CPU cannot differentiate it)."""
    import torch

    try:
        tpu_sample = _tpu_sample(op, sample, requires_grad=True)
    except Exception as exc:  # noqa: BLE001
        return (NOT_IMPLEMENTED if _is_tpu_not_implemented(exc) else ERROR), f"moving the sample: {_short(exc)}"
    try:
        cpu_processed = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
        cpu_out = [t for t in _float_tensors(cpu_processed) if t.requires_grad]
        cpu_inputs = _grad_inputs(sample)
        if not cpu_out or not cpu_inputs:
            return None
        generator = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in cpu_out]
        expected = torch.autograd.grad(cpu_out, cpu_inputs, cotangents, allow_unused=True)
    except Exception:  # noqa: BLE001 (not differentiable on the CPU either: nothing to check)
        return None
    fallbacks = _cpu_fallbacks()
    try:
        tpu_processed = tpu_sample.output_process_fn_grad(op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs))
        tpu_processed = align_eigenvalues(getattr(op, "name", None), tpu_processed, cpu_processed)
        tpu_out = [t for t in _float_tensors(tpu_processed) if t.requires_grad]
        tpu_inputs = _grad_inputs(tpu_sample)
        if len(tpu_out) != len(cpu_out) or len(tpu_inputs) != len(cpu_inputs):
            return FAIL, f"{len(tpu_out)} differentiable outputs on tpu, {len(cpu_out)} on the CPU"
        actual = torch.autograd.grad(tpu_out, tpu_inputs, [c.to("tpu") for c in cotangents], allow_unused=True)
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            if (a is None) != (e is None):
                return FAIL, f"grad[{i}]: {'None' if a is None else 'a tensor'} on tpu, not on the CPU"
            if e is not None:
                compare(a, e, dtype, f"grad[{i}]")
    except AssertionError as exc:
        return FAIL, _short(exc)
    except Exception as exc:  # noqa: BLE001
        if _is_tpu_not_implemented(exc):
            return NOT_IMPLEMENTED, _short(exc)
        return ERROR, _short(exc)
    if _cpu_fallbacks() != fallbacks:
        return NOT_IMPLEMENTED, "ran through the CPU fallback"
    return PASS, ""


def run_op(op, dtype_names=DTYPE_NAMES, max_samples=8, backward=True, on_progress=None):
    """Yields one record (a dict) per sample of `op`: forward for each supported dtype, then
    backward for float32. `on_progress(record_stub)` is called before each sample runs."""
    import itertools

    import torch

    supported = op.supported_dtypes("cpu")
    family = family_of(op)
    phases = [("forward", name) for name in dtype_names]
    if backward and op.supports_autograd and "float32" in dtype_names:
        phases.append(("backward", "float32"))
    for phase, dtype_name in phases:
        dtype = getattr(torch, dtype_name)
        if dtype not in supported:
            continue
        stub = dict(op=op.full_name, family=family, dtype=dtype_name, phase=phase)
        try:
            torch.manual_seed(0)
            samples = list(
                itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=phase == "backward"), max_samples)
            )
        except Exception as exc:  # noqa: BLE001 (a broken sample generator is PyTorch's, not ours)
            yield dict(stub, sample=-1, status=ERROR, message=f"sample_inputs failed: {_short(exc)}")
            continue
        for index, sample in enumerate(samples):
            record = dict(stub, sample=index)
            if on_progress is not None:
                on_progress(record)
            try:
                result = (run_forward if phase == "forward" else run_backward)(op, sample, dtype)
            except Exception as exc:  # noqa: BLE001 (a harness-level failure is still a result)
                result = (ERROR, f"harness: {_short(exc)} {traceback.format_exc(limit=2)[-200:]}")
            if result is not None:
                yield dict(record, status=result[0], message=result[1])


# ----------------------------------------------------------------------------------------
# Worker process


def worker_main(args) -> int:
    warnings.filterwarnings("ignore")
    import torch

    import torch_tpu

    torch.set_num_threads(1)
    # OpInfo tolerances are for f32 arithmetic, so products run in HIGHEST, not the default mode.
    torch_tpu.precision(torch_tpu.Precision.HIGHEST)
    by_name = {op.full_name: op for op in load_op_db()}
    dtype_names = args.dtypes.split(",")

    def on_progress(record):
        with open(args.progress, "w") as f:
            json.dump(record, f)

    with open(args.results, "a") as out:
        for name in args.ops.split(","):
            op = by_name[name]
            for record in run_op(op, dtype_names, args.max_samples, not args.no_backward, on_progress):
                out.write(json.dumps(record) + "\n")
                out.flush()
            out.write(json.dumps(dict(op=name, done=True)) + "\n")
            out.flush()
    return 0


# ----------------------------------------------------------------------------------------
# Parent: chunks, crashes, report


def _read_lines(path):
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut short by a crash
    return records


class Worker:
    """One subprocess running a list of ops; restarted after the op that killed it."""

    def __init__(self, ops, args, workdir, index):
        self.pending = list(ops)
        self.args = args
        self.results = os.path.join(workdir, f"results{index}.jsonl")
        self.progress = os.path.join(workdir, f"progress{index}.json")
        self.stderr_path = os.path.join(workdir, f"stderr{index}.txt")
        self.proc = None
        self.consumed = 0  # lines of results already collected
        self.last_progress = time.time()
        self.records = []
        self.done_ops = []
        self.start_failures = 0

    def start(self):
        if os.path.exists(self.progress):
            os.remove(self.progress)
        env = dict(os.environ)
        env.pop("TORCH_TPU_CPU_FALLBACK", None)  # a fallback would compare the CPU with itself
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            "--ops", ",".join(self.pending),
            "--dtypes", self.args.dtypes,
            "--max-samples", str(self.args.max_samples),
            "--results", self.results,
            "--progress", self.progress,
        ]  # fmt: skip
        if self.args.no_backward:
            cmd.append("--no-backward")
        # stderr to a file: a pipe nobody reads would block a chatty worker.
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        self.last_progress = time.time()

    def collect(self):
        lines = _read_lines(self.results)
        for record in lines[self.consumed :]:
            if record.get("done"):
                self.done_ops.append(record["op"])
                if record["op"] in self.pending:
                    self.pending.remove(record["op"])
            else:
                self.records.append(record)
        if len(lines) > self.consumed:
            self.last_progress = time.time()
        self.consumed = len(lines)
        if os.path.exists(self.progress):
            self.last_progress = max(self.last_progress, os.path.getmtime(self.progress))

    def current(self):
        try:
            with open(self.progress) as f:
                return json.load(f)
        except (OSError, json.JSONDecodeError):
            return None

    def poll(self, stall_timeout) -> bool:
        """True while the worker still has work. Restarts it after a crash or a hang."""
        self.collect()
        if self.proc is None:
            if not self.pending:
                return False
            self.start()
            return True
        code = self.proc.poll()
        hung = code is None and time.time() - self.last_progress > stall_timeout
        if code is None and not hung:
            return True
        if hung:
            self.proc.kill()
            self.proc.wait()
            self.collect()
        with open(self.stderr_path, errors="replace") as f:
            stderr = f.read()
        self.proc = None
        if not self.pending:
            return False
        where = self.current()
        if where is None and not hung and self.start_failures < 2:
            # Died before its first sample (e.g. the extension was being rebuilt): not the op's fault.
            self.start_failures += 1
            time.sleep(5)
            return True
        # The first pending op was running when the worker died (or hung).
        victim = self.pending.pop(0)
        where = where if where and where.get("op") == victim else {}
        why = f"no progress for {stall_timeout:.0f}s (killed)" if hung else f"worker exited with {code}"
        tail = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
        stub = dict(op=victim, family=where.get("family", ""), dtype=where.get("dtype", ""))
        self.records.append(
            dict(stub, phase=where.get("phase", ""), sample=where.get("sample", -1), status=CRASH,
                 message=f"{why}; {tail}".strip("; "))
        )  # fmt: skip
        self.done_ops.append(victim)
        return bool(self.pending)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.collect()


def run_all(op_names, args):
    """Runs the ops in `--jobs` workers of `--chunk-size` ops; returns (records, ops not run)."""
    chunks = [op_names[i : i + args.chunk_size] for i in range(0, len(op_names), args.chunk_size)]
    workdir = tempfile.mkdtemp(prefix="conformance-")
    deadline = time.time() + args.time_budget if args.time_budget else None
    active, records, finished_ops, index, reported = [], [], [], 0, 0
    started = time.time()
    while chunks or active:
        while chunks and len(active) < args.jobs and (deadline is None or time.time() < deadline):
            active.append(Worker(chunks.pop(0), args, workdir, index))
            index += 1
        if deadline is not None and time.time() >= deadline:
            for worker in active:
                worker.stop()
            break
        for worker in list(active):
            if not worker.poll(args.stall_timeout):
                active.remove(worker)
                records += worker.records
                finished_ops += worker.done_ops
                worker.records, worker.done_ops = [], []
        done = len(finished_ops) + sum(len(w.done_ops) for w in active)
        if not args.quiet and done != reported:
            print(f"{done}/{len(op_names)} ops, {time.time() - started:.0f}s", file=sys.stderr, flush=True)
            reported = done
        time.sleep(0.2)
    for worker in active:  # stopped by the time budget: keep only the ops they finished
        finished_ops += worker.done_ops
        records += [r for r in worker.records if r["op"] in worker.done_ops]
    shutil.rmtree(workdir, ignore_errors=True)
    finished = set(finished_ops)
    return records, [name for name in op_names if name not in finished]


def summarize(records, ops_info, skipped, not_run, command, elapsed):
    """The JSON report: per-op counts, overall, implemented-only and per-family rates."""
    per_op = collections.OrderedDict()
    for name, family in ops_info:
        per_op[name] = dict(family=family, **{s: 0 for s in STATUSES}, first_problem="")
    for record in records:
        entry = per_op.setdefault(record["op"], dict(family=record.get("family", ""), **{s: 0 for s in STATUSES}))
        entry[record["status"]] += 1
        if record["status"] != PASS and not entry.get("first_problem"):
            entry["first_problem"] = f"[{record['dtype']} {record['phase']} #{record['sample']}] {record['message']}"
    for name in list(per_op):
        if name in not_run or sum(per_op[name][s] for s in STATUSES) == 0:
            if name not in not_run:
                per_op[name]["no_samples"] = True
            if name in not_run:
                del per_op[name]

    def rates(entries):
        entries = [e for e in entries if sum(e[s] for s in STATUSES)]
        samples = sum(sum(e[s] for s in STATUSES) for e in entries)
        passed = sum(e[PASS] for e in entries)
        ops_passing = sum(1 for e in entries if e[PASS] == sum(e[s] for s in STATUSES))
        return dict(
            ops=len(entries),
            ops_all_pass=ops_passing,
            op_pass_rate=ops_passing / len(entries) if entries else 0.0,
            samples=samples,
            **{f"samples_{s}": sum(e[s] for e in entries) for s in STATUSES},
            sample_pass_rate=passed / samples if samples else 0.0,
        )

    implemented = [e for e in per_op.values() if sum(e[s] for s in STATUSES) > e[NOT_IMPLEMENTED]]
    families = collections.defaultdict(list)
    for e in per_op.values():
        families[e["family"]].append(e)
    return dict(
        command=command,
        elapsed_s=round(elapsed, 1),
        overall=rates(per_op.values()),
        implemented=rates(implemented),
        families={f: dict(all=rates(es), implemented=rates([e for e in es if e in implemented])) for f, es in sorted(families.items())},
        per_op=per_op,
        skipped=skipped,
        not_run=not_run,
    )  # fmt: skip


def _pct(x):
    return f"{100 * x:.1f}%"


def write_markdown(report, path, args):
    o, i = report["overall"], report["implemented"]
    lines = [
        "# OpInfo conformance of the tpu device",
        "",
        "Generated by `tools/conformance.py`: PyTorch's own OpInfo samples (`op_db`) run on `tpu`"
        " and compared with the CPU (`torch.testing.assert_close`, the dtype's default tolerances,"
        " bf16 rtol 1.6e-2 atol 1e-2, equal_nan). For bf16 samples the CPU's accumulating kernels"
        " run in float32 on the same values and round once (tests/float32_reference.py), as in the"
        " tests: its own bf16 kernels differ between processors. Backward: float32 input gradients with a random"
        " cotangent (seed 0). Do not edit by hand: rerun the script.",
        "",
        f"Command: `{report['command']}`  ",
        f"Dtypes: {args.dtypes}; at most {args.max_samples} samples per op and dtype;"
        f" backward: {'no' if args.no_backward else 'float32'}; wall time {report['elapsed_s']:.0f} s.",
        "",
    ]
    if report["not_run"]:
        lines += [
            f"**Subset:** the time budget ended before {len(report['not_run'])} of the selected ops ran;"
            " they are listed at the end and count nowhere.",
            "",
        ]
    lines += [
        "Statuses: pass; fail (mismatch, or the CPU raises and tpu does not / raises another type);"
        " error (tpu raises where the CPU does not); not_implemented (NotImplementedError naming the"
        " tpu device, or a CPU fallback); crash (the worker died or hung on that op; its other"
        ' samples are lost). An op "the backend implements" has at least one sample that did not'
        " end in not_implemented.",
        "",
        "Known limits of the comparison: the index outputs of `sort`, `argsort`, `topk` and"
        " `kthvalue` may differ from the CPU's among tied values (frequent in bf16 and int64"
        " samples; the CPU's default sort is not stable for bf16), where either index is right:"
        " such an output passes when each index is in range, distinct along dim (not for"
        " kthvalue) and points at the value the CPU's points at; stable sorts must match exactly."
        " The eigenvalues of `linalg.eig` and `linalg.eigvals` come in no specified order (PyTorch's"
        " documentation), LAPACK's being its QR iteration's deflation order: tpu's are put in the"
        " CPU's order (each CPU eigenvalue takes the nearest tpu one), with their eigenvector"
        " columns, before the comparison. Float32 uses"
        " torch.testing's default tolerance (atol 1e-5, rtol 1.3e-6), which also flags"
        " accumulation-order differences of matrix products. Complex dtypes other than complex64, and float16/float64,"
        " are not run.",
        "",
        "## Summary",
        "",
        "| scope | ops | ops all pass | samples | pass | fail | error | not impl. | crash | sample pass rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def row(label, r):
        return (
            f"| {label} | {r['ops']} | {r['ops_all_pass']} ({_pct(r['op_pass_rate'])}) | {r['samples']} |"
            f" {r['samples_pass']} | {r['samples_fail']} | {r['samples_error']} |"
            f" {r['samples_not_implemented']} | {r['samples_crash']} | {_pct(r['sample_pass_rate'])} |"
        )

    lines += [row("all ops run", o), row("ops the backend implements", i), ""]
    lines += [
        "## Per family",
        "",
        "| family | ops | ops all pass | samples | pass | fail | error | not impl. | crash | sample pass rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for family, r in report["families"].items():
        lines.append(row(family, r["all"]))
        lines.append(row(f"{family} (implemented)", r["implemented"]))
    broken = [(n, e) for n, e in report["per_op"].items() if e["fail"] or e["error"] or e["crash"]]
    lines += ["", "## Ops with a fail, error or crash", "", "| op | fail | error | crash | first problem |"]
    lines += ["|---|---|---|---|---|"]
    for name, e in broken:
        problem = e["first_problem"].replace("|", "\\|")[:300]
        lines.append(f"| `{name}` | {e['fail']} | {e['error']} | {e['crash']} | {problem} |")
    lines += [
        "",
        "## Per op",
        "",
        "| op | family | pass | fail | error | not impl. | crash | first problem |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in report["per_op"].items():
        problem = e.get("first_problem", "") or ("no samples for the selected dtypes" if e.get("no_samples") else "")
        problem = problem.replace("|", "\\|")[:200]
        lines.append(
            f"| `{name}` | {e['family']} | {e['pass']} | {e['fail']} | {e['error']} |"
            f" {e['not_implemented']} | {e['crash']} | {problem} |"
        )
    lines += ["", "## Skipped ops (random or uninitialized outputs)", "", "| op | reason |", "|---|---|"]
    lines += [f"| `{name}` | {reason} |" for name, reason in report["skipped"].items()]
    if report["not_run"]:
        lines += ["", "## Selected but not run (time budget)", "", ", ".join(f"`{n}`" for n in report["not_run"])]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (full names, e.g. div.floor_rounding); default all")
    parser.add_argument("--dtypes", default=",".join(DTYPE_NAMES), help="comma-separated dtypes")
    parser.add_argument("--max-samples", type=int, default=8, help="samples per op and dtype")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--chunk-size", type=int, default=40, help="ops per worker process")
    parser.add_argument("--no-backward", action="store_true", help="skip the float32 gradient checks")
    parser.add_argument("--json", help="write the report as JSON here")
    parser.add_argument("--markdown", help="write the summary as Markdown here")
    parser.add_argument("--time-budget", type=float, help="seconds; ops not started by then are listed as not run")
    parser.add_argument("--stall-timeout", type=float, default=300, help="kill a worker silent this long (s)")
    parser.add_argument("--quiet", action="store_true")
    # Internal: the worker side.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--progress", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in args.dtypes.split(","):
        if name not in DTYPE_NAMES:
            parser.error(f"unknown dtype {name!r}; choose from {', '.join(DTYPE_NAMES)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    op_db = load_op_db()
    by_name = {op.full_name: op for op in op_db}
    if args.ops:
        selected = args.ops.split(",")
        unknown = [n for n in selected if n not in by_name]
        if unknown:
            print(f"unknown OpInfo names: {', '.join(unknown)}", file=sys.stderr)
            return 2
    else:
        selected = list(by_name)
    skipped = {n: skip_reason(by_name[n]) for n in selected if skip_reason(by_name[n])}
    to_run = [n for n in selected if n not in skipped]
    started = time.time()
    records, not_run = run_all(to_run, args)
    command = "python tools/conformance.py " + " ".join(argv if argv is not None else sys.argv[1:])
    ops_info = [(n, family_of(by_name[n])) for n in to_run]
    report = summarize(records, ops_info, skipped, not_run, command.strip(), time.time() - started)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(report, records=records), f, indent=1)
    if args.markdown:
        write_markdown(report, args.markdown, args)
    o, i = report["overall"], report["implemented"]
    print(
        f"ops run: {o['ops']}, all samples pass: {o['ops_all_pass']} ({_pct(o['op_pass_rate'])}); "
        f"samples {o['samples']}, pass rate {_pct(o['sample_pass_rate'])}; "
        f"implemented ops: {i['ops']}, sample pass rate {_pct(i['sample_pass_rate'])}, "
        f"all pass {i['ops_all_pass']} ({_pct(i['op_pass_rate'])}); skipped {len(skipped)}, not run {len(not_run)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
