"""Fuzzing recordings: structured mutations of valid recordings, with the checksum
recomputed (it is unkeyed: anyone can), fed to the reader and to every command that
reads a recording.  Each case: no traceback (only ``TraceError`` from the reader, and
an exit code from the documented table from the commands), no escape byte in what is
printed; no file the recording names is ever run.  Seeded: ``FUZZ_CASES``,
``FUZZ_APP_CASES`` and ``FUZZ_SEED`` (environment) choose how many and which;
``make fuzz`` runs 5,000 (100 of them in the app)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import resource
from pathlib import Path
from typing import Any

import pytest
from forge import signed

from autograd_tui import scenarios
from autograd_tui.commands import main
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(300)

CASES = int(os.environ.get("FUZZ_CASES", "300"))
SEED = int(os.environ.get("FUZZ_SEED", "20261124"))
EXIT_CODES = {0, 1, 2, 3}

# values a mutation puts in a field: wrong types, huge and negative sizes, escapes, markup
ODD: list[Any] = [
    None, True, -1, 0, 2**31, 2**64 + 5, 10**9, -(10**12), 1.5, math.inf, "", "x" * 5000,
    "\x1b]0;owned\x07", "\x1b[31mred", "[/nope]", "[bold]b[/bold]", "../../etc/passwd",
    "/tmp/evil.py", [], [[[[1]]]], {}, {"a": 1}, [None, None], ["a", 1, None],
]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[bytes, list[bytes], dict]]:
    out = []
    d = tmp_path_factory.mktemp("fuzz-seeds")
    for name in ("linear-relu", "multi-device", "deadlock-reentrant-block", "error-in-node"):
        p = d / f"{name}.jsonl"
        with Run(scenarios.get(name)) as run:
            run.run()
            run.save(p)
        lines = p.read_bytes().splitlines(keepends=True)
        footer = json.loads(lines[-1])["footer"]
        out.append((lines[0], lines[1:-1], footer))
    return out


def _mutate_value(rng: random.Random, v: Any, depth: int = 0) -> Any:
    if isinstance(v, dict) and v and depth < 3 and rng.random() < 0.7:
        k = rng.choice(sorted(v))
        return {**v, k: _mutate_value(rng, v[k], depth + 1)}
    if isinstance(v, list) and v and depth < 3 and rng.random() < 0.7:
        i = rng.randrange(len(v))
        return [*v[:i], _mutate_value(rng, v[i], depth + 1), *v[i + 1:]]
    if isinstance(v, int) and not isinstance(v, bool) and rng.random() < 0.5:
        return v + rng.choice([-1, 1, 7, -(2**20), 2**40])
    return rng.choice(ODD)


def _mutant(rng: random.Random, seed: tuple[bytes, list[bytes], dict]) -> bytes:
    header, lines, footer = seed
    lines = list(lines)
    what = rng.choice(["event", "event", "event", "header", "footer", "drop", "dup", "swap"])
    if what == "event":
        i = rng.randrange(len(lines))
        lines[i] = json.dumps(_mutate_value(rng, json.loads(lines[i])),
                              separators=(",", ":"), default=str).encode() + b"\n"
    elif what == "header":
        header = json.dumps(_mutate_value(rng, json.loads(header)), separators=(",", ":"),
                            default=str).encode() + b"\n"
    elif what == "footer":
        footer = _mutate_value(rng, footer)
        footer = footer if isinstance(footer, dict) else {"x": footer}
    elif what == "drop":
        del lines[rng.randrange(len(lines))]
    elif what == "dup":
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    else:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    footer = {**footer, "events": len(lines)} if rng.random() < 0.9 else footer
    return signed(header, lines, footer)


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_the_checksum_helper_writes_what_the_reader_accepts(seeds, tmp_path):
    header, lines, footer = seeds[0]
    p = tmp_path / "same.jsonl"
    p.write_bytes(signed(header, lines, footer))
    assert len(trace.load(p).events) == len(lines)


@contextlib.contextmanager
def _at_most_1_gib_more() -> Any:
    """An address-space limit of what this process has mapped now plus 1 GiB: a case
    that makes the program allocate what a file states fails with MemoryError."""
    mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + 2**30, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("chunk", range(5))
def test_mutated_recordings_give_one_message_never_a_traceback(seeds, tmp_path, chunk):
    rng = random.Random(SEED + chunk)
    with _at_most_1_gib_more():
        loaded, refused = _fuzz(rng, seeds, tmp_path)
    assert refused > 0 and loaded + refused == CASES // 5


def _fuzz(rng: random.Random, seeds: list[Any], tmp_path: Path) -> tuple[int, int]:
    loaded = refused = 0
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"  # what a hostile recording would like to have run
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    for case in range(CASES // 5):
        p = tmp_path / f"m{case}.jsonl"
        header, lines, footer = rng.choice(seeds)
        if rng.random() < 0.15:  # the scenario named as a file to run
            h = json.loads(header)
            h["scenario"]["name"] = str(evil)
            header = json.dumps(h, separators=(",", ":")).encode() + b"\n"
        p.write_bytes(_mutant(rng, (header, lines, footer)))
        try:
            trace.load(p)
        except trace.TraceError as e:
            refused += 1
            assert "\n" not in str(e).strip() and "Traceback" not in str(e)
            continue
        loaded += 1
        commands = [["replay", str(p), "--headless"],
                    ["export", str(p), "--at", "end", "-o", str(tmp_path / "x.dot")],
                    ["chrome-trace", str(p), "-o", str(tmp_path / "t.json")]]
        if rng.random() < 0.2:  # runs the engine again: a few only
            commands.append(["replay", str(p), "--reexecute"])
        for args in commands:
            code, out, err = _run(args)
            assert code in EXIT_CODES, (args, code, err)
            assert "Traceback" not in out + err
            assert "\x1b" not in out + err and "\x07" not in out + err, (args, out, err)
    assert not marker.exists(), "a recording chose code to run"
    return loaded, refused


APP_CASES = int(os.environ.get("FUZZ_APP_CASES", "12"))


def test_mutated_recordings_that_load_open_in_the_app(seeds, tmp_path):
    """The app too: a recording that loads is stepped through without an exception."""
    import asyncio

    from autograd_tui.app import AutogradApp

    rng = random.Random(2026)
    opened = 0
    while opened < APP_CASES:
        p = tmp_path / "a.jsonl"
        p.write_bytes(_mutant(rng, rng.choice(seeds)))
        try:
            rec = trace.load(p)
        except trace.TraceError:
            continue
        opened += 1
        app = AutogradApp(recording=rec)

        async def walk(app: AutogradApp = app) -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause()
                for key in ("end", "left", "v", "d", "home", "right", "t", "escape"):
                    await pilot.press(key)
                await pilot.pause()

        asyncio.run(walk())
        assert "\x1b" not in str(app.debugger.sub_title) + str(app.title)
