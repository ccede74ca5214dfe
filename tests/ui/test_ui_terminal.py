"""ASCII and 16-colour mode (``ui/terminal.py``, ``ui/ascii.py``, ``theme.palette_16``), and the
cordoned nodes' own mark and filter.

The screen is read the way the terminal gets it: the compositor's full update rendered by a Rich
console, every segment with its text and style. In ASCII mode no character of it may be outside
ASCII (Textual's borders, scroll bars and big digits included); in 16-colour mode no colour may be
anything but one of the terminal's 16 (or its default)."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.color import ColorType
from rich.console import Console

from nodewatch.core.rules import NodeState
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.ascii import GLYPHS, ascii_text
from nodewatch.ui.cells import CORDON_MARK, RowContext, render_row
from nodewatch.ui.rows import RowQuery, layout_columns, select_rows
from nodewatch.ui.terminal import Terminal, detect_terminal
from nodewatch.ui.theme import palette_16
from support.factories import T0
from support.ui_support import incident_source, incident_state

OLD = Terminal(ascii=True, colors16=True, why="test")


def _segments(app: NodewatchApp) -> list:
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return list(console.render(update))


def _screen_text(app: NodewatchApp) -> str:
    return "".join(s.text for s in _segments(app) if not s.control)


# --- deciding the mode -----------------------------------------------------------------------


@pytest.mark.parametrize("env, ascii, colors16", [
    ({"TERM": "linux", "LANG": "en_US.UTF-8"}, True, True),
    ({"TERM": "vt100"}, True, True),
    ({"TERM": "vt220", "LANG": "C.UTF-8"}, True, True),
    ({"TERM": "xterm-256color", "LANG": "en_US.ISO-8859-1"}, True, False),
    ({"TERM": "xterm-256color", "LC_ALL": "C"}, True, False),  # LC_ALL wins over LANG
    ({"TERM": "xterm-256color", "LC_ALL": "C", "LANG": "en_US.UTF-8"}, True, False),
    ({"TERM": "xterm-256color", "LANG": "C", "LC_CTYPE": "C.UTF-8"}, True, False),  # Python's PEP 538 coercion
    ({"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_CTYPE": "C.UTF-8"}, False, False),
    ({"TERM": "xterm-256color", "LANG": "en_US.UTF-8"}, False, False),
    ({"TERM": "xterm-256color", "LC_CTYPE": "de_DE.utf8"}, False, False),
    ({"TERM": "xterm", "LANG": "en_US.UTF-8"}, False, True),  # 16 colours, Unicode glyphs
    ({"TERM": "xterm", "COLORTERM": "truecolor"}, False, False),
    ({"TERM": "screen"}, False, True),
    ({"TERM": "tmux-256color"}, False, False),
    ({}, False, False),  # nothing known: nothing assumed
    ({"TERM": "linux", "NODEWATCH_ASCII": "0"}, False, False),  # the environment beats the guess
    ({"TERM": "xterm-256color", "NODEWATCH_ASCII": "yes"}, True, True),
    ({"TERM": "vt100", "NODEWATCH_FRONTDOOR": "web"}, False, False),  # a browser draws a web viewer
])
def test_the_mode_follows_the_terminal_and_the_locale(env, ascii, colors16):
    t = detect_terminal(env)
    assert (t.ascii, t.colors16) == (ascii, colors16), t.why


def test_the_flag_beats_the_environment_which_beats_the_config_file():
    env = {"TERM": "xterm-256color", "LANG": "en_US.UTF-8"}
    assert detect_terminal(env, flag=True).ascii
    assert detect_terminal(env, config=True).ascii
    assert not detect_terminal({**env, "NODEWATCH_ASCII": "0"}, config=True).ascii
    assert not detect_terminal({"TERM": "linux"}, config=False).ascii
    assert detect_terminal({**env, "NODEWATCH_ASCII": "0"}, flag=True).why == "--ascii"


def test_the_config_file_and_environment_carry_ascii(tmp_path):
    from nodewatch import config

    path = tmp_path / "config.toml"
    path.write_text("ascii = true\n")
    assert config.load_config({"NODEWATCH_CONFIG": str(path)}).ascii is True
    assert config.load_config({"NODEWATCH_CONFIG": str(path), "NODEWATCH_ASCII": "off"}).ascii is False
    path.write_text('ascii = "sometimes"\n')
    c = config.load_config({"NODEWATCH_CONFIG": str(path)})
    assert c.ascii is None and any("ascii: expected true or false" in p for p in c.problems)


# --- the transliteration ---------------------------------------------------------------------


def test_every_glyph_becomes_ascii_of_its_own_width():
    samples = "".join(GLYPHS) + "╭─╮│╰╯┤┼┏┓┗┛╶╴╷╵═║╔╗ ⠿⠀ é ü 日本 \u200b" + "".join(s.symbol for s in NodeState)
    for ch in samples:
        out = ascii_text(ch)
        assert out.isascii() and cell_len(out) == cell_len(ch), (ch, out)


def test_states_keep_distinct_symbols_in_ascii_and_words_without_colour():
    symbols = {ascii_text(s.symbol) for s in NodeState}
    assert len(symbols) == len(NodeState)
    assert ascii_text(CORDON_MARK) not in symbols and ascii_text(CORDON_MARK).isalpha()
    timeline_shades = {ascii_text(c) for c in "█▓▒░"}
    assert len(timeline_shades) == 4  # the fleet timeline's four severities stay apart


# --- the dashboard drawn in ASCII and 16 colours ---------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (150, 40)])
async def test_ascii_mode_puts_nothing_but_ascii_on_screen(size):
    app = NodewatchApp(incident_source(), refresh_seconds=3600, terminal=OLD)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        pages = {"main": _screen_text(app)}
        await pilot.press("w")
        await pilot.pause()
        pages["wall"] = _screen_text(app)
        await pilot.press("w")
        app.open_node("worker-b-0")
        await pilot.pause()
        pages["drill-down"] = _screen_text(app)
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        pages["help"] = _screen_text(app)
    for name, text in pages.items():
        bad = sorted({ch for ch in text if not ch.isascii()})
        assert not bad, (name, bad)
    assert "X Evicted" in pages["main"] and "> Evicting" in pages["main"] and "+ Ready" in pages["main"]
    assert "C" in pages["main"] and "worker-c-cordoned" in pages["main"]
    assert "Evicted" in pages["wall"] and "cordoned" in pages["wall"]


async def test_unicode_mode_is_unchanged_by_the_filter():
    """The control: the same screen without ASCII mode does hold the glyphs (so the test above can fail)."""
    app = NodewatchApp(incident_source(), refresh_seconds=3600)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        text = _screen_text(app)
    assert "✖ Evicted" in text and CORDON_MARK in text and "│" in text


def _colours(app: NodewatchApp) -> set[tuple[str, ColorType]]:
    out = set()
    for seg in _segments(app):
        if seg.style is None or seg.control:
            continue
        for c in (seg.style.color, seg.style.bgcolor):
            if c is not None:
                out.add((c.name, c.type))
    return out


async def test_16_colour_mode_draws_only_the_terminals_16_colours():
    app = NodewatchApp(incident_source(), refresh_seconds=3600, terminal=Terminal(colors16=True), theme="nord")
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "ansi-dark" and app.palette == palette_16(True)
        main = _colours(app)
        await pilot.press("w")
        await pilot.pause()
        wall = _colours(app)
        await pilot.press("T")  # light/dark stays within the 16 colours
        await pilot.pause()
        assert app.theme == "ansi-light" and app.palette == palette_16(False)
        light = _colours(app)
    for colours in (main, wall, light):
        odd = {c for c in colours if c[1] not in (ColorType.DEFAULT, ColorType.STANDARD)}
        assert not odd, odd
    assert ("red", ColorType.STANDARD) in main and ("green", ColorType.STANDARD) in main


async def test_the_theme_of_a_16_colour_session_is_not_remembered():
    chosen: list[str] = []
    app = NodewatchApp(incident_source(), refresh_seconds=3600, terminal=Terminal(colors16=True),
                       on_theme_chosen=lambda name: chosen.append(name))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("T")
        await pilot.pause()
    assert chosen == []


# --- cordoned nodes --------------------------------------------------------------------------


def test_a_cordoned_node_keeps_its_state_and_gets_the_mark():
    view = incident_state().evaluate(T0)
    cordoned = next(v for v in view.nodes if v.name == "worker-c-cordoned")
    assert cordoned.cordoned and cordoned.state is NodeState.READY
    cols = layout_columns(150)
    row = render_row(cordoned, RowContext(T0), cols, 150).text
    assert row.startswith(f"✓ Ready  {CORDON_MARK} worker-c-cordoned")
    others = [render_row(v, RowContext(T0), cols, 150).text for v in view.nodes if not v.cordoned]
    assert others and not any(CORDON_MARK in r for r in others)
    not_ready = next(v for v in view.nodes if v.state is NodeState.NOT_READY or v.state is NodeState.EVICTING)
    import msgspec

    marked = render_row(msgspec.structs.replace(not_ready, cordoned=True), RowContext(T0), cols, 150).text
    assert marked.startswith(f"{not_ready.state.symbol}{not_ready.state.word}{CORDON_MARK} ")  # no cell more
    assert layout_columns(80)[0][1] == 10


def test_the_cordoned_filter_keeps_only_cordoned_nodes_in_any_state():
    view = incident_state().evaluate(T0)
    rows = select_rows(view, RowQuery(cordoned=True))
    assert [v.name for v in rows] == ["worker-c-cordoned"]
    assert select_rows(view, RowQuery(cordoned=True, states=NodeState.EVICTED)) == []


async def test_the_cordoned_filter_key():
    app = NodewatchApp(incident_source(), refresh_seconds=3600)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        await pilot.press("C")
        await pilot.pause()
        from nodewatch.ui.fleet_table import FleetTable

        assert [v.name for v in app.query_one("#table", FleetTable).rows] == ["worker-c-cordoned"]
        assert "cordoned only" in app.sub_title
        await pilot.press("C")
        await pilot.pause()
        assert len(app.query_one("#table", FleetTable).rows) == len(app.view.nodes)
