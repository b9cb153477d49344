"""Collectives inside the program: the transport for plugins whose devices span processes.

One StableHLO module, compiled for N replicas with replica i assigned to device i, runs once on
all N devices; its ``stablehlo.all_reduce`` (``all_gather``, ``reduce_scatter``, ``all_to_all``,
``collective_permute``) exchanges the values between them. ``run_collective`` drives it from one
process over one tensor per device, which is how the lowering is proven on the CPU plugin (run
with ``TORCH_TPU_NUM_DEVICES``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_tpu import _C

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute")
REDUCE_OPS = ("sum", "product", "min", "max", "avg", "premul_sum")
_REDUCING = ("all_reduce", "reduce_scatter")


def run_collective(
    kind: str,
    inputs: Sequence[torch.Tensor],
    op: str = "sum",
    groups: Sequence[Sequence[int]] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    factor: float | None = None,
) -> list[torch.Tensor]:
    """Runs one collective over ``inputs[i]`` on ``tpu:i`` (one input per device) in one launch.

    ``op`` (all_reduce, reduce_scatter): sum, product, min, max, avg or premul_sum (which takes
    ``factor``). ``groups``: replica groups of one size partitioning the ranks (default: all).
    ``pairs``: collective_permute's (source, target) ranks; a rank no pair targets gets zeros.
    all_gather, reduce_scatter and all_to_all work along dim 0. Returns a new tensor per device.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; expected one of {', '.join(KINDS)}")
    op = op.lower()
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {', '.join(REDUCE_OPS)}")
    if kind not in _REDUCING and op != "sum":
        raise ValueError(f"{kind} takes no reduce op, got {op!r}")
    if (op == "premul_sum") != (factor is not None):
        raise ValueError("a factor goes with op='premul_sum', and only with it")
    if (kind == "collective_permute") != (pairs is not None):
        raise ValueError("source-target pairs go with collective_permute, and only with it")
    if groups is not None and len(groups) == 0:
        raise ValueError("groups must partition the ranks; got no groups (None means all ranks)")
    inputs = list(inputs)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("inputs must be tensors, one per tpu device")
    return _C._in_program_collective(
        kind,
        inputs,
        op,
        [list(map(int, group)) for group in groups or ()],
        [(int(source), int(target)) for source, target in pairs or ()],
        1.0 if factor is None else float(factor),
    )
