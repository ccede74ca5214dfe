"""Kubelet client CSRs: the auto-approver, the signer and the hourly CSR cleaner."""

from __future__ import annotations

import hashlib
from typing import Callable

from ..core import rules
from . import objects, pki
from .objects import fmt_time
from .schedule import PRIO_CONTROLLER
from .shapes import SimNode, make_uid, public_copy, rand_suffix
from .world import SimWorld

CertIssued = Callable[[SimNode, float, float], None]
"""The requester is told its certificate (NotBefore, NotAfter): ``kubelet.Kubelets.cert_issued``."""

CSR_CLEANER_PERIOD = 3600.0
CSR_ISSUED_TTL = 3600.0
"""The cleaner deletes issued (approved) requests an hour after approval."""


class CSRController:
    """Kubelet client CSRs: created by the kubelet, auto-approved, signed, cleaned an hour later.

    ``on_issued`` is set by ``fleet.SimFleet`` once the kubelets exist (they submit here: a cycle
    of calls, not of imports)."""

    on_issued: CertIssued

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self.objects: dict[str, dict] = {}
        self.t0 = world.t0
        self._ca: pki.CA | None = None
        self.issued = 0

    @property
    def ca(self) -> pki.CA:
        if self._ca is None:
            self._ca = pki.make_ca("kubernetes", now=self.world.start, seed=self.world.seed)
        return self._ca

    def start(self) -> None:
        self.world.at(self.t0 + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def submit(self, node: SimNode, bootstrap: bool = False) -> str:
        world = self.world
        now = world.now
        name = f"csr-{rand_suffix(world.rng)}"
        while name in self.objects:
            name = f"csr-{rand_suffix(world.rng)}"
        key = pki.node_key(world.seed, node.name)
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
                          uid=make_uid(world.rng), created=now, user_uid=make_uid(world.rng))
        obj["_node"] = node.name
        self.objects[name] = obj
        world.emit("certificatesigningrequests", "ADDED", public_copy(obj))
        world.at(now + world.rng.uniform(0.02, 0.2), self.approve, name, bootstrap, prio=PRIO_CONTROLLER)
        return name

    def approve(self, name: str, bootstrap: bool) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        now = self.world.now
        msg = ("Auto approving kubelet client certificate after SubjectAccessReview." if bootstrap
               else "Auto approving self kubelet client certificate after SubjectAccessReview.")
        obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                                         "message": msg, "lastUpdateTime": fmt_time(now),
                                         "lastTransitionTime": fmt_time(now)}]}
        obj["_approved"] = now
        self.world.emit("certificatesigningrequests", "MODIFIED", public_copy(obj))
        self.world.at(now + self.world.rng.uniform(0.01, 0.1), self.sign, name, prio=PRIO_CONTROLLER)

    def sign(self, name: str) -> None:
        obj = self.objects.get(name)
        if obj is None:
            return
        world = self.world
        now = world.now
        node_name = obj["_node"]
        key = pki.node_key(world.seed, node_name)
        not_before = now - 300.0  # the signer backdates by 5 minutes
        not_after = now + world.cert_lifetime
        cert = pki.issue_cert(self.ca, key.public_key(), f"{rules.NODE_USER_PREFIX}{node_name}",
                              organizations=("system:nodes",), not_before=not_before, not_after=not_after)
        obj["status"]["certificate"] = pki.b64(pki.cert_pem(cert))
        self.issued += 1
        world.emit("certificatesigningrequests", "MODIFIED", public_copy(obj))
        node = world.nodes.get(node_name) or world.joining.get(node_name)
        if node is not None:
            self.on_issued(node, float(int(not_before)), float(int(not_after)))

    def clean(self) -> None:
        """The CSR cleaner (hourly): issued requests approved more than an hour ago go away."""
        now = self.world.now
        for name in sorted(self.objects):
            obj = self.objects[name]
            approved = obj.get("_approved")
            if approved is not None and now - approved > CSR_ISSUED_TTL:
                del self.objects[name]
                self.world.emit("certificatesigningrequests", "DELETED", public_copy(obj))
        self.world.at(now + CSR_CLEANER_PERIOD, self.clean, prio=PRIO_CONTROLLER)

    def listing(self) -> list[dict]:
        return [public_copy(o) for o in self.objects.values()]
