"""The PyTorch bridge (being laid out in layers: see the next commit)."""

from .bridge import TorchBridgeError, from_torch
from .capture import capture, run_program

__all__ = ["TorchBridgeError", "capture", "from_torch", "run_program"]
