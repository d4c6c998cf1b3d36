"""Anomaly mode: the engine names the node whose backward produced NaN."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "anomaly-nan"
TITLE = "Anomaly mode: which node made the NaN?"
SUMMARY = "anomaly mode checks every node's outputs and names the one that made a NaN"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "op": Param("pow", "the op whose backward makes the NaN: pow (x ** 0.5 * 0), "
                       "log (x.log() * 0) or div (x / x)"),
}
NOTES = """\
# Anomaly mode: naming the node that made a NaN

```
x = tensor([0.0, 1.0])
y = (x ** 0.5 * 0).sum()      # the forward is fine: 0 and 0
engine.set_detect_anomaly(True)
try:
    y.backward()              # RuntimeError: Function 'PowBackward0' returned nan values ...
finally:
    engine.set_detect_anomaly(previous)
```

The forward is harmless: `sqrt(0) * 0 = 0`.  The backward is not: the
derivative of `x ** 0.5` at 0 is `0.5 / sqrt(0) = inf`, and `PowBackward0`
multiplies it by the incoming gradient 0: `0 · inf = NaN`.  Without anomaly
mode the NaN flows on silently and lands in `x.grad`; in a real model you find
out many steps later, with every parameter NaN.

With anomaly mode on, `evaluate_function` checks every output of every node
right after it runs and raises at the first NaN, naming the node and the
output index.

**What to watch.**
1. GraphTask 1 (anomaly on): `MulBackward0` (the `* 0`) sends 0 to
   `PowBackward0`; `PowBackward0`'s `node_end` shows a NaN output; then an
   `error` event ("Function 'PowBackward0' returned nan values in its 0th
   output.") and `completion` with that error.  x's `AccumulateGrad` never
   runs.
2. The program catches the `RuntimeError` and, in a `finally`, restores the
   anomaly mode it found (it is process-wide: every engine thread sees it).
3. GraphTask 2 (anomaly off, a fresh leaf): the same graph completes, and
   `x.grad without anomaly mode` is `[nan, 0]`: NaN where x = 0.
4. Try `op=log` (`LogBackward0`: `0 / 0`) and `op=div` (`DivBackward0`).

**Ask a student:** anomaly mode makes every backward slower.  What does it
check, on which thread, and why does PyTorch also record the *forward* stack
trace of every node when it is on?

**Source:** `Engine::evaluate_function` (the `AnomalyMode::is_enabled()` /
`isnan` check) in `torch/csrc/autograd/engine.cpp`;
`torch/autograd/anomaly_mode.py` (`set_detect_anomaly`, `detect_anomaly`);
`AnomalyMode` in `torch/csrc/autograd/anomaly_mode.h`.
"""

_OPS = ("pow", "log", "div")


def _graph(x: Any, op: str) -> Any:
    if op == "pow":
        return (x ** 0.5 * 0).sum()
    if op == "log":
        return (x.log() * 0).sum()
    return (x / x).sum()


def _run(mod: Any, op: str, is_enabled: Any, set_anomaly: Any, **kw: Any) -> dict[str, Any]:
    if op not in _OPS:
        raise ScenarioError(f"{NAME}: parameter 'op' must be one of {', '.join(_OPS)}, "
                            f"not {op!r}")
    raised = 0.0
    x = mod.tensor([0.0, 1.0], requires_grad=True, **kw)
    previous = is_enabled()
    set_anomaly(True)
    try:
        _graph(x, op).backward()
    except RuntimeError as e:
        if "returned nan values" not in str(e):
            raise
        raised = 1.0
    finally:
        set_anomaly(previous)
    x2 = mod.tensor([0.0, 1.0], requires_grad=True, **kw)
    _graph(x2, op).backward()
    return {"anomaly_error_raised": mod.tensor(raised, **kw),
            "x.grad without anomaly mode": x2.grad}


def program(op: str) -> dict[str, engine.Tensor]:
    import warnings

    # NumPy would warn about 0 * inf and 0 / 0 (PyTorch does not): that is the lesson.
    # The failing node's forward traceback, which anomaly mode prints as a warning (as
    # torch_program's does), is not: the error names the node.
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Error detected in")
        return _run(engine, op, engine.is_anomaly_enabled, engine.set_detect_anomaly)


def torch_program(torch: Any, op: str) -> dict[str, Any]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the forward traceback anomaly mode prints
        return _run(torch, op, torch.is_anomaly_enabled, torch.autograd.set_detect_anomaly,
                    dtype=torch.float64)
