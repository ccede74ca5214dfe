"""Items laid out on as many lines as the width needs, never broken inside one (a Rich renderable).

Used where a line lists things whose words belong together: the zone strip (``us-east-1a ● Normal
4/5``) and the drill-down's title (``✖ Evicted`` │ ``Unknown for 7m52s``).
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text


class ItemLines:
    """Items laid out on as many lines as the width needs, never broken inside an item.

    Rich wraps text at any space, which cut ``us-east-1a ● Normal 4/5`` into ``us-east-1a ●`` /
    ``Normal 4/5`` and dropped the space at the break. Here each item stays whole (cut with an
    ellipsis only when it alone is wider than the screen), items are joined by ``sep``, and every
    line after the first starts with ``indent``.
    """

    def __init__(self, head: Text, items: list[Text], sep: Text, indent: str = " ", *,
                 max_lines: int | None = None, what: str = "", fallback: ItemLines | None = None) -> None:
        self.head, self.items, self.sep, self.indent = head, items, sep, indent
        self.max_lines = max_lines
        """At most this many lines: the last then ends with ``+N more {what}``."""
        self.what = what
        self.fallback = fallback
        """Shorter items to use instead when these need more than ``max_lines`` lines."""

    def lines(self, width: int) -> list[Text]:
        width = max(1, width)
        out: list[Text] = []
        counts: list[int] = []
        """Items on each line of ``out``."""
        line = self.head.copy()
        n = 0
        for item in self.items:
            if n and line.cell_len + self.sep.cell_len + item.cell_len <= width:
                line.append_text(self.sep)
            elif n or (line.cell_len + item.cell_len > width and line.plain.strip()):
                out.append(line)
                counts.append(n)
                line, n = Text(self.indent), 0
            line.append_text(item)
            n += 1
        out.append(line)
        counts.append(n)
        if self.max_lines is not None and len(out) > self.max_lines:
            if self.fallback is not None:
                return self.fallback.lines(width)
            keep = max(1, self.max_lines)
            hidden = sum(counts[keep:])
            out = out[:keep]
            tail = Text(f" +{hidden} more {self.what}".rstrip(), "dim")
            last = out[-1]
            if last.cell_len + tail.cell_len > width:
                last.truncate(max(0, width - tail.cell_len - 1), overflow="ellipsis")
            last.append_text(tail)
        for t in out:
            t.truncate(width, overflow="ellipsis")
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for t in self.lines(options.max_width):
            t.no_wrap = True
            yield t

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)
