"""The docs must not silently rot.

- ``docs/events.md`` documents exactly the kinds, fields, types and meanings of
  ``engine.events.SCHEMA``, and the common fields of ``Event``.
- Every name in the "ours" column of ``docs/engine.md``'s mapping tables exists
  (``Engine.xxx`` names as attributes of ``engine.Engine``), and every function,
  class and method defined in ``engine/`` is listed there.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import threading
from pathlib import Path

import pytest

from autograd_tui import engine
from autograd_tui.engine.events import SCHEMA, Event

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ENGINE_DIR = ROOT / "engine"

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_REF = re.compile(r"\b((?:[a-z_]+/)?[a-z_]+\.py):([A-Za-z_]\w*(?:\.\w+)*)")


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row, with ``\\|`` unescaped and code ticks removed."""
    parts = _CELL_SPLIT.split(line.strip())[1:-1]
    out = []
    for p in parts:
        p = p.strip().replace("\\|", "|")
        if len(p) >= 2 and p.startswith("`") and p.endswith("`") and p.count("`") == 2:
            p = p[1:-1]
        out.append(p)
    return out


def _tables(text: str) -> list[tuple[str | None, list[str], list[list[str]]]]:
    """Every markdown table as (last heading above it, header cells, row cells)."""
    tables = []
    heading: str | None = None
    lines = text.splitlines()
    i = 0
    in_code = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif (not in_code and line.startswith("|") and i + 1 < len(lines)
              and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1].strip())):
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append((heading, header, rows))
            continue
        i += 1
    return tables


# --- events.md ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def events_md() -> str:
    return (DOCS / "events.md").read_text(encoding="utf-8")


def _documented_kinds(text: str) -> dict[str, dict[str, tuple[str, str]]]:
    """kind -> {field: (type, meaning)} from the ``### `kind` `` sections."""
    kinds: dict[str, dict[str, tuple[str, str]]] = {}
    for m in re.finditer(r"^### `(\w+)`\s*$", text, flags=re.M):
        kinds[m.group(1)] = {}
    for heading, header, rows in _tables(text):
        m = re.fullmatch(r"`(\w+)`", heading or "")
        if m is None or header[:3] != ["field", "type", "meaning"]:
            continue
        fields = kinds[m.group(1)]
        for row in rows:
            assert len(row) == 3, f"bad row under {heading}: {row}"
            name, typ, meaning = row
            assert name not in fields, f"{heading}: field {name} listed twice"
            fields[name] = (typ, meaning)
    return kinds


def test_every_kind_and_field_is_mentioned(events_md: str) -> None:
    for kind, fields in SCHEMA.items():
        assert kind in events_md, f"event kind {kind!r} missing from docs/events.md"
        for name in fields:
            assert name in events_md, f"field {kind}.{name} missing from docs/events.md"


def test_events_md_matches_schema_exactly(events_md: str) -> None:
    documented = _documented_kinds(events_md)
    assert list(documented) == list(SCHEMA), "kinds in docs/events.md differ from SCHEMA"
    for kind, fields in SCHEMA.items():
        assert documented[kind] == fields, f"docs/events.md out of sync for {kind!r}"


def test_common_fields_documented(events_md: str) -> None:
    common = ["seq", "kind", *Event.__struct_fields__[1:], "data"]  # kind: the tag
    tables = [rows for heading, header, rows in _tables(events_md)
              if heading == "Common fields" and header[:1] == ["field"]]
    assert len(tables) == 1, "docs/events.md needs one 'Common fields' table"
    assert [row[0] for row in tables[0]] == common
    assert "critical section" in events_md  # the note on how seq is stamped


# --- engine.md --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ours_refs() -> list[tuple[str, str]]:
    """(module file, dotted name) for every reference in an "ours" column."""
    text = (DOCS / "engine.md").read_text(encoding="utf-8")
    refs = []
    for _heading, header, rows in _tables(text):
        if header[:1] != ["ours"]:
            continue
        for row in rows:
            found = _REF.findall(row[0])
            assert found, f"no `file.py:name` reference in ours cell {row[0]!r}"
            refs.extend(found)
    assert len(refs) > 100, "docs/engine.md's name map looks empty"
    return refs


def _class_has(cls: type, attr: str) -> bool:
    """A class attribute, a dataclass field, or an attribute set on ``self`` in its code."""
    if hasattr(cls, attr):
        return True
    if dataclasses.is_dataclass(cls) and attr in {f.name for f in dataclasses.fields(cls)}:
        return True
    for klass in cls.__mro__:
        if klass.__module__.startswith("autograd_tui.engine"):
            if re.search(rf"\bself\.{re.escape(attr)}\b", inspect.getsource(klass)):
                return True
    return False


