"""``nodewatch status``: the fleet once, as a table or the JSON contract, then exit.

Exit codes: 0 every node Ready, 1 some node not Ready, 2 an error (one line on stderr).
Several clusters at once (several ``--context``, ``--all-contexts``, ``--fleet``): see
``status_multi.py``.

An answer without nodes never looks like good news: a recording with no usable events, an ``--at``
outside the recording's span, a moment of a recording (or a demo) without nodes, are errors
(exit 2) that say why. The one exception is a live cluster whose node list, once listed,
really is empty: that is the truth, not a failure to see, so the table (or stderr, with
``--format json``) says "the cluster has no nodes" and the exit code is 0 (no node is not Ready).
A permanent error of the live connection (credentials rejected, no permission to list nodes or
leases, TLS verification failed, an address that does not resolve or refuses) ends the wait at
once with exit 2; only a server that is slow, or down for a while, is waited for (``--wait``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..core.evidence import RENEWAL_MARGIN  # the dashboard's evidence window waits the same
from ..core.multi import MultiFleet
from ..core.rules import NodeState
from ..core.text import safe
from ..core.timeutil import format_time, parse_when
from .common import (
    add_live_arguments,
    add_multi_arguments,
    add_settings_arguments,
    cluster_specs_from_args,
    fail,
    live_source_from_args,
    naming,
    recording_path,
    scenario_name,
    settings_from_args,
    sim_nodes,
)
from .status_output import OutputError, add_output_arguments, nodes_shown, output_of, watch, write_answer
from .status_waits import await_tainted_nodes_pods

LIST_WAIT = 30.0
"""Seconds ``status`` waits for the initial lists when ``--wait`` is not given."""
MAX_DEMO_SECONDS = 86400.0
"""``status --demo --at`` simulates up to a day (every second of it is computed)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_arguments(parser)
    parser.add_argument("--node", metavar="NAME", help="one node, with its pods and events")
    src = parser.add_argument_group("source (default: the live cluster)")
    src.add_argument("--demo", action="store_true", help="the simulated fleet, evaluated headless")
    src.add_argument("--replay", metavar="FILE", type=recording_path,
                     help="a recording, a hub's directory (or its recordings), or a kubectl "
                     "watch log ('-' for stdin)")
    src.add_argument("--at", metavar="WHEN",
                     help="with --replay or --demo: RFC 3339, +OFFSET from the start (+90, +15m, +1h30m), or HH:MM[:SS] (UTC) "
                     "(default: the end / +0)")
    src.add_argument("--nodes", type=sim_nodes, default=30, help="with --demo: number of nodes")
    src.add_argument("--scenario", type=scenario_name, default="incident", help="with --demo: scenario")
    src.add_argument("--seed", type=int, default=1, help="with --demo: seed")
    src.add_argument("--wait", type=float, default=None, metavar="S",
                     help="live: how long to wait for the initial lists (default 30); given, also how long "
                          "to watch for renewals of leases whose age rests on the node's own clock")
    add_live_arguments(parser)
    add_multi_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    output = output_of(args)
    args.format = "json" if output == "json" else "table"  # what the several-cluster answers read
    if args.watch and args.replay:
        return fail("-w watches a live cluster or --demo; a recording is replayed with `nodewatch replay`")
    args.patient = args.wait is not None  # --wait given: the user asks for patience
    if args.wait is None:
        args.wait = LIST_WAIT
    settings = settings_from_args(args)
    specs = None if (args.demo or args.replay) else cluster_specs_from_args(args)
    if specs is not None:
        if output not in ("table", "json") or args.watch or args.selector or args.sort_by or args.no_headers:
            return fail("several clusters: -o table or json, without -w, -l, --sort-by or --no-headers")
        from .status_multi import run_multi

        return run_multi(args, settings, specs)
    try:
        state, now = _evaluate_source(args, settings)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure is one clear line and exit 2
        return fail(_one_line(exc))
    if isinstance(state, MultiFleet):  # a recording of several clusters: answered per cluster
        from .status_multi import answer_recorded

        return answer_recorded(args, state, now)
    view = state.evaluate(now)
    if not view.nodes and not (args.demo or args.replay):
        print("nodewatch: the cluster has no nodes (its node list is empty)", file=sys.stderr)
    elif not view.nodes:
        what = f"the simulated fleet (--nodes {args.nodes})" if args.demo else f"{args.replay} at {format_time(now)}"
        return fail(f"no nodes in {what}: nothing to report")
    if args.node is not None and not state.has_node(args.node):
        return fail(f"no node named {args.node!r}")
    clock_note = node_clock_note(state, now, args.node) if not (args.demo or args.replay) else None
    try:
        nodes = nodes_shown(state, view, args)
    except OutputError as exc:
        _stop_kept(args)
        return fail(str(exc))
    write_answer(state, view, args, nodes)
    if clock_note:
        if output in ("table", "wide") and not args.no_headers:
            sys.stdout.write(f"note: {clock_note}\n")
        else:  # the answer stays what a script parses
            print(f"nodewatch: note: {clock_note}", file=sys.stderr)
    if args.watch:
        try:
            return watch(_watch_evaluator(args, state), args, view, state)
        finally:
            _stop_kept(args)
    return 0 if all(v.state is NodeState.READY for v in nodes) else 1


