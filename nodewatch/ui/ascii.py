"""ASCII mode: every character that reaches the screen is ASCII, each glyph replaced in its own width.

One Textual line filter (:class:`AsciiFilter`) over every line every widget draws, so there is one
place for the rule and nothing escapes it: nodewatch's own symbols, Textual's borders, scroll bars,
the wall's big digits, the footer, cluster text. A replacement takes exactly the cells the glyph
took, so column layout and partial repaints (``partial_update``) are unchanged.

The marks that mean something keep distinct letters (``NodeState`` symbols: ``X`` Evicted, ``>``
Evicting, ``x`` NotReady, ``+`` Ready; the cordon mark ``C``; the timeline's shades ``#`` ``%``
``=`` ``:``); box drawing becomes ``-`` ``|`` ``+``; anything else is its closest ASCII letter
(``é`` -> ``e``) or ``?`` per cell.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from rich.cells import get_character_cell_size
from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

GLYPHS: dict[str, str] = {
    # node states (core/rules.py), cordon, zones (zone_strip.py), warnings
    "✖": "X", "»": ">", "✗": "x", "✓": "+", "⊘": "C", "●": "*", "◐": "%", "○": "o", "⚠": "!", "•": "*",
    "╳": "X", "×": "x", "∞": "*", "…": "~", "·": ".", "▲": "^", "▼": "v", "▶": ">", "■": "#",
    "◀": "<", "←": "<", "→": ">", "↑": "^", "↓": "v", "⏎": "<", "⌫": "<",
    # shades and blocks: the timeline's four (core/format.py bar, ui/timeline.py), the heartbeat's heights
    "█": "#", "▓": "%", "▒": "=", "░": ":",
    "▁": "_", "▂": "_", "▃": "_", "▄": "=", "▅": "=", "▆": "#", "▇": "#",
    "▏": "=", "▎": "=", "▍": "=", "▌": "#", "▋": "#", "▊": "#", "▉": "#", "▐": "#", "▔": "-", "▕": "|",
    "▀": "#", "▖": ".", "▗": ".", "▘": "'", "▝": "'",
    # punctuation
    "“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": ",", "–": "-", "—": "-", "−": "-", "‐": "-",
    "\u00a0": " ", "\u2007": " ", "\u2009": " ", "\u202f": " ", "≤": "<", "≥": ">", "≈": "~", "±": "+",
    "━": "=", "┅": "=", "┉": "=",
}
"""Glyphs nodewatch and Textual draw, each to one ASCII character (all are one cell wide)."""

_HORIZONTAL = ("HORIZONTAL", "LEFT", "RIGHT")
_VERTICAL = ("VERTICAL", "UP", "DOWN")


def _box(name: str) -> str:
    """A box-drawing character by its Unicode name: a line, a corner or junction, a diagonal."""
    if "DIAGONAL" in name:
        return "X" if "CROSS" in name else "/" if "UPPER RIGHT TO LOWER LEFT" in name else "\\"
    across = any(w in name for w in _HORIZONTAL)
    down = any(w in name for w in _VERTICAL)
    return "+" if across and down else "-" if across else "|" if down else "+"


def ascii_char(ch: str) -> str:
    """``ch`` as ASCII of the same width in cells (a wide character becomes two)."""
    if ch.isascii():
        return ch
    if ch in GLYPHS:
        return GLYPHS[ch]
    width = get_character_cell_size(ch)
    if width == 0:
        return ""
    name = unicodedata.name(ch, "")
    if name.startswith("BOX DRAWINGS"):
        return _box(name)
    if name.startswith("BRAILLE PATTERN"):
        return " " if name == "BRAILLE PATTERN BLANK" else ":"
    if name.startswith(("BLOCK", "LOWER", "UPPER", "LEFT", "RIGHT", "QUADRANT")) and width == 1:
        return "#"
    base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    if len(base) == width and base.isprintable():
        return base
    return "?" * width


@lru_cache(maxsize=8192)
def ascii_text(text: str) -> str:
    """``text`` with every character made ASCII, each in its own width (cached: a screen's
    segments repeat from one frame to the next)."""
    if text.isascii():
        return text
    return "".join(ascii_char(ch) for ch in text)


class AsciiFilter(LineFilter):
    """Textual line filter: the text of every segment as ASCII, styles untouched."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out = segments
        for i, seg in enumerate(segments):
            text = seg.text
            if not text.isascii():
                if out is segments:
                    out = list(segments)
                out[i] = Segment(ascii_text(text), seg.style, seg.control)
        return out
