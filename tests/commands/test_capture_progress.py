"""``autograd-tui torch``: how many nodes the forward pass has made, while it is captured
(``torch_cmd.capture_progress``): sparse lines in a pipe, none for a short forward."""

from __future__ import annotations

import io
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from autograd_tui.commands.torch_cmd import capture_progress  # noqa: E402
from autograd_tui.engine.torch_bridge.capture import capture, captured_nodes  # noqa: E402


def forward(seconds: float) -> int:
    """Ops under capture() for about ``seconds``; the nodes made."""
    x = torch.randn(2, requires_grad=True)
    n, end = 0, time.monotonic() + seconds
    with capture():
        h = x
        while time.monotonic() < end or n < 10:
            h = h * 1.0
            n += 1
            if n % 200 == 0:
                time.sleep(0.005)
    return n


def test_a_long_forward_says_how_many_nodes_now_and_then() -> None:
    out = io.StringIO()
    before = set(threading.enumerate())
    with capture_progress(stream=out, every=0.01, pipe_every=0.1):
        made = forward(0.6)
        time.sleep(0.05)  # the watcher sees the forward end
    assert set(threading.enumerate()) <= before  # the watcher ended with the block
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 7, lines  # about every 0.1 s after the first 0.1 s, no flood
    counts = [int(ln.split(": ")[1].split()[0].replace(",", "")) for ln in lines]
    assert all(ln.startswith("capturing the forward pass: ") for ln in lines)
    assert counts == sorted(counts) and 0 < counts[-1] <= made


def test_a_short_forward_prints_nothing() -> None:
    out = io.StringIO()
    with capture_progress(stream=out, every=0.01, pipe_every=5.0):
        forward(0.05)
    assert out.getvalue() == ""
    assert captured_nodes() is None  # no capture runs now
