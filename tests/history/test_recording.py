"""Recordings: round trips, view and re-execution replay, seek, and bad input."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import msgspec
import pytest
from forge import as_v3

from autograd_tui import scenarios
from autograd_tui.engine.events import Event, make_event
from autograd_tui.history import EngineState, History, StateError, fold
from autograd_tui.history import recordings as trace
from autograd_tui.history.fold import apply
from autograd_tui.session.run import Run, reexecute

pytestmark = pytest.mark.timeout(300)

SCHEDULES = [("round-robin", 0), ("random", 0), ("random", 1)]


def record(scenario, policy="round-robin", seed=0, path=None, **kw):
    """Run a scenario, keeping a copy of the live state after every event."""
    live: list[EngineState] = []
    state = EngineState()

    def capture(e: Event) -> None:
        apply(state, e)
        live.append(state.copy())

    run = Run(scenario, policy=policy, seed=seed, **kw)
    run.controller.subscribe(capture)
    try:
        r = run.run()
        assert r.status in ("finished", "deadlock"), r
        if path is not None:
            run.save(path)
    finally:
        assert run.close()
    return run, live


@pytest.mark.parametrize("policy,seed", SCHEDULES)
@pytest.mark.parametrize("name", scenarios.names())
def test_round_trip_view_and_reexecution(name, policy, seed, tmp_path):
    scenario = scenarios.get(name)
    path = tmp_path / f"{name}.jsonl.gz"
    run, live = record(scenario, policy, seed, path)
    rec = trace.load(path)
    assert rec.scenario == name
    assert rec.events == sorted(run.events, key=lambda e: e.seq)
    assert rec.footer["schedule"] == run.controller.schedule_string()
    # View replay: the folded state at every index is the live state at that index...
    folded = EngineState()
    assert rec.state_at(0) == folded
    for i, (e, want) in enumerate(zip(rec.events, live, strict=True)):
        apply(folded, e)
        assert folded == want, (name, i)
    # ...and seeking to any index (here a sample) gives the same state.
    for i in random.Random(seed).sample(range(len(live)), min(40, len(live))):
        assert rec.state_at(i + 1) == live[i], (name, i)
    # Re-execution replay: the real engine, under the recorded schedule, again.
    again, divergence = reexecute(rec)
    try:
        assert divergence is None, str(divergence)
        assert again.events == run.events
    finally:
        assert again.close()


def test_backward_seek_equals_forward_fold(tmp_path):
    run, live = record(scenarios.get("linear-relu"), "random", 3)
    h = History(run.events, every=7)
    n = len(run.events)
    order = list(range(n + 1))
    random.Random(0).shuffle(order)
    for i in order + list(range(n, -1, -1)):  # random jumps, then step back from the end
        assert h.state_at(i) == fold(run.events[:i])
        if i:
            assert h.state_at(i) == live[i - 1]


@pytest.mark.parametrize("name", ["multi-device", "reentrant", "checkpoint", "diamond"])
@pytest.mark.parametrize("every,min_checkpoint", [(1, 1), (3, 10), (16, 40), (1024, 20_000)])
def test_deltas_and_checkpoints_rebuild_every_state(name, every, min_checkpoint):
    """Snapshots are deltas (entries the fold wrote, entries buffers/not_ready lost) and
    checkpoints: rebuilding from them gives the folded state at every index."""
    run, live = record(scenarios.get(name), "random", 1)
    h = History(run.events, every=every, min_checkpoint=min_checkpoint)
    assert h.head == live[-1]
    kinds = {type(s).__name__ for s in h._snaps}
    if every == 1:  # small graphs: deltas between checkpoints only when they are cheap
        assert kinds == {"EngineState", "_Delta"}, kinds
    for i in range(len(run.events) + 1):
        assert h.state_at(i) == (live[i - 1] if i else EngineState()), (name, i)


def test_stepping_in_one_interval_reuses_its_start_and_stays_exact():
    """Back and forth inside one snapshot interval (what a person does in the app), with
    events still arriving: the interval's start state is kept and every state is exact."""
    run, _ = record(scenarios.get("multi-device"), "random", 2)
    events = list(run.events)
    h = History(events[:60], every=16, min_checkpoint=1)
    for i in (47, 46, 45, 40, 41, 33, 32, 31, 60, 59, 12, 11):
        assert h.state_at(i) == fold(events[:i]), i
        if i in (46, 45, 40, 41):
            assert h._near is not None and h._near[0] == 2  # events 32..47
        if len(h) < len(events):
            h.append(events[len(h)])
    assert h.state_at(len(h)) == fold(events[:len(h)])


