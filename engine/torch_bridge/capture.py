"""What a PyTorch program's forward pass leaves for the bridge to find (not in PyTorch).

``capture()`` runs around a program's forward pass and records what PyTorch
keeps out of Python's reach: the hooks a program puts on non-leaf tensors
(``Tensor.register_hook``, ``retain_grad``), which arguments of a custom
``Function`` were tensors (``is_variable_input`` in ``python_function.cpp``),
the ``nn.Module`` that created each node (module forward hooks) and where each
node was created (what anomaly mode's ``AnomalyMetadata`` keeps as a traceback).
``current_registry()`` hands that to ``bridge.from_torch``.  Imports nothing of
the bridge: ``bridge`` reads the registry, ``program`` runs a forward under it.

Departs from anomaly mode, for speed (it formats a whole stack per op, ~100 us): a
``TorchFunctionMode`` (``SiteMode``) keeps, per torch call that made a node, the
newest node's ``sequence_nr`` and the call's frames as interned ``(code, line)``
pairs; a node's site is the call whose range of sequence numbers holds its own.
Each code location is classified and formatted once (``Sites``).  A call handled
in Python (``F.multi_head_attention_forward``) is one call: its inner nodes share
its site.  Nodes made on another thread than the forward's get none.
"""

from __future__ import annotations

import bisect
import contextlib
import linecache
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from . import saved as saved_hooks
from .saved import saved_summaries

__all__ = ["Registry", "capture", "current_registry", "saved_summaries", "Sites"]

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
        self._roots: set[int] = set()  # the roots named in _qual (one: no prefix)
        self.frontier: dict[int, list[Any]] = {}  # claimed node -> its call's frontier
        self.sites = Sites()

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
            if id(p) not in self._qual:
                self._qual[id(p)] = (p, id(root), label, qname)
                self._roots.add(id(root))
        return names

    def param_name(self, p: Any) -> str | None:
        """The parameter's qualified name, from its model's ``named_parameters()``
        (``block.0.weight``); where the forward pass called several models, prefixed with
        the name the program gave the model (``lin1.weight``, ``lin2.weight``)."""
        q = self._qual.get(id(p))
        if q is None:
            return None
        if len(self._roots) == 1:
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
        created, source, stack = self.sites.of(fn)
        return {"module": module, "module_type": typ, "tensor": tensor, "created": created,
                "source": source, "saved": [f"{k}: {v}" for k, v in saved_summaries(fn)],
                "stack": stack}


def current_registry() -> Registry:
    return _current


def captured_nodes() -> int | None:
    """About how many nodes the forward pass under ``capture()`` has made so far (the
    span of their sequence numbers), or None when no capture runs: for a progress line,
    read from another thread."""
    sites = _current.sites
    if sites.stop is None:
        return None
    seqs = sites.seqs
    return seqs[-1] - sites.first + 1 if seqs else 0


_current: Registry  # set at the end of the module (Sites is defined below)


# --- the forward pass -----------------------------------------------------------------------
@contextlib.contextmanager
def capture() -> Iterator[Registry]:
    """Record, while a program's forward pass runs, what ``from_torch`` needs.  Anomaly
    mode is left as the program sets it (its checks still run; its traceback is unused)."""
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
        reg.sites.note(out)  # not a torch function: the mode does not see it
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

    reg.sites.stop = _entering_frame()  # the frame with `with capture()`: outermost kept
    mode = site_mode(reg.sites)
    with _lock:
        T.register_hook = register_hook
        T.retain_grad = retain_grad
        F.Function.apply = classmethod(apply)
        handles = [M.register_module_forward_pre_hook(pre),
                   M.register_module_forward_hook(post)]
    saved_hooks.install()  # saved-tensor hooks entered now are guarded (saved.py)
    mode.__enter__()
    try:
        yield reg
    finally:
        mode.__exit__(None, None, None)
        reg.sites.stop = None
        reg.frontier.clear()  # only the forward's module calls need it
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


def _entering_frame() -> Any:
    """The frame whose ``with`` entered ``capture()``, through any context managers made
    of generators around it (``program.forward_capture``): their frames are suspended,
    never on an op's stack."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_flags & _CO_GENERATOR
                             or f.f_code.co_filename == contextlib.__file__):
        f = f.f_back
    return f


_CO_GENERATOR = 0x20  # inspect.CO_GENERATOR


def _claim(reg: Registry, outs: list[Any], path: str, typ: str, mark: int) -> None:
    """Give ``path`` the nodes its forward made: those reachable from its outputs that
    are newer than its inputs and that no module inside it claimed.  A node a module
    inside claimed is gone round, through that call's frontier (the older nodes its
    nodes lead to), not walked again: each node is walked once, not once per module
    around it."""
    todo = [t.grad_fn for t in outs if t.grad_fn is not None]
    seen: set[int] = set()
    frontier: list[Any] = []  # this call's: the nodes at or below mark its nodes reach
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if fn._sequence_nr() <= mark:
            frontier.append(fn)
            continue
        if not hasattr(fn, "next_functions") or type(fn).__name__ == "AccumulateGrad":
            continue
        inner = reg.frontier.get(id(fn))
        if inner is not None:  # a module inside made it
            todo.extend(inner)
            continue
        reg.claim(fn, path, typ)
        reg.frontier[id(fn)] = frontier
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


# --- where each node was created ---------------------------------------------------------
STACK_MAX = 40  # frames kept in node_meta's stack: the innermost
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # engine/
_TOOL = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), "autograd_tui") + os.sep)
_kind: dict[str, int] = {}  # filename -> PROGRAM, LIBRARY, TORCH or OURS
PROGRAM, LIBRARY, TORCH, OURS = 0, 1, 2, 3


def file_kind(filename: str) -> int:
    """``PROGRAM``: the program's own file; ``LIBRARY``: site-packages, dist-packages,
    the standard library, ``<frozen ...>``; ``TORCH``; ``OURS``: the engine's or the
    debugger's."""
    k = _kind.get(filename)
    if k is None:
        path = os.path.abspath(filename)
        if path.startswith(_TOOL):
            k = OURS
        elif path.startswith(_package_dir("torch") + os.sep):
            k = TORCH
        elif (filename.startswith("<frozen") or path.startswith(_stdlib())
              or any(p in ("site-packages", "dist-packages") for p in path.split(os.sep))):
            k = LIBRARY
        else:
            k = PROGRAM
        _kind[filename] = k
    return k


