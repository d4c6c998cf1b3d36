"""``engine.functional``: ``linear`` (one node with three inputs)."""

from __future__ import annotations

from .ops import linear

__all__ = ["linear"]
