"""``nodewatch hub``: one watcher for many screens, with a flight recorder.

One process keeps the live source (or ``--demo``; or several clusters: ``--context`` repeated,
``--all-contexts``, ``--fleet FILE``, as the dashboard takes them) and the one FleetState, records everything it
receives into rotating segments under ``DIR/recordings``, and serves viewers (``nodewatch
attach``) on ``DIR/hub.sock`` (0600), and optionally over TCP with TLS and a token (``--listen``).
With ``--ssh`` and ``--web`` it also opens the front doors (``frontdoor/``): each SSH session and
each browser page runs its own ``nodewatch attach DIR`` on the hub's socket.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from pathlib import Path

from ..stop_signals import StopSignals, dump_stacks_on_sigusr1
from .common import (
    CommandError,
    add_demo_arguments,
    add_live_arguments,
    add_multi_arguments,
    add_settings_arguments,
    parse_age,
    parse_size,
    settings_from_args,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..frontdoor.doors import add_frontdoor_arguments
    from ..hub.paths import DEFAULT_DIR
    from .metrics_options import add_metrics_arguments

    parser.add_argument("--dir", metavar="DIR", help=f"the hub's directory (default {DEFAULT_DIR}, created 0700)")
    parser.add_argument("--demo", action="store_true", help="serve the simulated fleet instead of a cluster")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="also serve viewers over TCP with TLS and a token (written to DIR/viewer.json)")
    g = parser.add_argument_group("flight recorder")
    g.add_argument("--keep", type=parse_age, default="24h", metavar="AGE", help="keep recordings this long (default 24h)")
    g.add_argument("--keep-bytes", type=parse_size, default="8G", metavar="SIZE",
                   help="and at most this much (default 8G: 24 h of a 65,000-node fleet in the columnar format)")
    g.add_argument("--segment", type=parse_age, default="15m", metavar="AGE", help="start a new segment this often (default 15m)")
    g.add_argument("--record-format", choices=("columnar", "jsonl"), default="columnar",
                   help="segments as the columnar format (default: a tenth of the bytes) or gzip JSON Lines")
    g.add_argument("--no-record", action="store_true", help="do not record")
    add_frontdoor_arguments(parser)
    add_metrics_arguments(parser, hub=True)
    add_live_arguments(parser)
    add_multi_arguments(parser)
    add_demo_arguments(parser, flag_prefix="demo-")
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..frontdoor.doors import frontdoor_argument_error
    from ..hub import paths
    from .hub_runner import HubRunner

    if error := frontdoor_argument_error(args):
        raise CommandError(error)
    directory = paths.ensure_private_dir(Path(os.path.expanduser(args.dir)) if args.dir else paths.default_dir())
    lock = open(directory / paths.LOCK, "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise CommandError(f"{directory}: another hub is running with this directory") from None
    runner = HubRunner(args, directory, settings_from_args(args))
    dump_stacks_on_sigusr1()
    with StopSignals() as signals:  # taken before the start: a stop from then on is a clean one
        runner.start()
        try:
            for line in runner.banner():
                print(line, flush=True)
            while not signals.wait(1.0):
                notice = runner.recorder.capacity_notice() if runner.recorder is not None else None
                if notice:
                    print(f"nodewatch hub: {notice}", file=sys.stderr, flush=True)
        finally:
            runner.stop()
    print("nodewatch hub: stopped", file=sys.stderr)
    return 0
