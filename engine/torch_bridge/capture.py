"""What a PyTorch program's forward pass leaves for the bridge to find (not in PyTorch).

``capture()`` runs around a program's forward pass and records what PyTorch
keeps out of Python's reach: the hooks a program puts on non-leaf tensors
(``Tensor.register_hook``, ``retain_grad``), which arguments of a custom
``Function`` were tensors (``is_variable_input`` in ``python_function.cpp``),
the ``nn.Module`` that created each node (module forward hooks) and, under
anomaly mode, where each node was created (``AnomalyMetadata``'s traceback).
``current_registry()`` hands that to ``bridge.from_torch``.  Imports nothing of
the bridge: ``bridge`` reads the registry, ``program`` runs a forward under it.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from . import saved as saved_hooks

_lock = threading.Lock()


class Registry:
    """Per-node facts from one forward pass, keyed by ``id(node)`` (C++ nodes take no
    weak references: the node is kept with its facts)."""

    def __init__(self) -> None:
        self._hooks: dict[int, tuple[Any, list[tuple[int, Any]]]] = {}
        self._retained: dict[int, tuple[Any, dict[int, Any]]] = {}
        self._var_inputs: dict[int, tuple[Any, tuple[bool, ...]]] = {}
        self._module: dict[int, tuple[Any, str, str]] = {}  # node -> (node, path, type)
        self._params: dict[int, tuple[Any, str, str, str]] = {}  # param -> (p, path, type, name)
        # param -> (p, id of the root module, the root's name, named_parameters()' name)
        self._qual: dict[int, tuple[Any, int, str, str]] = {}

    # --- recorded during the forward ----------------------------------------------------
    def add_tensor_hooks(self, fn: Any, nr: int, hooks: Any) -> None:
        entry = self._hooks.setdefault(id(fn), (fn, []))
        if not any(d is hooks for _, d in entry[1]):
            entry[1].append((nr, hooks))

    def add_retained(self, fn: Any, nr: int, tensor: Any) -> None:
        self._retained.setdefault(id(fn), (fn, {}))[1][nr] = weakref.ref(tensor)

    def add_var_inputs(self, fn: Any, flags: tuple[bool, ...]) -> None:
        self._var_inputs[id(fn)] = (fn, flags)

    def claim(self, fn: Any, path: str, typ: str) -> bool:
        if id(fn) in self._module:
            return False
        self._module[id(fn)] = (fn, path, typ)
        return True

    def add_params(self, root: Any) -> dict[int, str]:
        # The model itself is named by its type (a script may call several roots).
        names = {}
        for mpath, m in root.named_modules():
            mpath = mpath or type(root).__name__
            names[id(m)] = mpath
            for pname, p in m.named_parameters(recurse=False):
                self._params.setdefault(id(p), (p, mpath, type(m).__name__, pname))
        label = root_label(root)
        for qname, p in root.named_parameters():
            self._qual.setdefault(id(p), (p, id(root), label, qname))
        return names

    def param_name(self, p: Any) -> str | None:
        """The parameter's qualified name, from its model's ``named_parameters()``
        (``block.0.weight``); where the forward pass called several models, prefixed with
        the name the program gave the model (``lin1.weight``, ``lin2.weight``)."""
        q = self._qual.get(id(p))
        if q is None:
            return None
        if len({r for _, r, _, _ in self._qual.values()}) == 1:
            return q[3]
        return f"{q[2]}.{q[3]}"

    def parameters(self) -> list[tuple[str, Any]]:
        """Every parameter of the models the forward pass called, by qualified name."""
        return [(self.param_name(p) or "", p) for p, _, _, _ in self._qual.values()]

    # --- read by from_torch -------------------------------------------------------------
    def tensor_hooks(self, fn: Any) -> list[tuple[int, Any]]:
        return self._hooks.get(id(fn), (None, []))[1]

    def retained(self, fn: Any) -> list[tuple[int, Any]]:
        return list(self._retained.get(id(fn), (None, {}))[1].items())

    def var_inputs(self, fn: Any) -> tuple[bool, ...] | None:
        v = self._var_inputs.get(id(fn))
        return v[1] if v is not None else None

    def meta(self, fn: Any) -> dict[str, Any]:
        """The ``node_meta`` event's fields for ``fn``."""
        module = typ = tensor = None
        var = getattr(fn, "variable", None)
        if var is not None and id(var) in self._params:
            _, module, typ, pname = self._params[id(var)]
            tensor = self.param_name(var) or (f"{module}.{pname}" if module else pname)
        elif id(fn) in self._module:
            _, module, typ = self._module[id(fn)]
        created, source = creation_site(fn)
        return {"module": module, "module_type": typ, "tensor": tensor, "created": created,
                "source": source, "saved": [f"{k}: {v}" for k, v in saved_summaries(fn)]}


