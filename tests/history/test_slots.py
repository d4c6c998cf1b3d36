"""``Slots``: an InputBuffer's slot summaries, set one at a time, read as a tuple; the
one-chunk fast path reads as the chunked one."""

from __future__ import annotations

import random

import pytest

from autograd_tui.history.state import Slots


@pytest.mark.parametrize("n", [1, 3, Slots.CHUNK, Slots.CHUNK + 1, 3 * Slots.CHUNK + 5])
def test_slots_read_as_the_tuple_they_were_set_to(n: int) -> None:
    rng = random.Random(n)
    want: list[object] = [None] * n
    s = Slots(n)
    history = [(s, tuple(want))]
    for _ in range(3 * n):
        i, v = rng.randrange(n), rng.random()
        s, want[i] = s.set(i, v), v
        history.append((s, tuple(want)))
    for slots, expected in history:  # every earlier buffer is unchanged
        assert len(slots) == n and tuple(slots) == expected
        assert [slots[i] for i in range(n)] == list(expected)
