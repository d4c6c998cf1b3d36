"""Graphviz snapshots of a backward pass: one state, or a sequence of frames.

Not in PyTorch.  Modules, one job each:

- ``style``: colours, the legend's states, and the quoting of text into DOT;
- ``labels``: what each box says (a node's table, collapsed leaves, the side
  table, the title and ``event_text``);
- ``dot``: ``to_dot(state)``, the layout of one state as DOT text;
- ``modules``: a PyTorch graph's nn.Module clusters, nested, repeated blocks folded;
- ``render``: running Graphviz ``dot``, output formats, and ``ExportError``;
- ``frames``: which events get a frame, the states after them, ``index.html``;
- ``snapshot``: ``Snapshot``, one state as an object a Jupyter notebook displays;
- ``write``: ``export_state`` (one file; the app's export dialog uses it) and
  ``write_frames`` (a folder of frames), through ``autograd_tui.files``.

Numbering (docs/architecture.md): event k is the k-th event (1-based); a
snapshot "at k" is ``History.state_at(k)``, the state after events 1..k.
"""

from autograd_tui.export.dot import RANKDIRS, to_dot
from autograd_tui.export.frames import (
    BREAKPOINT_KINDS,
    Frame,
    frame_events,
    index_html,
    states_after,
)
from autograd_tui.export.labels import event_text, slot_text
from autograd_tui.export.render import (
    FORMATS,
    INSTALL_HINT,
    DotNotFound,
    ExportError,
    RenderError,
    dot_path_for,
    find_dot,
    format_for,
    render,
    render_failure_message,
)
from autograd_tui.export.snapshot import Snapshot, snapshot
from autograd_tui.export.style import STATE_STYLE
from autograd_tui.export.write import check_output, export_state, write_bytes, write_frames

__all__ = [
    "BREAKPOINT_KINDS", "FORMATS", "INSTALL_HINT", "RANKDIRS", "STATE_STYLE", "DotNotFound",
    "ExportError", "Frame", "RenderError", "Snapshot", "check_output", "dot_path_for", "event_text",
    "export_state", "find_dot", "format_for", "frame_events", "index_html", "render",
    "render_failure_message", "slot_text", "snapshot", "states_after", "to_dot", "write_bytes",
    "write_frames",
]
