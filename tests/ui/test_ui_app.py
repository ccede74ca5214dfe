"""The dashboard driven by Pilot: every key and every pane, around a fake source in virtual time.

The app ticks once per ``refresh_seconds``; the tests set it to an hour and call ``app.tick()``
after moving the ManualClock, so nothing waits for a timer.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Region

from nodewatch.core.clock import ManualClock
from nodewatch.core.fencing import fencing_advice
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState, ZoneState
from nodewatch.core.views import ZoneView
from nodewatch.ui import app as app_module
from nodewatch.ui.app import NodewatchApp, run_dashboard
from nodewatch.ui.commands import NodewatchCommands
from nodewatch.ui.drilldown import DrillDown
from nodewatch.ui.fleet_table import FleetTable
from nodewatch.ui.header import header_text
from nodewatch.ui.help import HelpScreen
from nodewatch.ui.problems import ProblemsScreen
from nodewatch.ui.replay_bar import ReplayBar
from nodewatch.ui.rows import COLUMN_KEYS, NOT_READY
from nodewatch.ui.theme import palette_16
from nodewatch.ui.wall import CountBox
from nodewatch.ui.zone_strip import zone_items
from support.factories import T0, node, taint
from support.ui_support import FakeSource, big_state, incident_source

SIZE = (160, 40)


def make_app(*, replay: bool = False, wall: bool = False, focus: str | None = None):
    src = incident_source(replay=replay)
    return src, NodewatchApp(src, wall=wall, focus=focus, refresh_seconds=3600)


def table_lines(app: NodewatchApp, selector: str = "#table") -> list[str]:
    t = app.query_one(selector, FleetTable)
    return [t.render_line(y).text for y in range(t.size.height)]


def shown(app: NodewatchApp, selector: str = "#table") -> list[str]:
    return [v.name for v in app.query_one(selector, FleetTable).rows]


def static_text(widget) -> str:
    """What the widget shows, as plain text (lines joined with newlines, trailing blanks cut)."""
    w, h = widget.outer_size
    return "\n".join(s.text.rstrip() for s in widget.render_lines(Region(0, 0, w, h)))


async def test_main_screen_shows_header_zones_summary_and_worst_first():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        header = static_text(app.query_one("#header"))
        assert "fake: incident, 12 nodes" in header
        assert "grace 50s (server v1.33.2)" in header and "toleration 300s (pods)" in header
        assert "2027-01-15 08:00:00Z" in header and "virtual" in header
        assert "✖ Evicted 1" in header and "» Evicting 3" in header and "✓ Ready 6" in header
        zones = static_text(app.query_one("#zones"))
        assert "eu-1b ○ FullDisruption 0/3 · 0.1/s" in zones and "eu-1a ● Normal 4/4" in zones
        summary = static_text(app.query_one("#summary"))
        assert "StatefulSet pods at risk: 2" in summary
        assert "eu-1/eu-1b (FullDisruption)" in summary
        names = shown(app)
        assert names[0] == "worker-c-runtime" and names[1:4] == ["worker-b-0", "worker-b-1", "worker-b-2"]
        lines = table_lines(app)
        assert lines[0].startswith("STATE ▼")
        assert "evict in 3m00s" in lines[2]
        assert not app.query("#replay")  # no replay controls for a source without them
        assert not app.query_one("#banner").has_class("-on")
        assert src.focused == [] and not src.started  # the app never starts the source


async def test_tick_moves_countdowns_with_the_source_clock():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "evict in 3m00s" in table_lines(app)[2]
        src.clock.advance(61)
        app.tick()
        await pilot.pause()
        assert "evict in 1m59s" in table_lines(app)[2]
        src.clock.advance(200)  # past the deadline: the three nodes are Evicted now
        app.tick()
        await pilot.pause()
        assert app.view.counts[NodeState.EVICTED] == 4
        assert "✖ Evicted 4" in static_text(app.query_one("#header"))


async def test_cursor_keys_and_enter_open_the_drilldown_and_escape_closes_it():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one("#table", FleetTable)
        await pilot.press("down", "j")
        assert table.cursor == 2
        await pilot.press("up")
        assert table.cursor == 1
        await pilot.press("end")
        assert table.cursor == len(table.rows) - 1
        await pilot.press("home", "pagedown")
        assert table.cursor == len(table.rows) - 1  # 12 rows fit on one page
        await pilot.press("pageup", "down")
        assert table.current.name == "worker-b-0"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DrillDown) and app.screen.node == "worker-b-0"
        assert src.focused == ["worker-b-0"]
        pods = static_text(app.screen.query_one("#dd-pods"))
        advice = fencing_advice(None).split(" (")[0]
        assert "prod/db-0 ⚠ at risk" in pods and advice in pods
        everything = "\n".join(static_text(w) for w in app.screen.query("#dd-summary, .section"))
        assert everything.count(advice) == 1  # the advice is said once, with the pods
        assert app.screen.query_one("#dd-pods").has_class("-risk")
        cause = static_text(app.screen.query_one("#dd-cause"))
        assert "systemctl status kubelet" in cause and "6443" in cause
        lease = static_text(app.screen.query_one("#dd-lease"))
        # listed, not seen renewing: the age is from renewTime and the skew is not known yet
        assert "holder" in lease and "2m50s" in lease and "observed skew  ?" in lease
        assert "age from       renewTime: node clock" in lease
        timeline = static_text(app.screen.query_one("#dd-timeline"))
        assert "eviction due" in timeline and "in 3m00s" in timeline
        events = static_text(app.screen.query_one("#dd-events"))
        assert events.index("NodeNotReady") < events.index("Starting")  # newest first
        conds = static_text(app.screen.query_one("#dd-conditions"))
        assert "NodeStatusUnknown" in conds and "Kubelet stopped" in conds
        taints = static_text(app.screen.query_one("#dd-taints"))
        assert "node.kubernetes.io/unreachable" in taints and "2027-01-15 07:58:00Z" in taints
        # the drill-down ticks too
        src.clock.advance(10)
        app.tick()
        await pilot.pause()
        assert "evict in 2m50s" in static_text(app.screen.query_one("#dd-summary"))
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DrillDown)
        assert src.focused == ["worker-b-0", None]
        assert table.current.name == "worker-b-0"  # the cursor stayed on the node


async def test_focus_argument_opens_the_drilldown_and_cert_pane():
    src, app = make_app(focus="worker-c-cert")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, DrillDown)
        cert = static_text(app.screen.query_one("#dd-cert"))
        assert "5d (critical)" in cert and "CSR csr-c-cert" in cert
        node_info = static_text(app.screen.query_one("#dd-node"))
        assert "topology.kubernetes.io/zone=eu-1c" in node_info
        await pilot.press("q")  # q closes the drill-down, it does not quit
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, DrillDown)


async def test_state_filter_zone_filter_sort_and_reverse_keys():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("f")
        assert app.query_rows.states == NOT_READY
        assert len(shown(app)) == 6
        await pilot.press("f")
        assert app.query_rows.states is NodeState.EVICTED and shown(app) == ["worker-c-runtime"]
        await pilot.press("escape")
        assert app.query_rows.states is None and len(shown(app)) == 12
        await pilot.press("z", "z")
        assert app.query_rows.zone == "eu-1/eu-1b"
        assert set(shown(app)) == {"worker-b-0", "worker-b-1", "worker-b-2"}
        await pilot.press("escape")
        await pilot.press("s")
        assert app.query_rows.sort == COLUMN_KEYS[1] == "name"
        assert shown(app) == sorted(shown(app))
        assert "NODE ▼" in table_lines(app)[0]
        await pilot.press("r")
        assert shown(app) == sorted(shown(app), reverse=True)
        assert "NODE ▲" in table_lines(app)[0]
        for _ in range(len(COLUMN_KEYS) - 1):
            await pilot.press("s")
        assert app.query_rows.sort == "state"
        assert "sort state reversed" in app.sub_title


async def test_search_names_and_labels():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        box = app.query_one("#search")
        assert box.has_focus and box.has_class("-on")
        await pilot.press(*"late")
        await pilot.pause()
        assert shown(app) == ["worker-a-late"]
        await pilot.press("enter")
        assert app.query_one("#table").has_focus
        assert shown(app) == ["worker-a-late"]
        await pilot.press("slash", *"\b\b\b\b")
        await pilot.press(*"zone=eu-1b")
        await pilot.pause()
        assert set(shown(app)) == {"worker-b-0", "worker-b-1", "worker-b-2"}
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == 12 and not box.has_class("-on")


async def test_wall_mode_toggles_and_lists_only_nodes_not_ready():
    src, app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("w")
        await pilot.pause()
        assert app.wall and app.query_one("#wall").display and not app.query_one("#main").display
        wall_rows = shown(app, "#wall-table")
        assert len(wall_rows) == 6 and "worker-a-0" not in wall_rows
        assert app.query_one("#wall-table", FleetTable).current is None  # no cursor
        # the cordoned node is Ready (not in the wall's table): the title counts it
        assert static_text(app.query_one("#wall-title")).strip() == "6 of 12 nodes not Ready  ⊘ 1 cordoned"
        assert app.query_one("#count-evicting").display and not app.query_one("#count-unknown").display
        lines = table_lines(app, "#wall-table")
        assert all(len(line) <= 80 for line in lines) and "Evicting" in lines[2]
        await pilot.press("f")  # filters are off in wall mode
        assert app.query_rows.states is None
        await pilot.press("w")
        await pilot.pause()
        assert not app.wall and app.query_one("#main").display


async def test_wall_flag_and_every_node_ready():
    src, app = make_app(wall=True)
    with src.state.lock:
        for name in list(src.state.nodes):
            src.state.apply("nodes", "DELETED", node(name), T0)
    async with app.run_test(size=(300, 80)) as pilot:
        await pilot.pause()
        assert app.wall
        assert "every node is Ready" in table_lines(app, "#wall-table")[1]


async def test_help_lists_every_binding_this_source_can_use():
    """Every key of a replay, and none that never does anything in one: a hub viewer's history and
    its way back, the cluster filter of several clusters (a replay's help listed them)."""
    src, app = make_app(replay=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = static_text(app.screen.query_one("#help-table"))
        never = {"app.history", "app.live", "app.filter_cluster"}
        ids = [b.id for b in [*NodewatchApp.BINDINGS, *FleetTable.BINDINGS, *DrillDown.BINDINGS]]
        assert never <= set(ids)
        for binding_id in ids:
            assert (binding_id in text) == (binding_id not in never), binding_id
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


def test_every_binding_has_an_id():
    for cls in (NodewatchApp, FleetTable, DrillDown, HelpScreen):
        for b in cls.BINDINGS:
            assert isinstance(b, Binding) and b.id, (cls.__name__, b)
    ids = [b.id for cls in (NodewatchApp, FleetTable, DrillDown, HelpScreen) for b in cls.BINDINGS]
    assert len(ids) == len(set(ids))


async def test_the_replay_bar_says_when_the_end_is_only_what_has_been_read():
    """A long recording plays while it is still being read: its end so far is not its end."""
    src, app = make_app(replay=True)
    src.replay.complete = False
    src.replay.changes = []
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        bar = app.query_one("#replay", ReplayBar)
        assert "read so far (reading on)" in static_text(bar)
        await pilot.press("n")  # nothing further in what has been read: said so
        notes = [str(n.message) for n in app._notifications]
        assert "no further state change in the recording read so far (reading on)" in notes
        src.replay.complete = True
        app.tick()
        await pilot.pause()
        assert "reading" not in static_text(bar)


async def test_replay_controls_drive_the_replay():
    src, app = make_app(replay=True)
    r = src.replay
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.query_one("#replay", ReplayBar)
        assert "paused" in static_text(bar) and "next state change in 30s" in static_text(bar)
        await pilot.press("space")
        assert r.playing and "playing" in static_text(bar)
        await pilot.press("space")
        assert not r.playing
        await pilot.press("plus", "plus")
        assert r.speed == 4.0
        await pilot.press("minus")
        assert r.speed == 2.0
        await pilot.press("full_stop")
        assert r.position() == T0 + 1
        await pilot.press("comma")
        assert r.position() == T0
        await pilot.press("right_square_bracket")
        assert r.position() == T0 + 10
        await pilot.press("left_curly_bracket")
        assert r.position() == T0 - 50
        await pilot.press("right_curly_bracket", "right_curly_bracket")
        assert r.position() == T0 + 70
        await pilot.press("left_square_bracket")
        assert r.position() == T0 + 60
        await pilot.press("n")
        assert r.position() == T0 + 180
        assert app.now == T0 + 180  # the dashboard re-evaluated at once
        assert app.view.counts[NodeState.EVICTED] == 4
        await pilot.press("n")  # nothing further: a notice, no move
        assert r.position() == T0 + 180
        for _ in range(20):
            await pilot.press("right_curly_bracket")
        assert r.position() == r.end  # seeks are clamped to the recording
        assert "08:10:00Z" in static_text(bar)


async def test_replay_keys_do_nothing_without_replay():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        before = src.clock.now()
        await pilot.press("space", "n", "right_square_bracket")
        assert src.clock.now() == before
        assert app.check_action("replay_toggle", ()) is False


async def test_blind_banner():
    src, app = make_app()
    src.state.update_health("leases", connected=False, down_since=T0 - 30, last_error="connection reset by peer")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        banner = app.query_one("#banner")
        assert banner.has_class("-on")
        text = static_text(banner)
        assert "dashboard blind" in text and "connection reset by peer" in text and "since 07:59:30Z" in text
        assert "leases:down 30s" in static_text(app.query_one("#header"))
        row = next(line for line in table_lines(app) if "worker-a-0" in line)
        assert "? since 07:59:30" in row
        src.state.update_health("leases", connected=True, synced=True, last_activity=T0)
        app.tick()
        await pilot.pause()
        assert not banner.has_class("-on")


async def test_theme_toggle_keeps_the_table_readable():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        dark = app.palette
        await pilot.press("T")
        await pilot.pause()
        assert not app.current_theme.dark
        assert app.palette is not dark and app.palette.bad.color != dark.bad.color
        assert "» Evicting" in table_lines(app)[2]


async def test_command_palette_provider_offers_the_actions():
    src, app = make_app(replay=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        provider = NodewatchCommands(app.screen)
        titles = [t for t, _, _ in provider._commands()]
        for expected in ("Toggle wall mode", "Sort by node", "Filter: not Ready", "Zone: eu-1/eu-1b",
                         "Replay: play/pause", "Open node worker-b-0", "Show keys (help)"):
            assert expected in titles
        hits = [h async for h in provider.search("wall")]
        assert hits and hits[0].text == "Toggle wall mode"
        dict((t, cb) for t, cb, _ in provider._commands())["Filter: Unknown only"]()
        assert app.query_rows.states is NodeState.UNKNOWN
        dict((t, cb) for t, cb, _ in provider._commands())["Open node worker-b-1"]()
        await pilot.pause()
        assert isinstance(app.screen, DrillDown) and src.focused[-1] == "worker-b-1"


async def test_untrusted_text_on_screen_is_literal():
    src, app = make_app()
    evil = node("evil-[red]x[/red]-\x1b[2J", "Unknown", zone="z\x1b]52;c;ZXZpbA==\x07", region="",
                reason="[bold]Boom\u202e", message="\x1b[31mred\x1b[0m " + "A" * 5000,
                labels={"note": "[link=http://x]click[/link]"},
                taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 1)])
    assert src.state.apply("nodes", "ADDED", evil, T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen_text = "\n".join(table_lines(app))
        assert "evil-[red]x[/red]-\\x1b[2J" in screen_text, screen_text
        assert "\x1b" not in screen_text and "\u202e" not in screen_text
        zones = static_text(app.query_one("#zones"))
        assert "z\\x1b]52;c;ZXZpbA==\\x07" in zones.replace("\n", "")
        app.open_node(evil["metadata"]["name"])
        await pilot.pause()
        assert isinstance(app.screen, DrillDown)
        for section in app.screen.query(".section"):
            text = static_text(section)
            assert "\x1b" not in text and "\u202e" not in text
        conds = static_text(app.screen.query_one("#dd-conditions"))
        assert "[bold]Boom\\u202e" in conds
        assert "[link=http://x]click[/link]" in static_text(app.screen.query_one("#dd-node"))
        app.pop_screen()
        provider = NodewatchCommands(app.screen)
        hits = [h async for h in provider.search("open node evil")]
        evil_hit = next(h for h in hits if h.text.startswith("Open node evil"))
        assert "evil-[red]x[/red]-\\x1b[2J" in evil_hit.match_display.plain
        app.save_screenshot("/dev/null")  # the whole screen renders


def test_run_dashboard_starts_and_stops_the_source(monkeypatch):
    src = incident_source()
    ran = []

    def fake_run(self, *a, **k):
        assert src.started and not src.stopped
        ran.append(self.wall)

    monkeypatch.setattr(app_module.NodewatchApp, "run", fake_run)
    assert run_dashboard(src, wall=True) == 0
    assert ran == [True] and src.stopped


def test_run_dashboard_stops_the_source_on_error(monkeypatch):
    src = incident_source()

    def boom(self, *a, **k):
        raise RuntimeError("terminal gone")

    monkeypatch.setattr(app_module.NodewatchApp, "run", boom)
    with pytest.raises(RuntimeError):
        run_dashboard(src)
    assert src.stopped


async def test_big_fleets_evaluate_in_a_worker_thread(monkeypatch):
    monkeypatch.setattr(app_module, "THREADED_EVALUATE_NODES", 1)
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        ticks = app.ticks
        src.clock.advance(61)
        app._scheduled_tick()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.ticks == ticks + 1 and app.now == T0 + 61
        assert "evict in 1m59s" in table_lines(app)[2]
        # a result that a key press overtook is dropped
        app._show_if_current(app._tick_seq - 1, src.state.evaluate(T0), T0, 0.0)
        assert app.now == T0 + 61


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160])
async def test_the_zone_strip_breaks_between_zones_never_inside_one(width):
    src, app = make_app()
    # more zones, with long names, so that the strip wraps at every width
    for i in range(9):
        assert src.state.apply("nodes", "ADDED", node(f"extra-{i}", zone=f"us-east-{i}-long-zone-name",
                                                      region=f"us-east-{i}"), T0)
    async with app.run_test(size=(width, 40)) as pilot:
        await pilot.pause()
        lines = static_text(app.query_one("#zones")).split("\n")
        assert len(lines) > 1
        joined = " │ ".join(line.strip(" │") for line in lines)
        hidden = int(joined.rsplit("+", 1)[1].split()[0]) if "more zones" in joined else 0
        shown_zones = sum(joined.count(sym) for sym in "●◐○")
        assert len(lines) <= 5 and shown_zones + hidden == 12  # the zones left out are counted, not lost
        assert (hidden > 0) == (width < 100), (width, hidden)  # the compact form is tried first
        for z in [*(f"us-east-{i}-long-zone-name ● " for i in range(9 - hidden)), "eu-1b ○ FullDisruption 0/3"]:
            assert z in joined, (z, lines)  # every item whole on one line
        for line in lines[1:]:
            assert line.startswith(" ") and not line.startswith("  "), lines  # one space in, none lost


