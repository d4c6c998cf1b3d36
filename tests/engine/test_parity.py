"""Parity with real PyTorch (CPU, float64): gradients and the order nodes run in.

Each random graph is first generated as a *program* (a list of instructions,
``gen_program(seed)``, checked against a NumPy shadow evaluation so that every
op stays in its safe domain), then run twice by the same interpreter
(``run_program``): once with ``import engine``, once with ``import torch``.
For each graph:

- the backward graphs are walked in lockstep from the roots through
  ``grad_fn.next_functions``: same node names (ours says ``AccumulateGrad``
  where torch says ``torch::autograd::AccumulateGrad``), same edges;
- every node gets a pre-hook that logs its walk-order label; after the
  backward the two logs must be identical, ties between AccumulateGrads
  (all at the maximal sequence number, broken by the libstdc++ heap) included;
- every leaf's ``.grad`` must equal torch's (rtol 1e-9), ``None`` where torch
  has ``None``; the forward values must agree too.

Several AccumulateGrads ready at once come from nodes with several leaf inputs
(``x * y``, a custom Function with 3 to 7 leaf inputs) and from
``autograd.backward`` with several leaves among the roots (the GraphRoot then
pushes them all before the next pop).  Each run happens on a fresh thread, so
both libraries start from an empty CPU ReadyQueue.

Which node ``reshape`` records (``ViewBackward0``, ``ReshapeAliasBackward0`` or
``CloneBackward0`` + ``UnsafeViewBackward0``) depends on the input's strides,
so ``test_layouts_match_torch`` also compares shapes, strides and nodes along
random chains of views, elementwise ops and reshapes.

The seeds' worked example (``/work/shared/seeds/004_*``: input -> Linear1 ->
x; z = relu(x); y = Linear2(x); out = z + y; output = out[0]) is checked twice:
with ``engine.functional.linear`` (one LinearBackward0 node, so only the nodes
both libraries have are compared, plus the narrative's not_ready wait), and
written as ``x @ w.t() + b`` in both libraries for exact order parity.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(120)

RTOL = 1e-9
ATOL = 1e-12  # only for entries that cancel to ~0; every other entry is held to RTOL

N_RANDOM_GRAPHS = 360
N_TIE_GRAPHS = 60


# --- the two libraries, driven by one interpreter ---------------------------------------
def _kw(mod: Any) -> dict[str, Any]:
    return {"dtype": torch.float64} if mod is torch else {}


def _new_tensor(mod: Any, data: Any, requires_grad: bool = False) -> Any:
    return mod.tensor(data, requires_grad=requires_grad, **_kw(mod))


def _to_np(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().data)


def _node_name(node: Any) -> str:
    name = node.name()
    return "AccumulateGrad" if name == "torch::autograd::AccumulateGrad" else name


_MIX_CLASSES: dict[Any, type] = {}


def _mix_class(mod: Any) -> type:
    """A custom Function with any number of same-shaped inputs: ``sum((i+1) * x_i)``.

    One node with one edge per input: its leaves become ready together."""
    if mod in _MIX_CLASSES:
        return _MIX_CLASSES[mod]
    base = torch.autograd.Function if mod is torch else engine.Function

    class Mix(base):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx: Any, *xs: Any) -> Any:
            ctx.n = len(xs)
            out = xs[0] * 1.0
            for i, x in enumerate(xs[1:]):
                out = out + x * float(i + 2)
            return out

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return tuple(g * float(i + 1) for i in range(ctx.n))

    _MIX_CLASSES[mod] = Mix
    return Mix


# Every op of a program, written once for both libraries.
UNARY: dict[str, Callable[..., Any]] = {
    "exp": lambda a: a.exp(),
    "log": lambda a: a.log(),
    "relu": lambda a: a.relu(),
    "sigmoid": lambda a: a.sigmoid(),
    "tanh": lambda a: a.tanh(),
    "neg": lambda a: -a,
    "pow": lambda a, e: a ** e,
    "rpow": lambda a, c: c ** a,
    "clone": lambda a: a.clone(),
    "reshape": lambda a, shape: a.reshape(*shape) if len(shape) > 1 else a.reshape(shape),
    "t": lambda a: a.t(),
    "sum": lambda a: a.sum(),
    "sum_dim": lambda a, d, k: a.sum(d, keepdim=k),
    "mean": lambda a: a.mean(),
    "mean_dim": lambda a, d, k: a.mean(d, keepdim=k),
    "index": lambda a, key: a[key],
    "add_c": lambda a, c: a + c,
    "radd_c": lambda a, c: c + a,
    "sub_c": lambda a, c: a - c,
    "rsub_c": lambda a, c: c - a,
    "mul_c": lambda a, c: a * c,
    "rmul_c": lambda a, c: c * a,
    "div_c": lambda a, c: a / c,
    "rdiv_c": lambda a, c: c / a,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "matmul": lambda a, b: a @ b,
}


def run_program(mod: Any, prog: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """Build the program's graph with ``mod`` (``engine`` or ``torch``)."""
    vals: list[Any] = []
    leaves: list[Any] = []
    roots: list[Any] = []
    root_grads: list[Any] = []
    for ins in prog:
        op = ins[0]
        if op == "leaf":
            t = _new_tensor(mod, ins[1], ins[2])
            leaves.append(t)
            vals.append(t)
        elif op in UNARY:
            vals.append(UNARY[op](vals[ins[1]], *ins[2:]))
        elif op in BINARY:
            vals.append(BINARY[op](vals[ins[1]], vals[ins[2]]))
        elif op == "mix":
            vals.append(_mix_class(mod).apply(*[vals[i] for i in ins[1]]))
        elif op == "loss":
            parts = []
            for i, how in ins[1]:
                v = vals[i]
                parts.append(v if how == "id" else v.sum() if how == "sum" else v.mean())
            loss = parts[0]
            for p in parts[1:]:
                loss = loss + p
            vals.append(loss)
            roots.append(loss)
            root_grads.append(None)
        elif op == "root":  # an extra root of autograd.backward, with its gradient
            roots.append(vals[ins[1]])
            root_grads.append(_new_tensor(mod, ins[2]))
        else:  # pragma: no cover - a generator bug
            raise AssertionError(f"unknown instruction {op!r}")
    return {"vals": vals, "leaves": leaves, "roots": roots, "root_grads": root_grads}


