"""torch.nn.functional on tpu: activations, dropout, embedding and losses, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TRAINING_FLOATS = [torch.float32, torch.bfloat16]


def run_both(fn, inputs, grad_of=(0,), noncontiguous_inputs=False, **tolerance):
    """Runs fn on CPU and tpu copies of inputs; compares the outputs and the grads of grad_of."""
    cpu = [t.clone().requires_grad_(i in grad_of) for i, t in enumerate(inputs)]
    leaves = [t.to(TPU).requires_grad_(i in grad_of) for i, t in enumerate(inputs)]
    tpu = [noncontiguous(t) if noncontiguous_inputs and t.dim() > 0 else t for t in leaves]
    expected = fn(*cpu)
    actual = fn(*tpu)
    assert_close(actual, expected, **tolerance)
    if grad_of:
        seed = make(expected.shape, expected.dtype, low=-1, high=1)
        expected.backward(seed)
        actual.backward(seed.to(TPU))
        for i in grad_of:
            assert_close(leaves[i].grad, cpu[i].grad, **tolerance)
    return actual


# ---- activations ----

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "leaky_relu": F.leaky_relu,
    "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu,
    "elu_alpha": lambda x: F.elu(x, alpha=0.5),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "hardtanh": F.hardtanh,
    "hardtanh_bounds": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": F.relu6,
    "logsigmoid": F.logsigmoid,
    "relu": F.relu,
}


# XLA's CPU compile of mish_backward from float16 inputs is off by up to 3 ulp (the same program
# from float32 inputs is exact); reported to the lead, not hidden by a wider tolerance.
KNOWN_BAD = {("mish", torch.float16)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_and_backward(name, dtype):
    if (name, dtype) in KNOWN_BAD:
        pytest.skip("mish_backward in float16 is inaccurate (see KNOWN_BAD)")
    x = make((4, 33), dtype, low=-6, high=6)
    run_both(ACTIVATIONS[name], [x])


def test_hardswish_backward_at_the_kinks():
    for dtype in FLOATS:
        x = torch.tensor([-3.0, -2.5, 0.0, 2.5, 3.0, 3.5], dtype=dtype)
        run_both(F.hardswish, [x])


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_noncontiguous(name):
    run_both(ACTIVATIONS[name], [make((6, 5))], noncontiguous_inputs=True)


@pytest.mark.parametrize("name", ["gelu", "silu", "mish", "softplus"])
def test_activation_0d(name):
    run_both(ACTIVATIONS[name], [make(())])


def test_activation_inplace_variants():
    for fn in [
        lambda x: F.leaky_relu(x, 0.1, inplace=True),
        lambda x: F.elu(x, inplace=True),
        lambda x: F.hardtanh(x, -1.0, 0.5, inplace=True),
        lambda x: F.silu(x, inplace=True),
        lambda x: F.hardswish(x, inplace=True),
        lambda x: F.mish(x, inplace=True),
    ]:
        x = make((3, 7))
        expected = x.clone()
        fn(expected)
        actual = x.to(TPU)
        result = fn(actual)
        assert result is actual
        assert_close(actual, expected)


@pytest.mark.parametrize(
    "op, args",
    [
        (torch.ops.aten.gelu.out, {}),
        (torch.ops.aten.silu.out, {}),
        (torch.ops.aten.softplus.out, {"beta": 1.5, "threshold": 10.0}),
        (torch.ops.aten.leaky_relu.out, {"negative_slope": 0.3}),
    ],
)
def test_activation_out(op, args):
    x = make((5, 4))
    expected = torch.empty(5, 4)
    op(x, **args, out=expected)
    actual = torch.empty(5, 4, device=TPU)
    op(x.to(TPU), **args, out=actual)
    assert_close(actual, expected)


def test_activation_backward_ops_directly():
    grad, x = make((4, 5)), make((4, 5))
    y = torch.tanh(x)
    assert_close(torch.ops.aten.tanh_backward(grad.to(TPU), y.to(TPU)), torch.ops.aten.tanh_backward(grad, y))
    s = torch.sigmoid(x)
    assert_close(torch.ops.aten.sigmoid_backward(grad.to(TPU), s.to(TPU)), torch.ops.aten.sigmoid_backward(grad, s))
    # elu_backward from the result (the in-place elu's path) as well as from the input.
    for is_result in (False, True):
        source = F.elu(x) if is_result else x
        args = (1.0, 1.0, 1.0, is_result)
        assert_close(
            torch.ops.aten.elu_backward(grad.to(TPU), *args, source.to(TPU)),
            torch.ops.aten.elu_backward(grad, *args, source),
        )


def test_activation_integer_input_is_rejected():
    x = torch.arange(4)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.gelu(x)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.gelu(x.to(TPU))


def test_hardtanh_integer():
    x = make((3, 4), torch.int64)
    assert_close(F.hardtanh(x.to(TPU), -5, 7), F.hardtanh(x, -5, 7))


def test_gelu_bad_approximate():
    x = make((3,))
    with pytest.raises(RuntimeError, match="approximate argument must be either"):
        F.gelu(x, approximate="fast")
    with pytest.raises(RuntimeError, match="approximate argument must be either"):
        F.gelu(x.to(TPU), approximate="fast")


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
def test_xlogy(dtype):
    x = make((4, 5), dtype, low=0, high=3)
    x[0, :2] = 0
    y = make((5,), dtype, low=0.1, high=3)
    y[1] = float("nan")
    assert_close(torch.xlogy(x.to(TPU), y.to(TPU)), torch.xlogy(x, y))
    assert_close(torch.xlogy(2.0, y.to(TPU)), torch.xlogy(2.0, y))
    assert_close(torch.xlogy(x.to(TPU), 3), torch.xlogy(x, 3))
    ints = make((4,), torch.int64, low=0, high=4)
    assert_close(torch.xlogy(ints.to(TPU), ints.to(TPU)), torch.xlogy(ints, ints))


# ---- dropout ----


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics(p):
    x = torch.rand(256, 256) + 0.5
    y = F.dropout(x.to(TPU), p=p, training=True).cpu()
    zeroed = y == 0
    assert abs(zeroed.float().mean().item() - p) < 0.01
    torch.testing.assert_close(y[~zeroed], x[~zeroed] / (1 - p))


def test_dropout_eval_and_edge_probabilities():
    x = make((8, 9))
    assert_close(F.dropout(x.to(TPU), p=0.5, training=False), x)
    assert_close(F.dropout(x.to(TPU), p=0.0, training=True), x)
    assert_close(F.dropout(x.to(TPU), p=1.0, training=True), torch.zeros(8, 9))
    module = torch.nn.Dropout(0.3).to(TPU).eval()
    assert_close(module(x.to(TPU)), x)


def test_native_dropout_train_flag():
    x = make((50, 40))
    out, mask = torch.ops.aten.native_dropout(x.to(TPU), 0.5, False)
    assert_close(out, x)
    assert_close(mask, torch.ones(50, 40, dtype=torch.bool))
    out, mask = torch.ops.aten.native_dropout(x.to(TPU), 0.5, True)
    assert mask.dtype == torch.bool
    assert_close(out, torch.where(mask.cpu(), x * 2, 0))
    # Training with p = 0 keeps everything, as the CPU's kernel does (it is lowered without
    # random numbers).
    out, mask = torch.ops.aten.native_dropout(x.to(TPU), 0.0, True)
    out_cpu, mask_cpu = torch.ops.aten.native_dropout(x, 0.0, True)
    assert_close(out, out_cpu, rtol=0, atol=0)
    assert_close(mask, mask_cpu)


def test_dropout_reproducible_under_manual_seed():
    x = torch.ones(64, 64, device=TPU)
    torch.manual_seed(123)
    first = F.dropout(x, 0.5).cpu()
    second = F.dropout(x, 0.5).cpu()
    torch.manual_seed(123)
    again = F.dropout(x, 0.5).cpu()
    assert torch.equal(first, again)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
def test_dropout_backward(dtype):
    x = make((32, 48), dtype).to(TPU).requires_grad_()
    y = F.dropout(x, p=0.3, training=True)
    grad = make((32, 48), dtype)
    y.backward(grad.to(TPU))
    kept = (y != 0).cpu()
    scale = torch.tensor(1 / 0.7, dtype=dtype)
    assert_close(x.grad, torch.where(kept, grad * scale, torch.zeros((), dtype=dtype)))
    mask = kept.to(TPU)
    assert_close(
        torch.ops.aten.native_dropout_backward(grad.to(TPU), mask, 1 / 0.7),
        torch.ops.aten.native_dropout_backward(grad, kept, 1 / 0.7),
    )


# ---- embedding ----


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("padding_idx, scale_grad_by_freq", [(None, False), (2, False), (None, True), (-1, True)])
def test_embedding(dtype, padding_idx, scale_grad_by_freq):
    weight = make((10, 6), dtype)
    indices = torch.tensor([[0, 2, 2, 9], [3, 2, 0, 9], [5, 5, 5, 1]])

    def fn(w, i):
        return F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)

    run_both(fn, [weight, indices])


def test_embedding_module_noncontiguous_grad():
    module = torch.nn.Embedding(12, 5, padding_idx=0)
    tpu_module = torch.nn.Embedding(12, 5, padding_idx=0).to(TPU)
    tpu_module.load_state_dict(module.state_dict())
    indices = torch.tensor([[0, 1, 4], [4, 11, 0]])
    grad = make((3, 2, 5))
    module(indices.t()).backward(grad)
    tpu_module(indices.to(TPU).t()).backward(grad.to(TPU))
    assert_close(tpu_module.weight.grad, module.weight.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_embedding_renorm_scales_the_named_rows_over_max_norm(dtype, norm_type):
    # Rows named (once or more) with a norm over max_norm are scaled down in place; rows not named,
    # or within max_norm, are untouched. Indices of int32 and int64, of any shape.
    weight = make((8, 5), dtype) * 2
    indices = torch.tensor([[1, 3, 3], [6, 0, 1]], dtype=torch.int32 if norm_type == 1.0 else torch.int64)
    max_norm = float(weight.float().norm(p=norm_type, dim=1).median())  # about half the rows over
    target = weight.to(TPU)
    returned = torch.embedding_renorm_(target, indices.to(TPU), max_norm, norm_type)
    torch.embedding_renorm_(weight, indices, max_norm, norm_type)
    assert returned is target
    assert_close(target, weight)


@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_with_max_norm_matches_the_cpu_over_steps(scale_grad_by_freq):
    # nn.Embedding(max_norm=...) renormalizes the looked-up rows of its weight before each lookup.
    module = torch.nn.Embedding(10, 4, max_norm=1.0, scale_grad_by_freq=scale_grad_by_freq)
    tpu_module = torch.nn.Embedding(10, 4, max_norm=1.0, scale_grad_by_freq=scale_grad_by_freq).to(TPU)
    tpu_module.load_state_dict(module.state_dict())
    for _ in range(3):
        indices = torch.randint(0, 10, (3, 4))
        grad = make((3, 4, 4))
        module(indices).backward(grad)
        tpu_module(indices.to(TPU)).backward(grad.to(TPU))
        with torch.no_grad():
            module.weight -= 0.5 * module.weight.grad
            tpu_module.weight -= 0.5 * tpu_module.weight.grad
        module.weight.grad = tpu_module.weight.grad = None
    assert_close(tpu_module.weight, module.weight.detach())


def test_embedding_dense_backward_directly():
    grad = make((7, 3))
    indices = torch.tensor([1, 1, 4, 0, 4, 4, 2])
    for padding_idx, scale in [(-1, False), (4, True)]:
        assert_close(
            torch.ops.aten.embedding_dense_backward(grad.to(TPU), indices.to(TPU), 6, padding_idx, scale),
            torch.ops.aten.embedding_dense_backward(grad, indices, 6, padding_idx, scale),
        )


# ---- cross entropy and nll_loss ----


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "options",
    [{}, {"ignore_index": 1}, {"label_smoothing": 0.1}, {"weight": True}, {"weight": True, "ignore_index": 0}],
    ids=["plain", "ignore", "smoothing", "weight", "weight_ignore"],
)
def test_cross_entropy(dtype, reduction, options):
    logits = make((6, 5), dtype)
    target = torch.tensor([0, 1, 4, 1, 3, 0])
    kwargs = dict(options, reduction=reduction)
    inputs = [logits, target]
    if kwargs.pop("weight", False):
        inputs.append(make((5,), dtype, low=0.1, high=2))
        run_both(lambda x, t, w: F.cross_entropy(x, t, weight=w, **kwargs), inputs)
    else:
        run_both(lambda x, t: F.cross_entropy(x, t, **kwargs), inputs)


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_spatial(dtype, reduction):
    logits = make((2, 4, 3, 5), dtype)
    target = torch.randint(0, 4, (2, 3, 5))
    target[0, 1, :2] = -100
    weight = make((4,), dtype, low=0.5, high=1.5)
    run_both(lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction=reduction), [logits, target, weight])
    run_both(lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.2), [logits, target])


def test_cross_entropy_3d_input():
    run_both(lambda x, t: F.cross_entropy(x, t), [make((3, 4, 6)), torch.randint(0, 4, (3, 6))])


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
def test_cross_entropy_probability_targets(dtype):
    logits = make((5, 7), dtype)
    target = torch.softmax(make((5, 7)), dim=1).to(dtype)
    run_both(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.05), [logits, target])


def test_cross_entropy_noncontiguous_and_single_sample():
    run_both(
        lambda x, t: F.cross_entropy(x, t), [make((5, 6)), torch.tensor([5, 0, 1, 1, 2])], noncontiguous_inputs=True
    )
    run_both(lambda x, t: F.cross_entropy(x, t), [make((6,)), torch.tensor(3)])


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss_forward_outputs(reduction):
    log_probs = torch.log_softmax(make((4, 3)), 1)
    target = torch.tensor([2, -100, 0, 1])
    weight = make((3,), low=0.5, high=2)
    for input_, target_ in [(log_probs, target), (log_probs[0], target[0])]:
        expected = torch.ops.aten.nll_loss_forward(input_, target_, weight, reduction, -100)
        actual = torch.ops.aten.nll_loss_forward(input_.to(TPU), target_.to(TPU), weight.to(TPU), reduction, -100)
        for a, e in zip(actual, expected, strict=False):
            assert_close(a, e)


def test_nll_loss_all_ignored_mean_is_nan():
    log_probs = torch.log_softmax(make((3, 4)), 1)
    target = torch.full((3,), -100)
    expected = F.nll_loss(log_probs, target)
    assert expected.isnan()
    assert_close(F.nll_loss(log_probs.to(TPU), target.to(TPU)), expected)


def test_nll_loss_shape_errors():
    x, t = make((3, 4)), torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.nll_loss(x, t)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.nll_loss(x.to(TPU), t.to(TPU))
    w = torch.ones(3)
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.nll_loss(x, torch.tensor([0, 1, 2]), weight=w)
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.nll_loss(x.to(TPU), torch.tensor([0, 1, 2], device=TPU), weight=w.to(TPU))


# ---- regression losses ----

REGRESSION_LOSSES = {
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "smooth_l1": F.smooth_l1_loss,
    "smooth_l1_beta": lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.5),
    "smooth_l1_beta0": lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction, beta=0.0),
    "huber": F.huber_loss,
    "huber_delta": lambda x, t, reduction: F.huber_loss(x, t, reduction=reduction, delta=2.5),
}


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(REGRESSION_LOSSES))
def test_regression_loss(name, reduction, dtype):
    x, t = make((5, 8), dtype), make((5, 8), dtype)
    fn = REGRESSION_LOSSES[name]
    run_both(lambda a, b: fn(a, b, reduction=reduction), [x, t], grad_of=(0, 1))


@pytest.mark.parametrize("name", sorted(REGRESSION_LOSSES))
def test_regression_loss_noncontiguous_0d_and_broadcast(name):
    fn = REGRESSION_LOSSES[name]
    run_both(lambda a, b: fn(a, b, reduction="mean"), [make((4, 6)), make((4, 6))], noncontiguous_inputs=True)
    run_both(lambda a, b: fn(a, b, reduction="sum"), [make(()), make(())], grad_of=(0, 1))
    with pytest.warns(UserWarning, match="target size"):
        run_both(lambda a, b: fn(a, b, reduction="mean"), [make((3, 4)), make((4,))], grad_of=(0, 1))


def test_smooth_l1_negative_beta_error():
    x = make((3,))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        F.smooth_l1_loss(x.to(TPU), x.to(TPU), beta=-1.0)


# ---- binary cross entropy, kl_div ----


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(dtype, reduction, weighted):
    probabilities = make((6, 5), dtype, low=0.02, high=0.98)
    probabilities[0, 0] = 0  # a clamped log
    target = make((6, 5), dtype, low=0, high=1)
    inputs = [probabilities, target]
    if weighted:
        inputs.append(make((5,), dtype, low=0.5, high=2))
        run_both(lambda p, t, w: F.binary_cross_entropy(p, t, weight=w, reduction=reduction), inputs)
    else:
        run_both(lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction), inputs)


def test_binary_cross_entropy_shape_error():
    p, t = make((3, 2), low=0, high=1), make((6,), low=0, high=1)
    with pytest.raises(ValueError, match="Using a target size"):
        F.binary_cross_entropy(p, t)
    with pytest.raises(ValueError, match="Using a target size"):
        F.binary_cross_entropy(p.to(TPU), t.to(TPU))


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(dtype, reduction):
    logits, target = make((4, 6), dtype, low=-8, high=8), make((4, 6), dtype, low=0, high=1)
    weight, pos_weight = make((6,), dtype, low=0.5, high=2), make((6,), dtype, low=0.5, high=3)
    run_both(lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=reduction), [logits, target])
    run_both(
        lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw, reduction=reduction),
        [logits, target, weight, pos_weight],
    )


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(dtype, reduction, log_target):
    log_probs = torch.log_softmax(make((4, 5)), 1).to(dtype)
    target = torch.softmax(make((4, 5)), 1)
    target[0, 0] = 0
    target = (target.log() if log_target else target).to(dtype)
    run_both(lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target), [log_probs, target])


# ---- a training step ----


def classifier(dtype):
    return torch.nn.Sequential(
        torch.nn.Embedding(20, 16),
        torch.nn.Flatten(),
        torch.nn.Linear(48, 32),
        torch.nn.GELU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(32, 32),
        torch.nn.SiLU(),
        torch.nn.Linear(32, 5),
    ).to(dtype)


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
def test_classifier_training_step(dtype):
    model = classifier(dtype)
    tpu_model = classifier(dtype)
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to(TPU)
    # Dropout off, so the CPU and the tpu compute the same thing.
    model.eval()
    tpu_model.eval()
    tokens = torch.randint(0, 20, (8, 3))
    labels = torch.randint(0, 5, (8,))
    loss = F.cross_entropy(model(tokens), labels, label_smoothing=0.1)
    tpu_loss = F.cross_entropy(tpu_model(tokens.to(TPU)), labels.to(TPU), label_smoothing=0.1)
    assert_close(tpu_loss, loss)
    loss.backward()
    tpu_loss.backward()
    for p, tpu_p in zip(model.parameters(), tpu_model.parameters(), strict=False):
        assert_close(tpu_p.grad, p.grad)


def test_dropout_training_step_runs_backward():
    model = classifier(torch.float32).to(TPU).train()
    loss = F.cross_entropy(model(torch.randint(0, 20, (8, 3), device=TPU)), torch.randint(0, 5, (8,), device=TPU))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad.cpu()).all() for p in model.parameters())


# ---- shrinks, prelu, rrelu ----

SHRINKS = {
    "hardshrink": F.hardshrink,
    "hardshrink_lambd": lambda x: F.hardshrink(x, 1.25),
    "softshrink": F.softshrink,
    "softshrink_lambd": lambda x: F.softshrink(x, 1.25),
    "rrelu_eval": lambda x: F.rrelu(x, training=False),
    "rrelu_eval_bounds": lambda x: F.rrelu(x, 0.1, 0.6, training=False),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(SHRINKS))
def test_shrink_and_rrelu_forward_and_backward(name, dtype):
    x = make((4, 33), dtype, low=-3, high=3)
    run_both(SHRINKS[name], [x])


@pytest.mark.parametrize("name", sorted(SHRINKS))
def test_shrink_and_rrelu_noncontiguous_and_0d(name):
    run_both(SHRINKS[name], [make((6, 5))], noncontiguous_inputs=True)
    run_both(SHRINKS[name], [make(())])


def test_shrink_at_the_bounds_and_nan():
    x = torch.tensor([-0.5, 0.5, -0.25, 0.0, 0.75, float("nan"), float("inf"), -float("inf")])
    for fn in (F.hardshrink, F.softshrink):
        run_both(fn, [x])


def test_shrink_out_and_rrelu_inplace():
    x = make((3, 4))
    out = torch.empty(0, device=TPU)
    torch.ops.aten.hardshrink.out(x.to(TPU), 0.5, out=out)
    assert_close(out, F.hardshrink(x, 0.5))
    torch.ops.aten.softshrink.out(x.to(TPU), 0.5, out=out)
    assert_close(out, F.softshrink(x, 0.5))
    inplace = x.to(TPU)
    F.rrelu(inplace, training=False, inplace=True)
    assert_close(inplace, F.rrelu(x, training=False))


def test_shrink_and_rrelu_errors():
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, .*but found -1"):
        F.softshrink(make((3,)).to(TPU), -1.0)
    for fn in (F.hardshrink, F.softshrink):
        with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
            fn(make((3,), torch.int32).to(TPU))
    # Training mode draws random slopes the CPU's generator stream decides: not lowered.
    with pytest.raises(NotImplementedError, match="rrelu_with_noise"):
        F.rrelu(make((3,)).to(TPU), training=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("channels", [1, 5])
def test_prelu_forward_and_backward(dtype, channels):
    x = make((2, 5, 7), dtype)
    weight = make((channels,), dtype, low=0.0, high=0.5)
    run_both(F.prelu, [x, weight], grad_of=(0, 1), rtol=2e-2 if dtype != torch.float32 else 1e-5)


def test_prelu_noncontiguous_and_0d():
    run_both(F.prelu, [make((4, 6)), make((6,))], grad_of=(0, 1), noncontiguous_inputs=True)
    run_both(F.prelu, [make(()), make((1,))], grad_of=(0, 1))


@pytest.mark.parametrize("dtype", TRAINING_FLOATS)
def test_prelu_module_parameter_grads(dtype):
    cpu = torch.nn.PReLU(3).to(dtype)
    with torch.no_grad():
        cpu.weight.uniform_(0.0, 0.5)
    device = torch.nn.PReLU(3).to(dtype).to(TPU)
    device.load_state_dict(cpu.state_dict())
    x = make((4, 3, 6), dtype)
    expected = cpu(x)
    actual = device(x.to(TPU))
    assert_close(actual, expected)
    seed = make(expected.shape, dtype)
    expected.backward(seed)
    actual.backward(seed.to(TPU))
    assert_close(device.weight.grad, cpu.weight.grad, rtol=5e-2, atol=5e-2)


def test_prelu_errors():
    x = make((2, 5, 7)).to(TPU)
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        F.prelu(x, make((3,)).to(TPU))
    with pytest.raises(RuntimeError, match="prelu: Expected `weight` to be a scalar or 1D tensor"):
        F.prelu(x, make((5, 1)).to(TPU))


# ---- glu and threshold ----


def assert_no_fallbacks(fn):
    """Runs fn and asserts that nothing in it ran on the CPU."""
    torch_tpu.metrics.reset()
    result = fn()
    assert torch_tpu.metrics.snapshot()["cpu_fallbacks"] == 0
    return result


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu_forward_and_backward(dim, dtype):
    assert_no_fallbacks(lambda: run_both(lambda x: F.glu(x, dim), [make((4, 6, 8), dtype)]))


def test_glu_noncontiguous_out_module_and_double_backward():
    run_both(F.glu, [make((6, 4))], noncontiguous_inputs=True)
    run_both(torch.nn.GLU(0), [make((4, 3))])
    x = make((4, 6))
    out = torch.empty(0, device=TPU)
    torch.ops.aten.glu.out(x.to(TPU), -1, out=out)
    assert_close(out, F.glu(x))
    # glu_backward called directly, and differentiated again (glu_backward's own derivative).
    grad = make((4, 3))
    assert_close(torch.ops.aten.glu_backward(grad.to(TPU), x.to(TPU), -1), torch.ops.aten.glu_backward(grad, x, -1))
    results = []
    for device in ("cpu", TPU):
        leaf = x.to(device).requires_grad_(True)
        (first,) = torch.autograd.grad(F.glu(leaf).pow(2).sum(), leaf, create_graph=True)
        (second,) = torch.autograd.grad(first.sum(), leaf)
        results.append((first, second))
    assert_close(results[1][0], results[0][0].detach())
    assert_close(results[1][1], results[0][1])


def test_glu_errors():
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"):
        F.glu(make((4, 5)).to(TPU))
    with pytest.raises(RuntimeError, match="glu does not support scalars because halving size must be even"):
        F.glu(make(()).to(TPU))
    with pytest.raises(NotImplementedError, match="\"glu_cpu\" not implemented for 'Long'"):
        F.glu(make((4, 6), torch.int64).to(TPU))


@pytest.mark.parametrize("dtype", FLOATS)
def test_threshold_forward_and_backward(dtype):
    x = make((5, 7), dtype)
    x[0, :3] = torch.tensor([0.5, float("nan"), -float("inf")])  # the bound itself, NaN, -inf
    assert_no_fallbacks(lambda: run_both(lambda t: F.threshold(t, 0.5, -2.0), [x]))
    run_both(lambda t: F.threshold(t, -1.0, 3.0), [make((4, 6), dtype)], noncontiguous_inputs=True)
    run_both(lambda t: F.threshold(t, 0.0, 0.0), [make((), dtype)])


def test_threshold_compares_reduced_floats_in_float():
    # 0.1 rounds up to 0.10009765625 in bf16: the CPU compares against the unrounded bound.
    x = torch.tensor([0.10009765625, 0.0996, 0.2], dtype=torch.bfloat16)
    assert_close(F.threshold(x.to(TPU), 0.1, 5.0), F.threshold(x, 0.1, 5.0))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
def test_threshold_integers_truncate_the_scalars(dtype):
    x = make((4, 9), dtype, low=-5, high=6)
    for threshold, value in [(0.5, 7.9), (-0.5, 3), (2, 1)]:
        if dtype == torch.uint8 and threshold < 0:
            continue
        assert_close(F.threshold(x.to(TPU), threshold, value), F.threshold(x, threshold, value))


def test_threshold_inplace_out_and_bool_error():
    x = make((3, 8))
    expected = F.threshold(x, 0.2, -1.0)
    y = x.to(TPU)
    F.threshold_(y, 0.2, -1.0)
    assert_close(y, expected)
    module = torch.nn.Threshold(0.2, -1.0, inplace=True)
    z = x.to(TPU)
    module(z)
    assert_close(z, expected)
    out = torch.empty(0, device=TPU)
    torch.threshold(x.to(TPU), 0.2, -1.0, out=out)
    assert_close(out, expected)
    with pytest.raises(NotImplementedError, match="\"threshold_cpu\" not implemented for 'Bool'"):
        F.threshold(make((3,), torch.bool).to(TPU), 0, 1)


# ---- multi_margin_loss ----

MARGIN_FLOATS = [torch.float32, torch.float64]  # the CPU kernels' only dtypes


@pytest.mark.parametrize("dtype", MARGIN_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss(weighted, p, reduction, dtype):
    x = make((6, 5), dtype, low=-1, high=1)
    target = torch.randint(0, 5, (6,))
    weight = make((5,), dtype, low=0.1, high=2)

    def loss(x, target, weight):
        return F.multi_margin_loss(x, target, p=p, margin=0.8, weight=weight if weighted else None, reduction=reduction)

    assert_no_fallbacks(lambda: run_both(loss, [x, target, weight]))


def test_multi_margin_loss_single_sample_noncontiguous_and_empty():
    target = torch.randint(0, 7, (5,))
    run_both(lambda x, t: F.multi_margin_loss(x, t, margin=2.0), [make((5, 7)), target], noncontiguous_inputs=True)
    for reduction in ["mean", "sum", "none"]:
        run_both(
            lambda x, t, reduction=reduction: F.multi_margin_loss(x, t, reduction=reduction),
            [make((7,)), torch.tensor([3])],
        )
    run_both(lambda x, t: F.multi_margin_loss(x, t, reduction="none"), [make((0, 7)), target[:0]])
    # Reduced over no samples the CPU returns uninitialized memory; here the sum is 0 and the mean
    # 0 / 0, as torch.sum and torch.mean give.
    empty = (make((0, 7)).to(TPU), target[:0].to(TPU))
    assert F.multi_margin_loss(*empty, reduction="sum").item() == 0
    assert F.multi_margin_loss(*empty).isnan().item()
    for reduction in ["mean", "sum"]:
        run_both(
            lambda x, t, reduction=reduction: F.multi_margin_loss(x, t, reduction=reduction),
            [make(()), torch.tensor(0)],
        )


@pytest.mark.xfail(strict=True, reason="PyTorch's meta function gives shape [1], the CPU []; see the report")
def test_multi_margin_loss_0d_unreduced_shape():
    run_both(lambda x, t: F.multi_margin_loss(x, t, reduction="none"), [make(()), torch.tensor(0)])


def test_multi_margin_loss_out_and_backward_directly():
    x, target, weight = make((4, 6)), torch.randint(0, 6, (4,)), make((6,), low=0.5, high=1.5)
    args = (2, 0.5, weight)
    out = torch.empty(0, device=TPU)
    torch.ops.aten.multi_margin_loss.out(x.to(TPU), target.to(TPU), *args[:2], weight.to(TPU), 2, out=out)
    assert_close(out, torch.ops.aten.multi_margin_loss(x, target, *args, 2))
    for reduction, grad in [(0, make((4,))), (1, make(())), (2, make(()))]:
        expected = torch.ops.aten.multi_margin_loss_backward(grad, x, target, 2, 0.5, weight, reduction)
        tpu_args = (grad.to(TPU), x.to(TPU), target.to(TPU), 2, 0.5, weight.to(TPU), reduction)
        assert_close(torch.ops.aten.multi_margin_loss_backward(*tpu_args), expected)
        grad_input = torch.empty(0, device=TPU)
        torch.ops.aten.multi_margin_loss_backward.grad_input(*tpu_args, grad_input=grad_input)
        assert_close(grad_input, expected)


def test_multi_margin_loss_errors():
    x, target = make((4, 6)).to(TPU), torch.randint(0, 6, (4,)).to(TPU)
    with pytest.raises(RuntimeError, match="only p == 1 and p == 2 supported"):
        torch.ops.aten.multi_margin_loss(x, target, 3)
    # The meta function's messages print shapes as torch.Size([...]) where the CPU's print [...].
    with pytest.raises(RuntimeError, match=r"inconsistent weight size, expected 6 but got"):
        F.multi_margin_loss(x, target, weight=torch.ones(5, device=TPU))
    with pytest.raises(RuntimeError, match="Expected non-empty vector or matrix with optional 0-dim batch size"):
        F.multi_margin_loss(make((2, 3, 4)).to(TPU), target[:2])
    with pytest.raises(RuntimeError, match="target size"):
        F.multi_margin_loss(x, target[:3])
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        F.multi_margin_loss(x, target.int())
    with pytest.raises(NotImplementedError, match="\"multi_margin_loss_cpu_kernel\" not implemented for 'BFloat16'"):
        F.multi_margin_loss(x.bfloat16(), target)


# ---- multilabel_margin_loss ----


def multilabel_targets(samples, classes):
    """Rows of class indices ended by -1 (or full), with repeats, as multilabel_margin_loss reads."""
    target = torch.randint(0, classes, (samples, classes))
    ends = torch.randint(0, classes + 1, (samples,))
    for row, end in enumerate(ends.tolist()):
        target[row, end:] = -1
        if end < classes - 1:
            target[row, end + 1 :] = torch.randint(0, classes, (classes - end - 1,))  # ignored after the -1
    return target


@pytest.mark.parametrize("dtype", MARGIN_FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction, dtype):
    x = make((6, 5), dtype, low=-1, high=1)
    target = multilabel_targets(6, 5)
    target[0] = torch.tensor([1, 1, 3, -1, 2])  # a repeated label counts twice, as on the CPU
    target[1] = torch.tensor([-1, 0, 1, 2, 3])  # no labels
    target[2] = torch.tensor([4, 3, 2, 1, 0])  # every class a label
    assert_no_fallbacks(
        lambda: run_both(
            lambda x, t, reduction=reduction: F.multilabel_margin_loss(x, t, reduction=reduction), [x, target]
        )
    )


def test_multilabel_margin_loss_is_target_single_sample_and_empty():
    x, target = make((4, 6)), multilabel_targets(4, 6)
    for reduction in [0, 1, 2]:
        expected = torch.ops.aten.multilabel_margin_loss_forward(x, target, reduction)
        actual = torch.ops.aten.multilabel_margin_loss_forward(x.to(TPU), target.to(TPU), reduction)
        assert_close(actual[0], expected[0])
        assert_close(actual[1], expected[1])
    run_both(
        lambda x, t: F.multilabel_margin_loss(x, t), [make((6, 4)), multilabel_targets(6, 4)], noncontiguous_inputs=True
    )
    for reduction in ["mean", "sum"]:
        run_both(
            lambda x, t, reduction=reduction: F.multilabel_margin_loss(x, t, reduction=reduction),
            [make((6,)), target[0]],
        )
        run_both(
            lambda x, t, reduction=reduction: F.multilabel_margin_loss(x, t, reduction=reduction),
            [make(()), torch.tensor(0)],
        )
    run_both(lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), [make((0, 6)), target[:0]])
    # As for multi_margin_loss, the CPU's reductions over no samples are uninitialized memory.
    empty = (make((0, 6)).to(TPU), target[:0].to(TPU))
    assert F.multilabel_margin_loss(*empty, reduction="sum").item() == 0
    assert F.multilabel_margin_loss(*empty).isnan().item()


@pytest.mark.xfail(strict=True, reason="PyTorch's meta function gives shape [1], the CPU []; see the report")
def test_multilabel_margin_loss_single_sample_unreduced_shape():
    run_both(
        lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), [make((6,)), torch.tensor([2, 0, -1, 1, 1, 1])]
    )


def test_multilabel_margin_loss_backward_directly():
    x, target = make((4, 6)), multilabel_targets(4, 6)
    is_target = torch.ops.aten.multilabel_margin_loss_forward(x, target, 0)[1]
    for reduction, grad in [(0, make((4,))), (1, make(())), (2, make(()))]:
        expected = torch.ops.aten.multilabel_margin_loss_backward(grad, x, target, reduction, is_target)
        tpu_args = (grad.to(TPU), x.to(TPU), target.to(TPU), reduction, is_target.to(TPU))
        assert_close(torch.ops.aten.multilabel_margin_loss_backward(*tpu_args), expected)
        grad_input = torch.empty(0, device=TPU)
        torch.ops.aten.multilabel_margin_loss_backward.grad_input(*tpu_args, grad_input=grad_input)
        assert_close(grad_input, expected)


def test_multilabel_margin_loss_errors():
    x = make((4, 6)).to(TPU)
    target = multilabel_targets(4, 6).to(TPU)
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multilabel_margin_loss(x, target[:, :5])
    with pytest.raises(RuntimeError, match="Expected non-empty vector or matrix with optional 0-dim batch size"):
        F.multilabel_margin_loss(make((2, 3, 4)).to(TPU), torch.zeros(2, 3, 4, dtype=torch.long, device=TPU))
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        F.multilabel_margin_loss(x, target.int())
    for dtype, name in [(torch.bfloat16, "BFloat16"), (torch.float16, "Half")]:
        with pytest.raises(
            NotImplementedError, match=f"\"multilabel_margin_loss_forward_out_frame\" not implemented for '{name}'"
        ):
            F.multilabel_margin_loss(x.to(dtype), target)
