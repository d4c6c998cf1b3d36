"""The bridge's cheaper node_meta and gradient conversion say what the plain code said
(engine/torch_bridge/saved.py, capture.py, convert.py; engine.py's node_meta fields).

Each fast path is checked against a reference written out here the plain way (the code
it replaced): the saved-tensor summaries (their text cached per shape and dtype), a
node's meta (its sequence_nr read once), a node's outputs checked and converted in one
pass, a ``TorchGrad`` built without ``__init__``, and a ``node_meta`` dict that leaves
out an optional field.  Skipped without torch.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

from autograd_tui import engine  # noqa: E402
from autograd_tui.engine.torch_bridge import capture, from_torch  # noqa: E402
from autograd_tui.engine.torch_bridge.convert import (  # noqa: E402
    TorchGrad,
    outputs_to_ours,
    to_ours,
    torch_validate,
)

saved = importlib.import_module("autograd_tui.engine.torch_bridge.saved")
capture_mod = importlib.import_module("autograd_tui.engine.torch_bridge.capture")

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]


# --- the references: the plain code ------------------------------------------------------
def ref_summary(v) -> str:
    if isinstance(v, saved._Unavailable):
        return v.text
    if isinstance(v, torch.Tensor):
        head = f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')}"
        try:
            version = f", version {v._version}"
        except Exception:  # noqa: BLE001
            version = ""
        if v.layout != torch.strided or v.is_nested:
            return f"{head} {v.layout}{version}"
        n = v.numel()
        size = f", {saved.nbytes(n * v.element_size())}"
        norm = ""
        if n and n <= saved.NORM_MAX and (v.is_floating_point() or v.is_complex()) \
                and v.device.type == "cpu":
            wide = torch.complex128 if v.is_complex() else torch.float64  # a real norm
            norm = f", |x|={float(torch.linalg.vector_norm(v.detach(), dtype=wide)):.4g}"
        return head + version + size + norm
    if isinstance(v, (tuple, list)) and v and all(isinstance(t, torch.Tensor) for t in v):
        return f"{len(v)} tensors: " + ", ".join(ref_summary(t) for t in v[:3]) + (
            ", ..." if len(v) > 3 else "")
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def ref_saved(fn) -> list[tuple[str, str]]:
    names = [a for a in dir(type(fn)) if a.startswith("_saved_")]
    pairs = []
    with saved.looking():
        for a in names:
            try:
                pairs.append((a[len("_saved_"):], getattr(fn, a)))
            except Exception as e:  # noqa: BLE001
                pairs.append((a[len("_saved_"):], saved._Unavailable(e)))
        if not names and hasattr(fn, "saved_tensors"):
            try:
                pairs.extend((f"saved_tensors[{i}]", t) for i, t in enumerate(fn.saved_tensors))
            except Exception as e:  # noqa: BLE001
                pairs.append(("saved_tensors", saved._Unavailable(e)))
    return [(k, ref_summary(v)) for k, v in pairs]


def ref_meta(reg, fn) -> dict:
    module = typ = tensor = None
    var = getattr(fn, "variable", None)
    if var is not None and id(var) in reg._params:
        _, module, typ, pname = reg._params[id(var)]
        module = reg._shown(module)  # torch's path for a model alone
        tensor = reg.param_name(var) or (f"{module}.{pname}" if module else pname)
    elif (owner := reg.module_of(fn)) is not None:
        module, typ = owner
    created, source, stack = reg.sites.of(fn)
    return {"module": module, "module_type": typ, "tensor": tensor, "created": created,
            "source": source, "saved": [f"{k}: {v}" for k, v in ref_saved(fn)],
            "stack": stack}


# --- saved-tensor summaries -------------------------------------------------------------
def _values() -> list:
    g = torch.Generator().manual_seed(0)
    big = torch.randn(saved.NORM_MAX + 1, generator=g)
    out = [torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g).double(),
           torch.randn(4, 2, generator=g).t(), torch.randn(3, requires_grad=True) * 2,
           torch.arange(6).reshape(2, 3), torch.tensor([True, False]), torch.zeros(0, 3),
           torch.tensor(2.5), big, torch.randn(3, generator=g).to(torch.bfloat16),
           torch.randn(3, generator=g).half(), torch.eye(3).to_sparse(),
           torch.randn(saved.NORM_MAX, generator=g), torch.tensor([float("nan"), 1.0]),
           torch.randn(3, dtype=torch.complex64, generator=g),
           torch.nn.Parameter(torch.ones(2)), torch.empty(2, 3, device="meta")]
    t = torch.ones(3)
    t.add_(1)  # version 1
    out.append(t)
    out += [tuple(out[:2]), list(out[:5]), (1, 2), [3], (), [], (1, torch.ones(1)),
            (torch.ones(1), 2), 7, -1.5, True, None, "mean", "x" * 80, (1,) * 40,
            saved._Unavailable(RuntimeError("freed")), saved._Unavailable(saved.NotReadYet()),
            torch.float32, slice(1, 2)]
    return out


def test_saved_summaries_are_the_plain_codes_twice_over():
    values = _values()
    first = [saved._summary(v) for v in values]
    assert first == [ref_summary(v) for v in values]
    assert [saved._summary(v) for v in values] == first  # the cached texts, reused
    assert any("|x|=" in s for s in first) and any("sparse_coo" in s for s in first)


def test_the_cache_of_summary_texts_is_bounded():
    saved._KINDS.clear()
    for n in range(1, 4100):
        assert saved._summary(torch.zeros(n, dtype=torch.int8)) == \
            f"Tensor[{n}] int8, version 0, {saved.nbytes(n)}"
    assert 0 < len(saved._KINDS) <= 4096


def test_saved_summaries_of_real_nodes_are_the_plain_codes():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(2, 4, dtype=torch.float64)
    with capture():
        h = torch.nn.functional.layer_norm(x.float() @ w, (3,))
        y = (Double.apply(h, 2.0).sigmoid()[:, 1:] ** 2).sum()
    g = from_torch(y)
    fns = list(g.torch_nodes.values())
    assert {type(f).__name__ for f in fns} >= {"NativeLayerNormBackward0", "MmBackward0",
                                               "DoubleBackward", "PowBackward0"}
    for fn in fns:
        assert saved.saved_summaries(fn) == ref_saved(fn), type(fn).__name__
        assert saved.saved_lines(fn) == [f"{k}: {v}" for k, v in ref_saved(fn)]


def test_node_meta_is_the_plain_codes():
    class Tagged(torch.autograd.Function):  # a custom node with a `variable` of its own
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with capture() as reg:
        out = Tagged.apply(model(torch.randn(5, 3)))
        out.grad_fn.variable = model[0].weight  # read as the parameter's, as before
        loss = out.pow(2).mean()
    g = from_torch(loss)
    metas = {}
    for fn in g.torch_nodes.values():
        metas[type(fn).__name__, id(fn)] = m = reg.meta(fn)
        assert m == ref_meta(reg, fn), type(fn).__name__
    assert {m["tensor"] for m in metas.values()} >= {"0.weight", "0.bias", "2.weight"}
    assert any(m["module_type"] == "Linear" and m["saved"] for m in metas.values())
    assert any(m["created"] for m in metas.values())
    tagged = next(m for k, m in metas.items() if k[0] == "TaggedBackward")
    assert tagged["tensor"] == "0.weight"


# --- gradients: checked and converted in one pass ---------------------------------------
def _slots(t) -> dict:
    names = [n for c in type(t).__mro__ for n in getattr(c, "__slots__", ())
             if n != "__weakref__"]
    return {n: getattr(t, n) for n in names}


def test_a_torch_grad_built_in_place_has_every_slot_init_gives():
    t = torch.randn(2, 3)
    fast, plain = to_ours(t, None), TorchGrad(t.numpy(), "cpu", t)
    a, b = _slots(fast), _slots(plain)
    assert a.keys() == b.keys() and "held" in a and "data" in a
    for k in a:
        if k == "data":
            assert np.shares_memory(a[k], b[k]) and a[k].dtype == b[k].dtype
        elif k == "held":
            assert a[k] is b[k] is t
        else:
            assert a[k] == b[k] if not isinstance(a[k], list) else a[k] == b[k] == [], k
    fast._backward_hooks.append(1)  # its own list, not one shared with another
    assert to_ours(t, None)._backward_hooks == []


def test_outputs_to_ours_is_validate_then_convert():
    f64 = torch.randn(3, 4, dtype=torch.float64)
    bcast = torch.randn(2, 3, 4)
    odd = torch.randn(5)
    outs = [f64, None, bcast, odd, torch.randn(3), torch.randn(2, 2)]
    targets = [(torch.Size([3, 4]), torch.float32), (torch.Size([1]), torch.float32),
               (torch.Size([3, 4]), torch.float32), (torch.Size([2]), torch.float32),
               None]  # the last output has no target at all
    fast = outputs_to_ours(tuple(outs), targets, None)
    plain = [to_ours(o, None) for o in torch_validate(list(outs), targets)]
    assert len(fast) == len(plain) == 6 and fast[1] is None and plain[1] is None
    for a, b in zip(fast, plain):
        if a is not None:
            assert a.held.dtype == b.held.dtype and torch.equal(a.held, b.held)
            assert a.data.dtype == b.data.dtype and a.data.shape == b.data.shape
    assert fast[0].held.dtype == torch.float32 and list(fast[2].held.shape) == [3, 4]
    assert list(fast[3].held.shape) == [5]  # not expandable: left for the engine's message
    assert fast[5].held is outs[5]


# --- node_meta's fields -----------------------------------------------------------------
def test_a_node_meta_without_its_optional_stack_gets_the_default():
    x = torch.randn(3, requires_grad=True)
    with capture():
        y = (x * 2).sum()
    g = from_torch(y)
    mul = g.node(y.grad_fn.next_functions[0][0])
    mul.meta = {"module": "m", "module_type": "M", "tensor": None, "created": "here",
                "source": "y = x * 2", "saved": ["other: 2"]}  # no "stack"
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with engine.use_engine(eng):
            g.backward()
    finally:
        eng.close()
    metas = {e.node: e.data for e in obs.events if e.kind == "node_meta"}
    mid = next(e.node for e in obs.events if e.kind == "node_start"
               and e.data["name"] == "MulBackward0")
    assert metas[mid] == {**mul.meta, "stack": []}
    others = [d for n, d in metas.items() if n != mid]
    assert others and all(isinstance(d["stack"], list) and d["stack"] for d in others
                          if d["created"])
