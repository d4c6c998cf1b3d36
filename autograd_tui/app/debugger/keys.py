"""The debugger screen's key bindings: one table, every key (``DebuggerScreen.BINDINGS``).

A binding's ``tooltip`` is the command palette's help line for the key (and the footer's
on hover); ``widgets/key_footer.py`` says which keys the footer shows, the help screen
(``screens/help.py``) lists them all.  The actions are ``DebuggerScreen``'s.
"""

from __future__ import annotations

from textual.binding import Binding

from autograd_tui.app.widgets.pane_tabs import PANES, TALL_HEIGHT

# The keys of a live run's engine: in a replay (a recording) there is none, so they are
# not in the footer or the command palette, and pressed they say which keys walk it.
ENGINE_ONLY = frozenset({"continue", "breakpoints", "pause_thread", "pause_prefix",
                         "restart", "step_thread"})


def engine_only(action: str) -> bool:
    """``action`` (``step_thread(3)`` too) moves the engine (``ENGINE_ONLY``)."""
    return action.split("(", 1)[0] in ENGINE_ONLY


BINDINGS = [
    # --- the engine, the history, the dialogs
    Binding("space", "toggle_run", "Run/Pause",
            tooltip="Run the engine to a breakpoint or the end, or pause it; in a replay "
                    "or behind the newest event, play or pause the history"),
    Binding("n", "step", "Step", tooltip="The scheduler picks a thread; it moves one event"),
    Binding("left", "back", "Back", tooltip="Step back one event in the history"),
    Binding("right", "forward", "Fwd", tooltip="Step forward one event in the history"),
    Binding("c", "continue", "Continue", tooltip="Run to the next breakpoint"),
    Binding("b", "breakpoints", "Breakpts", tooltip="Add, list or clear breakpoints"),
    Binding("p", "pause_thread", "Pause thr",
            tooltip="Pause or resume the thread selected in the threads pane"),
    Binding("P", "pause_prefix", "Pause thread k", show=False,
            tooltip="Pause or resume thread k: P, then its number (1-9) in the threads pane"),
    Binding("g", "goto", "Go to", tooltip="Go to an event index"),
    # priority: a focused table (the threads pane, once a row is clicked; the list
    # view) would take home/end for scrolling.
    Binding("home", "first", "First", show=False, priority=True,
            tooltip="The first event (before any: at 0)"),
    Binding("end", "last", "Last", show=False, priority=True, tooltip="The newest event"),
    Binding("v", "toggle_view", "View", tooltip="Graph view, grouped view, list view"),
    Binding("d", "details", "Details", tooltip="Show or hide the node details"),
    Binding("r", "restart", "Restart", tooltip="Run the scenario again from the start"),
    Binding("s", "scenarios", "Scenarios", tooltip="Open another scenario (a filtered list)"),
    Binding("e", "export", "Export", tooltip="Export a Graphviz snapshot of the shown state"),
    Binding("t", "notes", "Notes", tooltip="The scenario's teaching notes"),
    Binding("o", "app.output", "Output", show=False,
            tooltip="The program's own stdout and stderr (a library's warnings)"),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key"),
    Binding("q", "quit", "Quit", tooltip="Quit (tears down every engine thread)"),
    *[Binding(str(k), f"step_thread({k})", f"Step {k}", show=False,
              tooltip=f"Step thread {k} only (its number in the threads pane)")
      for k in range(1, 10)],
    Binding("shift+left", "pan(-8, 0)", show=False),
    Binding("shift+right", "pan(8, 0)", show=False),
    Binding("shift+up", "pan(0, -4)", show=False),
    Binding("shift+down", "pan(0, 4)", show=False),
    # --- playback (playback.py): play speed, jumps; copy
    Binding("plus,equals_sign", "faster", "Faster", key_display="+", show=False,
            tooltip="Play faster (more events per second)"),
    Binding("minus", "slower", "Slower", key_display="-", show=False,
            tooltip="Play slower (fewer events per second)"),
    Binding("slash", "jump", "Jump", key_display="/",
            tooltip="Jump to the next event of a kind or a node (push, #5, MulBackward0)"),
    Binding("right_square_bracket", "jump_next", "Next match", key_display="]",
            show=False, tooltip="Repeat the last jump: the next matching event"),
    Binding("left_square_bracket", "jump_prev", "Prev match", key_display="[",
            show=False, tooltip="Repeat the last jump backwards: the previous match"),
    Binding("y", "copy_event", "Copy event",
            tooltip="Copy the shown event's line to the clipboard"),
    Binding("Y", "copy_node", "Copy node", show=False,
            tooltip="Copy the node details (d) to the clipboard"),
    # --- the views and the side panes
    Binding("f", "find_node", "Find node", show=False),
    Binding("L", "app.follow_leader", "Leader", show=False,
            tooltip="serve --follow: show the leader's event again, and follow it"),
    # w shows (check_action) only while the side panes are tabs: a short terminal
    Binding("w", "next_pane", "Pane",
            tooltip="Show the next side pane (they are tabs in a terminal under "
                    f"{TALL_HEIGHT} rows)"),
    *[Binding(p.key, f"show_pane('{p.name}')", f"Show the {p.label} pane", show=False,
              tooltip=f"Show the {p.label} pane (the side panes are tabs in a terminal "
                      f"under {TALL_HEIGHT} rows)")
      for p in PANES],
]
REPLAY_HIDDEN = frozenset(b.action for b in BINDINGS if engine_only(b.action))