def test_engine_methods_in_table_exist(ours_refs: list[tuple[str, str]]) -> None:
    names = {name.split(".")[1] for file, name in ours_refs
             if file == "engine.py" and name.startswith("Engine.")}
    assert {"execute", "execute_with_graph_task", "thread_main", "evaluate_function",
            "compute_dependencies", "reentrant_thread_init", "add_thread_pool_task"} <= names
    # Methods are attributes of the class; fields (device_ready_queues, ...) of an instance.
    with engine.Engine() as eng:
        for attr in sorted(names):
            if not attr.startswith("_"):
                assert hasattr(engine.Engine, attr) or hasattr(eng, attr), \
                    f"docs/engine.md names Engine.{attr}, which engine.Engine does not have"


def test_every_ours_reference_resolves(ours_refs: list[tuple[str, str]]) -> None:
    missing = []
    for file, dotted in ours_refs:
        path = ENGINE_DIR / file
        if not path.exists():
            missing.append(f"{file}:{dotted} (no such module)")
            continue
        mod = importlib.import_module(
            "autograd_tui.engine." + file.removesuffix(".py").replace("/", "."))
        parts = dotted.split(".")
        obj = getattr(mod, parts[0], None)
        ok = obj is not None
        if ok and len(parts) >= 2:
            ok = inspect.isclass(obj) and _class_has(obj, parts[1])
        if ok and len(parts) >= 3:
            # e.g. Engine._tls.worker_device: an attribute of an attribute
            ok = all(re.search(rf"\.{re.escape(p)}\b", path.read_text(encoding="utf-8"))
                     for p in parts[2:])
        if not ok:
            missing.append(f"{file}:{dotted}")
    assert not missing, f"docs/engine.md names things that do not exist: {missing}"


# The modules the name map is for: PyTorch's mirrors, plus events.py.  Every public function
# and class in them must be in the map, and every public method of a class in the engine
# modules proper.  Private names, and the new subsystems (sync.py, control.py, state.py, ...),
# are optional; but whatever the map names must exist (test above).
_MAPPED_MODULES = {"autograd.py", "device.py", "engine.py", "events.py", "function.py",
                   "grad_mode.py", "graph.py", "graph_task.py", "input_buffer.py",
                   "ops/base.py", "ops/arith.py", "ops/pointwise.py", "ops/reduction.py",
                   "ops/shape.py", "ops/views.py", "ops/matmul.py", "ops/indexing.py",
                   "ops/join.py", "ops/extrema.py", "ops/nn.py", "ops/inplace.py",
                   "creation.py", "dtypes.py", "tensor_methods.py",
                   "python_hook.py", "ready_queue.py", "strides.py", "tensor.py"}
_METHODS_CHECKED = {"engine.py", "graph_task.py", "ready_queue.py", "input_buffer.py",
                    "graph.py", "events.py", "function.py", "grad_mode.py"}


def test_every_public_engine_definition_is_in_the_map(ours_refs: list[tuple[str, str]]) -> None:
    listed = set(ours_refs)
    missing = []
    for name in sorted(_MAPPED_MODULES):
        path = ENGINE_DIR / name
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            if (name, node.name) not in listed:
                missing.append(f"{name}:{node.name}")
            if isinstance(node, ast.ClassDef) and name in _METHODS_CHECKED:
                for item in node.body:
                    if (isinstance(item, ast.FunctionDef) and not item.name.startswith("_")
                            and (name, f"{node.name}.{item.name}") not in listed):
                        missing.append(f"{name}:{node.name}.{item.name}")
    assert not missing, f"add these to the name map in docs/engine.md: {missing}"


def test_scenarios_md_is_generated_from_the_scenarios():
    from autograd_tui.scenarios import _docs

    path = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"
    assert path.read_text() == _docs.render(), (
        "docs/scenarios.md is out of date: run `python -m autograd_tui.scenarios._docs`")


