"""Run every ``bench/bench_*.py`` module's ``main()`` in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import bench


def discover() -> list[str]:
    return sorted(
        f"bench.{info.name}"
        for info in pkgutil.iter_modules(bench.__path__)
        if info.name.startswith("bench_")
    )


def main() -> int:
    names = discover()
    if not names:
        print("no benchmarks yet")
        return 0
    for name in names:
        print(f"=== {name} ===", flush=True)
        module = importlib.import_module(name)
        module.main()
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
