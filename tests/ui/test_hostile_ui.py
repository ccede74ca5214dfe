"""Hostile cluster and recording text in every widget of the running dashboard.

A fleet whose names, zones, labels, condition reasons and messages, taints, pod names and event
texts carry Rich/Textual markup (``[@click=...]``, ``[link=...]``, unbalanced tags, trailing
backslashes), terminal escapes (CSI, OSC 52, C1 controls), bidi overrides, zero-width characters
and 100 KB strings. The test walks every widget of every screen (main, wall, drill-down, help, the
command palette with and without a query, notifications) and checks what reaches the terminal:
no control or format character, no link, no click action, and the markup shown as literal text.
"""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.geometry import Region
from textual.widget import Widget

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_UNREACHABLE
from nodewatch.core.settings import Settings
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.drilldown import DrillDown
from nodewatch.ui.help import HelpScreen
from nodewatch.ui.plain import highlighted, plain
from support.factories import T0, event, lease, node, pod, taint
from support.ui_support import FakeReplay, FakeSource, feed

SIZE = (160, 50)
PLANTED = "app.hostile_planted"
"""An action no widget has: if it shows up in a rendered segment's meta, markup was interpreted."""

HOSTILE = [
    f"[@click={PLANTED}]click me[/]",
    "[link=https://evil.example/x]phish[/link]",
    "unbalanced [b]bold [/i] [/] end\\",
    "[",
    "zone\\",
    "\x1b[2J\x1b]52;c;ZXZpbA==\x07 csi+osc52",
    "c1 \x9b31m \x9d0;title\x9c \x85 next",
    "bidi \u202eevil\u202c \u2066iso\u2069",
    "zero\u200bwidth\u200d\u2060\ufeff",
    "zalgo e\u0301\u0302\u0303\u0304\u0305",
    "A" * 100_000,
    "[" * 50_000 + "]" * 50_000,
]


def hostile_state(strings: list[str], now: float = T0) -> FleetState:
    """One node per hostile string, in the string's zone, with it everywhere a node carries text."""
    objs: list[tuple[str, dict]] = []
    for i, s in enumerate(strings):
        name = f"{s}-{i}"
        labels = {f"{s}/key": s, "team": s}
        bad = i % 2 == 0
        objs.append(("nodes", node(name, "Unknown" if bad else "True", zone=s, region=s, labels=labels,
                                   reason=s, message=s, transition=now - 120,
                                   taints=[taint(TAINT_UNREACHABLE, "NoExecute", now - 120), taint(s, "NoSchedule")]
                                   if bad else [taint(s, "NoSchedule")])))
        objs.append(("leases", lease(name, now - (170 if bad else 3))))
        objs.append(("pods", pod(f"{s}-pod", name, owner_kind="StatefulSet", owner_name=s, namespace=s[:60])))
        objs.append(("events", event(f"ev-{i}", name, s, s, now - 30, component=s)))
    return feed(FleetState(Settings(server_version="v1.33.2")), objs, received=now)


def hostile_source(strings: list[str]) -> FakeSource:
    clock = ManualClock(T0)
    return FakeSource(hostile_state(strings), clock, name=strings[0], replay=FakeReplay(clock, T0 - 300, T0 + 600))


def segments(widget: Widget):
    w, h = widget.outer_size
    if not w or not h:
        return
    for strip in widget.render_lines(Region(0, 0, w, h)):
        yield from strip


def screen_text_and_problems(app: NodewatchApp) -> tuple[str, list[str]]:
    """All visible text of the active screen, and what is wrong with any rendered segment."""
    problems: list[str] = []
    text: list[str] = []
    for widget in app.screen.walk_children(with_self=True):
        if not widget.display or not widget.is_mounted:
            continue
        for seg in segments(widget):
            if seg.control:
                continue
            text.append(seg.text)
            bad = [c for c in seg.text if unicodedata.category(c) in ("Cc", "Cf")]
            if bad:
                problems.append(f"{widget!r}: control/format characters {bad[:5]!r} in {seg.text[:60]!r}")
            style = seg.style
            if style is None:
                continue
            if style.link:
                problems.append(f"{widget!r}: a link to {style.link!r} in {seg.text[:60]!r}")
            click = (style.meta or {}).get("@click")
            if click is not None and "hostile" in str(click):
                problems.append(f"{widget!r}: a planted click action {click!r} in {seg.text[:60]!r}")
        text.append("\n")
    return "".join(text), problems


