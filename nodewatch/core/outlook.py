"""What the node lifecycle controller does next with a node that has stopped being Ready but has
no NoExecute taint yet: the drill-down's countdown between the Ready flip and the taint.

Without it that stretch reads "nothing due", yet it is where the controller's zone rules decide
whether the node's pods are evicted at all. The taint is queued by the monitor pass after the
one that saw the node not Ready, then leaves its zone's queue at the zone's taint rate (a token
bucket of one): the normal rate in a Normal zone or a zone wholly down while another is up, the
secondary rate in a large zone in PartialDisruption, never in a small one, and nowhere while every
zone is down. A pass that flips many nodes at once takes seconds to write them, so "next pass" is
the earliest. See docs/kubernetes-rules.md, "Taints and eviction" and "Zones".
"""

from __future__ import annotations

from .causes import CauseKind
from .rules import NodeState, ZoneState
from .settings import Settings
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


def noexecute_outlook(v: NodeView, zone: ZoneView | None, settings: Settings) -> str | None:
    """When the node's NoExecute taint comes, and why not if it does not; None when the question
    does not arise (Ready, already tainted, status never posted, zone not known)."""
    if v.state not in AWAITING_TAINT or v.ready in (None, "True") or zone is None:
        return None
    if any(c.kind is CauseKind.NEVER_POSTED for c in v.causes):
        return None  # no Ready condition yet: the controller's startup grace comes first (the cause says so)
    name = safe(zone.name, 80) or "(no zone)"  # from the nodes' labels: untrusted
    rate = zone.taint_rate
    then = f"then pods evicted as their tolerations run out ({settings.toleration_seconds:g}s by default)"
    if rate <= 0:
        if zone.state is ZoneState.FULL:
            return ("no NoExecute taint, no eviction: every zone is down, so the controller blames its own "
                    "connectivity and stops")
        if zone.state is ZoneState.PARTIAL:
            return (f"no NoExecute taint while zone {name} is in PartialDisruption: a zone of {zone.nodes} nodes "
                    f"(at most {settings.large_cluster_threshold}) is not tainted at all")
        return "no NoExecute taint: the eviction rate is 0"
    if zone.state is ZoneState.PARTIAL:
        return (f"NoExecute taint queued: zone {name} is in PartialDisruption and tainted at {rate:g} nodes/s "
                f"(one every {1 / rate:.0f}s), {then}")
    return (f"NoExecute taint at the controller's next monitor pass (every {settings.monitor_period_seconds:g}s; "
            f"later if many nodes flip at once or others in the zone are queued at {rate:g} nodes/s), {then}")


def outlook_in(view: FleetView, v: NodeView) -> str | None:
    """``noexecute_outlook`` for a node of ``view``: its own zone, its own cluster's settings."""
    return noexecute_outlook(v, zone_of(view, v), settings_of(view, v))
