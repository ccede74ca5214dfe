"""``nodewatch status`` over several clusters: each answered as one-cluster ``status`` answers it.

JSON: ``{"clusters": [{"context": ..., <what one-cluster status has>}, {"context": ..., "error": ...}]}``
(``name`` too when a fleet file named the cluster otherwise). The table: one block per cluster.
Exit codes: 2 when a cluster cannot be read (its error also goes to stderr, one line per cluster),
otherwise 1 when any node anywhere is not Ready, otherwise 0. The clusters are started and waited
for together: one that cannot answer costs at most ``--wait`` seconds, never one wait per cluster.

``status --replay`` of a recording of several clusters answers the same way, per recorded cluster
(``answer_recorded``); a cluster without nodes at that instant is an error there (exit 2), as a
one-cluster recording without nodes is.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from ..core.multi import MultiFleet, cluster_health
from ..core.report import fleet_json, fleet_table, terminal_safe_json
from ..core.rules import NodeState
from ..core.settings import Settings
from ..core.text import safe
from ..core.timeutil import format_time
from ..core.views import HEALTH_BAD
from ..sources.multi_config import ClusterSpec
from .common import fail, multi_source
from .status_waits import await_tainted_nodes_pods

Answer = tuple[str, "str | None", Any, Any, "str | None"]
"""One cluster's answer: (name, context, state, view, error)."""


def run_multi(args: argparse.Namespace, settings: Settings, specs: list[ClusterSpec]) -> int:
    if args.at:
        return fail("--at needs --replay FILE or --demo")
    source = multi_source(specs, args, settings)
    hit = None
    if args.node is not None:
        hit = source.state.split(args.node)
        if hit is None:
            source.stop()
            return fail(f"--node {args.node!r}: with several clusters name the node as CLUSTER/NAME "
                        f"(clusters: {', '.join(source.state.cluster_names)})")
    for feed in source.feeds:
        feed.state.judge_lists_at_once()  # one answer now, as ``status`` of one cluster
    source.start()
    if args.node:
        source.focus_node(args.node)
    try:
        started = time.monotonic()
        listed = source.wait_settled(args.wait, hit[1] if hit else None)
        await_tainted_nodes_pods([f.live for f in source.feeds if f.live is not None],
                                 args.wait - (time.monotonic() - started))
        now = source.clock.now()
        entries: list[Answer] = []
        for spec, feed, (member, view) in zip(specs, source.feeds, source.state.evaluate_each(now)):
            node = hit[1] if hit is not None and hit[0].name == feed.name else None
            entries.append((spec.name, spec.context, member.state, view,
                            _cluster_error(feed, listed[feed.name], args, node)))
    finally:
        source.stop()
    return _answer(args, entries, hit)


def answer_recorded(args: argparse.Namespace, state: MultiFleet, now: float) -> int:
    """``status --replay`` of a recording of several clusters, at ``now``: as over live clusters."""
    hit = None
    if args.node is not None:
        hit = state.split(args.node)
        if hit is None:
            return fail(f"--node {args.node!r}: with several clusters name the node as CLUSTER/NAME "
                        f"(clusters: {', '.join(state.cluster_names)})")
    entries: list[Answer] = []
    for member, view in state.evaluate_each(now):
        error = None
        if not view.nodes:
            level, words = cluster_health(view, None, now)
            error = words if level == HEALTH_BAD else f"no nodes recorded at {format_time(now)}"
        entries.append((member.name, member.context, member.state, view, error))
    return _answer(args, entries, hit)


def _answer(args: argparse.Namespace, entries: list[Answer], hit: Any) -> int:
    """Each cluster's answer (or error), as JSON or tables; the exit code over all of them."""
    if hit is not None and not hit[0].state.has_node(hit[1]) and not any(
            e for name, _, _, _, e in entries if name == hit[0].name):
        return fail(f"no node named {hit[1]!r} in cluster {hit[0].name!r}")
    failed = False
    not_ready = False
    out: list[dict[str, Any]] = []
    blocks: list[str] = []
    for name, context, state, view, error in entries:
        head: dict[str, Any] = {"context": context or name}
        if name != head["context"]:
            head["name"] = name
        title = f"== cluster {safe(name, 80)}" + (
            f" (context {safe(context, 80)})" if context and context != name else "") + " =="
        if error is not None:
            failed = True
            print(f"nodewatch: cluster {safe(name, 80)}: {error}", file=sys.stderr)
            out.append({**head, "error": error})
            blocks.append(f"{title}\nerror: {safe(error, 500)}")
            continue
        node = hit[1] if hit is not None and hit[0].name == name else None
        if hit is not None and node is None:
            nodes = []
        else:
            nodes = [v for v in view.nodes if node is None or v.name == node]
        not_ready = not_ready or any(v.state is not NodeState.READY for v in nodes)
        if not view.nodes:
            print(f"nodewatch: cluster {safe(name, 80)}: the cluster has no nodes (its node list is empty)",
                  file=sys.stderr)
        if hit is not None and node is None:
            out.append({**head, "nodes": []})
            continue
        out.append({**head, **fleet_json(state, view, node)})
        blocks.append(f"{title}\n{fleet_table(state, view, node)}")
    if args.format == "json":
        sys.stdout.buffer.write(terminal_safe_json(orjson.dumps({"clusters": out}, option=orjson.OPT_INDENT_2)))
        sys.stdout.buffer.write(b"\n")
    else:
        print("\n\n".join(blocks))
    return 2 if failed else 1 if not_ready else 0


def _cluster_error(feed: Any, listed: bool, args: argparse.Namespace, node: str | None) -> str | None:
    """Why this cluster's answer cannot be given, or None (a partial answer says what it lacks, as
    one-cluster ``status`` does)."""
    error = feed.error()
    if error is not None:
        return " ".join(error.split())[:500]
    live = feed.live
    if live is None:
        return f"no connection within {args.wait:g}s"
    if listed:
        return None
    unlisted = live.required_not_listed(args.wait)
    if unlisted is not None:
        return unlisted
    missing = live.not_listed(node)
    message = f"not listed within {args.wait:g}s, so missing from this answer: {', '.join(missing)}"
    live.state.problem(live.clock.now(), "status", message)
    if args.format == "json":
        print(f"nodewatch: warning: cluster {safe(feed.name, 80)}: {message}", file=sys.stderr)
    return None
