"""torch.compile(backend="tpu"): Dynamo graphs replayed through the eager kernels."""

from __future__ import annotations

import torch
from conftest import assert_close, make


def test_backend_is_discoverable():
    assert "tpu" in torch._dynamo.list_backends()


def test_compiled_function_matches_the_cpu():
    def f(x, y):
        return torch.softmax(x @ y.t() + 1.0, dim=-1).sum(0)

    compiled = torch.compile(f, backend="tpu")
    x, y = make((6, 4)), make((5, 4))
    assert_close(compiled(x.to("tpu"), y.to("tpu")), f(x, y))
    x2 = make((6, 4))
    assert_close(compiled(x2.to("tpu"), y.to("tpu")), f(x2, y))  # same graph, new values


def test_compiled_module_trains_like_the_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    tpu_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to("tpu")
    compiled = torch.compile(tpu_model, backend="tpu")
    x = make((3, 4))
    model(x).square().sum().backward()
    compiled(x.to("tpu")).square().sum().backward()
    for p_tpu, p_cpu in zip(tpu_model.parameters(), model.parameters(), strict=True):
        assert_close(p_tpu.grad, p_cpu.grad)
