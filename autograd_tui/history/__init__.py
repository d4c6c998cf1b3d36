"""One run's events: the History (fold, checkpoints, seek), recordings, the Chrome trace.

``state.py`` holds what a person can see (``EngineState``), ``fold.py`` how each
event changes it, ``history.py`` the one store of a run's events; ``recordings.py``
reads and writes them as files, ``chrome_trace.py`` writes them for Perfetto.
"""

from autograd_tui.history.fold import fold
from autograd_tui.history.history import History
from autograd_tui.history.state import (
    NODE_STATES,
    EngineState,
    GraphTaskState,
    NodeState,
    StateError,
    ThreadState,
)

__all__ = ["NODE_STATES", "EngineState", "GraphTaskState", "History", "NodeState",
           "StateError", "ThreadState", "fold"]
