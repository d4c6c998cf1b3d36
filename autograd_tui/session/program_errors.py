"""Where a person's program went wrong: the file, the line and the source line of *their*
frame (not the tool's), with a "did you mean" for a misspelled attribute or name.

A scenario's ``program`` (or a PyTorch script's ``main``) runs on the controller's
thread, under the engine and the runner; the exception it raised carries the whole
traceback.  The frame to show is the deepest one in the file that defines the program:
an error raised inside the engine (a shape mismatch in an op) is shown at the user's
line that called the op.  Used by the commands (stderr) and by the app (its error panel).

A file that raises while it is imported (a scenario file, a script) is located the same way:
``scenarios`` raises ``ImportRaised`` (it imports nothing of the debugger), and
``load_scenario``/``import_file`` here name the file's own line in the message.
"""

from __future__ import annotations

import builtins
import contextlib
import difflib
import linecache
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from autograd_tui import scenarios
from autograd_tui.scenarios import ImportRaised, Scenario, ScenarioError
from autograd_tui.words import plain, plain_lines


@dataclass(frozen=True)
class ProgramError:
    """One error of a person's program, located."""

    error: str  # "AttributeError: 'Tensor' object has no attribute 'tahn'"
    file: str | None = None  # as the person would type it (relative to the working folder)
    line: int | None = None
    source: str | None = None  # the line's text, stripped
    hint: str | None = None  # "did you mean 'tanh'?"
    notes: tuple[str, ...] = ()  # the exception's notes: "(raised in AddmmBackward0 ...)"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else (self.file or "")

    def headline(self) -> str:
        """``typo.py:8: AttributeError: ...; did you mean 'tanh'?`` (plain text; a
        multi-line message, as a gloo error's, has its further lines indented under it)."""
        text = self.error + (f"; {self.hint}" if self.hint else "")
        first, *more = plain_lines(f"{self.where}: {text}" if self.where else text) or [""]
        return "\n".join([first, *(f"    {line}" for line in more)])

    def text(self) -> str:
        """The headline, its notes and, indented under them, the source line."""
        return "\n".join([self.headline(), *map(plain, self.notes)] +
                         ([f"    {plain(self.source)}"] if self.source else []))


