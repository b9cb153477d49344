"""``torch.tpu.pallas``: TorchTPU's spelling of JAX and Pallas kernels as PyTorch ops.

``jax_op(name, fn)`` registers ``fn`` (a JAX function, which may call ``pl.pallas_call``) as the
custom op ``name`` and returns it (a ``torch.library`` CustomOpDef: call it, or give it your own
``register_fake`` / ``register_autograd``). It is ``torch_tpu.kernels.jax``, so its backward comes
from ``jax.vjp`` unless you register one. JAX is imported only when it is called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["jax_op"]


def jax_op(
    name: str,
    fn: Callable,
    *,
    donate_argnums: Sequence[int] | None = None,
    mesh=None,
    input_partition_specs=None,
    output_partition_specs=None,
    num_outputs: int | None = None,
):
    """``fn`` as the PyTorch op ``name`` ("namespace::op") on tpu tensors.

    Static arguments are the parameters annotated int, float, bool or str, as in TorchTPU.
    ``donate_argnums`` is accepted and has no effect: the op is functional, and its inputs' buffers
    are reused by the surrounding program where nothing else holds them. A ``mesh`` (shard_map
    kernels over several devices) is not supported: each process runs its kernel on its own device.
    """
    del donate_argnums
    if mesh is not None or input_partition_specs is not None or output_partition_specs is not None:
        raise NotImplementedError(
            f"jax_op('{name}'): mesh and partition specs are not supported; "
            "call the kernel on each device's shard (one process per device)"
        )
    from .kernels._jax import JaxKernel, _num_outputs
    from .kernels._op import qualified_name

    return JaxKernel(qualified_name(name, name), fn, _num_outputs(fn, num_outputs)).op
