"""An optimizer step on tpu parameters is one program, in every execution mode.

Optimizers run foreach kernels on tpu (each already one program, csrc/aten/foreach.cc) plus a few
single-tensor ops between them; global step hooks open a deferred scope around the whole step,
so all of it is recorded and then cut as one program when the step returns (in fused mode too:
the next step's forward is then recorded while the step runs). Deferring never
changes results: a host read inside the step still runs what it needs first.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import _C

_OPEN = "_torch_tpu_deferred_step"


def _on_tpu(optimizer: torch.optim.Optimizer) -> bool:
    for group in optimizer.param_groups:
        for param in group["params"]:
            return param.device.type == "tpu"
    return False


def _before_step(optimizer, args, kwargs):
    if torch.compiler.is_compiling():  # a compiled step is one program already (the tpu backend)
        return
    if getattr(optimizer, _OPEN, False):  # the last step raised: its scope is still open
        _C._exit_deferred("optimizer step")
    if _on_tpu(optimizer):
        setattr(optimizer, _OPEN, True)
        _C._enter_deferred()


def _after_step(optimizer, args, kwargs):
    if torch.compiler.is_compiling():
        return
    if getattr(optimizer, _OPEN, False):
        setattr(optimizer, _OPEN, False)
        _C._exit_optimizer_step()


def install() -> None:
    register_optimizer_step_pre_hook(_before_step)
    register_optimizer_step_post_hook(_after_step)
