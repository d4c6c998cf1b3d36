"""Benchmarks: one ``bench_*.py`` module per benchmark, each with a ``main()``.

Run them all with ``make bench`` (``python -m bench``). Benchmarks that write output
files put them under ``bench/results/`` (ignored by git).
"""
