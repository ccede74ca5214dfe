"""What the node lifecycle controller does next with a node that has stopped being Ready but has
no NoExecute taint yet: the drill-down's countdown between the Ready flip and the taint.

Without it that stretch reads "nothing due", yet it is where the controller's zone rules decide
whether the node's pods are evicted at all. The taint is queued by the monitor pass that flipped
the node Unknown from 1.34, by the pass after it up to 1.33
(``settings.taint_queued_in_the_flip_pass``), and by the first pass that sees a Ready=False the
kubelet posted in every release; then it leaves its zone's queue at the zone's taint rate (a token
bucket of one): the normal rate in a Normal zone or a zone wholly down while another is up, the
secondary rate in a large zone in PartialDisruption, never in a small one, and nowhere while every
zone is down. A pass that flips many nodes at once takes seconds to write them, so either pass is
the earliest. See docs/kubernetes-rules.md, "Taints and eviction" and "Zones".

When the taint comes is worked out from the zone's queue (``taint_window``): every node of the zone
awaiting its taint, in the order of their flips, one token each at the zone's rate after the
zone's last taint. That is the earliest: nodes that flipped in one pass leave the queue in an
order only the controller knows, and from v1.19 to v1.20.4 the controller queues a waiting node
again at every pass without taking out its first entry (``markNodeForTainting``: ``SetRemove``,
then ``Add``; fixed by kubernetes PR #96876 in 1.21 and 1.20.5,
``settings.taint_queue_keeps_duplicates``), so the extra entries re-taint nodes already tainted
and take tokens from the nodes behind them; the outlook says so only for those versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .causes import CauseKind
from .format import ago, clock_time
from .rules import NodeState, ZoneState, taint_queue_delay
from .settings import Settings, taint_queue_keeps_duplicates, taint_queued_in_the_flip_pass
from .text import safe
from .views import FleetView, NodeView, ZoneView, zone_key

AWAITING_TAINT = (NodeState.UNKNOWN, NodeState.NOT_READY)
"""States of a node the controller has judged not Ready and not yet NoExecute-tainted (a tainted
node is Evicting or Evicted)."""


def zone_of(view: FleetView, v: NodeView) -> ZoneView | None:
    """The node's zone as the fleet view judges it (by cluster when there are several)."""
    key = zone_key(v)
    return next((z for z in view.zones if z.name == key), None)


def settings_of(view: FleetView, v: NodeView) -> Settings:
    """The settings the node's cluster is judged with."""
    if v.cluster:
        for c in view.clusters:
            if c.name == v.cluster:
                return c.settings
    return view.settings


@dataclass(frozen=True, slots=True)
class TaintWindow:
    """When a node's NoExecute taint comes, by its zone's queue."""

    earliest: float
    """Not before: the queue as if each waiting node were in it once."""
    latest: float
    """When the last of the node's pass would go, by the same count (the same as ``earliest``
    unless other nodes flipped in that pass: one of them goes first)."""
    first: int
    last: int
    """The node's place in the queue, 1-based: ``first`` to ``last`` among its pass's nodes."""
    queued: int
    """Nodes of the zone awaiting their taint."""


def _awaits_taint(v: NodeView) -> bool:
    return (v.state in AWAITING_TAINT and v.ready not in (None, "True")
            and not any(c.kind is CauseKind.NEVER_POSTED for c in v.causes))


def taint_window(view: FleetView, v: NodeView, zone: ZoneView, settings: Settings) -> TaintWindow | None:
    """The zone's queue, replayed: each awaiting node is queued after its flip (``state_since``,
    the Ready transition) by ``rules.taint_queue_delay``: at once for a Ready=False the kubelet
    posted (the first pass that sees it queues it), and for the Unknown the controller wrote itself
    at once from 1.34 (the pass that writes it queues it) or a monitor period later up to 1.33; each takes one token of the zone's bucket (one every 1/rate seconds,
    the first 1/rate after the zone's last taint). None when the zone's rate is 0 or the node's
    flip time is unknown."""
    if zone.taint_rate <= 0 or v.state_since is None or not _awaits_taint(v):
        return None
    step = 1.0 / zone.taint_rate
    monitor = settings.monitor_period_seconds
    in_the_flip_pass = taint_queued_in_the_flip_pass(settings.server_version)
    last_taint: float | None = None
    awaiting: list[tuple[float, float]] = []  # (flip, queued at the earliest)
    zone_name, cluster = v.zone, v.cluster  # the zone is zone_key(v): compare its parts, cheaper at 65k
    for u in view.nodes:
        if u.zone != zone_name or u.cluster != cluster:
            continue
        if u.state in (NodeState.EVICTING, NodeState.EVICTED):
            if u.state_since is not None and (last_taint is None or u.state_since > last_taint):
                last_taint = u.state_since  # its NoExecute taint's timeAdded
        elif u.state_since is not None and _awaits_taint(u):
            awaiting.append((u.state_since + taint_queue_delay(u.ready, monitor, in_the_flip_pass), u.state_since))
    awaiting.sort()
    times: list[float] = []
    prev = last_taint
    for queued, _ in awaiting:
        t = queued if prev is None else max(queued, prev + step)
        times.append(t)
        prev = t
    peers = [i for i, (_, flipped) in enumerate(awaiting) if abs(flipped - v.state_since) < monitor]
    if not peers:
        return None
    return TaintWindow(times[peers[0]], times[peers[-1]], peers[0] + 1, peers[-1] + 1, len(awaiting))


