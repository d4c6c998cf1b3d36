"""A PyTorch script: its entry function as a scenario, and ``check-order``.

A script's function (``main`` unless ``--entry`` names another) builds a model, runs
the forward pass and returns the loss (or ``(loss, grad_outputs[, inputs])``, or a
dict); a script with none is run as it is, up to a backward call (``plain_script``).
``script_scenario`` makes it a ``Scenario`` whose program runs that forward pass under
``capture`` and the backward on our engine (``run_program``), so a ``Run``, the app,
recordings and exports take it as a built-in one.  ``check_order`` runs the backward
with PyTorch's engine and with ours and compares.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograd_tui.scenarios import Scenario, ScenarioError
from autograd_tui.session.grad_compare import Worst, compare
from autograd_tui.session.plain_script import INSTALL, is_plain, need_torch, noting, plain_scenario
from autograd_tui.session.program_errors import import_file, in_modules, one_backward

__all__ = ["INSTALL", "check_order", "load_entry", "need_torch", "script_scenario"]


def load_entry(path: str, entry: str = "main", argv: Sequence[str] = ()
               ) -> tuple[Callable[..., Any], Any]:
    """Import the script and return its entry function (and the module)."""
    need_torch()
    p = Path(path)
    with folder_on_path(p, argv):
        mod = import_file(path, "Python script")
    fn = getattr(mod, entry, None)
    if not callable(fn):  # --entry NAME, or a main bound by an import or an assignment
        raise ScenarioError(f"{p}: defines no function {entry!r} (the entry: it returns the "
                            "loss); without --entry, a script with no main() returning the "
                            "loss runs as it is, up to its first backward call (--backward "
                            "N: its Nth)", usage=True)

    @functools.wraps(fn)
    def entry_fn(*args: Any, **kwargs: Any) -> Any:
        with folder_on_path(p, argv), in_modules(mod):  # main() may import a sibling module too
            return fn(*args, **kwargs)

    return entry_fn, mod


@contextlib.contextmanager
def folder_on_path(script: Path, argv: Sequence[str] = ()) -> Iterator[None]:
    """The script's folder first on ``sys.path`` and ``sys.argv`` ``[script, *argv]`` (as
    ``python script.py ARGV`` puts them: an ``argparse`` at import gets the script's
    arguments, not our command line), and both as they were afterwards."""
    saved, saved_argv = list(sys.path), sys.argv
    sys.path.insert(0, str(script.resolve().parent))
    sys.argv = [str(script), *argv]
    try:
        yield
    finally:
        sys.path[:] = saved
        sys.argv = saved_argv


def script_scenario(path: str, entry: str | None = None, backward: int | None = None,
                    argv: Sequence[str] = ()) -> Scenario:
    """The script as a scenario: its entry's forward, then our backward; or, a script
    with no ``main()`` returning the loss (or ``backward`` given), the script run as it
    is up to its Nth backward call (``plain_script``)."""
    if is_plain(path, entry, backward):
        return plain_scenario(path, argv, backward or 1)
    entry = entry or "main"
    fn, mod = load_entry(path, entry, argv)
    from autograd_tui.engine.torch_bridge.compiled import script_note
    from autograd_tui.engine.torch_bridge.program import func_note, run_program

    doc, text = (mod.__doc__ or "").strip(), Path(path).read_text(errors="replace")
    banner = "; ".join(n for n in (script_note(vars(mod), text), func_note(text)) if n)
    scenario = Scenario(
        name=Path(path).stem, title=getattr(mod, "TITLE", Path(path).name),
        summary=doc.splitlines()[0] if doc else f"{entry}() of {path}", notes=doc,
        params={}, engine={}, threads=("cpu (owner)",), expect="complete",
        program=lambda: None, torch_program=None, source=str(path), banner=banner,
        script={"entry": entry, "args": list(argv)})
    scenario.program = lambda: run_program(fn, said=noting(scenario))
    return scenario


# --- check-order ------------------------------------------------------------------------------
@dataclass
class OrderCheck:
    torch_order: list[tuple[str, int]]
    our_order: list[tuple[str, int]]
    grads: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # (PyTorch's, ours)
    exact: bool = False
    compile_note: str | None = None  # what was compiled, and what the gradients are from
    same_error: str | None = None  # both backward passes raised this error
    fresh_note: str | None = None  # gradients compared with a fresh forward pass's
    nested: tuple[list[Any], list[Any]] = ([], [])  # nested backwards' orders (theirs, ours)
    _worst: Any = field(default=None, init=False, repr=False, compare=False)  # worst()'s

    def order_difference(self) -> str | None:
        for i, (a, b) in enumerate(zip(self.torch_order, self.our_order)):
            if a != b:
                return (f"node {i + 1}: PyTorch ran {a[0]} (sequence_nr {a[1]}), ours ran "
                        f"{b[0]} (sequence_nr {b[1]})")
        if len(self.torch_order) != len(self.our_order):
            return (f"PyTorch ran {len(self.torch_order)} nodes, ours "
                    f"{len(self.our_order)}")
        from autograd_tui.engine.torch_bridge.nested import nested_difference

        return nested_difference(*self.nested)

    def worst(self) -> list[Worst]:
        """Each leaf's worst element (``grad_compare.compare``), failing ones first; computed
        once (check-order asks up to 4 times) unless a gradient or ``exact`` changed since."""
        key = [(n, *pair) for n, pair in self.grads.items()]  # the tensors, compared by id
        if self._worst is not None and self._worst[0] == (self.exact, len(key)) and all(
                a is b for old, new in zip(self._worst[1], key) for a, b in zip(old, new)):
            return list(self._worst[2])
        out = [w for name, (t, o) in self.grads.items() if t is not None and o is not None
               and t.shape == o.shape and t.dtype == o.dtype
               and (w := compare(name, t, o, self.exact)) is not None]
        out.sort(key=lambda w: (w.ok, -w.margin))
        self._worst = ((self.exact, len(key)), key, out)
        return list(out)

    def grad_differences(self) -> list[str]:
        out = []
        for name, (t, o) in self.grads.items():
            if t is None or o is None:
                if (t is None) != (o is None):
                    out.append(f"{name}: PyTorch's .grad is {_desc(t)}, ours {_desc(o)}")
            elif t.shape != o.shape or t.dtype != o.dtype:
                out.append(f"{name}: PyTorch's .grad is {_desc(t)}, ours {_desc(o)}")
        return out + [w.text() for w in self.worst() if not w.ok]

    @property
    def agrees(self) -> bool:
        if self.same_error is not None:  # the .grad of a backward cut short: not compared
            return self.order_difference() is None
        return self.order_difference() is None and not self.grad_differences()


def _desc(a: Any) -> str:
    return "None" if a is None else f"a {list(a.shape)} {str(a.dtype).replace('torch.', '')} tensor"


def check_order(entry: Callable[..., Any], exact: bool = False,
                namespace: dict[str, Any] | None = None) -> OrderCheck:
    """Run the entry's forward once, then its backward with ours driving PyTorch's nodes
    and with PyTorch's engine (the order from node pre-hooks); compare.  The leaves'
    ``.grad`` are left as PyTorch's run made them.  A ``torch.compile``d model runs
    eagerly for both (its eager graph is what we step); its gradients are then compared
    with a second, compiled run's (``compiled_grads``)."""
    torch = need_torch()
    from autograd_tui import engine
    from autograd_tui.engine.torch_bridge import capture, split_result
    from autograd_tui.engine.torch_bridge.compiled import watch_compile
    from autograd_tui.engine.torch_bridge.nested import our_nested, recording_nested
    from autograd_tui.engine.torch_bridge.program import build_graph as from_torch
    from autograd_tui.engine.torch_bridge.program import named_leaves
    from autograd_tui.engine.torch_bridge.stepped import StepState

    with watch_compile(eager=True, namespace=namespace) as watch, capture() as reg:
        out = entry()
    loss, gouts, inputs = split_result(out)
    g = from_torch(loss, gouts, inputs)
    leaves = named_leaves(g, reg)
    # Copies: AccumulateGrad adds into an existing .grad in place (a program that ran a
    # backward of its own first), so our run changes the tensor object itself.
    before = {k: _copy(v.grad) for k, v in leaves.items()}
    stepped = StepState.take(leaves)  # an optimizer step in the backward: where it started
    # Ours first: a graph the bridge cannot run fails here, with the node's name.
    ours = from_torch(loss, gouts, inputs)
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    ours_error: Exception | None = None
    try:
        with engine.use_engine(eng):
            ours.backward(retain_graph=True)
    except Exception as e:  # noqa: BLE001 - does PyTorch's raise the same? (below)
        ours_error = e
    finally:
        eng.close()
    seqs = {n.id: (n.name, n.seq) for e in obs.events if e.kind == "dependencies_computed"
            for n in e.nodes}
    # Several roots: both engines run a GraphRoot first, but PyTorch's is C++ only (no
    # Python node to put a pre-hook on), so it is not in PyTorch's recorded order.
    our_order = [seqs[e.node] for e in obs.events if e.kind == "node_start"
                 and e.graph_task == 1 and seqs[e.node][0] != "GraphRoot"]
    mine = {k: _copy(v.grad) for k, v in leaves.items()}
    stepped_to = {k: _copy(v) for k, v in leaves.items()} if stepped is not None else {}
    for k, v in leaves.items():
        v.grad = before[k]  # PyTorch's run starts from the same .grad as ours did

    order: list[tuple[str, int]] = []

    def recorder(fn: Any) -> Callable[..., None]:
        return lambda grad_outputs: order.append((type(fn).__name__, int(fn._sequence_nr())))

    handles = [fn.register_prehook(recorder(fn)) for fn in g.torch_nodes.values()]
    same_error = sac = None
    sac_error: BaseException | None = None
    run_backward = torch.autograd.backward  # PyTorch's; nested calls are recorded too:
    try:  # a reentrant checkpoint's backward inside its node
        with recording_nested(g.torch_nodes.values()) as nested:
            run_backward(loss, gouts, retain_graph=True, inputs=inputs)
    except Exception as e:
        if ours_error is None and one_backward(e):  # one backward per region: a fresh one
            sac = _fresh_backward(entry, before, g)
        elif ours_error is None and stepped is not None and _INPLACE in str(e):
            stepped.restore()  # ours stepped the parameters: PyTorch's from where ours began
            sac = _fresh_backward(entry, before, g, start=loss)
            if sac is None:
                _twice(e, " (and a fresh forward pass from the parameters it had before "
                          "ours made another loss or graph: is the program seeded?)")
        if sac is not None:
            order[:] = sac[0]
            sac_error = e
        else:
            # Both raised, the same error (anomaly mode's NaN check, a hook's exception):
            # they agree; the orders up to it are compared
            same_error = _same_error(ours_error, e)
            if same_error is None and ours_error is not None:
                raise ours_error from None
            if same_error is None and isinstance(e, RuntimeError):
                _twice(e)
            if same_error is None:
                raise
    finally:
        for h in handles:
            h.remove()
    if ours_error is not None and same_error is None:  # PyTorch's completed
        raise ours_error
    theirs = sac[1] if sac is not None else {k: _copy(v.grad) for k, v in leaves.items()}
    res = OrderCheck(order, our_order, {k: (theirs[k], mine[k]) for k in leaves}, exact)
    res.same_error = same_error
    if sac is None:  # a fresh forward pass's nested backwards are not recorded
        res.nested = (nested, our_nested(obs.events))
    if sac is not None and stepped is not None and _INPLACE in str(sac_error):
        res.fresh_note = stepped.compare(res.grads, sac[2], stepped_to)
    elif sac is not None:
        if res.grad_differences() and sac_error is not None:  # not seeded?
            _twice(sac_error, " (and a fresh forward pass gave other gradients: is the "
                              "program seeded?)")
        res.fresh_note = (f"{one_backward(sac_error)}, and ours ran it: PyTorch's ran on a "
                          "fresh forward pass (the entry run again)")
    if same_error is not None and our_order[len(order):] == our_order[-1:] \
            and our_order[-1][0] == getattr(ours_error, "_autograd_node", None):
        # PyTorch's recorder, a node pre-hook, runs after the tensor pre-hooks: one that
        # raised stopped the node before it was recorded; ours started it (node_start)
        res.our_order = our_order[:-1]
    if watch.note() and same_error is None:
        compiled_grads(res, entry, watch, leaves)
    elif same_error is None and sac is None and res.grad_differences():
        fresh_grads(res, entry, before, g)
    return res


