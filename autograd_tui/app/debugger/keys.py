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
    Binding("full_stop", "step", "Step", key_display=".",
            tooltip="One event: the scheduler picks a thread and it moves one event (in a "
                    "replay: the next event)"),
    # --- moves by what a person knows (moves.py): a node, a module, a GraphTask
    Binding("n", "move('node')", "Node",
            tooltip="Step over a node: to the end of the node being evaluated (between "
                    "nodes: of the next one); live, the engine runs there"),
    Binding("N", "move('node', False)", "Back node", show=False,
            tooltip="Back to the start of the node (again: of the one before)"),
    Binding("m", "move('module')", "Finish module", show=False,
            tooltip="To the end of the current nn.Module's last node in this backward "
                    "(again: of the module that holds it)"),
    Binding("M", "move('module', False)", "Back module", show=False,
            tooltip="Back to the start of the current nn.Module in this backward"),
    Binding("u", "move('task')", "Out of GraphTask", show=False,
            tooltip="Out of this GraphTask: to its completion (from a reentrant backward, "
                    "back into the outer one)"),
    Binding("U", "move('task', False)", "Back GraphTask", show=False,
            tooltip="Back to the creation of this GraphTask (again: of the one that made it)"),
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
    Binding("F", "frames", "Frames", show=False,
            tooltip="Node details: every frame of the forward op that made the node, "
                    "library frames too (again: the program's own frame only)"),
    Binding("J", "scroll_details(4)", "Details down", show=False,
            tooltip="Scroll the node details down (the mouse wheel scrolls them too)"),
    Binding("K", "scroll_details(-4)", "Details up", show=False,
            tooltip="Scroll the node details up"),
    Binding("r", "restart", "Restart", tooltip="Run the scenario again from the start"),
    Binding("s", "scenarios", "Scenarios", tooltip="Open another scenario (a filtered list)"),
    Binding("e", "export", "Export", tooltip="Export a Graphviz snapshot of the shown state"),
    Binding("t", "notes", "Notes", tooltip="The scenario's teaching notes"),
    Binding("D", "app.ddp", "DDP", show=False,
            tooltip="DDP's buckets per rank at the shown event, and why one never got ready"),
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
            tooltip="Jump to the next event of a kind, a node, a module or a parameter "
                    "(push, #5, MulBackward0, encoder.layers.0, fc1.weight)"),
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
