"""``nodewatch status`` over several clusters: each answered as one-cluster ``status`` answers it.

JSON: ``{"clusters": [{"context": ..., <what one-cluster status has>}, {"context": ..., "error": ...}]}``
(``name`` too when a fleet file named the cluster otherwise). The table: one block per cluster.
Exit codes: 2 when a cluster cannot be read (its error also goes to stderr, one line per cluster),
otherwise 1 when any node anywhere is not Ready, otherwise 0. The clusters are started and waited
for together: one that cannot answer costs at most ``--wait`` seconds, never one wait per cluster.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from ..core.report import fleet_json, fleet_table, terminal_safe_json
from ..core.rules import NodeState
from ..core.settings import Settings
from ..core.text import safe
from ..sources.multi_config import ClusterSpec
from .common import fail, multi_source


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
    source.start()
    if args.node:
        source.focus_node(args.node)
    try:
        listed = source.wait_settled(args.wait, hit[1] if hit else None)
        now = source.clock.now()
        entries: list[tuple[ClusterSpec, Any, Any, str | None]] = []
        for spec, feed, (member, view) in zip(specs, source.feeds, source.state.evaluate_each(now)):
            node = hit[1] if hit is not None and hit[0].name == feed.name else None
            entries.append((spec, member.state, view, _cluster_error(feed, listed[feed.name], args, node)))
    finally:
        source.stop()
    if hit is not None and not hit[0].state.has_node(hit[1]) and not any(
            e for s, _, _, e in entries if s.name == hit[0].name):
        return fail(f"no node named {hit[1]!r} in cluster {hit[0].name!r}")
    failed = False
    not_ready = False
    out: list[dict[str, Any]] = []
    blocks: list[str] = []
    for spec, state, view, error in entries:
        head: dict[str, Any] = {"context": spec.context or spec.name}
        if spec.name != head["context"]:
            head["name"] = spec.name
        title = f"== cluster {safe(spec.name, 80)}" + (
            f" (context {safe(spec.context, 80)})" if spec.context and spec.context != spec.name else "") + " =="
        if error is not None:
            failed = True
            print(f"nodewatch: cluster {safe(spec.name, 80)}: {error}", file=sys.stderr)
            out.append({**head, "error": error})
            blocks.append(f"{title}\nerror: {safe(error, 500)}")
            continue
        node = hit[1] if hit is not None and hit[0].name == spec.name else None
        if hit is not None and node is None:
            nodes = []
        else:
            nodes = [v for v in view.nodes if node is None or v.name == node]
        not_ready = not_ready or any(v.state is not NodeState.READY for v in nodes)
        if not view.nodes:
            print(f"nodewatch: cluster {safe(spec.name, 80)}: the cluster has no nodes (its node list is empty)",
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
    missing = live.not_listed(node)
    if "nodes" in missing or "leases" in missing:
        return f"the API server did not list nodes and leases within {args.wait:g}s"
    message = f"not listed within {args.wait:g}s, so missing from this answer: {', '.join(missing)}"
    live.state.problem(live.clock.now(), "status", message)
    if args.format == "json":
        print(f"nodewatch: warning: cluster {safe(feed.name, 80)}: {message}", file=sys.stderr)
    return None
