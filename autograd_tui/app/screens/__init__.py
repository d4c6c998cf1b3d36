"""The app's dialogs and text screens, one module each."""

from autograd_tui.app.screens.breakpoints import BreakpointsScreen
from autograd_tui.app.screens.confirm import ConfirmScreen
from autograd_tui.app.screens.export_dialog import ExportScreen
from autograd_tui.app.screens.goto import GotoScreen
from autograd_tui.app.screens.help import HELP, HelpScreen
from autograd_tui.app.screens.jump import JumpScreen
from autograd_tui.app.screens.modal import Modal
from autograd_tui.app.screens.output import OutputScreen
from autograd_tui.app.screens.scenario_picker import ScenarioScreen
from autograd_tui.app.screens.text import TextScreen

__all__ = [
    "HELP", "BreakpointsScreen", "ConfirmScreen", "ExportScreen", "GotoScreen", "HelpScreen",
    "JumpScreen", "Modal", "OutputScreen",
    "ScenarioScreen", "TextScreen",
]