def noexecute_outlook(v: NodeView, zone: ZoneView | None, settings: Settings, window: TaintWindow | None = None,
                      now: float | None = None) -> str | None:
    """When the node's NoExecute taint comes (by ``window`` when given), and why not if it does
    not; None when the question does not arise (Ready, already tainted, status never posted, zone
    not known)."""
    if zone is None or not _awaits_taint(v):
        return None
    name = safe(zone.name, 80) or "(no zone)"  # from the nodes' labels: untrusted
    rate = zone.taint_rate
    tol = settings.toleration
    if rate <= 0:
        if zone.state is ZoneState.FULL:
            return ("no NoExecute taint, no eviction: every zone is down, so the controller blames its own "
                    "connectivity and stops")
        if zone.state is ZoneState.PARTIAL:
            text = (f"no NoExecute taint while zone {name} is in PartialDisruption: a zone of {zone.nodes} nodes "
                    f"(at most {settings.large_cluster_threshold}) is not tainted at all")
            if (now is not None and v.state_since is not None and now - v.state_since < settings.monitor_period_seconds
                    and taint_queued_in_the_flip_pass(settings.server_version)):
                # 1.34+: the pass that flipped it queued it before deciding the zone at its end
                text += ("; the monitor pass that flipped it may still taint one of the zone's nodes "
                         "before it decides the zone")
            return text
        return "no NoExecute taint: the eviction rate is 0"
    partial = f"zone {name} is in PartialDisruption: " if zone.state is ZoneState.PARTIAL else ""
    if window is None:
        if v.ready == "False":
            which = "the first monitor pass that sees the kubelet's Ready=False"
        elif taint_queued_in_the_flip_pass(settings.server_version):
            which = "the monitor pass that wrote Unknown"
        else:
            which = "the controller's next monitor pass"
        return (f"{partial}NoExecute taint at {which} "
                f"(every {settings.monitor_period_seconds:g}s) at the earliest, then {rate:g} nodes/s in the zone; "
                f"then pods evicted as their tolerations run out ({tol:g}s by default)")
    w = window
    place = (f"{w.first} of {w.queued}" if w.first == w.last
             else f"{w.first}-{w.last} of {w.queued}, in an order the controller picks")
    when = clock_time(w.earliest)
    if now is not None:
        when += " (due)" if w.earliest <= now else f" ({ago(w.earliest, now)})"
    if taint_queue_keeps_duplicates(settings.server_version):
        later = "later if many nodes flip at once, or behind nodes the controller queues again while they wait"
    elif taint_queued_in_the_flip_pass(settings.server_version) and v.ready != "False":
        # 1.34+: queued by the flip's own pass, the tainting loop may read the node from the
        # controller's cache before the flip is in it ("ready now"): the token is spent, the next
        # pass queues it again (seen on v1.37.2: 11 s after the flip instead of 2-3 s)
        later = "later if many nodes flip at once, or a token later if the controller's cache lags its own flip"
    else:
        later = "later if many nodes flip at once"
    return (f"{partial}NoExecute taint not before {when}: {place} in the zone's queue at {rate:g} nodes/s "
            f"({later}); "
            f"then pods evicted as their tolerations run out, not before {clock_time(w.earliest + tol)} "
            f"with the default {tol:g}s")


def window_in(view: FleetView, v: NodeView) -> TaintWindow | None:
    """``taint_window`` for a node of ``view``: its own zone, its own cluster's settings."""
    zone = zone_of(view, v)
    return None if zone is None else taint_window(view, v, zone, settings_of(view, v))


def outlook_in(view: FleetView, v: NodeView) -> str | None:
    """``noexecute_outlook`` for a node of ``view``: its own zone, its own cluster's settings, its
    place in the zone's queue, at the view's time."""
    return noexecute_outlook(v, zone_of(view, v), settings_of(view, v), window_in(view, v), view.at)
