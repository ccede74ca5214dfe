"""``nodewatch record FILE [--duration S]``: record a live cluster's watch events headless.

No dashboard: useful on a jump host or in a pod during an incident; replay the file later with
``nodewatch replay FILE``. Ends after ``--duration`` seconds, or on Ctrl-C / SIGTERM; the file is
flushed at least once a second, so even ``kill -9`` loses at most the last second.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from .common import add_live_arguments, add_settings_arguments, fail, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="recording to write (.jsonl, or .jsonl.gz for gzip)")
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    add_live_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..sources.live import KubeconfigError, LiveSource
    from ..sources.recording import Recorder

    if args.duration is not None and args.duration <= 0:
        return fail("--duration must be positive")
    settings = settings_from_args(args)
    try:
        source = LiveSource(settings, kubeconfig=args.kubeconfig, context=args.context,
                            cert_cache_dir=args.cert_cache_dir, probe_kubelet_tls=args.probe_kubelet_tls,
                            kubelet_metrics=args.kubelet_metrics)
    except KubeconfigError as exc:
        return fail(str(exc))
    try:
        recorder = Recorder(args.file, {"kind": "live", "name": source.name, "context": source.target.context,
                                        "server": source.target.server}, settings)
    except OSError as exc:
        return fail(f"{args.file}: cannot write ({exc.strerror or exc})")
    source.recorder = recorder
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    old = signal.signal(signal.SIGTERM, _stop)
    started = time.monotonic()
    source.start()
    try:
        while not done.wait(1.0):
            elapsed = time.monotonic() - started
            if not args.quiet:
                with source.state.lock:
                    nodes = len(source.state.nodes)
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
    if not args.quiet:
        print(f"\nwrote {recorder.lines} events to {args.file}", file=sys.stderr)
    return 0
