"""What the PyTorch examples share: ``REQUIRES`` and their ``program``.

A PyTorch example is both a built-in scenario (``autograd-tui run torch-mlp``)
and a script for ``autograd-tui torch scenarios/torch_mlp.py``: ``main()``
builds the model and returns the loss; ``program()`` runs it through the
bridge (``engine/torch_bridge/``).  torch is imported inside ``main``, so
that listing the scenarios never needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

REQUIRES = ("torch",)


def program_of(main: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
    def program() -> dict[str, Any]:
        from autograd_tui.engine.torch_bridge import run_program

        return run_program(main)

    return program