def test_the_zone_strip_counts_read_with_thousands():
    """A zone of a 65,000-node fleet reads "21,660/21,667", as the header's counts do."""
    src, _ = make_app()
    view = src.state.evaluate(T0)
    big = ZoneView("eu-west-1/eu-west-1a", ZoneState.NORMAL, 21_667, 21_660, 7, 0.0)
    items = [t.plain for t in zone_items(dataclasses.replace(view, zones=[big]), palette_16())]
    assert items == ["eu-west-1a ● Normal 21,660/21,667 · 0/s (stopped)"]


async def test_header_names_errors_and_notices_and_p_lists_them():
    src, app = make_app()
    state = src.state
    assert not state.apply("nodes", "ADDED", {"kind": "Node", "metadata": {}}, T0 - 60)  # unusable: an error
    state.notice(T0 - 30, "pods/events", f"{4338:,} nodes need pod and event watches; only 50 are watched")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        header = static_text(app.query_one("#header"))
        assert "1 error · 1 notice (p)" in header and "unusable" not in header
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ProblemsScreen)
        text = static_text(app.screen.query_one("#problems-table"))
        lines = [line for line in text.split("\n") if "error" in line or "notice" in line]
        assert lines[0].lstrip().startswith("error") and "07:59:00Z (1m00s ago)" in lines[0]
        assert "nodes ADDED" in lines[0]
        assert lines[1].lstrip().startswith("notice") and "pods/events" in lines[1] and "4,338 nodes" in lines[1]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProblemsScreen)