def _root_node(t: Any) -> Any:
    """The node a root's gradient enters: grad_fn, or a leaf's AccumulateGrad.

    A leaf's accumulator is held weakly by the tensor, so the caller keeps it
    alive; it is reached through a clone, identically in both libraries."""
    if t.grad_fn is not None:
        return t.grad_fn
    return t.clone().grad_fn.next_functions[0][0]


def walk(root_nodes: Sequence[Any]) -> tuple[list[Any], list[tuple[str, tuple[Any, ...]]]]:
    """Breadth-first from the roots: nodes in walk order and each node's
    (name, ((label or None, input_nr), ...))."""
    labels: dict[int, int] = {}
    nodes: list[Any] = []
    for n in root_nodes:
        if id(n) not in labels:
            labels[id(n)] = len(nodes)
            nodes.append(n)
    structure = []
    i = 0
    while i < len(nodes):
        node = nodes[i]
        edges = []
        for fn, nr in node.next_functions:
            if fn is None:
                edges.append((None, nr))
                continue
            if id(fn) not in labels:
                labels[id(fn)] = len(nodes)
                nodes.append(fn)
            edges.append((labels[id(fn)], nr))
        structure.append((_node_name(node), tuple(edges)))
        i += 1
    return nodes, structure


def run_and_trace(mod: Any, prog: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """Build, walk, hook every node, run the backward: the run's record."""
    built = run_program(mod, prog)
    root_nodes = [_root_node(r) for r in built["roots"]]
    nodes, structure = walk(root_nodes)
    log: list[int] = []
    for label, node in enumerate(nodes):
        node.register_prehook(lambda grads, label=label: log.append(label))
    roots, grads = built["roots"], built["root_grads"]
    if len(roots) == 1 and grads[0] is None:
        roots[0].backward()
    else:
        mod.autograd.backward(roots, grads)
    return {
        "structure": structure,
        "order": log,
        "grads": [None if t.grad is None else _to_np(t.grad) for t in built["leaves"]],
        "values": [_to_np(v) for v in built["vals"]],
        "nodes": nodes,  # keeps the accumulators alive until the comparison is done
    }


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch's {want.shape}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def in_fresh_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` on a new thread and return its result (or raise its exception).

    Both libraries keep one CPU ReadyQueue per thread, reused across backward
    calls; a backward that failed leaves its remaining tasks in it, and even
    expired tasks change the heap's shape, hence how later ties break.  A fresh
    thread gives each run an empty queue (and a fresh sequence-number counter)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e

    th = threading.Thread(target=target, name="parity-run")
    th.start()
    th.join(60)
    assert not th.is_alive(), "a parity run did not finish within 60 s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def check_parity(prog: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    ours = in_fresh_thread(run_and_trace, engine, prog)
    ref = in_fresh_thread(run_and_trace, torch, prog)
    assert ours["structure"] == ref["structure"], _describe(prog, ours, ref, "graph")
    for i, (a, b) in enumerate(zip(ours["values"], ref["values"])):
        _close(a, b, f"forward value {i} ({prog[i][0]})")
    assert ours["order"] == ref["order"], _describe(prog, ours, ref, "order")
    assert len(ours["grads"]) == len(ref["grads"])
    for i, (a, b) in enumerate(zip(ours["grads"], ref["grads"])):
        if b is None:
            assert a is None, f"leaf {i}: engine has a grad, torch has None"
        else:
            assert a is not None, f"leaf {i}: engine has no grad, torch has one"
            _close(a, b, f"grad of leaf {i}")
    return ours


def _describe(prog: Sequence[Any], ours: dict[str, Any], ref: dict[str, Any], what: str) -> str:
    lines = [f"{what} differs", "program:"]
    lines += [f"  {i}: {ins}" for i, ins in enumerate(prog)]
    lines.append("nodes (ours | torch):")
    for i in range(max(len(ours["structure"]), len(ref["structure"]))):
        a = ours["structure"][i] if i < len(ours["structure"]) else None
        b = ref["structure"][i] if i < len(ref["structure"]) else None
        lines.append(f"  {i}: {a} | {b}" + ("" if a == b else "   <-- differs"))
    lines.append(f"order ours : {ours['order']}")
    lines.append(f"order torch: {ref['order']}")
    return "\n".join(lines)


# --- the program generator ------------------------------------------------------------------
SHAPES = [(), (2,), (3,), (2, 3), (3, 2), (3, 3), (1, 3), (3, 1)]
CONSTS = [2, 3, -1, 0.5, 1.5, -2.5]


class _Gen:
    """Random program, with a NumPy shadow of every value to keep ops in their domain."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.prog: list[tuple[Any, ...]] = []
        self.shadow: list[np.ndarray] = []
        self.grad: list[bool] = []  # does the value require grad
        self.is_leaf: list[bool] = []
        self.uses: list[int] = []
        self.selectable: list[bool] = []

    # values
    def add_leaf(self, shape: tuple[int, ...], requires_grad: bool, selectable: bool = True
                 ) -> int:
        rng = self.rng
        arr = np.array([round(rng.uniform(-2.0, 2.0), 3) for _ in range(int(np.prod(shape)))],
                       dtype=np.float64).reshape(shape)
        arr[np.abs(arr) < 0.05] = 0.25  # keep relu away from its kink
        self.prog.append(("leaf", arr.tolist(), requires_grad))
        return self._push(arr, requires_grad, True, selectable)

    def _push(self, arr: np.ndarray, requires_grad: bool, leaf: bool = False,
              selectable: bool = True) -> int:
        self.shadow.append(np.asarray(arr, dtype=np.float64))
        self.grad.append(requires_grad)
        self.is_leaf.append(leaf)
        self.uses.append(0)
        self.selectable.append(selectable)
        return len(self.shadow) - 1

    def pick(self, ok: Callable[[int], bool] = lambda i: True) -> int | None:
        cands = [i for i in range(len(self.shadow)) if self.selectable[i] and ok(i)]
        if not cands:
            return None
        n = len(self.shadow)
        # leaves are reused a lot; recent values a bit more than old ones
        weights = [4.0 if self.is_leaf[i] else 1.0 + 3.0 * (i + 1) / n for i in cands]
        return self.rng.choices(cands, weights)[0]

    def emit(self, ins: tuple[Any, ...], result: np.ndarray, operands: Sequence[int]) -> int:
        self.prog.append(ins)
        for i in operands:
            self.uses[i] += 1
        return self._push(result, any(self.grad[i] for i in operands))

    # ops
    def try_op(self, kind: str | None = None) -> bool:
        """Append one random op; False if the draw did not fit (nothing appended)."""
        rng = self.rng
        if kind is None:
            kind = rng.choices(
                ["unary", "const", "binary", "matmul", "shape", "reduce", "index", "mix"],
                [5, 4, 7, 3, 4, 2, 3, 1])[0]
        a = self.pick()
        assert a is not None
        x = self.shadow[a]
        big = float(np.max(np.abs(x))) if x.size else 0.0
        small = float(np.min(np.abs(x))) if x.size else 1.0
        if big > 50:
            return False
        if kind == "unary":
            op = rng.choice(["exp", "log", "relu", "sigmoid", "tanh", "neg", "pow", "rpow"])
            if op == "exp":
                return big <= 3 and self.emit(("exp", a), np.exp(x), [a]) >= 0
            if op == "log":
                p = self.pick(lambda i: self.shadow[i].size > 0 and
                              float(np.min(self.shadow[i])) >= 0.05)
                return p is not None and self.emit(("log", p), np.log(self.shadow[p]), [p]) >= 0
            if op == "relu":
                if small < 1e-3 and float(np.max(x)) > 0 and np.any((x != 0) & (np.abs(x) < 1e-3)):
                    return False
                return self.emit(("relu", a), np.maximum(x, 0.0), [a]) >= 0
            if op == "sigmoid":
                return self.emit(("sigmoid", a), 1 / (1 + np.exp(-x)), [a]) >= 0
            if op == "tanh":
                return self.emit(("tanh", a), np.tanh(x), [a]) >= 0
            if op == "neg":
                return self.emit(("neg", a), -x, [a]) >= 0
            if op == "pow":
                e = rng.choice([2, 3, -1, 0.5, 1.5, 2.0, 1, 0])
                if big > 6:
                    return False
                if e < 0 and small < 0.1:
                    return False
                if not float(e).is_integer() and float(np.min(x)) < 0.05:
                    return False
                return self.emit(("pow", a, e), np.power(x, e), [a]) >= 0
            c = rng.choice([2.0, 0.5, 3, 1.5])
            return big <= 3 and self.emit(("rpow", a, c), np.power(c, x), [a]) >= 0
        if kind == "const":
            op = rng.choice(["add_c", "radd_c", "sub_c", "rsub_c", "mul_c", "rmul_c", "div_c",
                             "rdiv_c"])
            c = rng.choice(CONSTS)
            if op == "rdiv_c" and small < 0.1:
                return False
            fn = {"add_c": lambda: x + c, "radd_c": lambda: c + x, "sub_c": lambda: x - c,
                  "rsub_c": lambda: c - x, "mul_c": lambda: x * c, "rmul_c": lambda: c * x,
                  "div_c": lambda: x / c, "rdiv_c": lambda: c / x}[op]
            return self.emit((op, a, c), fn(), [a]) >= 0
        if kind == "binary":
            op = rng.choice(["add", "sub", "mul", "div"])

            def fits(i: int) -> bool:
                try:
                    np.broadcast_shapes(x.shape, self.shadow[i].shape)
                except ValueError:
                    return False
                if op == "div":
                    y = self.shadow[i]
                    return y.size == 0 or float(np.min(np.abs(y))) >= 0.1
                return True

            b = self.pick(fits)
            if b is None:
                return False
            y = self.shadow[b]
            r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](x, y)
            return self.emit((op, a, b), r, [a, b]) >= 0
        if kind == "matmul":
            if x.ndim == 0:
                return False
            n = x.shape[-1]
            b = self.pick(lambda i: self.shadow[i].ndim in (1, 2) and self.shadow[i].shape[0] == n)
            if b is None:
                return False
            return self.emit(("matmul", a, b), np.matmul(x, self.shadow[b]), [a, b]) >= 0
        if kind == "shape":
            op = rng.choice(["clone", "reshape", "reshape", "t", "strided"])
            if op == "strided":  # a strided view of a matrix, then reshaped
                p = self.pick(lambda i: self.shadow[i].ndim == 2 and
                              min(self.shadow[i].shape) >= 2)
                if p is None:
                    return False
                m = self.shadow[p]
                r, c = m.shape
                key = rng.choice([None, (slice(None), rng.randrange(c)),
                                  (slice(None), slice(1, None)), (slice(None), slice(0, c - 1)),
                                  (slice(1, None), slice(1, None))])
                if key is None:
                    v = self.emit(("t", p), m.T, [p])
                else:
                    v = self.emit(("index", p, key), m[key], [p])
                x = self.shadow[v]
                if rng.random() < 0.3:  # an elementwise op keeps the layout
                    if float(np.max(np.abs(x))) <= 3:
                        v = self.emit(("exp", v), np.exp(x), [v])
                    else:
                        v = self.emit(("neg", v), -x, [v])
                    x = self.shadow[v]
                shape = rng.choice(_reshape_targets(x.size) + [x.shape, x.shape])
                return self.emit(("reshape", v, shape), x.reshape(shape), [v]) >= 0
            if op == "clone":
                return self.emit(("clone", a), x.copy(), [a]) >= 0
            if op == "t":
                return x.ndim <= 2 and self.emit(("t", a), x.T, [a]) >= 0
            if rng.random() < 0.6:  # prefer strided inputs: _reshape_alias, clone + _unsafe_view
                p = self.pick(lambda i: not self.shadow[i].flags.c_contiguous)
                if p is not None:
                    a, x = p, self.shadow[p]
            shape = rng.choice(_reshape_targets(x.size))
            return self.emit(("reshape", a, shape), x.reshape(shape), [a]) >= 0
        if kind == "reduce":
            op = rng.choice(["sum", "sum_dim", "mean", "mean_dim"])
            if op in ("sum", "mean"):
                r = x.sum() if op == "sum" else x.mean()
                return self.emit((op, a), np.asarray(r), [a]) >= 0
            nd = max(x.ndim, 1)
            d = rng.randrange(-nd, nd)
            k = rng.random() < 0.4
            axis = d if x.ndim else None
            r = x.sum(axis=axis, keepdims=k) if op == "sum_dim" else x.mean(axis=axis, keepdims=k)
            return self.emit((op, a, d, k), np.asarray(r), [a]) >= 0
        if kind == "index":
            if x.ndim == 0:
                return False
            key = _random_key(rng, x.shape)
            return self.emit(("index", a, key), np.asarray(x[key]), [a]) >= 0
        # mix: a custom Function with several same-shaped inputs, leaves preferred
        k = rng.randint(3, 7)
        same = [i for i in range(len(self.shadow))
                if self.selectable[i] and self.shadow[i].shape == x.shape]
        leaves = [i for i in same if self.is_leaf[i] and self.grad[i]]
        ops = [a] + [rng.choice(leaves if leaves and rng.random() < 0.8 else same)
                     for _ in range(k - 1)]
        r = sum(self.shadow[i] * float(j + 1) for j, i in enumerate(ops))
        return self.emit(("mix", tuple(ops)), np.asarray(r), ops) >= 0


def _reshape_targets(n: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [(n,), (1, n), (n, 1), (-1,)]
    for p in range(2, n):
        if n % p == 0:
            out += [(p, n // p), (p, -1)]
    if n == 1:
        out += [(), (1, 1, 1)]
    return out


def _random_key(rng: random.Random, shape: tuple[int, ...]) -> Any:
    def one(n: int) -> Any:
        r = rng.random()
        if r < 0.45:
            return rng.randrange(-n, n)
        if r < 0.55:
            return slice(None)
        start = rng.choice([None, 0, *range(0, n)])
        lo = 0 if start is None else start
        stop = rng.choice([None, n, n + 2, *range(lo + 1, n + 1)])
        return slice(start, stop)

    if len(shape) == 1 or rng.random() < 0.4:
        return one(shape[0])
    return tuple(one(n) for n in shape[:rng.randint(1, len(shape))])


def gen_program(seed: int, *, ties: bool = False) -> list[tuple[Any, ...]]:
    """A random graph: leaves, 3..14 ops with shared subexpressions, a scalar loss.

    ``ties``: more leaves, more multi-input custom Functions, and ``autograd.backward``
    with several leaves among the roots."""
    g = _Gen(seed)
    rng = g.rng
    n_leaves = rng.randint(3, 7) if ties else rng.randint(2, 6)
    shape0 = rng.choice(SHAPES)
    for i in range(n_leaves):
        same = 0.9 if ties else 0.6 if i < 2 else 0.0
        shape = shape0 if rng.random() < same else rng.choice(SHAPES)
        g.add_leaf(shape, requires_grad=rng.random() < 0.85 or i == 0)
    unused = []
    for _ in range(rng.randint(2, 4) if ties else rng.randint(0, 2)):  # never used by an op
        unused.append(g.add_leaf(rng.choice(SHAPES), requires_grad=True, selectable=False))
    # Start from x * y + z on leaves: a node whose leaf inputs are ready together.
    lv = [i for i in range(len(g.shadow)) if g.selectable[i]]
    if len(lv) >= 3 and rng.random() < 0.5:
        a, b, c = rng.sample(lv, 3)
        try:
            m = g.emit(("mul", a, b), g.shadow[a] * g.shadow[b], [a, b])
            g.emit(("add", m, c), g.shadow[m] + g.shadow[c], [m, c])
        except ValueError:
            pass
    n_ops = rng.randint(3, 14)
    done = tries = 0
    while done < n_ops and tries < 200:
        tries += 1
        done += bool(g.try_op("mix" if ties and rng.random() < 0.25 else None))

    # the loss: a few results (unused ones first) reduced to scalars, summed
    results = [i for i in range(len(g.shadow)) if not g.is_leaf[i] and g.grad[i]]
    results.sort(key=lambda i: (g.uses[i] > 0, -i))
    chosen = results[:rng.randint(1, 4)]
    if not chosen:  # nothing requires grad: use the first leaf
        chosen = [0]
    parts = []
    for i in chosen:
        how = "id" if g.shadow[i].ndim == 0 and rng.random() < 0.7 else rng.choice(["sum", "mean"])
        parts.append((i, how))
    g.prog.append(("loss", tuple(parts)))
    g._push(np.asarray(0.0), True)

    if ties or rng.random() < 0.15:
        # autograd.backward with extra roots: leaves (their accumulators are pushed
        # together by the GraphRoot) and non-scalar results with explicit gradients
        leaves = [i for i in range(len(g.shadow)) if g.is_leaf[i] and g.grad[i]]
        extra = rng.sample(leaves, min(len(leaves), rng.randint(1, 5)))
        if ties:  # the unused leaves: ready as soon as the GraphRoot runs
            extra += [i for i in unused if i not in extra]
        others = [i for i in results if i not in chosen]
        extra += rng.sample(others, min(len(others), rng.randint(0, 2)))
        rng.shuffle(extra)
        for i in extra:
            shape = g.shadow[i].shape
            grad = np.array([round(rng.uniform(-1, 1), 3) for _ in range(int(np.prod(shape)))])
            g.prog.append(("root", i, grad.reshape(shape).tolist()))
    return g.prog


# --- 1. random graphs -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(N_RANDOM_GRAPHS))
def test_random_graph_parity(seed: int) -> None:
    check_parity(gen_program(seed))


@pytest.mark.parametrize("seed", range(N_TIE_GRAPHS))
def test_random_graph_parity_ties(seed: int) -> None:
    check_parity(gen_program(10_000 + seed, ties=True))


def test_generator_covers_every_op() -> None:
    """The random programs exercise every op, both matmul ranks and several
    AccumulateGrads ready at once."""
    seen: set[str] = set()
    keys: set[str] = set()
    mm: set[tuple[int, int]] = set()
    for seed in range(N_RANDOM_GRAPHS):
        prog = gen_program(seed)
        shapes: list[tuple[int, ...]] = []
        for ins in prog:
            seen.add(ins[0])
            if ins[0] == "index":
                keys.add(type(ins[2]).__name__)
            if ins[0] == "leaf":
                shapes.append(np.asarray(ins[1]).shape)
            elif ins[0] == "matmul":
                mm.add((len(shapes[ins[1]]), len(shapes[ins[2]])))
            if ins[0] != "leaf":
                shapes.append(_shape_after(ins, shapes))
    assert set(UNARY) | set(BINARY) | {"leaf", "loss", "root", "mix"} <= seen
    assert {"int", "slice", "tuple"} <= keys
    assert {(1, 1), (1, 2), (2, 1), (2, 2)} <= mm


def _longest_accumulate_run(record: dict[str, Any]) -> int:
    """The longest stretch of AccumulateGrads run back to back.  An AccumulateGrad
    pushes nothing, so a stretch of k means k of them were in the queue at once."""
    best = run = 0
    for label in record["order"]:
        run = run + 1 if record["structure"][label][0] == "AccumulateGrad" else 0
        best = max(best, run)
    return best


def test_graphs_include_wide_ties() -> None:
    """Many graphs have 3 or more AccumulateGrads in the ready queue at once: ties that
    the libstdc++ heap breaks in an order that is neither FIFO nor LIFO."""
    wide = 0
    for seed in range(N_TIE_GRAPHS):
        rec = in_fresh_thread(run_and_trace, engine, gen_program(10_000 + seed, ties=True))
        wide += _longest_accumulate_run(rec) >= 3
    assert wide >= N_TIE_GRAPHS // 2, wide
    rec = in_fresh_thread(run_and_trace, engine, HAND["mix7"])
    assert _longest_accumulate_run(rec) == 7


def _shape_after(ins: tuple[Any, ...], shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    op = ins[0]
    if op in ("loss", "root"):
        return ()
    if op == "mix":
        return shapes[ins[1][0]]
    a = np.zeros(shapes[ins[1]])
    if op in BINARY:
        b = np.zeros(shapes[ins[2]])
        return np.matmul(a, b).shape if op == "matmul" else np.broadcast_shapes(a.shape, b.shape)
    if op == "reshape":
        return a.reshape(ins[2]).shape
    if op == "t":
        return a.T.shape
    if op in ("sum", "mean"):
        return ()
    if op in ("sum_dim", "mean_dim"):
        return np.sum(a, axis=ins[2] if a.ndim else None, keepdims=ins[3]).shape
    if op == "index":
        return np.asarray(a[ins[2]]).shape
    return a.shape


# --- hand-written graphs: ties, views and layouts ------------------------------------------------
HAND: dict[str, list[tuple[Any, ...]]] = {
    # x*y + z summed: z's accumulator first, then x's and y's together
    "xy_plus_z": [("leaf", [1.0, 2.0], True), ("leaf", [3.0, -1.0], True),
                  ("leaf", [0.5, 0.25], True), ("mul", 0, 1), ("add", 3, 2),
                  ("loss", ((4, "sum"),))],
    # seven leaves into one custom Function: a seven-way tie in the heap
    "mix7": [*[("leaf", [float(i), 1.0 - i], True) for i in range(7)],
             ("mix", (0, 1, 2, 3, 4, 5, 6)), ("loss", ((7, "sum"),))],
    # a leaf used twice by the same node and elsewhere
    "mix_repeat": [("leaf", [1.0, 2.0], True), ("leaf", [3.0, 4.0], True),
                   ("leaf", [5.0, 6.0], True), ("mix", (0, 1, 0, 2, 1)), ("mul", 3, 0),
                   ("loss", ((4, "sum"), (3, "mean")))],
    # autograd.backward on six leaves plus a loss: the GraphRoot pushes them all
    "root_leaves": [*[("leaf", [float(i) + 0.5], True) for i in range(6)],
                    ("mul", 0, 1), ("loss", ((6, "sum"),)),
                    *[("root", i, [0.1 * (i + 1)]) for i in (5, 2, 3, 0, 4, 1)]],
    # transposes, strided views and reshapes: view / _reshape_alias / clone + _unsafe_view
    "layouts": [("leaf", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], True),
                ("leaf", [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]], True),
                ("t", 0), ("reshape", 2, (6,)), ("exp", 2), ("reshape", 4, (2, 3)),
                ("add", 2, 1), ("reshape", 6, (6,)), ("add", 1, 2), ("reshape", 8, (6,)),
                ("index", 0, (slice(None), 1)), ("reshape", 10, (2, 1)),
                ("index", 0, (slice(None), slice(1, 3))), ("reshape", 12, (4,)),
                ("reshape", 12, (2, 2)), ("clone", 2), ("reshape", 15, (3, 2)),
                ("index", 2, 0), ("reshape", 17, (1, 2)), ("index", 0, (slice(None),)),
                ("index", 0, slice(None)), ("index", 0, (slice(0, 9), 1)),
                ("index", 0, (slice(-2, None), 1)),
                ("loss", tuple((i, "sum") for i in (3, 5, 7, 9, 11, 13, 14, 16, 18, 19, 20,
                                                    21, 22)))],
    # 1-D @ 2-D: unsqueeze, mm, squeeze
    "vec_mat": [("leaf", [1.0, 2.0], True), ("leaf", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], True),
                ("matmul", 0, 1), ("matmul", 1, 2), ("loss", ((3, "sum"),))],
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_written_parity(name: str) -> None:
    check_parity(HAND[name])


# --- strides: which node reshape records depends on them ------------------------------------
def _strides(t: Any) -> tuple[int, ...]:
    if isinstance(t, torch.Tensor):
        return tuple(t.stride())
    return tuple(s // t.data.itemsize for s in t.data.strides)


_LAYOUT_BINARY: list[Callable[[Any, Any], Any]] = [
    lambda a, b: a + b, lambda a, b: b * a, lambda a, b: a - 2, lambda a, b: 2 - a,
    lambda a, b: a / (b * b + 1), lambda a, b: 2 ** a, lambda a, b: a ** b.sigmoid()]
_LAYOUT_UNARY: list[Callable[[Any], Any]] = [
    lambda a: a.exp(), lambda a: -a, lambda a: a.clone(), lambda a: a.relu(),
    lambda a: a ** 2, lambda a: a.tanh(), lambda a: 1 / (a * a + 1)]


def _layout_op(k: int, a: Any, b: Any, rng: random.Random) -> Any:
    if k == 0:
        return a.t()
    if k == 1:
        return a[(slice(None),) * (a.ndim - 1) + (slice(rng.randrange(a.shape[-1]), None),)]
    if k == 2:
        return a[:, rng.randrange(a.shape[1])]
    if k == 3:
        return rng.choice(_LAYOUT_BINARY)(a, b)
    if k == 4:
        return rng.choice(_LAYOUT_UNARY)(a)
    if k == 5:
        n = int(np.prod(a.shape))
        shapes = [(n,), (1, n), (n, 1), tuple(a.shape)]
        shapes += [(p, n // p) for p in (2, 3) if n % p == 0]
        return a.reshape(rng.choice(shapes))
    return a.sum(rng.randrange(max(a.ndim, 1)), keepdim=rng.random() < 0.5)


def _layout_run(mod: Any, seed: int) -> list[Any]:
    """Random chains of views (t, slices, select), elementwise ops, clone, reshape and
    reductions; per result: shape, strides and the node recorded (or the error)."""
    rng = random.Random(seed)
    vals = [_new_tensor(mod, np.arange(float(np.prod(s))).reshape(s).tolist(), True)
            for s in [(2, 3), (3, 2), (3, 3), (1, 3), (3, 1), (3,), (2,), (), (2, 1, 3)]]
    out: list[Any] = []
    for _ in range(8):
        a, b = rng.choice(vals), rng.choice(vals)
        k = rng.randrange(7)
        if not (a.ndim <= 2, a.ndim >= 1, a.ndim >= 2, True, True, True, True)[k]:
            continue
        try:
            v = _layout_op(k, a, b, rng)
        except RuntimeError as e:
            out.append(("error", str(e)))
            continue
        vals.append(v)
        out.append((tuple(v.shape), _strides(v), _node_name(v.grad_fn)))
    return out


@pytest.mark.parametrize("chunk", range(8))
def test_layouts_match_torch(chunk: int) -> None:
    """Shapes, strides and recorded nodes match torch's along random chains of ops:
    elementwise outputs follow TensorIterator's layout rules, views keep strides,
    reshape picks view / _reshape_alias / clone + _unsafe_view as torch does."""
    for seed in range(chunk * 50, chunk * 50 + 50):
        assert _layout_run(engine, seed) == _layout_run(torch, seed), f"seed {seed}"


# --- 2. the seeds' worked example -------------------------------------------------------------
X0 = [[1.0]]
W1, B1 = [[0.7]], [-0.2]  # Linear1 (1 -> 1); x = 0.5 > 0, so the ReLU passes it
W2, B2 = [[-1.3]], [0.4]  # Linear2 (1 -> 1)


def _worked_example(mod: Any, explicit: bool) -> dict[str, Any]:
    inp = _new_tensor(mod, X0, True)
    w1, b1 = _new_tensor(mod, W1, True), _new_tensor(mod, B1, True)
    w2, b2 = _new_tensor(mod, W2, True), _new_tensor(mod, B2, True)
    if explicit:
        x = inp @ w1.t() + b1
        z = x.relu()
        y = x @ w2.t() + b2
    else:
        linear = engine.functional.linear if mod is engine else torch.nn.functional.linear
        x = linear(inp, w1, b1)
        z = x.relu()
        y = linear(x, w2, b2)
    out = z + y
    output = out[0]
    return {"leaves": [inp, w1, b1, w2, b2], "x": x, "z": z, "y": y, "out": out,
            "output": output}


def _trace_example(mod: Any, explicit: bool) -> dict[str, Any]:
    ex = _worked_example(mod, explicit)
    nodes, structure = walk([ex["output"].grad_fn])
    log: list[int] = []
    for label, node in enumerate(nodes):
        node.register_prehook(lambda grads, label=label: log.append(label))
    leaf_acc = {}
    for i, leaf in enumerate(ex["leaves"]):
        acc = _root_node(leaf)
        leaf_acc[id(acc)] = f"Acc[{['input', 'w1', 'b1', 'w2', 'b2'][i]}]"
    names = []
    for n in nodes:
        nm = _node_name(n)
        names.append(leaf_acc.get(id(n), nm))
    ex["output"].backward()  # a one-element tensor: the seeds' ``output.backward()``
    return {"structure": structure, "order": [names[i] for i in log], "names": names,
            "log": log, "nodes": nodes, "ex": ex,
            "grads": [_to_np(t.grad) for t in ex["leaves"]]}


def _stretches(order: list[str]) -> list[tuple[str, set[str]]]:
    """Interior nodes in run order (torch's AddmmBackward0 read as one linear, its
    TBackward0 dropped), each with the accumulators that ran before the next one."""
    out: list[tuple[str, set[str]]] = []
    for n in order:
        if n == "TBackward0":
            continue
        if n.startswith("Acc["):
            out[-1][1].add(n)
        else:
            out.append(("Linear" if n in ("LinearBackward0", "AddmmBackward0") else n, set()))
    return out


def test_worked_example_linear_one_node() -> None:
    """``engine.functional.linear`` is one LinearBackward0 node; torch records
    TBackward0 + AddmmBackward0.  Gradients match; the interior nodes both have
    run in the same order, and each leaf's accumulator in the same stretch; within
    a stretch the accumulators follow each library's edge order, which differs."""
    obs = engine.ListObserver()
    eng = engine.get_default_engine()
    eng.add_observer(obs)
    try:
        ours = in_fresh_thread(_trace_example, engine, False)
    finally:
        eng.remove_observer(obs)
    ref = in_fresh_thread(_trace_example, torch, False)

    for i, (a, b) in enumerate(zip(ours["grads"], ref["grads"])):
        _close(a, b, f"grad of leaf {i}")
    assert ours["order"].count("LinearBackward0") == 2
    assert {"TBackward0", "AddmmBackward0"} <= set(ref["order"])
    common = {"ReluBackward0", "AddBackward0", "SelectBackward0", "Acc[input]", "Acc[w1]",
              "Acc[b1]", "Acc[w2]", "Acc[b2]"}
    assert common <= set(ours["order"]) and common <= set(ref["order"])
    # every node ran exactly once
    assert sorted(ours["order"]) == sorted(ours["names"])
    assert sorted(ref["order"]) == sorted(ref["names"])
    # The nodes both have run in the same order, each leaf's accumulator in the same
    # stretch (after the same linear, before the next interior node) ...
    assert _stretches(ours["order"]) == _stretches(ref["order"]) == [
        ("SelectBackward0", set()), ("AddBackward0", set()),
        ("Linear", {"Acc[w2]", "Acc[b2]"}), ("ReluBackward0", set()),
        ("Linear", {"Acc[input]", "Acc[w1]", "Acc[b1]"})]
    # ... but within a stretch the accumulators run in edge order, and the edges
    # differ: ours (input, weight, bias); torch's addmm (bias, input, TBackward0(weight)),
    # the weight's accumulator waiting behind TBackward0.
    assert [n for n in ours["order"] if n.startswith("Acc")] == [
        "Acc[w2]", "Acc[b2]", "Acc[input]", "Acc[w1]", "Acc[b1]"]
    assert [n for n in ref["order"] if n.startswith("Acc")] == [
        "Acc[b2]", "Acc[w2]", "Acc[b1]", "Acc[input]", "Acc[w1]"]

    # The narrative: Linear1's buffer (the gradient of x) waits in not_ready until
    # both ReLU and Linear2 have delivered; then it runs, and the leaves after it.
    ex = ours["ex"]
    lin1, relu, lin2 = ex["x"].grad_fn, ex["z"].grad_fn, ex["y"].grad_fn
    assert lin1.name() == lin2.name() == "LinearBackward0"
    ids = {eng.node_id(n): k for n, k in ((lin1, "lin1"), (relu, "relu"), (lin2, "lin2"))}
    trace = []
    for ev in obs.events:
        k = ids.get(ev.node)
        if ev.kind in ("not_ready_insert", "not_ready_remove") and k is not None:
            trace.append((ev.kind, k))
        elif ev.kind in ("node_start", "node_end") and k is not None:
            trace.append((ev.kind, k))
        elif ev.kind == "buffer_accumulate" and k == "lin1":
            trace.append(("deliver_to_lin1", ids[ev.data["from_node"]]))
    # Linear2 (created after the ReLU: the higher sequence number) runs first.
    assert trace == [
        ("node_start", "lin2"), ("node_end", "lin2"), ("deliver_to_lin1", "lin2"),
        ("not_ready_insert", "lin1"),
        ("node_start", "relu"), ("node_end", "relu"), ("deliver_to_lin1", "relu"),
        ("not_ready_remove", "lin1"),
        ("node_start", "lin1"), ("node_end", "lin1"),
    ], trace
    # Linear1 runs after both of its consumers, and before its own leaves
    order = ours["order"]
    pos = [i for i, n in enumerate(order) if n == "LinearBackward0"]
    assert order.index("ReluBackward0") < pos[1]
    assert max(order.index("Acc[input]"), order.index("Acc[w1]"), order.index("Acc[b1]")) \
        > pos[1]
    assert not any(ev.kind == "not_ready_insert" and ev.node not in ids for ev in obs.events)


def test_worked_example_explicit_exact_parity() -> None:
    """The same network written ``x @ w.t() + b``: identical graphs, order and grads."""
    ours = in_fresh_thread(_trace_example, engine, True)
    ref = in_fresh_thread(_trace_example, torch, True)
    assert ours["structure"] == ref["structure"]
    assert ours["names"] == ref["names"]
    assert ours["order"] == ref["order"]
    for i, (a, b) in enumerate(zip(ours["grads"], ref["grads"])):
        _close(a, b, f"grad of leaf {i}")
    # x's AddBackward0 waits for both of its consumers, ReLU and Linear2's mm
    nodes, order = ours["nodes"], ours["order"]
    ex = ours["ex"]
    x_add, relu = ex["x"].grad_fn, ex["z"].grad_fn
    y_mm = ex["y"].grad_fn.next_functions[0][0]
    assert (x_add.name(), relu.name(), y_mm.name()) == ("AddBackward0", "ReluBackward0",
                                                         "MmBackward0")
    labels = {id(n): i for i, n in enumerate(nodes)}
    seq = [labels[id(n)] for n in (relu, y_mm, x_add)]
    run_pos = {lab: k for k, lab in enumerate(ours["log"])}
    assert run_pos[seq[2]] > max(run_pos[seq[0]], run_pos[seq[1]]), order
