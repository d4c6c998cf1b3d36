"""A user's unmodified training script, run as ``python train.py ARGS`` runs it, up to
its Nth backward call, whose arguments become what an entry function returns.

Mirrors no part of ``engine.cpp``: it is how a plain script reaches ``run_program``.
``torch.autograd.backward`` is watched (``Tensor.backward`` calls it, and so do
accelerate's ``Accelerator.backward`` and a GradScaler's ``scaler.scale(loss).backward()``):
the first N-1 calls run on PyTorch's engine, as the script asked; the Nth raises
``_StopScript``, a ``BaseException`` (an ``except Exception:`` in the script does not
swallow it; its ``finally`` blocks and ``with`` exits run), and ``ScriptEntry()`` returns
that call's ``(tensors, grad_tensors, inputs)``, as an entry function returns
``(loss, grad_outputs, inputs)``: ``run_program`` and ``check_order`` take it unchanged.

Departs from ``python train.py``: the script runs on the calling thread (the app's
program thread), and nothing after the Nth call runs.  Only the script's own thread is
counted: a forked child's calls (``mnist_hogwild``'s trainers) run on PyTorch's engine
in that child, as another thread's do (the processes it started are counted, and said
when the script ends before its Nth call).  A nested call (a reentrant
checkpoint's backward inside a node) is not counted: PyTorch's engine runs it inside
the call that made it.  ``torch.autograd.grad`` is not a backward call here: it runs
on PyTorch's engine and the notes say how many ran.  ``create_graph=True`` at the Nth
call is stepped without the gradients' graph (the script stops there: nothing uses it).
What the script compiles with ``torch.compile`` runs eagerly (``watch_compile``) and is
said once it has been called (a script whose source names it may not call it).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import runpy
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .compiled import CompileWatch
from .convert import TorchBridgeError, torch_module
from .sites import PROGRAM, file_kind


class ScriptEnded(TorchBridgeError):
    """The script ended (ran to its end, or called ``sys.exit``) before its Nth backward."""


class _StopScript(BaseException):  # noqa: N818 - not an error: the script is stopped here
    """Raised at the Nth backward call; a BaseException so ``except Exception`` passes it."""


@dataclass
class StoppedAt:
    """The backward call the script was stopped at, and what it was called with."""

    number: int  # 1-based: the script's Nth backward call
    where: str  # file:line of the script's own frame that called it
    args: tuple[Any, Any, Any]  # (tensors, grad_tensors, inputs)
    create_graph: bool


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``22nd``."""
    end = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{end}"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def shown(filename: str) -> str:
    """A path as the person would type it: relative to the working folder when inside it."""
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if rel.startswith("..") else rel


def caller(depth: int = 2) -> str:
    """``file:line`` of the program's own frame that made this call (past torch,
    accelerate and the tool: the first frame in the program's files), else the caller's."""
    f = first = sys._getframe(depth)
    while f is not None and file_kind(f.f_code.co_filename) != PROGRAM:
        f = f.f_back
    f = f or first
    return f"{shown(f.f_code.co_filename)}:{f.f_lineno}"


