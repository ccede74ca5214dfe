"""``nodewatch testbed build|up|down``: a real control plane with simulated kubelets, on loopback.

``up`` returns once the control plane is ready; the processes (and, with ``--nodes``, the kubelet
driver) keep running in the background until ``down`` stops them by pid. Then
``nodewatch --kubeconfig DIR/viewer.kubeconfig`` is nodewatch on a real control plane.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PASS_THROUGH = ("--controller-flag", "--apiserver-flag")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION", required=True)
    sub.add_parser("build", help="fetch and build etcd, kube-apiserver and kube-controller-manager v1.20.2 "
                                 "into the cache (NODEWATCH_TESTBED_CACHE, default ~/.cache/nodewatch/testbed)")
    up = sub.add_parser("up", help="start the control plane (and simulated kubelets) in DIR")
    up.add_argument("--dir", required=True, type=Path, help="folder for PKI, data, logs and kubeconfigs")
    up.add_argument("--nodes", type=int, default=0, help="simulated kubelets to run (0: none)")
    up.add_argument("--scenario", default="steady",
                    help="what goes wrong, as in `nodewatch demo` (e.g. kubelet-stop, zone-partial, "
                         "runtime-down, flapping, clock-skew; join with +)")
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
        binaries = ensure_built(progress=_progress)
        if args.testbed_command == "build":
            print(binaries.kube_apiserver.parent)
            return 0
        tb = up(args.dir, binaries, controller_flags=tuple(args.controller_flag),
                apiserver_flags=tuple(args.apiserver_flag), progress=_progress)
        if args.nodes > 0:
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