def _watch_evaluator(args: argparse.Namespace, state):
    """What ``-w`` judges every second: the live source's state at its clock, or the demo moved on
    in real time from ``--at``."""
    live = getattr(args, "_kept_source", None)
    if live is not None:
        return lambda: (live.state, live.state.evaluate(live.clock.now()))
    demo = args._demo
    started, at = time.monotonic(), demo.clock.now()

    def step():
        t = at + (time.monotonic() - started)
        demo.advance_to(t)
        return demo.state, demo.state.evaluate(t)

    return step


def _stop_kept(args: argparse.Namespace) -> None:
    live = getattr(args, "_kept_source", None)
    if live is not None:
        args._kept_source = None
        live.stop()


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:500]


NOTE_NAMES = 10
"""Nodes named in the note on ages resting on the node's clock (then "and N more")."""


def node_clock_note(state, now: float, node: str | None = None) -> str | None:
    """One line naming the Ready nodes whose lease looks late only by renewTime, the node's own
    clock (the server gave no write time that dates the renewal: before v1.25, or no managedFields),
    or None. Why say it: such an age is the truth only if the node's clock agrees with ours; a
    clock behind makes a live node look late, and ``status`` waits to see it renew only where the
    server vouches for the node (``vouched_renewals``) or when asked (``--wait``)."""
    names = sorted(state.ages_in_doubt(now, None if node is None else [node]))
    if not names:
        return None
    shown = ", ".join(safe(n, 80) for n in names[:NOTE_NAMES])
    more = f" and {len(names) - NOTE_NAMES} more" if len(names) > NOTE_NAMES else ""
    return (f"lease age on the node's own clock (renewTime; the API server did not date the renewal) for "
            f"{shown}{more}: a clock behind would make a live node look late; --wait S watches them renew")


VOUCH_MARGIN = 5.0
"""Beyond grace + one monitor period: the controller's pass writing Ready=Unknown, and the list."""


def vouched_renewals(state, now: float, doubtful: dict[str, float]) -> dict[str, float]:
    """Of the leases in doubt (``ages_in_doubt``: name -> renewal interval), those the API server
    vouches for: their node is still Ready although, by renewTime, the lease is older than the
    node lifecycle controller lets one be (grace + one monitor period, + ``VOUCH_MARGIN``). The
    controller times renewals on its own clock by seeing renewTime change; had it seen none for
    that long, it would have written Ready=Unknown. So it saw one: the node's clock is behind, the
    kubelet renews, and a renewal comes within one interval. (Unless the controller itself is
    down: then the wait is bounded by one interval, and the answer says the age is the node's.)

    A lease late by less than that (the minute an incident starts: the kubelet stopped 20 s ago,
    the controller has not flipped it yet) is what a stopped kubelet and a clock a little behind
    both look like, and a stopped kubelet never renews: not vouched for, not waited for."""
    settings = state.settings
    limit = settings.grace + settings.monitor_period_seconds + VOUCH_MARGIN
    out: dict[str, float] = {}
    for name, interval in doubtful.items():
        view = state.node_view(name, now)
        seen = view.lease_observed_at if view is not None else None
        if seen is not None and now - seen > limit:
            out[name] = interval
    return out


def _await_doubtful_renewals(live, budget: float, patient: bool) -> None:
    """A listed lease says when it was renewed only by renewTime, on the node's clock (unless the
    server's write time dates it: ``managedFields``, v1.25 on): a node whose clock is behind would
    be called late while the controller keeps it Ready. Wait, at most one renewal interval within
    ``--wait``, to see such a lease renew on the watch: for the leases the API server vouches for
    (``vouched_renewals``) always, for every lease in doubt only when asked for patience (``--wait``
    given). What is still in doubt then is answered as the list says, and named
    (``node_clock_note``). A network wait, not a rule's: real seconds.

    Why not wait for every doubtful lease: a stopped kubelet never renews, so the wait was a whole
    interval exactly when an incident starts (12 s against 0.4 s healthy, issue 22)."""
    doubtful = live.state.ages_in_doubt(live.clock.now())
    if not patient:
        doubtful = vouched_renewals(live.state, live.clock.now(), doubtful)
    if not doubtful:
        return
    deadline = time.monotonic() + min(budget, max(doubtful.values()) + RENEWAL_MARGIN)
    while time.monotonic() < deadline and doubtful:
        time.sleep(0.05)
        doubtful = live.state.ages_in_doubt(live.clock.now(), list(doubtful))


