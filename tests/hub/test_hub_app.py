"""``attach``: the dashboard fed by a hub shows what the dashboard on the hub's own source shows.

The hub serves the UI tests' crafted incident (a FakeSource on a ManualClock, ticked by hand); one
app reads the source directly, another is attached through the hub: same table, zones, summary,
drill-down, search.
"""

from __future__ import annotations

from contextlib import contextmanager

from textual.geometry import Region

from nodewatch.core.fencing import fencing_advice
from nodewatch.hub.server import Hub
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.drilldown import DrillDown
from nodewatch.ui.fleet_table import FleetTable
from support.simserver import wait_until
from support.ui_support import incident_source

SIZE = (160, 40)


def _text(widget) -> str:
    w, h = widget.outer_size
    return "\n".join(s.text.rstrip() for s in widget.render_lines(Region(0, 0, w, h)))


def _table(app: NodewatchApp) -> list[str]:
    t = app.query_one("#table", FleetTable)
    return [t.render_line(y).text for y in range(t.size.height)]


@contextmanager
def _hub_and_viewer(tmp_path):
    src = incident_source()
    hub = Hub(src, str(tmp_path / "hub.sock"), tick_seconds=None)
    hub.start()
    v = ViewerSource(HubAddress(path=hub.socket_path))
    v.start()
    try:
        yield src, hub, v
    finally:
        v.stop()
        hub.stop()


async def test_the_attached_dashboard_shows_what_the_hubs_source_shows(tmp_path):
    with _hub_and_viewer(tmp_path) as (src, hub, v):
        direct = NodewatchApp(src, refresh_seconds=3600)
        attached = NodewatchApp(v, refresh_seconds=3600)
        async with direct.run_test(size=SIZE) as p1, attached.run_test(size=SIZE) as p2:
            for step in (0, 10, 170):  # countdowns move with the hub's clock, and states change
                src.clock.advance(step)
                seq = hub.tick()
                wait_until(lambda: v.state.seq == seq)
                direct.tick()
                attached.tick()
                await p1.pause()
                await p2.pause()
                assert _table(attached) == _table(direct)
                for part in ("#zones", "#summary"):
                    assert _text(attached.query_one(part)) == _text(direct.query_one(part))
                head = _text(attached.query_one("#header"))
                assert "hub:ok" in head and "fake: incident, 12 nodes · via hub /" in head
                assert _text(direct.query_one("#header")).splitlines()[1].split("│")[0] in head
                if step == 0:
                    assert "evict in 3m00s" in "\n".join(_table(attached))


async def test_drill_down_and_search_through_the_hub(tmp_path):
    with _hub_and_viewer(tmp_path) as (src, hub, v):
        app = NodewatchApp(v, refresh_seconds=3600)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            app.open_node("worker-b-0")
            await pilot.pause()
            wait_until(lambda: v.state.node_details("worker-b-0", v.clock.now()).record is not None)
            assert src.focused[-1] == "worker-b-0"  # the hub asked its source
            # the release comes along: the drill-down's advice is the cluster's (``core/fencing``)
            assert v.state.node_details("worker-b-0", v.clock.now()).server_version == src.state.settings.server_version
            assert src.state.settings.server_version == "v1.33.2"
            app.tick()
            await pilot.pause()
            assert isinstance(app.screen, DrillDown)
            pods = _text(app.screen.query_one("#dd-pods"))
            assert "prod/db-0 ⚠ at risk" in pods and fencing_advice(None).split(" (")[0] in pods
            await pilot.press("escape")
            await pilot.pause()
            wait_until(lambda: src.focused[-1] is None)
            await pilot.press("slash", *"zone=eu-1b")
            await pilot.pause()
            assert {r.name for r in app.query_one("#table", FleetTable).rows} == {"worker-b-0", "worker-b-1",
                                                                                  "worker-b-2"}


async def test_a_hub_that_goes_away_shows_at_once_and_tiny_terminals_work(tmp_path):
    with _hub_and_viewer(tmp_path) as (src, hub, v):
        app = NodewatchApp(v, refresh_seconds=3600)
        async with app.run_test(size=(24, 8)) as pilot:
            await pilot.pause()
            assert not app.query_one("#banner").has_class("-on")
            hub.stop()
            wait_until(lambda: not v.state.connected)
            app.tick()
            await pilot.pause()
            await pilot.resize_terminal(200, 50)
            await pilot.pause()
            banner = _text(app.query_one("#banner"))
            assert app.query_one("#banner").has_class("-on") and "hub connection lost" in banner
            assert len(app.query_one("#table", FleetTable).rows) == 12  # the last fleet, marked blind


