"""Every op in ``engine.ops.table.OPS`` against PyTorch: the forward values and dtype,
the backward graph's node names (every node reachable from the output, in
``next_functions`` order) and the gradients, in float32 and float64.  Skips if PyTorch
is not installed (CI installs it)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine
from autograd_tui.engine.ops.table import OPS, OpRow

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the parity checks "
                                            "compare with it (pip install -e .[torch])")

pytestmark = pytest.mark.timeout(120)

DTYPES = {"float32": (np.float32, torch.float32, 2e-5), "float64": (np.float64, torch.float64,
                                                                    1e-11)}


def _values(row: OpRow) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, row.name)))
    return [rng.uniform(0.5, 1.5, size=s) for s in row.shapes]


def _graph_names(out: Any) -> list[str]:
    """Node names breadth first from the output's grad_fn, edges in order (None for an
    invalid edge), each node once."""
    names: list[str] = []
    seen: set[int] = set()
    queue: deque[Any] = deque([out.grad_fn])
    while queue:
        node = queue.popleft()
        if node is None:
            names.append("None")
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name().removeprefix("torch::autograd::"))
        queue.extend(fn for fn, _ in node.next_functions)
    return names


def _host(x: Any) -> np.ndarray:
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _run(row: OpRow, dtype: str) -> tuple[dict[str, Any], dict[str, Any]]:
    np_dt, torch_dt, _ = DTYPES[dtype]
    values = _values(row)
    results = []
    for m, functional, make in (
        (engine, engine.functional,
         lambda v: engine.tensor(v.astype(np_dt), requires_grad=True)),
        (torch, torch.nn.functional,
         lambda v: torch.tensor(v, dtype=torch_dt, requires_grad=True)),
    ):
        leaves = [make(v) for v in values]
        out = row.fn(m, functional, *leaves)
        names = _graph_names(out)
        grads = m.autograd.grad(out.sum(), leaves, allow_unused=True)
        results.append({"out": out, "names": names, "grads": grads})
    return results[0], results[1]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("row", OPS, ids=[r.name for r in OPS])
def test_op_matches_pytorch(row: OpRow, dtype: str) -> None:
    ours, theirs = _run(row, dtype)
    tol = DTYPES[dtype][2]
    o, t = ours["out"], theirs["out"]
    assert tuple(o.shape) == tuple(t.shape), f"{row.name}: shape"
    assert np.dtype(o.dtype).name == str(t.dtype).removeprefix("torch."), f"{row.name}: dtype"
    np.testing.assert_allclose(_host(o), _host(t), rtol=tol, atol=tol,
                               err_msg=f"{row.name}: forward")
    if not row.departure:
        assert ours["names"] == theirs["names"], f"{row.name}: backward graph"
    for name in row.nodes:  # the docs' nodes column
        assert name in ours["names"] and name in theirs["names"] or row.departure, name
    for i, (g, tg) in enumerate(zip(ours["grads"], theirs["grads"])):
        assert (g is None) == (tg is None), f"{row.name}: gradient {i} defined"
        if g is not None:
            assert np.dtype(g.dtype).name == str(tg.dtype).removeprefix("torch.")
            np.testing.assert_allclose(_host(g), _host(tg), rtol=tol, atol=tol,
                                       err_msg=f"{row.name}: gradient {i}")


def test_the_table_covers_every_recorded_node_class() -> None:
    """Every backward node the ops modules define is recorded by some row (forward
    graph), but for the double-backward-only and internal ones."""
    from autograd_tui.engine import ops
    from autograd_tui.engine.graph import Node
    from autograd_tui.engine.ops.base import OpNode

    defined = {v.__name__ for v in vars(ops).values()
               if isinstance(v, type) and issubclass(v, Node) and v not in (Node, OpNode)}
    seen: set[str] = set()
    for row in OPS:
        leaves = [engine.tensor(v, requires_grad=True) for v in _values(row)]
        seen.update(_graph_names(row.fn(engine, engine.functional, *leaves)))
    double_only = {"SelectBackwardBackward0", "SliceBackwardBackward0",
                   "IndexPutImplBackward0", "SqueezeBackward4", "ReshapeAliasBackward0",
                   "UnsafeViewBackward0", "AliasBackward0"}
    missing = defined - seen - double_only
    assert not missing, f"rows to add to ops.table.OPS: {sorted(missing)}"


def test_equality_operators_compare_element_by_element_as_torch_does() -> None:
    values, other = [1.0, 2.0, 3.0], [1.0, 0.0, 3.0]
    a, b = engine.tensor(values), engine.tensor(other)
    ta, tb = torch.tensor(values), torch.tensor(other)
    for ours, theirs in ((a == b, ta == tb), (a != b, ta != tb), (a == 2.0, ta == 2.0),
                         (a != 2.0, ta != 2.0)):
        assert ours.numpy().tolist() == theirs.tolist()
    assert (a == None) is (ta == None) is False  # noqa: E711 - what torch answers
    assert {a: 1}[a] == 1 and a in [a]  # still hashed by identity, as torch's tensors
