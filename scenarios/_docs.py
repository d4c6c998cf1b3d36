# ruff: noqa: E501 - the intro holds a Markdown table: one row a line
"""Write ``docs/scenarios.md`` from the scenarios themselves (``python -m autograd_tui.scenarios._docs``).

A test checks that the file is up to date, so the notes in the docs are the
notes the app shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autograd_tui import scenarios

INTRO = """\
# Scenarios

A scenario is a lesson: a forward graph, a backward pass started from the right
thread, and teaching notes.  Run one with `autograd-tui run NAME` (the app) or
`autograd-tui run NAME --headless` (a text trace); `autograd-tui list` lists them
and `autograd-tui show NAME` prints the notes.

## Writing your own

A scenario is a Python module; the built-in ones live in `scenarios/`, and a file of
your own runs by path (`autograd-tui run ./my_scenario.py`).

### Step by step

1. Write the forward pass and the backward call as you would in PyTorch, with the
   engine's tensors (`from autograd_tui import engine as torch`; the ops are listed in
   "Supported operations" below), inside a function `program` that returns the
   gradients to show:

   ```python
   from autograd_tui import engine as torch
   from autograd_tui.scenarios import Param

   NAME = "shared-weight"
   TITLE = "A weight used twice: two gradients meet in its AccumulateGrad"
   PARAMS = {"w": Param(0.5, "the shared weight")}
   FORWARD = {0: ("first use",), 2: ("second use",)}  # by sequence_nr: what made the node

   def program(w):
       x = torch.tensor([1.0, 2.0])
       weight = torch.tensor(w, requires_grad=True)
       y = (x * weight).tanh() + (x * weight).sum()
       y.sum().backward()
       return {"weight": weight.grad}
   ```

2. Run it headless: `autograd-tui run shared-weight.py --headless` prints every event
   and the gradients; a mistake is one message naming your file and line (below).
3. Step through it in the app: `autograd-tui run shared-weight.py`; `.` steps, `d`
   shows a node's details, `?` lists every key.  Try `--param w=2.0`.
4. Write `NOTES` for your students (Markdown: what to watch for at which event, a
   question), and `EXPECT = "deadlock"` if the lesson is about one.
5. Optionally add `torch_program(torch, **params)`, the same with real PyTorch, so a
   test can compare the gradients, and record a run for the class:
   `autograd-tui run shared-weight.py --headless --record shared.jsonl.gz`.

A scenario module declares:

| name | what |
|---|---|
| `NAME` | short, lower-case, dashes (required) |
| `TITLE`, `SUMMARY` | a title and a one-line summary |
| `NOTES` | Markdown teaching notes: what it shows, what to watch for at which step, a question for a student, the PyTorch source it mirrors |
| `PARAMS` | `{name: scenarios.Param(default, help)}`; the type is the default's type, and `--param name=value` is converted to it |
| `ENGINE` | default engine options (`engine.Engine(**ENGINE)`), overridden by `--engine k=v` |
| `THREADS` | the engine threads it involves (shown by `list`) |
| `EXPECT` | `"complete"` or `"deadlock"` |
| `program(**params)` | builds the graph and calls backward on the calling thread; returns `{name: Tensor}` of the gradients that matter (required) |
| `torch_program(torch, **params)` | optional: the same with real PyTorch, so tests can compare gradients |
| `FORWARD` | optional: `{sequence_nr: (op name, leaf input names...)}`, the forward op that made each node, shown in the graph's boxes (`(Linear1)`) |

`FORWARD` is keyed by each backward node's `sequence_nr` (the order the forward pass made
the nodes, from 0).  `autograd-tui show FILE --nodes` runs the scenario and prints every
node's sequence_nr, name and current label, a table to copy from (`--param K=V` as for
`run`); `autograd-tui show linear-relu --nodes` prints:

```
sequence_nr  node             forward op (FORWARD)
          0  LinearBackward0  Linear1, input, linear1.weight, linear1.bias
          1  ReluBackward0    ReLU
          2  LinearBackward0  Linear2, , linear2.weight, linear2.bias
          3  AddBackward0     -
          4  SelectBackward0  -
          5  SumBackward0     -
        max  AccumulateGrad   -
11 nodes in 7 rows (AccumulateGrads share one); FORWARD = {sequence_nr: (op name, input names...)} (docs/scenarios.md)
```

