"""``torch.tpu``: device management, synchronization, RNG, memory and precision."""

from __future__ import annotations

import contextlib
import os
import re

import torch

from torch_tpu import _C


def is_available() -> bool:
    return _C._is_available()


def is_initialized() -> bool:
    return _C._is_initialized()


def init() -> None:
    _lazy_init()


# ---- Fork safety ----
# A child forked after the PJRT client started inherits its memory but not its threads. The C++
# side (exec::GetClient) refuses every device use in such a child; this side answers
# _is_in_bad_fork, so torch.manual_seed in a DataLoader worker leaves the device alone.

_BAD_FORK_MESSAGE = "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use the 'spawn' start method"
_initialized_at_fork = False
_in_bad_fork = False


def _before_fork() -> None:
    global _initialized_at_fork
    _initialized_at_fork = _in_bad_fork or _C._is_initialized()


def _after_fork_in_child() -> None:
    global _in_bad_fork
    _in_bad_fork = _initialized_at_fork


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    """True in a child forked after the device was initialised (torch.manual_seed asks)."""
    return _in_bad_fork


def _lazy_init() -> None:
    if _in_bad_fork:
        raise RuntimeError(_BAD_FORK_MESSAGE)
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


def _checked_index(device) -> int:
    """The device's index, checked as PyTorch checks accelerator indices."""
    index = _index(device)
    count = device_count()
    if not 0 <= index < count:
        raise RuntimeError(
            f"Invalid device index tpu:{index}. The device index is out of range. It must be in [0, {count}), "
            f"but got {index}. Set TORCH_TPU_NUM_DEVICES to change the number of CPU devices."
        )
    return index


def set_device(device) -> None:
    _C._set_device(_checked_index(device))


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


# ---- Device properties ----


class _TpuDeviceProperties:
    """What ``torch.tpu.get_device_properties`` returns, with ``torch.cuda``'s field names where
    they mean the same thing (name, major, minor, total_memory, multi_processor_count)."""

    __slots__ = (
        "index",
        "name",
        "device_kind",
        "platform",
        "platform_version",
        "plugin",
        "api_version",
        "major",
        "minor",
        "total_memory",
        "multi_processor_count",
        "supported_dtypes",
    )

    def __init__(self, **fields):
        for key, value in fields.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        dtypes = ", ".join(str(d).removeprefix("torch.") for d in self.supported_dtypes)
        return (
            f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
            f"plugin='{self.plugin}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, supported_dtypes=[{dtypes}])"
        )


def _capability_of(kind: str) -> tuple[int, int]:
    """A TPU's generation as (major, minor): "TPU v5 lite" -> (5, 0), "TPU v4" -> (4, 0). Other
    platforms (the CPU plugin, XLA's CUDA plugin, whose PJRT device kind carries no compute
    capability) report (0, 0)."""
    match = re.search(r"\bTPU v?(\d+)(?:\.(\d+))?", kind, re.IGNORECASE)
    return (int(match.group(1)), int(match.group(2) or 0)) if match else (0, 0)


def get_device_properties(device=None) -> _TpuDeviceProperties:
    index = _checked_index(device)
    info = _C._platform()
    kind = info["devices"][index]
    major, minor = _capability_of(kind)
    dtypes = torch.accelerator.get_device_capability(torch.device("tpu", index))["supported_dtypes"]
    return _TpuDeviceProperties(
        index=index,
        name=kind,
        device_kind=kind,
        platform=info["platform"],
        platform_version=info["platform_version"],
        plugin=info["plugin"],
        api_version=info["api_version"],
        major=major,
        minor=minor,
        total_memory=torch.accelerator.get_memory_info(index)[1],
        multi_processor_count=1,  # one PJRT device is one core as PyTorch sees it
        supported_dtypes=sorted(dtypes, key=str),
    )


def get_device_name(device=None) -> str:
    """The PJRT device kind, e.g. "TPU v5 lite" (or "cpu" on XLA's CPU plugin)."""
    return _C._platform()["devices"][_checked_index(device)]


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor), as ``torch.cuda.get_device_capability``: a TPU's generation, else (0, 0)."""
    return _capability_of(get_device_name(device))


# ---- RNG ----


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
    """Buffers are freed when their last tensor goes. On the CPU plugin, whose device memory is
    the process's malloc heap, freed heap is kept for reuse (csrc/runtime/host_heap.h); this gives
    what glibc can release back to the OS."""
    torch.accelerator.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes. The CPU plugin's memory is host memory."""
    return torch.accelerator.get_memory_info(_index(device))


# ---- Streams: ids over one in-order queue per device (csrc/aten/device.cc) ----


