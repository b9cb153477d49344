"""torch.autocast("tpu"): CUDA's op lists and cast policies (csrc/aten/autocast.cc), the AMP
functions of torch.tpu (torch_tpu/amp.py), nesting, the cast cache, the errors, and gradient
checkpointing with and without autocast.

Each op's result dtype is the one its CUDA policy gives; its values are compared with the CPU
computing the same op on the same rounded inputs (in float32 and rounded once, through the
autouse Float32Reference fixture), and, for ops that the CPU's autocast treats the same way,
with the CPU under torch.autocast("cpu")."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from conftest import TPU, assert_close, assert_same_work_alike, make
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

import torch_tpu

LOW = [torch.bfloat16, torch.float16]


def to_tpu(values):
    return [v.to(TPU) if isinstance(v, torch.Tensor) else v for v in values]


def cast(values, dtype):
    return [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def inputs_for(specs) -> list[torch.Tensor]:
    """CPU float32 inputs from shapes, or (shape, low, high) where an op needs a range."""
    inputs = []
    for i, spec in enumerate(specs):
        shape, low, high = spec if isinstance(spec[0], tuple) else (spec, -1, 1)
        inputs.append(make(shape, low=low, high=high, seed=i))
    return inputs


def registered(key: str) -> set[str]:
    """The aten ops with a kernel of their own for the dispatch key `key`."""
    ops = set()
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::") and ("\n" + torch._C._dispatch_dump(name)).count(f"\n{key}:"):
            ops.add(name)
    return ops


# ---- the AMP API ----


def test_default_dtype_is_bfloat16_and_float16_is_supported():
    assert torch.amp.is_autocast_available("tpu")
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.tpu.is_bf16_supported()
    assert not torch.is_autocast_enabled("tpu")
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu") and torch.tpu.is_autocast_enabled()
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16 == torch.tpu.get_autocast_dtype()
        assert not torch.is_autocast_enabled("cpu")
    with torch.autocast("tpu", dtype=torch.float16):
        assert torch.get_autocast_dtype("tpu") == torch.float16
    assert not torch.is_autocast_enabled("tpu")
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16


def test_default_dtype_in_a_fresh_process():
    from conftest import run_python

    result = run_python(
        "import torch\n"
        "a = torch.ones(2, 2, device='tpu')\n"
        "with torch.autocast('tpu'):\n"
        "    print(torch.get_autocast_dtype('tpu'), (a @ a).dtype)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "torch.bfloat16 torch.bfloat16"


def test_setters_of_torch_and_of_torch_tpu():
    a = make((4, 4)).to(TPU)
    try:
        torch.set_autocast_dtype("tpu", torch.float16)
        torch.set_autocast_enabled("tpu", True)
        assert (a @ a).dtype == torch.float16
        torch.tpu.set_autocast_dtype(torch.bfloat16)
        assert torch.tpu.get_autocast_dtype() == torch.bfloat16
        assert (a @ a).dtype == torch.bfloat16
        torch.tpu.set_autocast_enabled(False)
        assert not torch.is_autocast_enabled("tpu")
        assert (a @ a).dtype == torch.float32
    finally:
        torch.set_autocast_enabled("tpu", False)
        torch.set_autocast_dtype("tpu", torch.bfloat16)


def test_torch_tpu_amp_autocast_and_decorator():
    a = make((4, 4)).to(TPU)
    with torch.tpu.amp.autocast():
        assert (a @ a).dtype == torch.bfloat16
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert (a @ a).dtype == torch.float16

    @torch.autocast("tpu")
    def product(x):
        return x @ x

    assert product(a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_unsupported_dtype_warns_and_disables(dtype):
    # As on the CPU, XPU and every PrivateUse1 backend: a warning, and the region runs unautocast.
    a = make((4, 4)).to(TPU)
    with pytest.warns(UserWarning, match="In tpu autocast, but the target dtype is not supported. Disabling autocast"):
        region = torch.autocast("tpu", dtype=dtype)
    with region:
        assert not torch.is_autocast_enabled("tpu")
        assert (a @ a).dtype == torch.float32


def test_binary_cross_entropy_is_refused_as_on_cuda():
    probabilities = torch.rand(4, 3).to(TPU)
    target = torch.rand(4, 3).to(TPU)
    with torch.autocast("tpu"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(probabilities, target)
        # The logits form is the safe one, in float32.
        assert F.binary_cross_entropy_with_logits(probabilities, target).dtype == torch.float32
    assert F.binary_cross_entropy(probabilities, target).dtype == torch.float32  # outside: allowed


# ---- the op lists ----


def test_registered_ops_are_cudas():
    """Every op CUDA's autocast casts, tpu's casts (cuDNN's own convolutions aside), and no other."""
    cuda = registered("AutocastCUDA")
    tpu = registered("AutocastPrivateUse1")
    assert cuda - tpu == {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"}
    assert tpu - cuda == set()
    assert {"aten::mm", "aten::linear", "aten::softmax.int", "aten::addcmul", "aten::binary_cross_entropy"} <= tpu


def _conv_transpose2d(x, w):
    return F.conv_transpose2d(x, w, padding=1)


# name: (function, input shapes or tensors, the CPU's autocast casts it the same way)
LOWER_PRECISION_CASES = {
    "mm": (torch.mm, [(8, 16), (16, 4)], True),
    "matmul": (torch.matmul, [(2, 8, 16), (16, 4)], True),
    "linear": (F.linear, [(4, 16), (8, 16), (8,)], True),
    "bmm": (torch.bmm, [(2, 4, 8), (2, 8, 3)], True),
    "baddbmm": (torch.baddbmm, [(2, 4, 3), (2, 4, 8), (2, 8, 3)], True),
    "addmm": (torch.addmm, [(4, 3), (4, 8), (8, 3)], True),
    "addbmm": (torch.addbmm, [(4, 3), (2, 4, 8), (2, 8, 3)], True),
    "addmv": (torch.addmv, [(4,), (4, 8), (8,)], False),
    "addr": (torch.addr, [(4, 3), (4,), (3,)], False),
    "mv": (torch.mv, [(4, 8), (8,)], False),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b), [(4, 8), (8, 3)], False),
    "chain_matmul": (lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [(4, 8), (8, 5), (5, 3)], False),
    "linalg_vecdot": (torch.linalg.vecdot, [(4, 8), (4, 8)], True),
    "conv1d": (F.conv1d, [(2, 3, 10), (4, 3, 3), (4,)], True),
    "conv2d": (F.conv2d, [(2, 3, 8, 8), (4, 3, 3, 3), (4,)], True),
    "conv_transpose2d": (_conv_transpose2d, [(2, 4, 6, 6), (4, 3, 3, 3)], True),
    "prelu": (F.prelu, [(2, 3, 5), (3,)], True),
    "scaled_dot_product_attention": (F.scaled_dot_product_attention, [(2, 2, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8)], True),
}


