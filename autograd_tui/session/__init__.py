"""Where a run is put together: a scenario or a torch script, an engine, a controller, a History.

``run.py`` builds one run (``Run``: engine, controller, History) from a scenario;
``torch_script.py`` turns a user's PyTorch script into a scenario; ``session.py`` holds
``Session``, the one thing the app opens (``Session.open``: a live run or a recording;
``ScenarioError`` when a scenario cannot be loaded); and
``program_errors.py`` locates an error in the user's own program (file, line, source).
"""

from autograd_tui.scenarios import ScenarioError
from autograd_tui.session.session import Breakpoint, Session, builtin_scenarios

__all__ = ["Breakpoint", "ScenarioError", "Session", "builtin_scenarios"]
