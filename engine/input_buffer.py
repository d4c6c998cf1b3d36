"""``InputBuffer``: where the gradients for one node's inputs accumulate.

Mirrors ``torch/csrc/autograd/input_buffer.cpp``: one slot per input of the
node; the first gradient for a slot is moved in, later ones are added.  Under
grad mode (a ``create_graph`` backward) the sum is recorded, out of place.

Departure: PyTorch adds in place when it may steal the buffer; we always add
out of place (the result is the same, and a student's tensors are never
mutated behind their back).  A gradient a bridged PyTorch node made adds itself
(``buffer_add``), as PyTorch does: in ATen, in its own dtype (bfloat16, which
NumPy cannot hold) and with ATen's memory layout.  Streams and ready events are
not modelled.
"""

from __future__ import annotations

from .grad_mode import _tls as _grad_tls
from .tensor import Tensor


class InputBuffer:
    __slots__ = ("buffer",)

    def __init__(self, size: int) -> None:
        self.buffer: list[Tensor | None] = [None] * size

    def add(self, pos: int, var: Tensor | None) -> str:
        """Accumulate ``var`` into slot ``pos``; return "first", "add" or "undefined"."""
        if var is None:
            return "undefined"  # an undefined gradient is ignored
        old = self.buffer[pos]
        if old is None:
            self.buffer[pos] = var
            return "first"
        # A PyTorch node's gradient (a Tensor subclass) adds itself; ours has no
        # buffer_add (the type test first: a missing attribute is a costly miss).
        buffer_add = getattr(old, "buffer_add", None) if type(old) is not Tensor else None
        if buffer_add is not None:
            self.buffer[pos] = buffer_add(var)
        elif getattr(_grad_tls, "enabled", True):  # grad_mode.is_grad_enabled(), inlined
            self.buffer[pos] = old + var
        else:
            self.buffer[pos] = Tensor(old.data + var.data, device=old.device)
        return "add"

    def device(self) -> str:
        """The first non-CPU device among the defined gradients, else cpu."""
        for var in self.buffer:
            if var is not None and var.device != "cpu":
                return var.device
        return "cpu"

    def __len__(self) -> int:
        return len(self.buffer)

    @staticmethod
    def variables(buf: InputBuffer) -> list[Tensor | None]:
        return list(buf.buffer)
