"""Optimizers and gradient clipping on tpu against the CPU: a small model trained for a few steps
from the same weights and data must keep the CPU's parameters after every step.

The foreach=True paths call the _foreach_* ops: the elementwise ones record each entry through
its lowering (csrc/aten/foreach.cc), the rest run PyTorch's per-tensor loops, whose ops reach us as
ordinary elementwise ops.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_close, make

import torch_tpu

STEPS = 5

OPTIMIZERS = {
    "sgd": lambda params, foreach: torch.optim.SGD(params, lr=0.1, foreach=foreach),
    "sgd_momentum": lambda params, foreach: torch.optim.SGD(
        params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01, foreach=foreach
    ),
    "sgd_nesterov": lambda params, foreach: torch.optim.SGD(
        params, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, foreach=foreach
    ),
    "adam": lambda params, foreach: torch.optim.Adam(params, lr=0.01, foreach=foreach),
    "adam_decay_amsgrad": lambda params, foreach: torch.optim.Adam(
        params, lr=0.01, betas=(0.8, 0.99), weight_decay=0.05, amsgrad=True, foreach=foreach
    ),
    "adam_maximize": lambda params, foreach: torch.optim.Adam(params, lr=0.01, maximize=True, foreach=foreach),
    "adamw": lambda params, foreach: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=foreach),
    "adamw_amsgrad": lambda params, foreach: torch.optim.AdamW(
        params, lr=0.02, weight_decay=0.05, amsgrad=True, foreach=foreach
    ),
}


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batches():
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 6, generator=generator), torch.randn(5, 3, generator=generator)) for _ in range(STEPS)]


def train_step(model, optimizer, x, y, clip=None):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    norm = clip(model.parameters()) if clip is not None else None
    optimizer.step()
    return loss, norm


def assert_parameters_close(tpu_model, cpu_model):
    for (name, actual), expected in zip(tpu_model.named_parameters(), cpu_model.parameters(), strict=True):
        assert actual.device.type == "tpu", name
        assert_close(actual.detach(), expected.detach())


def assert_state_matches(tpu_optimizer, cpu_optimizer):
    for tpu_param, cpu_param in zip(
        (p for group in tpu_optimizer.param_groups for p in group["params"]),
        (p for group in cpu_optimizer.param_groups for p in group["params"]),
        strict=True,
    ):
        tpu_state, cpu_state = tpu_optimizer.state[tpu_param], cpu_optimizer.state[cpu_param]
        assert tpu_state.keys() == cpu_state.keys()
        for key, expected in cpu_state.items():
            actual = tpu_state[key]
            if not isinstance(expected, torch.Tensor):
                assert actual == expected, key
            elif key == "step":
                # Adam keeps its step count as a CPU scalar unless capturable: as on the CPU.
                assert actual.device.type == "cpu" and actual.item() == expected.item()
            else:
                assert_close(actual, expected)


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_cpu(name, foreach):
    cpu_model = make_model()
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_optimizer = OPTIMIZERS[name](cpu_model.parameters(), foreach)
    tpu_optimizer = OPTIMIZERS[name](tpu_model.parameters(), foreach)
    for x, y in batches():
        cpu_loss, _ = train_step(cpu_model, cpu_optimizer, x, y)
        tpu_loss, _ = train_step(tpu_model, tpu_optimizer, x.to(TPU), y.to(TPU))
        assert_close(tpu_loss.detach(), cpu_loss.detach())
        assert_parameters_close(tpu_model, cpu_model)
        assert_state_matches(tpu_optimizer, cpu_optimizer)


@pytest.mark.parametrize("name", ["sgd_nesterov", "adamw_amsgrad"])
def test_optimizer_steps_do_not_recompile(name):
    # The learning rate, bias corrections and step counts vary per step: they must be program
    # parameters, so once every program of a step has been built, later steps reuse them.
    model = make_model().to(TPU)
    optimizer = OPTIMIZERS[name](model.parameters(), True)
    data = batches()
    for x, y in data[:2]:
        train_step(model, optimizer, x.to(TPU), y.to(TPU))
    torch.tpu.synchronize()
    before = torch_tpu.metrics.snapshot()
    for group in optimizer.param_groups:
        group["lr"] *= 0.5  # as a scheduler would
    for x, y in data[2:]:
        train_step(model, optimizer, x.to(TPU), y.to(TPU))
    torch.tpu.synchronize()
    after = torch_tpu.metrics.snapshot()
    # A program missing from the in-memory cache is compiled or read from disk.
    assert after["compiles"] == before["compiles"]
    assert after["disk_cache_hits"] == before["disk_cache_hits"]
    assert after["memory_cache_hits"] > before["memory_cache_hits"]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm(foreach, norm_type):
    cpu_model = make_model()
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_optimizer = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)
    tpu_optimizer = torch.optim.SGD(tpu_model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)

    def clip(params):
        return torch.nn.utils.clip_grad_norm_(params, max_norm=0.3, norm_type=norm_type, foreach=foreach)

    for x, y in batches():
        _, cpu_norm = train_step(cpu_model, cpu_optimizer, x, y, clip)
        _, tpu_norm = train_step(tpu_model, tpu_optimizer, x.to(TPU), y.to(TPU), clip)
        assert_close(tpu_norm, cpu_norm)
        for actual, expected in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
            assert_close(actual.grad, expected.grad)
        assert_parameters_close(tpu_model, cpu_model)


@pytest.mark.parametrize("foreach", [False, True])
def test_clip_grad_value_and_norm_nonfinite(foreach):
    grads = [make((4, 3)), make((5,))]
    cpu_params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    tpu_params = [torch.zeros_like(g, device=TPU, requires_grad=True) for g in grads]
    for cpu_p, tpu_p, g in zip(cpu_params, tpu_params, grads, strict=True):
        cpu_p.grad, tpu_p.grad = g.clone(), g.to(TPU)
    torch.nn.utils.clip_grad_value_(cpu_params, 0.5, foreach=foreach)
    torch.nn.utils.clip_grad_value_(tpu_params, 0.5, foreach=foreach)
    for cpu_p, tpu_p in zip(cpu_params, tpu_params, strict=True):
        assert_close(tpu_p.grad, cpu_p.grad)
    tpu_params[1].grad[2] = float("inf")
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        torch.nn.utils.clip_grad_norm_(tpu_params, 1.0, error_if_nonfinite=True, foreach=foreach)
