"""The names a program gives the leaves of its forward pass (not in PyTorch).

PyTorch names a parameter only below a module (``named_parameters()``: ``0.weight``) and
a tensor not at all; a student knows them by the program's own variables.  The rule
(``docs/torch.md``, "Leaf names"): a thing is named by the variable of the program that
holds it, directly or as a part, with torch's own module path below it:

- a variable holds a thing directly (``model``, ``q``), or as a part: a submodule
  (``model.trunk``), an item of a list, tuple or dict of it (``heads.1``, ``nets.0``,
  ``flow.2``, a ``ModuleList`` as ``named_modules()`` spells it), a model as an
  attribute of an object of the program's (``trainer.net``; a method's ``self`` gives
  the attribute alone, ``net``, where no other variable holds it);
- among the holders, a variable that is not a ``for`` loop's or a comprehension's
  (``for p in params``, ``[hd(h) for hd in heads]``) is preferred; then the outermost
  of the program's frames in the forward pass (the entry's, ``main()``, with its module's
  globals, then the functions it called, outward in; a library's frames after them,
  torch's and ours never); then, in one frame, a direct hold over a part, a shorter
  path over a longer, the variable defined first;
- a thing no variable holds falls back to its type (a module: ``Linear``) or its shape.

The variables are read when a model is first called (``root_label``) and when the forward
pass ends (``leaf_holders``): a loop's variable then holds its last item.  FSDP2's
``fully_shard`` registers a sharded DTensor parameter and swaps in, for each forward, an
unsharded plain one (the leaf the graph holds): that one is named by the parameter it
unshards (``unsharded_params``).  Imports nothing of the bridge.
"""

from __future__ import annotations

import dis
import sys
import types
from collections.abc import Iterator
from typing import Any

from .sites import LIBRARY, PROGRAM, file_kind

#: containers looked into for a model or a leaf: no longer ones (a data set in a list)
ITEMS_MAX = 1024
_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
_STORES = frozenset({"STORE_FAST", "STORE_DEREF", "STORE_NAME", "STORE_GLOBAL"})
_UNPACKS = frozenset({"UNPACK_SEQUENCE", "UNPACK_EX", "EXTENDED_ARG"})
_loops: dict[Any, frozenset[str]] = {}  # code -> its loops' variables (each code read once)


def loop_names(code: Any) -> frozenset[str]:
    """The variables ``code``'s ``for`` loops and comprehensions bind (Python 3.12 inlines
    a comprehension: its variable is one of the function's; before, it had a frame)."""
    got = _loops.get(code)
    if got is None:
        names: set[str] = set()
        if code.co_name in _COMPREHENSIONS:
            names.update(code.co_varnames)
        else:
            target = False
            for ins in dis.get_instructions(code):
                if ins.opname == "FOR_ITER":
                    target = True  # the instructions after it store the loop's variables
                elif target and ins.opname in _STORES:
                    names.add(ins.argval)
                elif ins.opname not in _UNPACKS:
                    target = False
        got = _loops[code] = frozenset(names)
    return got


def program_frames(start: Any, stop: Any) -> list[Any]:
    """The program's frames from ``start`` out to ``stop`` (``capture()``'s), outermost
    first, then a library's, innermost first (torch's and ours are not the program's);
    a custom Function's ``forward`` or ``backward`` is not (its argument ``run`` names a
    module the program calls by another name further out)."""
    prog: list[Any] = []
    lib: list[Any] = []
    f = start
    while f is not None:
        kind = file_kind(f.f_code.co_filename)
        if kind <= LIBRARY and not _function_method(f):
            (prog if kind == PROGRAM else lib).append(f)
        if f is stop:
            break
        f = f.f_back
    return prog[::-1] + lib


def _scopes(frames: list[Any]) -> Iterator[tuple[int, dict[str, Any], frozenset[str]]]:
    """Each frame's locals (with its loops' variables), then its globals (once each)."""
    seen: set[int] = set()
    for i, f in enumerate(frames):
        yield i, f.f_locals, loop_names(f.f_code)
        g = f.f_globals
        if id(g) not in seen:
            seen.add(id(g))
            yield i, g, frozenset()


def _items(v: Any) -> list[tuple[str, Any]]:
    """A list's, tuple's or dict's items by their part of a name (``0``, ``key``)."""
    if isinstance(v, (list, tuple)) and len(v) <= ITEMS_MAX:
        return [(str(j), e) for j, e in enumerate(v)]
    if isinstance(v, dict) and len(v) <= ITEMS_MAX:
        return [(k, e) for k, e in v.items() if isinstance(k, str)]
    return []


def _attrs(v: Any) -> list[tuple[str, Any]]:
    """An object's attributes (``vars()``; not a Python module's, nor a class's, nor a big
    one's), by name: where a program's object (a trainer) holds its model."""
    d = getattr(v, "__dict__", None)
    if not isinstance(d, dict) or isinstance(v, types.ModuleType) or len(d) > ITEMS_MAX:
        return []
    return [(a, e) for a, e in d.items() if isinstance(a, str) and not a.startswith("__")]


