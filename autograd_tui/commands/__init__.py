"""The command line: ``autograd-tui`` (also ``python -m autograd_tui``).

One parser (``parser.py``: ``build_parser``, ``main``), one module per command
(``list_cmd``, ``show``, ``run``, ``replay``, ``chrome_trace``, ``export``,
``torch_cmd``, ``check_order``, ``serve``) and
what they share (``common.py``: exit codes, ``UsageError``/``Failure``, ``K=V``
options, making a Run, loading a recording, the headless trace).
"""

from autograd_tui.commands.parser import build_parser, main

__all__ = ["build_parser", "main"]