_SAC = "selective activation checkpoint"
_INPLACE = "modified by an inplace operation"


def _fresh_backward(entry: Callable[..., Any], before: dict[str, Any], g: Any,
                    start: Any = None) -> tuple[list[tuple[str, int]], dict[str, Any],
                                                dict[str, Any]] | None:
    """The entry run again (a fresh forward pass) and PyTorch's backward on it, from the
    ``.grad`` both runs started at: its order, each node named as the shared graph's node
    in the same place of ``from_torch``'s walk, each leaf's gradient and its value after
    the backward by name; None when the program cannot run twice or makes another graph
    (it is not seeded), or, with ``start`` (the shared forward's loss), another loss."""
    torch = need_torch()
    from autograd_tui.engine.torch_bridge import capture, split_result
    from autograd_tui.engine.torch_bridge.program import build_graph, named_leaves
    from autograd_tui.engine.torch_bridge.stepped import same_loss

    try:
        with capture() as reg:
            loss, gouts, inputs = split_result(entry())
        g2 = build_graph(loss, gouts, inputs)
        pairs = list(zip(g2.torch_nodes.values(), g.torch_nodes.values()))
        fresh = named_leaves(g2, reg)
        if len(g2.torch_nodes) != len(g.torch_nodes) or set(fresh) != set(before) or any(
                type(a) is not type(b) for a, b in pairs) or not same_loss(start, loss):
            return None
        order: list[tuple[str, int]] = []
        handles = [a.register_prehook(
            lambda _, b=b: order.append((type(b).__name__, int(b._sequence_nr()))))
            for a, b in pairs]
        kept = {k: v.grad for k, v in fresh.items()}
        for k, v in fresh.items():  # a model built at import: from the .grad both started at
            v.grad = _copy(before[k])
        try:
            torch.autograd.backward(loss, gouts, inputs=inputs)
        finally:
            for h in handles:
                h.remove()
        grads = {k: _copy(v.grad) for k, v in fresh.items()}
        values = {k: _copy(v) for k, v in fresh.items()}
        for k, v in fresh.items():
            v.grad = kept[k]
    except Exception:  # noqa: BLE001 - the program cannot run twice: none to compare
        return None
    return order, grads, values


