"""Colors for node states, zones and levels, taken from the active Textual theme.

The styles come from the theme's ``text-error`` / ``text-warning`` / ``text-success`` variables,
which Textual tunes for the theme's own background, so the table reads on dark and light themes
alike. Color is never the only signal: every state also has a symbol and a word, and the worst
states are bold, so the screen stays readable with ``NO_COLOR=1`` or on a monochrome terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.color import Color as RichColor
from rich.style import Style
from textual.color import Color

from ..core.rules import NodeState, ZoneState


def _color(variables: dict[str, str], name: str, fallback: str) -> RichColor | None:
    value = variables.get(name, fallback)
    try:
        return Color.parse(value).rich_color
    except Exception:  # noqa: BLE001 - "auto 60%" and friends: use the fallback
        try:
            return Color.parse(fallback).rich_color
        except Exception:  # noqa: BLE001
            return None


@dataclass(frozen=True)
class Palette:
    """Rich styles for the Line-API table and the small panes."""

    bad: Style
    warn: Style
    good: Style
    muted: Style
    accent: Style
    header: Style
    cursor: Style
    banner: Style
    states: dict[NodeState, Style] = field(default_factory=dict)
    zones: dict[ZoneState, Style] = field(default_factory=dict)
    cert: dict[str, Style] = field(default_factory=dict)

    def state(self, s: NodeState) -> Style:
        return self.states.get(s, Style())


def palette_from_variables(variables: dict[str, str]) -> Palette:
    """A palette from ``App.get_css_variables()`` (so it follows theme changes)."""
    dark = Color.parse(variables.get("background", "#121212")).brightness < 0.5
    error = _color(variables, "text-error", "#D17E92" if dark else "#7A273C")
    warning = _color(variables, "text-warning", "#FFC473" if dark else "#A86D1C")
    success = _color(variables, "text-success", "#8AD4A1" if dark else "#337E4A")
    accent = _color(variables, "text-primary", "#57A5E2" if dark else "#004578")
    muted = _color(variables, "foreground-darken-3" if dark else "foreground-lighten-3", "#8A8A8A")
    error_bg = _color(variables, "error", "#B93C5B")
    cursor_bg = _color(variables, "primary-muted" if "primary-muted" in variables else "panel",
                       "#1E3D56" if dark else "#A9C5DC")
    bad = Style(color=error, bold=True)
    warn = Style(color=warning, bold=True)
    good = Style(color=success)
    return Palette(
        bad=bad,
        warn=warn,
        good=good,
        muted=Style(color=muted) if muted else Style(dim=True),
        accent=Style(color=accent, bold=True),
        header=Style(bold=True, underline=True),
        cursor=Style(bgcolor=cursor_bg, bold=True),
        banner=Style(color=RichColor.parse("#FFFFFF"), bgcolor=error_bg, bold=True),
        states={
            NodeState.EVICTED: Style(color=error, bold=True, reverse=True),
            NodeState.EVICTING: bad,
            NodeState.UNKNOWN: bad,
            NodeState.NOT_READY: bad,
            NodeState.OVERDUE: warn,
            NodeState.LATE: Style(color=warning),
            NodeState.READY: good,
        },
        zones={ZoneState.NORMAL: good, ZoneState.PARTIAL: warn, ZoneState.FULL: Style(color=error, bold=True, reverse=True)},
        cert={"ok": Style(), "unknown": Style(color=muted) if muted else Style(dim=True), "warn": warn,
              "critical": bad, "expired": Style(color=error, bold=True, reverse=True)},
    )


ANSI_THEMES = {True: "ansi-dark", False: "ansi-light"}
"""Textual's themes made of the terminal's own 16 colours, by darkness (16-colour mode)."""


def palette_16(dark: bool = True) -> Palette:
    """The palette of a 16-colour terminal (``ui/terminal.py``): the named ANSI colours, which the
    terminal shows as it was set up to (no truecolor value rounded to a neighbour). Red is down,
    yellow is late, green is Ready; the worst states are also bold or reversed, and every state has
    its word, so none depends on a colour alone."""
    red, yellow, green = RichColor.parse("red"), RichColor.parse("yellow"), RichColor.parse("green")
    blue, cyan = RichColor.parse("blue"), RichColor.parse("cyan")
    grey = RichColor.parse("bright_black" if dark else "black")
    white = RichColor.parse("bright_white")
    bad = Style(color=red, bold=True)
    warn = Style(color=yellow if dark else RichColor.parse("magenta"), bold=True)
    good = Style(color=green)
    muted = Style(color=grey) if dark else Style(dim=True)
    evicted = Style(color=red, bold=True, reverse=True)
    return Palette(
        bad=bad, warn=warn, good=good, muted=muted, accent=Style(color=cyan if dark else blue, bold=True),
        header=Style(bold=True, underline=True), cursor=Style(bgcolor=blue, color=white, bold=True),
        banner=Style(color=white, bgcolor=red, bold=True),
        states={
            NodeState.EVICTED: evicted, NodeState.EVICTING: bad, NodeState.UNKNOWN: bad, NodeState.NOT_READY: bad,
            NodeState.OVERDUE: warn, NodeState.LATE: Style(color=warn.color), NodeState.READY: good,
        },
        zones={ZoneState.NORMAL: good, ZoneState.PARTIAL: warn, ZoneState.FULL: evicted},
        cert={"ok": Style(), "unknown": muted, "warn": warn, "critical": bad, "expired": evicted},
    )


DEFAULT_PALETTE = palette_from_variables({})