(an input that is not a leaf has an empty name: `Linear2`'s first, Linear1's output).  A
leaf's `AccumulateGrad` has no key of its own (its sequence_nr is the largest, as in
PyTorch, `max`): name it among the inputs of the op that used it.  A recording of a scenario
file keeps the file's `FORWARD` in its header, so `autograd-tui replay` shows the same
labels without the file (a built-in lesson's are looked up by its name).

A broken file (a syntax error, no `program`, a program that raises, a parameter of the
wrong type, an unknown parameter) gives one message naming the file and the problem, on
standard error, and exit code 1 (`docs/cli.md`). Where the file can say which line, it
does: an error in `program` (or one it caused inside the engine, such as a shape
mismatch) is shown at your own line, with that line's text and a "did you mean" for a
misspelled attribute or name:

```
autograd-tui: typo.py:8: AttributeError: 'Tensor' object has no attribute 'tahn'; did you mean 'tanh'?
    y = x.tahn()
```

Mistakes that would otherwise pass in silence are errors too: a constant one slip away
from one of the names above (`PARAM`, `SUMARY`: "did you mean PARAMS?"), a `program`
whose arguments are not the `PARAMS` names, a program that never starts a backward
pass, and `EXPECT = "deadlock"` on a run that completes (with the file's own `PARAMS`
defaults and `ENGINE`: a run with `--param` or `--engine` changed may be the fix).
"""

OPS_INTRO = """
## Supported operations

A lesson writes ops as in PyTorch.  These are the ones the engine has, from the op
table (`engine/ops/table.py`) that `tests/engine/test_ops_parity.py` checks against PyTorch
2.13 row by row: forward values and dtype, gradients, and the names of the backward
graph's nodes, in float32 and float64.  The nodes column names the op's own backward
nodes (the test checks that this engine and PyTorch both record them).  Besides these: `torch.tensor`, `zeros`, `ones`,
`zeros_like`, `ones_like`, `randn`, `rand`, `arange`, `eye`, `manual_seed` (NumPy's
generator: values differ from PyTorch's), the dtypes (`float32`, `float64`, `int64`,
`bool`, ...), `a.long()`, `a.bool()`, `a.argmax()`, `a.argmin()`, `a.to(device)`.
A float tensor made from Python floats has the default dtype, float64 here unless the
lesson calls `torch.set_default_dtype` (PyTorch's default is float32); mixed dtypes
promote by PyTorch's rules.

In-place ops keep PyTorch's version counter: each bumps the tensor's `_version`, a
saved tensor remembers its version, and a backward through a node whose saved tensor
was changed since raises PyTorch's "modified by an inplace operation" error (the
`inplace-version` lesson); an in-place op on a leaf that requires grad is refused.
A view and `detach()` share their base's version counter, so an in-place op on either is
seen by a node that saved the other.  Not modelled: an in-place op on a view rewriting
its base's history (`CopySlices`).

| op | family | backward nodes | notes |
|---|---|---|---|
"""


def render_ops() -> str:
    from autograd_tui.engine.ops.table import OPS

    rows = [f"| `{r.api}` | {r.family} | "
            f"{', '.join(f'`{n}`' for n in r.nodes) or 'none: the result has no gradient'} "
            f"| {r.departure} |" for r in OPS]
    return OPS_INTRO + "\n".join(rows) + "\n"


def render() -> str:
    out = [INTRO, render_ops(), "\n## The built-in scenarios\n"]
    for s in scenarios.builtins():
        out.append(f"\n### `{s.name}`: {s.title}\n")
        if s.summary:
            out.append(f"\n*{s.summary}*\n")
        facts = [f"threads: {', '.join(s.threads)}", f"expect: {s.expect}"]
        if s.engine:
            facts.append("engine: " + ", ".join(f"`{k}={v!r}`" for k, v in s.engine.items()))
        if s.params:
            facts.append("parameters: " + ", ".join(
                f"`{k}={p.default!r}`" + (f" ({p.help})" if p.help else "")
                for k, p in s.params.items()))
        out.append("\n" + "\n".join(f"- {f}" for f in facts) + "\n")
        notes = s.notes.strip()
        if notes:
            out.append("\n" + "\n".join(_demoted(notes)) + "\n")
    return "".join(out)


def _demoted(notes: str) -> list[str]:
    """The notes' lines, their own headings two levels down (below the scenario's heading);
    a code block's lines as they are (its ``# comment`` is not a heading)."""
    lines, in_code = [], False
    for line in notes.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        lines.append("##" + line if line.startswith("#") and not in_code else line)
    return lines


def main() -> int:
    path = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"
    path.write_text(render())
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
