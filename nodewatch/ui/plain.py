"""Untrusted text into widgets: the one door between a cluster or recording string and the screen.

Textual parses a plain ``str`` handed to a widget as *markup*: ``[link=...]`` or ``[/]`` in a zone
label would crash the app with a MarkupError, and ``[@click=app.quit]...[/]`` would become a
clickable action. Escaping markup is not exact (a trailing backslash changes meaning), so untrusted
text never travels as a ``str`` to a widget: it becomes a ``rich.text.Text`` here, after
``core.text.safe`` made it inert for the terminal (escape sequences, C1, bidi and zero-width
characters shown escaped; bounded length). Every widget, the command palette, notifications and
titles take these objects, or strings that hold no cluster text at all.
"""

from __future__ import annotations

from typing import Iterable

from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.style import Style as VisualStyle

from ..core.text import safe


def plain(value: object, max_len: int = 200, style: Style | str = "") -> Text:
    """``value`` as inert, one-line, bounded text that no widget reads as markup."""
    return Text(safe(value, max_len), style=style, no_wrap=True, overflow="ellipsis")


def highlighted(title: str, offsets: Iterable[int], style: VisualStyle | None) -> Content:
    """``title`` (already made safe) with the characters at ``offsets`` in ``style``: the command
    palette's fuzzy-match highlight, without ever parsing ``title`` as markup."""
    content = Content(title)
    for i in offsets:
        if style is not None and 0 <= i < len(title) and not title[i].isspace():
            content = content.stylize(style, i, i + 1)
    return content
