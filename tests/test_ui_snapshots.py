"""SVG snapshots of the dashboard at a fixed size with a frozen clock (pytest-textual-snapshot).

The fake source's ManualClock never moves and the tick interval is an hour, so nothing changes
between captures. Update after an intended change with ``pytest tests/test_ui_snapshots.py
--snapshot-update`` and look at the report before committing.
"""

from __future__ import annotations

from nodewatch.ui.app import NodewatchApp
from ui_support import incident_source

SIZE = (150, 40)


def _app(**kwargs) -> NodewatchApp:
    app = NodewatchApp(incident_source(replay=kwargs.pop("replay", False)), refresh_seconds=3600, **kwargs)
    app.animation_level = "none"
    return app


def test_snapshot_main_screen_with_replay(snap_compare):
    assert snap_compare(_app(replay=True), terminal_size=SIZE)


def test_snapshot_drilldown_statefulset_at_risk(snap_compare):
    assert snap_compare(_app(focus="worker-b-0"), terminal_size=SIZE)


def test_snapshot_wall_mode_small_terminal(snap_compare):
    assert snap_compare(_app(wall=True), terminal_size=(80, 24))


def _recorded_incident():
    """The committed recording of the demo incident, replayed and paused 90 s in (a frozen clock)."""
    from pathlib import Path

    from nodewatch.sources.replay import ReplaySource

    src = ReplaySource(str(Path(__file__).parent / "data" / "incident-30.jsonl.gz"))
    src.replay.pause()
    src.replay.seek(src.replay.start + 90)
    return src


def test_snapshot_replay_of_the_committed_recording(snap_compare):
    from simserver import wait_until

    app = NodewatchApp(_recorded_incident(), refresh_seconds=3600)
    app.animation_level = "none"

    async def timeline_sampled(pilot) -> None:  # the fleet timeline is sampled in a thread
        assert wait_until(lambda: app.history.complete, 30)
        app.tick()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=timeline_sampled)
