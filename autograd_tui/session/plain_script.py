"""A user's training script as it is: no ``main()`` returning the loss needed.

A script whose ``main()`` returns the loss is run as ``torch_script`` runs it (imported,
then ``main()``).  Any other script (one that trains at its top level, or under
``if __name__ == "__main__": main()`` with a ``main()`` that returns nothing), or any
script with ``--backward N``, is run whole as ``python SCRIPT ARGS`` would run it, up
to its Nth backward call (``engine.torch_bridge.script_run.ScriptEntry``), whose
arguments are what ``run_program`` and ``check_order`` step.  Which of the two is
decided from the source (``ast``), before anything of the script runs: importing a
script that trains would run its whole training.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autograd_tui.scenarios import Scenario, ScenarioError

INSTALL = "pip install 'autograd-tui[torch]' (or: pip install torch)"


def need_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ScenarioError(f"PyTorch is not installed: {INSTALL}") from None
    return torch


def is_plain(path: str, entry: str | None, backward: int | None) -> bool:
    """Whether the script runs whole, up to a backward call of its own: ``--backward``
    given, or no ``--entry`` and no top-level ``main`` that returns a value (a function
    ``main`` bound another way, imported or assigned, is taken to be the entry; so is one
    that returns nothing and that the script does not call).  A file that cannot be read
    or parsed is not: importing it says what is wrong, as before."""
    if backward is not None:
        return True
    if entry is not None:
        return False
    try:
        tree = ast.parse(Path(path).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return False
    return not _binds_entry(tree.body, "main") and (
        not _defines(tree.body, "main") or _calls_at_top(tree.body, "main"))


def _binds_entry(body: list[ast.stmt], name: str) -> bool:
    """``name`` bound at the module's top level (an ``if``/``try``/``with`` block's too)
    as a function that returns a value other than a constant (``sys.exit(main())``'s
    ``return 0`` is an exit code, not a loss), or bound by an import or an assignment."""
    for st in _top(body):
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name \
                and _returns_value(st):
            return True
        if isinstance(st, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name) == name for a in st.names):
            return True
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target])):
            return True
    return False


def _defines(body: list[ast.stmt], name: str) -> bool:
    return any(isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name
               for st in _top(body))


def _calls_at_top(body: list[ast.stmt], name: str) -> bool:
    """``name()`` called by the module itself (``if __name__ == "__main__": main()``,
    ``sys.exit(main())``), not only inside its functions: a ``main()`` that returns
    nothing and that the script never calls is an entry (run as it is, nothing would)."""
    todo: list[ast.AST] = [st for st in body if not isinstance(
        st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == name:
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def _top(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's top-level statements, those of its ``if``/``try``/``with`` blocks too."""
    out: list[ast.stmt] = []
    for st in body:
        out.append(st)
        if isinstance(st, (ast.If, ast.Try, ast.With)):
            for k in ("body", "orelse", "finalbody"):
                out += _top(getattr(st, k, None) or [])
            for h in getattr(st, "handlers", None) or []:
                out += _top(h.body)
    return out


def _returns_value(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``return X`` in ``fn`` itself (not in a function or class nested in it) whose X
    is not a constant."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None \
                and not isinstance(node.value, ast.Constant):
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def script_entry(path: str, argv: Sequence[str] = (), backward: int = 1) -> Any:
    """The script as an entry function (``ScriptEntry``): it runs the script up to its
    ``backward``-th backward call and returns that call's arguments."""
    need_torch()
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"{p}: no such file", usage=True)
    if p.is_dir():
        raise ScenarioError(f"{p}: is a directory, not a Python script")
    from autograd_tui.engine.torch_bridge.script_run import ScriptEntry

    return ScriptEntry(str(p), argv, backward)