def is_tool_file(filename: str) -> bool:
    """Whether ``filename`` is torch's, the engine's or the debugger's (not the program's)."""
    return file_kind(filename) >= TORCH


def _stdlib() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib")})


class Sites:
    """Where the forward ops ran: per torch call that made nodes, the newest node's
    ``sequence_nr`` and an interned key of the call's frames (innermost first, up to the
    frame that entered ``capture()``); each ``(code, line)`` formatted once."""

    def __init__(self) -> None:
        self.stop: Any = None  # the frame that entered capture(): the walk ends there
        self.seqs: list[int] = []
        self.first = 0  # the first call's newest sequence_nr, less its nodes (unknown): 0
        self.keys: list[int] = []  # per call: an index into _uniq (no tuple hashed twice)
        self._interned: dict[tuple[Any, ...], int] = {}
        self._uniq: list[tuple[Any, ...]] = []
        self._resolved: list[tuple[str | None, str | None, list[str]] | None] = []
        self._frames: dict[tuple[Any, int], str] = {}
        self.resolves = 0  # how many keys were resolved (each once)

    def note(self, out: Any, depth: int = 2) -> None:
        """A torch call returned ``out``: keep its site if it made a newer node."""
        try:  # a view made under no_grad and changed in place refuses .grad_fn
            if isinstance(out, (tuple, list)):  # (values, indices): the first with a node
                out = next((t for t in out if getattr(t, "grad_fn", None) is not None), None)
            fn = getattr(out, "grad_fn", None)
        except RuntimeError:
            return
        if fn is None:
            return
        seq = fn._sequence_nr()
        if self.seqs and seq <= self.seqs[-1]:
            return  # an older node (an op that returned its input): nothing new
        f, stop, key = sys._getframe(depth), self.stop, []
        while f is not None:
            key.append(f.f_code)
            key.append(f.f_lineno)
            if f is stop:
                break
            f = f.f_back
        k = tuple(key)
        if not self.seqs:
            self.first = seq
        self.seqs.append(seq)
        i = self._interned.get(k)
        if i is None:
            i = self._interned[k] = len(self._uniq)
            self._uniq.append(k)
            self._resolved.append(None)
        self.keys.append(i)

    def of(self, fn: Any) -> tuple[str | None, str | None, list[str]]:
        """``created`` (the innermost frame of the program's own), its ``source`` line and
        the ``stack`` (outermost first, the ``STACK_MAX`` innermost) of ``fn``'s op."""
        try:
            seq = fn._sequence_nr()
        except Exception:  # noqa: BLE001 - not a node
            return None, None, []
        i = bisect.bisect_left(self.seqs, seq)
        if i == len(self.seqs):
            return None, None, []
        k = self.keys[i]
        hit = self._resolved[k]
        if hit is None:
            hit = self._resolved[k] = self._resolve(self._uniq[k])
        return hit

    def _resolve(self, key: tuple[Any, ...]) -> tuple[str | None, str | None, list[str]]:
        self.resolves += 1
        # our own frames (the runner, the modes) are no part of the program's stack
        pairs = [(c, ln) for c, ln in zip(key[0::2], key[1::2])
                 if file_kind(c.co_filename) != OURS]
        created = source = None
        for code, line in pairs:
            if file_kind(code.co_filename) == PROGRAM:
                created = self.frame(code, line)
                source = linecache.getline(code.co_filename, line).strip() or None
                break
        stack = [self.frame(c, ln) for c, ln in reversed(pairs[:STACK_MAX])]
        return created, source, stack

    def frame(self, code: Any, line: int) -> str:
        text = self._frames.get((code, line))
        if text is None:
            text = self._frames[(code, line)] = f"{code.co_filename}:{line} in {code.co_name}"
        return text


def site_mode(sites: Sites) -> Any:
    """A ``TorchFunctionMode`` that notes each call's site (``Sites.note``)."""
    from torch import is_grad_enabled as grad_enabled
    from torch.overrides import TorchFunctionMode

    class SiteMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if grad_enabled():  # no node is made under no_grad
                sites.note(out)
            return out

    return SiteMode()


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


_current = Registry()
