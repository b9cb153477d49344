"""torch.optim's fused optimizers (fused=True) on tpu against the CPU's fused kernels: the same
model, weights and data must keep the CPU's parameters and optimizer state after every step, with
a float or a tensor learning rate, and GradScaler's grad_scale and found_inf must unscale or skip
as on the CPU. Each step is one program, and a changing learning rate compiles nothing."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_close, make
from test_optim import batches, make_model, train_step

import torch_tpu

OPTIMIZERS = {
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr, fused=True),
    "adam_decay_amsgrad_maximize": lambda params, lr: torch.optim.Adam(
        params, lr=lr, betas=(0.8, 0.95), weight_decay=0.05, amsgrad=True, maximize=True, fused=True
    ),
    "adamw": lambda params, lr: torch.optim.AdamW(params, lr=lr, weight_decay=0.1, fused=True),
    "adamw_amsgrad": lambda params, lr: torch.optim.AdamW(params, lr=lr, weight_decay=0.05, amsgrad=True, fused=True),
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr, fused=True),
    "sgd_momentum_dampening": lambda params, lr: torch.optim.SGD(
        params, lr=lr, momentum=0.9, dampening=0.2, weight_decay=0.01, fused=True
    ),
    "sgd_nesterov_maximize": lambda params, lr: torch.optim.SGD(
        params, lr=lr, momentum=0.8, nesterov=True, maximize=True, weight_decay=0.1, fused=True
    ),
    "adagrad": lambda params, lr: torch.optim.Adagrad(params, lr=lr, fused=True),
    "adagrad_decay_maximize": lambda params, lr: torch.optim.Adagrad(
        params, lr=lr, lr_decay=0.1, weight_decay=0.05, maximize=True, fused=True
    ),
}


def assert_state_matches(tpu_optimizer, cpu_optimizer):
    tpu_params = [p for group in tpu_optimizer.param_groups for p in group["params"]]
    cpu_params = [p for group in cpu_optimizer.param_groups for p in group["params"]]
    for tpu_param, cpu_param in zip(tpu_params, cpu_params, strict=True):
        assert_close(tpu_param.detach(), cpu_param.detach())
        tpu_state, cpu_state = tpu_optimizer.state[tpu_param], cpu_optimizer.state[cpu_param]
        assert tpu_state.keys() == cpu_state.keys()
        for key, expected in cpu_state.items():
            if isinstance(expected, torch.Tensor):
                assert_close(tpu_state[key], expected)  # the step counts too: fused keeps them on the device
            else:
                assert tpu_state[key] == expected, key


@pytest.mark.parametrize("lr_kind", ["float", "cpu tensor", "tpu tensor"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_fused_optimizer_matches_cpu(name, lr_kind):
    cpu_model = make_model()
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    lr = {"float": 0.05, "cpu tensor": torch.tensor(0.05), "tpu tensor": torch.tensor(0.05, device=TPU)}[lr_kind]
    cpu_optimizer = OPTIMIZERS[name](cpu_model.parameters(), lr.cpu() if isinstance(lr, torch.Tensor) else lr)
    tpu_optimizer = OPTIMIZERS[name](tpu_model.parameters(), lr)
    # A scheduler changes the rate every step (a tensor rate in place).
    schedulers = [torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.7) for o in (cpu_optimizer, tpu_optimizer)]
    for x, y in batches():
        cpu_loss, _ = train_step(cpu_model, cpu_optimizer, x, y)
        tpu_loss, _ = train_step(tpu_model, tpu_optimizer, x.to(TPU), y.to(TPU))
        for scheduler in schedulers:
            scheduler.step()
        assert_close(tpu_loss.detach(), cpu_loss.detach())
        assert_state_matches(tpu_optimizer, cpu_optimizer)


@pytest.mark.parametrize("name", ["adamw_amsgrad", "sgd_nesterov_maximize", "adagrad_decay_maximize"])
def test_fused_step_is_one_program_and_a_changing_rate_compiles_nothing(name):
    model = make_model().to(TPU)
    optimizer = OPTIMIZERS[name](model.parameters(), 0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    with torch_tpu.execution_mode("strict"):
        for i, (x, y) in enumerate(batches()):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x.to(TPU)), y.to(TPU)).backward()
            torch.tpu.synchronize()
            before = torch_tpu.metrics.snapshot()
            optimizer.step()
            torch.tpu.synchronize()
            after = torch_tpu.metrics.snapshot()
            scheduler.step()
            assert after["executions"] - before["executions"] == 1
            if i >= 2:  # SGD's first step starts its momentum buffers: a program of its own
                assert after["compiles"] == before["compiles"]
                assert after["disk_cache_hits"] == before["disk_cache_hits"]


def fused_call(op_name, device, found_inf):
    """One call of the fused op with grad_scale and found_inf, as GradScaler makes it; returns every
    list the op may write, and the step counts."""
    generator = torch.Generator().manual_seed(2)
    shapes = [(4, 3), (6,), ()]

    def tensors(low=None):
        values = [torch.randn(s, generator=generator) for s in shapes]
        return [(v.abs() if low == 0 else v).to(device) for v in values]

    params, grads = tensors(), [g * 8 for g in tensors()]
    first, second, third = tensors(), tensors(low=0), tensors(low=0)
    steps = [torch.tensor(3.0, device=device) for _ in shapes]
    scaling = dict(grad_scale=torch.tensor([8.0], device=device), found_inf=torch.tensor([found_inf], device=device))
    if op_name == "_fused_adamw_":
        torch._fused_adamw_(
            params, grads, first, second, third, steps, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1,
            eps=1e-8, amsgrad=True, maximize=False, **scaling,
        )  # fmt: skip
        return params + grads + first + second + third + steps
    if op_name == "_fused_sgd_":
        torch._fused_sgd_(
            params, grads, first, weight_decay=0.1, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True,
            maximize=False, is_first_step=False, **scaling,
        )  # fmt: skip
        return params + grads + first
    torch._fused_adagrad_(
        params, grads, second, steps, lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=False, **scaling
    )
    return params + grads + second + steps


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("op_name", ["_fused_adamw_", "_fused_sgd_", "_fused_adagrad_"])
def test_grad_scale_unscales_and_found_inf_skips_as_on_cpu(op_name, found_inf):
    expected = fused_call(op_name, "cpu", found_inf)
    actual = fused_call(op_name, TPU, found_inf)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e)
    if found_inf:  # nothing written: the gradients are still scaled
        untouched = fused_call(op_name, "cpu", 0.0)
        assert not torch.equal(untouched[len(actual) // 2], expected[len(actual) // 2])


@pytest.mark.parametrize("name", ["adamw", "sgd_momentum_dampening", "adagrad"])
def test_bfloat16_parameters_track_the_cpu_in_float32(name):
    # The CPU's own bf16 kernels differ from machine to machine (AVX2, AVX-512): the reference is
    # the CPU in f32 from the same bf16 values, under a bf16 tolerance (about 2 ulps of weights
    # near 1, after two steps of lr 0.1).
    cpu_model = make_model()
    tpu_model = copy.deepcopy(cpu_model).to(TPU, torch.bfloat16)
    cpu_model.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in cpu_model.state_dict().items()})
    cpu_optimizer = OPTIMIZERS[name](cpu_model.parameters(), 0.1)
    tpu_optimizer = OPTIMIZERS[name](tpu_model.parameters(), 0.1)
    for x, y in batches()[:2]:
        for model, optimizer, device, dtype in (
            (cpu_model, cpu_optimizer, "cpu", torch.float32),
            (tpu_model, tpu_optimizer, TPU, torch.bfloat16),
        ):
            optimizer.zero_grad()
            model(x.to(device, dtype)).float().sub(y.to(device)).square().mean().backward()
            optimizer.step()
    for actual, expected in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        assert actual.dtype == torch.bfloat16
        assert_close(actual.detach().float(), expected.detach(), rtol=1.6e-2, atol=1.6e-2)


def test_compiled_step_with_fused_adamw_matches_cpu():
    cpu_model = make_model()
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_optimizer = torch.optim.AdamW(cpu_model.parameters(), lr=0.05, fused=True)
    tpu_optimizer = torch.optim.AdamW(tpu_model.parameters(), lr=0.05, fused=True)
    step = torch.compile(train_step, backend="tpu")
    for i, (x, y) in enumerate(batches()):
        train_step(cpu_model, cpu_optimizer, x, y)
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()
        step(tpu_model, tpu_optimizer, x.to(TPU), y.to(TPU))
        torch.tpu.synchronize()
        after = torch_tpu.metrics.snapshot()
        if i >= 2:
            assert after["compiles"] == before["compiles"]
            assert after["executions"] - before["executions"] <= 4
        assert_state_matches(tpu_optimizer, cpu_optimizer)


def test_lists_of_different_lengths_are_refused():
    params = [make((3,)).to(TPU), make((2,)).to(TPU)]
    with pytest.raises(RuntimeError, match=r"_fused_adamw_: expected 2 tensors in exp_avgs .*got 1"):
        torch._fused_adamw_(
            params, [torch.ones_like(p) for p in params], params[:1], [torch.zeros_like(p) for p in params], [],
            [torch.tensor(1.0, device=TPU)] * 2, lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
            amsgrad=False, maximize=False,
        )  # fmt: skip
