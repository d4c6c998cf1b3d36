"""autograd-tui: a step-through debugger and visualizer for the ``engine`` autograd engine.

This package holds the Textual app and the command line. It reads engine events and
state; it must not import engine internals at import time.
"""

__version__ = "0.1.0"