def _shown_path(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if rel.startswith("..") else rel


def _program_file(program: Callable[..., Any] | None) -> str | None:
    code = getattr(program, "__code__", None)
    return os.path.abspath(code.co_filename) if code is not None else None


def _user_frame(tb: TracebackType | None, file: str | None) -> TracebackType | None:
    """The deepest traceback entry in ``file``; without one, the deepest entry."""
    found = last = None
    while tb is not None:
        last = tb
        if file is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == file:
            found = tb
        tb = tb.tb_next
    return found or (last if file is None else None)


def _close(name: str, names: Any) -> str | None:
    options = [n for n in names if isinstance(n, str) and not n.startswith("_")]
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _hint(err: BaseException, tb: TracebackType | None) -> str | None:
    name = getattr(err, "name", None)
    if not isinstance(name, str):
        return None
    if isinstance(err, AttributeError) and getattr(err, "obj", None) is not None:
        return _close(name, dir(err.obj))
    if isinstance(err, NameError) and tb is not None:
        f = tb.tb_frame
        return _close(name, [*f.f_locals, *f.f_globals, *dir(builtins)])
    return None


def locate(err: BaseException, program: Callable[..., Any] | None = None, *,
           file: str | os.PathLike[str] | None = None) -> ProgramError:
    """``err`` located in ``file``, or in the file that defines ``program`` (with neither:
    at the deepest frame)."""
    error, notes = _message(err)
    if isinstance(err, SyntaxError) and err.filename and err.lineno:
        src = (err.text or "").strip() or None
        return ProgramError(error, _shown_path(err.filename), err.lineno, src, notes=notes)
    file = os.path.abspath(file) if file is not None else _program_file(program)
    tb = _user_frame(err.__traceback__, file)
    if tb is None:  # raised before the program's first line ran (its call, say)
        return ProgramError(error, _shown_path(file) if file else None, hint=_hint(err, None),
                            notes=notes)
    filename = tb.tb_frame.f_code.co_filename
    line = tb.tb_lineno
    source = linecache.getline(filename, line).strip() or None
    return ProgramError(error, _shown_path(filename) if Path(filename).exists() else filename,
                        line, source, _hint(err, tb), notes)


def _message(err: BaseException) -> tuple[str, tuple[str, ...]]:
    """``Type: message`` and the exception's notes apart (each its own line when shown,
    never one line with an escaped newline)."""
    notes = tuple(str(n) for n in getattr(err, "__notes__", None) or ())
    text = "".join(traceback.format_exception_only(type(err), err)).rstrip("\n")
    qualified = f"{type(err).__module__}.{type(err).__qualname__}"
    if qualified.startswith("autograd_tui.") and text.startswith(qualified):
        text = type(err).__qualname__ + text[len(qualified):]  # ours: no module path
    for note in reversed(notes):
        if text.endswith("\n" + note):
            text = text[: -len(note) - 1]
    return text.strip(), notes


def locate_in_scenario(err: BaseException, scenario: Any) -> ProgramError:
    """``err`` of a scenario's program (or a PyTorch script's): at the person's line in the
    scenario file or script it came from, else in the module defining the program."""
    source = getattr(scenario, "source", "")
    file = source if isinstance(source, str) and source.endswith(".py") and \
        Path(source).is_file() else None
    return locate(err, getattr(scenario, "program", None), file=file)


# --- files that raise while they are imported -----------------------------------------------
def located_import(err: ImportRaised) -> ScenarioError:
    """``err`` at the file's own line that raised: ``lesson.py:4: importing it raised
    AttributeError: ...; did you mean 'sqrt'? (in: SCALE = math.sqr(2))``."""
    e, p = err.error, err.path
    at = locate(e, file=p)
    line = f":{at.line}" if at.line else ""
    source = f" (in: {at.source})" if at.source else ""
    hint = f"; {at.hint}" if at.hint else ""
    return ScenarioError(f"{p}{line}: importing it raised {type(e).__name__}: {e}{hint}"
                         f"{source}")


def load_scenario(name_or_path: str) -> Scenario:
    """``scenarios.load``, with an error raised while importing a file located."""
    try:
        return scenarios.load(name_or_path)
    except ImportRaised as e:
        raise located_import(e) from None


def import_file(path: str | os.PathLike[str], what: str) -> ModuleType:
    """``scenarios.import_file``, with an error raised while importing it located."""
    try:
        return scenarios.import_file(path, what)
    except ImportRaised as e:
        raise located_import(e) from None


@contextlib.contextmanager
def in_modules(mod: ModuleType) -> Iterator[None]:
    """``mod`` in ``sys.modules`` meanwhile (the entry running), as ``python SCRIPT`` has
    ``__main__``: dynamo (``torch.cond``) imports the module of the code it traces."""
    mine = sys.modules.setdefault(mod.__name__, mod) is mod
    try:
        yield
    finally:
        if mine:
            sys.modules.pop(mod.__name__, None)


#: PyTorch's errors of a second backward of one forward pass that a region allows once:
#: check-order runs PyTorch's on a fresh forward pass, with this note (``one_backward``)
_ONE_BACKWARD = {
    "selective activation checkpoint": "a region under selective activation checkpoint "
    "(checkpoint's context_fn) allows one backward",
    # checkpoint(debug=True)'s recompute context, a generator context manager, re-entered
    "'_GeneratorContextManager' object has no attribute 'args'": "a region under "
    "checkpoint(debug=True) recomputes once (its context is used up)"}


def one_backward(e: BaseException | None) -> str | None:
    """Why PyTorch's backward, the second on one forward pass, failed where a fresh
    forward pass would not (``_ONE_BACKWARD``), or None."""
    return next((why for k, why in _ONE_BACKWARD.items() if k in str(e)), None)
