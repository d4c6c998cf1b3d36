"""What a PyTorch program's forward pass leaves for the bridge to find (not in PyTorch).

``capture()`` runs around a program's forward pass and records what PyTorch
keeps out of Python's reach: the hooks a program puts on non-leaf tensors
(``Tensor.register_hook``, ``retain_grad``), which arguments of a custom
``Function`` were tensors (``is_variable_input`` in ``python_function.cpp``),
the ``nn.Module`` that created each node (module forward hooks) and where each
node was created (what anomaly mode's ``AnomalyMetadata`` keeps as a traceback),
and each parameter's name (``Registry.add_params``: by the outermost model the program
called or built around it, named by ``naming.root_label``: the program's variable, or the
path from the variable that holds it as a part, ``m.layer1``, ``heads.1``, a loop's
variable last; non-leaf tensors that ``functional_call`` swaps in are not
parameters, nor are the wrappers a ``torch.func`` transform (``grad``, ``jacrev``, ``vmap``)
puts in their place for one call).
``current_registry()`` hands that to ``bridge.from_torch``.  Imports nothing of
the bridge: ``bridge`` reads the registry, ``program`` runs a forward under it.

Creation sites are kept without anomaly mode (``sites.py`` says how, and why).  The
module of a node: the module calls are ranges of sequence numbers (a node is made
by the innermost call running when it was made; ``Registry.owner``), read when a
node's meta is made, with no walk of the graph during the forward.  Sequence numbers are
per thread, so only the thread that entered ``capture()`` is watched: a module another
thread of the program calls meanwhile (a model trained in the background) is not this
forward pass's.
"""

from __future__ import annotations

import bisect
import contextlib
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from . import saved as saved_hooks
from .convert import HOP
from .naming import leaf_holders, root_label, unsharded_params
from .saved import saved_lines, saved_summaries
from .sites import Sites, is_tool_file, site_mode, warnings_at_callers

__all__ = ["Registry", "capture", "current_registry", "is_tool_file", "saved_summaries"]

_lock = threading.Lock()


