"""The header and the footer of a recording: every field's type and range, checked.

A recording is untrusted data (docs/security.md).  The events are checked by their
typed decoder and by the fold; the header (line 1) and the footer (the last line)
are checked here against the shapes the program writes (``recordings.make_header``,
``Run.footer``), so that no view meets a field of the wrong type.  Unknown keys are
allowed (a newer program may add some); a known key of the wrong type is refused
with one message naming it, e.g. ``header: Expected `str`, got `int` - at
`$.scenario.name```.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

Size = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
Text = Annotated[str, msgspec.Meta(max_length=4096)]


class Summary(msgspec.Struct):
    """A tensor summary (``events.summarize``): NaN and infinities are written as text."""

    shape: Annotated[list[Size], msgspec.Meta(max_length=64)]
    dtype: Text
    values: list[float | Text]
    norm: float | Text
    data: Any = None


class Program(msgspec.Struct):
    name: Text
    version: Text


#: a scenario file's FORWARD, as a recording keeps it: sequence_nr (decimal text) -> names
Forward = Annotated[dict[Annotated[str, msgspec.Meta(pattern="^[0-9]{1,20}$")],
                         Annotated[list[Text], msgspec.Meta(max_length=256)]],
                    msgspec.Meta(max_length=65_536)]


class ScenarioInfo(msgspec.Struct, frozen=True):
    name: Text | None = None
    params: dict[Text, Any] = {}
    forward: Forward = {}


class Schedule(msgspec.Struct, frozen=True):
    policy: Text | None = None
    seed: int | None = None
    serialized: bool = True


class Distributed(msgspec.Struct, frozen=True):
    """Which rank of a data-parallel run a recording is (``torch --ranks``, torchrun)."""

    rank: Size
    world_size: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
    backend: Text | None = None


class Header(msgspec.Struct):
    format: Text
    version: int
    program: Program | None = None
    scenario: ScenarioInfo = ScenarioInfo()
    engine: dict[Text, Any] = {}
    schedule: Schedule = Schedule()
    tensors: Literal["summary", "full"] = "summary"
    graph: dict[Text, list[Any]] = {}  # not read back: the events describe the graph
    distributed: Distributed | None = None  # absent: not one rank of several


class Footer(msgspec.Struct):
    events: Size
    schedule: Annotated[str, msgspec.Meta(max_length=2**24)] = ""
    gradients: dict[Text, Summary | None] = {}
    no_gradient: dict[Text, Text] = {}  # a torch program's parameters without one, and why
    status: Literal["completed", "error", "deadlock", "running"] = "completed"
    error: Annotated[str, msgspec.Meta(max_length=2**16)] | None = None
    checksum: Text | None = None


def check_header(header: dict[str, Any]) -> str | None:
    """What is wrong with the header, in one line, or None."""
    return _check(header, Header)


def check_footer(footer: dict[str, Any]) -> str | None:
    """What is wrong with the footer, in one line, or None."""
    return _check(footer, Footer)


def _check(obj: dict[str, Any], kind: type[msgspec.Struct]) -> str | None:
    try:
        msgspec.convert(obj, kind, strict=True)
    except msgspec.ValidationError as e:
        return str(e).replace("\n", " ")
    return None


def rank_of(header: dict[str, Any] | None, default: int) -> int:
    """The rank a recording's header names (``distributed.rank``), else ``default``."""
    d = (header or {}).get("distributed")
    rank = d.get("rank") if isinstance(d, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else default
