"""Where a run is put together: a scenario or a torch script, an engine, a controller, a History.

``run.py`` builds one run (``Run``: engine, controller, History) from a scenario;
``torch_script.py`` turns a user's PyTorch script into a scenario; ``session.py`` holds
``Session``, the one thing the app opens (a live run or a recording); and
``program_errors.py`` locates an error in the user's own program (file, line, source).
"""

from autograd_tui.session.session import Breakpoint, Session

__all__ = ["Breakpoint", "Session"]
