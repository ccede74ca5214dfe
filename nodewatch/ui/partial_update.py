"""Make Textual write only the dirty span of a line, not everything left of it.

Why: ``Widget.refresh(region)`` marks part of a line dirty and the compositor computes the dirty
spans correctly, but ``ChopsUpdate.render_segments`` (the code that turns an update into terminal
bytes, Textual 8.2) crops a widget's line only at the right end of the span: it writes from the
widget's left edge (Textual issue #5625, closed without a change). For the fleet table that means
a countdown in the middle of a row rewrites the state, name, zone and renew columns before it,
every second, on every row: most of a full repaint on a slow SSH link.

:func:`install` replaces that one method with a version that also skips the whole segments that
end before the span starts (as Textual's own ``ChopsUpdate.__rich_console__`` does) and cuts the
segment that reaches the span at its first dirty cell when every character of it is one cell wide
(a countdown "1m43s" -> "1m44s" then costs one character); a segment holding wide or combining
characters is written whole, so no character is ever split. What reaches the screen is unchanged: the
skipped cells are, by the definition of a dirty span, already on the screen.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.control import Control
from textual.strip import Strip

_ORIGINAL: Callable[..., str] | None
"""Textual's own ``render_segments``, put back by ``uninstall``; None when this Textual has none."""

try:  # a private Textual class: if a Textual release moves it, nodewatch keeps Textual's own way
    from textual._compositor import ChopsUpdate

    _ORIGINAL = ChopsUpdate.render_segments
except (ImportError, AttributeError):  # pragma: no cover - depends on the Textual release
    ChopsUpdate = None  # type: ignore[assignment,misc]
    _ORIGINAL = None


def single_width(text: str) -> bool:
    """Every character takes exactly one cell: the text can be cut anywhere without breaking one."""
    if text.isascii():
        return text.isprintable()
    return all(get_character_cell_size(ch) == 1 for ch in text)


def first_column(strip: Strip, x: int, x1: int) -> int:
    """Where to start writing ``strip`` (which starts at screen column ``x``) to cover ``x1`` on:
    segments that end at or before ``x1`` are skipped; the one that reaches ``x1`` is cut at
    ``x1`` when all its characters are one cell wide, or else written whole. An offset in cells."""
    skip = 0
    for segment in strip:
        text = segment.text
        w = cell_len(text)
        if x + skip + w > x1:
            if not segment.control and single_width(text):
                return x1 - x
            break
        skip += w
    return skip


def render_segments(self: ChopsUpdate, console: Console) -> str:
    """``ChopsUpdate.render_segments`` cropping each chop at both ends of the dirty span."""
    sequences: list[str] = []
    append = sequences.append
    move_to = Control.move_to
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]

    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items()):
            if strip is None:
                continue
            if x > x2 or end <= x1:
                continue
            if x2 > x >= x1 and end <= x2:
                append(move_to(x, y).segment.text)
                append(strip.render(console))
                continue
            start = first_column(strip, x, x1) if x < x1 else 0
            strip = strip.crop(start, min(end, x2) - x)
            if not strip.cell_length:
                continue
            append(move_to(x + start, y).segment.text)
            append(strip.render(console))
        if y != last_y:
            append("\n")

    return "".join(sequences)


def install() -> None:
    """Use :func:`render_segments` for every partial screen update of this process (idempotent).

    A no-op when this Textual has no ``ChopsUpdate.render_segments`` to replace."""
    if ChopsUpdate is None:
        return
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]


def uninstall() -> None:
    """Back to Textual's own method (for tests that compare the two)."""
    if ChopsUpdate is not None and _ORIGINAL is not None:  # set together
        ChopsUpdate.render_segments = _ORIGINAL  # type: ignore[method-assign]

