"""``nodewatch testbed build|up|down``: a real control plane with simulated or hollow kubelets, on loopback.

``up`` returns once the control plane is ready; the processes (and, with ``--nodes``, the kubelet
driver) keep running in the background until ``down`` stops them by pid. Then
``nodewatch --kubeconfig DIR/viewer.kubeconfig`` is nodewatch on a real control plane.
``--version`` picks the release: 1.20 (v1.20.2 from Debian's source package, the default), or
latest / 1.N / 1.N.P from the Go module proxy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PASS_THROUGH = ("--controller-flag", "--apiserver-flag")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .build import DEFAULT_VERSION

    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)
    version_help = (f"Kubernetes release: 1.20 (v1.20.2 from Debian's source package), latest, a minor "
                    f"(1.37) or a release (1.37.2) from the Go module proxy (default {DEFAULT_VERSION})")
    build = sub.add_parser("build", help="fetch and build etcd, kube-apiserver, kube-controller-manager and kubemark "
                                         "into the cache (NODEWATCH_TESTBED_CACHE, default ~/.cache/nodewatch/testbed)")
    build.add_argument("--version", default=DEFAULT_VERSION, help=version_help)
    up = sub.add_parser("up", help="start the control plane (and simulated or hollow kubelets) in DIR")
    up.add_argument("--dir", required=True, type=Path, help="folder for PKI, data, logs and kubeconfigs")
    up.add_argument("--version", default=DEFAULT_VERSION, help=version_help)
    up.add_argument("--nodes", type=int, default=0, help="kubelets to run (0: none; with --kubelets hollow: 3)")
    up.add_argument("--kubelets", choices=("simulated", "hollow"), default="simulated",
                    help="simulated: nodewatch's own kubelets (every scenario of `nodewatch demo`); hollow: "
                         "the real kubelet's code (kubemark --morph=kubelet) on a fake runtime")
    up.add_argument("--scenario", default="steady",
                    help="what goes wrong, as in `nodewatch demo` (e.g. kubelet-stop, zone-partial, "
                         "runtime-down, flapping, clock-skew; join with +); hollow kubelets: kubelet-stop, "
                         "kubelet-freeze, cutoff, restart")
    up.add_argument("--speed", type=float, default=1.0,
                    help="scenario steps happen this many times sooner (the control plane runs in real time)")
    up.add_argument("--seed", type=int, default=1, help="fleet shape and scenario choices")
    up.add_argument("--pods-per-node", type=int, default=4)
    up.add_argument("--controller-flag", action="append", default=[], metavar="FLAG",
                    help="pass a flag to kube-controller-manager, e.g. --node-monitor-grace-period=20s "
                         "(repeatable)")
    up.add_argument("--apiserver-flag", action="append", default=[], metavar="FLAG",
                    help="pass a flag to kube-apiserver, e.g. --default-unreachable-toleration-seconds=60")
    down = sub.add_parser("down", help="stop everything `up` started in DIR (by pid)")
    down.add_argument("--dir", required=True, type=Path)
    _accept_flag_values(p)


def _accept_flag_values(p: argparse.ArgumentParser) -> None:
    """Let ``--controller-flag --node-monitor-grace-period=20s`` parse (argparse refuses a value that
    starts with ``--``) by joining such pairs into ``--controller-flag=--node-...``."""
    original = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        return original(join_flag_values(list(sys.argv[1:] if args is None else args)), namespace)

    p.parse_known_args = parse_known_args  # type: ignore[method-assign]


def join_flag_values(argv: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in PASS_THROUGH and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _progress(line: str) -> None:
    print(f"testbed: {line}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from .build import BuildError, ensure_built
    from .controlplane import TestbedError, down, up

    try:
        if args.testbed_command == "down":
            down(args.dir, progress=_progress)
            return 0
        binaries = ensure_built(progress=_progress, version=args.version)
        if args.testbed_command == "build":
            print(binaries.kube_apiserver.parent)
            return 0
        tb = up(args.dir, binaries, controller_flags=tuple(args.controller_flag),
                apiserver_flags=tuple(args.apiserver_flag), progress=_progress)
        if args.kubelets == "hollow":
            from .hollow import start_driver as start_hollow

            start_hollow(tb, nodes=args.nodes or 3, scenario=args.scenario, speed=args.speed, progress=_progress)
        elif args.nodes > 0:
            from .kubelets import start_driver

            start_driver(tb, nodes=args.nodes, scenario=args.scenario, speed=args.speed, seed=args.seed,
                         pods_per_node=args.pods_per_node, progress=_progress)
        print(f"nodewatch --kubeconfig {tb.viewer_kubeconfig}")
        print(f"kubectl --kubeconfig {tb.admin_kubeconfig} get nodes")
        print(f"nodewatch testbed down --dir {tb.dir}")
        return 0
    except (BuildError, TestbedError, ValueError) as exc:
        print(f"nodewatch testbed: {exc}", file=sys.stderr)
        return 2
