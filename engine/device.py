"""Devices: ``cpu`` and ``cuda:N``, real (CuPy) or simulated (NumPy).

PyTorch gives every accelerator its own autograd worker thread and ReadyQueue;
we do the same.  When CuPy finds a GPU, ``cuda:N`` arrays are CuPy arrays on
device N.  Otherwise ``cuda:N`` is *simulated*: the arrays stay NumPy arrays
tagged with the device, but the threads and queues are exactly those of a real
device, which is all the scheduler can see.  Streams are not modelled.

Array modules: an op picks the module that makes its arrays from its inputs
(``array_module``: NumPy for NumPy arrays and scalars, CuPy for CuPy arrays),
as ``cupy.get_array_module`` does, and never converts a device array to NumPy
on the way; only ``to_numpy`` (a summary shown, ``Tensor.numpy()``, a copy to
``cpu``) brings one to the host.  PyTorch has no such choice to make: a kernel
runs where its tensors live.  ``simulated_module`` is a test hook: it makes
every device that is not a real GPU (``cpu`` and simulated ``cuda:N``) keep
its arrays in another module with CuPy's interface (``ndarray``, ``asarray``,
``asnumpy`` and the NumPy functions the ops call), so a test without a GPU can
check that device arrays stay device arrays; scheduling does not change.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import lru_cache
from typing import Any

import numpy as np

#: how many ``cuda:N`` devices exist when no GPU is found (simulated ones)
SIMULATED_DEVICE_COUNT = 8


@lru_cache(maxsize=1)
def _cupy() -> Any | None:
    try:  # pragma: no cover - needs a GPU
        import cupy  # type: ignore[import-not-found]

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return None
    return None


def gpu_available() -> bool:
    return _cupy() is not None


def device_count() -> int:
    cp = _cupy()
    if cp is not None:  # pragma: no cover - needs a GPU
        return int(cp.cuda.runtime.getDeviceCount())
    return SIMULATED_DEVICE_COUNT


def describe_devices() -> str:
    """One line for the app's header: real or simulated devices."""
    if gpu_available():  # pragma: no cover - needs a GPU
        return f"{device_count()} CUDA device(s) via CuPy"
    return "cuda:N simulated on CPU (NumPy); no GPU found"


#: a valid device name as given -> its canonical name (``to`` asks per call: twice a
#: forward and twice a backward of a program on two devices); the device count is fixed
#: once looked up, so a name valid once stays valid
_CANONICAL: dict[str, str] = {}


def canonical(device: str | None) -> str:
    """Normalise ``"cuda"`` -> ``"cuda:0"`` and validate the name."""
    if device is None:
        return "cpu"
    if type(device) is str:
        known = _CANONICAL.get(device)
        if known is not None:
            return known
        name = _canonical(device)
        if len(_CANONICAL) < 256:
            _CANONICAL[device] = name
        return name
    return _canonical(str(device))


def _canonical(device: str) -> str:
    if device == "cpu":
        return "cpu"
    if device == "cuda":
        device = "cuda:0"
    if device.startswith("cuda:") and device[5:].isdigit():
        idx = int(device[5:])
        if idx >= device_count():
            raise RuntimeError(
                f"CUDA error: invalid device ordinal (device {device!r}; "
                f"{device_count()} device(s) available)"
            )
        return device
    raise RuntimeError(
        f"Expected one of cpu, cuda device type at start of device string: {device}"
    )


def index_of(device: str) -> int:
    """The engine's device index: -1 for cpu (CPU_DEVICE), N for cuda:N."""
    return -1 if device == "cpu" else int(device[5:])


# array type -> the module that makes its arrays (NumPy's own types are not looked up)
_MODULES: dict[type, Any] = {}
#: the test hook: the array module of cpu and simulated devices (None: NumPy)
_simulated: Any = None


def _module_of_type(kind: type) -> Any:
    cp = sys.modules.get("cupy")
    if cp is not None and issubclass(kind, cp.ndarray):  # pragma: no cover - needs CuPy
        return cp
    if _simulated is not None and issubclass(kind, _simulated.ndarray):
        return _simulated
    return np


def array_module(*arrays: Any) -> Any:
    """The module that makes arrays like these: the first non-NumPy one's
    (``cupy.get_array_module``), else NumPy.  Scalars and None count as NumPy."""
    for a in arrays:
        kind = type(a)
        if kind is np.ndarray:
            continue
        xp = _MODULES.get(kind)
        if xp is None:
            xp = _module_of_type(kind)
            if len(_MODULES) < 256:
                _MODULES[kind] = xp
        if xp is not np:
            return xp
    return np


def module_for(device: str) -> Any:
    """The module whose arrays live on ``device``."""
    cp = _cupy()
    if cp is not None and device != "cpu":  # pragma: no cover - needs a GPU
        return cp
    return np if _simulated is None else _simulated


def on_device(device: str) -> Any:
    """A context where new arrays of ``device``'s module are made on that device."""
    cp = _cupy()
    if cp is not None and device != "cpu":  # pragma: no cover - needs a GPU
        return cp.cuda.Device(index_of(device))
    return nullcontext()


def set_device(index: int) -> None:
    """``Engine::set_device``: a device thread makes its device current (CuPy's current
    device, where new arrays and kernels go), as PyTorch's worker threads do."""
    cp = _cupy()
    if cp is not None and index >= 0:  # pragma: no cover - needs a GPU
        cp.cuda.Device(index).use()


def zeros(shape: tuple[int, ...], dtype: Any, device: str) -> Any:
    """A new array of zeros on ``device``, made there."""
    with on_device(device):
        return module_for(device).zeros(shape, dtype=dtype)


@contextmanager
def simulated_module(module: Any) -> Iterator[None]:
    """Test hook: while open, ``cpu`` and simulated ``cuda:N`` keep their arrays in
    ``module`` (CuPy's interface: ``ndarray``, ``asarray``, ``asnumpy``, NumPy's
    functions), so tests can check that device arrays never fall back to NumPy."""
    global _simulated
    old = _simulated
    _simulated = module
    _MODULES.clear()
    try:
        yield
    finally:
        _simulated = old
        _MODULES.clear()


def to_device_array(array: Any, device: str) -> Any:
    """Move an array to ``device`` (a copy across real devices, a no-op when simulated)."""
    xp = module_for(device)
    src = array_module(array)
    if xp is np:
        return np.asarray(array) if src is np else src.asnumpy(array)
    if src is not np and src is not xp:  # pragma: no cover - a hook beside a GPU
        array = src.asnumpy(array)
    with on_device(device):
        if src is xp and xp is not _simulated:  # pragma: no cover - one GPU to another: copy
            return xp.array(array)
        return xp.asarray(array)


def to_numpy(array: Any) -> np.ndarray:
    """A host copy (or the array itself, if NumPy's): for a summary, ``numpy()``, ``cpu``."""
    if type(array) is np.ndarray:
        return array
    src = array_module(array)
    return np.asarray(array) if src is np else src.asnumpy(array)