async def test_header_counts_read_with_thousands_and_fit_a_narrow_terminal():
    src, app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = static_text(app.query_one("#header")).split("\n")[1]
        assert header.startswith(" ✖1 »3 ?0 ✗0 !1 ~1 ✓6 ⊘1 │ 12 nodes")  # symbol-first: the counts fit
    view = src.state.evaluate(T0)
    cordoned = next(v for v in view.nodes if v.cordoned)
    text = header_text("x", dataclasses.replace(view, nodes=(cordoned,) * 65_000, cordoned=65_000), T0, app.palette, virtual=False)
    assert "65,000 nodes" in text.plain and "⊘ cordoned 65,000" in text.plain


async def test_a_completed_list_is_drawn_at_once_not_at_the_next_tick():
    """At start the Leases' list completing puts every heartbeat on screen: the app looks for a
    completed list every ``LIST_CHECK_SECONDS`` rather than waiting for its next tick (1 s)."""
    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.settings import Settings
    from support.factories import lease
    from support.ui_support import FakeSource

    state = FleetState(Settings())
    for stream in ("nodes", "leases"):
        state.update_health(stream, connected=True, synced=False)
    src = FakeSource(state, ManualClock(T0))
    app = NodewatchApp(src, refresh_seconds=3600)  # no tick of its own within the test
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert shown(app) == []
        for i in range(5):
            state.apply("leases", "ADDED", lease(f"n{i}", T0 - 1), T0, True)
        app._tick_if_listed()  # what its interval runs: no list completed yet, nothing drawn
        await pilot.pause()
        assert shown(app) == []
        state.apply("leases", "SYNCED", None, T0)
        state.update_health("leases", connected=True, synced=True, last_activity=T0)
        app._tick_if_listed()
        await pilot.pause()
        assert shown(app) == [f"n{i}" for i in range(5)]  # placeholders, judged by their Leases
        assert "listed" in {t.name for t in app._timers}  # and the interval that runs it is there