class Registry:
    """Per-node facts from one forward pass, keyed by ``id(node)`` (C++ nodes take no
    weak references: the node is kept with its facts)."""

    def __init__(self) -> None:
        self._hooks: dict[int, tuple[Any, list[tuple[int, Any]]]] = {}
        self._retained: dict[int, tuple[Any, dict[int, Any]]] = {}
        self._var_inputs: dict[int, tuple[Any, tuple[bool, ...]]] = {}
        self._params: dict[int, tuple[Any, str, str, str]] = {}  # param -> (p, path, type, name)
        # param -> (p, id of the root module, the root's name, named_parameters()' name)
        self._qual: dict[int, tuple[Any, int, str, str]] = {}
        # the roots named in _qual: (label, whether it is a path from a program's model)
        self._roots: dict[int, tuple[str, bool]] = {}
        self.sites = Sites()
        # the module calls as ranges of sequence numbers: from each boundary on (a node
        # newer than it), the owner (path, type) of the call then innermost, or None
        self._bounds: list[int] = []
        self._owners: list[tuple[str, str] | None] = []
        self._leaf_vars: dict[int, tuple[Any, str]] = {}  # a leaf -> (it, the program's name)
        self._unsharded: dict[int, tuple[Any, Any]] = {}  # FSDP2's -> (it, its sharded param)
        # a module's output with no graph, which a hook may make a leaf that requires grad
        # (transformers' enable_input_require_grads): -> (a weak reference, the module's path)
        self.leaf_outputs: dict[int, tuple[Any, str]] = {}
        self._kept: list[Any] = []  # the models named, held: ids are keys here
        self._walked: dict[int, tuple[Any, dict[int, str]]] = {}  # root_label's
        self.paths: dict[int, str] = {}  # id(module) -> its path in the forward pass
        self._alone: dict[str, str] = {}  # a module's path -> torch's, for a model alone
        # a node a backward's recompute made (recompute.py) -> (it, its module's owner)
        self._recomputed: dict[int, tuple[Any, tuple[str, str]]] = {}

    # --- recorded during the forward ----------------------------------------------------
    def add_tensor_hooks(self, fn: Any, nr: int, hooks: Any) -> None:
        entry = self._hooks.setdefault(id(fn), (fn, []))
        if not any(d is hooks for _, d in entry[1]):
            entry[1].append((nr, hooks))

    def add_retained(self, fn: Any, nr: int, tensor: Any) -> None:
        self._retained.setdefault(id(fn), (fn, {}))[1][nr] = weakref.ref(tensor)

    def add_var_inputs(self, fn: Any, flags: tuple[bool, ...]) -> None:
        self._var_inputs[id(fn)] = (fn, flags)

    def owner(self, owner: tuple[str, str] | None) -> None:
        """Nodes made from now on belong to ``owner`` (a module call entered or left)."""
        seqs = self.sites.seqs
        now = seqs[-1] if seqs else -1
        if self._bounds and self._bounds[-1] == now:
            self._owners[-1] = owner  # no node made since the last boundary
        else:
            self._bounds.append(now)
            self._owners.append(owner)

    def name_leaves(self, frames: list[Any]) -> None:
        """The forward is over: name each leaf tensor (not a parameter) that requires grad
        by the variable of the program's that holds it (``q``, not ``leaf [2, 4, 7, 16]``
        and ``leaf [2, 4, 7, 16]'`` beside it; ``naming``'s rule), from ``frames`` (the
        program's, outermost first: the entry's locals, which a returned frame keeps), else
        the module whose output it is (a hook made it a leaf)."""
        for key, held in leaf_holders(frames, self._params).items():
            self._leaf_vars.setdefault(key, held)
        for ref, path in self.leaf_outputs.values():  # else the module that returned it
            if (v := ref()) is not None and v.is_leaf and v.requires_grad \
                    and id(v) not in self._params and id(v) not in self._leaf_vars:
                self._leaf_vars[id(v)] = (v, f"{path} (output)")
        for u, p in unsharded_params(self._kept):  # fully_shard's: by the parameter
            self._unsharded[id(u)] = (u, p)

    def module_path(self, module: Any) -> str | None:
        """The path the forward pass gave ``module`` (``enc.0``), if it called it."""
        return self.paths.get(id(module))

    def claim(self, outs: list[Any], start: int, end: int, owner: tuple[str, str],
              before: set[int]) -> None:
        """A module call of a backward's recompute made the nodes numbered ``start`` to
        ``end`` (exclusive) on its thread: those reachable from its output's (``outs``),
        not through its inputs' (``before``), are ``owner``'s unless an inner call's."""
        todo, seen = list(outs), set(before)
        while todo:
            fn = todo.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            if start <= fn._sequence_nr() < end:  # AccumulateGrad's UINT64_MAX is not
                self._recomputed.setdefault(id(fn), (fn, owner))
                todo.extend(n for n, _ in fn.next_functions)

    def forget_recomputed(self) -> None:
        """Drop the claims and the nodes they hold (``recompute.graph_done``)."""
        self._recomputed = {}

    def module_of(self, fn: Any) -> tuple[str, str] | None:
        """The innermost module call whose range of sequence numbers holds ``fn``'s (or the
        backward's recompute call that made it: ``claim``), its path as shown."""
        if type(fn).__name__ == "AccumulateGrad":  # a leaf: made by no call
            return None
        again = self._recomputed.get(id(fn))
        owner = again[1] if again is not None and again[0] is fn else \
            self._owner_at(fn._sequence_nr())
        return (self._shown(owner[0]), owner[1]) if owner is not None else None

    def _owner_at(self, seq: int) -> tuple[str, str] | None:
        i = bisect.bisect_left(self._bounds, seq) - 1
        return self._owners[i] if i >= 0 else None

    def add_params(self, root: Any) -> dict[int, str]:
        # The model itself is named by its type (a script may call several roots), or, a
        # submodule called on its own (``m.layer1(x)``), by its path from the program's
        # variable (``m.layer1``): by type, torchvision's four ``Sequential`` layers were
        # one name, and three of them lost their parameters' gradients in the summary.
        # A module called before its model was built around it (a parametrization runs
        # at construction) gives its parameters up to the model.
        named = self._roots.get(id(root))
        taken: set[int] = set()
        if named is None:
            inside = {id(m) for m in root.modules()}
            take = [(q, p) for q, p in root.named_parameters() if _is_param(p)
                    and (id(p) not in self._qual or self._qual[id(p)][1] in inside)]
            if take:
                label, owned = root_label(root, self.sites.stop, self._walked)
                while any(label == n for n, _ in self._roots.values()):  # one name each
                    label += "'"
                named = self._roots[id(root)] = (label, owned)
                self._kept.append(root)  # no later module may take its id() meanwhile
                before = {self._qual[id(p)][1] for _, p in take if id(p) in self._qual}
                for q, p in take:
                    self._qual[id(p)] = (p, id(root), label, q)
                    taken.add(id(p))
                left = {v[1] for v in self._qual.values()}
                for rid in before - left:  # a root all of whose parameters were given up
                    del self._roots[rid]
        owned_path = named[0] if named is not None and named[1] else None
        # its modules are named from the same root as its parameters (``enc.0`` beside
        # ``enc.0.bias``), torch's for a model alone (``_shown``)
        label = named[0] if named is not None and not named[1] else None
        names = {}
        prefix = owned_path if owned_path is not None else label
        for mpath, m in root.named_modules():
            if prefix is not None:
                full = f"{prefix}.{mpath}".rstrip(".")
                self._alone[full] = mpath or type(root).__name__
                mpath = full
            mpath = mpath or type(root).__name__
            names[id(m)] = mpath
            for pname, p in m.named_parameters(recurse=False):
                if id(p) in taken or id(p) not in self._params:
                    self._params[id(p)] = (p, mpath, type(m).__name__, pname)
        if named is not None:
            for qname, p in root.named_parameters():
                # not a leaf: computed weights that torch.func.functional_call (MAML's
                # adapted weights) put in the parameters' place for one call
                if id(p) not in self._qual and _is_param(p):
                    self._qual[id(p)] = (p, id(root), named[0], qname)
        return names

    def module_below(self, parent: str, typ: str) -> str:
        """The path of a module the forward pass's models do not hold (made in a forward),
        called inside ``parent``'s call: by its type below it."""
        path = f"{parent}.{typ}".lstrip(".")
        if parent in self._alone:
            self._alone[path] = f"{self._alone[parent]}.{typ}"
        return path

    def _alone_now(self) -> bool:
        """One model and no other leaf: its parameters and modules have torch's names."""
        return len(self._roots) == 1 and not self._leaf_vars

    def _shown(self, path: str) -> str:
        """A module's path as shown: torch's for a model alone (as its parameters')."""
        return self._alone.get(path, path) if self._alone and self._alone_now() else path

    def param_name(self, p: Any) -> str | None:
        """The parameter's qualified name, from its model's ``named_parameters()``
        (``block.0.weight``); where the forward pass called several models, or the program
        holds other leaves (hypernet.py's ``task`` beside ``hyper``), prefixed with the
        name the program gave the model (``lin1.weight``, ``heads.1.weight``)."""
        q = self._qual.get(id(p))
        if q is None:
            return None
        if self._alone_now():
            return q[3]
        return f"{q[2]}.{q[3]}"

    def sharded_of(self, var: Any) -> Any:
        """The sharded parameter whose FSDP2 unsharded copy ``var`` is, else None."""
        got = self._unsharded.get(id(var))
        return got[1] if got is not None and got[0] is var else None

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
        cls = type(fn)
        has_var = _HAS_VARIABLE.get(cls)
        if has_var is None:  # a C++ node has no attributes but its class's
            has_var = _HAS_VARIABLE[cls] = bool(cls.__dictoffset__) or hasattr(cls, "variable")
        var = getattr(fn, "variable", None) if has_var else None
        try:
            seq = fn._sequence_nr()
        except Exception:  # noqa: BLE001 - not a node: no site, no module
            seq = None
        if var is not None and id(var) in self._params:
            _, module, typ, pname = self._params[id(var)]
            module = self._shown(module)
            tensor = self.param_name(var) or (f"{module}.{pname}" if module else pname)
        elif var is not None and self._leaf_vars.get(id(var), (None,))[0] is var:
            tensor = self._leaf_vars[id(var)][1]
        elif var is not None and self._unsharded.get(id(var), (None,))[0] is var:
            tensor = f"{self.param_name(self._unsharded[id(var)][1]) or 'parameter'} (unsharded)"
        elif seq is not None and cls.__name__ != "AccumulateGrad":  # module_of, inlined
            again = self._recomputed.get(id(fn)) if self._recomputed else None
            owner = again[1] if again is not None and again[0] is fn else self._owner_at(seq)
            if owner is not None:
                module, typ = owner
                if self._alone and len(self._roots) == 1 and not self._leaf_vars:  # _shown
                    module = self._alone.get(module, module)
        created, source, stack = self.sites.at(seq) if seq is not None else (None, None, [])
        return {"module": module, "module_type": typ, "tensor": tensor, "created": created,
                "source": source, "saved": saved_lines(fn), "stack": stack}