def _run(fn, values, device_type=None, dtype=None):
    if device_type is None:
        return fn(*values)
    with torch.autocast(device_type, dtype=dtype):
        return fn(*values)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(LOWER_PRECISION_CASES))
def test_lower_precision_ops(name, dtype):
    fn, shapes, cpu_agrees = LOWER_PRECISION_CASES[name]
    inputs = inputs_for(shapes)
    got = _run(fn, to_tpu(inputs), "tpu", dtype)
    assert got.dtype == dtype, f"{name}: {got.dtype}"
    expected = fn(*cast(inputs, dtype))  # the same rounded operands, computed in float32, rounded
    assert_close(got, expected, rtol=2e-2, atol=2e-2)
    if cpu_agrees:
        on_cpu = _run(fn, inputs, "cpu", dtype)
        assert on_cpu.dtype == got.dtype
        assert_close(got, on_cpu, rtol=2e-2, atol=2e-2)
    # Outside autocast, float32 stays float32.
    assert fn(*to_tpu(inputs)).dtype == torch.float32


# name: (function, input shapes, CPU autocast also gives float32). Inputs are made in the low dtype.
FP32_CASES = {
    "exp": (torch.exp, [(4, 5)], False),
    "log": (torch.log, [((4, 5), 0.5, 2)], False),
    "log1p": (torch.log1p, [((4, 5), 0, 2)], False),
    "rsqrt": (torch.rsqrt, [((4, 5), 0.5, 2)], False),
    "reciprocal": (torch.reciprocal, [((4, 5), 0.5, 2)], False),
    "pow_scalar": (lambda x: torch.pow(x, 2), [(4, 5)], False),
    "pow_tensor": (torch.pow, [((4, 5), 0.5, 2), (4, 5)], False),
    "softplus": (F.softplus, [(4, 5)], False),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), [(4, 5), (5,), (5,)], False),
    "group_norm": (lambda x: F.group_norm(x, 2), [(2, 4, 3)], False),
    "rms_norm": (lambda x, w: F.rms_norm(x, (5,), w), [(4, 5), (5,)], False),
    "mse_loss": (F.mse_loss, [(4, 5), (4, 5)], True),
    "l1_loss": (F.l1_loss, [(4, 5), (4, 5)], True),
    "smooth_l1_loss": (F.smooth_l1_loss, [(4, 5), (4, 5)], True),
    "huber_loss": (F.huber_loss, [(4, 5), (4, 5)], True),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"), [(4, 5), ((4, 5), 0, 1)], True),
    "bce_with_logits": (F.binary_cross_entropy_with_logits, [(4, 5), (4, 5)], True),
    "cosine_similarity": (F.cosine_similarity, [(4, 5), (4, 5)], False),
    "cdist": (torch.cdist, [(4, 5), (3, 5)], True),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), [(4, 5)], False),
    "interpolate_nearest": (lambda x: F.interpolate(x, scale_factor=2), [(1, 2, 3, 3)], False),
    "interpolate_bilinear": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [(1, 2, 3, 3)], False),
    # fp32_set_opt_dtype: float32 unless the call names a dtype.
    "softmax": (lambda x: torch.softmax(x, -1), [(4, 5)], False),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), [(4, 5)], False),
    "sum": (torch.sum, [(4, 5)], False),
    "sum_dim": (lambda x: torch.sum(x, 1), [(4, 5)], False),
    "prod": (lambda x: torch.prod(x, 1), [((4, 5), 0.5, 1.5)], False),
    "cumsum": (lambda x: torch.cumsum(x, 1), [(4, 5)], False),
    "cumprod": (lambda x: torch.cumprod(x, 1), [((4, 5), 0.5, 1.5)], False),
    "vector_norm": (torch.linalg.vector_norm, [(4, 5)], False),
    # fp32_append_dtype: norm without a dtype goes to the overload with one.
    "norm": (lambda x: torch.norm(x), [(4, 5)], False),
    "norm_dim": (lambda x: torch.norm(x, 2, [1]), [(4, 5)], False),
}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(FP32_CASES))
def test_float32_ops(name, dtype):
    fn, shapes, cpu_agrees = FP32_CASES[name]
    inputs = cast(inputs_for(shapes), dtype)
    got = _run(fn, to_tpu(inputs), "tpu", dtype)
    assert got.dtype == torch.float32, f"{name}: {got.dtype}"
    assert_close(got, fn(*cast(inputs, torch.float32)), rtol=1e-4, atol=1e-4)
    if cpu_agrees:
        assert _run(fn, inputs, "cpu", dtype).dtype == torch.float32
    # Outside autocast the low dtype stays (cdist has no half kernels, on the CPU either: autocast is
    # what makes it usable).
    if name != "cdist":
        assert fn(*to_tpu(inputs)).dtype == dtype


