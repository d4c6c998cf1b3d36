"""The compact event store: the same events as a list, in a fraction of the memory."""

from __future__ import annotations

import gc
import json
import random
import threading
import tracemalloc

import numpy as np
import pytest
from forge import signed

from autograd_tui.engine.events import make_event
from autograd_tui.history import History
from autograd_tui.history import recordings as trace
from autograd_tui.history import store as store_mod
from autograd_tui.history.store import KINDS, EventStore

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def recorded(multi_device_recording):
    return multi_device_recording


def test_a_loaded_recording_reads_as_the_list_of_its_events(recorded, monkeypatch):
    monkeypatch.setattr(store_mod, "BLOCK", 7)  # many blocks, cut at odd places
    monkeypatch.setattr(store_mod, "CACHED", 3)
    p, events = recorded
    rec = trace.load(p)
    got = rec.events
    assert isinstance(got, EventStore) and got is rec.history.events
    assert got._n == len(events) and not got._tail  # all of it kept encoded
    assert len(got) == len(events) and list(got) == events and got == events
    rng = random.Random(7)
    n = len(events)
    for _ in range(300):
        i = rng.randrange(-n, n)
        assert got[i] == events[i]
        a, b = sorted((rng.randrange(-n - 3, n + 3), rng.randrange(-n - 3, n + 3)))
        assert got[a:b] == events[a:b]
    assert got[::3] == events[::3] and got[5:1] == []
    assert list(reversed(got)) == events[::-1]
    with pytest.raises(IndexError):
        got[n]
    assert [KINDS[k] for k in got.kinds()] == [e.kind for e in events]
    assert got.thread_names() == list(dict.fromkeys(e.thread for e in events))
    assert got.queues() == {e.queue for e in events}
    at = sorted(rng.sample(range(n), 40))
    assert got.pick(at) == [events[i] for i in at]


