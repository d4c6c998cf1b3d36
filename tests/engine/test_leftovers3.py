"""Leftovers of the torch bridge, round 3 (plain torch, each test a second or two):

2. A nested backward's recomputed nodes (a reentrant checkpoint's) stayed in the capture
   Registry, claimed for their module, until the next capture: with them every block's
   recomputed activations (their saved tensors), so a checkpointed model held all its
   blocks' at once by the end of its backward, where PyTorch holds one block's at a time.
   Now the claims go when the nested backward ends (``recompute.graph_done``), unless it
   retains its graph; the nodes' ``node_meta`` keeps their modules.
3. A sparse gradient of more than ``SPARSE_SHOWN`` elements (4,194,304: a 2,000,000 x 64
   ``nn.Embedding(sparse=True)``'s) was refused, the views reading a dense copy.  Now it
   is never densified (``convert.SparseGrad``): its summary (norm, first values, min, max,
   nnz) is computed from its values and indices; here the limit is lowered to make a
   small one "big", its summary checked against the dense gradient's.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui import engine  # noqa: E402
from autograd_tui.engine.events import summarize, summary  # noqa: E402
from autograd_tui.engine.torch_bridge import capture, convert, from_torch  # noqa: E402
from autograd_tui.words import format_event  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_thread_left")]


class Block(torch.nn.Module):
    """A Linear and a Tanh; each call's activation noted by a weak reference."""

    def __init__(self, refs: list[Any]) -> None:
        super().__init__()
        self.fc, self.act = torch.nn.Linear(8, 8), torch.nn.Tanh()
        self.refs = refs

    def forward(self, x: Any) -> Any:
        h = self.fc(x)
        self.refs.append(weakref.ref(h))  # saved by the product below
        return self.act(h) * h


def checkpointed_backward(retain: bool) -> tuple[list[Any], list[Any], Any]:
    """Two reentrant-checkpointed blocks' backward through our engine, observed: (the weak
    references to each block's recomputed activation, the events, the model)."""
    from torch.utils.checkpoint import checkpoint

    refs: list[Any] = []
    model = torch.nn.Sequential(Block(refs), Block(refs))
    x = torch.randn(4, 8, requires_grad=True)
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with capture():
            y = x
            for b in model:
                y = checkpoint(b, y, use_reentrant=True)
            loss = y.sum()
        del refs[:]  # the forward's (under no_grad): only the recompute's are watched
        with engine.use_engine(eng):
            from_torch(loss, None, None).backward(retain)
    finally:
        eng.close()
    return refs, obs.events, model


def test_a_checkpoints_recomputed_graph_is_freed_after_its_backward() -> None:
    refs, events, model = checkpointed_backward(False)
    del model
    gc.collect()
    assert len(refs) == 2  # one recompute per block, each a nested backward
    assert [r() is None for r in refs] == [True, True]
    # the views keep the recomputed nodes' modules: their node_meta, read as it began
    nested = {e.graph_task for e in events if e.kind == "graph_task_created"} - {1}
    modules = {e.module for e in events if e.kind == "node_meta" and e.graph_task in nested}
    assert {"model.0.fc", "model.0.act", "model.1.fc", "model.1.act"} <= modules, modules


def test_a_sparse_gradient_too_big_to_densify_is_summarised_from_its_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "SPARSE_SHOWN", 16)  # 20 x 4 = 80 elements: "big"
    torch.manual_seed(0)
    emb, lin = torch.nn.Embedding(20, 4, sparse=True), torch.nn.Linear(4, 1)
    ids = torch.tensor([[0, 5, 3], [19, 5, 7]])  # row 5 twice: duplicate indices add
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with capture():
            loss = lin(emb(ids)).sum()
        with engine.use_engine(eng):
            from_torch(loss, None, None).backward()
    finally:
        eng.close()
    got = emb.weight.grad
    emb.weight.grad = None
    lin(emb(ids)).sum().backward()  # plain PyTorch's
    want = emb.weight.grad
    assert got.is_sparse and torch.equal(got.to_dense(), want.to_dense())
    dense = want.to_dense()
    end = next(e for e in obs.events if e.kind == "node_end" and e.name == "EmbeddingBackward0")
    s = summary(end.outputs)[0]
    expect = summarize(dense.numpy())
    assert (s["shape"], s["dtype"], s["values"]) == (expect["shape"], expect["dtype"],
                                                     expect["values"]), s
    assert s["norm"] == pytest.approx(expect["norm"], rel=1e-6)
    assert (s["nnz"], s["min"], s["max"]) == (5, float(dense.min()), float(dense.max()))
    # the trace and the app word it so (words.short_value)
    lo, hi = float(dense.min()), float(dense.max())
    assert f"(sparse: nnz 5, min {lo:.4g}, max {hi:.4g})" in format_event(end), \
        format_event(end)
    # the leaf's .grad, as the views read it: the same summary, and no dense copy made
    shown = convert.to_display(got)
    assert type(shown) is convert.SparseGrad and shown.data.strides == (0, 0)
    assert summary(engine.events.summary_raw(shown)) == s