def test_float32_set_opt_dtype_keeps_an_explicit_dtype():
    x = make((4, 5)).to(TPU).bfloat16()
    with torch.autocast("tpu"):
        assert torch.sum(x, dtype=torch.bfloat16).dtype == torch.bfloat16
        assert torch.softmax(x, -1, dtype=torch.bfloat16).dtype == torch.bfloat16
        assert torch.sum(x).dtype == torch.float32
        # Only floating inputs are cast.
        assert torch.sum(torch.ones(3, dtype=torch.int64, device=TPU)).dtype == torch.int64


def test_cross_entropy_of_a_lower_precision_product():
    x, w = make((6, 8), seed=0), make((5, 8), seed=1)
    target = torch.tensor([0, 1, 2, 3, 4, 0])
    with torch.autocast("tpu"):
        logits = F.linear(x.to(TPU), w.to(TPU))
        loss = F.cross_entropy(logits, target.to(TPU))
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    expected = F.cross_entropy(F.linear(x.bfloat16(), w.bfloat16()).float(), target)
    # (The logits may differ by a bf16 rounding step: the loss agrees to bf16 accuracy.)
    assert_close(loss, expected, rtol=1e-2, atol=1e-2)


# name: (function, inputs as (shape, dtype) or ready tensors, whether the op refuses the mixed
# dtypes outside autocast)
def _index_put(x, v):
    return x.index_put((torch.tensor([0, 2], device=x.device),), v)


