"""The fleet timeline on screen (pytest-textual-snapshot), from the committed recording.

The recording's history is sampled in a background thread: each test waits for it to complete
(a thread, not a timer) before the capture. Update after an intended change with ``pytest
tests/ui/test_history_snapshots.py --snapshot-update`` and look at the report before committing.
"""

from __future__ import annotations

from pathlib import Path

from nodewatch.core.format import clock_time
from nodewatch.core.history import MarkKind
from nodewatch.sources.replay import ReplaySource
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.replay_bar import track_geometry
from nodewatch.ui.timeline import LIVE_MIN_SPAN, live_columns, timeline_text
from support.simserver import wait_until

RECORDING = Path(__file__).parents[1] / "data" / "incident-30.jsonl.gz"


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
    from support.ui_support import incident_source

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
        # at least five minutes back from now, on a column boundary: the strip fills from the right
        first, last = live_columns(src.clock.now() - LIVE_MIN_SPAN, src.clock.now(), track_geometry(120)[1])
        assert first <= src.clock.now() - LIVE_MIN_SPAN and last >= src.clock.now()
        assert lines[3].startswith(" " + clock_time(first))


def test_a_live_strip_keeps_its_columns_between_ticks():
    """Ticks a second apart draw the strip over the same columns until a column's span has passed,
    then it moves by one whole column (a strip ending exactly now moved every column a little each
    second, and the terminal got all of it again)."""
    inner = track_geometry(120)[1]
    t0 = 1_800_000_000.0
    spans = [live_columns(now - LIVE_MIN_SPAN, now, inner) for now in (t0 + k for k in range(60))]
    width = (spans[0][1] - spans[0][0]) / inner
    assert width > 1 and (spans[0][1] - spans[0][0]) >= LIVE_MIN_SPAN
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert (b0, b1) == (a0, a1) or (b0 - a0, b1 - a1) == (width, width)
    assert len(set(spans)) < len(spans) / 2  # mostly the same columns from one tick to the next
    # a history longer than the minimum: its first sample stays, the column's span rarely changes
    long = [live_columns(t0, t0 + 3600 + k, inner) for k in range(60)]
    assert len({round((b - a) / inner, 6) for a, b in long}) == 1
