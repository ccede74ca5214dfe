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

    def __init__(self, head: Text, items: list[Text], sep: Text, indent: str = " ") -> None:
        self.head, self.items, self.sep, self.indent = head, items, sep, indent

    def lines(self, width: int) -> list[Text]:
        width = max(1, width)
        out: list[Text] = []
        line = self.head.copy()
        has_item = False
        for item in self.items:
            if has_item and line.cell_len + self.sep.cell_len + item.cell_len <= width:
                line.append_text(self.sep)
            elif has_item or (line.cell_len + item.cell_len > width and line.plain.strip()):
                out.append(line)
                line = Text(self.indent)
            line.append_text(item)
            has_item = True
        out.append(line)
        for t in out:
            t.truncate(width, overflow="ellipsis")
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for t in self.lines(options.max_width):
            t.no_wrap = True
            yield t

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)
