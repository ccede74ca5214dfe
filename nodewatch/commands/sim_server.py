"""``nodewatch sim-server``: serve a simulated fleet as a Kubernetes API on 127.0.0.1.

Writes a kubeconfig pointing at itself (CA data + bearer token) so kubectl, nodewatch or any client
can talk to it. Started again with the same ``--kubeconfig-out`` it reuses the CA, token and port,
so clients see the same cluster come back.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from ..sim.server import DEFAULT_KUBECONFIG, SimServer
from ..sim.server_watch import WATCH_LIST_MODES
from ..stop_signals import StopSignals, dump_stacks_on_sigusr1
from .common import add_demo_arguments, add_settings_arguments, fail, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_demo_arguments(parser, speed_help=(
        "virtual time speed (default 1). Above 1 the fleet's times run ahead of the wall clock, and a client "
        "on the wall clock (`nodewatch watch`, kubectl) sees them in its future: times since read negative"))
    parser.add_argument("--server-version", dest="server_version", default="v1.33.2",
                        help="Kubernetes version the server reports (default v1.33.2)")
    parser.add_argument("--port", type=int, default=None,
                        help="port on 127.0.0.1 (default: the one in an existing --kubeconfig-out, else a free one)")
    parser.add_argument("--kubeconfig-out", default=DEFAULT_KUBECONFIG, metavar="FILE",
                        help=f"kubeconfig to write (default ./{DEFAULT_KUBECONFIG}); its CA key is kept in "
                             "FILE.ca-key.pem")
    parser.add_argument("--insecure-http", action="store_true", help="plain HTTP instead of HTTPS")
    parser.add_argument("--bookmark-interval", type=float, default=10.0, metavar="S",
                        help="seconds between watch bookmarks (default 10)")
    parser.add_argument("--bookmark-clock", choices=("wall", "virtual"), default="wall",
                        help="count the bookmark interval in wall seconds (default) or virtual seconds")
    parser.add_argument("--bookmark-jitter", type=float, default=0.0, metavar="S",
                        help="spread each bookmark gap by up to S seconds either way (a real API "
                             "server: --bookmark-interval 60 --bookmark-jitter 1)")
    parser.add_argument("--no-bookmarks-when-unchanged", dest="bookmarks_when_unchanged", action="store_false",
                        help="as 1.20: no bookmark on a resource unchanged since the server started")
    parser.add_argument("--watch-list", choices=WATCH_LIST_MODES, default="auto",
                        help="how streaming lists are answered: auto (from 1.27 on, the default), "
                             "default-gates (the WatchList gate's default by version: off in 1.33), "
                             "on, gate-off (422), old-etcd (an ERROR event), ignored (a plain watch)")
    parser.add_argument("--log", metavar="FILE", help="request log file (default: stderr)")
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    add_settings_arguments(parser)


def _make_fleet(args: argparse.Namespace):
    from ..sim.fleet import SimFleet  # the fleet is optional until it exists

    return SimFleet(nodes=args.nodes, scenario=args.scenario, seed=args.seed, start=time.time(),
                    version=args.server_version, settings=settings_from_args(args))


def run(args: argparse.Namespace) -> int:
    if args.nodes >= 5000:
        print(f"nodewatch sim-server: building a {args.nodes}-node fleet...", flush=True)
    try:
        fleet = _make_fleet(args)
    except (ValueError, KeyError) as e:
        return fail(f"sim-server: {e}")
    # Built from the wall time at its start: its clock is caught up to the wall before serving, or
    # every kubelet stamps renewTime as far behind as the build took (65k nodes: ~30 s; a client
    # listing the Leases saw every node late: issue 29). Here without subscribers (cheap), then
    # for the store's load by the fleet thread (``SimServer.follow_wall``).
    fleet.step_to(time.time())
    log = None
    if not args.quiet:
        log = open(args.log, "a", encoding="utf-8") if args.log else sys.stderr  # noqa: SIM115
    server = SimServer(
        fleet,
        port=args.port,
        tls=not args.insecure_http,
        kubeconfig_out=args.kubeconfig_out,
        bookmark_interval=args.bookmark_interval,
        bookmark_clock=args.bookmark_clock,
        bookmark_jitter=args.bookmark_jitter,
        bookmarks_when_unchanged=args.bookmarks_when_unchanged,
        watch_list=args.watch_list,
        speed=args.speed,
        log=log,
        server_version=args.server_version,
    )
    server.follow_wall = True
    try:
        server.start()
    except OSError as e:
        return fail(f"sim-server: cannot listen on 127.0.0.1:{args.port or 'any'}: {e}")
    # SIGTERM is taken before the address is printed: whoever reads it may stop the server at once.
    dump_stacks_on_sigusr1()
    signals = StopSignals((signal.SIGTERM,)).install()
    kubeconfig = Path(args.kubeconfig_out).resolve()
    print(f"nodewatch sim-server: {args.nodes} nodes, scenario {args.scenario}, speed {args.speed}x")
    print(f"  API server:  {server.url}")
    print(f"  kubeconfig:  {kubeconfig}")
    print(f"  export KUBECONFIG={kubeconfig}")
    print("Ctrl-C to stop.", flush=True)
    try:
        while not signals.wait(1.0):
            if server.fleet_error is not None:
                print(f"nodewatch sim-server: the fleet stopped: {server.fleet_error!r}", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        pass
    finally:
        signals.restore()
        server.stop()
        if log is not None and log is not sys.stderr:
            log.close()
    return 0
