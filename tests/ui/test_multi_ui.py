"""The dashboard on several clusters: the cluster strip, the cluster column, the cluster filter,
node names that repeat across clusters, the drill-down and wall mode. A frozen clock; no thread."""

from __future__ import annotations

from textual.geometry import Region

from nodewatch.core.clock import ManualClock
from nodewatch.core.multi import ClusterState, Member, MultiFleet
from nodewatch.core.settings import Settings
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.fleet_table import FleetTable
from support.factories import T0
from support.ui_support import FakeSource, feed, incident_objects

SIZE = (150, 40)


def multi_source() -> FakeSource:
    """Two clusters with the same incident (the same node names), one on v1.31 (grace 40s), and a
    third whose credentials are rejected."""
    eu = feed(ClusterState("prod-eu", Settings(server_version="v1.33.2")), incident_objects())
    us = feed(ClusterState("prod-us", Settings(server_version="v1.31.4")), incident_objects())
    dead = ClusterState("staging", Settings())
    dead.update_health("nodes", connected=False, synced=False, down_since=T0 - 60, last_error="connection refused")
    state = MultiFleet([Member("prod-eu", eu), Member("prod-us", us),
                        Member("staging", dead, lambda: "credentials rejected by https://10.0.0.9:6443 (401)")])
    return FakeSource(state, ManualClock(T0), name="3 clusters: prod-eu, prod-us, staging")  # type: ignore[arg-type]


def make_app(**kw) -> tuple[FakeSource, NodewatchApp]:
    src = multi_source()
    app = NodewatchApp(src, refresh_seconds=3600, **kw)
    app.animation_level = "none"
    return src, app


def static_text(widget) -> str:
    w, h = widget.outer_size
    return "\n".join(s.text.rstrip() for s in widget.render_lines(Region(0, 0, w, h)))


def test_snapshot_cluster_strip(snap_compare):
    _, app = make_app()
    assert snap_compare(app, terminal_size=SIZE)


def test_snapshot_cluster_strip_wall_mode(snap_compare):
    _, app = make_app(wall=True)
    assert snap_compare(app, terminal_size=SIZE)


async def test_strip_column_and_worst_first_across_clusters():
    _, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        strip = static_text(app.query_one("#clusters"))
        assert strip.index("staging ✖ credentials rejected") < strip.index("prod-eu")  # unreadable first
        assert "prod-eu ✖ 6/12 not Ready" in strip and "grace 50s" in strip and "grace 40s" in strip
        table = app.query_one("#table", FleetTable)
        assert any(c.key == "cluster" for c, _ in table._columns(table.size.width))
        keys = [v.key for v in table.rows]
        assert len(keys) == len(set(keys)) == 24  # the same names twice, two rows each
        # worst first spans both: the two Evicted/Evicting of each cluster come before any Ready
        ranks = [v.state.rank for v in table.rows]
        assert ranks == sorted(ranks)
        header = static_text(app.query_one("#header"))
        assert "3 clusters: prod-eu, prod-us, staging" in header and "grace 40-50s" in header


async def test_cluster_filter_and_drilldown_say_which_cluster():
    src, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("c")
        table = app.query_one("#table", FleetTable)
        assert {v.cluster for v in table.rows} == {"prod-eu"} and "cluster prod-eu" in app.sub_title
        await pilot.press("c")
        assert {v.cluster for v in table.rows} == {"prod-us"}
        first = table.rows[0]
        await pilot.press("enter")
        await pilot.pause()
        assert src.focused[-1] == f"prod-us/{first.name}"
        summary = static_text(app.screen.query_one("#dd-summary"))
        assert first.name in summary and "cluster prod-us" in summary
        await pilot.press("escape")
        await pilot.press("c", "c")  # staging (no nodes), then all again
        assert len(table.rows) == 24


async def test_search_finds_a_cluster_and_keeps_the_cursor_on_the_same_cluster_node():
    _, app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one("#table", FleetTable)
        table.cursor = 1
        chosen = table.rows[1].key
        app.tick()
        await pilot.pause()
        assert table.current.key == chosen
        await pilot.press("slash", *"prod-us/worker-a-0", "enter")
        assert [v.key for v in table.rows] == ["prod-us/worker-a-0"]


async def test_one_cluster_has_no_cluster_strip_nor_column():
    from support.ui_support import incident_source

    app = NodewatchApp(incident_source(), refresh_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.query_one("#clusters").display or not app.query_one("#clusters").has_class("-on")
        table = app.query_one("#table", FleetTable)
        assert all(c.key != "cluster" for c, _ in table._columns(table.size.width))
        await pilot.press("c")  # no cluster filter without clusters
        assert app.query_rows.cluster is None