def _is_param(p: Any) -> bool:
    """A real parameter: a leaf (not ``functional_call``'s computed weights), not a
    ``torch.func`` wrapper (a leaf for the transform, with ``requires_grad`` its own: it was
    named ``0.weight'`` and said to be frozen), and not a fake one (``torch.export`` traces
    its ``Wrapper`` with FakeTensor parameters: they were listed beside the exported
    module's, as ``Wrapper._export_root.fc.weight``, never reached)."""
    if not p.is_leaf:
        return False
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    if fake is not None and isinstance(p, fake.FakeTensor):
        return False
    functorch = getattr(sys.modules["torch"]._C, "_functorch", None)
    return functorch is None or not functorch.is_functorch_wrapped_tensor(p)


#: node class -> whether its nodes may have a ``variable`` (AccumulateGrad's, or a custom
#: Function's own attribute): ``getattr`` with a default costs an exception where not
_HAS_VARIABLE: dict[type, bool] = {}
_current = Registry()


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


# --- the forward pass -----------------------------------------------------------------------
@contextlib.contextmanager
def capture(inner: Any = None) -> Iterator[Registry]:
    """Record, while a program's forward pass runs, what ``from_torch`` needs.  Anomaly
    mode is left as the program sets it (its checks still run; its traceback is unused).
    ``inner``: another ``TorchFunctionMode``'s ``__torch_function__``, each torch call
    run through it (``site_mode``)."""
    global _current
    import torch
    from torch.autograd import function as F
    from torch.nn.modules import module as M

    reg = _current = Registry()
    # Module hooks and Function.apply are global, but sequence numbers, like the mode, are
    # per thread: what another thread of the program runs meanwhile is not this forward's
    tid = threading.get_ident()
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
        if threading.get_ident() == tid:  # the mode's own thread, as for torch calls
            reg.sites.note(out)  # not a torch function: the mode does not see it
        return out

    stack: list[tuple[str, str]] = []  # the module calls entered: (path, type)
    names = reg.paths

    def pre(module: Any, args: Any) -> None:
        if HOP[0] or threading.get_ident() != tid:  # HOP: dynamo traces this (convert.HOP)
            return
        if not stack:
            names.update(reg.add_params(module))
        path = names.get(id(module))
        if path is None:
            path = reg.module_below(stack[-1][0] if stack else "", type(module).__name__)
        owner = (path, type(module).__name__)
        stack.append(owner)
        reg.owner(owner)

    def post(module: Any, args: Any, output: Any) -> None:
        if HOP[0] or not stack or threading.get_ident() != tid:
            return
        if isinstance(output, torch.Tensor) and output.grad_fn is None:
            reg.leaf_outputs[id(output)] = (weakref.ref(output), stack[-1][0])
        stack.pop()
        reg.owner(stack[-1] if stack else None)

    reg.sites.stop = _entering_frame()  # the frame with `with capture()`: outermost kept
    mode = site_mode(reg.sites, inner, HOP)
    with _lock:
        T.register_hook = register_hook
        T.retain_grad = retain_grad
        F.Function.apply = classmethod(apply)
        handles = [M.register_module_forward_pre_hook(pre),
                   M.register_module_forward_hook(post)]
        # torch.compile(module) warns of global module hooks: ours, not the program's
        warnings.filterwarnings("ignore", _OWN_HOOKS_WARNING, UserWarning)
    saved_hooks.install()  # saved-tensor hooks entered now are guarded (saved.py)
    shown_at = warnings_at_callers()
    shown_at.__enter__()
    mode.__enter__()
    try:
        yield reg
    finally:
        mode.__exit__(None, None, None)
        shown_at.__exit__(None, None, None)
        reg.name_leaves(reg.sites.program_frames())
        reg._walked.clear()  # the models it walked: not kept past the forward
        reg.sites.done()
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
            _drop_filter(_OWN_HOOKS_WARNING)


_OWN_HOOKS_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks on modules"


def _drop_filter(message: str) -> None:
    """Remove the one ``ignore`` filter ``filterwarnings`` added for ``message``."""
    for f in warnings.filters:
        if f[0] == "ignore" and getattr(f[1], "pattern", None) == message:
            warnings.filters.remove(f)
            getattr(warnings, "_filters_mutated", lambda: None)()
            return


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


def _flatten(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flatten(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flatten(v)]
    return []
