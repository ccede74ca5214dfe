"""The progress line of a long read (``commands/read_progress.py``) and the reader's reports that feed it."""

from __future__ import annotations

import io
import math
import os

from nodewatch.commands.read_progress import ReadProgress
from nodewatch.core.clock import ManualClock
from nodewatch.core.timeutil import parse_time
from nodewatch.sources.replay import instant, state_at

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


T0 = 1_795_946_400.0


def test_the_line_comes_after_a_second_at_most_four_times_a_second_and_is_erased():
    out, clock = _Terminal(), ManualClock(0.0)
    shown = ReadProgress("/var/lib/nodewatch/hub/recordings", out, clock.now, columns=200)
    shown(T0, T0 + 100)  # the first time read: 0 %
    clock.set(0.5)
    shown(T0 + 10, T0 + 100)
    assert out.getvalue() == ""  # a quick answer draws nothing
    clock.set(1.0)
    shown(T0 + 50, T0 + 100)
    assert out.getvalue() == ("\rnodewatch: reading 50%, at 2026-11-29T10:00:50Z of 2026-11-29T10:01:40Z: "
                              "/var/lib/nodewatch/hub/recordings")
    clock.set(1.1)
    shown(T0 + 60, T0 + 100)  # within the interval: nothing
    clock.set(1.3)
    shown(math.inf, T0 + 100)
    lines = out.getvalue().split("\r")
    assert lines[-1].startswith("nodewatch: read, applying: /var/lib/nodewatch/hub/recordings ")
    assert len(lines[-1]) == len(lines[-2])  # the longer line before it is covered
    shown.done()
    assert out.getvalue().endswith("\r" + " " * len(lines[-1]) + "\r")
    shown.done()  # once
    assert out.getvalue().count("\r") == 4


def test_a_segments_opening_is_shown_by_its_lines_and_the_time_share_counts_from_after_it():
    """A keyframe's lines span little recorded time: its progress is its lines (same delay and
    interval), and the share of time after it starts at 0 % from where the reading then is."""
    out, clock = _Terminal(), ManualClock(0.0)
    shown = ReadProgress("rec", out, clock.now, columns=200)
    shown.opening(4096, 130_005)
    assert out.getvalue() == ""  # within the first second
    clock.set(1.0)
    shown.opening(61_440, 130_005)
    clock.set(1.1)
    shown.opening(65_536, 130_005)  # within the interval: nothing
    clock.set(1.5)
    shown(T0 + 40, T0 + 100)
    clock.set(2.0)
    shown(T0 + 70, T0 + 100)
    lines = out.getvalue().split("\r")[1:]
    assert [line.rstrip() for line in lines] == [
        "nodewatch: reading the fleet at the segment's opening, 47% (61,440 of 130,005 lines): rec",
        "nodewatch: reading 0%, at 2026-11-29T10:00:40Z of 2026-11-29T10:01:40Z: rec",
        "nodewatch: reading 50%, at 2026-11-29T10:01:10Z of 2026-11-29T10:01:40Z: rec"]
    assert len({len(line) for line in lines}) == 1  # each covers the longer one before it
    shown.done()
    shown.opening(1, 2)
    assert out.getvalue().endswith("\r")  # nothing after done


def test_to_the_end_it_says_how_far_it_has_read():
    out, clock = _Terminal(), ManualClock(5.0)
    shown = ReadProgress("r.nwcol", out, clock.now, delay=0)
    shown(T0 + 30, math.inf)
    assert out.getvalue() == "\rnodewatch: reading, at 2026-11-29T10:00:30Z: r.nwcol"


def test_the_line_fits_the_terminal():
    out, clock = _Terminal(), ManualClock(0.0)
    shown = ReadProgress("/var/lib/nodewatch/hub/recordings/nodewatch-20261129T100012Z-000002.nwcol", out,
                         clock.now, delay=0, columns=60)
    shown(T0, T0 + 100)
    assert out.getvalue() == "\rnodewatch: reading 0%, at 2026-11-29T10:00:00Z of 2026-11-2"  # 59 columns
    assert len(out.getvalue()) == 60


def test_nothing_is_drawn_where_stderr_is_not_a_terminal_and_a_name_is_plain_text():
    out, clock = io.StringIO(), ManualClock(0.0)
    shown = ReadProgress("x", out, clock.now, delay=0)
    shown(T0, T0 + 1)
    shown.done()
    assert out.getvalue() == ""
    term = _Terminal()
    ReadProgress("evil\x1b]0;owned\x07\x1b[2J.jsonl", term, clock.now, delay=0)(T0, math.inf)
    assert "\x1b" not in term.getvalue() and "\x07" not in term.getvalue()


def test_a_one_shot_read_reports_its_way_to_the_instant_then_applying(monkeypatch):
    monkeypatch.setattr(instant, "PROGRESS_EVERY", 50)
    calls: list[tuple[float, float]] = []
    path = os.path.join(DATA, "incident-30.jsonl.gz")
    _, seen, _ = state_at(path, None, compact=True)
    at = seen.start + 0.6 * (seen.last - seen.start)
    from nodewatch.core.timeutil import format_time

    when = format_time(at, micro=True)
    state_at(path, when, compact=True, progress=lambda read, target: calls.append((read, target)))
    assert len(calls) > 5 and calls[-1] == (math.inf, parse_time(when))
    reads = [r for r, _ in calls[:-1]]
    assert reads == sorted(reads) and seen.start <= reads[0] and reads[-1] <= at + instant.REORDER_WINDOW + 1
    assert all(target == parse_time(when) for _, target in calls)  # known before the first event is applied


