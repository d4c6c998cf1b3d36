"""The hooks a PyTorch program registered, run by our engine's ``call_function``.

Mirrors ``call_tensor_pre_hooks``, ``call_pre_hooks`` and ``call_post_hooks`` in
``engine.cpp`` by wrapping each PyTorch hook as a hook of our node (our engine
then calls it, and emits its ``hook`` event): it gets and returns PyTorch tensors,
our engine sees NumPy ones.  Where PyTorch keeps the hooks (in C++) and how they
are found: see the package's docstring.  Imports only ``convert`` of the bridge:
the node wrappers (``bridge``) install these hooks.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ..grad_mode import _tls as grad_tls
from ..graph import Node
from ..tensor import Tensor
from .convert import to_display, to_ours, to_torch, torch_module, typename


def _call_in_grad_mode(hook: Any, *args: Any) -> Any:
    """``hook(*args)`` under the GraphTask's grad mode (``create_graph``), as PyTorch runs
    every hook: its ``thread_main`` sets the thread's grad mode from the GraphTask, so a
    hook's own torch ops build no graph unless the backward creates one."""
    tc = torch_module()._C
    want = getattr(grad_tls, "enabled", True)  # our engine's, set from the GraphTask
    prev = tc.is_grad_enabled()
    if prev == want:
        return hook(*args)
    tc._set_grad_enabled(want)
    try:
        return hook(*args)
    finally:
        tc._set_grad_enabled(prev)


class LeafView:
    """What our engine reads of a leaf: its ``.grad`` and its tensor hooks."""

    def __init__(self, fn: Any) -> None:
        self.var = fn.variable
        self.grad_fn = None

    @property
    def _grad(self) -> Tensor | None:
        g = self.var.grad
        return None if g is None else to_display(g)

    @property
    def _backward_hooks(self) -> list[Any]:
        hooks = getattr(self.var, "_backward_hooks", None) or {}
        return [TensorHook(h) for h in hooks.values()]

    @property
    def requires_grad(self) -> bool:
        return bool(self.var.requires_grad)


def _named(wrapper: Any, hook: Any) -> None:
    """The wrapper named as the hook: ``__qualname__`` for the views, ``__name__`` (only if
    the hook has one) for ``hook_name`` in PyTorch's messages (else ``<unknown>``)."""
    wrapper.__qualname__ = getattr(hook, "__qualname__", None) or repr(hook)
    name = getattr(hook, "__name__", None)
    if name is not None:
        wrapper.__name__ = name


class TensorHook:
    """A PyTorch tensor hook ``hook(grad)`` called on our Tensor (named as the hook)."""

    def __init__(self, hook: Any, node: Any = None) -> None:
        self.hook, self.node = hook, node
        _named(self, hook)

    def __call__(self, grad: Tensor | None) -> Tensor | None:
        r = _call_in_grad_mode(self.hook, to_torch(grad))
        if r is None:
            return None
        if not isinstance(r, torch_module().Tensor):  # check_single_result's words
            raise TypeError(f"expected Variable, but hook returned '{typename(r)}'")
        return to_ours(r, self.node)


class NodeHook:
    """A PyTorch node hook (``pre``: ``hook(grad_outputs)``, ``post``:
    ``hook(grad_inputs, grad_outputs)``) called on our Tensors."""

    def __init__(self, hook: Any, node: Any) -> None:
        self.hook, self.node = hook, node
        _named(self, hook)

    def __call__(self, *lists: Sequence[Tensor | None]) -> Any:
        torch = torch_module()
        r = _call_in_grad_mode(self.hook, *(tuple(to_torch(g) for g in xs) for xs in lists))
        if r is None:
            return None
        if not isinstance(r, tuple):  # check_result's words
            raise TypeError(f"expected tuple, but hook returned '{typename(r)}'")
        # anything else than a tensor is left for our engine's check_result to refuse
        return tuple(to_ours(g, self.node) if isinstance(g, torch.Tensor) else g for g in r)


class RetainGrad:
    """``retain_grad``'s hook: the tensor's ``.grad`` (a clone, then a sum)."""

    __qualname__ = "retain_grad"

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def __call__(self, grad: Tensor | None) -> None:
        var = self.ref()
        if var is None or grad is None:
            return
        g = to_torch(grad, copy=True)
        var.grad = g if var.grad is None else var.grad + g


