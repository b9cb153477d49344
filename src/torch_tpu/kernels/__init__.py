"""Custom kernels: StableHLO, JAX and Pallas functions as PyTorch ops on tpu tensors.

- ``stablehlo(text, result_types=... | shape_fn=...)``: an op from StableHLO text (no JAX needed).
- ``@jax``: an op from a JAX function, exported with ``jax.export`` per input signature; its fake
  kernel comes from ``jax.eval_shape`` and its backward from ``jax.vjp``. Pallas kernels
  (``pl.pallas_call``) go through it too. JAX is imported only when this is used.

Each op records one call of its embedded StableHLO function in the surrounding program, in
strict, fused and compiled modes: the kernel fuses with the ops around it and its programs are
cached (in memory and on disk) like any other. ``torch.tpu.pallas.jax_op`` is TorchTPU's spelling.
"""

from __future__ import annotations

from ._jax import jax
from ._stablehlo import stablehlo

__all__ = ["jax", "stablehlo"]
