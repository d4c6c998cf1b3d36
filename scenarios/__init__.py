"""Built-in teaching scenarios; one module per scenario.

A scenario is a Python module (built in, or a file a person writes and runs by
path) that declares:

- ``NAME`` (short, lower-case, dashes), ``TITLE``, ``SUMMARY`` (one line);
- ``NOTES``: Markdown teaching notes (what it shows, what to watch for at
  which step, a question to ask a student, the PyTorch source it mirrors);
- ``PARAMS``: ``{name: Param(default, help)}`` (the type is the default's type);
- ``ENGINE``: default engine options (``engine.Engine(**ENGINE)``), which the
  command line's ``--engine k=v`` overrides;
- ``THREADS``: the engine threads it involves (for ``list``);
- ``EXPECT``: ``"complete"`` or ``"deadlock"``;
- ``program(**params)``: builds the forward graph and calls backward on the
  calling thread (the controller runs it on the owner thread); returns the
  gradients that matter as ``{name: Tensor}``.  It checks the values of its
  parameters first and raises ``ScenarioError`` for one it cannot take (``n``
  must be at least 1): the command line reports that as bad usage (exit 2);
- optionally ``FORWARD``: the forward op that made each node, by the node's
  ``sequence_nr`` (``{0: "Linear1"}``), so that the graph pane can say which Linear is
  which (``LinearBackward0 (Linear1)``); a tuple ``(op, input, ...)`` also names the
  leaves its inputs are (``""`` for an input that is not a leaf): their AccumulateGrads
  show those names;
- optionally ``torch_program(torch, **params)``: the same with real PyTorch,
  returning ``{name: torch.Tensor}``, so tests can check our gradients.

``get(name)`` returns a built-in scenario, ``load(name_or_path)`` either.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import math
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


class ScenarioError(Exception):
    """A scenario that cannot be loaded or run as asked: one clear message.

    ``usage`` is True when the person asked for something that does not exist
    (an unknown scenario, parameter or option, a value of the wrong type): the
    command line exits with 2 for those, and with 1 for a broken scenario."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class ImportsTorch(ScenarioError):
    """A file that imports torch, run as a scenario: it is a script for ``autograd-tui
    torch`` (``replay --reexecute --scenario`` runs it as one)."""


class ImportRaised(ScenarioError):
    """A file a person wrote raised while it was imported.  The message names the file and
    the error; ``error`` keeps the exception (its traceback included), so that the debugger
    (``session.program_errors.located``) can name the file's own line that raised."""

    def __init__(self, path: Path, error: Exception) -> None:
        super().__init__(f"{path}: importing it raised {type(error).__name__}: {error}")
        self.path = path
        self.error = error


@dataclass(frozen=True)
class Param:
    default: Any
    help: str = ""

    @property
    def type(self) -> type:
        return type(self.default)