_current = Registry()


def current_registry() -> Registry:
    return _current


# --- the forward pass -----------------------------------------------------------------------
@contextlib.contextmanager
def capture(anomaly: bool = True) -> Iterator[Registry]:
    """Record, while a program's forward pass runs, what ``from_torch`` needs."""
    global _current
    import torch
    from torch.autograd import function as F
    from torch.nn.modules import module as M

    reg = _current = Registry()
    T = torch.Tensor
    orig_hook = T.__dict__["register_hook"]
    own_retain = "retain_grad" in T.__dict__
    orig_retain = T.retain_grad
    orig_apply = F.Function.__dict__["apply"]

    def register_hook(self: Any, hook: Any) -> Any:
        handle = orig_hook(self, hook)
        if self.grad_fn is not None:
            reg.add_tensor_hooks(self.grad_fn, self.output_nr, self._backward_hooks)
        return handle

    def retain_grad(self: Any) -> None:
        orig_retain(self)
        if self.grad_fn is not None:
            reg.add_retained(self.grad_fn, self.output_nr, self)

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig_apply.__func__(cls, *args, **kwargs)
        flags = tuple(isinstance(a, torch.Tensor) for a in args)
        for t in _flatten(out):
            if t.grad_fn is not None and isinstance(t.grad_fn, F.BackwardCFunction):
                reg.add_var_inputs(t.grad_fn, flags)
        return out

    stack: list[tuple[str, int]] = []  # (module path, watermark sequence_nr)
    names: dict[int, str] = {}

    def pre(module: Any, args: Any) -> None:
        if not stack:
            names.update(reg.add_params(module))
        path = names.get(id(module))
        if path is None:
            parent = stack[-1][0] if stack else ""
            path = f"{parent}.{type(module).__name__}".lstrip(".")
        mark = max((t.grad_fn._sequence_nr() for t in _flatten(args)
                    if t.grad_fn is not None), default=-1)
        stack.append((path, mark))

    def post(module: Any, args: Any, output: Any) -> None:
        if not stack:
            return
        path, mark = stack.pop()
        _claim(reg, _flatten(output), path, type(module).__name__, mark)

    prev_anomaly = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
    with _lock:
        T.register_hook = register_hook
        T.retain_grad = retain_grad
        F.Function.apply = classmethod(apply)
        handles = [M.register_module_forward_pre_hook(pre),
                   M.register_module_forward_hook(post)]
        if anomaly:
            torch.autograd.set_detect_anomaly(True, check_nan=False)
    saved_hooks.install()  # saved-tensor hooks entered now are guarded (saved.py)
    try:
        yield reg
    finally:
        saved_hooks.uninstall()
        with _lock:
            T.register_hook = orig_hook
            if own_retain:
                T.retain_grad = orig_retain
            else:
                del T.retain_grad
            F.Function.apply = orig_apply
            for h in handles:
                h.remove()
            torch.autograd.set_detect_anomaly(*prev_anomaly)


def _claim(reg: Registry, outs: list[Any], path: str, typ: str, mark: int) -> None:
    """Give ``path`` the nodes its forward made: those reachable from its outputs that
    are newer than its inputs and that no module inside it claimed."""
    todo = [t.grad_fn for t in outs if t.grad_fn is not None]
    seen: set[int] = set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen or fn._sequence_nr() <= mark or not hasattr(fn, "next_functions"):
            continue
        seen.add(id(fn))
        if type(fn).__name__ == "AccumulateGrad":
            continue
        reg.claim(fn, path, typ)
        todo.extend(n for n, _ in fn.next_functions if n is not None)


