"""Where each node of a captured forward pass was created (not in PyTorch).

Mirrors what anomaly mode's ``AnomalyMetadata`` keeps (a traceback per node), and
departs from it for speed: anomaly mode formats a whole stack per op (about 100 us);
here a ``TorchFunctionMode`` (``site_mode``) keeps, per torch call that made a node, the
newest node's ``sequence_nr`` and the call's frames as interned ``(code, line)`` pairs,
and a node's site is the call whose range of sequence numbers holds its own (``Sites``).
Each code location is classified (``file_kind``) and formatted once.  A call handled in
Python (``F.multi_head_attention_forward``) is one call: its inner nodes share its site.
Nodes made on another thread than the forward's get none.  Imports nothing of the bridge.

A warning raised while a bridged backward runs, whose ``stacklevel`` lands in our engine's
code (a hook's ``warnings.warn(..., stacklevel=2)``: our frame called the hook; a C++
node's ``TORCH_WARN``: our frame called the node), is shown where PyTorch's shows it: at
the line of ``torch/autograd/graph.py`` that called its C++ engine, the innermost Python
frame there (``warnings_as_pytorchs``).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import linecache
import os
import sys
import sysconfig
import threading
import warnings
from collections.abc import Iterator
from typing import Any

STACK_MAX = 40  # frames kept in node_meta's stack: the innermost
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # engine/
_TOOL = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), "autograd_tui") + os.sep)
_kind: dict[str, int] = {}  # filename -> PROGRAM, LIBRARY, TORCH or OURS
PROGRAM, LIBRARY, TORCH, OURS = 0, 1, 2, 3


def file_kind(filename: str) -> int:
    """``PROGRAM``: the program's own file; ``LIBRARY``: site-packages, dist-packages,
    the standard library, ``<frozen ...>``; ``TORCH``; ``OURS``: the engine's or the
    debugger's."""
    k = _kind.get(filename)
    if k is None:
        path = os.path.abspath(filename)
        if path.startswith(_TOOL):
            k = OURS
        elif path.startswith(_package_dir("torch") + os.sep):
            k = TORCH
        elif (filename.startswith("<frozen") or path.startswith(_stdlib())
              or any(p in ("site-packages", "dist-packages") for p in path.split(os.sep))):
            k = LIBRARY
        else:
            k = PROGRAM
        _kind[filename] = k
    return k


def is_tool_file(filename: str) -> bool:
    """Whether ``filename`` is torch's, the engine's or the debugger's (not the program's)."""
    return file_kind(filename) >= TORCH


def _stdlib() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib")})