def test_states_from_the_store_are_those_of_the_list(recorded):
    p, events = recorded
    loaded = trace.load(p).history
    plain = History(events, every=16)
    for k in range(0, len(events) + 1, max(len(events) // 25, 1)):
        assert loaded.state_at(k) == plain.state_at(k)


def test_appends_after_a_compaction_and_during_reads(recorded):
    """A live run appends while a view reads: compacted or not, the same list."""
    _, events = recorded
    s = EventStore()
    half = len(events) // 2
    for e in events[:half]:
        s.append(e)
    s.compact()
    assert s._n == half and not s._tail
    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            n = len(s)
            if n:
                assert s[n - 1] == events[n - 1]
                seen.append(n)

    t = threading.Thread(target=read)
    t.start()
    try:
        for i, e in enumerate(events[half:], half):
            s.append(e)
            if i % 50 == 0:
                s.compact()
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive() and seen
    assert list(s) == events and s[half - 2:half + 2] == events[half - 2:half + 2]
    s.truncate(half + 3)
    assert list(s) == events[:half + 3]
    s.truncate(1)
    assert list(s) == events[:1] and s.thread_names() == [events[0].thread]


def test_a_long_live_run_is_compacted_as_it_folds(recorded, monkeypatch):
    """Past ``COMPACT_AT`` appended events, History encodes them into lines when it
    catches up: its states and events stay those of the list."""
    from autograd_tui.history import history as history_mod
    monkeypatch.setattr(history_mod, "COMPACT_AT", 40)
    _, events = recorded
    live, plain = History(every=16), History(events, every=16)
    for k, e in enumerate(events, 1):
        live.append(e)
        if k % 25 == 0:
            assert live.state_at(k) == plain.state_at(k)
    assert live.head == plain.head
    assert live.events._n > len(events) - 40 and list(live.events) == events
    assert live.state_at(len(events) // 3) == plain.state_at(len(events) // 3)


def test_events_that_cannot_be_encoded_stay_objects(recorded):
    _, events = recorded
    odd = make_event(len(events) + 1, "hook", "t", None, None, None,
                     {"hook_kind": object(), "modified": False, "name": "x"})
    s = EventStore(events[:5])
    s.compact()
    s.append(odd)
    s.compact()  # cannot: kept, and no later compaction is tried
    s.extend(events[5:8])
    assert s.appended() == 0 and list(s) == [*events[:5], odd, *events[5:8]]


def _events(n: int) -> list:
    """``n`` plausible events (a node's start and end, over and over)."""
    out = []
    for k in range(1, n + 1):
        if k % 2:
            out.append(make_event(k, "node_start", "cpu", 1, k, "cpu",
                                  {"name": "MulBackward0", "depth": 0, "inputs": [None]}))
        else:
            out.append(make_event(k, "node_end", "cpu", 1, k - 1, "cpu",
                                  {"name": "MulBackward0", "outputs": [None],
                                   "leaf_grad": None}))
    return out


def test_memory_per_event_is_bounded():
    """100,000 events held by the store take under 200 bytes each (their lines, offsets
    and kinds); as a list of objects they take several times that."""
    events = _events(100_000)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        s = EventStore(events)
        s.compact()
        del events
        gc.collect()
        per_event = (tracemalloc.get_traced_memory()[0] - base) / 100_000
        as_list = list(s)  # what a list of the decoded objects takes
        per_object = (tracemalloc.get_traced_memory()[0] - base) / 100_000 - per_event
    finally:
        tracemalloc.stop()
    assert per_event < 200, per_event
    assert per_object > 2 * per_event, (per_object, per_event)
    assert len(as_list) == len(s) == 100_000 and isinstance(s.kinds(), np.ndarray)


# --- the streaming load: 4 MB at a time in use, a few hundred bytes here --------------------
@pytest.fixture
def tiny_chunks(monkeypatch):
    from autograd_tui.history import decode
    monkeypatch.setattr(decode, "CHUNK", 300)  # a line or two per chunk


def _parts(p):
    lines = p.read_bytes().splitlines(keepends=True)
    return lines[0], lines[1:-1], json.loads(lines[-1])["footer"]


def _unknown_node(line: bytes) -> bytes:
    """A node_start line naming a node no event made."""
    ev = json.loads(line)
    ev[4] = 999_999
    return json.dumps(ev, separators=(",", ":")).encode() + b"\n"


def test_small_chunks_load_the_same_events_and_states(recorded, tiny_chunks):
    p, events = recorded
    rec = trace.load(p)
    assert len(rec.events._segs) > 10 and list(rec.events) == events
    plain = History(events, every=16)
    for k in (0, 1, len(events) // 2, len(events)):
        assert rec.history.state_at(k) == plain.state_at(k)


def test_problems_are_reported_as_a_whole_file_reader_finds_them(recorded, tiny_chunks,
                                                                  tmp_path):
    """The stream folds as it decodes, yet the first problem reported is the one a
    reader that decodes everything first, then checks, then folds would report."""
    p, _ = recorded
    header, lines, footer = _parts(p)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'["node_start"'))
    contradicting = [*lines[:at], _unknown_node(lines[at]), *lines[at + 1:]]
    swapped = [*lines[:2], lines[3], lines[2], *lines[4:]]
    garbage_late = [*swapped[:-2], b"not json\n", swapped[-1]]
    cases = {
        # an event out of order on line 4, a line that is not JSON near the end
        "decode first": (garbage_late, f"line {len(lines)}: not JSON"),
        "then the order": (swapped, "line 4: event 3 has seq 4"),
        "the fold last": (contradicting, f"line {at + 2}: "),
    }
    for name, (body, expected) in cases.items():
        f = tmp_path / f"{name}.jsonl"
        f.write_bytes(signed(header, body, footer))
        with pytest.raises(trace.TraceError) as err:
            trace.load(f)
        assert expected in str(err.value), (name, str(err.value))
    # the fold refused an early event, and the checksum does not match: the checksum
    data = (tmp_path / "the fold last.jsonl").read_bytes()
    cut = data.rindex(b'sha256:') + len(b"sha256:")
    f = tmp_path / "tampered.jsonl"
    f.write_bytes(data[:cut] + (b"0" if data[cut:cut + 1] != b"0" else b"1") + data[cut + 1:])
    with pytest.raises(trace.TraceError, match="checksum mismatch"):
        trace.load(f)
