"""Devices: ``cpu`` and ``cuda:N``, real (CuPy) or simulated (NumPy).

PyTorch gives every accelerator its own autograd worker thread and ReadyQueue;
we do the same.  When CuPy finds a GPU, ``cuda:N`` arrays are CuPy arrays on
device N.  Otherwise ``cuda:N`` is *simulated*: the arrays stay NumPy arrays
tagged with the device, but the threads and queues are exactly those of a real
device, which is all the scheduler can see.  Streams are not modelled.
"""

from __future__ import annotations

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


def canonical(device: str | None) -> str:
    """Normalise ``"cuda"`` -> ``"cuda:0"`` and validate the name."""
    if device is None:
        return "cpu"
    device = str(device)
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


def to_device_array(array: Any, device: str) -> Any:
    """Move an array to ``device`` (a copy across real devices, a no-op when simulated)."""
    cp = _cupy()
    if cp is None:
        return np.asarray(array)
    if device == "cpu":  # pragma: no cover - needs a GPU
        return cp.asnumpy(array) if isinstance(array, cp.ndarray) else np.asarray(array)
    with cp.cuda.Device(index_of(device)):  # pragma: no cover - needs a GPU
        return cp.asarray(array)


def to_numpy(array: Any) -> np.ndarray:
    cp = _cupy()
    if cp is not None and isinstance(array, cp.ndarray):  # pragma: no cover
        return cp.asnumpy(array)
    return np.asarray(array)