class Stream(torch.Stream):
    """``torch.tpu.Stream``, like ``torch.cuda.Stream``: a new stream from the device's pool, or an
    existing one given by ``stream_id``/``device_index``/``device_type``. Work on every stream of
    a device runs in one queue ordered by data dependencies, so ``wait_stream``/``wait_event``
    orderings always hold."""

    def __new__(cls, device=None, priority: int = 0, **existing):
        if existing:
            return super().__new__(cls, priority=priority, **existing)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):  # noqa: N802
    """``torch.tpu.Event``, like ``torch.cuda.Event``: a ``torch.Event`` on the tpu device."""
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> torch.Stream:
    """This thread's current stream on the device."""
    return torch.accelerator.current_stream(_index(device))


def default_stream(device=None) -> torch.Stream:
    current = current_stream(device)
    return torch.Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Makes `stream` current on its device, and its device current."""
    torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(stream=None):
    """Makes `stream` current on its device (and its device current) inside the block; both are
    restored on exit. ``None`` changes nothing."""
    if stream is None:
        yield
        return
    previous_device = current_device()
    previous = torch.accelerator.current_stream(stream.device_index)
    torch.accelerator.set_stream(stream)
    try:
        yield stream
    finally:
        torch.accelerator.set_stream(previous)
        set_device(previous_device)


# ---- Sharing: torch.multiprocessing and DLPack ----


def _sharing_error(what: str) -> str:
    return (
        f"Cannot share a tpu {what} with another process: tpu memory belongs to this process's "
        "PJRT client and has no inter-process handle. Send `t.cpu()` and move it back with `.to('tpu')`."
    )


def _raise_sharing_error(what: str):
    raise RuntimeError(_sharing_error(what))


def _guard_reducer(original, what: str, device_of):
    def reduce(obj):
        if device_of(obj).type != "tpu":
            return original(obj)
        import threading

        # multiprocessing.Queue pickles in its feeder thread, where an error is only printed and
        # the receiver would wait forever: there, send a payload that raises on the other side.
        if threading.current_thread().name == "QueueFeederThread":
            return (_raise_sharing_error, (what,))
        raise RuntimeError(_sharing_error(what))

    reduce._torch_tpu_guard = True
    return reduce


def _storage_device(storage) -> torch.device:
    untyped = storage._untyped_storage if isinstance(storage, torch.storage.TypedStorage) else storage
    return untyped.device


def _install_exit_grace() -> None:
    """A backward on tpu runs on autograd's device thread, which drops its finished task after the
    caller has returned. Since torch 2.13 that task holds a Python object (the context that
    ``torch.autograd.backward`` stashes for device threads), so the drop takes the GIL; when the
    script ends right after a backward, it can come during interpreter shutdown, where taking the
    GIL ends the thread and the process aborts ("terminate called without an active exception").
    An exit handler runs before shutdown: releasing the GIL there for a moment lets the thread
    finish first."""
    import atexit
    import time

    atexit.register(time.sleep, 0.01)


def _install_multiprocessing_guard() -> None:
    """torch.multiprocessing picks one reducer per Python type (torch.Tensor, the storage
    classes), not per device: wrap them so a tpu tensor or storage raises instead of hanging."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's reducers first)

    reducers = ForkingPickler._extra_reducers
    for cls, reducer in list(reducers.items()):
        if getattr(reducer, "_torch_tpu_guard", False):
            continue
        if isinstance(cls, type) and issubclass(cls, torch.Tensor):
            reducers[cls] = _guard_reducer(reducer, "tensor", lambda t: t.device)
        elif cls is torch.UntypedStorage or cls is torch.storage.TypedStorage or cls in torch._storage_classes:
            reducers[cls] = _guard_reducer(reducer, "storage", _storage_device)


def _dlpack_error() -> BufferError:
    return BufferError(
        "tpu tensors cannot be exported through DLPack without a copy: the device buffer is owned by "
        "PJRT. Call `t.cpu()` first, or ask for a CPU copy (`__dlpack__(dl_device=(kDLCPU, 0))`, "
        "e.g. `numpy.from_dlpack(t, device='cpu')`)."
    )


def _install_dlpack_guard() -> None:
    """DLPack for tpu tensors: ``__dlpack_device__`` names the device (kDLExtDev, index), as torch
    does for an unrenamed PrivateUse1 device; an export copies to the CPU when the consumer asks
    for a CPU tensor, and otherwise raises BufferError (the raw export would hand out a pointer
    that is not memory)."""
    import torch.utils.dlpack as dlpack

    tensor_dlpack = torch.Tensor.__dlpack__
    if getattr(tensor_dlpack, "_torch_tpu_guard", False):
        return
    tensor_dlpack_device = torch.Tensor.__dlpack_device__
    to_dlpack = dlpack.to_dlpack
    cpu_device = int(dlpack.DLDeviceType.kDLCPU)

    def __dlpack__(self, *, stream=-1, max_version=None, dl_device=None, copy=None):  # noqa: N807
        if self.device.type != "tpu" or torch.overrides.has_torch_function_unary(self):
            return tensor_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        if self.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        if dl_device is not None and int(dl_device[0]) == cpu_device and copy is not False:
            return self.cpu().__dlpack__(max_version=max_version, dl_device=None, copy=None)
        raise _dlpack_error()

    def __dlpack_device__(self):  # noqa: N807
        if self.device.type != "tpu" or torch.overrides.has_torch_function_unary(self):
            return tensor_dlpack_device(self)
        index = self.device.index if self.device.index is not None else current_device()
        return (dlpack.DLDeviceType.kDLExtDev, index)

    def guarded_to_dlpack(tensor):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "tpu":
            raise _dlpack_error()
        return to_dlpack(tensor)

    guarded_to_dlpack.__doc__ = to_dlpack.__doc__
    __dlpack__.__doc__ = tensor_dlpack.__doc__
    __dlpack__._torch_tpu_guard = True
    torch.Tensor.__dlpack__ = __dlpack__
    torch.Tensor.__dlpack_device__ = __dlpack_device__
    dlpack.to_dlpack = guarded_to_dlpack
    torch.to_dlpack = guarded_to_dlpack


