"""The Textual app: ``AutogradApp`` (``app.py``), its panes (``widgets/``), its dialogs
(``screens/``), the text of each pane (``render.py``) and one stylesheet (``app.tcss``)."""

from autograd_tui.app.app import AutogradApp

__all__ = ["AutogradApp"]
