"""Normalization layers on tpu against the CPU: forward outputs, input and parameter gradients.

BatchNorm reaches the device as native_batch_norm / native_batch_norm_backward, LayerNorm as
native_layer_norm / native_layer_norm_backward, GroupNorm as native_group_norm /
native_group_norm_backward (both forwards routed past PyTorch's CompositeExplicitAutograd
decompositions); RMSNorm decomposes entirely into elementwise ops and reductions.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]

# Gradients of a normalization subtract means of the weighted gradient from it, so an element
# that cancels to near zero carries the rounding error of the terms: in half precision the error
# is bounded relative to the gradient's largest element, not to each element.
GRAD_TOLERANCES = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
    torch.float16: dict(rtol=4e-3, atol=4e-3),
}


def assert_grad_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    tolerance = dict(GRAD_TOLERANCES[expected.dtype])
    if expected.dtype != torch.float32:
        tolerance["atol"] *= max(1.0, expected.abs().max().item())
    assert_close(actual, expected, **tolerance)


def randomize_parameters(module: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(make(p.shape, p.dtype, low=0.5, high=1.5))
    return module


def check_module(module: torch.nn.Module, x: torch.Tensor, layout=None, steps: int = 1) -> None:
    """Runs `module` on the CPU and a copy on tpu for `steps` forward/backward passes, and
    compares outputs, x.grad, parameter grads and buffers (running stats) after each.

    The reference is the CPU in float32, cast to each tensor's dtype: the CPU's own bf16/f16
    kernels round differently on AVX2 and AVX-512 machines, so they are no fixed reference."""
    tpu_module = copy.deepcopy(module).to(TPU)
    reference = copy.deepcopy(module).float()
    for _ in range(steps):
        cpu_x = x.to(torch.float32, copy=True).requires_grad_()
        tpu_x = x.to(TPU)
        if layout is not None:
            tpu_x = layout(tpu_x)
        tpu_x.requires_grad_()
        expected = reference(cpu_x)
        actual = tpu_module(tpu_x)
        # Normalizations give the input's dtype, mixed-precision parameters or not.
        assert actual.dtype == x.dtype
        assert_close(actual, expected.to(x.dtype))
        grad = make(expected.shape, x.dtype)
        expected.backward(grad.float())
        actual.backward(grad.to(TPU))
        assert_grad_close(tpu_x.grad, cpu_x.grad.to(x.dtype))
        pairs = zip(module.parameters(), reference.parameters(), tpu_module.parameters(), strict=True)
        for original, cpu_p, tpu_p in pairs:
            assert_grad_close(tpu_p.grad, cpu_p.grad.to(original.dtype))
        for original, cpu_b, tpu_b in zip(module.buffers(), reference.buffers(), tpu_module.buffers(), strict=True):
            assert_close(tpu_b, cpu_b.to(original.dtype))
        reference.zero_grad()
        tpu_module.zero_grad()
        x = make(x.shape, x.dtype)


# ---- BatchNorm ----

BATCH_NORMS = [
    (torch.nn.BatchNorm1d, (8, 5)),
    (torch.nn.BatchNorm1d, (4, 5, 7)),
    (torch.nn.BatchNorm2d, (4, 3, 5, 6)),
    (torch.nn.BatchNorm3d, (2, 3, 4, 3, 5)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("cls,shape", BATCH_NORMS)
def test_batch_norm_batch_statistics(cls, shape, dtype):
    """Training without running stats: normalizes with the batch's statistics."""
    module = randomize_parameters(cls(shape[1], track_running_stats=False).to(dtype))
    check_module(module, make(shape, dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("cls,shape", BATCH_NORMS)
def test_batch_norm_eval(cls, shape, dtype):
    """Evaluation mode: normalizes with the running stats, which stay unchanged."""
    module = randomize_parameters(cls(shape[1]).to(dtype))
    with torch.no_grad():
        module.running_mean.copy_(make(module.running_mean.shape, dtype, low=-1, high=1))
        module.running_var.copy_(make(module.running_var.shape, dtype, low=0.5, high=2))
    check_module(module.eval(), make(shape, dtype), steps=2)


def test_batch_norm_mixed_precision():
    """bfloat16 input with float32 parameters (the CPU's mixed-type path)."""
    module = randomize_parameters(torch.nn.BatchNorm2d(3, track_running_stats=False))
    check_module(module, make((4, 3, 5, 5), torch.bfloat16))


@pytest.mark.parametrize(
    "layout",
    [
        lambda t: t.contiguous(memory_format=torch.channels_last),
        noncontiguous,
        lambda t: t.transpose(0, 2).contiguous().transpose(0, 2),
    ],
    ids=["channels_last", "transposed", "permuted"],
)
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_batch_norm_noncontiguous(layout, train):
    module = randomize_parameters(torch.nn.BatchNorm2d(3, track_running_stats=not train))
    check_module(module.train(train), make((4, 3, 5, 6)), layout=layout)


def test_batch_norm_channels_last_output_layout():
    x = make((2, 3, 4, 5)).contiguous(memory_format=torch.channels_last)
    expected = F.batch_norm(x, None, None, training=True)
    actual = F.batch_norm(x.to(TPU), None, None, training=True)
    assert actual.stride() == expected.stride()
    assert_close(actual, expected)


def test_batch_norm_affine_false_forward():
    x = make((4, 3, 5))
    module = torch.nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    assert_close(copy.deepcopy(module).to(TPU)(x.to(TPU)), module(x))


def test_batch_norm_varying_eps_and_functional_weight_only():
    x = make((6, 4))
    weight = make((4,), low=0.5, high=1.5)
    for eps in (1e-5, 1e-3, 0.5):
        expected = F.batch_norm(x, None, None, weight, training=True, eps=eps)
        assert_close(F.batch_norm(x.to(TPU), None, None, weight.to(TPU), training=True, eps=eps), expected)


def test_native_batch_norm_saved_statistics():
    """save_mean and save_invstd, which autograd hands to the backward. PyTorch's meta function
    makes them float32 for a bfloat16 input where the CPU kernel returns bfloat16; the device
    follows the meta function, so the values are compared in the CPU's dtype."""
    x = make((4, 3, 5), torch.bfloat16)
    expected = torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    actual = torch.native_batch_norm(x.to(TPU), None, None, None, None, True, 0.1, 1e-5)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a.to(e.dtype), e)


# The boxed fallback writes only an op's results; native_batch_norm updates running_mean and
# running_var in place without returning them, so training with running stats is refused.
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_running_stats_update(momentum):
    module = randomize_parameters(torch.nn.BatchNorm2d(3, momentum=momentum))
    check_module(module, make((4, 3, 5, 5)), steps=3)


# The fallback reads every meta result as a tensor; backward ops return None for the gradients
# output_mask does not ask for (no affine parameters, or an input that needs no gradient).
def test_batch_norm_affine_false_backward():
    check_module(torch.nn.BatchNorm1d(3, affine=False, track_running_stats=False), make((4, 3, 5)))


def test_batch_norm_errors():
    x = make((2, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(x.to(TPU), torch.zeros(4, device=TPU), torch.ones(4, device=TPU))


# ---- LayerNorm ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,normalized", [((4, 7), (7,)), ((3, 4, 6), (6,)), ((2, 3, 4, 5), (4, 5))])
def test_layer_norm(shape, normalized, dtype):
    # One op, rounded once to the dtype as on the CPU: the dtype's own tolerance.
    module = randomize_parameters(torch.nn.LayerNorm(normalized, dtype=dtype))
    check_module(module, make(shape, dtype))


def layer_norm_of_last_dim(x, weight, bias):
    return F.layer_norm(x, (8,), weight, bias)


def group_norm_of_two_groups(x, weight, bias):
    return F.group_norm(x, 2, weight, bias)


@pytest.mark.parametrize("norm", [layer_norm_of_last_dim, group_norm_of_two_groups], ids=["layer", "group"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_norm_of_half_activations_with_float32_parameters(norm, dtype):
    # Mixed precision keeps a norm layer's parameters in f32: the output keeps the input's dtype,
    # as on the CPU and CUDA, and gradients reach both.
    x = make((3, 8, 8), dtype)
    weight, bias = make((8,), low=0.5, high=1.5), make((8,))
    expected = norm(x.float(), weight, bias).to(dtype)  # the CPU in f32, cast: its half kernels vary by processor
    actual = norm(x.to(TPU), weight.to(TPU), bias.to(TPU))
    assert actual.dtype == dtype
    assert_close(actual, expected)
    leaves = [t.clone().requires_grad_() for t in (x.float(), weight, bias)]
    tpu_leaves = [t.to(TPU).requires_grad_() for t in (x, weight, bias)]
    # The CPU's reference in f32 (its half kernels differ between processors), cast at the end.
    norm(*leaves).sum().backward()
    norm(*tpu_leaves).sum().backward()
    assert tpu_leaves[0].grad.dtype == dtype and tpu_leaves[1].grad.dtype == torch.float32
    assert_grad_close(tpu_leaves[0].grad, leaves[0].grad.to(dtype))
    for tpu_leaf, leaf in zip(tpu_leaves[1:], leaves[1:], strict=True):
        assert_close(tpu_leaf.grad, leaf.grad, rtol=2e-2, atol=2e-2 * leaf.grad.abs().max().item())


def test_layer_norm_whole_input_and_noncontiguous():
    module = randomize_parameters(torch.nn.LayerNorm((5, 6)))
    check_module(module, make((5, 6)))
    check_module(randomize_parameters(torch.nn.LayerNorm((6,))), make((3, 4, 6)), layout=noncontiguous)


def test_layer_norm_without_affine_forward():
    x = make((3, 4, 6), torch.bfloat16)
    assert_close(F.layer_norm(x.to(TPU), (6,)), F.layer_norm(x, (6,)))


@pytest.mark.parametrize("affine,bias", [(False, False), (True, False)])
def test_layer_norm_partial_affine_backward(affine, bias):
    check_module(torch.nn.LayerNorm(6, elementwise_affine=affine, bias=bias), make((3, 4, 6)))


def test_layer_norm_errors():
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\]"):
        F.layer_norm(make((2, 3)).to(TPU), [4])
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as normalized_shape"):
        F.layer_norm(make((2, 3)).to(TPU), [3], torch.ones(4, device=TPU))
    # The CPU's messages, word for word.
    x = make((2, 3))
    for shape, weight, bias in [
        ([4], None, None),
        ([3], make((4,)), None),
        ([3], None, make((2, 3))),
        ([2, 3, 1], None, None),
        ([], None, None),
    ]:
        with pytest.raises(RuntimeError) as expected:
            torch.native_layer_norm(x, shape, weight, bias, 1e-5)
        with pytest.raises(RuntimeError) as raised:
            torch.native_layer_norm(x.to(TPU), shape, *[None if t is None else t.to(TPU) for t in (weight, bias)], 1e-5)
        assert str(raised.value).splitlines()[0] == str(expected.value).splitlines()[0]


# ---- GroupNorm ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "groups,shape",
    [(1, (3, 4, 5)), (2, (3, 4, 5)), (4, (2, 4, 3, 5)), (3, (4, 24)), (2, (2, 4, 2, 3, 2))],
)
def test_group_norm(groups, shape, dtype):
    # One op, rounded once to the dtype as on the CPU: the dtype's own tolerance.
    module = randomize_parameters(torch.nn.GroupNorm(groups, shape[1], dtype=dtype))
    check_module(module, make(shape, dtype))


# PyTorch's composite native_group_norm views the input as [1, N * groups, -1], which a
# channels-last tensor cannot be viewed as; the op's own lowering takes any layout.
def test_group_norm_channels_last():
    module = randomize_parameters(torch.nn.GroupNorm(2, 4))
    layout = lambda t: t.contiguous(memory_format=torch.channels_last)  # noqa: E731
    check_module(module, make((2, 4, 5, 6)), layout=layout)


def test_group_norm_noncontiguous():
    check_module(randomize_parameters(torch.nn.GroupNorm(2, 4)), make((3, 4, 6)), layout=noncontiguous)


def test_group_norm_without_affine_forward():
    x = make((3, 4, 5))
    assert_close(F.group_norm(x.to(TPU), 2), F.group_norm(x, 2))


def test_group_norm_without_affine_backward():
    check_module(torch.nn.GroupNorm(2, 4, affine=False), make((3, 4, 5)))


def test_group_norm_errors():
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible by num_groups"):
        F.group_norm(make((2, 3, 4)).to(TPU), 2)


# ---- RMSNorm (decomposes into elementwise ops and reductions) ----


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(affine, dtype):
    module = torch.nn.RMSNorm((4, 6), eps=1e-6, elementwise_affine=affine, dtype=dtype)
    check_module(randomize_parameters(module), make((3, 4, 6), dtype))


def test_rms_norm_default_eps_noncontiguous():
    check_module(randomize_parameters(torch.nn.RMSNorm(6)), make((5, 6)), layout=noncontiguous)


# The forms aot_autograd's graphs record (torch.compile): the functional one returns the updated
# running statistics instead of writing them; the legit ones write them in place.
@pytest.mark.parametrize("form", ["functional", "legit", "no_stats", "no_training"])
def test_native_batch_norm_legit_forms(form):
    x, weight, bias = make((4, 3, 5)), make((3,)), make((3,))
    running = {device: (make((3,), seed=1).to(device), make((3,), low=0.5, high=2, seed=2).to(device))
               for device in ("cpu", TPU)}  # fmt: skip
    results = {}
    for device in ("cpu", TPU):
        mean, var = running[device]
        args = (x.to(device), weight.to(device), bias.to(device))
        if form == "functional":
            results[device] = torch.ops.aten._native_batch_norm_legit_functional(*args, mean, var, True, 0.1, 1e-5)
        elif form == "legit":
            results[device] = (*torch.ops.aten._native_batch_norm_legit(*args, mean, var, True, 0.1, 1e-5), mean, var)
        elif form == "no_stats":
            results[device] = torch.ops.aten._native_batch_norm_legit.no_stats(*args, True, 0.1, 1e-5)
        else:
            results[device] = torch.ops.aten._native_batch_norm_legit_no_training(*args, mean, var, 0.1, 1e-5)
    for actual, expected in zip(results[TPU], results["cpu"], strict=True):
        if expected.numel():
            assert_close(actual, expected)


# ---- weight norm: torch._weight_norm reaches the device as _weight_norm_interface (and its
# backward) for the first or the last dim; other dims decompose into norm_except_dim ----

WEIGHT_NORMED = [
    (lambda dtype: torch.nn.Linear(6, 5, dtype=dtype), (4, 6), 0),
    (lambda dtype: torch.nn.Conv1d(4, 6, 3, dtype=dtype), (2, 4, 9), 0),
    # Wav2Vec2's positional convolution: grouped, normalized along its last (kernel) dim.
    (lambda dtype: torch.nn.Conv1d(4, 4, 5, groups=2, padding=2, dtype=dtype), (2, 4, 9), 2),
    (lambda dtype: torch.nn.Conv2d(3, 4, 3, dtype=dtype), (2, 3, 6, 6), 1),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(WEIGHT_NORMED)))
def test_weight_norm_parametrization(case, dtype):
    build, shape, dim = WEIGHT_NORMED[case]
    torch.manual_seed(case)
    # The CPU runs in f32 on the same (dtype-rounded) values: its own bf16 convolutions and
    # products round differently on AVX2 and AVX-512 processors.
    module = torch.nn.utils.parametrizations.weight_norm(build(dtype).float(), dim=dim)
    tpu_module = copy.deepcopy(module).to(TPU, dtype)
    # Two steps: the second reads the weight through the parametrization again.
    for step in range(2):
        x = make(shape, dtype, seed=step)
        cpu_x, tpu_x = x.float().clone().requires_grad_(), x.to(TPU).requires_grad_()
        expected, actual = module(cpu_x), tpu_module(tpu_x)
        assert_close(actual, expected.to(dtype))
        grad = make(expected.shape, dtype, seed=10 + step)
        expected.backward(grad.float())
        actual.backward(grad.to(TPU))
        assert_grad_close(tpu_x.grad, cpu_x.grad.to(dtype))
        for cpu_p, tpu_p in zip(module.parameters(), tpu_module.parameters(), strict=True):
            assert_grad_close(tpu_p.grad, cpu_p.grad.to(dtype))
        module.zero_grad()
        tpu_module.zero_grad()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_and_backward(dim, dtype):
    # The CPU's fused kernels need a contiguous v (its forward reads a strided one wrongly, its
    # backward raises); tpu takes any layout.
    v = make((4, 3, 5), dtype)
    v_tpu = noncontiguous(v.to(TPU))
    g_shape = [1, 1, 1]
    g_shape[dim] = v.shape[dim]
    g = make(g_shape, dtype)
    grad_w = make(v.shape, dtype)
    actual = torch._weight_norm_interface(v_tpu, g.to(TPU), dim)
    dtypes = [t.dtype for t in torch._weight_norm_interface(v, g, dim)]
    assert [t.dtype for t in actual] == dtypes  # norms in f32 for bf16
    # Values against the CPU in f32 on the same values, cast: not its own bf16 kernels.
    expected = torch._weight_norm_interface(v.float(), g.float(), dim)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e.to(a.dtype))
    backward = torch.ops.aten._weight_norm_interface_backward
    expected_grads = backward(grad_w.float(), v.float(), g.float(), expected[1], dim)
    actual_grads = backward(grad_w.to(TPU), v_tpu, g.to(TPU), actual[1], dim)
    for a, e in zip(actual_grads, expected_grads, strict=True):
        assert_grad_close(a, e.to(dtype))


def test_weight_norm_interface_dim_error():
    v, g = make((4, 3, 5)), make((1, 3, 1))
    with pytest.raises(RuntimeError, match="fused kernels can only be applied for first or last dim"):
        torch._weight_norm_interface(v, g, 1)
    with pytest.raises(RuntimeError, match="fused kernels can only be applied for first or last dim"):
        torch._weight_norm_interface(v.to(TPU), g.to(TPU), 1)