def _scatter_add(x, v):
    return x.scatter_add(0, torch.tensor([[0, 1, 2]], device=x.device), v)


PROMOTE_CASES = {
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c), [(4, 5), (4, 5), (4, 5)]),
    "addcdiv": (torch.addcdiv, [(4, 5), (4, 5), ((4, 5), 1, 2)]),
    "atan2": (torch.atan2, [(4, 5), (4, 5)]),
    "dot": (torch.dot, [(7,), (7,)]),
    "vdot": (torch.vdot, [(7,), (7,)]),
    "cross": (lambda a, b: torch.linalg.cross(a, b), [(4, 3), (4, 3)]),
    "tensordot": (lambda a, b: torch.tensordot(a, b, dims=1), [(4, 5), (5, 3)]),
    "bilinear": (F.bilinear, [(4, 3), (4, 2), (5, 3, 2)]),
    "index_put": (_index_put, [(4, 3), (2, 3)]),
    "scatter_add": (_scatter_add, [(4, 3), (1, 3)]),
}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", list(PROMOTE_CASES))
def test_promote_ops(name, dtype):
    fn, shapes = PROMOTE_CASES[name]
    inputs = inputs_for(shapes)
    # All inputs in the low dtype: the result stays in it.
    low = cast(inputs, dtype)
    got = _run(fn, to_tpu(low), "tpu", dtype)
    assert got.dtype == dtype
    assert_close(got, fn(*low), rtol=2e-2, atol=2e-2)
    # One float32 input: every input is promoted to float32.
    mixed = [inputs[0]] + low[1:]
    got = _run(fn, to_tpu(mixed), "tpu", dtype)
    assert got.dtype == torch.float32
    assert_close(got, fn(*cast(mixed, torch.float32)), rtol=1e-5, atol=1e-5)


def test_promote_admits_mixed_dtypes_that_plain_calls_refuse():
    a, b = make((7,)).to(TPU), make((7,)).to(TPU).bfloat16()
    with pytest.raises(RuntimeError):
        torch.dot(a, b)
    with torch.autocast("tpu"):
        assert torch.dot(a, b).dtype == torch.float32


def test_other_ops_run_unchanged():
    a, b = make((4, 5)).to(TPU), make((4, 5)).to(TPU).bfloat16()
    with torch.autocast("tpu"):
        assert (a + a).dtype == torch.float32
        assert (b + b).dtype == torch.bfloat16
        assert F.gelu(b).dtype == torch.bfloat16 and torch.relu(a).dtype == torch.float32
        # cat and stack are not on CUDA's lists: ordinary type promotion.
        assert torch.cat([a, b]).dtype == torch.float32
        assert torch.stack([b, b]).dtype == torch.bfloat16


def test_only_tpu_floating_tensors_are_cast():
    a = make((4, 4))
    with torch.autocast("tpu"):
        assert (a @ a).dtype == torch.float32  # CPU tensors: not tpu's autocast
        d = a.double().to(TPU)
        assert (d @ d).dtype == torch.float64  # float64 is never cast
        i = torch.ones(4, 4, dtype=torch.int32, device=TPU)
        assert (i @ i).dtype == torch.int32
    with torch.autocast("cpu"):
        t = a.to(TPU)
        assert (t @ t).dtype == torch.float32  # the CPU's autocast leaves tpu tensors alone


