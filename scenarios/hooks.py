"""Hooks: tensor hooks, node pre/post hooks, retain_grad, final callbacks."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "hooks"
TITLE = "Hooks: tensor, node pre/post, retain_grad and final callbacks"
SUMMARY = "every kind of hook, where it runs, and a final callback that queues another"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x0": Param(1.0, "first element of the leaf x"),
    "x1": Param(2.0, "second element of the leaf x"),
}
NOTES = """\
# Hooks and final callbacks

```
x.register_hook(lambda g: g * 2)              # leaf tensor hook
h = x * w
h.retain_grad()                               # keep h's gradient in h.grad
h.register_hook(lambda g: g + 1)              # non-leaf tensor hook
y = h.tanh()
y.grad_fn.register_prehook(lambda go: (go[0] * 0.5,))   # node pre-hook
y.grad_fn.register_hook(post)                 # node post-hook: queues callback 1
y.sum().backward()                            # callback 1 queues callback 2
```

A hook is code the engine calls at a fixed point while it runs a node.  Where
each one lives decides when it runs:

- a **tensor hook on a non-leaf** (`h`) is a *tensor pre-hook* of the node that
  receives h's gradient, `MulBackward0`: it runs before that node, on the
  gradient in the input slot for `h`, and may replace it;
- **`retain_grad`** is a special tensor pre-hook that always runs *after* the
  other tensor hooks (so `h.grad` sees the `+ 1`);
- a **node pre-hook** gets the node's input gradients (`grad_outputs`) as a
  tuple and may replace them; a **node post-hook** gets both its outputs
  (`grad_inputs`) and inputs afterwards;
- a **tensor hook on a leaf** (`x`) runs inside x's `AccumulateGrad`, before the
  gradient is stored: `x.grad` is the doubled value;
- a **final callback** (`engine.queue_callback`, only during a backward) runs
  once the GraphTask has no work left, in `exec_post_processing`.  A callback
  may queue another: the loop re-reads the list's length each time.

**What to watch** (`hook` events, their `hook_kind` and `modified` fields).
All of a node's hooks run inside `call_function`, so they appear between its
`node_start` and `node_end`:
1. `TanhBackward0`: `pre` (modified: its input 1 becomes 0.5), then `post`
   (after the node's maths; its outputs are in `node_end`).
2. `MulBackward0`: `tensor_pre` (modified: + 1), then `retain_grad`, then the
   maths.
3. x's `AccumulateGrad`: `tensor_pre` (modified: × 2), then `node_end` shows
   the doubled `.grad`.  w's `AccumulateGrad` has no hook.
4. After the last node: two `hook` events of kind `final_callback` (the second
   was queued by the first), then `completion`.  The callbacks saw the finished
   `.grad` values (`x.grad seen by callback 1`, `w.grad seen by callback 2`).

**Ask a student:** a callback queued from a hook runs after *all* nodes, not
right after the hook.  Why is that what an optimizer-step-in-backward or a
gradient all-reduce (DDP) wants?

**Source:** `call_tensor_pre_hooks`, `call_pre_hooks`, `call_post_hooks` and
`call_function` in `torch/csrc/autograd/engine.cpp`; `Engine::queue_callback`
and `GraphTask::exec_post_processing` (the `final_callbacks_` loop);
`AccumulateGrad::apply` in `functions/accumulate_grad.h`; `retain_grad` in
`torch/csrc/autograd/variable.cpp`.
"""


def _run(mod: Any, queue_callback: Any, x0: float, x1: float, **kw: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    x = mod.tensor([x0, x1], requires_grad=True, **kw)
    w = mod.tensor([0.5, -1.5], requires_grad=True, **kw)

    def double(g):
        return g * 2

    def add_one(g):
        return g + 1

    def halve(grad_outputs):
        return (grad_outputs[0] * 0.5,)

    def callback_2():
        seen["w.grad seen by callback 2"] = w.grad.clone()

    def callback_1():
        seen["x.grad seen by callback 1"] = x.grad.clone()
        queue_callback(callback_2)

    def post(grad_inputs, grad_outputs):
        queue_callback(callback_1)

    x.register_hook(double)
    h = x * w
    h.retain_grad()
    h.register_hook(add_one)
    y = h.tanh()
    y.grad_fn.register_prehook(halve)
    y.grad_fn.register_hook(post)
    y.sum().backward()
    return {"x": x.grad, "w": w.grad, "h (retain_grad)": h.grad, **seen}


def program(x0: float, x1: float) -> dict[str, engine.Tensor]:
    return _run(engine, engine.queue_callback, x0, x1)


def torch_program(torch: Any, x0: float, x1: float) -> dict[str, Any]:
    queue = torch.autograd.Variable._execution_engine.queue_callback
    return _run(torch, queue, x0, x1, dtype=torch.float64)
