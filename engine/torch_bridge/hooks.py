"""The hooks a PyTorch program registered, run by our engine's ``call_function``.

Mirrors ``call_tensor_pre_hooks``, ``call_pre_hooks`` and ``call_post_hooks`` in
``engine.cpp`` by wrapping each PyTorch hook as a hook of our node (our engine
then calls it, and emits its ``hook`` event): it gets and returns PyTorch tensors,
our engine sees NumPy ones.  Where PyTorch keeps the hooks (in C++) and how they
are found: see the package's docstring.  Imports only ``convert`` of the bridge:
the node wrappers (``bridge``) install these hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..graph import Node
from ..tensor import Tensor
from .convert import to_display, to_ours, to_torch, torch_module


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


class TensorHook:
    """A PyTorch tensor hook ``hook(grad)`` called on our Tensor (named as the hook)."""

    def __init__(self, hook: Any, node: Any = None) -> None:
        self.hook, self.node = hook, node
        self.__qualname__ = getattr(hook, "__qualname__", None) or repr(hook)

    def __call__(self, grad: Tensor | None) -> Tensor | None:
        r = self.hook(to_torch(grad))
        return None if r is None else to_ours(r, self.node)


class NodeHook:
    """A PyTorch node hook (``pre``: ``hook(grad_outputs)``, ``post``:
    ``hook(grad_inputs, grad_outputs)``) called on our Tensors."""

    def __init__(self, hook: Any, node: Any) -> None:
        self.hook, self.node = hook, node
        self.__qualname__ = getattr(hook, "__qualname__", None) or repr(hook)

    def __call__(self, *lists: Sequence[Tensor | None]) -> Any:
        r = self.hook(*(tuple(to_torch(g) for g in xs) for xs in lists))
        if r is None:
            return None
        r = (r,) if not isinstance(r, (tuple, list)) else r
        return tuple(to_ours(g, self.node) for g in r)


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
    ours._pre_hooks.extend(NodeHook(h, fn) for h in pre.values())
    ours._post_hooks.extend(NodeHook(h, fn) for h in post.values())
    for nr, d in reg.tensor_hooks(fn):
        ours._tensor_pre_hooks.setdefault(nr, []).extend(TensorHook(h, fn) for h in d.values())
    for nr, ref in reg.retained(fn):
        ours._retains_grad_hooks[nr] = RetainGrad(ref)


def node_hook_dicts(fn: Any) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """The dicts PyTorch keeps a node's Python pre- and post-hooks in.

    ``registerFunctionHook`` (python_hook.cpp) passes the node's existing dict to
    ``Function._register_hook``, looked up at call time: register a probe with that
    lookup patched to keep the dict and raise, so that nothing is registered (no empty
    hook left on the node, no handle to remove)."""
    torch = torch_module()
    mixin = torch.autograd.function._HookMixin
    orig = mixin.__dict__["_register_hook"]
    found: list[Any] = []

    def spy(d: Any, hook: Any) -> Any:
        found.append(d)
        raise _Found

    out: list[dict[Any, Any]] = []
    mixin._register_hook = staticmethod(spy)
    try:
        for register in (fn.register_prehook, fn.register_hook):
            found.clear()
            try:
                register(_probe)
            except _Found:
                pass
            out.append(found[0] if found and found[0] is not None else {})
    finally:
        mixin._register_hook = orig
    return out[0], out[1]


class _Found(Exception):
    """Raised by the probe once it has the dict."""


def _probe(*args: Any) -> None:
    return None