class ScriptEntry:
    """``entry()`` runs the script at ``path`` as ``__main__`` (``sys.argv`` is
    ``[path, *argv]``, its folder first on ``sys.path``, both put back afterwards) up to
    its ``backward``-th backward call and returns that call's arguments; each call runs
    the script afresh.  ``stopped``, ``calls`` and ``grad_calls`` tell what the last run
    did; ``notes()`` says it in words."""

    def __init__(self, path: str, argv: Sequence[str] = (), backward: int = 1) -> None:
        if backward < 1:
            raise ValueError(f"the backward call to step counts from 1, not {backward}")
        self.path, self.argv, self.backward = str(path), list(argv), backward
        self.__name__ = os.path.basename(self.path)
        self.stopped: StoppedAt | None = None
        self.calls = 0  # backward calls run on PyTorch's engine before the stop
        self.grad_calls = 0  # torch.autograd.grad calls, run on PyTorch's engine
        self.children = 0  # processes the script started: their backward calls are not seen
        self.compiled = CompileWatch()
        self._local = threading.local()  # depth: a call inside a backward is nested

    def __call__(self) -> tuple[Any, Any, Any]:
        self.stopped, self.calls, self.grad_calls, self.children = None, 0, 0, 0
        self.compiled = CompileWatch()  # what the script compiled (run eagerly meanwhile)
        name = shown(self.path)
        try:
            with self._watching(), _as_main(self.path, self.argv):
                runpy.run_path(self.path, run_name="__main__")
        except _StopScript:
            pass
        except SystemExit as e:
            if self.stopped is None:  # its own exit, before the Nth call: nothing to step
                raise ScriptEnded(f"{name} called {_exit_call(e)} after "
                                  f"{self._calls_said()}, before its {self._nth()}") from None
        except BaseException:
            if self.stopped is None:  # the script's own error: located at its line
                raise
        if self.stopped is None:  # ran to its end
            raise ScriptEnded(self._ended(name))
        return self.stopped.args

    def _nth(self) -> str:
        return f"{ordinal(self.backward)} (--backward {self.backward})"

    def _calls_said(self) -> str:
        return _plural(self.calls, "backward call")

    def _ended(self, name: str) -> str:
        if self.calls == 0:
            grads = (f"; its {_plural(self.grad_calls, 'torch.autograd.grad call')} ran on "
                     "PyTorch's engine: only backward calls are stepped (loss.backward(), "
                     "torch.autograd.backward)" if self.grad_calls else "")
            return (f"{name} ran to its end and called no backward (loss.backward(), "
                    f"torch.autograd.backward): nothing to step{grads}{self._children_said()}")
        return (f"{name} ran to its end after {self._calls_said()}; --backward "
                f"{self.backward} asks for a {ordinal(self.backward)}{self._children_said()}")

    def _children_said(self) -> str:
        # mnist_hogwild trains only in multiprocessing children: say why none was seen
        if not self.children:
            return ""
        n = self.children
        return (f"; it started {n} child process{'' if n == 1 else 'es'} (multiprocessing): "
                f"{'its' if n == 1 else 'their'} backward calls ran there, on PyTorch's "
                "engine; only the script's own process and thread are stepped")

    def notes(self) -> list[str]:
        """What happened, in words (one note), after a run that stopped."""
        s = self.stopped
        if s is None:
            return []
        out = [f"stepped the script's {ordinal(s.number)} backward call ({s.where})"]
        if s.number > 1:
            before = "the one" if s.number == 2 else f"the {s.number - 1}"
            out.append(f"{before} before it ran on PyTorch's engine")
        if self.grad_calls:
            out.append(f"its {_plural(self.grad_calls, 'torch.autograd.grad call')} before "
                       "it ran on PyTorch's engine (not stepped)")
        out.append("the script was stopped there, the rest of it did not run")
        if self.compiled.note():
            out.append(str(self.compiled.note()))
        if s.create_graph:
            out.append("the call asked for create_graph=True: the stepped backward does not "
                       "build the gradients' graph (the script stops there: nothing uses it)")
        return ["; ".join(out)]

    @contextlib.contextmanager
    def _watching(self) -> Iterator[None]:
        """``torch.autograd.backward`` and ``grad`` counted on this thread; the Nth
        backward (and any after it, should the script catch the first stop) stops it."""
        torch = torch_module()
        ag, real_compile = torch.autograd, torch.compile
        real_backward, real_grad = ag.backward, ag.grad
        process = multiprocessing.process.BaseProcess
        real_start = process.start
        local, mine, pid = self._local, threading.get_ident(), os.getpid()

        def counted() -> bool:  # this thread, not a nested call, not a forked child's
            return threading.get_ident() == mine and not getattr(local, "depth", 0) \
                and os.getpid() == pid

        def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
                     create_graph: bool = False, grad_variables: Any = None,
                     inputs: Any = None) -> Any:
            if not counted():
                return real_backward(tensors, grad_tensors, retain_graph, create_graph,
                                     grad_variables, inputs=inputs)
            if self.stopped is None and self.calls + 1 == self.backward:
                if grad_tensors is None:
                    grad_tensors = grad_variables  # its deprecated name
                self.stopped = StoppedAt(self.backward, caller(),
                                         (tensors, grad_tensors, inputs), bool(create_graph))
            if self.stopped is not None:
                raise _StopScript
            self.calls += 1
            local.depth = 1
            try:
                return real_backward(tensors, grad_tensors, retain_graph, create_graph,
                                     grad_variables, inputs=inputs)
            finally:
                local.depth = 0

        def grad(*args: Any, **kwargs: Any) -> Any:
            if not counted():
                return real_grad(*args, **kwargs)  # capture's mode calls it again: once
            self.grad_calls += 1
            local.depth = 1
            try:
                return real_grad(*args, **kwargs)
            finally:
                local.depth = 0

        def compile_(model: Any = None, **kwargs: Any) -> Any:
            if model is not None:  # said after the run: the script may not compile at all
                self.compiled.record(model)
            return real_compile(model, **kwargs)

        def start(proc: Any) -> None:
            if os.getpid() == pid:
                self.children += 1
            real_start(proc)

        ag.backward, ag.grad, torch.compile = backward, grad, compile_
        process.start = start  # type: ignore[method-assign]
        try:
            yield
        finally:
            ag.backward, ag.grad, torch.compile = real_backward, real_grad, real_compile
            process.start = real_start  # type: ignore[method-assign]


@contextlib.contextmanager
def _as_main(path: str, argv: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path`` as ``python path ARGV`` sets them; put back after."""
    saved_path, saved_argv = list(sys.path), sys.argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    sys.argv = [path, *argv]
    try:
        yield
    finally:
        sys.path[:] = saved_path
        sys.argv = saved_argv


def _exit_call(e: SystemExit) -> str:
    return "sys.exit()" if e.code is None else f"sys.exit({e.code!r})"