async def test_until_the_user_moves_it_the_cursor_stays_on_the_worst_node():
    """At start-up the first frame shows placeholders (Leases only); when the Nodes arrive the
    order changes. The cursor must not follow the node the first frame happened to show first (it
    scrolled the worst nodes out of sight): it stays on the top row until the user moves it, and
    from then on follows the node the user chose."""
    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.settings import Settings
    from support.factories import lease
    from support.ui_support import FakeSource

    state = FleetState(Settings())
    for stream in ("nodes", "leases"):
        state.update_health(stream, connected=True, synced=False)
    for i in range(30):
        state.apply("leases", "ADDED", lease(f"n{i:02d}", T0 - 1), T0, True)
    state.apply("leases", "SYNCED", None, T0)
    state.update_health("leases", connected=True, synced=True, last_activity=T0)
    src = FakeSource(state, ManualClock(T0))
    app = NodewatchApp(src, refresh_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one("#table", FleetTable)
        assert shown(app)[0] == "n00" and table.cursor == 0  # placeholders, by name
        for i in range(30):  # the Nodes: the last ones are in trouble, worst first now
            state.apply("nodes", "ADDED", node(f"n{i:02d}", "Unknown" if i >= 27 else "True"), T0, True)
        state.apply("nodes", "SYNCED", None, T0)
        app.tick()
        await pilot.pause()
        assert shown(app)[0] != "n00" and table.cursor == 0 and table.current.name == shown(app)[0]
        await pilot.press("down")  # the user chooses a node: from now on the cursor follows it
        chosen = table.current.name
        state.apply("nodes", "MODIFIED", node(chosen, "False"), T0, False)
        app.tick()
        await pilot.pause()
        assert table.current.name == chosen


def test_the_dashboard_command_starts_the_source_before_it_imports_textual():
    """Its lists stream in while Textual is imported and the app is built (the Lease list is what
    the first useful frame waits for); a fresh interpreter, since this one has Textual already."""
    import os
    import subprocess
    import sys

    code = """
import argparse, sys
from nodewatch.commands.dashboard import run_app

class Source:
    def start(self):
        print("textual" in sys.modules, "nodewatch.ui.app" in sys.modules)
        raise SystemExit(0)

run_app(Source(), argparse.Namespace(wall=False, ascii=False, node=None))
"""
    env = {**os.environ, "NODEWATCH_FORCE_TTY": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


async def test_a_large_fleet_shows_no_frame_judged_without_its_first_lease_list(monkeypatch):
    """While the lease stream's first list comes in, a frame would judge every node blind, and all
    of them again once it is in (at 130,000 nodes ~0.5 s of the GIL each, taken from the list): the
    banner says how far the list has got, the frame before stays; once it is in, a frame at once.
    After ``LISTING_WAIT_SECONDS`` (a list that never ends) frames are judged all the same."""
    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.core.settings import Settings
    from support.factories import lease
    from support.ui_support import FakeSource

    monkeypatch.setattr(app_module, "THREADED_EVALUATE_NODES", 1)
    state = FleetState(Settings())
    for resource in ("nodes", "leases"):
        state.update_health(resource, connected=True, synced=False)
    for i in range(3):
        state.apply("leases", "ADDED", lease(f"n{i}", T0 - 1), T0 - 1, listing=True)
    app = NodewatchApp(FakeSource(state, ManualClock(T0)), refresh_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        first = state.published()
        assert first is not None and len(first.nodes) == 3  # the frame at mount
        for i in range(3, 7):
            state.apply("leases", "ADDED", lease(f"n{i}", T0 - 1), T0 - 1, listing=True)
        app._scheduled_tick()
        await pilot.pause(0.1)
        assert state.published() is first
        assert "listing the node leases: 7 so far" in static_text(app.query_one("#banner"))
        header = static_text(app.query_one("#header"))  # not the frame before's "3 nodes"
        assert "listing the node leases: 7 so far" in header and "3 nodes" not in header
        state.apply("leases", "SYNCED", None, T0)
        state.update_health("leases", synced=True)
        app._tick_if_listed()
        for _ in range(50):
            await pilot.pause(0.02)
            if state.published() is not first:
                break
        assert len(state.published().nodes) == 7
        assert "listing" not in static_text(app.query_one("#banner"))
        assert "7 nodes" in static_text(app.query_one("#header"))
        state.update_health("leases", synced=False)  # (a list that never ends: see below)
        state.store.synced.discard("leases")
        app._created_at -= app_module.LISTING_WAIT_SECONDS
        before = state.published()
        app._scheduled_tick()
        for _ in range(50):
            await pilot.pause(0.02)
            if state.published() is not before:
                break
        assert state.published() is not before


async def test_the_wall_title_counts_a_big_fleet_as_the_header_does():
    """Thousands grouped as in the header (``65,000 nodes``): ``41 of 1,500``, not ``41 of 1500``."""
    app = NodewatchApp(FakeSource(big_state(1_500), ManualClock(T0)), wall=True, refresh_seconds=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        title = static_text(app.query_one("#wall-title")).strip()
        assert re.fullmatch(r"\d{1,3}(,\d{3})* of 1,500 nodes not Ready", title), title


@pytest.mark.parametrize("key", ["question_mark", "p"])
async def test_help_and_problems_scroll_by_keys_on_a_short_terminal(key):
    """At 24 rows neither the key table nor a long list of problems fits: the keys scroll them
    (nothing was focused in them, so the arrows and Page Down did nothing), and still close them."""
    src, app = make_app()
    for i in range(60):
        src.state.notice(T0 - 60 + i, "test", f"notice {i}")
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
        box = app.screen.query_one(VerticalScroll)
        assert box.max_scroll_y > 0 and box.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert box.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert box.scroll_y == box.max_scroll_y
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, (HelpScreen, ProblemsScreen))


@pytest.mark.parametrize("replay", [False, True])
async def test_a_short_terminal_folds_the_timeline_away_for_the_rows(replay):
    """At 60x15 the header, zones, summary, timeline and replay bar took every line and the table
    showed its heading alone: below ``SHORT_LINES`` the timeline goes, and comes back with the lines."""
    src, app = make_app(replay=replay)
    async with app.run_test(size=(60, 15)) as pilot:
        await pilot.pause()
        assert not app.query_one("#timeline").display
        assert len([line for line in table_lines(app)[1:] if line.strip()]) >= 3  # rows under the heading
        await pilot.resize_terminal(80, app_module.SHORT_LINES)
        await pilot.pause()
        assert app.query_one("#timeline").display
        await pilot.resize_terminal(80, app_module.SHORT_LINES - 1)
        await pilot.pause()
        assert not app.query_one("#timeline").display


async def test_wall_mode_on_a_small_terminal_keeps_rows_and_counts():
    """At 60x15 the wall's big digits left its table the heading alone, and at 40 columns one count
    box showed, the others cut off. Below ``SHORT_LINES`` a count is on its word's line; boxes that
    do not fit side by side with their words go (the header has every count); at 80x24 the digits
    are back."""
    src, app = make_app(wall=True)
    async with app.run_test(size=(120, 15)) as pilot:
        await pilot.pause()
        evicting = app.query_one("#count-evicting")
        assert app.query_one("#wall-counts").display and evicting.region.height == 3
        assert static_text(evicting.query_one(".inline")).strip() == str(app.view.counts[NodeState.EVICTING]) != "0"
        shown = [box for box in app.query(CountBox) if box.display]
        assert len(shown) >= 4 and all(box.region.width >= box.inline_width for box in shown)  # each word readable
        await pilot.resize_terminal(60, 15)  # too narrow for every word beside its count
        await pilot.pause()
        assert not app.query_one("#wall-counts").display
        assert len([line for line in table_lines(app, "#wall-table")[1:] if line.strip()]) >= 3
        await pilot.resize_terminal(40, 12)
        await pilot.pause()
        assert not app.query_one("#wall-counts").display
        assert len([line for line in table_lines(app, "#wall-table")[1:] if line.strip()]) >= 2
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.query_one("#wall-counts").display and evicting.region.height == 6
        assert not evicting.query_one(".inline").display and evicting.query_one("Digits").display


async def test_t_goes_to_a_time_typed_as_at_reads_it():
    """After an incident one wants 08:02, or five minutes in: ``t``, the time, Enter. A time outside
    the recording or one that is no time says why and moves nothing; Escape closes the box and
    leaves the filters as they were."""
    src, app = make_app(replay=True)
    r = src.replay  # 07:55:00Z .. 08:10:00Z (T0 - 300 .. T0 + 600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.query_one("#goto").display
        await pilot.press("t")
        assert app.query_one("#goto").display and app.focused is app.query_one("#goto")
        await pilot.press(*"08:02", "enter")
        assert r.position() == T0 + 120 and app.now == T0 + 120
        assert not app.query_one("#goto").display and isinstance(app.focused, FleetTable)
        await pilot.press("t", *"+5m", "enter")
        assert r.position() == r.start + 300
        await pilot.press("f")  # a filter, which Escape out of the box must keep
        kept = app.query_rows
        for typed, says in (("+1h", "after the recording's end (2027-01-15T08:10:00Z)"),
                            ("07:00", "before the recording's start"), ("soon", "neither RFC 3339")):
            await pilot.press("t", *typed, "enter")
            await pilot.pause()
            assert r.position() == r.start + 300  # not moved
            assert any(says in str(n.message) for n in app._notifications), typed
            assert app.query_one("#goto").display  # the box stays, to be mended
            await pilot.press("escape")
            assert not app.query_one("#goto").display and app.query_rows == kept


async def test_no_go_to_box_without_a_replay_and_one_once_a_replay_is_shown():
    """A hub viewer's ``h`` shows the hub's last hour (a replay) in the same app: ``t`` works there."""
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("t")
        assert not app.query_one("#goto").display and app.check_action("replay_goto", ()) is False
        history = incident_source(replay=True)
        app._show_source(history, src)
        await pilot.pause()
        await pilot.press("t", *"+1m", "enter")
        assert history.replay.position() == history.replay.start + 60
