"""Autograd on tpu behaves as on the CPU: torch.autograd.grad (with graphs of graphs), gradients
through views and in-place updates of views, hooks and retain_grad, accumulation, no_grad and
inference_mode (including their errors). Each case runs the same code on both devices."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_close, make

CPU = torch.device("cpu")


def both(fn, *inputs):
    """Runs fn(device, *inputs on that device) on tpu and on the CPU and compares the results."""
    got = fn(TPU, *[t.to(TPU) for t in inputs])
    expected = fn(CPU, *inputs)
    got, expected = list(got), list(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert_close(g, e)


def leaf(t):
    return t.clone().requires_grad_()


# ---- torch.autograd.grad ----


def test_autograd_grad_of_several_inputs_with_grad_outputs():
    def fn(device, a, b, weight):
        a, b = leaf(a), leaf(b)
        out = (a.tanh() @ b).sigmoid()
        grad_a, grad_b = torch.autograd.grad(out, (a, b), grad_outputs=weight)
        assert a.grad is None and b.grad is None  # grad() does not accumulate into .grad
        return grad_a, grad_b

    both(fn, make((3, 4)), make((4, 5)), make((3, 5)))


def test_autograd_grad_create_graph_gives_second_derivatives():
    def fn(device, x):
        x = leaf(x)
        (first,) = torch.autograd.grad((x**3 + x.sin()).sum(), x, create_graph=True)
        assert first.requires_grad
        (second,) = torch.autograd.grad(first.sum(), x)
        return first.detach(), second

    both(fn, make((6,)))


def test_autograd_grad_retain_graph_and_allow_unused():
    def fn(device, x, y):
        x, y = leaf(x), leaf(y)
        out = (x.exp() * 2).sum()
        (once,) = torch.autograd.grad(out, x, retain_graph=True)
        twice, unused = torch.autograd.grad(out, (x, y), allow_unused=True)
        assert unused is None
        return once, twice

    both(fn, make((5,)), make((5,)))
    x = make((5,), seed=1).to(TPU).requires_grad_()
    out = x.exp().sum()
    torch.autograd.grad(out, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out, x)
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        torch.autograd.grad(x.sum(), [x, make((2,)).to(TPU).requires_grad_()])


def test_backward_accumulates_and_hooks_see_the_gradient():
    def fn(device, x):
        x = leaf(x)
        seen = []
        hidden = x * 3
        hidden.retain_grad()
        hidden.register_hook(lambda g: seen.append(g.clone()) or g * 2)  # doubles the gradient
        hidden.pow(2).sum().backward()
        first = x.grad.clone()
        (x * x).sum().backward()  # accumulates into x.grad
        assert seen[0].device.type == device.type
        return first, x.grad, hidden.grad, seen[0]

    both(fn, make((4, 3)))


# ---- views ----


def test_requires_grad_flows_through_views_of_a_leaf():
    def fn(device, x):
        x = leaf(x)
        view = x.view(3, 8)[1:, ::2].transpose(0, 1)
        assert view.requires_grad and view._base is x
        (view * view.sin()).sum().backward()
        return (x.grad,)

    both(fn, make((4, 6)))


def test_in_place_update_of_a_view_reaches_the_base_gradient():
    def fn(device, x, w):
        x, w = leaf(x), leaf(w)
        base = x.clone()
        base[1:3].mul_(w)  # CopySlices: base's gradient now goes through the slice's update
        base.select(1, 0).add_(1.0)
        base.diagonal().exp_()
        base.pow(2).sum().backward()
        return base.detach(), x.grad, w.grad

    both(fn, make((4, 4)), make((4,)))


def test_requires_grad_on_a_view_of_a_tensor_without_grad():
    def fn(device, x):
        view = x[1:]
        view.requires_grad_()
        assert view.is_leaf and view._base is x
        (view * 2).sum().backward()
        return (view.grad,)

    both(fn, make((5, 2)))
    base = make((4,)).to(TPU).requires_grad_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        base[1:].add_(1)


def test_detach_shares_storage_and_version_counter():
    x = make((4,)).to(TPU).requires_grad_()
    y = x.exp()
    detached = y.detach()
    detached.zero_()  # modifies y in place: its saved value is now stale
    assert y.cpu().eq(0).all()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---- no_grad and inference_mode ----


def test_no_grad_builds_no_graph_and_allows_in_place_updates_of_leaves():
    def fn(device, x, step):
        x = leaf(x)
        with torch.no_grad():
            y = x * 2
            x.sub_(step)  # an optimizer-style update of a leaf
        assert not y.requires_grad and y.grad_fn is None
        assert torch.is_grad_enabled()
        (x * x).sum().backward()
        return y, x.detach(), x.grad

    both(fn, make((3, 3)), make((3, 3)))


def test_set_grad_enabled_and_enable_grad_inside_no_grad():
    x = make((3,)).to(TPU).requires_grad_()
    with torch.set_grad_enabled(False):
        assert not (x + 1).requires_grad
        with torch.enable_grad():
            assert (x + 1).requires_grad


def test_inference_mode_outputs_are_inference_tensors():
    def fn(device, x, w):
        w = leaf(w)
        with torch.inference_mode():
            y = (x @ w).relu()
            y.add_(1)  # in-place on an inference tensor inside inference mode is allowed
        assert y.is_inference() and not y.requires_grad
        return y, (x + 1).sum(dim=0)

    both(fn, make((3, 4)), make((4, 2)))


def inference_tensor_errors(device):
    """The first line of each error that misusing an inference tensor raises on `device`."""
    with torch.inference_mode():
        y = make((3,)).to(device) * 2
    weight = make((3,)).to(device).requires_grad_()
    messages = []
    for action in (lambda: y.add_(1), lambda: (y * weight).sum().backward()):
        with pytest.raises(RuntimeError) as error:
            action()
        messages.append(str(error.value).split("\n")[0])
    return messages


def test_inference_tensors_raise_the_cpu_errors_outside_inference_mode():
    expected = inference_tensor_errors(CPU)
    assert inference_tensor_errors(TPU) == expected
    assert "Inplace update to inference tensor outside InferenceMode" in expected[0]
    assert "Inference tensors cannot be saved for backward" in expected[1]


def test_inference_mode_false_keeps_autograd():
    x = make((3,)).to(TPU).requires_grad_()
    with torch.inference_mode():
        with torch.inference_mode(False):
            y = x * 2
    assert y.requires_grad and not y.is_inference()
    y.sum().backward()
    assert_close(x.grad, torch.full((3,), 2.0))
