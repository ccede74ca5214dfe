"""Why a node is not Ready: the likely cause, read from what the API shows.

NotReady is a statement about the kubelet's reporting, not about the containers. The checklist
follows the seeds: the lease (is the kubelet still heartbeating?), the kubelet client
certificate, the kubelet's own Ready=False reason (runtime, network plugin, PLEG), pressure
conditions, cordoning. Each cause comes with the checks to run on the node.
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass

from .objects import NodeRecord
from .rules import PRESSURE_CONDITIONS, NodeState
from .timeutil import format_time


class CauseKind(enum.Enum):
    CERT_EXPIRED = "cert-expired"
    LEASE_STALE = "lease-stale"
    LEASE_LATE = "lease-late"
    RUNTIME = "runtime"
    NETWORK = "network"
    PLEG = "pleg"
    KUBELET_NOT_READY = "kubelet-not-ready"
    PRESSURE = "pressure"
    CORDONED = "cordoned"
    NO_LEASE = "no-lease"
    NODE_AWAITED = "node-awaited"
    NEVER_POSTED = "never-posted"
    CLOCK_STEPPED_BACK = "clock-stepped-back"
    LEASE_REWRITTEN = "lease-rewritten"
    CONTROLLER_SKIPS = "controller-skips"


@dataclass(frozen=True, slots=True)
class Cause:
    kind: CauseKind
    text: str


_SHARED: dict[tuple[CauseKind, str], Cause] = {}
SHARED_MAX = 4096
"""Distinct causes kept for sharing; the memo starts over beyond (kubelet messages can carry times)."""


def _cause(kind: CauseKind, text: str) -> Cause:
    """One Cause per distinct (kind, text): in a zone outage thousands of nodes have the same one
    (25,000 stale nodes kept 4.6 MB of identical texts and Causes before this memo)."""
    cause = _SHARED.get((kind, text))
    if cause is None:
        if len(_SHARED) >= SHARED_MAX:
            _SHARED.clear()
        cause = _SHARED[(kind, text)] = Cause(kind, text)
    return cause


CHECKS: dict[CauseKind, tuple[str, ...]] = {
    CauseKind.LEASE_STALE: (
        "systemctl status kubelet",
        "journalctl -u kubelet -n 200 --no-pager",
        "curl -sk https://<api-server>:6443/healthz   # can the node reach the API server?",
    ),
    CauseKind.NO_LEASE: ("systemctl status kubelet", "journalctl -u kubelet -n 200 --no-pager"),
    CauseKind.NEVER_POSTED: ("systemctl status kubelet", "journalctl -u kubelet -n 200 --no-pager"),
    CauseKind.LEASE_LATE: ("journalctl -u kubelet -n 200 --no-pager   # slow renewals, API latency",),
    CauseKind.CERT_EXPIRED: (
        "openssl x509 -in /var/lib/kubelet/pki/kubelet-client-current.pem -noout -enddate",
        "kubectl get csr   # pending kubelet client CSRs?",
    ),
    CauseKind.RUNTIME: ("crictl info", "systemctl status containerd"),
    CauseKind.NETWORK: ("crictl info   # NetworkReady", "ls /etc/cni/net.d"),
    CauseKind.PLEG: ("crictl ps -a", "journalctl -u kubelet | grep -i pleg"),
    CauseKind.KUBELET_NOT_READY: ("journalctl -u kubelet -n 200 --no-pager", "crictl info"),
    CauseKind.PRESSURE: ("df -h", "free -m", "ps -eLf | wc -l   # PIDs"),
    CauseKind.CORDONED: ("kubectl describe node <node>   # who cordoned it, and why?",),
    CauseKind.CLOCK_STEPPED_BACK: (
        "chronyc tracking   # or: timedatectl timesync-status",
        "date -u   # on the node, beside the API server's Date header",
    ),
    CauseKind.LEASE_REWRITTEN: (
        "kubectl -n kube-node-lease get lease <node> -o yaml --show-managed-fields   # who wrote it last?",
        "systemctl status kubelet",
    ),
    CauseKind.CONTROLLER_SKIPS: (
        "journalctl -u kube-controller-manager | grep 'no pods will be evicted'   # or its pod's log",
    ),
}


def _classify_not_ready(reason: str, message: str) -> CauseKind:
    text = f"{reason} {message}".lower()
    if "pleg" in text:
        return CauseKind.PLEG
    if "network plugin" in text or "cni" in text or "networkready" in text:
        return CauseKind.NETWORK
    if "container runtime" in text or "runtime is down" in text or "runtimeready" in text:
        return CauseKind.RUNTIME
    return CauseKind.KUBELET_NOT_READY


def _counted_from(restarted: float | None) -> str:
    return "" if restarted is None else f" (counted from the node controller's restart, {format_time(restarted)})"


def _restart_note(restarted: float | None, grace: float) -> str:
    if restarted is None:
        return ""
    return (f"; the node controller restarted at {format_time(restarted)} and counts the {grace:g}s grace from "
            "then, not from the last renewal")


def likely_causes(
    node: NodeRecord,
    state: NodeState,
    *,
    lease_age: float | None,
    has_lease: bool,
    grace: float,
    cert_not_after: float | None,
    now: float,
    unrenewed: tuple[float, float] | None = None,
    counted: float | None = None,
    held: bool = False,
    restarted: float | None = None,
) -> list[Cause]:
    """Every cause the API supports for this node, most telling first (empty when Ready).
    ``unrenewed``, ``counted``: the lease track's (``LeaseTrack.unrenewed``, ``renew_time``);
    ``held``: the controller skips the node for it (``settings.lease_circuit_breaker``);
    ``restarted``: when the node controller registered the node after its last renewal (a
    restarted controller manager, a new leader: ``Store.registered``), from which it counts the
    grace; ``lease_age`` is then the age of that."""
    out: list[Cause] = []
    if node.awaited:
        out.append(_cause(CauseKind.NODE_AWAITED, "Node object not received yet (node list in progress): "
                                                  "state from the Lease alone"))
    unrenewed_causes = lease_not_renewed(unrenewed, counted, held)
    if state is NodeState.READY:
        # Ready, but worth saying: pressure (the kubelet may be evicting pods itself) and cordoning,
        # a kubelet that renews its Lease but never posted status (in its startup grace), and one
        # whose renewals no longer count (it goes Unknown although it renews; from 1.37 the
        # controller skips it instead, and would even with the kubelet down).
        out.extend(unrenewed_causes)
        if not node.awaited and node.conditions.get("Ready") is None:
            out.append(_never_posted())
        return out + _pressure_and_cordon(node)
    cert_expired = cert_not_after is not None and cert_not_after <= now
    if cert_expired:
        out.append(_cause(CauseKind.CERT_EXPIRED,
                          f"kubelet client certificate expired ({format_time(cert_not_after)}): "
                          "the kubelet cannot authenticate to the API server"))
    ready = node.conditions.get("Ready")
    if unrenewed_causes and not cert_expired:  # it writes its Lease, or the controller skips it
        out.extend(unrenewed_causes)
    elif lease_age is not None and lease_age > grace:
        if not cert_expired:  # (no Lease at all: the controller's probe is the status heartbeat alone)
            what = "lease not renewed" if has_lease else "no Lease, and no status posted"
            out.append(_cause(CauseKind.LEASE_STALE,
                              f"{what} within the {grace:g}s grace{_counted_from(restarted)}: kubelet down, or "
                              "the node cut off from the API server"))
    elif state is NodeState.LATE and lease_age is not None:
        out.append(_cause(CauseKind.LEASE_LATE, "lease renewal late (more than two renew intervals): "
                          f"kubelet slow, or API server latency{_restart_note(restarted, grace)}"))
    elif not has_lease and not cert_expired:  # (not Ready: returned above)
        out.append(_cause(CauseKind.NO_LEASE, "no Lease in kube-node-lease for this node"))
    if ready is None and not node.awaited:
        out.append(_never_posted())
    elif ready is not None and ready.status == "False":
        kind = _classify_not_ready(ready.reason, ready.message)
        detail = ready.message or ready.reason or "no message"
        out.append(_cause(kind, f"kubelet reports NotReady ({ready.reason or 'no reason'}): {detail}"))
    elif ready is not None and ready.status == "Unknown" and not out:
        out.append(_cause(CauseKind.LEASE_STALE, f"{ready.reason or 'NodeStatusUnknown'}: "
                          f"{ready.message or 'Kubelet stopped posting node status.'}"))
    return out + _pressure_and_cordon(node)


def lease_not_renewed(unrenewed: tuple[float, float] | None, counted: float | None,
                      held: bool = False) -> list[Cause]:
    """The Lease was written since the renewal counted last without a newer renewTime
    (``LeaseTrack.unrenewed``: received at, its renewTime). The node controller resets its probe
    only for a renewTime newer than the last it saw (``tryUpdateNodeHealth``); nodewatch counts the
    same way (``Ingest._on_lease``).

    An older renewTime: the kubelet renews, but its clock stepped back (an NTP step, a VM restored
    from a snapshot); its renewals are unheard until its clock has caught up (a status post, which
    a real kubelet makes when the controller marks it Unknown, still is heard). The same renewTime:
    another writer (an annotation, a label); nothing to say unless ``held``.

    ``held``: from 1.37 the controller skips such a node at each pass instead (its Lease is not the
    one it last counted: ``settings.lease_circuit_breaker``): never Unknown, no eviction, even if
    the kubelet is down, until a renewal counts (seen on the v1.37.2 testbed for both); a cause of
    its own (``CONTROLLER_SKIPS``), after the one that says why."""
    if unrenewed is None or counted is None:
        return []
    seen, renew = unrenewed
    back = counted - renew
    out = []
    if back > 0:
        out.append(_cause(CauseKind.CLOCK_STEPPED_BACK,
                          f"kubelet renews, but its renewTime is {back:.0f}s older than the last one counted "
                          f"({format_time(counted)}; its clock stepped back?): the controller counts only a "
                          f"newer renewTime, so its renewals go unheard until about {format_time(seen + back)}"))
    elif held:
        out.append(_cause(CauseKind.LEASE_REWRITTEN,
                          f"its Lease was written at {format_time(seen)} without a newer renewTime (another "
                          "writer: an annotation, a label?)"))
    if out and held:
        out.append(_cause(CauseKind.CONTROLLER_SKIPS,
                          "the controller skips this node at each pass while its Lease is not the one it last "
                          "counted (NodeControllerLeaseCircuitBreaker, 1.37+): not marked Unknown, no eviction, "
                          "even if the kubelet is down, until a renewal counts"))
    return out


def _never_posted() -> Cause:
    return _cause(CauseKind.NEVER_POSTED, "the kubelet never posted node status (no Ready condition): the "
                  "controller marks it Unknown (NodeStatusNeverUpdated) once neither a Lease renewal nor its "
                  "creation is within the startup grace")


def _pressure_and_cordon(node: NodeRecord) -> list[Cause]:
    out = []
    true = node.conditions.true  # the types whose status is True: no Condition made for the others
    for ctype in PRESSURE_CONDITIONS:
        c = node.conditions.get(ctype) if ctype in true else None
        if c is not None:
            out.append(_cause(CauseKind.PRESSURE, f"{ctype}: {c.message or c.reason or 'True'}"))
    if node.unschedulable:
        out.append(_cause(CauseKind.CORDONED, "cordoned (spec.unschedulable)"))
    return out


def checks_for(causes: list[Cause], node: str | None = None) -> list[str]:
    """The commands to run for these causes (on the node, or ``kubectl`` ones anywhere), without
    repeats; ``<node>`` is ``node``'s name where it is given (shell-quoted: it comes from the cluster)."""
    seen: list[str] = []
    for c in causes:
        for cmd in CHECKS.get(c.kind, ()):
            if node:
                cmd = cmd.replace("<node>", shlex.quote(node))
            if cmd not in seen:
                seen.append(cmd)
    return seen
