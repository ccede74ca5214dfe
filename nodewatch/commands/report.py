"""``nodewatch report RECORDING``: the incident report for a postmortem, Markdown or HTML.

The recording is sampled in one pass (``core/history.py``) over the window asked for, and the
report written from that history (``core/incident_report.py``): stdout Markdown by default,
``-o FILE.md`` or ``-o FILE.html``. A recording of several clusters is sampled with one state per
cluster (each judged by its own recorded settings) and reported per cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import CommandError, add_settings_arguments, naming, recording_path, settings_from_args

FORMATS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="RECORDING", type=recording_path,
                        help="a nodewatch recording (.jsonl, .jsonl.gz, .nwcol), a "
                        "hub's directory (or its recordings), or a kubectl `get -w --output-watch-events -o json` log")
    parser.add_argument("--from", dest="start", metavar="T", help="start of the window: RFC 3339, +OFFSET (+90, +15m) "
                        "from the recording's start, or HH:MM[:SS] (UTC); of a hub's directory only the segments of "
                        "the window are read (default: its start)")
    parser.add_argument("--to", dest="end", metavar="T", help="end of the window: as --from (default: its end)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write FILE.md (Markdown) or FILE.html (HTML with "
                        "the timeline picture) instead of Markdown on stdout")
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.history import sample_recording
    from ..core.incident_report import RecordingInfo, build_report
    from ..core.multi import MultiFleet
    from ..core.report_render import to_html, to_markdown
    from ..core.timeutil import parse_when
    from ..sources.recording import RecordingError
    from ..sources.replay.index import EventIndex
    from ..sources.segments import recording_label

    fmt = "markdown"
    if args.output:
        fmt = FORMATS.get(os.path.splitext(args.output)[1].lower(), "")
        if not fmt:
            raise CommandError(f"{args.output}: the output must end in .md or .html")
    from .read_progress import ReadProgress

    path, asked = args.file, args.start
    if os.path.isdir(path):  # a hub's flight recorder: only the segments of the window, HH:MM of its days
        from ..sources.segments import window

        try:
            path, args.start, args.end = window(path, args.start, args.end)
        except (RecordingError, ValueError) as exc:
            raise CommandError(naming(args.file, exc)) from None
    shown = ReadProgress(args.file, verb="indexing")
    try:
        index = EventIndex(path, progress=shown)
    except (RecordingError, OSError, ValueError) as exc:
        shown.done()
        raise CommandError(naming(args.file, exc)) from None
    try:
        if not len(index):
            raise CommandError(f"{args.file}: no usable events in the recording")
        given = settings_from_args(args) if _settings_given(args) else None
        settings = index.settings(given)
        state = index.new_state(given)  # several: one state per cluster
        try:
            start = parse_when(args.start, index.start) if args.start else index.start
            end = parse_when(args.end, index.start) if args.end else index.end
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if end < start:
            raise CommandError("--to is before --from")
        gap = _unrecorded_start(args.file, index, start, given)
        if gap:  # judged from there, every node would look as old as the gap is long
            raise CommandError(f"{args.file}: --from {asked}: {gap}")
        shown.phase("judging")
        history = sample_recording(index, settings, start=start, end=end, state=state, progress=shown)
        clusters = tuple((m.name, m.state.settings) for m in state.members) if isinstance(state, MultiFleet) else ()
        if not isinstance(state, MultiFleet):  # what the window ended with: a default learned from the pods too
            settings = state.settings
        info = RecordingInfo(
            name=recording_label(args.file), size=_size(path), events=len(index),
            source=index.source_name(), settings=settings, problems=tuple(index.problems), start=start, end=end,
            clusters=clusters)
        blocks = build_report(info, history)
        text = to_html(blocks, history, start, end) if fmt == "html" else to_markdown(blocks)
    finally:
        shown.done()
        index.close()
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CommandError(f"{args.output}: cannot write ({exc.strerror or exc})") from None
    return 0


def _unrecorded_start(directory: str, index: Any, start: float, given: Any) -> str | None:
    """Why a hub directory's window cannot start at ``start``: the recorder was not running then
    (``segments.unrecorded``), and the recording does not say the lease stream was down."""
    from ..sources.replay.clusters import not_recorded

    before = index.count_until(start)

    def state_at_start() -> Any:
        state = index.new_state(given)
        index.apply_range(state, 0, before)
        return state

    return not_recorded(directory, start, index.times[before - 1], state_at_start) if before else None


def _settings_given(args: argparse.Namespace) -> bool:
    from .common import SETTING_NAMES

    return any(getattr(args, name, None) is not None for name in SETTING_NAMES)


def _size(path: str) -> int | None:
    """The bytes read: a file's, or those of a directory's segments in the window."""
    from ..sources.segments import SegmentWindow, list_segments, select_segments

    if isinstance(path, SegmentWindow):
        return sum(s.size for s in select_segments(list_segments(path), path.start, path.end))
    try:
        return os.path.getsize(path)
    except OSError:
        return None
