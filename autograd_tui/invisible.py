"""The characters that change or hide what a line says without showing (``words``' text
filter escapes them): bidirectional controls, invisible format characters (Unicode
category Cf), tag characters and the line separators, as a regex class."""

from __future__ import annotations


def invisible_class() -> str:
    """A regex class of the characters that change or hide what a line says without
    showing: bidirectional controls (U+202A-202E, U+2066-2069, U+200E/F, U+061C), zero-width
    and other invisible format characters (Unicode category Cf: U+200B-200D, U+2060-2064,
    U+FEFF, the tag characters U+E0000-E007F, ...), and the line separators."""
    import unicodedata

    ranges = _CF_RANGES.get(unicodedata.unidata_version) or _cf_ranges()
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def _cf_ranges() -> list[tuple[int, int]]:
    """``invisible_class``'s characters as ranges, from this Python's ``unicodedata``:
    a scan of 1.1M code points (0.1-0.5 s), so done only for a Unicode version that
    ``_CF_RANGES`` does not hold."""
    import sys
    import unicodedata

    cs = [c for c in range(0xA0, sys.maxunicode + 1)
          if unicodedata.category(chr(c)) == "Cf" or c in (0x2028, 0x2029)]
    cs += [c for c in range(0xE0000, 0xE0080)]  # tags, assigned or not
    out: list[tuple[int, int]] = []
    for c in sorted(set(cs)):
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


#: ``_cf_ranges()`` by Unicode version (3.11's is 14.0), so that importing ``words``,
#: which every command does, does not scan every code point; tests/test_text_filter.py
#: checks it against the scan.
_CF_RANGES: dict[str, list[tuple[int, int]]] = {"14.0.0": [
    (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
    (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE007F)]}
