"""Strings from the cluster are untrusted: make them plain, one-line, bounded text.

Names, labels, taint values and event messages can carry ANSI/OSC escapes (``\\x1b[2J``, OSC 52
clipboard writes), other control characters, bidi overrides and zero-width characters. Printing
them raw would let a cluster object drive the operator's terminal. ``plain`` keeps printable
text, shows every other character as a visible escape, and caps the length.
"""

from __future__ import annotations

import unicodedata

_BIDI_AND_INVISIBLE = {
    0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0xFEFF, 0x061C,
    0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
}
_cache: dict[tuple[str, int], str] = {}


def plain(value: object, max_len: int = 200) -> str:
    """``value`` as printable single-line text, escapes made visible, at most ``max_len`` characters."""
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    key = (s, max_len)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    if s.isascii() and s.isprintable():
        out = s
    else:
        parts = []
        for ch in s:
            o = ord(ch)
            if ch == "\n" or ch == "\t":
                parts.append(" ")
            elif o < 0x20 or 0x7F <= o < 0xA0:
                parts.append(f"\\x{o:02x}")
            elif o in _BIDI_AND_INVISIBLE or unicodedata.category(ch) in ("Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
                parts.append(f"\\u{o:04x}")
            else:
                parts.append(ch)
        out = "".join(parts)
    if len(out) > max_len:
        out = out[: max(0, max_len - 1)] + "…"
    if len(_cache) > 50_000:
        _cache.clear()
    _cache[key] = out
    return out
