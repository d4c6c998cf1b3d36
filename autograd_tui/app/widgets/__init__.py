"""The app's widgets, one module each: the line widgets (``LineTable``, ``TextView``,
``TextLine``) and the panes built on them."""

from autograd_tui.app.widgets.banner import Banner
from autograd_tui.app.widgets.event_log import EventLog
from autograd_tui.app.widgets.graph_pane import GraphPane
from autograd_tui.app.widgets.header import Header
from autograd_tui.app.widgets.key_footer import KeyFooter
from autograd_tui.app.widgets.line_table import LineTable
from autograd_tui.app.widgets.pane_tabs import PaneTabs
from autograd_tui.app.widgets.rank_bar import RankBar
from autograd_tui.app.widgets.rows import Cell, LazyRows, Row, cells
from autograd_tui.app.widgets.side_pane import SidePane
from autograd_tui.app.widgets.text_line import TextLine
from autograd_tui.app.widgets.text_view import TextView
from autograd_tui.app.widgets.threads_pane import ThreadsPane, ThreadsTable
from autograd_tui.app.widgets.timeline import Timeline

__all__ = [
    "Banner", "Cell", "EventLog", "GraphPane", "Header", "KeyFooter", "LazyRows", "LineTable",
    "PaneTabs", "RankBar", "Row",
    "SidePane", "TextLine", "TextView", "ThreadsPane", "ThreadsTable", "Timeline", "cells",
]
