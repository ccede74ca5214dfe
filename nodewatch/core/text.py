"""Strings from the cluster are untrusted: make them plain, one-line, bounded text; and durations.

Names, labels, taint values and event messages can carry ANSI/OSC escapes (``\\x1b[2J``, OSC 52
clipboard writes), other control characters, bidi overrides and zero-width characters. Printing
them raw would let a cluster object drive the operator's terminal. ``safe`` is the one place that
makes such text inert: the dashboard wraps its result in ``rich.text.Text`` (never markup) and
``nodewatch status`` prints it as is.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

ELLIPSIS = "…"
MAX_COMBINING = 2
"""Combining marks allowed after one base character (beyond that: "zalgo" text that bleeds rows)."""

# ESC-introduced sequences: CSI (ESC [ ... final), OSC / DCS / SOS / PM / APC (ESC ] ... BEL or
# ST), and two-character escapes. Their C1 single-byte forms (0x9b CSI, 0x9d OSC, ...) too.
_ESCAPES = re.compile(
    r"""
    (?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?      # CSI, e.g. \x1b[2J, \x1b[31m
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)  # OSC 52, DCS ... up to BEL/ST
  | \x1b[\x20-\x2f]*[\x30-\x7e]?                               # other escapes (ESC c, ESC ( B)
    """,
    re.VERBOSE | re.DOTALL,
)
_SPACES = {"\t", "\n", "\r", "\v", "\f", "\u2028", "\u2029", "\x85"}
# Categories never shown as themselves: controls, format characters (bidi overrides and isolates,
# zero-width space/joiners, BOM, soft hyphen), lone surrogates (cannot be encoded) and unassigned
# code points (their width is unknown to the terminal).
_ESCAPE_CATEGORIES = {"Cc", "Cf", "Cs", "Cn"}


def _escape_char(ch: str) -> str:
    cp = ord(ch)
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def safe(s: object, max_len: int = 200) -> str:
    """An untrusted string made inert and at most ``max_len`` characters long.

    - Terminal escape sequences (CSI such as ``\\x1b[2J``, OSC such as the OSC 52 clipboard write,
      DCS, ...) are shown escaped as text: ``\\x1b[2J`` reads literally and does nothing.
    - Line breaks and tabs become spaces (a cell is one line).
    - Other control, format (bidi overrides, zero-width characters), surrogate and unassigned code
      points are shown as ``\\xNN`` / ``\\uNNNN``.
    - Runs of combining marks are cut to :data:`MAX_COMBINING`.
    - Longer than ``max_len``: cut, ending in ``…``.

    Rich markup needs no escaping here: callers wrap the result in ``Text``, never in markup.
    """
    if s is None or max_len <= 0:
        return ""
    return _safe(s if isinstance(s, str) else str(s), max_len)


def middle_cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (``ap-so…ast-1a``), not at the
    end: what tells a fleet's zones apart is their last letter (``ap-southeast-1a``, ``-1b``,
    ``-1c`` all read ``ap-southeast`` cut at the end). A text that is not ASCII is left as it is
    (its cells are not its characters: the caller's own cut applies)."""
    if len(text) <= width or width < 5 or not text.isascii():
        return text
    tail = (width - 1) // 2 + (width - 1) % 2
    return text[:width - 1 - tail] + ELLIPSIS + text[-tail:]


@lru_cache(maxsize=65536)
def _safe(text: str, max_len: int) -> str:
    # Work on a bounded prefix: a 10 MB annotation must not cost 10 MB of work per frame.
    if len(text) > 4 * max_len + 64:
        text = text[: 4 * max_len + 64]
        truncated = True
    else:
        truncated = False
    if text.isascii() and text.isprintable():
        out = text
    else:
        text = _ESCAPES.sub(lambda m: "".join(_escape_char(c) if not c.isprintable() else c for c in m.group(0)), text)
        parts: list[str] = []
        combining = 0
        for ch in text:
            if ch in _SPACES:
                parts.append(" ")
                combining = 0
                continue
            cat = unicodedata.category(ch)
            if cat in _ESCAPE_CATEGORIES:
                parts.append(_escape_char(ch))
                combining = 0
            elif cat in ("Mn", "Me", "Mc"):
                combining += 1
                if combining <= MAX_COMBINING and parts:
                    parts.append(ch)
            else:
                combining = 0
                parts.append(ch)
        out = "".join(parts)
    if truncated or len(out) > max_len:
        out = out[: max_len - 1] + ELLIPSIS
    return out



LONGEST_SHOWN = 100 * 365 * 86400
"""Durations beyond a century are shown as ``>100y``: no 300-digit number from a wild value."""


def _too_long(seconds: float) -> str | None:
    if abs(seconds) < LONGEST_SHOWN:
        return None
    if math.isinf(seconds):
        return "∞"
    return ">100y" if seconds > 0 else "<-100y"


def duration(seconds: float | None) -> str:
    """A short human duration: ``12s``, ``3m05s``, ``2h05m``, ``4d03h``; ``?`` when unknown;
    ``>100y`` (and ``∞``) beyond a century."""
    if seconds is None or math.isnan(seconds):
        return "?"
    longer = _too_long(seconds)
    if longer is not None:
        return longer
    s = int(abs(seconds))
    sign = "-" if seconds < 0 and s > 0 else ""
    if s < 60:
        return f"{sign}{s}s"
    m, sec = divmod(s, 60)
    if m < 60:
        return f"{sign}{m}m{sec:02d}s" if m < 10 else f"{sign}{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{sign}{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{sign}{d}d{h:02d}h" if d < 100 else f"{sign}{d}d"


def short_duration(seconds: float | None) -> str:
    """One unit only, for tight cells: ``45s``, ``2m``, ``3h``, ``4d``; ``>100y`` beyond a century."""
    if seconds is None or math.isnan(seconds) or math.isinf(seconds):
        return "?"
    longer = _too_long(seconds)
    if longer is not None:
        return longer
    s = int(abs(seconds))
    sign = "-" if seconds < 0 and s > 0 else ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{sign}{s // size}{unit}"
    return f"{sign}{s}s"