def fresh_grads(res: OrderCheck, entry: Callable[..., Any], before: dict[str, Any],
                g: Any) -> None:
    """Gradients that differ on the shared forward pass may come from the program's own
    state, changed by our backward, the first: a hook that removes itself or counts its
    calls acts differently in PyTorch's.  PyTorch's on a fresh forward pass
    (``_fresh_backward``): if every gradient then equals ours, those are compared, and a
    note says why (a program that is not seeded differs again: the first report stays)."""
    fresh = _fresh_backward(entry, before, g)
    if fresh is None:
        return
    trial = OrderCheck([], [], {k: (fresh[1][k], o) for k, (_, o) in res.grads.items()},
                       res.exact)
    if trial.grad_differences():
        return
    res.grads = trial.grads
    res.fresh_note = ("the gradients differed on the forward pass both backward passes "
                      "shared (the program's state, a hook that removes itself or counts its "
                      "calls, changed in ours, the first); PyTorch's on a fresh forward pass "
                      "are compared")


def _same_error(ours: Exception | None, theirs: Exception) -> str | None:
    """``Type in Node: message`` when both engines raised one error, else None."""
    if ours is None or type(ours) is not type(theirs) or str(ours) != str(theirs):
        return None
    where = getattr(ours, "_autograd_node", None)
    return f"{type(ours).__name__}" + (f" in {where}" if where else "") + f": {ours}"


