"""``torch.compile``: what was compiled, and the eager graph that the bridge steps.

A compiled model's backward is one ``CompiledFunctionBackward`` node (AOTAutograd's
whole backward graph, run by compiled code), so there is nothing to step inside it.
The bridge steps the *eager* graph instead: ``watch_compile(eager=True)`` runs the
program's compiled modules and functions eagerly (``torch.compiler.set_stance
("force_eager")``) and records what was compiled (``torch.compile`` is watched, and
``nn.Module.compile`` calls it), so that the tool can say so.  Departs: torch's own
compiles (``torch.cond`` and the other higher-order ops compile a wrapper to run eagerly)
run compiled, and are not listed.  ``check-order``
runs the program again compiled (``eager=False``) for PyTorch's gradients.
"""

from __future__ import annotations

import contextlib
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

from .convert import HOP, torch_module

NOTE = "stepped the eager graph of a torch.compile'd model"
# torch.compile(...), or nn.Module.compile() with no arguments or torch.compile's keywords
# (not re.compile("..."))
_CALLS = re.compile(r"\btorch\.compile\b|\.compile\(\s*(\)|(mode|backend|fullgraph|dynamic|"
                    r"options|disable)\s*=)")


class CompileWatch:
    """What the program compiled: ``names`` to show, ``modules`` (the compiled
    ``nn.Module``s, whose parameters ``check-order`` compares by name)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.modules: list[Any] = []

    def note(self) -> str | None:
        if not self.names:
            return None
        return f"{NOTE}: {', '.join(dict.fromkeys(self.names))}"

    def record(self, obj: Any) -> None:
        torch = torch_module()
        owner = getattr(obj, "__self__", None)  # nn.Module.compile compiles _call_impl
        if isinstance(owner, torch.nn.Module):
            obj = owner
        if isinstance(obj, torch.nn.Module):
            self.modules.append(obj)
            self.names.append(f"{type(obj).__name__} (nn.Module)")
        else:
            self.names.append(f"{getattr(obj, '__qualname__', type(obj).__name__)}()")

    def scan(self, namespace: dict[str, Any]) -> None:
        """Compiled objects made before the watch (at the script's import)."""
        for value in namespace.values():
            orig = getattr(value, "_orig_mod", None)
            if orig is not None:
                self.record(orig)
            elif getattr(value, "_torchdynamo_orig_callable", None) is not None:
                self.record(value._torchdynamo_orig_callable)


@contextlib.contextmanager
def watch_compile(eager: bool = True, namespace: dict[str, Any] | None = None
                  ) -> Iterator[CompileWatch]:
    """Record what ``torch.compile`` compiles; with ``eager``, run it all eagerly.
    The stance is set only once dynamo is loaded (a compiled object exists, or the program
    now calls ``torch.compile``): importing ``torch._dynamo`` costs about 1.3 s of CPU,
    which a program that compiles nothing should not pay."""
    torch = torch_module()
    watch = CompileWatch()
    if namespace:
        watch.scan(namespace)
    real = torch.compile
    stack = contextlib.ExitStack()
    forced = False

    def force_eager() -> None:
        nonlocal forced
        if eager and not forced:
            forced = True
            stack.enter_context(torch.compiler.set_stance("force_eager"))

    def compile_(model: Any = None, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(mode=...)
            return lambda m: compile_(m, **kwargs)
        if isinstance(model, types.FunctionType) and model.__module__.startswith(
                "torch._higher_order_ops"):
            # torch's own: a higher-order op (torch.cond) runs eagerly by compiling a
            # wrapper; forced eager, its output had no grad_fn: not forced, not listed
            return _as_compiled(torch, real(model, **kwargs))
        watch.record(model)
        force_eager()
        return real(model, **kwargs)

    if "torch._dynamo" in sys.modules:
        force_eager()
    torch.compile = compile_
    try:
        with stack:
            yield watch
    finally:
        torch.compile = real


def _as_compiled(torch: Any, compiled: Any) -> Any:
    """``compiled`` called under the default stance, whatever the program's, and with
    the forward capture's hooks and mode stepping aside (``convert.HOP``): dynamo traces
    them, and what they call (``threading.get_ident``) breaks the graph, which a
    higher-order op refuses."""

    def call(*args: Any, **kwargs: Any) -> Any:
        HOP[0] += 1
        try:
            with torch.compiler.set_stance("default"):
                return compiled(*args, **kwargs)
        finally:
            HOP[0] -= 1

    return call


def script_note(namespace: dict[str, Any], source: str) -> str | None:
    """What a script compiles, before it runs: objects compiled at its import, or a
    ``torch.compile(`` / ``.compile(`` call in its source (its entry compiles)."""
    watch = CompileWatch()
    watch.scan(namespace)
    if watch.note():
        return watch.note()
    if _CALLS.search(source):
        return f"{NOTE} (the script calls torch.compile; its compiled code is not stepped)"
    return None


def compile_error(exc: BaseException) -> str:
    """Why a compiled run failed, in one line (no compiler here, a backend's error)."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    if inner is not None and inner is not exc:
        return f"{type(exc).__name__}: {compile_error(inner)}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
