"""Thread-local grad mode and anomaly mode.

Mirrors ``c10::GradMode`` / ``AutoGradMode`` (thread-local, like PyTorch's, so a
device thread running a backward with ``create_graph=True`` records a graph
while the caller's thread keeps its own setting) and ``AnomalyMode`` (global).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Any

_tls = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_tls, "enabled", True)


def set_grad_enabled(mode: bool) -> None:
    _tls.enabled = bool(mode)


class _GradModeContext:
    """Base for ``no_grad``/``enable_grad``: a context manager and a decorator."""

    _mode = True

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        set_grad_enabled(self._mode)

    def __exit__(self, *exc: object) -> None:
        set_grad_enabled(self._prev)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):  # noqa: N801 - torch's name
    _mode = False


class enable_grad(_GradModeContext):  # noqa: N801 - torch's name
    _mode = True


class AutoGradMode:
    """RAII-style guard used by the engine: ``with AutoGradMode(create_graph):``."""

    __slots__ = ("_mode", "_prev")

    def __init__(self, mode: bool) -> None:
        self._mode = mode

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        _tls.enabled = self._mode

    def __exit__(self, *exc: object) -> None:
        _tls.enabled = self._prev


_anomaly = {"enabled": False, "check_nan": True}


def set_detect_anomaly(mode: bool, check_nan: bool = True) -> None:
    """Mirror ``torch.autograd.set_detect_anomaly``: record forward stacks, check NaNs."""
    _anomaly["enabled"] = bool(mode)
    _anomaly["check_nan"] = bool(check_nan)


def is_anomaly_enabled() -> bool:
    return _anomaly["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly["check_nan"]


class detect_anomaly:  # noqa: N801 - torch's name
    def __init__(self, check_nan: bool = True) -> None:
        self._check_nan = check_nan

    def __enter__(self) -> None:
        self._prev = dict(_anomaly)
        set_detect_anomaly(True, self._check_nan)

    def __exit__(self, *exc: object) -> None:
        _anomaly.update(self._prev)
