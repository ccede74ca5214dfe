"""A Node record back into the Node object it was read from: the keyframe of a recording segment.

The state keeps slim records (``core/objects.py``), not the objects received. A segment's keyframe
needs the Nodes as objects, and keeping 65,000 Node objects of ~10 KB each to write them once per
segment would cost more memory than the whole hub. So the record is turned back into a Node that
``node_from_dict`` reads into an equal record: every field nodewatch keeps, nothing else (the
tests check the round trip on the simulator's Nodes).
"""

from __future__ import annotations

from typing import Any

from ..core.objects import NodeRecord
from ..core.timeutil import format_time


def node_to_dict(rec: NodeRecord) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": rec.name, "labels": dict(rec.labels)}
    if rec.created is not None:
        meta["creationTimestamp"] = format_time(rec.created)
    spec: dict[str, Any] = {}
    if rec.unschedulable:
        spec["unschedulable"] = True
    if rec.taints:
        spec["taints"] = [_taint(t) for t in rec.taints]
    status: dict[str, Any] = {
        "conditions": [_condition(c) for c in rec.conditions.values()],
        "nodeInfo": {"kubeletVersion": rec.kubelet_version, "containerRuntimeVersion": rec.runtime_version,
                     "kernelVersion": rec.kernel_version, "osImage": rec.os_image},
        "addresses": [{"type": a, "address": b} for a, b in rec.addresses],
        "capacity": rec.capacity,
        "allocatable": rec.allocatable,
    }
    if rec.kubelet_port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": rec.kubelet_port}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def _taint(t: Any) -> dict[str, Any]:
    d = {"key": t.key, "effect": t.effect}
    if t.value:
        d["value"] = t.value
    if t.time_added is not None:
        d["timeAdded"] = _time(t.time_added)
    return d


def _condition(c: Any) -> dict[str, Any]:
    d = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
    if c.last_heartbeat is not None:
        d["lastHeartbeatTime"] = _time(c.last_heartbeat)
    if c.last_transition is not None:
        d["lastTransitionTime"] = _time(c.last_transition)
    return d


def _time(t: float) -> str | float:
    """RFC 3339 when whole seconds (as Kubernetes writes these), else the exact number (which
    ``parse_time`` also reads), so the round trip is exact."""
    return format_time(t) if t == int(t) else t