def test_history_extend_keeps_nothing_of_a_contradicting_event():
    run, _ = record(scenarios.get("linear-relu"))
    events = list(run.events)
    h = History(every=4)
    for e in events[:10]:
        h.append(e)
    before = h.state_at(10)
    pop = next(e for e in events[10:] if e.kind == "pop")
    with pytest.raises(StateError):
        h.extend([make_event(pop.seq, "pop", pop.thread, pop.graph_task, pop.node, "nowhere",
                             pop.data)])
    assert len(h) == 10 and h.head == before
    h.extend(events[10:])  # and goes on as if it had not happened
    assert h.head == fold(events)


def test_history_append_only_stores_and_the_fold_catches_up_when_asked():
    """The controller appends at every gate: no fold runs then.  A contradicting event
    is found when a state at or after it is asked for; the states before it stay."""
    run, _ = record(scenarios.get("linear-relu"))
    events = list(run.events)
    h = History(every=4)
    for e in events[:10]:
        h.append(e)
    assert h._folded == 0  # nothing folded yet
    assert h.state_at(10) == fold(events[:10]) and h._folded == 10
    pop = next(e for e in events[10:] if e.kind == "pop")
    h.append(make_event(pop.seq, "pop", pop.thread, pop.graph_task, pop.node, "nowhere",
                        pop.data))
    with pytest.raises(StateError):
        h.state_at(11)
    assert h.state_at(7) == fold(events[:7])


def test_full_tensors_are_stored_whole(tmp_path):
    p = tmp_path / "full.jsonl"
    record(scenarios.get("linear-relu"), path=p, full_tensors=True)
    rec = trace.load(p)
    assert rec.header["tensors"] == "full"
    ends = [e for e in rec.events if e.kind == "node_end" and e.data["outputs"]]
    assert all("data" in o for e in ends for o in e.data["outputs"] if o is not None)


# --- bad input ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("rec") / "good.jsonl"
    record(scenarios.get("linear-relu"), path=p)
    return p


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _resave(tmp_path: Path, good: Path, change) -> Path:
    """A recording whose events were changed and then saved with a valid checksum."""
    rec = trace.load(good)
    events = change(list(rec.events))
    p = tmp_path / "changed.jsonl"
    trace.save(p, rec.header, events, {"schedule": rec.footer["schedule"]})
    return p


def _drop_first(kind):
    def change(events):  # and number the rest 1..n again, as a careful forger would
        i = next(i for i, e in enumerate(events) if e.kind == kind)
        return [msgspec.structs.replace(e, seq=k)
                for k, e in enumerate(events[:i] + events[i + 1:], 1)]
    return change


def _duplicate_decrement(events):
    i = next(i for i, e in enumerate(events) if e.kind == "dependency_decrement")
    e = events[i]
    dup = make_event(e.seq + 1, e.kind, e.thread, e.graph_task, e.node, e.queue,
                     {**e.data, "remaining": -1})
    shifted = [make_event(x.seq + 1, x.kind, x.thread, x.graph_task, x.node, x.queue, x.data)
               for x in events[i + 1:]]
    return events[:i + 1] + [dup] + shifted


