"""Command line entry point for ``autograd-tui``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from autograd_tui import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograd-tui",
        description=(
            "Step through a re-implementation of PyTorch's autograd engine and watch "
            "the backward pass run. With no arguments, opens the app."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run; returns the exit code."""
    build_parser().parse_args(argv)

    # Imported lazily so that ``--help``/``--version`` stay fast.
    from autograd_tui.app import AutogradApp

    app = AutogradApp()
    app.run()
    return app.return_code or 0
