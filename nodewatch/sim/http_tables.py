"""Server-side ``Table`` rendering (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``).

kubectl asks for Tables so that ``kubectl get nodes`` shows the columns a real cluster prints
(STATUS, ROLES, AGE, VERSION...). The columns and cell rules follow the real API server's printers
(pkg/printers/internalversion/printers.go); ages are relative to the simulation's virtual now.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import orjson

from ..core.timeutil import parse_time
from .store import ResourceInfo

Column = tuple[str, str, int]  # name, type, priority (1 = -o wide only)


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _age(value: Any, now: float) -> str:
    t = parse_time(value)
    return "<unknown>" if t is None else human_duration(now - t)


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _node_cells(obj: dict, now: float) -> list[Any]:
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    states = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            states.append("Ready" if cond.get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = _meta(obj).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addrs = status.get("addresses") or []

    def addr(kind: str) -> str:
        return next((a.get("address", "") for a in addrs if a.get("type") == kind), "<none>")

    return [
        _meta(obj).get("name", ""),
        ",".join(states),
        ",".join(r for r in roles if r) or "<none>",
        _age(_meta(obj).get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addr("InternalIP"),
        addr("ExternalIP"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _pod_cells(obj: dict, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers = status.get("containerStatuses") or []
    total = len(spec.get("containers") or []) or len(containers)
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in containers:
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
    if _meta(obj).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return [
        _meta(obj).get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts,
        _age(_meta(obj).get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _lease_cells(obj: dict, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    return [_meta(obj).get("name", ""), spec.get("holderIdentity") or "<none>", _age(_meta(obj).get("creationTimestamp"), now)]


def _event_cells(obj: dict, now: float) -> list[Any]:
    inv = obj.get("involvedObject") or {}
    source = obj.get("source") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or (obj.get("series") or {}).get("lastObservedTime")
    first = obj.get("firstTimestamp") or obj.get("eventTime")
    src = source.get("component") or obj.get("reportingComponent") or ""
    if source.get("host"):
        src = f"{src}, {source['host']}"
    return [
        _age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
        str(obj.get("message", "")).strip(),
        inv.get("fieldPath", ""),
        src,
        _age(first, now),
        int(obj.get("count") or 1),
        _meta(obj).get("name", ""),
    ]


def _csr_cells(obj: dict, now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conds = [c.get("type", "") for c in status.get("conditions") or [] if c.get("status", "True") == "True"]
    if not conds:
        conds = ["Pending"]
    if status.get("certificate"):
        conds.append("Issued")
    dur = spec.get("expirationSeconds")
    return [
        _meta(obj).get("name", ""),
        _age(_meta(obj).get("creationTimestamp"), now),
        spec.get("signerName", ""),
        spec.get("username", ""),
        human_duration(dur) if isinstance(dur, (int, float)) else "<none>",
        ",".join(conds),
    ]


def _namespace_cells(obj: dict, now: float) -> list[Any]:
    return [_meta(obj).get("name", ""), (obj.get("status") or {}).get("phase", ""), _age(_meta(obj).get("creationTimestamp"), now)]


TABLE_RESOURCES: dict[str, tuple[list[Column], Callable[[dict, float], list[Any]]]] = {
    "nodes": (
        [("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
         ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
         ("OS-Image", "string", 1), ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)],
        _node_cells,
    ),
    "pods": (
        [("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
         ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1), ("Nominated Node", "string", 1),
         ("Readiness Gates", "string", 1)],
        _pod_cells,
    ),
    "leases": ([("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)], _lease_cells),
    "events": (
        [("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0), ("Object", "string", 0),
         ("Message", "string", 0), ("Subobject", "string", 1), ("Source", "string", 1), ("First Seen", "string", 1),
         ("Count", "string", 1), ("Name", "string", 1)],
        _event_cells,
    ),
    "certificatesigningrequests": (
        [("Name", "string", 0), ("Age", "string", 0), ("SignerName", "string", 0), ("Requestor", "string", 0),
         ("RequestedDuration", "string", 0), ("Condition", "string", 0)],
        _csr_cells,
    ),
    "namespaces": ([("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)], _namespace_cells),
}


def table_bytes(info: ResourceInfo, objs: list[dict], rv: str, list_meta: dict | None, include_object: str,
                now: float | None = None) -> bytes:
    """A meta.k8s.io/v1 Table for ``objs``; rows carry PartialObjectMetadata (or the object with
    ``includeObject=Object``, or nothing with ``None``)."""
    columns, cells = TABLE_RESOURCES[info.name]
    now = time.time() if now is None else now
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}
        rows.append(row)
    meta = dict(list_meta or {})
    meta["resourceVersion"] = rv
    return orjson.dumps(
        {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": [
                {"name": n, "type": t, "format": "name" if n == "Name" else "", "description": "", "priority": p}
                for n, t, p in columns
            ],
            "rows": rows,
        }
    )
