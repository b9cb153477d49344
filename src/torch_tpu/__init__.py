"""torch_tpu: an eager-first PyTorch backend for XLA devices, exposed as the ``tpu`` device.

``import torch_tpu`` registers the device (PrivateUse1 renamed ``tpu``) and ``torch.tpu``.
It never fails for want of a plugin: ``torch.tpu.is_available()`` is then False and the first
device use says what was tried.
"""

from __future__ import annotations

import os

import torch

# XLA logs INFO lines (device counts) to stderr at plugin start; keep warnings, drop the chatter.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from torch_tpu import (
    _C,  # noqa: E402
    _plugin,  # noqa: E402
)

__all__ = [
    "execution_mode",
    "platform",
    "metrics",
    "api",
    "ops",
    "kernels",
    "ExecutionMode",
    "Precision",
    "precision",
    "EagerMode",
    "set_eager_mode",
    "eager_mode",
    "allow_excess_precision",
]

_C._configure(_plugin.candidates(), _plugin.num_devices())

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from torch_tpu import _device_module as _device_module  # noqa: E402

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)

from torch_tpu import (  # noqa: E402
    _attention,  # noqa: E402, F401  (F.scaled_dot_product_attention as one fused op)
    amp,  # noqa: E402, F401  (torch.autocast("tpu"): torch.tpu's AMP functions)
    api,
    kernels,  # noqa: E402  (custom kernels: StableHLO, JAX, Pallas; JAX imported on use)
    metrics,
    ops,  # noqa: E402  (torch.tpu.ops.optimization_barrier)
)
from torch_tpu._mode import EagerMode, ExecutionMode, eager_mode, execution_mode, set_eager_mode  # noqa: E402
from torch_tpu.precision import (  # noqa: E402
    Precision,
    _follow_fp32_precision,
    _forward_torch_setting,
    allow_excess_precision,
    precision,
)

_forward_torch_setting()
_follow_fp32_precision()
_device_module._install_exit_grace()
_device_module._install_multiprocessing_guard()
_device_module._install_dlpack_guard()
_device_module._hook_dynamo_interface()


def platform() -> str:
    """What backs the tpu device, e.g. ``"cpu (xla-cpu-pjrt, PJRT API 0.81)"``."""
    info = _C._platform()
    return f"{info['platform']} ({info['plugin']}, PJRT API {info['api_version']})"


# An optimizer step on tpu parameters runs as one program (see _optim.py).
from torch_tpu import _optim  # noqa: E402

_optim.install()

# torch.compile with no backend or "inductor" on tpu code runs the tpu backend (see _compile/).
from torch_tpu import _compile  # noqa: E402

_compile.install()

# Meta functions replaced where PyTorch's fail on valid input (see _meta.py).
from torch_tpu import _meta  # noqa: E402

_meta.install()

# The "tpu" c10d backend, so init_process_group() on tpu needs no backend argument.
from torch_tpu import distributed  # noqa: E402, F401