class Sites:
    """Where the forward ops ran: per torch call that made nodes, the newest node's
    ``sequence_nr`` and an interned key of the call's frames (innermost first, up to the
    frame that entered ``capture()``); each ``(code, line)`` formatted once."""

    def __init__(self) -> None:
        self.stop: Any = None  # the frame that entered capture(): the walk ends there
        self.seqs: list[int] = []
        self.first = 0  # the first call's newest sequence_nr, less its nodes (unknown): 0
        self.keys: list[int] = []  # per call: an index into _uniq (no tuple hashed twice)
        self._interned: dict[tuple[Any, ...], int] = {}
        self._uniq: list[tuple[Any, ...]] = []
        self._resolved: list[tuple[str | None, str | None, list[str]] | None] = []
        self._frames: dict[tuple[Any, int], str] = {}
        self.resolves = 0  # how many keys were resolved (each once)
        self._frames_last: list[Any] = []  # the last call's frames and key (note)
        self._key_last: list[Any] = []

    def done(self) -> None:
        """The forward is over: no frame kept (their locals with them)."""
        self.stop = None
        self._frames_last, self._key_last = [], []

    def program_frames(self) -> list[Any]:
        """The program's own frames of the last call, outermost first (``done`` drops
        them): the entry's among them, its locals kept by the frame after it returned."""
        return [f for f in reversed(self._frames_last)
                if file_kind(f.f_code.co_filename) == PROGRAM]

    def note(self, out: Any, depth: int = 2) -> None:
        """A torch call returned ``out``: keep its site if it made a newer node."""
        try:  # a view made under no_grad and changed in place refuses .grad_fn
            if isinstance(out, (tuple, list)):  # (values, indices): the first with a node
                out = next((t for t in out if getattr(t, "grad_fn", None) is not None), None)
            fn = getattr(out, "grad_fn", None)
        except RuntimeError:
            return
        if fn is None:
            return
        seq = fn._sequence_nr()
        if self.seqs and seq <= self.seqs[-1]:
            return  # an older node (an op that returned its input): nothing new
        # The frames above the innermost one the last call shared are suspended in the
        # same calls, at the same lines: reuse their part of the key (kept innermost
        # first), walk only the new ones.
        f, stop, frames, key = sys._getframe(depth), self.stop, [], []
        last, head = self._frames_last, self._frames_last[:6]
        while f is not None:
            frames.append(f)
            key.append(f.f_code)
            key.append(f.f_lineno)
            if f in head:  # identity: frames compare by it
                j = last.index(f)
                frames += last[j + 1:]
                key += self._key_last[2 * j + 2:]
                break
            if f is stop:
                break
            f = f.f_back
        self._frames_last, self._key_last = frames, key
        k = tuple(key)
        if not self.seqs:
            self.first = seq
        self.seqs.append(seq)
        i = self._interned.get(k)
        if i is None:
            i = self._interned[k] = len(self._uniq)
            self._uniq.append(k)
            self._resolved.append(None)
        self.keys.append(i)

    def of(self, fn: Any) -> tuple[str | None, str | None, list[str]]:
        """``created`` (the innermost frame of the program's own), its ``source`` line and
        the ``stack`` (outermost first, the ``STACK_MAX`` innermost) of ``fn``'s op."""
        try:
            seq = fn._sequence_nr()
        except Exception:  # noqa: BLE001 - not a node
            return None, None, []
        return self.at(seq)

    def at(self, seq: int) -> tuple[str | None, str | None, list[str]]:
        """``of`` the node whose ``sequence_nr`` is ``seq``."""
        i = bisect.bisect_left(self.seqs, seq)
        if i == len(self.seqs):
            return None, None, []
        k = self.keys[i]
        hit = self._resolved[k]
        if hit is None:
            hit = self._resolved[k] = self._resolve(self._uniq[k])
        return hit

    def _resolve(self, key: tuple[Any, ...]) -> tuple[str | None, str | None, list[str]]:
        self.resolves += 1
        # our own frames (the runner, the modes) are no part of the program's stack, nor
        # torch's dispatch to a mode (handle_torch_function: there only because ours is on)
        pairs = [(c, ln) for c, ln in zip(key[0::2], key[1::2])
                 if file_kind(c.co_filename) != OURS and c is not _dispatch_code()]
        created = source = None
        for code, line in pairs:
            if file_kind(code.co_filename) == PROGRAM:
                created = self.frame(code, line)
                source = linecache.getline(code.co_filename, line).strip() or None
                break
        stack = [self.frame(c, ln) for c, ln in reversed(pairs[:STACK_MAX])]
        return created, source, stack

    def frame(self, code: Any, line: int) -> str:
        text = self._frames.get((code, line))
        if text is None:
            text = self._frames[(code, line)] = f"{code.co_filename}:{line} in {code.co_name}"
        return text


