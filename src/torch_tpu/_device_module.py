"""``torch.tpu``: device management, synchronization, RNG, memory and precision."""

from __future__ import annotations

import contextlib

import torch

from torch_tpu import _C


def is_available() -> bool:
    return _C._is_available()


def is_initialized() -> bool:
    return _C._is_initialized()


def init() -> None:
    _C._init()


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {device}")
    return current_device() if device.index is None else device.index


def set_device(device) -> None:
    _C._set_device(_index(device))


class device:  # noqa: N801 - mirrors torch.cuda.device
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.index = _index(device) if device is not None else -1
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        if self.index >= 0:
            set_device(self.index)

    def __exit__(self, *exc):
        if self.index >= 0:
            set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Runs pending work and waits for the device's queue to drain."""
    _C._synchronize()


def get_device_name(device=None) -> str:
    info = _C._platform()
    return f"{info['platform']}:{info['devices'][_index(device)]}"


def get_device_properties(device=None):
    info = _C._platform()
    return {"name": get_device_name(device), "platform": info["platform"], "plugin": info["plugin"]}


# ---- RNG ----


def _is_in_bad_fork() -> bool:
    """torch.manual_seed seeds device generators only through modules that answer this. The PJRT
    client is not fork-safe either, but a forked child that never touches the device is fine."""
    return False


def manual_seed(seed: int) -> None:
    _C._manual_seed(current_device(), int(seed) & 0xFFFFFFFFFFFFFFFF)


def manual_seed_all(seed: int) -> None:
    for index in range(max(device_count(), 1)):
        _C._manual_seed(index, int(seed) & 0xFFFFFFFFFFFFFFFF)


def seed() -> int:
    return _C._seed(current_device())


def seed_all() -> None:
    value = seed()
    manual_seed_all(value)


def initial_seed() -> int:
    return _C._initial_seed(current_device())


def get_rng_state(device="tpu") -> torch.Tensor:
    seed_value, offset = _C._get_rng_state(_index(device))
    state = torch.tensor([seed_value, offset], dtype=torch.uint64)
    return state.view(torch.uint8).clone()


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    if new_state.dtype != torch.uint8 or new_state.numel() != 16:
        raise RuntimeError("tpu RNG state must be a uint8 tensor of 16 bytes (as returned by get_rng_state)")
    words = new_state.contiguous().view(torch.uint64).tolist()
    _C._set_rng_state(_index(device), int(words[0]), int(words[1]))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for index, state in enumerate(states):
        set_rng_state(state, index)


# ---- Memory ----


# The allocator is a c10::DeviceAllocator, so these are torch.accelerator's, keyed like CUDA's.


def memory_stats(device=None) -> dict:
    return dict(torch.accelerator.memory_stats(_index(device)))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Buffers are freed when their last tensor goes; there is no caching allocator to empty."""


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes. The CPU plugin's memory is host memory."""
    return torch.accelerator.get_memory_info(_index(device))


# ---- Streams (one in-order queue per device) ----


class Stream:
    def __init__(self, device=None, priority: int = 0):
        self.device = torch.device("tpu", _index(device))

    def synchronize(self) -> None:
        synchronize()

    def wait_stream(self, stream) -> None:
        """Nothing to do: there is one queue per device, ordered by data dependencies."""

    def query(self) -> bool:
        """Whether all work launched so far has finished."""
        return self.record_event().query()

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record()
        return event


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):  # noqa: N802
    """``torch.tpu.Event``, like ``torch.cuda.Event``: a ``torch.Event`` on the tpu device."""
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> Stream:
    return Stream(device)


def default_stream(device=None) -> Stream:
    return Stream(device)


@contextlib.contextmanager
def stream(stream=None):
    yield stream


from torch_tpu.precision import Precision, precision  # noqa: E402,F401
