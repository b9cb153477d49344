"""Meta functions torch_tpu replaces: the fallback runs an op's meta function for its output
shapes before lowering it, so a meta function that fails on valid input makes the op fail."""

from __future__ import annotations

import torch

_LIBRARY = None


def _fused_lstm_cell_meta(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    # PyTorch's own reads `.device` of absent biases (nn.LSTM(bias=False)); the checks are its.
    torch._check(input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape,
                 lambda: f"_thnn_fused_lstm_cell: gates {tuple(input_gates.shape)} and {tuple(hidden_gates.shape)}")  # fmt: skip
    torch._check(input_gates.shape[1] == 4 * cx.shape[1] and input_gates.shape[0] == cx.shape[0],
                 lambda: f"_thnn_fused_lstm_cell: gates {tuple(input_gates.shape)} for cx {tuple(cx.shape)}")  # fmt: skip
    for bias in (input_bias, hidden_bias):
        if bias is not None:
            shape = tuple(bias.shape)
            torch._check(shape == (input_gates.shape[1],), lambda s=shape: f"_thnn_fused_lstm_cell: bias of shape {s}")
    workspace = torch.empty_like(input_gates, memory_format=torch.contiguous_format)
    return (torch.empty_like(cx, memory_format=torch.contiguous_format),
            torch.empty_like(cx, memory_format=torch.contiguous_format), workspace)  # fmt: skip


def install() -> None:
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library("aten", "IMPL")
        _LIBRARY.impl("_thnn_fused_lstm_cell", _fused_lstm_cell_meta, "Meta", allow_override=True)
