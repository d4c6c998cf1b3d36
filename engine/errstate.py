"""``ignore_errors``: ``np.errstate(all="ignore")`` that the ops can see.

Not in PyTorch (torch computes with inf and NaN silently; NumPy warns unless told
not to).  ``thread_main`` runs every node under ``ignore_errors()``, and every op
also ignores errors around its own NumPy call.  Entering ``np.errstate`` costs
about as much as the NumPy call itself, so an op first asks ``errors_ignored()``:
true when NumPy's current error state is one that ``ignore_errors`` entered (and
nobody has changed since), where its own ``np.errstate(all="ignore")`` would set
an identical state.  NumPy (2.x) keeps that state in a context variable; where it
does not, ``errors_ignored()`` is always false and the ops enter ``np.errstate``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

try:  # NumPy >= 2: the error state is one context variable
    from numpy._core._ufunc_config import _extobj_contextvar as _state
except ImportError:  # pragma: no cover - older NumPy: no shortcut
    _state = None

#: the error states entered by ``ignore_errors`` and not yet left (every error ignored)
_ignoring: set[Any] = set()


@contextmanager
def ignore_errors() -> Iterator[None]:
    """``with np.errstate(all="ignore"):``, announced to ``errors_ignored``."""
    with np.errstate(all="ignore"):
        if _state is None:
            yield
            return
        state = _state.get()
        _ignoring.add(state)  # one object per entry: nested and concurrent entries are distinct
        try:
            yield
        finally:
            _ignoring.discard(state)


def errors_ignored() -> bool:
    """True if NumPy already ignores every floating-point error here (see module doc)."""
    return _state is not None and _state.get() in _ignoring
