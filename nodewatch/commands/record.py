"""``nodewatch record FILE [--duration S]``: record a live cluster's watch events headless.

No dashboard: useful on a jump host or in a pod during an incident; replay the file later with
``nodewatch replay FILE``. Ends after ``--duration`` seconds, or on Ctrl-C / SIGTERM; the file is
flushed at least once a second, so even ``kill -9`` loses at most the last second.

Exit 2 (one line) when the recording is worthless: a permanent error before nodes and leases were
listed (credentials rejected, forbidden, TLS verification failed, DNS, connection refused) ends it
at once, and a recording that ended before they were ever listed says so.

A full disk (any failed write) ends the recording, not with a traceback: one line says so and
what the file still holds (readable up to its last whole line), exit 1.

Several clusters (several ``--context``, ``--all-contexts``, ``--fleet``) go into one file, each
line saying its cluster. A cluster with a permanent error is said on stderr (one line) and recorded
as it is seen (its health lines); the others are recorded on. Exit 2 only when no cluster at all
could be listed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from ..core.text import safe
from ..stop_signals import StopSignals, dump_stacks_on_sigusr1
from .common import (
    add_live_arguments,
    add_multi_arguments,
    add_settings_arguments,
    cluster_specs_from_args,
    fail,
    live_source_from_args,
    multi_source,
    settings_from_args,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="recording to write (.jsonl, .jsonl.gz for gzip, .nwcol for the columnar format)")
    parser.add_argument("--format", dest="record_format", choices=("columnar", "jsonl"),
                        help="columnar (a tenth of the bytes; `nodewatch recording export` writes it out as "
                             "JSON Lines) or jsonl; default: columnar for a .nwcol FILE, else jsonl")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    add_live_arguments(parser)
    add_multi_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.duration is not None and args.duration <= 0:
        return fail("--duration must be positive")
    settings = settings_from_args(args)
    specs = cluster_specs_from_args(args)
    source: Any
    if specs is not None:
        source = multi_source(specs, args, settings, record=args.file)
    else:
        source = live_source_from_args(args, settings, record=args.file)
    recorder = source.recorder
    assert recorder is not None
    dump_stacks_on_sigusr1()
    signals = StopSignals((signal.SIGTERM,)).install()
    started = time.monotonic()
    shown = 0.0
    listed = False
    fatal: str | None = None
    stopped = ""
    told: dict[str, str] = {}
    """Several clusters: the ones with a permanent error before they listed, and why."""
    source.start()
    try:
        # Until nodes and leases are listed once, a permanent error (credentials rejected, no
        # permission, TLS, an address that refuses) ends the recording at once; afterwards an
        # outage is part of what is recorded (health lines) and the recorder keeps going.
        while not signals.wait(1.0 if listed else 0.05):
            elapsed = time.monotonic() - started
            if not listed:
                if specs is not None:
                    fatal, listed = _clusters_progress(source, told, args.quiet)
                else:
                    fatal = source.fatal()
                    listed = fatal is None and not any(what in ("nodes", "leases") for what in source.not_listed())
                if fatal is not None:
                    break
            if not args.quiet and elapsed - shown >= 1.0:
                shown = elapsed
                nodes = source.state.node_count()
                print(f"\rrecording {args.file}: {elapsed:.0f}s, {recorder.lines:,} lines, {nodes:,} nodes",
                      end="", file=sys.stderr, flush=True)
            if args.duration is not None and elapsed >= args.duration:
                break
            stopped = _stopped(recorder)
            if stopped:
                break
    except KeyboardInterrupt:
        pass
    finally:
        signals.restore()
        if specs is not None and fatal is None:  # several: worth keeping once one cluster was listed
            settled = _settled(source)
            listed = any(v is True for v in settled.values())
            for name, v in settled.items():
                if v is None and listed and not args.quiet:
                    print(f"\nnodewatch: cluster {safe(name, 80)}: nodes and leases were never listed",
                          file=sys.stderr)
        source.stop()
        recorder.close()
    if not args.quiet and shown:
        print(file=sys.stderr)
    if fatal is not None:
        return fail(f"nothing recorded to {args.file}: {fatal}")
    if stopped:
        print(f"nodewatch: {stopped}", file=sys.stderr)
        return 1
    if not args.quiet:
        some = f" of {len(specs) - len(told)} of {len(specs)} clusters" if specs is not None and told else ""
        print(f"wrote {recorder.lines:,} lines{some} to {args.file}", file=sys.stderr)
    if not listed:
        return fail(f"{args.file}: nodes and leases were never listed (the API server did not answer in "
                    f"{time.monotonic() - started:.0f}s); the file has only what was received")
    return 0


def _stopped(recorder: Any) -> str:
    """Why the recording stopped (a full disk: ``StoppingRecorder``'s whole message), "" while it records."""
    recorder.check()
    return str(getattr(recorder, "message", "") or "")


def _clusters_progress(source: Any, told: dict[str, str], quiet: bool) -> tuple[str | None, bool]:
    """(why nothing can be recorded, whether every cluster is settled) for several clusters; a
    cluster with a permanent error before its nodes and leases were listed is said once on stderr
    (and kept in ``told``)."""
    settled = _settled(source)
    for feed in source.feeds:
        if settled[feed.name] is False and feed.name not in told:
            told[feed.name] = " ".join((feed.error() or "cannot be read").split())[:300]
            if not quiet:
                print(f"\nnodewatch: cluster {safe(feed.name, 80)}: {told[feed.name]}; recording the others",
                      file=sys.stderr)
    if all(v is False for v in settled.values()):
        return "; ".join(f"{safe(name, 80)}: {why}" for name, why in told.items()), False
    return None, all(v is not None for v in settled.values())


def _settled(source: Any) -> dict[str, bool | None]:
    """Per cluster: True once its nodes and leases were listed, False for a permanent error before
    that, None while it is still to be waited for (the rule of one-cluster ``record``)."""
    out: dict[str, bool | None] = {}
    for feed in source.feeds:
        live = feed.live
        if live is not None and not any(what in ("nodes", "leases") for what in live.not_listed()):
            out[feed.name] = True
        else:
            out[feed.name] = False if feed.error() is not None else None
    return out
