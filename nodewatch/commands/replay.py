"""``nodewatch replay FILE``: the dashboard in virtual time over a recording or kubectl watch log."""

from __future__ import annotations

import argparse

from .common import add_settings_arguments, fail, naming, recording_path, settings_from_args, speed
from .dashboard import add_dashboard_arguments, run_app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", type=recording_path,
                        help="a nodewatch recording (.jsonl, .jsonl.gz, .nwcol), a hub's "
                        "directory (or its recordings), a kubectl `get -w --output-watch-events -o json` log, or - for stdin")
    parser.add_argument("--speed", type=speed, default=1.0, metavar="X", help="playback speed (default 1)")
    parser.add_argument("--start", metavar="WHEN", help="RFC 3339, +OFFSET from the start (+90, +15m, +1h30m), or HH:MM[:SS] (UTC)")
    parser.add_argument("--from", dest="from_", metavar="WHEN", help="a hub's recordings directory: from "
                        "HH:MM (UTC), RFC 3339 or +OFFSET (+90, +15m); only the segments needed are read")
    parser.add_argument("--to", metavar="WHEN", help="a hub's recordings directory: up to this time")
    add_dashboard_arguments(parser, record=False)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..sources.replay import RecordingError, ReplaySource
    from .read_progress import ReadProgress

    shown = ReadProgress(args.file, verb="opening")  # a 65,000-node segment: ~12 s to its first frame
    try:
        path, start = args.file, args.start
        if args.from_ or args.to:  # a hub's flight recorder: read only the segments of the window
            from ..sources.segments import window

            path, from_, _ = window(args.file, args.from_, args.to)
            start = start or from_
        source = ReplaySource(path, settings=settings_from_args(args), speed=args.speed, start_at=start,
                              background=True, progress=shown)  # the first frame once the start is read;
    except (RecordingError, OSError, ValueError) as exc:  # the rest is indexed meanwhile
        shown.done()  # (before the error: on the line it would share)
        return fail(naming(args.file, exc))
    finally:
        shown.done()
    return run_app(source, args, problems=source.problems)
