"""``nodewatch record FILE [--duration S]``: record a live cluster's watch events headless.

No dashboard: useful on a jump host or in a pod during an incident; replay the file later with
``nodewatch replay FILE``. Ends after ``--duration`` seconds, or on Ctrl-C / SIGTERM; the file is
flushed at least once a second, so even ``kill -9`` loses at most the last second.

Exit 2 (one line) when the recording is worthless: a permanent error before nodes and leases were
listed (credentials rejected, forbidden, TLS verification failed, DNS, connection refused) ends it
at once, and a recording that ended before they were ever listed says so.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from .common import add_live_arguments, add_settings_arguments, fail, live_source_from_args, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="recording to write (.jsonl, or .jsonl.gz for gzip)")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    add_live_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.duration is not None and args.duration <= 0:
        return fail("--duration must be positive")
    source = live_source_from_args(args, settings_from_args(args), record=args.file)
    recorder = source.recorder
    assert recorder is not None
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    old = signal.signal(signal.SIGTERM, _stop)
    started = time.monotonic()
    shown = 0.0
    listed = False
    fatal: str | None = None
    source.start()
    try:
        # Until nodes and leases are listed once, a permanent error (credentials rejected, no
        # permission, TLS, an address that refuses) ends the recording at once; afterwards an
        # outage is part of what is recorded (health lines) and the recorder keeps going.
        while not done.wait(1.0 if listed else 0.05):
            elapsed = time.monotonic() - started
            if not listed:
                fatal = source.fatal()
                if fatal is not None:
                    break
                listed = not any(what in ("nodes", "leases") for what in source.not_listed())
            if not args.quiet and elapsed - shown >= 1.0:
                shown = elapsed
                nodes = source.state.node_count()
                print(f"\rrecording {args.file}: {elapsed:.0f}s, {recorder.lines} events, {nodes} nodes",
                      end="", file=sys.stderr, flush=True)
            if args.duration is not None and elapsed >= args.duration:
                break
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        source.stop()
        recorder.close()
    if not args.quiet and shown:
        print(file=sys.stderr)
    if fatal is not None:
        return fail(f"nothing recorded to {args.file}: {fatal}")
    if not args.quiet:
        print(f"wrote {recorder.lines} events to {args.file}", file=sys.stderr)
    if not listed:
        return fail(f"{args.file}: nodes and leases were never listed (the API server did not answer in "
                    f"{time.monotonic() - started:.0f}s); the file has only what was received")
    return 0
