"""An event's tensor summary, made without the dict (``events._summary_raw``), is byte for
byte what encoding ``summarize``'s dict gives, for every shape, dtype and non-finite value."""

from __future__ import annotations

import msgspec
import numpy as np

from autograd_tui import engine
from autograd_tui.engine.events import summarize, summary_raw

_enc = msgspec.json.Encoder().encode


def _cases() -> list[np.ndarray]:
    fixed = [np.array(1.5), np.array(1e-200), np.array(1e-320), np.array(np.nan),
             np.array(-np.inf), np.array(1e200), np.array([1e200, 3.0]), np.array(-0.0),
             np.zeros((0, 3)), np.arange(6, dtype=np.int64).reshape(2, 3),
             np.arange(5, dtype=np.float32), np.array([True, False]),
             np.array(2.0, dtype=">f8"), np.array([np.nan, 1.0, np.inf, 2.0, 3.0])]
    rng = np.random.default_rng(32)
    out = list(fixed)
    with np.errstate(all="ignore"):
        for _ in range(600):
            shape = tuple(int(x) for x in rng.integers(0, 4, size=int(rng.integers(0, 4))))
            a = rng.standard_normal(shape) * 10.0 ** int(rng.integers(-300, 300))
            if a.size and rng.random() < 0.15:
                a.flat[int(rng.integers(0, a.size))] = rng.choice([np.nan, np.inf, -np.inf])
            if rng.random() < 0.2:
                a = a.astype(rng.choice([np.float32, np.float16]))
            out.append(a)
    return out


def test_summary_bytes_match_the_dict() -> None:
    with np.errstate(all="ignore"):
        for a in _cases():
            t = engine.tensor(a)
            assert bytes(summary_raw(t)) == _enc(summarize(t)), a
            assert bytes(summary_raw(t, full=True)) == _enc(summarize(t, full=True)), a


def test_a_later_summary_sees_an_in_place_change() -> None:
    t = engine.tensor([1.0, 2.0])
    before = bytes(summary_raw(t))
    t.data[0] = 5.0  # under the Tensor's back: no version bump, still seen
    after = bytes(summary_raw(t))
    assert before != after
    assert msgspec.json.decode(after)["values"] == [5.0, 2.0]
    assert msgspec.json.decode(before)["values"] == [1.0, 2.0]
