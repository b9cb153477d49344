"""Which PJRT plugin backs the tpu device: TORCH_TPU_PJRT_PLUGIN, then libtpu when a TPU is
present, then XLA's CPU plugin from the xla-cpu-pjrt package."""

from __future__ import annotations

import glob
import importlib.util
import os


def _package_file(package: str, *relative: str) -> str | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, *relative)
        if os.path.exists(path):
            return path
    return None


def tpu_present() -> bool:
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def candidates() -> list[tuple[str, str]]:
    """Ordered (label, path) pairs to try at first device use."""
    found: list[tuple[str, str]] = []
    explicit = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if explicit:
        found.append(("TORCH_TPU_PJRT_PLUGIN", explicit))
        return found
    if tpu_present():
        libtpu = _package_file("libtpu", "libtpu.so")
        if libtpu:
            found.append(("libtpu", libtpu))
    cpu = _package_file("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")
    if cpu:
        found.append(("xla-cpu-pjrt", cpu))
    return found


def num_devices() -> int:
    """CPU devices to create: TORCH_TPU_NUM_DEVICES, else one per local process under torchrun
    (the device index is the local rank), else 1."""
    value = os.environ.get("TORCH_TPU_NUM_DEVICES", "") or os.environ.get("LOCAL_WORLD_SIZE", "")
    try:
        return int(value) if value else 1
    except ValueError:
        raise ValueError(f"TORCH_TPU_NUM_DEVICES must be an integer, got {value!r}") from None
