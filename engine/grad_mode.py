"""Thread-local grad mode and anomaly mode.

Mirrors ``c10::GradMode`` / ``AutoGradMode`` (thread-local, like PyTorch's, so a
device thread running a backward with ``create_graph=True`` records a graph
while the caller's thread keeps its own setting) and ``AnomalyMode`` (global).
"""

from __future__ import annotations

import inspect
import sys
import threading
import warnings
from collections.abc import Callable
from functools import wraps
from typing import Any

_tls = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_tls, "enabled", True)


def _set_enabled(mode: bool) -> None:
    _tls.enabled = bool(mode)


def _decorate(ctx_factory: Callable[[], Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` under a fresh ``ctx_factory()``; a generator function gets the
    mode each time it resumes (``torch.utils._contextlib``)."""
    if inspect.isgeneratorfunction(fn):
        @wraps(fn)
        def generator_context(*args: Any, **kwargs: Any) -> Any:
            gen = fn(*args, **kwargs)
            try:
                with ctx_factory():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with ctx_factory():
                            gen.close()
                        raise
                    except BaseException:
                        with ctx_factory():
                            response = gen.throw(*sys.exc_info())
                    else:
                        with ctx_factory():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value

        return generator_context

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ctx_factory():
            return fn(*args, **kwargs)

    return wrapper


class _GradModeContext:
    """Base for ``no_grad``/``enable_grad``: a context manager and a decorator, with or
    without parentheses (``@no_grad`` and ``@no_grad()``), as in PyTorch."""

    _mode = True

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        _set_enabled(self._mode)

    def __exit__(self, *exc: object) -> None:
        _set_enabled(self._prev)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return _decorate(type(self), fn)


class no_grad(_GradModeContext):  # noqa: N801 - torch's name
    _mode = False


class enable_grad(_GradModeContext):  # noqa: N801 - torch's name
    _mode = True


class set_grad_enabled:  # noqa: N801 - torch's name
    """``torch.set_grad_enabled``: sets the mode at once (a plain call works), and as a
    context manager or decorator restores the previous mode afterwards."""

    def __init__(self, mode: bool) -> None:
        self.prev = is_grad_enabled()
        self.mode = bool(mode)
        _set_enabled(self.mode)

    def __enter__(self) -> None:
        _set_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        _set_enabled(self.prev)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        _set_enabled(self.prev)  # used as a decorator: the mode applies inside fn only
        mode = self.mode
        return _decorate(lambda: set_grad_enabled(mode), fn)

    def __repr__(self) -> str:
        return f"set_grad_enabled(mode={self.mode})"


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


class set_detect_anomaly:  # noqa: N801 - torch's name
    """``torch.autograd.set_detect_anomaly``: record forward stacks, check NaNs.  Takes
    effect at once (a plain call works); as a context manager it restores the previous
    setting on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = dict(_anomaly)
        _anomaly["enabled"] = bool(mode)
        _anomaly["check_nan"] = bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _anomaly.update(self.prev)


def is_anomaly_enabled() -> bool:
    return _anomaly["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly["check_nan"]


class detect_anomaly:  # noqa: N801 - torch's name
    def __init__(self, check_nan: bool = True) -> None:
        self._check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        self._prev = dict(_anomaly)
        set_detect_anomaly(True, self._check_nan)

    def __exit__(self, *exc: object) -> None:
        _anomaly.update(self._prev)
