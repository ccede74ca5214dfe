"""Kubernetes objects (plain dicts) for the core's tests, with short test-friendly defaults.

Thin uses of ``nodewatch.sim.objects``, the one builder the simulator and the benchmarks use too.
"""

from __future__ import annotations

import base64
import datetime as dt

from nodewatch.sim import objects

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z: a fixed "now" for table-driven tests


def node(name: str, ready: str | None = "True", *, taints=(), zone: str = "z1", region: str = "r1",
         unschedulable: bool = False, conditions: dict | None = None, labels: dict | None = None,
         reason: str = "", message: str = "", transition: float = T0 - 3600, heartbeat: float | None = None,
         created: float | None = None) -> dict:
    """``heartbeat``: the Ready condition's lastHeartbeatTime (default: ``transition``)."""
    conds = []
    if ready is not None:
        conds.append(objects.condition("Ready", ready, reason=reason, message=message,
                                       heartbeat=transition if heartbeat is None else heartbeat,
                                       transition=transition))
    for ctype, status in (conditions or {}).items():
        conds.append(objects.condition(ctype, status, reason=f"Kubelet{ctype}", message=f"{ctype} msg",
                                       heartbeat=transition, transition=transition))
    lab = {"kubernetes.io/hostname": name}
    if zone:
        lab["topology.kubernetes.io/zone"] = zone
    if region:
        lab["topology.kubernetes.io/region"] = region
    lab.update(labels or {})
    return objects.node(name, uid=f"uid-{name}", labels=lab, conditions=conds, taints=[dict(t) for t in taints],
                        unschedulable=unschedulable, node_info={"kubeletVersion": "v1.33.2"}, created=created)


def taint(key: str, effect: str = "NoExecute", added: float | None = None) -> dict:
    return objects.taint(key, effect, added)


def lease(name: str, renew: float | None, duration: int = 40, *, written: float | None = None,
          manager: str = "kubelet", operation: str = "Update") -> dict:
    """``written``: the API server's time of the manager's last write (``managedFields[].time``)."""
    obj = objects.lease(name, renew, duration=duration)
    if written is not None:
        stamp = dt.datetime.fromtimestamp(written, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        obj["metadata"]["managedFields"] = [
            {"manager": manager, "operation": operation, "apiVersion": "coordination.k8s.io/v1", "time": stamp,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:renewTime": {}}}}]
    return obj


ADMISSION_DEFAULTS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)


def pod(name: str, node_name: str, *, owner_kind: str = "ReplicaSet", owner_name: str = "web-abc",
        tolerations=None, namespace: str = "default", deleting: float | None = None) -> dict:
    """``tolerations`` None: the two 300 s ones the DefaultTolerationSeconds admission plugin
    writes into every pod created without its own (what a stored pod carries); ``[]``: none."""
    if tolerations is None:
        tolerations = ADMISSION_DEFAULTS
    spec = {"tolerations": [dict(t) for t in tolerations]}
    return objects.pod(name, namespace, node_name, uid=f"uid-{name}", owners=[objects.owner(owner_kind, owner_name)],
                       spec=spec, deletion=deleting)


def event(name: str, node_name: str, reason: str, message: str, t: float, component: str = "kubelet") -> dict:
    return objects.event(name, "default", {"kind": "Node", "name": node_name, "uid": node_name}, reason, message,
                         at=t, component=component, host=node_name)


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
        signer: str = "kubernetes.io/kube-apiserver-client-kubelet", username: str | None = None,
        subject: str | None = None) -> dict:
    """A kubelet's client CSR, issued when ``not_after`` is given. ``username``: who asked (default:
    the node itself, a rotation); ``subject``: the certificate's CN (default ``system:node:<node>``)."""
    status: dict = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}]}
    if not_after is not None:
        cn = subject if subject is not None else f"system:node:{node_name}"
        status["certificate"] = base64.b64encode(make_cert_pem(cn, not_after)).decode()
    return objects.csr(name, username=username if username is not None else f"system:node:{node_name}",
                       signer=signer, status=status)
