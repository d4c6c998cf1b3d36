"""The help screen: every key, and what the colours and badges mean."""

from __future__ import annotations

from autograd_tui.app.screens.text import TextScreen
from autograd_tui.app.widgets.pane_tabs import TALL_HEIGHT

HELP = f"""\
# autograd-tui: keys

| key | what it does |
|---|---|
| `space` | run / pause all threads (runs to the next breakpoint or the end) |
| `.` | step one event: the scheduler picks the next thread and it moves one event |
| `n` / `N` | over a node: to its end (live: the engine runs there) / back to its start |
| `m` / `M` | to the end of this nn.Module in this backward (again: the outer) / its start |
| `u` / `U` | out of this GraphTask (a reentrant one: into the outer) / back to its creation |
| `1`-`9` | step thread k (the number in the threads pane) |
| `p` | pause / resume the thread selected in the threads pane |
| `P` then `1`-`9` | pause / resume thread k (the number in the threads pane) |
| `c` | continue to the next breakpoint |
| `b` | breakpoints: a kind, node, module, parameter, queue, thread, or the first NaN/Inf |
| `left` / `right` | step back / forward through the history |
| `home` / `end` | first / last event |
| `g` | go to an event index |
| `space` | in a replay, or behind the newest event: play / pause the history (stops at the end) |
| `+` / `-` | play faster / slower (events per second, shown in the title while playing) |
| `/` | jump to an event of a kind, node, module or parameter: `push`, `#5`, `h.0.attn` |
| `]` / `[` | repeat the last jump: the next / previous matching event |
| `y` | copy the shown event's line to the clipboard |
| `Y` | copy the node details (`d`) to the clipboard |
| `ctrl+p` | command palette: every key's command, by name |
| `v` | graph view / compact list view |
| `d` | node details (of the node the shown event touched, or the selected row) |
| `J` / `K` | scroll the node details down / up (or the mouse wheel) |
| `F` | node details: every frame of the forward op, library ones too (else the program's own) |
| `shift+arrows` | pan the graph |
| `w` | the next side pane, where they are tabs (a terminal under {TALL_HEIGHT} rows) |
| `T` / `Q` / `R` / `G` | show the threads / ready queues / not_ready / GraphTasks pane |
| `T` | also focuses the threads pane: `up` / `down` choose a thread, `p` pauses it |
| `<` / `>` | several ranks (`torch --ranks N`): the previous / next rank, where it was left |
| `enter` / click | grouped view (PyTorch nodes by nn.Module; `v`): open / close a group |
| `f` | grouped view: open the groups holding the shown event's node, select its row |
| `L` | under `serve --follow`: back to the leader's event, and follow it again |
| `r` | restart the scenario |
| `s` | pick another scenario |
| `e` | export a Graphviz snapshot of the shown state |
| `t` | the scenario's teaching notes |
| `D` | DDP: each rank's buckets at the shown event (a never-ready one: why) |
| `o` | the program's own stdout and stderr (a library's warnings), kept while the app runs |
| `?` | this help |
| `q` | quit (tears down every engine thread) |

**Colours and badges** (the badge letter carries the meaning without colour):
`·` not reached, `W` waiting in not_ready, `R` ready in a queue, `▶` running,
`✓` done, `S` skipped, `E` errored.  The node the shown event touched is drawn
in reverse video.

**Small terminals**: under {TALL_HEIGHT} rows the side column shows one pane at a time (the tabs
above it; `w` or the pane's key, or a click on a tab, shows another); the footer shows
the keys that fit its width, the most used first.  Every key is in this list.

**A replay** (a recording) has no engine: `c`, `b`, `p`, `P`, `1`-`9` and `r` are not
in the footer or the palette, and pressed they say which keys walk it.

**Live runs keep their history**: step back with `left` while the engine waits;
`.` moves the engine on and jumps back to the newest event; `space` plays the
history up to the newest event, and there runs the engine.
"""


class HelpScreen(TextScreen):
    """``?``: the keys (``HELP``) in a scrollable box."""

    def __init__(self) -> None:
        super().__init__(HELP, "help")