def _twice(e: BaseException, why: str = "") -> None:
    """PyTorch's backward failed where ours completed, because check-order runs both on
    one forward pass: one plain message (else the caller re-raises PyTorch's error)."""
    if _SAC in str(e):  # SAC: one backward per region, and no fresh forward to compare
        raise ScenarioError(
            "check-order runs both backward passes on one forward pass, and a region "
            "under selective activation checkpoint (checkpoint's context_fn) allows "
            f"one backward (ours: it completed), so PyTorch's cannot run{why}. "
            "`autograd-tui torch` steps the program; PyTorch said: " + str(e)) from None
    if _INPLACE in str(e):
        raise ScenarioError(
            "check-order runs both backward passes on one forward pass, and the program "
            "changed a tensor the graph saved during the first (ours: it completed), so "
            f"PyTorch's cannot run{why}; an optimizer step in a post-accumulate-grad hook "
            "does this. `autograd-tui torch` steps the program; PyTorch said: "
            + str(e).split(" Hint:")[0]) from None


def compiled_grads(res: OrderCheck, entry: Callable[..., Any], watch: Any,
                   leaves: dict[str, Any]) -> None:
    """The compiled run's gradients as PyTorch's (the compiled modules' parameters, by
    name), or a note saying why torch.compile could not run here."""
    from autograd_tui.engine.torch_bridge.compiled import compile_error, watch_compile

    if not watch.modules:  # compiled functions only: their leaves have no names to match
        res.compile_note = (f"{watch.note()}; gradients compared with PyTorch's eager run "
                            "(only a compiled nn.Module's parameters can be matched by name)")
        return
    eager_names = {id(p): f"{i}:{n}" for i, m in enumerate(watch.modules)
                   for n, p in m.named_parameters()}
    saved = [(p, p.grad) for m in watch.modules for p in m.parameters()]
    for p, _ in saved:  # a model built once, at import: the compiled run starts clean
        p.grad = None
    try:
        with watch_compile(eager=False) as again:
            from autograd_tui.engine.torch_bridge import split_result

            loss, gouts, inputs = split_result(entry())
            need_torch().autograd.backward(loss, gouts, inputs=inputs)
    except Exception as e:  # noqa: BLE001 - no compiler here, or the backend failed
        res.compile_note = (f"{watch.note()}; torch.compile cannot run here "
                            f"({compile_error(e)}): gradients compared with PyTorch's "
                            "eager run only")
        return
    compiled = {f"{i}:{n}": _copy(p.grad) for i, m in enumerate(again.modules)
                for n, p in m.named_parameters()}
    for p, grad in saved:
        p.grad = grad
    matched = 0
    for name, (_, o) in list(res.grads.items()):
        key = eager_names.get(id(leaves[name]))
        if key is not None and key in compiled:
            res.grads[name] = (compiled[key], o)
            matched += 1
    res.compile_note = (f"{watch.note()}; gradients compared with the compiled run's "
                        f"({matched} parameters)")


def _copy(t: Any) -> Any:
    """A copy of ``t`` to compare (a sparse ``.grad``, an embedding's, as its dense values)."""
    return None if t is None else t.detach().clone() if not t.is_sparse else t.to_dense()