# ---- Dynamo's device interface ----


def _register_dynamo_interface(device_interface) -> None:
    """Registers torch_tpu's interface for "tpu" in ``torch._dynamo.device_interface``, over the
    stub torch 2.13 ships for its own Pallas TPU path (whose device_count() raises)."""
    import sys

    module = sys.modules[__name__]

    class TpuInterface(device_interface.DeviceInterface):
        device = module.device

        class Event(torch.Event):
            def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
                return super().__new__(
                    cls, device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
                )

        Stream = module.Stream

        class Worker:
            @staticmethod
            def set_device(device) -> None:
                device_interface.caching_worker_current_devices["tpu"] = _index(device)

            @staticmethod
            def current_device() -> int:
                return device_interface.caching_worker_current_devices.get("tpu", current_device())

            @staticmethod
            def get_device_properties(device=None):
                cached = device_interface.caching_worker_device_properties
                if "tpu" not in cached:
                    cached["tpu"] = [get_device_properties(i) for i in range(device_count())]
                return cached["tpu"][_index(device)]

        @staticmethod
        def current_device() -> int:
            return current_device()

        @staticmethod
        def set_device(device) -> None:
            set_device(device)

        @staticmethod
        def exchange_device(device: int) -> int:
            previous = current_device()
            if device >= 0:
                set_device(device)
            return previous

        maybe_exchange_device = exchange_device

        @staticmethod
        def device_count() -> int:
            return device_count()

        @staticmethod
        def is_available() -> bool:
            return is_available()

        @staticmethod
        def stream(stream):
            return module.stream(stream)

        @staticmethod
        def current_stream():
            return torch.accelerator.current_stream()

        @staticmethod
        def set_stream(stream) -> None:
            torch.accelerator.set_stream(stream)

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return 0

        @staticmethod
        def synchronize(device=None) -> None:
            synchronize(device)

        @classmethod
        def get_device_properties(cls, device=None):
            return get_device_properties(device)

        @staticmethod
        def get_compute_capability(device=None):
            return get_device_capability(device)

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation: bool = False) -> bool:
            return dtype in torch.accelerator.get_device_capability(torch.device("tpu"))["supported_dtypes"]

        @staticmethod
        def memory_allocated(device=None) -> int:
            return memory_allocated(device)

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

        @staticmethod
        def raise_if_triton_unavailable(device=None) -> None:
            raise RuntimeError("tpu tensors are compiled through XLA (backend='tpu'), not Triton")

    TpuInterface.__module__ = __name__
    TpuInterface.__qualname__ = TpuInterface.__name__ = "TpuInterface"
    device_interface.register_interface_for_device("tpu", TpuInterface)


def _hook_dynamo_interface() -> None:
    """Registers the interface once ``torch._dynamo.device_interface`` exists, without importing
    Dynamo (seconds) at ``import torch``. Its registry fills lazily (init_device_reg), writing its
    own "tpu" stub then, so the registration runs after every init_device_reg."""
    import importlib.abc
    import importlib.machinery
    import sys

    name = "torch._dynamo.device_interface"

    def patch(device_interface) -> None:
        original = device_interface.init_device_reg
        if getattr(original, "_torch_tpu_hook", False):
            return

        def init_device_reg() -> None:
            original()
            _register_dynamo_interface(device_interface)

        init_device_reg._torch_tpu_hook = True
        device_interface.init_device_reg = init_device_reg
        if device_interface._device_initialized:
            _register_dynamo_interface(device_interface)

    if name in sys.modules:
        patch(sys.modules[name])
        return

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def exec_and_patch(module):
                exec_module(module)
                patch(module)

            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, Finder())


# ---- TorchTPU 0.2.0 compatibility: the same modes and precision under TorchTPU's names ----

from torch_tpu import (  # noqa: E402
    ops,  # noqa: F401
    pallas,  # noqa: F401  (torch.tpu.pallas.jax_op; imports JAX only when used)
)
from torch_tpu._mode import EagerMode, eager_mode, set_eager_mode  # noqa: E402,F401
from torch_tpu.precision import Precision, allow_excess_precision, precision  # noqa: E402,F401
