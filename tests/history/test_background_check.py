"""A recording loaded with ``background=True`` (how the app opens one): every check of the
file made at once, the fold's check left to a thread, which ends with the same states or
the same one message as a full load."""

from __future__ import annotations

import json
import threading
import time

import pytest
from forge import signed

from autograd_tui.engine.events import EVENT_TYPES
from autograd_tui.history import History
from autograd_tui.history import recordings as trace
from autograd_tui.session import Session

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def recorded(multi_device_recording):
    return multi_device_recording


def _parts(p):
    lines = p.read_bytes().splitlines(keepends=True)
    return lines[0], lines[1:-1], json.loads(lines[-1])["footer"]


def _contradicting(p, tmp_path):
    """The recording with a node_start naming a node no event made; its line number."""
    header, lines, footer = _parts(p)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'["node_start"'))
    ev = json.loads(lines[at])
    ev[4] = 999_999
    bad = json.dumps(ev, separators=(",", ":")).encode() + b"\n"
    f = tmp_path / "contradicting.jsonl"
    f.write_bytes(signed(header, [*lines[:at], bad, *lines[at + 1:]], footer))
    return f, at


def _no_check_thread() -> bool:
    return not any(t.name == "recording-check" for t in threading.enumerate())


def test_the_background_check_ends_with_the_states_of_a_full_load(recorded):
    p, events = recorded
    rec = trace.load(p, background=True)
    h = rec.history
    assert h is not None and list(rec.events) == events
    assert h.folded == 0 and h.available == 0  # nothing shown before it is checked
    full = History(events, every=16)
    h.every = 8  # many chunks, the lock let go between them
    rec.start_check()
    assert h.wait_checked(60) and h.check_error is None
    assert h.available == h.folded == len(events)
    for k in (0, 1, len(events) // 3, len(events) - 1, len(events)):
        assert h.state_at(k) == full.state_at(k)
    assert _no_check_thread()


def test_a_contradicting_event_found_later_gives_the_loads_message(recorded, tmp_path):
    f, at = _contradicting(recorded[0], tmp_path)
    with pytest.raises(trace.TraceError) as err:
        trace.load(f)
    assert f"line {at + 2}: " in str(err.value)
    rec = trace.load(f, background=True)  # the file itself is sound
    h = rec.history
    rec.start_check()
    assert h.wait_checked(60)
    assert h.check_error == str(err.value)
    assert h.available == h.folded == at  # the events before it, never past it
    assert h.state_at(at).index == at
    s = Session(recording=rec)  # nothing past the refused event is shown
    assert s.count() == at and s.state_at(at + 1).index == at
    assert s.check_error == str(err.value)


def test_problems_of_the_file_are_raised_at_once(recorded, tmp_path):
    header, lines, footer = _parts(recorded[0])
    swapped = [*lines[:2], lines[3], lines[2], *lines[4:]]
    cases = {"not json": ([*lines[:-1], b"not json\n", lines[-1]], "not JSON"),
             "order": (swapped, "line 4: event 3 has seq 4")}
    for name, (body, expected) in cases.items():
        f = tmp_path / f"{name}.jsonl"
        f.write_bytes(signed(header, body, footer))
        with pytest.raises(trace.TraceError, match=expected):
            trace.load(f, background=True)
    data = recorded[0].read_bytes()
    cut = data.rindex(b"sha256:") + len(b"sha256:")
    f = tmp_path / "tampered.jsonl"
    f.write_bytes(data[:cut] + (b"0" if data[cut:cut + 1] != b"0" else b"1") + data[cut + 1:])
    with pytest.raises(trace.TraceError, match="checksum mismatch"):
        trace.load(f, background=True)


def test_the_session_shows_what_is_checked_and_stops_the_check(recorded, monkeypatch):
    p, events = recorded
    rec = trace.load(p, background=True)
    h = rec.history
    h.every = 1
    real = History._catch_up

    def slow(self, *a, **kw):  # one event per chunk, each taking a while
        time.sleep(0.02)
        return real(self, *a, **kw)

    monkeypatch.setattr(History, "_catch_up", slow)
    s = Session(recording=rec)
    assert s.count() == 0 and s.banner == ""  # not started: only event 0
    s.start_check()
    assert h.checking and f" of {len(events)} events (" in s.banner
    k = s.count()
    assert k < len(events) and s.state_at(len(events)).index <= h.folded  # never past it
    s.close()  # stops the thread between two chunks
    assert not h.checking and _no_check_thread()
    assert 0 < h.folded < len(events) and s.count() == h.folded
    s.start_check()  # closed: never again
    assert not h.checking
    again = Session(recording=rec)  # the app's r: the recording opened again goes on
    again.start_check()
    assert h.wait_checked(60) and again.count() == len(events) and h.check_error is None
    assert h.state_at(len(events)) == History(events).state_at(len(events))
    again.close()


def test_the_session_counts_all_events_once_checked(recorded):
    p, events = recorded
    s = Session(recording=trace.load(p, background=True))
    s.start_check()
    assert s.history.wait_checked(60)
    assert s.count() == len(events) and s.banner == "" and s.check_error is None
    assert [e.kind for e in s.events(0, 3)] == [e.kind for e in events[:3]]
    assert type(s.event(len(events) - 1)) is EVENT_TYPES[events[-1].kind]
    s.close()


def test_latest_is_what_the_check_has_folded(recorded):
    """The breakpoints' node names come from ``latest()``: it must not fold (unchecked)
    in the app's thread what the background check has not reached."""
    p, events = recorded
    rec = trace.load(p, background=True)
    assert rec.history.latest().index == 0 and rec.history.folded == 0
    s = Session(recording=rec)
    assert s._node_names() == {}
    s.start_check()
    assert rec.history.wait_checked(60)
    assert rec.history.latest().index == len(events) and s._node_names()
    s.close()


def test_the_memory_budget_stops_the_check_with_its_message(recorded):
    """The load's budget is checked at each snapshot of the background fold too."""
    p, events = recorded
    rec = trace.load(p, background=True)
    h = rec.history
    h.every = 8

    def over() -> None:
        raise trace.TraceError(f"{p}: {trace.budget_words()}")

    h.on_snapshot = over
    rec.start_check()
    assert h.wait_checked(60)
    assert h.check_error == f"{p}: {trace.budget_words()}"
    assert h.available == h.folded < len(events)