def test_backward_through_autocast_gives_float32_gradients():
    x = make((4, 8), seed=0)
    w = make((3, 8), seed=1)
    grads = {}
    for device in ("cpu", "tpu"):
        xd = x.clone().to(device).requires_grad_()
        wd = w.clone().to(device).requires_grad_()
        with torch.autocast(device, dtype=torch.bfloat16):
            y = F.linear(xd, wd)
            loss = y.float().pow(2).sum()
        assert y.dtype == torch.bfloat16
        loss.backward()
        grads[device] = (xd.grad, wd.grad)
    for got, expected in zip(grads["tpu"], grads["cpu"], strict=True):
        assert got.dtype == torch.float32
        assert_close(got, expected, rtol=3e-2, atol=5e-2)


# ---- nesting, disabled regions, the cast cache ----


def test_nesting_and_disabled_regions():
    a = make((4, 4)).to(TPU)
    with torch.autocast("tpu"):
        assert (a @ a).dtype == torch.bfloat16
        with torch.autocast("tpu", dtype=torch.float16):
            assert (a @ a).dtype == torch.float16
            with torch.autocast("tpu", enabled=False):
                assert not torch.is_autocast_enabled("tpu")
                assert (a @ a).dtype == torch.float32
                with torch.autocast("tpu"):  # no dtype: the current one
                    assert (a @ a).dtype == torch.float16
                with torch.autocast("tpu", dtype=torch.bfloat16):
                    assert (a @ a).dtype == torch.bfloat16
                assert (a @ a).dtype == torch.float32
            assert (a @ a).dtype == torch.float16
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
        assert (a @ a).dtype == torch.bfloat16
        with torch.autocast("cpu"):  # another device's region leaves tpu's on
            assert (a @ a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32


class CountCasts(TorchDispatchMode):
    """Counts the casts to a low dtype that reach the tpu kernels."""

    def __init__(self):
        super().__init__()
        self.casts = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") in LOW and args[0].device.type == "tpu":
            self.casts += 1
        return func(*args, **kwargs)


@pytest.mark.parametrize("cache_enabled", [True, False])
def test_cast_cache(cache_enabled):
    weight = torch.nn.Parameter(make((3, 8)).to(TPU))  # a float32 leaf that requires grad
    x = make((4, 8)).to(TPU)
    with CountCasts() as counter:
        with torch.autocast("tpu", cache_enabled=cache_enabled):
            first = F.linear(x, weight)
            second = F.linear(x, weight)
    # The input is cast at each call; the weight once when the cache is on.
    assert counter.casts == (3 if cache_enabled else 4)
    assert torch.equal(first.cpu(), second.cpu())
    # Leaving the outermost region empties the cache: a new region casts the weight again.
    with CountCasts() as counter:
        with torch.autocast("tpu", cache_enabled=cache_enabled):
            F.linear(x, weight)
    assert counter.casts == 2


def test_cast_cache_survives_nested_regions():
    weight = torch.nn.Parameter(make((3, 8)).to(TPU))
    x = make((4, 8)).to(TPU)
    with CountCasts() as counter:
        with torch.autocast("tpu"):
            F.linear(x, weight)
            with torch.autocast("tpu"):
                F.linear(x, weight)
            F.linear(x, weight)
    assert counter.casts == 4
    assert torch.is_autocast_cache_enabled()


# ---- gradient checkpointing ----


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.second = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.second(F.gelu(self.first(x)))


def _train_step(model, x, checkpointed, use_reentrant, autocast_dtype, device):
    model.zero_grad()
    x = x.to(device).requires_grad_()
    context = torch.autocast(device, dtype=autocast_dtype) if autocast_dtype else torch.autocast(device, enabled=False)
    with context:
        h = x
        for block in model:
            h = checkpoint(block, h, use_reentrant=use_reentrant) if checkpointed else block(h)
        loss = h.float().pow(2).mean()
    loss.backward()
    return h, loss, x.grad, [p.grad for p in model.parameters()]


@pytest.mark.parametrize("autocast_dtype", [None, torch.bfloat16], ids=["float32", "autocast_bf16"])
@pytest.mark.parametrize("use_reentrant", [True, False], ids=["reentrant", "non_reentrant"])
def test_checkpoint_matches_cpu(use_reentrant, autocast_dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block())
    x = make((4, 16), low=-1, high=1, seed=3)
    on_tpu = _train_step(model.to(TPU), x, True, use_reentrant, autocast_dtype, "tpu")
    plain_tpu = _train_step(model, x, False, use_reentrant, autocast_dtype, "tpu")
    on_cpu = _train_step(model.cpu(), x, False, use_reentrant, autocast_dtype, "cpu")
    # (The residual adds keep the blocks' outputs in float32; the loss is float32.)
    assert on_tpu[0].dtype == torch.float32 and on_tpu[1].dtype == torch.float32
    tolerance = dict(rtol=1e-4, atol=1e-5) if autocast_dtype is None else dict(rtol=3e-2, atol=3e-2)
    same_work = {} if autocast_dtype is None else dict(rtol=1.6e-2, atol=1e-5)
    got, plain, expected = on_tpu[:3], plain_tpu[:3], on_cpu[:3]
    for g, p, e in zip(got + tuple(on_tpu[3]), plain + tuple(plain_tpu[3]), expected + tuple(on_cpu[3]), strict=True):
        # Recomputing in the backward gives the forward's values (bf16: to its precision).
        assert_same_work_alike(g, p, **same_work)
        assert_close(g, e, **tolerance)


@pytest.mark.parametrize("use_reentrant", [True, False], ids=["reentrant", "non_reentrant"])
def test_checkpoint_replays_dropout(use_reentrant):
    """The recomputation draws the same dropout mask as the forward (the tpu RNG state is stashed
    and restored), so the gradients equal those of the unchekpointed model."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 8).to(TPU)

    def block(h):
        return F.dropout(layer(h), 0.5, training=True)

    x = make((6, 8)).to(TPU).requires_grad_()
    results = []
    for checkpointed in (False, True):
        torch.manual_seed(1)
        with torch.autocast("tpu"):
            y = checkpoint(block, x, use_reentrant=use_reentrant) if checkpointed else block(x)
        y.float().sum().backward()
        results.append((y.cpu(), x.grad.cpu(), layer.weight.grad.cpu()))
        x.grad = None
        layer.zero_grad()
    for plain, replayed in zip(*results, strict=True):
        assert torch.equal(plain, replayed)


def test_checkpoint_without_autocast_warns_nothing():
    block = Block().to(TPU)
    x = make((2, 16)).to(TPU).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(block, x, use_reentrant=False).sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float32


# ---- GradScaler (float16 autocast) ----


def test_non_finite_check_and_unscale():
    inv_scale = torch.tensor([0.25])
    cases = [([[1.0, 2.0], [4.0]], 0.0), ([[1.0, float("nan")], [4.0]], 1.0), ([[1.0], [float("-inf")]], 1.0)]
    for values, expected_inf in cases:
        for device in ("cpu", "tpu"):
            tensors = [torch.tensor(v, device=device) for v in values]
            found_inf = torch.zeros(1, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(tensors, found_inf, inv_scale.to(device))
            assert found_inf.item() == expected_inf
            expected = [torch.tensor(v) * 0.25 for v in values]
            for got, want in zip(tensors, expected, strict=True):
                torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    # found_inf is only ever set, never cleared.
    found_inf = torch.ones(1, device=TPU)
    torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, device=TPU)], found_inf, inv_scale.to(TPU))
    assert found_inf.item() == 1.0


@pytest.mark.parametrize(
    "scale, tracker, found_inf",
    [(8.0, 0, 0.0), (8.0, 2, 0.0), (8.0, 2, 1.0), (3e38, 2, 0.0), (8.0, 1, 1.0)],
)
def test_update_scale_matches_cpu(scale, tracker, found_inf):
    results = []
    for device in ("cpu", "tpu"):
        s = torch.tensor([scale], device=device)
        t = torch.tensor([tracker], dtype=torch.int32, device=device)
        out = torch._amp_update_scale_(s, t, torch.tensor([found_inf], device=device), 2.0, 0.5, 3)
        assert out is s
        results.append((s.cpu(), t.cpu()))
    for got, expected in zip(results[1], results[0], strict=True):
        assert torch.equal(got, expected)


def test_grad_scaler_training_tracks_cpu():
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 4)
    x = make((6, 8), seed=0)
    history, weights = {}, {}
    for device in ("cpu", "tpu"):
        model = torch.nn.Linear(8, 4).to(device)
        model.load_state_dict(base.state_dict())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=16.0, growth_interval=2)
        history[device] = []
        for step in range(5):
            optimizer.zero_grad()
            with torch.autocast(device, dtype=torch.float16):
                loss = model(x.to(device)).float().pow(2).mean()
            if step == 2:
                loss = loss * float("inf")  # this step is skipped and the scale backs off
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            history[device].append((scaler.get_scale(), scaler._growth_tracker.item()))
        weights[device] = model.weight.detach()
    assert history["tpu"] == history["cpu"] == [(16.0, 1), (32.0, 0), (16.0, 0), (16.0, 1), (32.0, 0)]
    assert_close(weights["tpu"], weights["cpu"], rtol=1e-3, atol=1e-3)


# ---- Hugging Face gradient checkpointing (what issue 12 saw failing) ----


@pytest.mark.parametrize("autocast_dtype", [None, torch.bfloat16], ids=["float32", "autocast_bf16"])
@pytest.mark.parametrize("use_reentrant", [True, False], ids=["reentrant", "non_reentrant"])
def test_huggingface_gradient_checkpointing(use_reentrant, autocast_dtype):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=50,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    results = {}
    for device, checkpointed in (("cpu", False), ("tpu", True), ("tpu", False)):
        model = transformers.LlamaForCausalLM(config)
        model.load_state_dict(reference.state_dict())
        model.to(device).train()
        if checkpointed:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
            assert model.is_gradient_checkpointing
        enabled = autocast_dtype is not None
        with torch.autocast(device, dtype=autocast_dtype or torch.bfloat16, enabled=enabled):
            loss = model(input_ids=ids.to(device), labels=ids.to(device)).loss
        loss.backward()
        grads = [p.grad.cpu() for p in model.parameters()]
        results[(device, checkpointed)] = (loss.detach().cpu(), grads)
    tolerance = dict(rtol=1e-4, atol=1e-5) if autocast_dtype is None else dict(rtol=3e-2, atol=3e-2)
    loss, grads = results[("tpu", True)]
    plain_loss, plain_grads = results[("tpu", False)]
    cpu_loss, cpu_grads = results[("cpu", False)]
    torch.testing.assert_close(loss, cpu_loss, **tolerance)
    same_work = {} if autocast_dtype is None else dict(rtol=1.6e-2, atol=1e-5)
    assert_same_work_alike(loss, plain_loss, **same_work)
    for got, plain, expected in zip(grads, plain_grads, cpu_grads, strict=True):
        assert_same_work_alike(got, plain, **same_work)
        torch.testing.assert_close(got, expected, **tolerance)


def test_autocast_inside_torch_compile():
    layer = torch.nn.Linear(8, 4).to(TPU)

    def step(x):
        with torch.autocast("tpu"):
            logits = layer(x)
            return logits, torch.softmax(logits, -1)

    x = make((3, 8)).to(TPU)
    compiled = torch.compile(step, backend="tpu")
    torch_tpu.metrics.reset()
    # Dynamo runs a frame uncompiled while a dispatch mode (conftest's CPU reference) is active.
    with torch.utils._python_dispatch._disable_current_modes():
        outputs = compiled(x)
    assert torch_tpu.metrics.snapshot()["compiled_graph_calls"] == 1
    for got, expected in zip(outputs, step(x), strict=True):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.cpu(), expected.cpu())
    assert step(x)[0].dtype == torch.bfloat16