async def test_the_drill_down_says_when_the_hub_does_not_watch_the_nodes_pods_and_events(tmp_path):
    with _hub_and_viewer(tmp_path) as (src, hub, v):
        src.scoped_nodes = lambda: ["worker-b-0"]  # the hub's source is at its cap: only this one
        app = NodewatchApp(v, refresh_seconds=3600)
        async with app.run_test(size=SIZE) as pilot:
            for node, watched in (("worker-b-1", False), ("worker-b-0", True)):
                app.open_node(node)
                await pilot.pause()
                wait_until(lambda: v.state.details_watched(node) is watched)
                app.tick()
                await pilot.pause()
                pods = " ".join(_text(app.screen.query_one("#dd-pods")).split())
                events = " ".join(_text(app.screen.query_one("#dd-events")).split())
                note = "pods and events: not watched (the hub watches the pods and events of 50 nodes at most"
                assert (note in pods and note in events) is not watched, (pods, events)
                await pilot.press("escape")
                await pilot.pause()


async def test_h_replays_the_hubs_last_hour_while_live_goes_on_and_l_goes_back(tmp_path):
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.sources.demo import DemoSource
    from nodewatch.sources.replay import ReplaySource
    from nodewatch.ui.replay_bar import ReplayBar
    from support.hub_support import advance

    src = DemoSource(nodes=30, scenario="incident", seed=1, speed=0.0)
    src.recorder = rec = SegmentedRecorder(tmp_path / "recordings", {"kind": "demo", "name": src.name, "hub": True},
                                           src.state.settings, segment_seconds=120, clock=src.clock,
                                           records=src.state.node_records)
    hub = Hub(src, str(tmp_path / "hub.sock"), tick_seconds=None)
    hub.start()
    v = ViewerSource(HubAddress(path=hub.socket_path))
    try:
        counts_at = {}
        for _ in range(10):
            advance(hub, 30)  # five minutes of the incident, in three segments
            counts_at[src.clock.now()] = src.state.evaluate(src.clock.now()).counts
        rec.flush()
        v.start()
        app = NodewatchApp(v, refresh_seconds=3600)
        async with app.run_test(size=SIZE) as pilot:
            assert not app.query(ReplayBar) and app.check_action("history", ()) and not app.check_action("live", ())
            help_ids = {b.id for _, keys in app._binding_groups() for b in keys}
            assert {"app.history", "app.live"} <= help_ids  # a viewer's help lists both (a replay's, neither)
            await pilot.press("h")
            await pilot.pause()
            wait_until(lambda: isinstance(app.source, ReplaySource), timeout=30)
            await pilot.pause()
            history = app.source
            assert app.query_one("#replay", ReplayBar).replay is history.replay
            live_now = v.clock.now()
            newest = history.replay.position()
            assert newest == history.replay.end and live_now - 30 < newest <= live_now  # opens at the newest moment
            await pilot.press("left_curly_bracket")  # a minute back
            await pilot.pause()
            assert history.replay.position() == newest - 60
            for t, counts in sorted(counts_at.items())[::3]:  # the replay shows what the hub saw then
                history.replay.seek(t)
                assert history.state.evaluate(t).counts == counts, t
            assert len({tuple(c.items()) for c in counts_at.values()}) > 2, "the incident moved on meanwhile"
            seq = advance(hub, 30)  # live goes on underneath
            wait_until(lambda: v.state.seq == seq)
            assert app.source is history and app.check_action("live", ()) and not app.check_action("history", ())
            await pilot.press("l")
            await pilot.pause()
            assert app.source is v and not app.query(ReplayBar)
            assert app.view is not None and app.now == v.clock.now() == hub.source.clock.now()
            wait_until(lambda: history.replay._thread is None or not history.replay._thread.is_alive())
    finally:
        v.stop()
        hub.stop()
        rec.close()


async def test_over_tcp_the_history_key_says_it_is_not_available(tmp_path):
    v = ViewerSource(HubAddress(host="127.0.0.1", port=9), token="t", reconnect_for=0.0)
    app = NodewatchApp(v, refresh_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        await pilot.pause()
        wait_until(lambda: any("not available over TCP" in str(n.message) for n in app._notifications))
        assert app.source is v