@dataclass
class Scenario:
    name: str
    title: str
    summary: str
    notes: str
    params: dict[str, Param]
    engine: dict[str, Any]
    threads: tuple[str, ...]
    expect: str
    program: Callable[..., Any]
    torch_program: Callable[..., Any] | None
    source: str  # module name or file path
    requires: tuple[str, ...] = ()  # modules it needs beyond ours (REQUIRES: "torch")
    forward: dict[int, tuple[str, ...]] = field(default_factory=dict)  # FORWARD, as tuples
    banner: str = ""  # said in the app's header and a headless summary (torch.compile)
    # how a PyTorch script was run ({"entry"|"backward": ..., "args": [...]}): the
    # recording keeps it, so that `replay --reexecute` runs the script the same way
    script: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """How a message names it: a built-in lesson by its name, a file by its path."""
        return self.name if self.source.startswith("scenarios.") else self.source

    def missing(self) -> str | None:
        """Why it cannot run here (a module it needs is not installed), else None."""
        for mod in self.requires:
            if importlib.util.find_spec(mod) is None:
                return f"needs {mod}: pip install 'autograd-tui[{mod}]'"
        return None

    def resolve_params(self, given: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults overridden by ``given`` (strings are converted to the default's type)."""
        out = {k: p.default for k, p in self.params.items()}
        for k, v in (given or {}).items():
            if k not in self.params:
                known = ", ".join(sorted(self.params)) or "none"
                raise ScenarioError(
                    f"{self.label}: unknown parameter {k!r} (parameters: {known})", usage=True)
            out[k] = convert(v, self.params[k].type, f"{self.label}: parameter {k!r}")
        return out

    def run(self, params: dict[str, Any] | None = None) -> Any:
        return self.program(**self.resolve_params(params))


def convert(value: Any, typ: type, what: str) -> Any:
    """Convert a command-line string (or a value) to ``typ`` with a clear error.

    A float must be finite: ``nan`` and ``inf`` are refused (bad usage), because a
    run's parameters go into its recording, which is JSON and has no NaN."""
    out = _convert(value, typ, what)
    if isinstance(out, float) and not math.isfinite(out):
        raise ScenarioError(f"{what} must be a finite number, not {value!r}", usage=True)
    return out


def _convert(value: Any, typ: type, what: str) -> Any:
    if isinstance(value, typ) and not (typ is int and isinstance(value, bool)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            if typ is bool:
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            if typ is type(None):
                return None if text.lower() in ("none", "null", "") else int(text)
            return typ(text)
        except ValueError:
            pass
    elif typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise ScenarioError(f"{what} must be {typ.__name__}, not {value!r}", usage=True)


#: the names a scenario module may define (docs/scenarios.md)
CONSTANTS = ("NAME", "TITLE", "SUMMARY", "NOTES", "PARAMS", "ENGINE", "THREADS", "EXPECT",
             "REQUIRES", "FORWARD")


def _misspelled(mod: ModuleType, source: str) -> None:
    """A module constant that is almost one of ours (``PARAM``, ``SUMARY``) would be
    ignored without a word: it is an error with a "did you mean"."""
    for name in vars(mod):
        if name.isupper() and name not in CONSTANTS and not name.startswith("_"):
            # one slip (a letter missing, extra, wrong or two swapped); two in a long name:
            # an author's own HEADS or SIZE is not THREADS or TITLE
            close = [c for c in CONSTANTS if _slips(name, c) <= (1 if len(c) < 8 else 2)]
            if close:
                raise ScenarioError(f"{source}: {name} is not a name a scenario defines (it "
                                    f"would be ignored); did you mean {close[0]}? (see "
                                    "docs/scenarios.md)")


def _slips(a: str, b: str) -> int:
    """Edit distance with swaps of neighbours (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def _check_signature(mod: ModuleType, source: str, params: dict[str, Param]) -> None:
    """``program`` is called with one keyword argument per PARAMS entry."""
    try:
        inspect.signature(mod.program).bind(**{k: p.default for k, p in params.items()})
    except TypeError as e:
        names = ", ".join(params) or "none"
        raise ScenarioError(f"{source}: program() is called with one keyword argument per "
                            f"PARAMS entry ({names}), and {e}") from None
    except ValueError:  # a builtin or C function: no signature to check
        pass


def _from_module(mod: ModuleType, source: str) -> Scenario:
    _misspelled(mod, source)
    missing = [a for a in ("NAME", "program") if not hasattr(mod, a)]
    requires = tuple(getattr(mod, "REQUIRES", ()))
    if "torch" not in requires and _imports_torch(mod):
        raise ImportsTorch(
            f"{source}: it imports torch, so its backward would run on PyTorch's engine, with "
            f"nothing for us to show: run it with `autograd-tui torch {source}` (its main() "
            "builds the model, runs the forward pass and returns the loss; see docs/torch.md)")
    if missing:
        functions = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches("program", functions, n=1, cutoff=0.75)
        hint = f"; did you mean to name {close[0]} 'program'?" if "program" in missing and \
            close else ""
        raise ScenarioError(f"{source}: not a scenario: it defines no {' and no '.join(missing)}"
                            f" (see docs/scenarios.md for the form){hint}")
    if not callable(mod.program):
        raise ScenarioError(f"{source}: 'program' must be a function")
    params = getattr(mod, "PARAMS", {})
    if not isinstance(params, dict) or not all(isinstance(p, Param) for p in params.values()):
        raise ScenarioError(f"{source}: PARAMS must map names to scenarios.Param(...)")
    expect = getattr(mod, "EXPECT", "complete")
    if expect not in ("complete", "deadlock"):
        raise ScenarioError(f"{source}: EXPECT must be 'complete' or 'deadlock'")
    _check_signature(mod, source, params)
    return Scenario(
        name=str(mod.NAME), title=str(getattr(mod, "TITLE", mod.NAME)),
        summary=str(getattr(mod, "SUMMARY", "")), notes=str(getattr(mod, "NOTES", "")),
        params=dict(params), engine=dict(getattr(mod, "ENGINE", {})),
        threads=tuple(getattr(mod, "THREADS", ("cpu (owner)",))), expect=expect,
        program=mod.program, torch_program=getattr(mod, "torch_program", None), source=source,
        requires=requires, forward=_forward(getattr(mod, "FORWARD", {}), source),
    )


def _forward(value: Any, source: str) -> dict[int, tuple[str, ...]]:
    """``FORWARD`` checked: sequence_nr -> (op, leaf input names...)."""
    if not isinstance(value, dict):
        raise ScenarioError(f"{source}: FORWARD must be a dict of sequence_nr -> name")
    out = {}
    for seq, names in value.items():
        names = (names,) if isinstance(names, str) else names
        if type(seq) is not int or not isinstance(names, tuple) or not names or \
                not all(isinstance(n, str) for n in names):
            raise ScenarioError(f"{source}: FORWARD[{seq!r}] must be a name or a tuple of "
                                "names, keyed by a sequence_nr")
        out[seq] = names
    return out


def _imports_torch(mod: ModuleType) -> bool:
    """The module holds PyTorch (``import torch``, ``from torch import nn``) at its top."""
    for v in vars(mod).values():
        name = getattr(v, "__module__", None) if not isinstance(v, ModuleType) else v.__name__
        if isinstance(name, str) and (name == "torch" or name.startswith("torch.")):
            return True
    return False


def _builtin_modules() -> list[str]:
    pkg = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(pkg)]) if not m.name.startswith("_"))


def builtins(everything: bool = False) -> list[Scenario]:
    """Every built-in scenario that can run here (``everything``: also those that need a
    module not installed, see ``Scenario.missing``), linear-relu first, then by name."""
    out = [_from_module(importlib.import_module(f"{__name__}.{m}"), f"scenarios.{m}")
           for m in _builtin_modules()]
    out.sort(key=lambda s: (s.name != DEFAULT, s.name))
    return out if everything else [s for s in out if s.missing() is None]


def names() -> list[str]:
    return [s.name for s in builtins()]


DEFAULT = "linear-relu"


def get(name: str) -> Scenario:
    for s in builtins(everything=True):
        if s.name == name:
            why = s.missing()
            if why is not None:
                raise ScenarioError(f"scenario {name!r} {why}")
            return s
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; `autograd-tui list` shows them"
    raise ScenarioError(f"no scenario named {name!r}{hint}", usage=True)


def load_path(path: str | Path) -> Scenario:
    """Import a scenario file written by a person (its errors become one message)."""
    return _from_module(import_file(path, "scenario file"), str(Path(path)))


def import_file(path: str | Path, what: str) -> ModuleType:
    """Import a Python file a person wrote (a scenario file, a PyTorch script): each way it
    can fail is one ScenarioError naming the file; nothing of it stays in sys.modules."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"{p}: no such file", usage=True)
    if p.is_dir():
        raise ScenarioError(f"{p}: is a directory, not a {what}")
    modname = f"_user_file_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(modname, p)
    if spec is None or spec.loader is None:
        raise ScenarioError(f"{p}: cannot be imported as Python (use a .py file)")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise ScenarioError(f"{p}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - a user file: report, don't crash
        raise ImportRaised(p, e) from None
    finally:
        sys.modules.pop(modname, None)
    return mod


def load(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a scenario file by path (``*.py`` or with a ``/``)."""
    if name_or_path.endswith(".py") or "/" in name_or_path or Path(name_or_path).is_file():
        return load_path(name_or_path)
    return get(name_or_path)
