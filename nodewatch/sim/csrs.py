"""Kubelet client CSRs: the auto-approver, the signer and the hourly CSR cleaner."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from ..core import rules
from . import objects, pki
from .schedule import PRIO_CONTROLLER
from .objects import fmt_time
from .shapes import SimNode, make_uid, public_copy, rand_suffix

if TYPE_CHECKING:
    from .fleet import SimFleet

CSR_CLEANER_PERIOD = 3600.0
CSR_ISSUED_TTL = 3600.0
"""The cleaner deletes issued (approved) requests an hour after approval."""


class CSRController:
    """Kubelet client CSRs: created by the kubelet, auto-approved, signed, cleaned an hour later."""

    def __init__(self, fleet: "SimFleet", t0: float) -> None:
        self.fleet = fleet
        self.objects: dict[str, dict] = {}
        self.t0 = t0
        self._ca: pki.CA | None = None
        self.issued = 0

    @property
    def ca(self) -> pki.CA:
        if self._ca is None:
            self._ca = pki.make_ca("kubernetes", now=self.fleet.start, seed=self.fleet.seed)
        return self._ca

    def start(self) -> None:
        self.fleet.at(self.t0 + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def submit(self, node: SimNode, bootstrap: bool = False) -> str:
        fleet = self.fleet
        now = fleet.now
        name = f"csr-{rand_suffix(fleet.rng)}"
        while name in self.objects:
            name = f"csr-{rand_suffix(fleet.rng)}"
        key = pki.node_key(fleet.seed, node.name)
        cn = f"{rules.NODE_USER_PREFIX}{node.name}"
        request = pki.make_csr_pem(key, cn, ("system:nodes",))
        if bootstrap:
            username = f"system:bootstrap:{hashlib.sha1(node.name.encode()).hexdigest()[:6]}"
            groups = ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                      "system:authenticated"]
        else:
            username = cn
            groups = ["system:nodes", "system:authenticated"]
        obj = objects.csr(name, username=username, signer=rules.KUBELET_CLIENT_SIGNER, status={},
                          request=pki.b64(request), groups=groups, usages=["digital signature", "client auth"],
                          uid=make_uid(fleet.rng), created=now, user_uid=make_uid(fleet.rng))
        obj["_node"] = node.name
        self.objects[name] = obj
        fleet.emit("certificatesigningrequests", "ADDED", public_copy(obj))
        fleet.at(now + fleet.rng.uniform(0.02, 0.2), self.approve, name, bootstrap, prio=PRIO_CONTROLLER)
        return name

    def approve(self, name: str, bootstrap: bool) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        now = self.fleet.now
        msg = ("Auto approving kubelet client certificate after SubjectAccessReview." if bootstrap
               else "Auto approving self kubelet client certificate after SubjectAccessReview.")
        obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                                         "message": msg, "lastUpdateTime": fmt_time(now),
                                         "lastTransitionTime": fmt_time(now)}]}
        obj["_approved"] = now
        self.fleet.emit("certificatesigningrequests", "MODIFIED", public_copy(obj))
        self.fleet.at(now + self.fleet.rng.uniform(0.01, 0.1), self.sign, name, prio=PRIO_CONTROLLER)

    def sign(self, name: str) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        fleet = self.fleet
        now = fleet.now
        node_name = obj["_node"]
        key = pki.node_key(fleet.seed, node_name)
        not_before = now - 300.0  # the signer backdates by 5 minutes
        not_after = now + fleet.cert_lifetime
        cert = pki.issue_cert(self.ca, key.public_key(), f"{rules.NODE_USER_PREFIX}{node_name}",
                              organizations=("system:nodes",), not_before=not_before, not_after=not_after)
        obj["status"]["certificate"] = pki.b64(pki.cert_pem(cert))
        self.issued += 1
        fleet.emit("certificatesigningrequests", "MODIFIED", public_copy(obj))
        node = fleet.nodes.get(node_name) or fleet.joining.get(node_name)
        if node is not None:
            fleet.kubelet.cert_issued(node, float(int(not_before)), float(int(not_after)))

    def clean(self) -> None:
        """The CSR cleaner (hourly): issued requests approved more than an hour ago go away."""
        now = self.fleet.now
        for name in sorted(self.objects):
            obj = self.objects[name]
            approved = obj.get("_approved")
            if approved is not None and now - approved > CSR_ISSUED_TTL:
                del self.objects[name]
                self.fleet.emit("certificatesigningrequests", "DELETED", public_copy(obj))
        self.fleet.at(now + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def listing(self) -> list[dict]:
        return [public_copy(o) for o in self.objects.values()]
