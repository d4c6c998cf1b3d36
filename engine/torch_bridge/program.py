"""A program: its forward pass under ``capture()``, its backward on our engine.

``run_program(entry)`` is what ``autograd-tui torch`` and the torch scenarios
run; ``split_result`` reads what an entry returns; ``leaf_names`` is the one
rule that names a leaf (``check-order`` names them the same way).  An entry may be a
whole script stopped at its Nth backward call (``script_run.ScriptEntry``); the
backward passes an entry ran itself before are said (``program_notes``).

Departs from a plain ``python`` run in one place: an ``allow_mutation_on_saved_tensors()``
context the program leaves open is closed when ``run_program`` ends on a thread of its own
(``closing_left_open``), not at exit on the main thread, where PyTorch asserts.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..tensor import Tensor
from . import ddp
from .bridge import TorchAccumulateGrad, TorchGraph, from_torch
from .capture import Registry, capture, is_tool_file
from .compiled import watch_compile
from .convert import TorchBridgeError, Unsupported, device_str, subclass_shown, torch_module
from .inplace import inplace_log
from .script_run import ScriptEntry, ordinal, shown


def split_result(out: Any) -> tuple[Any, Any, Any]:
    """What an entry returns: the loss, ``(loss, grad_outputs[, inputs])`` or a dict with
    ``loss`` (or ``outputs``), ``grad_outputs``, ``inputs``."""
    torch = torch_module()
    if isinstance(out, torch.Tensor):
        return out, None, None
    if isinstance(out, dict):
        loss = out.get("loss", out.get("outputs"))
        return loss, out.get("grad_outputs"), _leaf_edges(torch, out.get("inputs"))
    if isinstance(out, (tuple, list)) and 1 <= len(out) <= 3 and _tensors(torch, out[0]):
        items = list(out) + [None] * (3 - len(out))
        _check_returned(torch, items)
        return items[0], items[1], _leaf_edges(torch, items[2])
    what = type(out).__name__
    if isinstance(out, (tuple, list)) and out:  # a TrainOutput (global_step, training_loss, ...)
        first = type(out[0]).__name__
        a = "an" if first[0] in "aeiouAEIOU" else "a"
        what += f" whose first item is {a} {first}, not the loss"
    raise TorchBridgeError(f"the entry function returned {what}: it must return the loss (a "
                           f"tensor), (loss, grad_outputs[, inputs]) or a dict; {_LOOP}")


# transformers' Trainer.train() returns a TrainOutput, its backward passes already run
_LOOP = ("a training loop that runs its backward passes itself (transformers' "
         "Trainer.train()) leaves none to step: return the loss of one more forward pass "
         "(with a Trainer: trainer.compute_loss(model, batch)), or run the script as it "
         "is and step its own Nth backward call: --backward N")


def _leaf_edges(torch: Any, inputs: Any) -> Any:
    """``inputs`` with each ``GradientEdge`` of a leaf (``get_gradient_edge(param)``) as
    the leaf itself, which PyTorch's backward treats alike (its ``AccumulateGrad`` runs);
    an edge of a non-leaf is refused, saying so."""
    from torch.autograd.graph import GradientEdge

    if not isinstance(inputs, (tuple, list)) or not any(
            isinstance(t, GradientEdge) for t in inputs):
        return inputs
    out = []
    for t in inputs:
        if isinstance(t, GradientEdge):
            var = getattr(t.node, "variable", None)
            if var is None:
                raise Unsupported(f"backward's inputs= holds a GradientEdge of "
                                  f"{type(t.node).__name__}, not of a leaf: the bridge "
                                  "takes tensors and leaves' edges (get_gradient_edge of a "
                                  "parameter)")
            t = var
        out.append(t)
    return out


def _tensors(torch: Any, loss: Any) -> bool:
    """The loss as ``torch.autograd.backward`` takes it: a tensor or a sequence of them."""
    return isinstance(loss, torch.Tensor) or (
        isinstance(loss, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in loss))


_TUPLE = ("the entry function returned a tuple, read as (loss, grad_outputs[, inputs]) as "
          "torch.autograd.backward takes them; to return more than the loss, return a dict "
          "such as {'loss': loss, 'logits': logits} (other keys are ignored)")


def _check_returned(torch: Any, items: list[Any]) -> None:
    """A tuple's grad_outputs as PyTorch's ``backward`` would check them (its own
    ``_make_grads``: a shape that does not match the loss's is its error, not a backward
    that ours runs and PyTorch's refuses), each error with what the tuple was read as."""
    from torch.autograd.graph import GradientEdge  # in inputs=, as backward takes them

    loss, gouts, inputs = items
    for what, v in (("grad_outputs", gouts), ("inputs", inputs)):
        vs = [v] if v is None or isinstance(v, torch.Tensor) else v
        if not isinstance(vs, (tuple, list)) or not all(
                t is None or isinstance(t, (torch.Tensor, GradientEdge)) for t in vs):
            raise TorchBridgeError(f"{_TUPLE}; its {what} is a {type(v).__name__}, not a "
                                   "tensor or a sequence of tensors")
    if gouts is None:
        return
    outs = [loss] if isinstance(loss, torch.Tensor) else list(loss)
    grads = [gouts] if isinstance(gouts, torch.Tensor) else list(gouts)
    if len(outs) != len(grads):
        raise TorchBridgeError(f"{_TUPLE}; grad_outputs has {len(grads)} tensors for "
                               f"{len(outs)} outputs")
    from torch.autograd import _make_grads  # PyTorch's own checks, its own words

    try:
        _make_grads(outs, grads, is_grads_batched=False)
    except RuntimeError as e:
        raise TorchBridgeError(f"{e} ({_TUPLE})") from None


def leaf_names(graph: TorchGraph) -> dict[str, TorchAccumulateGrad]:
    """Each leaf's ``AccumulateGrad`` by name, in the graph's order: the parameter's name
    from the forward pass (``0.weight``), the program's variable that held it
    (``Registry.name_leaves``: ``q``) or ``leaf [shape]``, with ``'`` added until it is
    unique (two unnamed leaves of one shape)."""
    out: dict[str, TorchAccumulateGrad] = {}
    for node in graph.nodes.values():
        if isinstance(node, TorchAccumulateGrad):
            name = (node.meta or {}).get("tensor") or f"leaf {list(node.variable.var.shape)}"
            name = name.replace("_orig_mod.", "")  # a torch.compile'd module's own names
            while name in out:
                name += "'"
            out[name] = node
    return out


def named_leaves(g: Any, reg: Any) -> dict[str, Any]:
    """The graph's leaves by ``leaf_names`` (check-order's), then the parameters of the
    models the forward pass called that the graph does not hold (those only a nested
    backward reaches)."""
    leaves = {name: n.variable.var for name, n in leaf_names(g).items()}
    known = {id(v) for v in leaves.values()}
    for name, p in reg.parameters():  # also those only a nested backward reaches
        if id(p) not in known:
            name = name.replace("_orig_mod.", "")
            while name in leaves:  # never in place of a leaf of the graph
                name += "'"
            leaves[name] = p
    return leaves


@contextlib.contextmanager
def forward_capture() -> Iterator[tuple[Registry, dict[int, tuple[Any, str]], Any]]:
    """What ``run_program`` runs the forward pass under: ``capture()``, the program's own
    backward calls watched, in-place ops logged, a compiled model run eagerly (its eager
    graph is what we step).  Yields the registry, the calls and the in-place log."""
    log = inplace_log()  # run inside capture's own mode: one Python dispatch per op
    with watch_compile(eager=True), capture(log.__torch_function__) as reg, \
            backward_calls() as calls, ddp.watch():
        yield reg, calls, log


def build_graph(loss: Any, grad_outputs: Any = None, inputs: Any = None) -> TorchGraph:
    """``from_torch`` with Python's cyclic garbage collector paused: it makes a few
    objects per node, all kept, and each full collection on the way walks every object
    the program holds (at 20,000 nodes the collections doubled its time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        return from_torch(loss, grad_outputs, inputs)
    finally:
        if was:
            gc.enable()


class ProgramResult(dict[str, Tensor]):
    """Each leaf's ``.grad`` by name; ``no_grad``: each parameter of the models the forward
    pass called that got no gradient, and why."""

    no_grad: dict[str, str]
    notes: list[str]


def program_notes(entry: Any, calls: BackwardCalls) -> list[str]:
    """A plain script's (``ScriptEntry.notes``: which backward call was stepped), or the
    backward passes an entry function ran itself on PyTorch's engine (training steps)
    before returning the loss stepped."""
    if isinstance(entry, ScriptEntry):
        return entry.notes()
    if not calls.count:
        return []
    name = getattr(entry, "__name__", "main")
    passes = "pass" if calls.count == 1 else "passes"
    return [f"{name}() ran {calls.count} backward {passes} of its own on PyTorch's engine "
            f"({shown(calls.first)}) before the one stepped"]


NOT_REACHED = "not reached by the backward"
NONE_GRAD = ("reached, with no gradient: the node before it returned None for it (a custom "
             "Function's backward, a hook)")
NOT_INPUT = "not among the backward's inputs= (PyTorch leaves its .grad as it was)"
FROZEN = "requires_grad is False"
# PyTorch's tutorial fuses the optimizer into the backward this way (step, then zero_grad)
CLEARED = ("its gradient was accumulated, then .grad set to None by the program (its "
           "post-accumulate-grad hook: an optimizer step in the backward?)")
# FSDP2's post-backward reduce-scatters the unsharded copy's gradient into the sharded
# parameter's .grad and frees the copy's: the gradient is there (in grads, by its name)
UNSHARDED = ("FSDP2's unsharded copy of {}: its gradient was accumulated, then "
             "reduce-scattered into the sharded parameter's .grad (fully_shard sets this "
             "copy's .grad to None)")


def run_program(entry: Any, *args: Any, said: Callable[[str], None] | None = None,
                **kwargs: Any) -> ProgramResult:
    """Run ``entry`` (forward) under ``capture()`` and its backward on our engine; return
    each leaf's ``.grad`` (our Tensor) by ``leaf_names``' name, then the parameters whose
    gradient a nested GraphTask wrote (a reentrant checkpoint's); ``no_grad`` names the
    parameters left without one; ``notes`` what the forward pass did that the person
    should know (backward passes it ran itself), each also given to ``said`` as soon as
    the forward pass ends, before the backward."""
    torch_module()
    with closing_left_open():
        with forward_capture() as (reg, calls, log):
            out = entry(*args, **kwargs)
        loss, grad_outputs, inputs = split_result(out)
        refuse_backwarded(entry, loss, calls)
        notes = program_notes(entry, calls)
        for note in notes if said is not None else ():
            said(note)
        g = build_graph(loss, grad_outputs, inputs)
        try:
            g.backward()
        except RuntimeError as e:  # a saved tensor changed in place: name the op
            note = log.hint(str(e))
            if note is not None:
                e.add_note(note)
            raise
    grads = ProgramResult()
    grads.no_grad, grads.notes = {}, notes
    seen = set()
    asked = None if inputs is None else {id(t) for t in (
        [inputs] if isinstance(inputs, torch_module().Tensor) else inputs)}
    for name, node in leaf_names(g).items():
        seen.add(id(node.variable.var))
        grad = node.variable._grad
        if grad is not None:
            grads[name] = grad
        elif asked is not None and id(node.variable.var) not in asked:
            grads.no_grad[name] = NOT_INPUT  # backward(inputs=[...]) on a subset
        elif node.accumulated and (sharded := reg.sharded_of(node.variable.var)) is not None:
            grads.no_grad[name] = UNSHARDED.format(reg.param_name(sharded) or "a parameter")
        else:
            grads.no_grad[name] = (CLEARED if node.accumulated else NONE_GRAD if node.reached
                                   else NOT_REACHED)
    for name, p in reg.parameters():
        if id(p) in seen:
            continue
        while name in grads or name in grads.no_grad:  # two tensors, one name: both kept
            name += "'"
        if p.grad is not None:
            g = p.grad.detach()  # a DTensor (fully_shard) is read as its local tensor
            g = subclass_shown(g, p) if hasattr(g, "to_local") else g
            grads[name] = Tensor(g.cpu().numpy(), device=device_str(p.grad.device))
        else:
            grads.no_grad[name] = NOT_REACHED if p.requires_grad else FROZEN
    return grads


_TRANSFORMS = r"(?:grad|grad_and_value|vjp|jacrev|hessian)"  # reverse mode: a backward
_FUNC_USE = re.compile(rf"\btorch\.func\.{_TRANSFORMS}\b|\bfunctorch\b")
_FUNC_IMPORT = re.compile(r"\bfrom\s+torch\.func\s+import\s+(\([^)]*\)|[^\n]*)")
FUNC_NOTE = ("the script uses torch.func: its transforms (grad, vjp, jacrev, ...) run their "
             "own backward passes inside the forward pass, with PyTorch's engine, and those "
             "are not stepped; the backward stepped is the returned loss's, through what the "
             "transforms returned")


def func_note(source: str) -> str | None:
    """What ``autograd-tui torch`` says of a script that uses a ``torch.func`` (functorch)
    transform that differentiates: it does so during the forward pass (its own levels,
    PyTorch's engine), before the backward the tool steps (``functional_call`` alone
    differentiates nothing)."""
    if _FUNC_USE.search(source) or any(re.search(rf"\b{_TRANSFORMS}\b", m.group(1))
                                       for m in _FUNC_IMPORT.finditer(source)):
        return FUNC_NOTE
    return None


@contextlib.contextmanager
def closing_left_open() -> Iterator[None]:
    """Around a program run on a thread of its own (``autograd-tui torch``'s, the app's):
    an ``allow_mutation_on_saved_tensors()`` context it entered and never exited is closed
    at the end, on that thread, as Python's exit closes it on the program's one thread
    under plain PyTorch.  Left open, it was closed at exit on the main thread, whose
    saved-tensor hooks stack it had never pushed onto: "Exception ignored ... INTERNAL
    ASSERT FAILED" (``SavedTensorHooks.cpp``).  A context open before the run is left be."""
    graph = sys.modules.get("torch.autograd.graph")
    if graph is None or threading.current_thread() is threading.main_thread():
        yield
        return
    before = {id(g) for g in _open_mutation_contexts(graph)}
    try:
        yield
    finally:
        for g in _open_mutation_contexts(graph):
            if id(g) not in before:
                with contextlib.suppress(Exception):  # closing it is tidying, not the program
                    g.close()


def _open_mutation_contexts(graph: Any) -> list[Any]:
    """The suspended generators of ``allow_mutation_on_saved_tensors`` (entered, not
    exited); looked for only while one is (its module's flag), as ``gc`` sees every object."""
    if not getattr(graph, "_allow_mutation_on_saved_tensors_enabled", False):
        return []
    code = getattr(getattr(graph.allow_mutation_on_saved_tensors, "__wrapped__", None),
                   "__code__", None)
    return [o for o in gc.get_objects() if type(o) is types.GeneratorType  # no __class__ call
            and o.gi_code is code and inspect.getgeneratorstate(o) == inspect.GEN_SUSPENDED]


class ScriptCalledBackward(TorchBridgeError):
    """The program ran the backward of the loss it returns with PyTorch's engine."""


class BackwardCalls(dict[int, tuple[Any, str]]):
    """Each root's node whose graph a backward call freed, and where it was called;
    ``count``: the program's backward calls (not those nested in a backward), ``first``:
    where the first was called (``file:line``)."""

    count = 0
    first = ""


@contextlib.contextmanager
def backward_calls() -> Iterator[BackwardCalls]:
    """Watch ``torch.autograd.backward`` (``Tensor.backward`` calls it): each root's node
    and where the program called it (``file:line``)."""
    torch = torch_module()
    calls = BackwardCalls()
    orig = torch.autograd.backward
    inside = threading.local()  # a reentrant checkpoint's backward runs inside another

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(inside, "depth", 0):
            return orig(tensors, *args, **kwargs)
        f = sys._getframe(1)
        while f is not None and is_tool_file(f.f_code.co_filename):
            f = f.f_back
        where = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"
        calls.count += 1
        calls.first = calls.first or where
        # backward(tensors, grad_tensors, retain_graph, create_graph, ...): a graph kept
        # (retain_graph, which create_graph implies) may be backwarded again, as in PyTorch
        named = dict(zip(("grad_tensors", "retain_graph", "create_graph"), args)) | kwargs
        keep = named.get("retain_graph")
        if keep is None:
            keep = named.get("create_graph", False)
        if not keep:
            for t in [tensors] if isinstance(tensors, torch.Tensor) else list(tensors):
                if getattr(t, "grad_fn", None) is not None:
                    calls.setdefault(id(t.grad_fn), (t.grad_fn, where))
        inside.depth = 1
        try:
            return orig(tensors, *args, **kwargs)
        finally:
            inside.depth = 0

    torch.autograd.backward = backward
    try:
        yield calls
    finally:
        torch.autograd.backward = orig


def refuse_backwarded(entry: Any, loss: Any, calls: dict[int, tuple[Any, str]]) -> None:
    """One plain message if the program already ran the backward of what it returns."""
    torch = torch_module()
    for t in [loss] if isinstance(loss, torch.Tensor) else list(loss or ()):
        hit = calls.get(id(getattr(t, "grad_fn", None)))
        if hit is not None and isinstance(entry, ScriptEntry):
            raise ScriptCalledBackward(
                f"{hit[1]}: the script's {ordinal(entry.backward)} backward call backwards a "
                "graph an earlier call freed (PyTorch raises \"Trying to backward through "
                "the graph a second time\"): keep it with .backward(retain_graph=True)")
        if hit is not None:
            name = getattr(entry, "__name__", "main")
            raise ScriptCalledBackward(
                f"{hit[1]}: the program calls .backward() itself: {name}() should return "
                "the loss; autograd-tui runs the backward (to step a second backward of "
                "it, keep its graph: .backward(retain_graph=True))")
