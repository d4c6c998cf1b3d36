"""Comparing two gradients as ``torch.testing.assert_close`` does, or bitwise.

``check-order`` compares every leaf's ``.grad`` from our run (``actual``) with
PyTorch's (``expected``): close when ``|actual - expected| <= atol + rtol *
|expected|`` element by element, with ``assert_close``'s default tolerances for
the dtype (``TOLERANCES``), NaNs equal where both are NaN, infinities equal
where equal.  ``exact`` asks for the same bits.  The worst element (the one
nearest to, or furthest past, its tolerance) is what a message names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# torch.testing.assert_close's defaults (rtol, atol) by dtype (its documentation's table).
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex32": (1e-3, 1e-5), "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def tolerances(dtype: Any) -> tuple[float, float]:
    return TOLERANCES.get(str(dtype).replace("torch.", ""), (0.0, 0.0))


@dataclass
class Worst:
    """One leaf's worst element: where, both values, the differences, the tolerances."""

    name: str
    index: tuple[int, ...]
    expected: complex | float
    actual: complex | float
    abs_diff: float
    rel_diff: float
    rtol: float
    atol: float
    dtype: str
    ok: bool
    mismatched: int = 0
    total: int = 0
    exact: bool = False

    def text(self) -> str:
        idx = "[" + ", ".join(map(str, self.index)) + "]" if self.index else ""
        tol = ("bitwise (--exact)" if self.exact
               else f"{self.dtype} rtol {self.rtol:g}, atol {self.atol:g}")
        head = (f"{self.mismatched} of {self.total} elements differ; worst "
                if not self.ok else "")
        return (f"{head}{self.name}{idx}: PyTorch {self.expected!r}, ours {self.actual!r} "
                f"(abs diff {self.abs_diff:.3g}, rel diff {self.rel_diff:.3g}; {tol})")

    @property
    def margin(self) -> float:
        """abs diff / allowed: above 1 fails; how a summary picks the closest call."""
        allowed = self.atol + self.rtol * abs(self.expected)
        if self.abs_diff != self.abs_diff:
            return float("inf")
        return self.abs_diff / allowed if allowed > 0 else (0.0 if not self.abs_diff
                                                             else float("inf"))


def compare(name: str, expected: Any, actual: Any, exact: bool = False) -> Worst | None:
    """Two torch tensors of one shape and dtype; the worst element (None if empty)."""
    import torch

    rtol, atol = (0.0, 0.0) if exact else tolerances(expected.dtype)
    if expected.numel() == 0:
        return None
    if _same_bits(expected, actual):  # the usual answer, without the float64 copies below
        first = _scalar(expected.detach().reshape(-1)[0])  # (which were 2/3 of check-order's
        index = tuple(0 for _ in expected.shape)  # time on a resnet50, every leaf agreeing)
        rel = 0.0 / abs(first) if first else 0.0  # as below: NaN beside a NaN
        return Worst(name, index, first, first, 0.0, rel, rtol, atol,
                     str(expected.dtype).replace("torch.", ""), True, 0, expected.numel(), exact)
    wide = torch.complex128 if expected.is_complex() else torch.float64
    e = expected.detach().cpu().to(wide)
    a = actual.detach().cpu().to(wide)
    if e.numel() == 0:
        return None
    both_nan = e.isnan() & a.isnan()
    diff = (a - e).abs()
    diff = torch.where(both_nan | (a == e), torch.zeros_like(diff), diff)
    diff = torch.where(diff.isnan(), torch.full_like(diff, float("inf")), diff)
    allowed = torch.where(e.isfinite(), atol + rtol * e.abs(), 0.0)  # inf, NaN: equal only
    bad = (diff > allowed).reshape(-1)
    if exact:  # the same bits (-0.0 is not 0.0; NaN payloads count)
        bad = bad | (_bits(expected) != _bits(actual)).any(dim=1)
    diff, allowed = diff.reshape(-1), allowed.reshape(-1)
    if bad.any():  # the failing element with the largest difference
        flat = int(torch.argmax(torch.where(bad, diff, torch.full_like(diff, -1.0))))
    else:  # the element nearest its tolerance
        ratio = torch.where(allowed > 0, diff / allowed.clamp_min(1e-300), diff)
        flat = int(torch.argmax(ratio))
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(e.shape)))
    ev, av = _scalar(e.reshape(-1)[flat]), _scalar(a.reshape(-1)[flat])
    d = float(diff[flat])
    rel = d / abs(ev) if ev else (0.0 if not d else float("inf"))
    return Worst(name, index, ev, av, d, rel, rtol, atol,
                 str(expected.dtype).replace("torch.", ""), not bool(bad.any()),
                 int(bad.sum()), e.numel(), exact)


def _scalar(t: Any) -> complex | float:
    v = t.item()
    return v if isinstance(v, complex) else float(v)


def _same_bits(expected: Any, actual: Any) -> bool:
    """Both tensors hold the same bits: every element equal, and a comparison's worst is its
    first (a zero difference everywhere, as the elementwise path below finds)."""
    import torch

    return (expected.shape == actual.shape and expected.dtype == actual.dtype
            and torch.equal(_bits(expected), _bits(actual)))


def _bits(t: Any) -> Any:
    """Each element's bits, one row per element."""
    import torch

    flat = t.detach().cpu().contiguous().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).contiguous()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return flat.view(ints[flat.element_size()]).reshape(t.numel(), -1)


def mkl_note() -> str | None:
    """For a comparison of PyTorch's results bit for bit that found a difference
    (``check-order --exact``, ``replay --reexecute`` of a PyTorch program): that MKL's may
    differ from run to run, and the switch that pins them; None where PyTorch does not call
    MKL or ``MKL_CBWR`` is set.  A maxvit_t's squeeze-excite convolutions differed in 7
    elements of one gradient between two backward passes on one forward pass, and not with
    it.  ``torch --headless`` compares nothing (its norms have 6 digits): no note there."""
    import os

    import torch

    if not torch.backends.mkl.is_available() or os.environ.get("MKL_CBWR"):
        return None
    return ("MKL's results (PyTorch's CPU matrix products and convolutions) may differ in "
            "the last bits from one call to the next, by memory alignment; run with "
            "MKL_CBWR=AVX2,STRICT in the environment to make them reproducible and compare "
            "again")
