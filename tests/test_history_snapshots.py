"""The fleet timeline on screen (pytest-textual-snapshot), from the committed recording.

The recording's history is sampled in a background thread: each test waits for it to complete
(a thread, not a timer) before the capture. Update after an intended change with ``pytest
tests/test_history_snapshots.py --snapshot-update`` and look at the report before committing.
"""

from __future__ import annotations

from pathlib import Path

from nodewatch.core.history import MarkKind
from nodewatch.sources.replay import ReplaySource
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.timeline import timeline_text
from simserver import wait_until

RECORDING = Path(__file__).parent / "data" / "incident-30.jsonl.gz"


def _app(at: float = 90) -> NodewatchApp:
    src = ReplaySource(str(RECORDING))
    src.replay.pause()
    src.replay.seek(src.replay.start + at)
    app = NodewatchApp(src, refresh_seconds=3600)
    app.animation_level = "none"
    return app


async def _sampled(pilot) -> None:
    app = pilot.app
    assert wait_until(lambda: app.history.complete, 30)
    app.tick()
    await pilot.pause()


def test_snapshot_timeline_above_the_scrubber(snap_compare):
    app = _app()
    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=_sampled)
    finally:
        app.source.stop()


def test_snapshot_timeline_after_jumping_to_the_second_mark(snap_compare):
    app = _app(0)

    async def jump(pilot) -> None:
        await _sampled(pilot)
        await pilot.press("m", "m")
        await pilot.pause()
        pilot.app.clear_notifications()  # the toasts would hide the strip
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(120, 40), run_before=jump)
    finally:
        app.source.stop()


async def test_next_mark_key_walks_the_marks_in_order():
    app = _app(0)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await _sampled(pilot)
            marks = app.history.all_marks()
            seen = []
            for _ in range(len({m.at for m in marks}) + 1):
                await pilot.press("m")
                await pilot.pause()
                seen.append(app.source.replay.position())
            assert seen[:-1] == sorted({m.at for m in marks})
            assert seen[-1] == seen[-2]  # no mark after the last: the position stays
    finally:
        app.source.stop()


def test_the_strip_reads_without_colour():
    """Plain text only (what NO_COLOR leaves): shades for the states, letters for the marks."""
    app = _app()
    try:
        src = app.source
        from nodewatch.core.history import sample_recording

        h = sample_recording(src.replay.index, src.state.settings)
        lines = timeline_text(h, src.replay.start, src.replay.end, 120).plain.splitlines()
        assert len(lines) == 4
        chart = "".join(lines[:3])
        for shade in "█▓▒░":
            assert shade in chart
        marks = lines[3]
        letters = {m.kind.letter for m in h.all_marks()}
        assert letters == {MarkKind.TAINT.letter, MarkKind.EVICTION.letter}
        assert set(marks[11:11 + 97].replace(" ", "")) == letters
    finally:
        app.source.stop()


async def test_a_live_dashboard_draws_the_time_it_has_seen():
    """Without a recording, each tick is a sample: the strip covers what the dashboard saw."""
    from ui_support import incident_source

    src = incident_source()
    app = NodewatchApp(src, refresh_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(5):
            src.clock.advance(1)
            app.tick()
        await pilot.pause()
        assert [s.at for s in app.history.all_samples()] == [src.clock.now() - i for i in range(6)][::-1]
        strip = app.query_one("#timeline")
        assert strip.end == src.clock.now() and strip.start <= app.history.start
        lines = strip.render().plain.splitlines()
        assert any(shade in "".join(lines[:3]) for shade in "█▓▒░")
        assert lines[3].startswith(" " + "07:55:05Z")  # five minutes back from now: the strip fills from the right
