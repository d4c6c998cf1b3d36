"""Frame sequences: which events get a frame, the states after them, the index page.

Numbering (docs/architecture.md): event k is the k-th event, 1-based, and a
frame "after event k" draws ``History.state_at(k)``, the state after events
1..k.  ``frame_events`` chooses the k's, ``states_after`` folds the events once
to reach each of them, and ``index_html`` is the self-contained page that steps
through the written frames with the arrow keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from autograd_tui.engine.events import Event
from autograd_tui.export.render import ExportError
from autograd_tui.export.style import esc
from autograd_tui.history.fold import apply
from autograd_tui.history.state import EngineState
from autograd_tui.words import visible

#: event kinds ``--breakpoints`` writes a frame after
BREAKPOINT_KINDS = ("node_start", "not_ready_insert", "completion", "deadlock")


def frame_events(events: Sequence[Event], *, every: int | None = None,
                 breakpoints: bool = False) -> list[int]:
    """The numbers k (1..n) of the events after which a frame is taken.

    ``every=K``: events K, 2K, 3K, ... and always the last one, n (K=1: one
    frame per event).  ``breakpoints``: every event of a kind in
    ``BREAKPOINT_KINDS``.
    """
    n = len(events)
    if breakpoints:
        return [k for k, e in enumerate(events, 1) if e.kind in BREAKPOINT_KINDS]
    if every is None or every < 1:
        raise ExportError("every must be a positive number of events")
    out = list(range(every, n + 1, every))
    if n and (not out or out[-1] != n):
        out.append(n)
    return out


def states_after(events: Sequence[Event], ks: Sequence[int] | Iterator[int]
                 ) -> Iterator[tuple[int, EngineState]]:
    """(k, the state after events 1..k) for each wanted k in increasing order, folding
    the events once.  The state yielded is one object, folded further after each
    yield: use it (draw it) before asking for the next."""
    s = EngineState()
    pos = 0
    for k in sorted(set(ks)):
        if not 0 <= k <= len(events):
            raise ExportError(f"no event {k}: there are {len(events)} events")
        while pos < k:
            apply(s, events[pos])
            pos += 1
        yield k, s


@dataclass(frozen=True)
class Frame:
    file: str  # file name inside the frames directory
    event: int  # k: the frame is the state after events 1..k
    text: str  # event k, in one line


def index_html(frames: Sequence[Frame], *, title: str = "autograd-tui export",
               fmt: str = "svg") -> str:
    """A self-contained page that steps through the frames (←/→, Home/End)."""
    # "<" as its JSON escape: no "</script>" or "<!--" in the text can end the script early
    data = json.dumps([{"file": f.file, "event": f.event, "text": visible(f.text)}
                       for f in frames],
                      ensure_ascii=False, indent=0).replace("<", "\\u003c")
    first = f' src="{esc(frames[0].file)}"' if frames else ""
    viewer = (f'<img id="frame"{first} alt="frame">' if fmt in ("svg", "png")
              else f'<iframe id="frame"{first} title="frame"></iframe>')
    links = "\n".join(f'<li><a href="{esc(f.file)}" data-i="{i}">{esc(f.file)}</a> '
                      f"{esc(f.text)}</li>" for i, f in enumerate(frames))
    return _INDEX_TEMPLATE.format(title=esc(title), viewer=viewer, links=links, data=data,
                                  count=len(frames))


_INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 0; }}
header {{ position: sticky; top: 0; background: #f8f9fa; border-bottom: 1px solid #dee2e6;
         padding: 8px 12px; display: flex; gap: 12px; align-items: center; }}
#pos {{ font-weight: bold; white-space: nowrap; }}
#text {{ font-family: monospace; }}
main {{ padding: 12px; }}
#frame {{ max-width: 100%; border: 0; }}
iframe#frame {{ width: 100%; height: 80vh; }}
details {{ padding: 0 12px 12px; }}
</style>
</head>
<body>
<header>
<button id="first" title="first frame (Home)">|&lt;</button>
<button id="prev" title="previous frame (←)">◀</button>
<span id="pos">frame 1 / {count}</span>
<button id="next" title="next frame (→)">▶</button>
<button id="last" title="last frame (End)">&gt;|</button>
<span id="text"></span>
</header>
<main>{viewer}</main>
<details><summary>all {count} frames</summary>
<ol start="0">
{links}
</ol>
</details>
<script>
const FRAMES = {data};
let cur = 0;
function show(i) {{
  if (!FRAMES.length) return;
  cur = Math.max(0, Math.min(FRAMES.length - 1, i));
  const f = FRAMES[cur];
  document.getElementById("frame").src = f.file;
  document.getElementById("pos").textContent =
    "frame " + (cur + 1) + " / " + FRAMES.length + " (event " + f.event + ")";
  document.getElementById("text").textContent = f.text;
  history.replaceState(null, "", "#" + cur);
}}
document.addEventListener("keydown", (ev) => {{
  if (ev.key === "ArrowRight") show(cur + 1);
  else if (ev.key === "ArrowLeft") show(cur - 1);
  else if (ev.key === "Home") show(0);
  else if (ev.key === "End") show(FRAMES.length - 1);
  else return;
  ev.preventDefault();
}});
document.getElementById("first").onclick = () => show(0);
document.getElementById("prev").onclick = () => show(cur - 1);
document.getElementById("next").onclick = () => show(cur + 1);
document.getElementById("last").onclick = () => show(FRAMES.length - 1);
for (const a of document.querySelectorAll("a[data-i]")) {{
  a.onclick = (ev) => {{ ev.preventDefault(); show(+a.dataset.i); window.scrollTo(0, 0); }};
}}
show(parseInt(location.hash.slice(1), 10) || 0);
</script>
</body>
</html>
"""
