"""torch.distributed on tpu: the ``tpu`` c10d backend (alias ``tpu_dist``, TorchTPU's name).

Importing torch_tpu registers it for the tpu device, so ``init_process_group()`` with no backend
picks it, and ``"cpu:gloo,tpu:tpu"`` works. One process per device: under torchrun the device
index is the local rank. The transport is chosen per plugin and can be forced with
``TORCH_TPU_DIST_TRANSPORT``:

- ``host``: each collective stages its tensors through the host and runs on Gloo. Used when every
  device is addressable by this process (the CPU plugin); it needs no plugin support.
- ``program``: collectives inside the program (StableHLO all_reduce, ...); see ``_in_program``.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from torch_tpu import _C

BACKEND_NAME = "tpu"
ALIASES = ("tpu_dist",)
TRANSPORTS = ("host", "program")


def transport() -> str:
    """The transport new process groups use: TORCH_TPU_DIST_TRANSPORT, else ``host``."""
    chosen = os.environ.get("TORCH_TPU_DIST_TRANSPORT", "host").strip().lower() or "host"
    if chosen not in TRANSPORTS:
        raise ValueError(f"TORCH_TPU_DIST_TRANSPORT must be one of {', '.join(TRANSPORTS)}, got {chosen!r}")
    return chosen


def _checks_across_ranks() -> bool:
    # Each collective first compares (kind, dtype, shape) across ranks: one tiny extra exchange.
    return os.environ.get("TORCH_TPU_DIST_CHECKS", "1") != "0"


def _create_backend(options, backend_options=None):
    """c10d's creator (extended API): a tpu backend over this group's ranks."""
    chosen = transport()
    if chosen == "program":
        raise RuntimeError(
            "TORCH_TPU_DIST_TRANSPORT=program: collectives inside the program need a plugin whose "
            f"devices span processes (libtpu, CUDA); this process runs on {torch.tpu.get_device_name()}, "
            "which addresses only its own devices. Use TORCH_TPU_DIST_TRANSPORT=host."
        )
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is not None and not dist.is_initialized():  # the default group, under torchrun
        torch.tpu.set_device(int(local_rank))
    store = options.store
    host = dist.ProcessGroupGloo(
        dist.PrefixStore("tpu_host/", store), options.group_rank, options.group_size, options.timeout
    )
    return _C._ProcessGroupTPU(
        store, options.group_rank, options.group_size, host, options.timeout, _checks_across_ranks()
    )


def _has_tpu_backend_only(pg) -> bool:
    try:
        pg._get_backend(torch.device("cpu"))
        return False
    except RuntimeError:
        pass
    try:
        return isinstance(pg._get_backend(torch.device("tpu")), _C._ProcessGroupTPU)
    except RuntimeError:
        return False


def _install_default_backend_fix() -> None:
    """``init_process_group()`` with no backend maps only the accelerator (tpu) to its backend, then
    marks Gloo as the group's default backend, which such a group does not have: DDP's logger and
    ``_get_backend_name()`` then fail. CUDA avoids it only because PyTorch special-cases NCCL.
    Groups whose default backend is missing get the tpu backend as their default instead."""
    c10d = dist.distributed_c10d
    original = c10d._new_process_group_helper
    if getattr(original, "_torch_tpu", False):
        return

    def new_process_group_helper(*args, **kwargs):
        pg, prefix_store = original(*args, **kwargs)
        if isinstance(pg, dist.ProcessGroup) and pg._get_backend_name() == "gloo" and _has_tpu_backend_only(pg):
            pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        return pg, prefix_store

    new_process_group_helper._torch_tpu = True
    c10d._new_process_group_helper = new_process_group_helper


def _register() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        return
    # The first name registered for a device becomes its default, so "tpu" goes first.
    for name in (BACKEND_NAME, *ALIASES):
        if name.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(name, _create_backend, extended_api=True, devices=["tpu"])
    _install_default_backend_fix()


_register()
