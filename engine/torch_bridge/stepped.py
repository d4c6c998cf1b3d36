"""A program that steps its optimizer inside the backward: what ``check-order`` keeps to
run PyTorch's backward after ours from the same start.

PyTorch's tutorial fuses the optimizer step into the backward: a parameter's
``register_post_accumulate_grad_hook`` calls ``step()`` and ``zero_grad()`` as soon as its
``.grad`` is accumulated (``AccumulateGrad``'s post hooks, ``accumulate_grad.cpp``).  Ours,
the first backward on the shared forward pass, changes the parameters in place, so
PyTorch's, the second, finds a saved tensor changed.  ``StepState`` is what lets PyTorch's
run on a fresh forward pass instead: the parameters' values and the optimizers' states as
they were before ours, put back before the entry runs again.  Not PyTorch's (check-order's
own): the optimizers are found among the live objects (``gc``), as the program holds them
in its hooks' closures.
"""

from __future__ import annotations

import copy
import gc
from typing import Any

from .convert import torch_module


def hooked(leaves: dict[str, Any]) -> list[str]:
    """The leaves with a post-accumulate-grad hook (those a hook may step), by name."""
    return [k for k, p in leaves.items() if getattr(p, "_post_accumulate_grad_hooks", None)]


class StepState:
    """The leaves' values and the state of every optimizer that holds one of them."""

    def __init__(self, leaves: dict[str, Any]) -> None:
        torch = torch_module()
        self.names = set(hooked(leaves))
        self._values = [(p, p.detach().clone()) for p in leaves.values()]
        ids = {id(p) for p in leaves.values()}
        optim = torch.optim.Optimizer
        # type(o), not isinstance: isinstance asks o.__class__, which some of torch's
        # deprecated objects answer with a warning
        self._optimizers = [(o, copy.deepcopy(o.state_dict())) for o in gc.get_objects()
                            if issubclass(type(o), optim) and any(
                                id(p) in ids for g in o.param_groups for p in g["params"])]

    @classmethod
    def take(cls, leaves: dict[str, Any]) -> StepState | None:
        """The state before a backward, when a leaf has a post-accumulate-grad hook."""
        return cls(leaves) if hooked(leaves) else None

    def restore(self) -> None:
        """Put the values and the optimizers' states back (a step taken since undone)."""
        torch = torch_module()
        with torch.no_grad():
            for p, v in self._values:
                p.copy_(v)
        for o, state in self._optimizers:
            o.load_state_dict(copy.deepcopy(state))

    def compare(self, pairs: dict[str, tuple[Any, Any]], theirs: dict[str, Any],
                ours: dict[str, Any]) -> str:
        """A parameter the hook stepped has no ``.grad`` left in either run (the hook's
        ``zero_grad``): its value after the step, PyTorch's and ours, is put in ``pairs``
        in place of the two Nones.  Returns what to say of it."""
        for k, (t, o) in list(pairs.items()):
            if t is None and o is None and k in self.names:
                pairs[k] = (theirs[k], ours[k])
        return ("the program steps its optimizer in the backward (a post-accumulate-grad "
                "hook), which changed the parameters during ours: PyTorch's ran on a fresh "
                "forward pass (the entry run again) from the parameters and optimizer state "
                "the program had before ours; a parameter whose .grad the hook cleared is "
                "compared by its value after the step")


def same_loss(start: Any, loss: Any) -> bool:
    """A fresh forward pass's loss is the shared one's, bit for bit (``start`` None: not
    asked): from the same parameters, a seeded program computes the same loss."""
    torch = torch_module()
    if start is None:
        return True
    a = [start] if isinstance(start, torch.Tensor) else list(start)
    b = [loss] if isinstance(loss, torch.Tensor) else list(loss)
    return len(a) == len(b) and all(torch.equal(x.detach(), y.detach()) for x, y in zip(a, b))