def _named(k: str) -> bool:
    return k != "self" and not k.startswith(("_", "."))


def root_label(module: Any, stop: Any = None,
               walked: dict[int, tuple[Any, dict[int, str]]] | None = None) -> tuple[str, bool]:
    """What the program calls a model it called at the top (the module docstring's rule):
    its variable (``model``, and False), a path from a variable that holds it as a part
    (``model.trunk``, ``heads.1``, and True), else its type's name (and False).
    ``walked``: a module -> it and each of its submodules' path, kept by the caller for
    the forward pass (blocks called one by one in a loop walk their model once)."""
    from torch import nn

    frames = program_frames(sys._getframe(1), stop)
    walked = {} if walked is None else walked

    def paths(v: Any) -> dict[int, str]:
        got = walked.get(id(v))
        if got is None or got[0] is not v:
            got = walked[id(v)] = (v, {})
            for p, m in v.named_modules():
                got[1].setdefault(id(m), p)
        return got[1]

    for loop in (False, True):
        best: tuple[int, int, str] | None = None  # (frame, path length, name)
        for i, scope, loops in _scopes(frames):
            if best is not None and best[0] < i:
                break
            for k, v in list(scope.items()):
                if (k in loops) != loop:
                    continue
                found = []
                if k == "self":  # a method's object: its attribute's name alone (``net``)
                    if not isinstance(v, nn.Module):
                        found += [(a, e) for a, e in _attrs(v) if isinstance(e, nn.Module)]
                elif not _named(k):
                    continue
                elif v is module:
                    return k, False
                elif isinstance(v, nn.Module):
                    found.append((k, v))
                elif isinstance(v, (list, tuple, dict)):
                    found += [(f"{k}.{j}", e) for j, e in _items(v) if isinstance(e, nn.Module)]
                else:
                    found += [(f"{k}.{a}", e) for a, e in _attrs(v) if isinstance(e, nn.Module)]
                for name, m in found:
                    path = name if m is module else paths(m).get(id(module))
                    if path is not None and m is not module:
                        path = f"{name}.{path}"
                    if path is not None and (best is None or path.count(".") < best[1]):
                        best = (i, path.count("."), path)
        if best is not None:
            return best[2], True
    return type(module).__name__, False


def leaf_holders(frames: list[Any], skip: set[int] | dict[int, Any]) -> dict[int, tuple[Any, str]]:
    """Each leaf tensor that requires grad (not in ``skip``: the parameters) by the name of
    the variable that holds it (``q``, ``xs.0``) in ``frames`` (outermost first), by the
    module docstring's rule."""
    import torch

    T = torch.Tensor
    best: dict[int, tuple[tuple[bool, int, int], Any, str]] = {}
    for i, scope, loops in _scopes(frames):
        for k, v in list(scope.items()):
            if not _named(k):
                continue
            if isinstance(v, T):
                held = [(k, v, 0)]
            else:
                held = [(f"{k}.{j}", e, 1) for j, e in _items(v) if isinstance(e, T)]
            for name, t, depth in held:
                if t.is_leaf and t.requires_grad and id(t) not in skip:
                    rank = (k in loops, i, depth)
                    old = best.get(id(t))
                    if old is None or rank < old[0]:
                        best[id(t)] = (rank, t, name)
    return {key: (t, name) for key, (_, t, name) in best.items()}


def unsharded_params(models: list[Any]) -> list[tuple[Any, Any]]:
    """(unsharded, sharded) for each parameter FSDP2's ``fully_shard`` manages in
    ``models`` (``FSDPParam``: ``sharded_param``, the registered DTensor, and
    ``_unsharded_param``, which the forward's all-gather fills and PyTorch's
    ``_setattr_on_modules`` swaps in).  Its private API: anything else gives none."""
    if "torch.distributed.fsdp" not in sys.modules:
        return []
    out = []
    for model in models:
        for m in model.modules():
            get = getattr(m, "_get_fsdp_state", None)
            try:
                group = get()._fsdp_param_group if callable(get) else None
                for fp in group.fsdp_params if group is not None else ():
                    u = fp.__dict__.get("_unsharded_param")  # made by the 1st all-gather
                    if u is not None and u is not fp.sharded_param:
                        out.append((u, fp.sharded_param))
            except Exception:  # noqa: BLE001 - another torch's FSDP: no names, no error
                continue
    return out


def _function_method(frame: Any) -> bool:
    """``frame`` is a custom ``torch.autograd.Function``'s ``forward``, ``setup_context`` or
    ``backward``: called by ``Function.apply`` or ``BackwardCFunction.apply`` (through C++,
    which makes no frame), in ``torch/autograd/function.py``."""
    caller = frame.f_back
    return caller is not None and \
        caller.f_code.co_filename.replace("\\", "/").endswith("torch/autograd/function.py")