async def walk_every_screen(app: NodewatchApp, pilot, strings: list[str],
                            palette_queries: tuple[str, ...] = ("", "zone", "open", "click", "link")) -> list[str]:
    """Visit every screen and pane; returns what the walk found wrong (empty: all inert)."""
    found: list[str] = []

    async def look(where: str) -> str:
        await pilot.pause()
        text, problems = screen_text_and_problems(app)
        found.extend(f"{where}: {p}" for p in problems)
        return text

    await look("main screen")
    await pilot.press("z")  # zone filter: a notification that quotes a hostile zone name
    await look("zone filter")
    await pilot.press("escape")
    app.action_toggle_wall()
    await look("wall")
    app.action_toggle_wall()
    for name in [v.name for v in app.view.nodes][:len(strings)]:
        app.open_node(name)
        await pilot.pause()
        assert isinstance(app.screen, DrillDown)
        await look(f"drill-down of {name[:40]!r}")
        app.pop_screen()
    app.action_help()
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    await look("help")
    app.pop_screen()
    for query in palette_queries:
        app.action_command_palette()
        await pilot.pause()
        if query:
            await pilot.press(*query)
        await pilot.pause(0.3)
        await look(f"palette {query!r}")
        await pilot.press("escape")
        await pilot.pause()
    return found


async def test_hostile_text_is_inert_in_every_widget():
    src = hostile_source(HOSTILE)
    app = NodewatchApp(src, refresh_seconds=3600, source_problems=[f"line {i}: {s}" for i, s in enumerate(HOSTILE)])
    async with app.run_test(size=SIZE) as pilot:
        found = await walk_every_screen(app, pilot, HOSTILE)
        app.action_command_palette()
        await pilot.pause()
        await pilot.press(*"zone")
        await pilot.pause(0.3)
        palette, _ = screen_text_and_problems(app)
        await pilot.press("escape")
        main, _ = screen_text_and_problems(app)
    assert not found, "\n".join(found[:20])
    assert app.return_code is None  # the planted quit never ran, nothing crashed
    assert f"[@click={PLANTED}]" in palette  # the markup is shown, literally, in the palette's zone entries
    assert "\\x1b[2J" in main and "\\u202e" in main  # escapes are shown escaped, not sent


TOKENS = ["[", "]", "[/]", "/", f"[@click={PLANTED}]", "[link=https://evil.example]", "\\", "=", "$x",
          "\x1b[", "\x1b]52;", "\x07", "\x9b", "\u202e", "\u200b", "\n", "\t"]
hostile_text = st.lists(st.sampled_from(TOKENS) | st.characters(exclude_categories=("Cs",)),
                        min_size=1, max_size=30).map("".join)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strings=st.lists(hostile_text, min_size=1, max_size=3))
async def test_fuzzed_text_is_inert_in_every_widget(strings):
    src = hostile_source(strings)
    app = NodewatchApp(src, refresh_seconds=3600, source_problems=strings)
    async with app.run_test(size=SIZE) as pilot:
        found = await walk_every_screen(app, pilot, strings, palette_queries=("", strings[0][:3] or "z"))
    assert not found, "\n".join(found[:20])


@given(hostile_text)
def test_plain_and_highlighted_never_read_markup(s):
    from nodewatch.core.text import safe

    assert plain(s, 80).plain == safe(s, 80)
    title = safe(s, 80)
    assert highlighted(title, range(len(title)), None).plain == title
