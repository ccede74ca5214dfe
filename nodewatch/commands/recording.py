"""``nodewatch recording export SRC [--from T] [--to T] -o FILE``: any recording as JSON Lines (or
columnar), any span of a hub's directory.

Why: JSON Lines is the interchange format (``zcat | jq``, other tools, a bug report), while the hub
keeps its day in the columnar format. SRC is a recording file (JSON Lines, gzip, columnar, a kubectl
watch log) or a hub's directory of segments; FILE ``.jsonl.gz`` is gzip JSON Lines, ``.jsonl`` plain,
``.nwcol`` the columnar format, ``-`` plain JSON Lines on stdout. The export of a directory from
``--from`` starts at the keyframe of the segment that holds ``--from`` (the fleet as it was then:
the export replays on its own); a file is exported from its start, up to ``--to``.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import sys
from typing import IO, Callable, Iterator

from ..sources.segments import line_time
from .common import CommandError, fail, naming, recording_path

EXPORT_HELP = """any recording as JSON Lines (or columnar), or any span of a hub's directory

JSON Lines is the interchange format (zcat | jq, other tools, a bug report); a hub keeps its day in
the columnar format. SRC is a recording file (JSON Lines, gzip, columnar, a kubectl watch log) or a
hub's directory of segments. FILE: .jsonl.gz for gzip JSON Lines, .jsonl plain, .nwcol columnar,
- plain JSON Lines on stdout. A directory exported --from T starts at the keyframe of the segment
that holds T (the fleet as it was then: the export replays on its own); a file is exported from its
start. A kubectl log's events come out in time order, each concatenated watch placed by its own
objects' times."""
"""``recording export --help`` (the module's docstring is for its readers, in their markup)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("export", help="write a recording (or a span of a hub's directory) as JSON Lines",
                       description=EXPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(_parser=p)  # (its usage, not ``recording``'s, for an argument it does not take)
    p.add_argument("src", metavar="SRC", type=recording_path,
                   help="a recording file, or a hub's directory (or its recordings)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="FILE.jsonl.gz (gzip), FILE.jsonl, FILE.nwcol (columnar) or - (stdout)")
    p.add_argument("--from", dest="start", metavar="T",
                   help="a directory only: from the segment holding T (HH:MM[:SS] UTC, RFC 3339, +OFFSET such as +90 or +15m)")
    p.add_argument("--to", dest="end", metavar="T", help="up to T (HH:MM[:SS] UTC, RFC 3339, +OFFSET such as +90 or +15m)")


def run(args: argparse.Namespace) -> int:
    from ..sources.recording import RecordingError
    from .read_progress import ReadProgress

    shown = ReadProgress(args.src, verb="exporting")
    try:
        lines, problems, end = _lines(args)
        n = _write(_counted(lines, shown, end), args.output)
    except RecordingError as exc:
        shown.done()
        return fail(naming(args.src, exc))
    except (ValueError, CommandError) as exc:
        shown.done()
        return fail(str(exc))
    except OSError as exc:
        shown.done()
        return fail(f"{args.output}: cannot write ({exc.strerror or exc})")
    shown.done()
    for p in problems:
        print(f"nodewatch: {naming(args.src, p)}", file=sys.stderr)
    if args.output != "-":
        print(f"nodewatch: {n:,} lines written to {args.output}", file=sys.stderr)
    return 0


def _lines(args: argparse.Namespace) -> tuple[Iterator[bytes], list[str], float]:
    """(the v1 lines to write, the problems met reading them, the time they go up to: inf to the end)."""
    from ..core.timeutil import parse_time, parse_when
    from ..sources.convert import v1_lines
    from ..sources.recording import RecordingError
    from ..sources.segments import window

    problems: list[str] = []
    src = args.src
    if os.path.isdir(src):
        w, _, _ = window(src, args.start, args.end)
        return v1_lines(w, problems, end=w.end), problems, w.end if w.end is not None else math.inf
    if args.start:
        raise CommandError("--from needs a hub's directory: a file is exported from its start (the fleet at "
                           "--from is made of what came before it)")
    if not os.path.exists(src) and src != "-":
        raise RecordingError(f"{src}: no such file")
    end = None
    if args.end:
        import orjson

        head = v1_lines(src, [])
        first = next(head, b"{}")
        started = orjson.loads(first).get("started_at") if first.startswith(b"{") else None
        start = parse_time(started) if isinstance(started, str) else None
        if start is None:  # a kubectl log (or a header without it): from its first event, as status --at is
            t = orjson.loads(next(head, b"{}")).get("t")
            start = t if isinstance(t, (int, float)) else None
        end = parse_when(args.end, start)
    return v1_lines(src, problems, end=end), problems, end if end is not None else math.inf


def _write(lines: "_counted", output: str) -> int:
    from ..sources import columnar

    if output.endswith(columnar.EXTENSION):
        with open(output, "wb") as f:
            columnar.write_lines(lines, f)
        return lines.n
    out: IO[bytes] | gzip.GzipFile
    if output == "-":
        out = sys.stdout.buffer
        for line in lines:
            out.write(line)
        out.flush()
        return lines.n
    with open(output, "wb") as raw:
        out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if output.endswith(".gz") else raw
        for line in lines:
            out.write(line)
        if out is not raw:
            out.close()
    return lines.n


PROGRESS_EVERY = 4096
"""Lines written between two progress reports."""


class _counted:
    """The lines, counting them as they go by; every ``PROGRESS_EVERY``, the time of the line
    (``segments.line_time``) goes to ``progress`` with the time they go up to."""

    def __init__(self, lines: Iterator[bytes], progress: Callable[[float, float], None] | None = None,
                 end: float = math.inf) -> None:
        self._lines = lines
        self._progress = progress
        self._end = end
        self.n = 0

    def __iter__(self) -> "_counted":
        return self

    def __next__(self) -> bytes:
        line = next(self._lines)
        self.n += 1
        if self._progress is not None and not self.n % PROGRESS_EVERY:
            t = line_time(line)
            if math.isfinite(t):
                self._progress(t, self._end)
        return line