def install_hooks(ours: Node, fn: Any, reg: Any) -> None:
    """The program's hooks on ``fn`` as hooks of our node (run by our call_function)."""
    pre, post = node_hook_dicts(fn)
    if hasattr(ours, "hook_dicts"):  # an AccumulateGrad: held off while PyTorch runs it
        ours.hook_dicts = (pre, post)
    ours._pre_hooks.extend(NodeHook(h, fn) for h in pre.values())
    ours._post_hooks.extend(NodeHook(h, fn) for h in post.values())
    for nr, d in reg.tensor_hooks(fn):
        ours._tensor_pre_hooks.setdefault(nr, []).extend(TensorHook(h, fn) for h in d.values())
    for nr, ref in reg.retained(fn):
        ours._retains_grad_hooks[nr] = RetainGrad(ref)


def accumulate(fn: Any, grad: Any, dicts: tuple[dict[Any, Any], ...], create_graph: bool
               ) -> None:
    """Run the ``AccumulateGrad`` ``fn`` as PyTorch's ``call_function`` does, by PyTorch's
    engine (a one-node GraphTask rooted at the leaf): the C++ post hooks (DDP's reducer's
    ``autograd_hook``) and ``register_post_accumulate_grad_hook``'s run where PyTorch runs
    them.  The Python hooks (the leaf's tensor hooks, the node's pre- and post-hooks,
    whose dicts PyTorch's hooks read when called) are emptied meanwhile: our engine runs
    them, with their events."""
    torch = torch_module()
    leaf = fn.variable
    held = [d for d in (getattr(leaf, "_backward_hooks", None), *dicts) if d]
    saved = [list(d.items()) for d in held]
    for d in held:
        d.clear()
    try:
        torch.autograd.Variable._execution_engine.run_backward(
            (leaf,), (grad,), True, create_graph, (), True, True)
    finally:
        for d, items in zip(held, saved):
            d.update(items)


def node_hook_dicts(fn: Any) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """The dicts PyTorch keeps a node's Python pre- and post-hooks in ({} for none).

    ``registerFunctionHook`` (python_hook.cpp) passes the node's existing dict (None if
    it has none) to ``Function._register_hook``, looked up at call time: with that lookup
    answered by ``_spy`` (on this thread, inside ``probing()``), a probe registration
    hands the dict over and raises, so that nothing is registered (no empty hook left on
    the node, no handle to remove)."""
    out: list[dict[Any, Any]] = []
    with probing():
        for register in (fn.register_prehook, fn.register_hook):
            _probe.found = None
            try:
                register(_probe_hook)
            except _Found:
                pass
            out.append(_probe.found if _probe.found is not None else {})
    return out[0], out[1]


class _Found(Exception):
    """Raised by the probe once it has the dict."""


class _Probe(threading.local):
    depth = 0  # probing() calls open on this thread
    found: dict[Any, Any] | None = None


_probe = _Probe()
_probe_lock = threading.Lock()
_probers = 0  # threads inside probing()
_orig_register: Any = None


@contextlib.contextmanager
def probing() -> Iterator[None]:
    """``_HookMixin._register_hook`` answered by ``_spy`` on this thread (once for a whole
    graph walk: patching per node cost as much as the rest of ``from_torch``); other
    threads register hooks as usual meanwhile."""
    global _probers, _orig_register
    mixin = torch_module().autograd.function._HookMixin
    if _probe.depth == 0:
        with _probe_lock:
            if _probers == 0:
                _orig_register = mixin.__dict__["_register_hook"]
                mixin._register_hook = staticmethod(_spy)
            _probers += 1
    _probe.depth += 1
    try:
        yield
    finally:
        _probe.depth -= 1
        if _probe.depth == 0:
            with _probe_lock:
                _probers -= 1
                if _probers == 0:
                    mixin._register_hook = _orig_register


def _spy(d: Any, hook: Any) -> Any:
    if hook is not _probe_hook or _probe.depth == 0:  # a real registration
        return _orig_register.__func__(d, hook)
    _probe.found = d
    raise _Found


def _probe_hook(*args: Any) -> None:
    return None
