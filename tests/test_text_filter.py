"""Issue 31: one text filter (``words.visible``, inside ``words.plain``) for the terminal,
DOT, SVG and HTML: bidirectional controls, zero-width and other invisible format
characters, and tag characters are written as escapes; output paths in messages too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hostile import names

from autograd_tui.commands.parser import main
from autograd_tui.export.dot import to_dot
from autograd_tui.export.frames import Frame, index_html
from autograd_tui.export.render import render
from autograd_tui.files import CannotWrite, write_bytes
from autograd_tui.history import recordings as trace
from autograd_tui.words import plain, visible

#: each class of character, with the escape it must become
HIDDEN = {
    "\u202e": "\\u202e",  # RIGHT-TO-LEFT OVERRIDE
    "\u202a": "\\u202a",  # LEFT-TO-RIGHT EMBEDDING
    "\u2066": "\\u2066",  # LEFT-TO-RIGHT ISOLATE
    "\u2069": "\\u2069",  # POP DIRECTIONAL ISOLATE
    "\u200e": "\\u200e",  # LEFT-TO-RIGHT MARK
    "\u200f": "\\u200f",  # RIGHT-TO-LEFT MARK
    "\u061c": "\\u061c",  # ARABIC LETTER MARK
    "\u200b": "\\u200b",  # ZERO WIDTH SPACE
    "\u200d": "\\u200d",  # ZERO WIDTH JOINER
    "\u2060": "\\u2060",  # WORD JOINER
    "\ufeff": "\\ufeff",  # ZERO WIDTH NO-BREAK SPACE (BOM)
    "\U000e0041": "\\U000e0041",  # TAG LATIN CAPITAL LETTER A
    "\U000e007f": "\\U000e007f",  # CANCEL TAG
}
CASES = list(HIDDEN.items())


@pytest.mark.parametrize(("char", "escape"), CASES)
def test_the_filter_makes_each_class_visible(char, escape):
    assert visible(f"Mul{char}Backward0") == f"Mul{escape}Backward0"
    assert plain(f"Mul{char}Backward0") == f"Mul{escape}Backward0"


def test_ordinary_text_is_left_alone():
    for s in ("MulBackward0", "größe", "名前", "x→y", "a\\u202eb", "emoji 🙂"):
        assert visible(s) == s and plain(s) == s


def _load(tmp_path: Path, char: str) -> trace.Recording:
    p = tmp_path / "names.jsonl"
    p.write_bytes(names(f"Evil{char}Backward0"))
    return trace.load(p)


@pytest.mark.parametrize(("char", "escape"), CASES)
def test_dot_svg_and_html_show_the_escape(tmp_path, char, escape):
    rec = _load(tmp_path, char)
    dot = to_dot(rec.history.head)
    assert char not in dot and (escape.replace("\\", "\\\\") in dot or escape in dot)
    svg = render(dot, "svg").decode()
    assert char not in svg and escape in svg
    page = index_html([Frame("frame-0001.svg", 1, f"event 1 · Evil{char}")],
                      title=f"t{char}")
    assert char not in page and escape in page


@pytest.mark.parametrize(("char", "escape"), CASES)
def test_the_terminal_shows_the_escape(tmp_path, capsys, char, escape):
    rec = _load(tmp_path, char)
    assert main(["replay", "--headless", str(tmp_path / "names.jsonl")]) == 0
    out = capsys.readouterr()
    assert char not in out.out + out.err and f"Evil{escape}Backward0" in out.out
    assert rec.history.head.nodes[1].name == f"Evil{char}Backward0"  # the data is kept


def test_an_output_path_in_a_message_is_filtered(tmp_path, capsys):
    odd = tmp_path / "a\nb\x1b[31m\u202e.json"
    assert main(["chrome-trace", "linear-relu", "-o", str(odd)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "a\\x0ab\\x1b[31m\\u202e" in out
    gone = tmp_path / "no\x1bfolder" / "x.dot"
    with pytest.raises(CannotWrite) as err:
        write_bytes(gone, b"")
    assert "\x1b" not in str(err.value) and "no\\x1bfolder" in str(err.value)
    assert sys.platform != "linux" or "does not exist" in str(err.value)


def test_a_library_message_is_shown_as_its_lines_each_still_filtered() -> None:
    from autograd_tui.words import plain_lines

    msg = ("Connection closed by peer [127.0.0.1]:553.\r\n\nAt:\n  hooks.py(31): \x1b[2J"
           "<lambda>\u202e\t\n")
    assert plain_lines(msg) == ["Connection closed by peer [127.0.0.1]:553.", "At:",
                                "  hooks.py(31): \\x1b[2J<lambda>\\u202e\\x09"]
    assert plain_lines("one line") == ["one line"] and plain_lines("") == []
    # a recording's strings keep a newline escaped: one event is one line
    assert plain("a\nb") == "a\\x0ab"


def test_the_stored_format_character_ranges_are_this_pythons() -> None:
    """invisible.py keeps the Cf ranges of the Unicode version it was written for, so that an
    import does not scan every code point: they must be what the scan finds."""
    import unicodedata

    from autograd_tui import invisible, words

    stored = invisible._CF_RANGES.get(unicodedata.unidata_version)
    assert stored is not None, f"add Unicode {unicodedata.unidata_version}'s ranges"
    assert stored == invisible._cf_ranges()
    for c in (0x202E, 0x200B, 0xFEFF, 0xE0041, 0x2028):  # each still shown escaped
        assert words._UNSAFE.search(chr(c))
    assert not words._UNSAFE.search("aé→中")