def _evaluate_source(args: argparse.Namespace, settings):
    if args.demo and args.replay:
        raise ValueError("--demo and --replay are two different sources; choose one")
    if args.demo:
        from ..sources.demo import DemoSource

        demo = DemoSource(settings=settings, nodes=args.nodes, scenario=args.scenario, seed=args.seed)
        start = demo.fleet.now  # the virtual start, not the running clock: --at +120 is the same instant on every run
        t = parse_when(args.at, start) if args.at else start
        if not start <= t <= start + MAX_DEMO_SECONDS:
            raise ValueError(f"--at {args.at}: the demo is simulated from {format_time(start)} for at most "
                             f"{MAX_DEMO_SECONDS:.0f}s (+0 to +{MAX_DEMO_SECONDS:.0f})")
        demo.advance_to(t)
        args._demo = demo  # -w moves it on
        return demo.state, t
    if args.replay:
        from ..sources.recording import RecordingError
        from ..sources.replay import state_at

        path, asked = args.replay, args.at
        # one pass, no index; what a later event supersedes is left out (the answer shows neither
        # renewal counts, heartbeat histories nor timelines), and the Pods unless --node shows them
        # (counted all the same for the default toleration they carry: core/pod_tolerations)
        from .read_progress import ReadProgress

        shown = ReadProgress(str(args.replay))
        try:
            if os.path.isdir(path) and args.at:  # a hub's flight recorder: read up to --at only
                from ..sources.segments import window

                path, _, args.at = window(path, None, args.at, "--at")
            state, seen, problems = state_at(path, args.at, settings, compact=True, pods=args.node is not None,
                                             progress=shown, opening=shown.opening)
        except (RecordingError, OSError) as exc:  # the file's trouble, named once (not --at's)
            raise ValueError(naming(str(args.replay), exc)) from None
        finally:
            shown.done()
        for p in problems[:20]:
            print(f"nodewatch: {naming(str(args.replay), p)}", file=sys.stderr)
        if seen.events == 0:
            raise ValueError(f"{args.replay}: no usable events in the recording, nothing to report")
        from ..sources.replay.clusters import not_recorded
        from ..sources.segments import recorded_until

        end = seen.last
        if seen.read_to_end and seen.at > end and os.path.isdir(args.replay):
            # a window's read stops at --at: the directory may hold later lines (read only now)
            end = max(end, recorded_until(args.replay) or end)
        gap = not_recorded(args.replay, seen.at, seen.last, lambda: state)  # (also where the recording goes on)
        if gap:  # judged at that instant, every node would look as old as the gap is long
            raise ValueError(f"--at {asked}: {gap}")
        if seen.at < seen.start or (seen.read_to_end and seen.at > end):
            if seen.at < seen.start:  # (read only a little of it: its end is not known here)
                raise ValueError(f"--at {asked}: {format_time(seen.at)} is before the recording, which starts at "
                                 f"{format_time(seen.start)}")
            raise ValueError(f"--at {asked}: {format_time(seen.at)} is after the recording "
                             f"({format_time(seen.start)} to {format_time(end)})")
        return state, seen.at
    if args.at:
        raise ValueError("--at needs --replay FILE or --demo")
    live = live_source_from_args(args, settings)
    live.state.judge_lists_at_once()  # one answer now, its doubts named (node_clock_note), not waited for
    live.start()
    if args.node:
        live.focus_node(args.node)  # its pods and events are listed alongside the rest
    try:
        started = time.monotonic()
        synced = live.wait_synced(args.wait, args.node)
        fatal = live.fatal()  # also once "synced": a forbidden stream is not waited for
        if fatal is not None:
            raise ConnectionError(fatal)
        if not synced:
            unlisted = live.required_not_listed(args.wait)
            if unlisted is not None:
                raise TimeoutError(unlisted)
            missing = live.not_listed(args.node)
            # an answer without them would look like "no pods, no events": say what is missing
            message = f"not listed within {args.wait:g}s, so missing from this answer: {', '.join(missing)}"
            live.state.problem(live.clock.now(), "status", message)  # the table lists problems
            if args.format == "json":
                print(f"nodewatch: warning: {message}", file=sys.stderr)
        else:
            _await_doubtful_renewals(live, args.wait - (time.monotonic() - started), getattr(args, "patient", True))
            await_tainted_nodes_pods([live], args.wait - (time.monotonic() - started))
        answer = live.state, live.clock.now()
        if getattr(args, "watch", False):
            args._kept_source = live  # -w goes on watching it (``_stop_kept`` stops it)
        return answer
    finally:
        if getattr(args, "_kept_source", None) is not live:
            live.stop()
