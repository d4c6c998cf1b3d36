"""The bridge's fast path keeps PyTorch's semantics (engine/torch_bridge/convert.py, hooks.py).

A gradient a PyTorch node made reaches the next PyTorch node as the torch tensor itself
(no NumPy round trip); its summary is made once and made again when an in-place op
changed it; the per-node events built field by field are the events ``make_event``
builds; a node's hook dicts are found without registering anything.  Skipped without
torch.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

from autograd_tui import engine  # noqa: E402
from autograd_tui.engine.events import make_event, summary  # noqa: E402
from autograd_tui.engine.torch_bridge import capture, from_torch  # noqa: E402
from autograd_tui.engine.torch_bridge.hooks import node_hook_dicts, probing  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]


def run(graph) -> list[engine.Event]:
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with engine.use_engine(eng):
            graph.backward()
    finally:
        eng.close()
    return obs.events


class Spy:
    """A PyTorch node's stand-in: records what it was called with and returned."""

    def __init__(self, fn) -> None:
        self.fn, self.args, self.outs = fn, [], []

    def __getattr__(self, name):  # the rest of the node (its meta is read lazily)
        return getattr(self.fn, name)

    def __call__(self, *args):
        out = self.fn(*args)
        self.args.append(args)
        self.outs.append(out)
        return out


def test_a_gradient_reaches_the_next_torch_node_as_the_same_tensor():
    x = torch.randn(3, 4, requires_grad=True)
    with capture():
        y = (x.exp() * 2).sum()
    g = from_torch(y)
    mul_fn = y.grad_fn.next_functions[0][0]
    mul, exp = g.node(mul_fn), g.node(mul_fn.next_functions[0][0])
    assert exp.name() == "ExpBackward0"
    mul.fn, exp.fn = Spy(mul.fn), Spy(exp.fn)
    run(g)
    made = mul.fn.outs[0]
    made = made[0] if isinstance(made, tuple) else made
    assert exp.fn.args[0][0] is made  # no copy, no from_numpy view: the tensor itself
    assert torch.equal(x.grad, 2 * x.detach().exp())


def test_a_summary_is_made_again_after_an_in_place_change():
    # AddBackward0 passes the one tensor it got to both of its inputs; a pre-hook of the
    # node that runs first (b's, the later sequence_nr) scales it in place: the other
    # node then gets (and shows) the scaled values, as under PyTorch's engine.
    def scale(grad_outputs):
        grad_outputs[0].mul_(10)  # in place: returns None

    def graph():
        x = torch.ones(3, requires_grad=True)
        a, b = x * 2, x * 3
        b.grad_fn.register_prehook(scale)
        return x, a, a + b

    x_t, _, y_t = graph()
    y_t.backward(torch.ones(3))
    with capture():
        x, a, y = graph()
    g = from_torch(y, torch.ones(3))
    events = run(g)
    assert torch.equal(x.grad, x_t.grad) and x.grad.tolist() == [50.0] * 3
    ids = {n.name: n.id for e in events if e.kind == "dependencies_computed" for n in e.nodes}
    starts = [e for e in events if e.kind == "node_start" and e.node != ids["AddBackward0"]
              and e.data["name"] == "MulBackward0"]
    assert len(starts) == 2
    first, second = (summary(e.inputs)[0]["values"] for e in starts)
    assert first == [1.0] * 3  # before the hook ran
    assert second == [10.0] * 3  # the same tensor, changed in place since: summarised anew


def test_the_fast_events_are_make_events():
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 2, requires_grad=True)
    with capture():
        h = (x @ w).tanh()
        loss = (h * h).sum() + h.mean()
    events = run(from_torch(loss))
    kinds = {e.kind for e in events}
    assert {"push", "pop", "node_start", "node_end", "buffer_accumulate",
            "dependency_decrement", "outstanding_decrement", "not_ready_insert",
            "not_ready_remove"} <= kinds
    enc = msgspec.json.encode
    for e in events:
        again = make_event(e.seq, e.kind, e.thread, e.graph_task, e.node, e.queue, e.data)
        assert type(again) is type(e) and enc(again) == enc(e), e.kind
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_hook_dicts_are_found_without_registering_a_hook():
    x = torch.randn(3, requires_grad=True)
    y = (x * 2).sum()
    fn = y.grad_fn
    assert node_hook_dicts(fn) == ({}, {})
    assert node_hook_dicts(fn) == ({}, {})  # no probe left in a dict
    calls: list[str] = []
    fn.register_prehook(lambda go: calls.append("pre"))
    with probing():  # another thread's registration meanwhile is a real one
        t = threading.Thread(target=lambda: fn.register_hook(
            lambda gi, go: calls.append("post")))
        t.start()
        t.join(10)
        pre, post = node_hook_dicts(fn)
    assert len(pre) == 1 and len(post) == 1
    assert node_hook_dicts(fn) == (pre, post)
    y.backward()
    assert calls == ["pre", "post"]