def plain_scenario(path: str, argv: Sequence[str] = (), backward: int = 1) -> Scenario:
    """The script as a scenario: run up to its ``backward``-th call, that backward on
    our engine; what happened (which call, where) is said as soon as the script stops."""
    entry = script_entry(path, argv, backward)
    from autograd_tui.engine.torch_bridge import run_program
    from autograd_tui.engine.torch_bridge.program import func_note
    from autograd_tui.engine.torch_bridge.script_run import ordinal

    text = Path(path).read_text(errors="replace")
    try:
        doc = (ast.get_docstring(ast.parse(text)) or "").strip()
    except (SyntaxError, ValueError):
        doc = ""  # running it says where (located at its line)
    banner = func_note(text) or ""  # torch.compile: said once the script has called it
    what = f"the {ordinal(backward)} backward call of {path}"
    scenario = Scenario(
        name=Path(path).stem, title=Path(path).name, summary=what,
        notes=doc or f"_{what[0].upper()}{what[1:]}, stepped._", params={}, engine={},
        threads=("cpu (owner)",), expect="complete", program=lambda: None,
        torch_program=None, source=str(path), banner=banner,
        script={"backward": backward, "args": list(argv)})
    scenario.program = lambda: run_program(entry, said=noting(scenario))
    return scenario


MAX_ARGS, MAX_ARG_CHARS, MAX_BACKWARD = 1000, 10_000, 10**9


def recorded_script(header: Any) -> tuple[str | None, int | None, list[str]]:
    """How the recording's script was run (``Scenario.script``, as the header keeps it):
    its entry, its Nth backward call, its arguments.  A recording is untrusted data: a
    value of the wrong type or out of range is refused with one message; a recording
    made before the header kept them gives (None, None, []), as before."""
    sc = header.get("scenario") if isinstance(header, dict) else None
    script = sc.get("script") if isinstance(sc, dict) else None
    if script is None:
        return None, None, []

    def bad(what: str) -> ScenarioError:
        return ScenarioError(f"the recording's scenario.script is damaged: {what}")

    if not isinstance(script, dict):
        raise bad("not an object")
    entry, backward, args = script.get("entry"), script.get("backward"), script.get("args", [])
    if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
        raise bad("its entry is not a function name")
    if backward is not None and (not isinstance(backward, int) or isinstance(backward, bool)
                                 or not 1 <= backward <= MAX_BACKWARD):
        raise bad(f"its backward is not a call number from 1 to {MAX_BACKWARD}")
    if entry is not None and backward is not None:
        raise bad("it gives both an entry and a backward call")
    if not isinstance(args, list) or len(args) > MAX_ARGS or not all(
            isinstance(a, str) and len(a) <= MAX_ARG_CHARS and "\0" not in a for a in args):
        raise bad(f"its args are not a list of at most {MAX_ARGS} strings of at most "
                  f"{MAX_ARG_CHARS:,} characters")
    return entry, backward, list(args)


def noting(scenario: Scenario) -> Callable[[str], None]:
    """A note of the program's (which backward call was stepped, the backward passes it
    ran itself) added to the scenario's banner (the app's header, the headless summary)
    and notes (the app's notes, ``?``), while the backward has not yet begun."""

    def say(note: str) -> None:
        scenario.banner = "; ".join(n for n in (scenario.banner, note) if n)
        scenario.notes = f"**Note:** {note}.\n\n{scenario.notes}"

    return say


def check_usage(entry: str | None, backward: int | None) -> None:
    """``--entry`` and ``--backward`` ask for two ways to run a script: one at a time."""
    if backward is not None and backward < 1:
        raise ScenarioError(f"--backward counts the script's backward calls from 1, not "
                            f"{backward}", usage=True)
    if backward is not None and entry is not None:
        raise ScenarioError("--entry NAME steps the loss NAME() returns, --backward N the "
                            "script's own Nth backward call: give one of them", usage=True)


def add_script_options(p: Any) -> None:
    """``--entry``, ``--backward`` and the script's own arguments after ``--`` (the
    ``torch`` and ``check-order`` commands')."""
    p.add_argument("--entry", metavar="NAME",
                   help="the function that returns the loss (default: main, if the script "
                        "has one that returns a value; else the script runs as it is)")
    p.add_argument("--backward", type=int, metavar="N",
                   help="run the script as it is (as `python SCRIPT ARGS`) and step its "
                        "Nth backward call (loss.backward(), torch.autograd.backward); the "
                        "script is stopped there (default for a script with no main() "
                        "returning the loss: 1)")
    p.add_argument("script_args", nargs="*", metavar="-- ARGS",
                   help="the script's own arguments (its sys.argv[1:]), after --")
