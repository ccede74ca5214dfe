"""SVG snapshots of the dashboard at a fixed size with a frozen clock (pytest-textual-snapshot).

The fake source's ManualClock never moves and the tick interval is an hour, so nothing changes
between captures. Update after an intended change with ``pytest tests/ui/test_ui_snapshots.py
--snapshot-update`` and look at the report before committing.
"""

from __future__ import annotations

import pytest

from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.terminal import Terminal
from support.ui_support import incident_source

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

    src = ReplaySource(str(Path(__file__).parents[1] / "data" / "incident-30.jsonl.gz"))
    src.replay.pause()
    src.replay.seek(src.replay.start + 90)
    return src


def test_snapshot_replay_of_the_committed_recording(snap_compare):
    app = NodewatchApp(_recorded_incident(), refresh_seconds=3600)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=SIZE, run_before=timeline_sampled)


async def timeline_sampled(pilot) -> None:
    """The fleet timeline of a recording is sampled in a background thread: wait for it, then tick,
    so the snapshot does not race it."""
    from support.simserver import wait_until

    app = pilot.app
    assert wait_until(lambda: app.history.complete, 30)
    app.tick()
    await pilot.pause()


# --- the committed recording at the three sizes people use: 80x24, 120x40 (an SSH window), 200x60 --

SIZES = [(80, 24), (120, 40), (200, 60)]
UNREACHABLE = "general-euw1b-19"
"""In the recording 90 s in: Ready Unknown since the start, evicted, a StatefulSet pod at risk."""
SLOW = "compute-euw1c-26"
"""In the recording 90 s in: renewing late (~25 s apart): its heartbeat history shows it."""


def _recorded_app(**kwargs) -> NodewatchApp:
    app = NodewatchApp(_recorded_incident(), refresh_seconds=3600, **kwargs)
    app.animation_level = "none"
    return app


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_recorded_main_screen(snap_compare, size):
    """Every column in some form at 120; state, name, lease age, grace, eviction and conditions at 80."""
    assert snap_compare(_recorded_app(), terminal_size=size, run_before=timeline_sampled)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_recorded_drilldown_unreachable(snap_compare, size):
    """Why, since when, the newest events and the pods at risk with the advice, on the first screen."""
    assert snap_compare(_recorded_app(focus=UNREACHABLE), terminal_size=size, run_before=timeline_sampled)


def test_snapshot_recorded_drilldown_heartbeat_history(snap_compare):
    """A node renewing late: the intervals between its renewals against renew, late and grace."""
    assert snap_compare(_recorded_app(focus=SLOW), terminal_size=(120, 40), run_before=timeline_sampled)


# --- ASCII and 16-colour mode (TERM=linux, vt100, a locale that is not UTF-8, --ascii) -----------

OLD_TERMINAL = Terminal(ascii=True, colors16=True, why="snapshot")


def test_snapshot_ascii_16_colour_main_screen(snap_compare):
    assert snap_compare(_app(terminal=OLD_TERMINAL), terminal_size=SIZE)


def test_snapshot_ascii_16_colour_wall_small_terminal(snap_compare):
    assert snap_compare(_app(wall=True, terminal=OLD_TERMINAL), terminal_size=(80, 24))


def test_snapshot_ascii_16_colour_drilldown(snap_compare):
    assert snap_compare(_app(focus="worker-b-0", terminal=OLD_TERMINAL), terminal_size=(120, 40))


async def _cordoned_only(pilot) -> None:
    await pilot.press("C")
    await pilot.pause()


def test_snapshot_cordoned_filter(snap_compare):
    """The cordoned filter: a Ready node that is cordoned, its mark after the state word."""
    assert snap_compare(_app(), terminal_size=(120, 24), run_before=_cordoned_only)
