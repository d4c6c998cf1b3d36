"""The benchmarks' shared command line: ``--help`` says what a module runs and how long it
takes, and exits before anything runs (imports that cost, torch's, stay inside ``main``)."""

from __future__ import annotations

import argparse


def parser(prog: str, doc: str | None, takes: str) -> argparse.ArgumentParser:
    """A parser whose help is the module's docstring (what it runs) and ``takes`` (how long)."""
    return argparse.ArgumentParser(
        prog=prog, description=(doc or "").strip(),
        epilog=f"How long: {takes} (a loaded machine takes longer).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
