"""The package layout (DESIGN.md, "Layout"; docs/architecture.md): every room with one job.

- No import cycle anywhere, counting imports inside functions and under ``TYPE_CHECKING``,
  except through the engine's tensor/ops core: a tensor's methods are ops, an op makes
  tensors, ``Tensor.backward`` calls ``autograd.backward`` and a node's type hints name
  ``Tensor`` (``torch.Tensor`` and ``torch.autograd`` have the same knot).
- ``engine/`` and ``scenarios/`` import nothing of the debugger: only the engine (and the
  scenarios, for ``scenarios/``) under their installed names.
- No module of ``autograd_tui/`` is over 400 lines.
- Nothing imports the repository's top-level ``engine`` / ``scenarios`` by those names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
#: repository folder -> installed package name (pyproject's package-dir mapping)
PACKAGES = {"autograd_tui": "autograd_tui", "engine": "autograd_tui.engine",
            "scenarios": "autograd_tui.scenarios"}
#: the tensor/ops core: a cycle through one of these is the tensor's knot
CORE = ("autograd_tui.engine.tensor", "autograd_tui.engine.tensor_methods",
        "autograd_tui.engine.ops")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([package, *parts])] = path
    return mods


MODULES = _modules()


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _imports(mod: str) -> set[str]:
    """Every module ``mod`` imports, anywhere in it (top level, functions, TYPE_CHECKING)."""
    path = MODULES[mod]
    package = mod if _is_package(mod) else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{a.name}" for a in node.names)
    return found


def _edges() -> nx.DiGraph:
    g = nx.DiGraph()
    for mod in MODULES:
        g.add_node(mod)
        for target in _imports(mod):
            # importing a module of one's own package does not run that package's __init__
            if target in MODULES and target != mod and not mod.startswith(target + "."):
                g.add_edge(mod, target)
    return g


def _in_core(mod: str) -> bool:
    return any(mod == c or mod.startswith(c + ".") for c in CORE)


def test_no_import_cycles_outside_the_tensor_ops_core():
    g = _edges()
    cycles = [c for c in nx.simple_cycles(g) if not any(_in_core(m) for m in c)]
    assert not cycles, f"import cycles: {sorted(cycles, key=len)[:5]}"


def test_the_graph_sees_lazy_and_type_checking_imports():
    """The cycle test would be blind if it missed these: check it reads both kinds."""
    g = _edges()
    lazy = [(a, b) for a, b in g.edges if a.startswith("autograd_tui.commands.")
            and b.startswith("autograd_tui.session.")]
    assert lazy, "the commands import the session package lazily, inside functions"
    src = "\n".join(p.read_text(encoding="utf-8") for p in MODULES.values())
    assert "if TYPE_CHECKING:" in src


def test_engine_and_scenarios_import_nothing_of_the_debugger():
    for mod, path in MODULES.items():
        if mod.startswith("autograd_tui.engine"):
            allowed = ("autograd_tui.engine",)
        elif mod.startswith("autograd_tui.scenarios"):
            allowed = ("autograd_tui.engine", "autograd_tui.scenarios")
        else:
            continue
        bad = {t for t in _imports(mod) if t.split(".")[0] == "autograd_tui"
               and t != "autograd_tui" and not t.startswith(allowed)}
        bad |= {t for t in _imports(mod) if t == "autograd_tui"
                and not _names_only_engine_or_scenarios(path)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def _names_only_engine_or_scenarios(path: Path) -> bool:
    """``from autograd_tui import engine`` is the engine; anything else is the debugger."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "autograd_tui":
            if any(a.name not in ("engine", "scenarios") for a in node.names):
                return False
    return True


def test_no_module_imports_the_top_level_names_engine_or_scenarios():
    """Installed, they are autograd_tui.engine and autograd_tui.scenarios: a bare
    ``import engine`` would load a second copy of the engine from the checkout."""
    for top in ("autograd_tui", "engine", "scenarios", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            names: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module)
            bad = {m for m in names if m.split(".")[0] in ("engine", "scenarios")}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_no_debugger_module_is_over_400_lines():
    big = {str(p.relative_to(ROOT)): n for p in (ROOT / "autograd_tui").rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not big, f"modules over 400 lines: {big}"


def test_the_top_of_the_debugger_holds_only_the_vocabulary_and_the_writer():
    """words (with invisible, the table of characters its text filter escapes) and files."""
    top = sorted(p.name for p in (ROOT / "autograd_tui").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "files.py", "invisible.py", "words.py"], top
