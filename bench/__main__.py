"""Run every ``bench/bench_*.py`` module's ``main()`` in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench
from bench import _cli


def discover() -> list[str]:
    return sorted(
        f"bench.{info.name}"
        for info in pkgutil.iter_modules(bench.__path__)
        if info.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    names = discover()
    doc = (__doc__ or "") + "\n\nEach with its defaults; for one module's options: " \
        "python -m bench.<module> --help.\nModules: " + ", ".join(n[6:] for n in names)
    _cli.parser("python -m bench", doc, "the sum of the modules': most of an hour").parse_args(
        sys.argv[1:] if argv is None else argv)
    if not names:
        print("no benchmarks yet")
        return 0
    for name in names:
        print(f"=== {name} ===", flush=True)
        module = importlib.import_module(name)
        module.main([])  # the defaults: this command's own arguments are not theirs
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
