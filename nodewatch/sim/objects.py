"""The one builder of Kubernetes objects (plain dicts, as the API server returns them).

The simulator renders its records with these (``shapes``, ``events``, ``csrs``), the tests build
their hand-made fleets with them (``tests/support/factories.py``) and the benchmarks their production-sized
Nodes (``bench/objects.py``), so a field the API writes in one shape is written the same way
everywhere. Times are floats (seconds since the epoch), written as ``metav1.Time`` (whole seconds)
or, for a Lease's ``renewTime``, ``metav1.MicroTime``. Optional parts are left out when not given,
as the API server leaves out empty fields.
"""

from __future__ import annotations

import math
import time

_day_cache: dict[int, str] = {}


def fmt_time(t: float) -> str:
    """metav1.Time: RFC 3339 UTC, whole seconds (truncated, as Go does). Hot path: cached per day."""
    sec = math.floor(t)
    day, rem = divmod(sec, 86400)
    date = _day_cache.get(day)
    if date is None:
        g = time.gmtime(day * 86400)
        date = _day_cache[day] = f"{g.tm_year:04d}-{g.tm_mon:02d}-{g.tm_mday:02d}T"
    h, rem = divmod(rem, 3600)
    m, se = divmod(rem, 60)
    return f"{date}{h:02d}:{m:02d}:{se:02d}Z"


def fmt_micro(t: float) -> str:
    """metav1.MicroTime (Lease renewTime): microseconds (truncated, as Go does)."""
    sec = math.floor(t)
    us = int((t - sec) * 1e6)
    return f"{fmt_time(sec)[:-1]}.{us:06d}Z"


def condition(ctype: str, status: str, *, reason: str = "", message: str = "", heartbeat: float,
              transition: float) -> dict:
    """A Node condition."""
    return {"type": ctype, "status": status, "lastHeartbeatTime": fmt_time(heartbeat),
            "lastTransitionTime": fmt_time(transition), "reason": reason, "message": message}


def taint(key: str, effect: str = "NoExecute", time_added: float | None = None, value: str = "") -> dict:
    """A Node taint; ``timeAdded`` only for the ones a controller stamps."""
    d = {"key": key, "effect": effect}
    if value:
        d["value"] = value
    if time_added is not None:
        d["timeAdded"] = fmt_time(time_added)
    return d


def metadata(name: str, *, namespace: str | None = None, uid: str | None = None, created: float | None = None,
             labels: dict | None = None, annotations: dict | None = None, owners: list[dict] | None = None,
             generate_name: str | None = None) -> dict:
    meta: dict = {"name": name}
    if generate_name:
        meta["generateName"] = generate_name
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if created is not None:
        meta["creationTimestamp"] = fmt_time(created)
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if owners is not None:
        meta["ownerReferences"] = owners
    return meta


def node(name: str, *, uid: str, labels: dict, conditions: list[dict], taints: list[dict] = (),  # type: ignore[assignment]
         unschedulable: bool = False, created: float | None = None, annotations: dict | None = None,
         spec: dict | None = None, status: dict | None = None, node_info: dict | None = None,
         kubelet_port: int = 10250) -> dict:
    """A Node. ``spec`` / ``status`` add fields (podCIDR, capacity, addresses, images, ...)."""
    sp = dict(spec or {})
    if unschedulable:
        sp["unschedulable"] = True
    if taints:
        sp["taints"] = list(taints)
    st = dict(status or {})
    st["conditions"] = conditions
    st["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    if node_info is not None:
        st["nodeInfo"] = node_info
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": metadata(name, uid=uid, created=created, labels=labels, annotations=annotations),
            "spec": sp, "status": st}


def lease(node_name: str, renew: float | None, *, duration: int = 40, uid: str | None = None,
          created: float | None = None, node_uid: str | None = None) -> dict:
    """A node's Lease in ``kube-node-lease``; ``renewTime`` on the node's clock (microseconds)."""
    owners = ([{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
              if node_uid is not None else None)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": metadata(node_name, namespace="kube-node-lease", uid=uid, created=created, owners=owners),
            "spec": {"holderIdentity": node_name, "leaseDurationSeconds": duration,
                     "renewTime": fmt_micro(renew) if renew is not None else None}}


def owner(kind: str, name: str, uid: str | None = None) -> dict:
    """A controller ownerReference (the apps/v1 kinds that own pods)."""
    ref: dict[str, str | bool] = {"apiVersion": "apps/v1", "kind": kind, "name": name}
    if uid is not None:
        ref["uid"] = uid
    ref["controller"] = True
    ref["blockOwnerDeletion"] = True
    return ref


def pod(name: str, namespace: str, node_name: str | None, *, uid: str, owners: list[dict], spec: dict | None = None,
        status: dict | None = None, created: float | None = None, labels: dict | None = None,
        generate_name: str | None = None, deletion: float | None = None, deletion_grace: int | None = None) -> dict:
    """A Pod bound with ``spec.nodeName``; ``deletion`` is its deletionTimestamp (Terminating)."""
    meta = metadata(name, namespace=namespace, uid=uid, created=created, generate_name=generate_name)
    if labels is not None:
        meta["labels"] = labels
    meta["ownerReferences"] = owners
    if deletion is not None:
        meta["deletionTimestamp"] = fmt_time(deletion)
        if deletion_grace is not None:
            meta["deletionGracePeriodSeconds"] = deletion_grace
    sp = dict(spec or {})
    if node_name:
        sp["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": sp,
            "status": status if status is not None else {"phase": "Running"}}


def event(name: str, namespace: str, involved: dict, reason: str, message: str, *, at: float, component: str,
          host: str | None = None, uid: str | None = None, count: int = 1, type_: str = "Normal",
          first: float | None = None) -> dict:
    """A core/v1 Event (the series form kubectl and the controllers of this era write)."""
    source: dict = {"component": component}
    if host:
        source["host"] = host
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": metadata(name, namespace=namespace, uid=uid, created=None if uid is None else (first or at)),
            "involvedObject": dict(involved), "reason": reason, "message": message, "source": source,
            "firstTimestamp": fmt_time(first if first is not None else at), "lastTimestamp": fmt_time(at),
            "count": count, "type": type_, "eventTime": None, "reportingComponent": component,
            "reportingInstance": host or ""}


def csr(name: str, *, username: str, signer: str, status: dict, request: str | None = None,
        groups: list[str] | None = None, usages: list[str] | None = None, uid: str | None = None,
        created: float | None = None, user_uid: str | None = None) -> dict:
    """A certificates.k8s.io/v1 CertificateSigningRequest."""
    spec: dict = {}
    if request is not None:
        spec["request"] = request
    spec["signerName"] = signer
    if usages is not None:
        spec["usages"] = usages
    spec["username"] = username
    if groups is not None:
        spec["groups"] = groups
    if user_uid is not None:
        spec["uid"] = user_uid
    meta = metadata(name, uid=uid, created=created, generate_name="csr-" if uid is not None else None)
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": meta,
            "spec": spec, "status": status}