def site_mode(sites: Sites, inner: Any = None, hop: list[int] | None = None) -> Any:
    """A ``TorchFunctionMode`` that notes each call's site (``Sites.note``).  ``inner``:
    another mode's ``__torch_function__`` to run the call through (``program`` passes
    the in-place log's), one Python dispatch per op instead of one per mode.  ``hop``:
    ``[n]``, n higher-order ops (``torch.cond``) running: the mode only calls through
    (dynamo traces it)."""
    hop = [0] if hop is None else hop
    from torch import is_grad_enabled as grad_enabled
    from torch.overrides import TorchFunctionMode

    class SiteMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if hop[0]:  # a higher-order op: no site (its node's is its call's)
                return func(*args, **(kwargs or {}))
            if inner is None:
                out = func(*args, **(kwargs or {}))
            else:
                out = inner(func, types, args, kwargs)
            if grad_enabled():  # no node is made under no_grad
                sites.note(out)
            return out

    return SiteMode()


@contextlib.contextmanager
def warnings_at_callers() -> Iterator[None]:
    """A warning ATen raises in an op (``Sparse CSR tensor support is in beta state``) is
    attributed to the innermost Python frame, which under the forward capture is the
    mode's, in our file: shown at the frame that called the op instead, as without the
    tool (ours and ``handle_torch_function``'s skipped)."""
    orig = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        if file_kind(filename) == OURS:
            f, dispatch = sys._getframe(1), _dispatch_code()
            while f is not None and (file_kind(f.f_code.co_filename) == OURS
                                     or f.f_code is dispatch or f.f_code.co_filename
                                     == warnings.__file__):
                f = f.f_back
            if f is not None:
                filename, lineno, line = f.f_code.co_filename, f.f_lineno, None
        orig(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        if warnings.showwarning is show:  # the program's own replacement stays
            warnings.showwarning = orig


@functools.cache
def _dispatch_code() -> Any:
    """``handle_torch_function``'s code (read when a site is first resolved: importing
    this module must not import torch)."""
    try:
        from torch.overrides import handle_torch_function
    except ImportError:  # a torch without it: nothing of it in any stack
        return None
    return getattr(handle_torch_function, "__code__", None)


def _package_dir(name: str) -> str:
    import importlib

    return os.path.dirname(os.path.abspath(importlib.import_module(name).__file__ or ""))




# --- warnings raised in a bridged backward ----------------------------------------------------
_warn_lock = threading.Lock()
_warn_depth = 0
_shown_by: list[Any] = []  # warnings.showwarning before install()


def install_warnings() -> None:
    """While a bridged backward runs, a warning located in our engine's code is shown at
    PyTorch's backward call (counted: reentrant backwards nest)."""
    global _warn_depth
    with _warn_lock:
        _warn_depth += 1
        if _warn_depth == 1:
            _shown_by[:] = [warnings.showwarning]
            warnings.showwarning = _showwarning


def uninstall_warnings() -> None:
    global _warn_depth
    with _warn_lock:
        _warn_depth -= 1
        if _warn_depth == 0:
            if warnings.showwarning is _showwarning:  # else the program replaced it since
                warnings.showwarning = _shown_by[0]
            _shown_by.clear()


def _showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
    at = pytorchs_backward_line() if file_kind(filename) == OURS else None
    if at is not None:
        filename, lineno, line = at[0], at[1], None
    show = _shown_by[0] if _shown_by else warnings._showwarning_orig  # type: ignore[attr-defined]
    show(message, category, filename, lineno, file, line)


@functools.cache
def pytorchs_backward_line() -> tuple[str, int] | None:
    """Where PyTorch's Python calls its C++ engine (``_engine_run_backward``'s
    ``run_backward(`` line, ``torch/autograd/graph.py``): a warning raised in a node or a
    hook shows there, the innermost Python frame.  None for a torch without it."""
    try:
        import inspect

        from torch.autograd import graph

        lines, start = inspect.getsourcelines(graph._engine_run_backward)
    except (ImportError, AttributeError, OSError, TypeError):
        return None
    for i, text in enumerate(lines):
        if "run_backward(" in text and not text.lstrip().startswith("def "):
            return inspect.getsourcefile(graph._engine_run_backward) or "", start + i
    return None