def test_a_report_indexes_then_judges_and_says_so(monkeypatch):
    """``report``'s two stages report through one line: the index (``EventIndex``'s ``progress``,
    every ``PUBLISH_EVERY`` events, its latest time) then the samples (``sample_recording``'s, each
    sample's time against the end)."""
    from nodewatch.core.history import sample_recording
    from nodewatch.sources.replay import index as index_module
    from nodewatch.sources.replay.index import EventIndex

    monkeypatch.setattr(index_module, "PUBLISH_EVERY", 64)
    indexed: list[tuple[float, float]] = []
    idx = EventIndex(os.path.join(DATA, "incident-30.jsonl.gz"), progress=lambda t, end: indexed.append((t, end)))
    try:
        assert len(indexed) >= 5 and all(end == math.inf for _, end in indexed)
        ts = [t for t, _ in indexed]
        assert ts == sorted(ts) and idx.start <= ts[0] and ts[-1] <= idx.end
        judged: list[tuple[float, float]] = []
        sample_recording(idx, idx.settings(None), progress=lambda t, end: judged.append((t, end)))
        assert judged[0][0] == idx.start and judged[-1] == (idx.end, idx.end)
    finally:
        idx.close()
    out, clock = _Terminal(), ManualClock(0.0)
    shown = ReadProgress("r.jsonl", out, clock.now, verb="indexing", columns=100)
    shown(T0 + 10, math.inf)
    clock.set(1.5)
    shown(T0 + 20, math.inf)
    shown.phase("judging")
    shown(T0, T0 + 40)
    shown(T0 + 10, T0 + 40)
    assert out.getvalue().split("\r")[1:] == ["nodewatch: indexing, at 2026-11-29T10:00:20Z: r.jsonl",
                                              "nodewatch: judging 0%, at 2026-11-29T10:00:00Z of "
                                              "2026-11-29T10:00:40Z: r.jsonl"]


def test_an_export_reports_the_time_of_the_lines_it_has_written(monkeypatch):
    """``recording export`` feeds the line from the lines it writes (their leading ``"t"``), every
    ``PROGRESS_EVERY``, against the time they go up to; a line without one is passed over."""
    from nodewatch.commands import recording as export
    from nodewatch.sources.convert import v1_lines

    monkeypatch.setattr(export, "PROGRESS_EVERY", 100)
    calls: list[tuple[float, float]] = []
    lines = export._counted(v1_lines(os.path.join(DATA, "incident-30.jsonl.gz"), []),
                            lambda t, end: calls.append((t, end)), T0 + 10_000)
    written = list(lines)
    assert lines.n == len(written) and len(calls) == len(written) // 100
    ts = [t for t, _ in calls]
    assert all(end == T0 + 10_000 for _, end in calls) and ts == sorted(ts)
    assert ts[0] == float(written[99][5:written[99].index(b",")])
    odd = export._counted(iter([b'{"t":"x",}\n'] * 100 + [b"[1,2]\n"] * 100), lambda t, end: calls.append((t, end)))
    before = len(calls)
    assert len(list(odd)) == 200 and len(calls) == before


def test_once_done_a_background_reader_draws_nothing():
    out, clock = _Terminal(), ManualClock(5.0)
    shown = ReadProgress("r.nwcol", out, clock.now, delay=0, verb="opening")
    shown(T0 + 30, math.inf)
    assert out.getvalue() == "\rnodewatch: opening, at 2026-11-29T10:00:30Z: r.nwcol"
    shown.done()
    drawn = out.getvalue()
    clock.set(60.0)
    shown(T0 + 40, math.inf)  # the index reading on while the dashboard has the terminal
    assert out.getvalue() == drawn


def test_replay_says_how_far_it_has_read_until_the_dashboard_starts(monkeypatch):
    """``nodewatch replay`` of a long recording reads its start before the first frame (~12 s at
    65,000 nodes) with a progress line on stderr, erased before the dashboard; the index going on
    in the background draws nothing after that."""
    import functools
    import sys

    from nodewatch.cli import main
    from nodewatch.sources.replay import index as index_module
    from nodewatch.ui import app as app_module

    monkeypatch.setattr(index_module, "PUBLISH_EVERY", 64)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("NODEWATCH_FORCE_TTY", "1")
    monkeypatch.setattr(app_module, "load_keymap", lambda *a: ({}, []))
    at_start: list[str] = []

    def run(self):
        at_start.append(term.getvalue())
        self.source.replay.index.wait_complete()  # every later report of the background index
        return 0

    monkeypatch.setattr(app_module.NodewatchApp, "run", run)
    from nodewatch.commands import read_progress

    # at once and at every report (this recording is read in a blink)
    monkeypatch.setattr(read_progress, "ReadProgress", functools.partial(read_progress.ReadProgress, delay=0,
                                                                          interval=0))
    assert main(["replay", os.path.join(DATA, "incident-30.jsonl.gz")]) == 0
    drawn = at_start[0]
    assert "nodewatch: opening, at " in drawn and drawn.endswith("\r")  # drawn, then erased
    assert term.getvalue() == drawn


def test_a_replay_that_fails_after_drawing_its_line_says_why_on_a_line_of_its_own(monkeypatch):
    import functools
    import sys

    from nodewatch.cli import main
    from nodewatch.commands import read_progress
    from nodewatch.sources.replay import index as index_module

    monkeypatch.setattr(index_module, "PUBLISH_EVERY", 64)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(read_progress, "ReadProgress", functools.partial(read_progress.ReadProgress, delay=0,
                                                                          interval=0))
    assert main(["replay", os.path.join(DATA, "incident-30.jsonl.gz"), "--start", "nonsense"]) == 2
    drawn, _, error = term.getvalue().rpartition("\r")
    assert "nodewatch: opening, at " in drawn  # drawn, erased, then the error from the line's start
    assert error.startswith("nodewatch: ") and "opening" not in error and error.endswith("\n")
