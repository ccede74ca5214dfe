"""Builders of realistic Kubernetes objects (plain dicts) for the core's tests."""

from __future__ import annotations

import base64
import datetime as dt

from nodewatch.core.timeutil import format_time

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z: a fixed "now" for table-driven tests


def node(name: str, ready: str | None = "True", *, taints=(), zone: str = "z1", region: str = "r1",
         unschedulable: bool = False, conditions: dict | None = None, labels: dict | None = None,
         reason: str = "", message: str = "", transition: float = T0 - 3600) -> dict:
    conds = []
    if ready is not None:
        conds.append({"type": "Ready", "status": ready, "reason": reason, "message": message,
                      "lastHeartbeatTime": format_time(transition), "lastTransitionTime": format_time(transition)})
    for ctype, status in (conditions or {}).items():
        conds.append({"type": ctype, "status": status, "reason": f"Kubelet{ctype}", "message": f"{ctype} msg",
                      "lastHeartbeatTime": format_time(transition), "lastTransitionTime": format_time(transition)})
    lab = {"kubernetes.io/hostname": name}
    if zone:
        lab["topology.kubernetes.io/zone"] = zone
    if region:
        lab["topology.kubernetes.io/region"] = region
    lab.update(labels or {})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": lab},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {"conditions": conds, "nodeInfo": {"kubeletVersion": "v1.33.2"},
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}},
    }


def taint(key: str, effect: str = "NoExecute", added: float | None = None) -> dict:
    t = {"key": key, "effect": effect}
    if added is not None:
        t["timeAdded"] = format_time(added)
    return t


def lease(name: str, renew: float | None, duration: int = 40) -> dict:
    spec = {"holderIdentity": name, "leaseDurationSeconds": duration}
    if renew is not None:
        spec["renewTime"] = format_time(renew, micro=True)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec}


def pod(name: str, node_name: str, *, owner_kind: str = "ReplicaSet", owner_name: str = "web-abc",
        tolerations=None, namespace: str = "default", deleting: float | None = None) -> dict:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
            "ownerReferences": [{"kind": owner_kind, "name": owner_name, "controller": True}]}
    if deleting is not None:
        meta["deletionTimestamp"] = format_time(deleting)
    spec = {"nodeName": node_name}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def event(name: str, node_name: str, reason: str, message: str, t: float, component: str = "kubelet") -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": node_name, "uid": node_name},
            "reason": reason, "message": message, "source": {"component": component, "host": node_name},
            "lastTimestamp": format_time(t), "type": "Normal", "count": 1}


def make_cert_pem(cn: str, not_after: float, not_before: float | None = None) -> bytes:
    """A real self-signed X.509 certificate (EC P-256) with the given NotAfter."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes")])
    nb = not_before if not_before is not None else not_after - 365 * 86400
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime.fromtimestamp(nb, dt.timezone.utc))
        .not_valid_after(dt.datetime.fromtimestamp(not_after, dt.timezone.utc))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def csr(name: str, node_name: str, not_after: float | None, *,
        signer: str = "kubernetes.io/kube-apiserver-client-kubelet") -> dict:
    status: dict = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}]}
    if not_after is not None:
        status["certificate"] = base64.b64encode(make_cert_pem(f"system:node:{node_name}", not_after)).decode()
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": {"signerName": signer, "username": f"system:node:{node_name}"},
            "status": status}