def test_trace_formats_real_example_is_the_real_recording(tmp_path: Path) -> None:
    """``docs/trace-format.md`` section 11 shows lines of a real recording: each shown
    line is a line of the file the command it names writes (``…`` stands for what is left
    out), in the file's order, and the line and event counts it states are the file's."""
    import subprocess
    import sys

    doc = (DOCS / "trace-format.md").read_text()
    section = doc[doc.index("## 11. A real example"):]
    command = re.search(r"`autograd-tui (run [^`]*?) --record run\.jsonl`", section)
    assert command, "section 11 names the command that wrote its example"
    path = tmp_path / "run.jsonl"
    subprocess.run([sys.executable, "-m", "autograd_tui", *command.group(1).split(),
                    "--record", str(path)], check=True, capture_output=True, timeout=60)
    lines = path.read_text().splitlines()
    block = section.split("```\n", 2)[1].split("\n```", 1)[0].splitlines()
    at = 0
    for shown in block:
        if shown == "…":
            continue
        parts = shown.split("…")
        while at < len(lines) and not (
                lines[at].startswith(parts[0]) and lines[at].endswith(parts[-1])
                and all(p in lines[at] for p in parts)):
            at += 1
        assert at < len(lines), f"not a line of the recording (or out of order): {shown}"
        at += 1
    n_events = len(lines) - 2
    stated = re.search(r"(\d+) lines: the header, (\d+) events, the footer", section)
    assert stated and (int(stated.group(1)), int(stated.group(2))) == (len(lines), n_events)


def _epilog_examples(command: str) -> list[list[str]]:
    """The example command lines of ``autograd-tui COMMAND --help`` (its epilog), split."""
    import argparse
    import shlex

    from autograd_tui.commands import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    epilog = sub.choices[command].epilog or ""
    return [shlex.split(line.split("#")[0])[1:] for line in epilog.splitlines()[1:]]


def _cli_md_runs() -> list[tuple[list[str], int]]:
    """docs/cli.md's ``autograd-tui run`` lines, each with the exit code it says (0 unless
    ``# exits with N``)."""
    import shlex

    out = []
    for line in (DOCS / "cli.md").read_text().splitlines():
        if line.startswith("autograd-tui run "):
            cmd, _, note = line.partition("#")
            said = re.search(r"exits with (\d)", note)
            out.append((shlex.split(cmd)[1:], int(said.group(1)) if said else 0))
    return out


def test_run_examples_run_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Each ``run --help`` example and each of docs/cli.md's ``autograd-tui run`` lines of a
    built-in scenario runs as shown (a schedule string that no longer fitted the scenario
    was a usage error, exit 2), with the exit code it says (4 where ``run --help``'s stops
    at a non-finite value)."""
    from autograd_tui.commands import main

    monkeypatch.chdir(tmp_path)  # --record writes here
    cases = [(a, 4 if "nonfinite" in a else 0) for a in _epilog_examples("run")]
    ran = []
    for args, want in cases + _cli_md_runs():
        if any(a.endswith(".py") for a in args) or "--headless" not in args:  # the reader's
            continue  # own scenario file; the app
        code = main(args)
        out = capsys.readouterr()
        assert code == want, (args, out.out + out.err)
        ran.append(args)
    assert sum("schedule:" in a for args in ran for a in args) == 2, ran


def test_readmes_quickstart_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"python -c '([^']+)'", readme)
    assert code is not None
    exec(code.group(1), {})  # noqa: S102 - the README's own line
    printed = capsys.readouterr().out.strip()
    assert f"`{printed}`" in readme.split("## Quickstart")[1], printed


def _blocks_after(text: str, heading: str) -> list[str]:
    """The fenced blocks of ``text`` after ``heading``, in order."""
    return re.findall(r"```(?:python)?\n(.*?)```", text.split(heading, 1)[1], re.S)


def test_engine_mds_seed_004_trace_is_what_it_prints(
        capsys: pytest.CaptureFixture[str]) -> None:
    """docs/engine.md's worked example of seed 004 (one thread: deterministic) prints the
    trace shown under it, line for line (AccumulateGrad's UINT64_MAX reads ``seq max``),
    and the event numbers its notes cite are those lines'."""
    doc = (DOCS / "engine.md").read_text()
    code, shown = _blocks_after(doc, "### The worked example of seed 004")[:2]
    # a fresh thread: sequence numbers count per thread from 0, as in a fresh program
    t = threading.Thread(target=exec, args=(code, {}))  # the doc's own snippet
    t.start()
    t.join(30)
    assert capsys.readouterr().out == shown
    lines = {int(t.split()[0]): t for t in shown.splitlines()[:-1]}
    notes = doc.split("How to read it against seed 004")[1].split("###")[0]
    for k, what in [(2, "dependencies {"), (26, "not_ready += LinearBackward0#5"),
                    (46, "add = [3]"), (47, "not_ready -= LinearBackward0#5"),
                    (74, "outstanding_tasks -> 0")]:
        assert f"seq {k}" in notes.replace("Seq", "seq") and what in lines[k], (k, lines[k])


def test_engine_mds_custom_engine_prints_what_it_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = (DOCS / "engine.md").read_text()
    code = next(b for b in _blocks_after(doc, "## 4.") if "use_engine(eng)" in b)
    exec(code, {})  # noqa: S102 - the doc's own snippet
    said = code.rsplit("# ", 1)[1].strip()
    assert capsys.readouterr().out.strip() == said


def test_trace_formats_summary_keys_are_the_summaries() -> None:
    """docs/trace-format.md section 5 lists every key a tensor summary can have: a dense
    one's (``data`` with full tensors) and a big sparse gradient's (``nnz``, ``min``,
    ``max``, ``sparse``: they were missing), no more."""
    import numpy as np

    from autograd_tui.engine.events import summarize

    torch = pytest.importorskip("torch")
    from autograd_tui.engine.torch_bridge.convert import sparse_summary

    doc = (DOCS / "trace-format.md").read_text()
    section = doc.split("## 5. Tensor summaries")[1].split("\n## ")[0]
    (_, _, rows), = _tables(section)
    documented = {k.strip("` ") for row in rows for k in row[0].split(",")}
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, -2.0], (5,), check_invariants=True)
    made = set(summarize(np.ones(2), full=True)) | set(sparse_summary(sparse))
    assert documented == made