BAD = {
    "truncated": (lambda t, g: _write(t, "t.jsonl", g.read_bytes()[: len(g.read_bytes()) // 2]),
                  "line"),
    "missing footer": (lambda t, g: _write(t, "f.jsonl", b"".join(
        g.read_bytes().splitlines(keepends=True)[:-1])), "missing footer"),
    "wrong version": (lambda t, g: _write(t, "v.jsonl", g.read_bytes().replace(
        b'"version":5', b'"version":7', 1)), "version 7 is not understood; this program "
        "reads version(s) 1, 2, 3, 4, 5"),
    "reordered lines": (lambda t, g: _write(t, "r.jsonl", _swap(g.read_bytes(), 5, 6)),
                        "line 6: event 5 has seq 6: event k must have seq k"),
    "pop from an empty queue": (lambda t, g: _resave(t, g, _drop_first("push")),
                                "contradicts the state: event 3: pop from queue cpu, which is "
                                "empty"),
    "decrement below zero": (lambda t, g: _resave(t, g, _duplicate_decrement),
                             "contradicts the state"),
    "empty file": (lambda t, g: _write(t, "e.jsonl", b""), "empty file"),
    "directory": (lambda t, g: t, "is a directory"),
    "missing path": (lambda t, g: t / "nope.jsonl", "no such file"),
    "gzip that is not gzip": (lambda t, g: _write(t, "n.jsonl.gz", g.read_bytes()),
                              "named .gz but it is not a gzip file"),
    "damaged gzip": (lambda t, g: _write(t, "d.jsonl.gz", gzip.compress(g.read_bytes())[:-30]),
                     "gzip data is damaged or truncated"),
    "not a recording": (lambda t, g: _write(t, "x.jsonl", b'{"hello": 1}\n'),
                        "missing header"),
    "unknown format": (lambda t, g: _write(t, "u.jsonl", b'{"format": "other"}\n'),
                       "unknown format 'other'"),
    "not JSON": (lambda t, g: _write(t, "j.jsonl", b"garbage\n"), "line 1: not JSON"),
}


def _swap(data: bytes, i: int, j: int) -> bytes:
    lines = data.splitlines(keepends=True)
    lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_recordings_give_one_clear_message(case, good, tmp_path):
    make, expected = BAD[case]
    p = make(tmp_path, good)
    before = p.read_bytes() if p.is_file() else None
    with pytest.raises(trace.TraceError) as err:
        trace.load(p)
    msg = str(err.value)
    assert expected in msg
    assert str(p) in msg and "\n" not in msg
    if before is not None:
        assert p.read_bytes() == before  # loading never changes the file


def test_one_corrupted_byte_anywhere_is_detected(good, tmp_path):
    """Header, events and footer: the checksum covers every byte before its own digits."""
    data = good.read_bytes()
    rng = random.Random(1)
    for _ in range(60):
        i = rng.randrange(0, len(data) - 1)
        if data[i:i + 1] == b"\n":
            continue
        bad = bytearray(data)
        bad[i] = (bad[i] + rng.randrange(1, 255)) % 256
        p = _write(tmp_path, "c.jsonl", bytes(bad))
        with pytest.raises(trace.TraceError):
            trace.load(p)


def test_saving_never_loses_what_was_there(good, tmp_path):
    target = tmp_path / "keep.jsonl"
    target.write_bytes(b"precious")
    rec = trace.load(good)
    bad_event = make_event(10**9, "hook", "t", None, None, None,  # not JSON-encodable
                           {"hook_kind": object(), "modified": False, "name": "x"})
    with pytest.raises(trace.TraceError, match="cannot write"):
        trace.save(target, rec.header, rec.events + [bad_event])
    assert target.read_bytes() == b"precious"
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind
    with pytest.raises(trace.TraceError, match="folder .* does not exist"):
        trace.save(tmp_path / "no" / "such" / "dir.jsonl", rec.header, rec.events)
    with pytest.raises(trace.TraceError, match="it is a directory"):
        trace.save(tmp_path, rec.header, rec.events)


def test_loading_executes_no_code(tmp_path, good):
    """A recording is data: strings that look like code stay strings."""
    rec = trace.load(good)
    header = dict(rec.header)
    header["scenario"] = {"name": "__import__('os').system('touch PWNED')", "params": {}}
    p = tmp_path / "evil.jsonl"
    trace.save(p, header, rec.events, {"schedule": ""})
    loaded = trace.load(p)
    assert loaded.scenario.startswith("__import__")
    assert not (Path.cwd() / "PWNED").exists()
    assert json.loads(p.read_text().splitlines()[0])["format"] == trace.FORMAT


def _lines(p: Path) -> list[bytes]:
    return p.read_bytes().splitlines(keepends=True)


def test_a_field_of_the_wrong_type_names_the_line_and_the_field(good, tmp_path):
    lines = _lines(good)
    i = next(k for k, line in enumerate(lines) if line.startswith(b'["push"'))
    fields = json.loads(lines[i])
    fields[6] = "deep"  # push's first field: depth
    lines[i] = json.dumps(fields, separators=(",", ":")).encode() + b"\n"
    p = _write(tmp_path, "typed.jsonl", b"".join(lines))
    with pytest.raises(trace.TraceError) as err:
        trace.load(p)
    assert f"line {i + 1}: push event, field depth: Expected `int`, got `str`" in str(err.value)


@pytest.mark.parametrize("change,expected", [
    (lambda ls: ls[:2] + [ls[2][:-1] + b",7]\n"] + ls[3:], "line 3: "),  # an extra field
    (lambda ls: ls[:2] + [b'["no_such_kind",1,"t",null,null,null]\n'] + ls[3:],
     "line 3: unknown event kind 'no_such_kind'"),
    (lambda ls: ls[:2] + [b"\n"] + ls[2:], "line 3: empty line"),
    (lambda ls: ls + [b'["pop",99999,"t",null,null,null,false,false,0,false]\n'],
     "text after the footer"),
    (lambda ls: ls[:2] + [b"{not json\n"] + ls[3:], "line 3: not JSON"),
])
def test_version_2_lines_that_cannot_be_read(good, tmp_path, change, expected):
    p = _write(tmp_path, "bad.jsonl", b"".join(change(_lines(good))))
    with pytest.raises(trace.TraceError) as err:
        trace.load(p)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_version_1_recordings_still_load(good, tmp_path):
    """A version-1 file (an object of data per event, checksum of the event lines only)."""
    import hashlib

    rec = trace.load(good)
    body = b"".join(json.dumps([e.seq, e.kind, e.thread, e.graph_task, e.node, e.queue,
                                e.data], separators=(",", ":")).encode() + b"\n"
                    for e in as_v3(rec.events))
    header = {**rec.header, "version": 1}
    footer = {**rec.footer, "checksum": "sha256:" + hashlib.sha256(body).hexdigest()}
    p = _write(tmp_path, "v1.jsonl", json.dumps(header).encode() + b"\n" + body
               + json.dumps({"footer": footer}).encode() + b"\n")
    old = trace.load(p)
    assert old.events == rec.events
    assert old.state_at(len(old.events)) == rec.state_at(len(rec.events))
    bad = p.read_bytes().replace(b'"remaining":0', b'"remaining":5', 1)
    with pytest.raises(trace.TraceError, match="checksum mismatch"):
        trace.load(_write(tmp_path, "v1bad.jsonl", bad))


def test_odd_values_give_a_message_not_a_traceback(good, tmp_path):
    lines = _lines(good)
    header = json.loads(lines[0])
    for version in (True, 2.0, "3"):  # only the integers 1 to 4 are versions
        p = _write(tmp_path, "ver.jsonl", json.dumps({**header, "version": version}).encode()
                   + b"\n" + b"".join(lines[1:]))
        with pytest.raises(trace.TraceError, match="is not understood"):
            trace.load(p)
    huge = [json.dumps([*json.loads(line)[:1], 2**64 + k, *json.loads(line)[2:]],
                       separators=(",", ":")).encode() + b"\n"
            for k, line in enumerate(lines[1:-1])]
    p = _write(tmp_path, "huge.jsonl", b"".join([lines[0], *huge[:3][::-1], *huge[3:],
                                                 lines[-1]]))
    with pytest.raises(trace.TraceError, match="line 2: event 1 has seq 18446744073709551"):
        trace.load(p)
    v3_lines = [msgspec.json.encode(e) + b"\n" for e in as_v3(trace.load(good).events)]
    huge = [json.dumps([*json.loads(line)[:1], 2**64 + k, *json.loads(line)[2:]],
                       separators=(",", ":")).encode() + b"\n"
            for k, line in enumerate(v3_lines)]
    old = lines[0].replace(b'"version":5', b'"version":2', 1)  # versions 1, 2: increasing
    p = _write(tmp_path, "huge2.jsonl", b"".join([old, *huge[:3][::-1], *huge[3:], lines[-1]]))
    with pytest.raises(trace.TraceError, match="line 3: events out of order"):
        trace.load(p)
    v1 = [lines[0].replace(b'"version":5', b'"version":1'),
          b'[0,"push","t",1,1,"cpu",{"depth":0,"seq":1,"dummy":false,"shutdown":false,'
          b'"size":1,"order":[[1,1]],"outstanding":1}]\n', b'{"footer":{"events":1}}\n']
    with pytest.raises(trace.TraceError, match="line 2: malformed push event"):
        trace.load(_write(tmp_path, "v1odd.jsonl", b"".join(v1)))


def test_a_version_2_recording_loads_in_todays_numbering(tmp_path):
    """Version 2 numbered events from 0 and schedule threads from 0: loaded, event k has
    seq k and the schedule counts threads from 1, as a version 5 file of the same run."""
    record(scenarios.get("multi-device"), path=tmp_path / "new.jsonl")
    rec = trace.load(tmp_path / "new.jsonl")
    assert rec.header["version"] == 5 and [e.seq for e in rec.events[:3]] == [1, 2, 3]
    old_events = [msgspec.structs.replace(e, seq=e.seq - 1) for e in as_v3(rec.events)]
    runs = (p.partition(":") for p in rec.footer["schedule"].split(","))
    old_schedule = ",".join(f"{int(c) - 1}{sep}{n}" for c, sep, n in runs)
    assert old_schedule.startswith("0:")
    trace.save(tmp_path / "old.jsonl", {**rec.header, "version": 2}, old_events,
               {**rec.footer, "schedule": old_schedule})
    old = trace.load(tmp_path / "old.jsonl")
    assert old.events == rec.events
    assert old.footer["schedule"] == rec.footer["schedule"]
    assert old.history.head == rec.history.head


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["error-in-node", "reentrant-priority", "multi-device"])
def test_a_version_3_recording_loads_as_today(name, tmp_path):
    """Version 3 listed the whole queue in every push: loaded, its events are today's
    (a push names its task; ``gone`` is found where a failed GraphTask's tasks first show
    as expired) and every state equals that of the version 5 file of the same run."""
    record(scenarios.get(name), path=tmp_path / "new.jsonl")
    rec = trace.load(tmp_path / "new.jsonl")
    old = as_v3(rec.events)
    assert any(e.kind == "push" and len(e.order) > 1 for e in old)  # queues were listed
    trace.save(tmp_path / "v3.jsonl", {**rec.header, "version": 3}, old, rec.footer)
    v3 = trace.load(tmp_path / "v3.jsonl")
    assert v3.events == rec.events
    if name == "error-in-node":
        assert any(e.kind in ("push", "pop") and e.gone for e in v3.events)
    for k in range(0, len(rec.events) + 1, 7):
        assert v3.state_at(k) == rec.state_at(k)


def test_a_node_meta_written_before_its_stack_field_still_loads():
    """``stack`` was added to ``node_meta`` within version 4: a line without it reads as
    ``[]``, a line with it keeps it, and a wrong type there is refused."""
    import functools
    import operator

    from autograd_tui.engine.events import EVENT_TYPES

    dec = msgspec.json.Decoder(functools.reduce(operator.or_, EVENT_TYPES.values()))
    old = dec.decode(b'["node_meta",3,"main",1,2,null,"fc","Linear",null,"a.py:1 in f",'
                     b'"y = fc(x)",[]]')
    assert old.stack == [] and old.data["stack"] == [] and old.module == "fc"
    new = make_event(3, "node_meta", "main", 1, 2, None,
                     {"module": None, "module_type": None, "tensor": None, "created": None,
                      "source": None, "saved": [], "stack": ["a.py:1 in <module>"]})
    assert dec.decode(msgspec.json.encode(new)).stack == ["a.py:1 in <module>"]
    with pytest.raises(msgspec.ValidationError):
        dec.decode(b'["node_meta",3,"main",1,2,null,null,null,null,null,null,[],[1]]')