def _flatten(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flatten(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flatten(v)]
    return []


# --- node facts -------------------------------------------------------------------------------
_FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)'
                    r'(?:\n\s*(?P<src>[^\n]*))?')


def creation_site(fn: Any) -> tuple[str | None, str | None]:
    """Where the forward op of ``fn`` ran (anomaly mode's traceback): the innermost frame
    outside torch and this package, as ``file:line in func`` and its source line."""
    try:
        tb = fn.metadata.get("traceback_")
    except Exception:  # noqa: BLE001 - a node without metadata
        return None, None
    if not tb:
        return None, None
    frames = tb if isinstance(tb, list) else [tb]
    import sysconfig

    # engine/ (this package is in it), and the debugger beside it
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skip = (_package_dir("torch") + os.sep, here + os.sep,
            os.path.join(os.path.dirname(here), "autograd_tui") + os.sep,
            os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep)
    for text in reversed(frames):
        m = _FRAME.match(str(text))
        if m is None:
            continue
        path = os.path.abspath(m["file"])
        if path.startswith(skip) or m["file"].startswith("<frozen"):
            continue
        return f"{m['file']}:{m['line']} in {m['func']}", (m["src"] or "").strip() or None
    return None, None


def is_tool_file(filename: str) -> bool:
    """Whether ``filename`` is torch's, the engine's or the debugger's (not the program's)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skip = (_package_dir("torch") + os.sep, here + os.sep,
            os.path.join(os.path.dirname(here), "autograd_tui") + os.sep)
    return os.path.abspath(filename).startswith(skip)


def root_label(module: Any) -> str:
    """What the program calls a model it called at the top: the variable (a local of
    the innermost frame outside torch and this package, else a global there) that holds
    it; else its type's name."""
    import sys

    f = sys._getframe(1)
    while f is not None:
        if not is_tool_file(f.f_code.co_filename):
            for scope in (f.f_locals, f.f_globals):
                for k, v in list(scope.items()):
                    if v is module and k != "self" and not k.startswith("_"):
                        return str(k)
        f = f.f_back
    return type(module).__name__


def _package_dir(name: str) -> str:
    import importlib

    return os.path.dirname(os.path.abspath(importlib.import_module(name).__file__ or ""))


def saved_summaries(fn: Any) -> list[tuple[str, str]]:
    """A node's saved tensors (``_saved_*``; a custom Function's ``saved_tensors``):
    name and a summary (shape, dtype, norm)."""
    out = []
    names = [a for a in dir(fn) if a.startswith("_saved_")]
    pairs: list[tuple[str, Any]] = []
    with saved_hooks.looking():  # never run an unpack hook before PyTorch does
        for a in names:
            try:
                pairs.append((a[len("_saved_"):], getattr(fn, a)))
            except Exception as e:  # noqa: BLE001 - freed, or not unpackable: say so
                pairs.append((a[len("_saved_"):], _Unavailable(e)))
        if hasattr(fn, "saved_tensors") and not names:
            try:
                pairs.extend((f"saved_tensors[{i}]", t) for i, t in enumerate(fn.saved_tensors))
            except Exception as e:  # noqa: BLE001
                pairs.append(("saved_tensors", _Unavailable(e)))
    for k, v in pairs:
        out.append((k, _summary(v)))
    return out


class _Unavailable:
    def __init__(self, e: BaseException) -> None:
        if isinstance(e, saved_hooks.NotReadYet):
            self.text = "(saved-tensor hooks: read when the node runs)"
            return
        self.text = f"(unavailable: {str(e).splitlines()[0][:80] if str(e) else type(e).__name__})"


def _summary(v: Any) -> str:
    import torch

    if isinstance(v, _Unavailable):
        return v.text
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided or v.is_nested:
            return f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')} {v.layout}"
        d = v.detach()
        norm = float(d.double().norm()) if d.is_floating_point() and d.numel() else None
        tail = f" |x|={norm:.4g}" if norm is not None else ""
        return f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')}{tail}"
    if isinstance(v, (tuple, list)) and v and all(isinstance(t, torch.Tensor) for t in v):
        return f"{len(v)} tensors: " + ", ".join(_summary(t) for t in v[:3]) + (
            ", ..." if len(v) > 3 else "")
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