def test_scenarios_md_code_keeps_its_comments() -> None:
    """The generator moves the notes' headings below the scenario's: a ``# comment`` in a
    code block is not one (it read ``### order == ...``)."""
    in_code = False
    for line in (DOCS / "scenarios.md").read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        assert not (in_code and line.startswith("##")), line


def test_scenarios_mds_show_nodes_is_what_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/scenarios.md's ``show linear-relu --nodes`` table is the command's output (it
    showed three rows of seven; AccumulateGrad's sequence_nr reads ``max``)."""
    from autograd_tui.commands import main

    doc = (DOCS / "scenarios.md").read_text()
    block = _blocks_after(doc, "`autograd-tui show linear-relu --nodes` prints:")[0]
    assert main(["show", "linear-relu", "--nodes"]) == 0
    assert capsys.readouterr().out == block


def _lesson_fixes() -> list[tuple[str, list[str]]]:
    """Each deadlock lesson's fix in docs/scenarios.md, as command-line options: its
    ``--engine K=V`` and its ``Run with `K=V``` (a parameter)."""
    doc = (DOCS / "scenarios.md").read_text()
    out = []
    for name, body in re.findall(r"\n### `([a-z-]+)`(.*?)(?=\n### `|\Z)", doc, re.S):
        if "- expect: deadlock" not in body:
            continue
        args = [["--engine", kv] for kv in re.findall(r"`--engine (\w+=\w+)`", body)]
        args += [["--param", kv] for kv in re.findall(r"Run with `(\w+=\w+)`", body)]
        out += [(name, a) for a in args]
    return out


def test_each_deadlock_lessons_fix_completes(capsys: pytest.CaptureFixture[str]) -> None:
    """What a deadlock lesson says to try (the real design's engine option, the fixed
    program) completes, exit 0: it said "not what the scenario says" and exit 1, EXPECT
    being the deadlock of the scenario as written (which still exits 3)."""
    from autograd_tui.commands import main

    fixes = _lesson_fixes()
    assert len(fixes) >= 5, fixes
    for name, args in fixes:
        code = main(["run", name, "--headless", "--quiet", *args])
        out = capsys.readouterr()
        assert code == 0 and "completed" in out.out, (name, args, out.out + out.err)
    assert main(["run", fixes[0][0], "--headless", "--quiet"]) == 3


def test_each_adds_about_n_nodes_as_its_parameter_says() -> None:
    """A parameter's help that says "each adds about N nodes" (docs/scenarios.md) is
    within a fifth of what one more adds (torch-attention's block adds 62: it said 45)."""
    from autograd_tui import scenarios
    from autograd_tui.commands.show import node_rows

    said = []
    for s in scenarios.builtins():
        for k, p in s.params.items():
            if m := re.search(r"each adds about (\d+) nodes", p.help or ""):
                if s.name.startswith("torch-"):
                    pytest.importorskip("torch")
                one, two = (node_rows(s, {k: str(p.default + i)})[1] for i in (0, 1))
                said.append(s.name)
                assert abs((two - one) - int(m[1])) <= int(m[1]) / 5, (s.name, two - one)
    assert len(said) >= 2, said
