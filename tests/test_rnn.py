"""Recurrent layers on tpu against the CPU: nn.LSTM, nn.GRU and their cells reach the device as
the fused cell ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and their backwards; the CPU
runs its unfused math, so the comparison checks the fused formulas."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_close, make


def randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(make(p.shape, low=-0.5, high=0.5))
    return module


def flatten(outputs):
    """An RNN's (output, h) or (output, (h, c)) as a flat list of tensors."""
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for item in outputs for t in flatten(item)]


def check_forward_backward(module, inputs, rtol=1e-4, atol=1e-5):
    module.zero_grad(set_to_none=True)
    tpu_module = copy.deepcopy(module).to(TPU)
    cpu_inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    tpu_inputs = [t.to(TPU).requires_grad_(t.is_floating_point()) for t in inputs]
    expected, actual = module(*cpu_inputs), tpu_module(*tpu_inputs)
    expected, actual = flatten(expected), flatten(actual)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, rtol=rtol, atol=atol)
    weights = [make(e.shape, seed=i) for i, e in enumerate(expected)]
    sum(((e * w).sum() for e, w in zip(expected, weights, strict=True)), torch.zeros(())).backward()
    sum(((a * w.to(TPU)).sum() for a, w in zip(actual, weights, strict=True)), torch.zeros((), device=TPU)).backward()
    for a, e in zip(tpu_inputs, cpu_inputs, strict=True):
        if e.grad is not None:
            assert_close(a.grad, e.grad, rtol=rtol, atol=atol)
    for p_tpu, p_cpu in zip(tpu_module.parameters(), module.parameters(), strict=True):
        assert_close(p_tpu.grad, p_cpu.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("layers", "bidirectional", "batch_first"), [(1, False, False), (2, True, True)])
def test_lstm(bias, layers, bidirectional, batch_first):
    module = randomize(torch.nn.LSTM(5, 6, num_layers=layers, bias=bias, bidirectional=bidirectional,
                                     batch_first=batch_first))  # fmt: skip
    x = make((3, 4, 5))
    state_shape = (layers * (2 if bidirectional else 1), 3 if batch_first else 4, 6)
    check_forward_backward(module, [x])
    check_forward_backward(_WithState(module), [x, make(state_shape), make(state_shape)])


class _WithState(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        return self.rnn(x, state if len(state) > 1 else state[0])


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("layers", "bidirectional"), [(1, False), (2, True)])
def test_gru(bias, layers, bidirectional):
    module = randomize(torch.nn.GRU(5, 6, num_layers=layers, bias=bias, bidirectional=bidirectional))
    x = make((4, 3, 5))
    h0 = make((layers * (2 if bidirectional else 1), 3, 6))
    check_forward_backward(module, [x])
    check_forward_backward(_WithState(module), [x, h0])


@pytest.mark.parametrize("cell", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_cells_over_a_sequence(cell):
    module = randomize(cell(5, 7))

    class Unrolled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = module

        def forward(self, xs):
            state = None
            outputs = []
            for x in xs.unbind(0):
                state = self.cell(x, state)
                outputs.append(state[0] if isinstance(state, tuple) else state)
            return torch.stack(outputs)

    check_forward_backward(Unrolled(), [make((3, 2, 5))])


def test_lstm_cell_backward_with_only_one_gradient():
    # Only cy's gradient flows (hy unused): the fused backward gets an undefined grad_hy.
    cell = randomize(torch.nn.LSTMCell(4, 3))

    class CellState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = cell

        def forward(self, x):
            return self.cell(x)[1]

    check_forward_backward(CellState(), [make((2, 4))])


def test_gru_cell_shape_errors():
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(
            torch.zeros(2, 9, device=TPU), torch.zeros(2, 8, device=TPU), torch.zeros(2, 3, device=TPU)
        )
