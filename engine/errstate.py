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

from typing import Any

import numpy as np

try:  # NumPy >= 2: the error state is one context variable
    from numpy._core._ufunc_config import _extobj_contextvar as _state
except ImportError:  # pragma: no cover - older NumPy: no shortcut
    _state = None

#: error states that ignore every error, made by ``ignore_errors``
_ignoring: set[Any] = set()


#: a base error state -> the state ``np.errstate(all="ignore")`` makes from it (the
#: base's buffer size and callback kept), made once: entering it is then two context
#: variable calls, where ``np.errstate`` builds a new state each time (the engine enters
#: it per ``thread_main``: twice a run of two threads).  Each value is in ``_ignoring``
#: for good: whenever it is current, every error is ignored, whoever made it current.
_IGNORE_OF: dict[Any, Any] = {}
_IGNORE_OF_MAX = 64  # distinct base states kept (past it: a state per entry, as before)


class ignore_errors:  # noqa: N801 - reads like a function: ``with ignore_errors():``
    """``with np.errstate(all="ignore"):``, announced to ``errors_ignored``."""

    __slots__ = ("_errstate", "_made", "_token")

    def __enter__(self) -> None:
        if _state is None:  # pragma: no cover - older NumPy
            self._errstate = np.errstate(all="ignore")
            self._errstate.__enter__()
            return
        base = _state.get()
        state = base if base in _ignoring else _IGNORE_OF.get(base)
        self._made = None
        if state is None:  # NumPy's own construction, once per base state
            with np.errstate(all="ignore"):
                state = _state.get()
            if len(_IGNORE_OF) < _IGNORE_OF_MAX:  # (two threads at once: one state kept)
                state = _IGNORE_OF.setdefault(base, state)
            else:
                self._made = state  # one object per entry: nested entries stay distinct
            _ignoring.add(state)
        self._token = _state.set(state)

    def __exit__(self, *exc: object) -> None:
        if _state is None:  # pragma: no cover - older NumPy
            self._errstate.__exit__(*exc)
            return
        _state.reset(self._token)
        if self._made is not None:
            _ignoring.discard(self._made)


def errors_ignored() -> bool:
    """True if NumPy already ignores every floating-point error here (see module doc)."""
    return _state is not None and _state.get() in _ignoring
