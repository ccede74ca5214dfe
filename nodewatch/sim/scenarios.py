"""Named scenarios: what goes wrong in the simulated fleet, and when.

A scenario is a list of timed steps relative to the fleet's ``start`` (negative times happened
before it: the fleet pre-simulates that history at construction, so the first view is already
consistent). Scenarios compose with ``+`` ("kubelet-stop+pressure"); a shared ``Picker`` hands each
part its own nodes (and zones where it matters), deterministically for the seed.

``incident``, the demo default, is built so that the default 30-node fleet shows every node state
within the first two minutes: Evicted (kubelet stopped 7 minutes ago, StatefulSet pods stuck
Terminating), Evicting, Unknown and NotReady (a partially disrupted zone, where the controller
stops tainting), Overdue and Late (a kubelet that stops at +10s, a node whose renewals keep
failing), plus an expired and an expiring client certificate, disk pressure, a cordoned node,
clock skew and CSRs from kubelet cert rotation.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Protocol

from .shapes import SimNode, SimPod

Step = tuple[float, Callable[[], None]]


class ScenarioFleet(Protocol):
    """What a scenario reads and does: ``fleet.SimFleet`` in virtual time, and the testbed's
    ``TestbedFleet`` (testbed/kubelets.py), which runs the same scenarios against a real API server."""

    nodes: dict[str, SimNode]
    node_order: list[str]
    pods: dict[tuple[str, str], SimPod]
    seed: int
    start: float
    rng: random.Random

    @property
    def now(self) -> float: ...
    @property
    def cert_lifetime(self) -> float: ...
    def at(self, t: float, fn: Callable[..., Any], *args: Any) -> None: ...
    def stop_kubelet(self, node: SimNode) -> None: ...
    def disconnect(self, node: SimNode) -> None: ...
    def reconnect(self, node: SimNode) -> None: ...
    def set_runtime_down(self, node: SimNode, down: bool = True) -> None: ...
    def set_cni_down(self, node: SimNode, down: bool = True) -> None: ...
    def set_pressure(self, node: SimNode, kind: str, on: bool = True) -> None: ...
    def cordon(self, node: SimNode, on: bool = True) -> None: ...
    def delete_node(self, node: SimNode) -> None: ...
    def add_node(self, zone_index: int | None = None) -> object: ...
    def rotate_cert(self, node: SimNode) -> None: ...
    def restart_controller_manager(self) -> None: ...


Builder = Callable[[ScenarioFleet, "Picker"], list[Step]]

DAY = 86400.0


class Picker:
    """Chooses the nodes and zones each scenario part acts on; never the same node twice."""

    def __init__(self, fleet: ScenarioFleet) -> None:
        self.fleet = fleet
        self.rng = random.Random(f"nodewatch-sim/{fleet.seed}/scenario")
        self.used: set[str] = set()
        self.used_zones: set[str] = set()
        self.zones: dict[str, list[str]] = {}
        for name in fleet.node_order:
            self.zones.setdefault(fleet.nodes[name].zone_key, []).append(name)

    def zone(self, min_size: int = 1) -> str | None:
        """A zone no other part has claimed (any zone if all are claimed), with ``min_size`` free nodes."""
        keys = sorted(self.zones)
        ok = [z for z in keys if len(self.free_in(z)) >= min_size]
        fresh = [z for z in ok if z not in self.used_zones]
        pool = fresh or ok
        if not pool:
            return None
        z = self.rng.choice(pool)
        self.used_zones.add(z)
        return z

    def free_in(self, zone: str) -> list[str]:
        return [n for n in self.zones.get(zone, []) if n not in self.used]

    def node(self, zone: str | None = None, where: Callable[[SimNode], bool] | None = None) -> SimNode | None:
        names = self.free_in(zone) if zone is not None else [n for n in self.fleet.node_order if n not in self.used]
        cands = [n for n in names if where is None or where(self.fleet.nodes[n])]
        if not cands:
            cands = names
        if not cands:
            return None
        name = self.rng.choice(cands)
        self.used.add(name)
        self.used_zones.add(self.fleet.nodes[name].zone_key)
        return self.fleet.nodes[name]

    def nodes(self, zone: str, k: int) -> list[SimNode]:
        names = self.free_in(zone)
        chosen = sorted(self.rng.sample(names, min(k, len(names))))
        self.used.update(chosen)
        return [self.fleet.nodes[n] for n in chosen]


def _hosts_both(fleet: ScenarioFleet) -> Callable[[SimNode], bool]:
    def test(node: SimNode) -> bool:
        kinds = {fleet.pods[k].wl.kind for k in node.pods if k in fleet.pods}
        return "StatefulSet" in kinds and "Deployment" in kinds
    return test


# --- setup helpers (applied before the fleet boots) -------------------------------------------------


def _expire_cert(fleet: ScenarioFleet, node: SimNode, not_after: float) -> None:
    """A client certificate that runs out at ``not_after`` and is never rotated (rotation off)."""
    node.cert_not_after = float(int(not_after))
    node.cert_not_before = node.cert_not_after - fleet.cert_lifetime
    node.rotation_at = math.inf


# --- the scenarios -----------------------------------------------------------------------------------


def steady(f: ScenarioFleet, p: Picker) -> list[Step]:
    return []


def kubelet_stop(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node(zone=p.zone())
    return [(20.0, partial(f.stop_kubelet, n))] if n else []


def zone_partial(f: ScenarioFleet, p: Picker, at: float = 10.0) -> list[Step]:
    z = p.zone(min_size=4)
    if z is None:
        return []
    size = len(p.zones[z])
    members = p.nodes(z, max(3, math.ceil(0.6 * size)))
    return [(at, partial(f.disconnect, n)) for n in members]


def zone_full(f: ScenarioFleet, p: Picker) -> list[Step]:
    z = p.zone()
    if z is None:
        return []
    return [(10.0, partial(f.disconnect, n)) for n in p.nodes(z, len(p.zones[z]))]


def control_plane_cutoff(f: ScenarioFleet, p: Picker) -> list[Step]:
    steps: list[Step] = []
    for name in f.node_order:
        n = f.nodes[name]
        p.used.add(name)
        steps.append((10.0, partial(f.disconnect, n)))
        steps.append((240.0, partial(f.reconnect, n)))
    return steps


def controller_restart(f: ScenarioFleet, p: Picker) -> list[Step]:
    """A kubelet stops at +10s; the controller manager restarts at +30s, before that node's grace
    ends: it counts the grace from its restart, so the node goes Unknown a grace after +30s."""
    n = p.node(zone=p.zone())
    return [(10.0, partial(f.stop_kubelet, n)), (30.0, f.restart_controller_manager)] if n else []


def cert_expired(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node(zone=p.zone())
    if n:
        _expire_cert(f, n, f.start + 30.0)
    return []


def runtime_down(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node(zone=p.zone())
    return [(15.0, partial(f.set_runtime_down, n, True))] if n else []


def cni_down(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node(zone=p.zone())
    return [(15.0, partial(f.set_cni_down, n, True))] if n else []


def pressure(f: ScenarioFleet, p: Picker) -> list[Step]:
    steps: list[Step] = []
    for at, kind in ((10.0, "disk"), (20.0, "memory"), (30.0, "pid")):
        n = p.node()
        if n:
            steps.append((at, partial(f.set_pressure, n, kind, True)))
    return steps


def flapping(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node(zone=p.zone())
    if n is None:
        return []
    steps: list[Step] = []
    t = 10.0
    while t < 7200.0:
        steps.append((t, partial(f.disconnect, n)))
        steps.append((t + 70.0, partial(f.reconnect, n)))
        t += 120.0
    return steps


def clock_skew(f: ScenarioFleet, p: Picker) -> list[Step]:
    for offset in (-95.0, 40.0):
        n = p.node()
        if n:
            n.clock_offset = offset
    return []


def slow_lease(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node()
    if n:
        n.slow_lease = True
    return []


def cordon(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node()
    return [(20.0, partial(f.cordon, n, True))] if n else []


def cert_rotation(f: ScenarioFleet, p: Picker) -> list[Step]:
    n = p.node()
    return [(20.0, partial(f.rotate_cert, n))] if n else []


def churn(f: ScenarioFleet, p: Picker) -> list[Step]:
    def replace_one() -> None:
        cands = [x for x in f.node_order if x not in p.used and f.nodes[x].ready() == "True"]
        if cands:
            f.delete_node(f.nodes[f.rng.choice(cands)])
        f.at(f.now + 30.0, f.add_node)

    return [(30.0 + 90.0 * k, replace_one) for k in range(80)]


def incident(f: ScenarioFleet, p: Picker) -> list[Step]:
    steps: list[Step] = []
    # Evicted: kubelet died 7 minutes ago; its StatefulSet pod is stuck Terminating
    a = p.node(zone=p.zone(min_size=2), where=_hosts_both(f))
    if a:
        steps.append((-420.0, partial(f.stop_kubelet, a)))
        # Overdue then Unknown then Evicting, live: another kubelet in the same zone stops at +10s
        e = p.node(zone=a.zone_key)
        if e:
            steps.append((10.0, partial(f.stop_kubelet, e)))
    # Evicting: kubelet died 200s ago
    zb = p.zone(min_size=2)
    b = p.node(zone=zb)
    if b:
        steps.append((-200.0, partial(f.stop_kubelet, b)))
        k = p.node(zone=zb)
        if k:
            k.clock_offset = 40.0  # a node whose clock runs 40s ahead
    # Unknown and NotReady: a zone partially cut off 5 minutes ago; the controller stops tainting there
    zp = p.zone(min_size=5)
    if zp is not None:
        size = len(p.zones[zp])
        for n in p.nodes(zp, max(3, math.ceil(0.6 * size))):
            steps.append((-300.0, partial(f.disconnect, n)))
        r = p.node(zone=zp)
        if r:
            steps.append((30.0, partial(f.set_runtime_down, r, True)))
    else:
        r = p.node(zone=p.zone())
        if r:
            steps.append((30.0, partial(f.set_runtime_down, r, True)))
    # an expired kubelet client certificate: the kubelet cannot authenticate since -250s
    c = p.node(zone=p.zone())
    if c:
        _expire_cert(f, c, f.start - 250.0)
    # disk pressure, and a node cordoned for maintenance days ago
    zd = p.zone(min_size=2)
    d = p.node(zone=zd)
    if d:
        steps.append((-100.0, partial(f.set_pressure, d, "disk", True)))
    k2 = p.node(zone=zd)
    if k2:
        k2.unschedulable = True
    # Late: renewals keep failing on a congested link; and a certificate close to its end
    ze = p.zone()
    s = p.node(zone=ze)
    if s:
        s.slow_lease = True
    x = p.node(zone=ze)
    if x:
        _expire_cert(f, x, f.start + 5 * DAY)
    # kubelet cert rotation: two CSRs from a few minutes ago, one live
    for at in (-300.0, -200.0, 45.0):
        rotating = p.node()
        if rotating:
            steps.append((at, partial(f.rotate_cert, rotating)))
    return steps


@dataclass(frozen=True)
class Scenario:
    build: Builder
    history: float
    about: str


SCENARIOS: dict[str, Scenario] = {
    "incident": Scenario(incident, 480.0, "every state within two minutes (the demo default)"),
    "steady": Scenario(steady, 0.0, "nothing goes wrong"),
    "kubelet-stop": Scenario(kubelet_stop, 0.0, "one kubelet stops at +20s"),
    "zone-partial": Scenario(zone_partial, 0.0, "most of one zone cut off at +10s (PartialDisruption)"),
    "zone-full": Scenario(zone_full, 0.0, "a whole zone cut off at +10s (FullDisruption)"),
    "control-plane-cutoff": Scenario(control_plane_cutoff, 0.0,
                                     "every node cut off at +10s, back at +240s (all zones down)"),
    "cert-expired": Scenario(cert_expired, 0.0, "a kubelet client certificate expires at +30s"),
    "controller-restart": Scenario(controller_restart, 0.0,
                                   "a kubelet stops at +10s, kube-controller-manager restarts at +30s"),
    "runtime-down": Scenario(runtime_down, 0.0, "container runtime down on one node at +15s"),
    "cni-down": Scenario(cni_down, 0.0, "network plugin not ready on one node at +15s"),
    "pressure": Scenario(pressure, 0.0, "disk, memory and PID pressure on three nodes"),
    "flapping": Scenario(flapping, 0.0, "one node cut off for 70s every 2 minutes"),
    "clock-skew": Scenario(clock_skew, 0.0, "one node's clock 95s behind, another 40s ahead"),
    "slow-lease": Scenario(slow_lease, 0.0, "one kubelet's renewals keep failing (late leases)"),
    "cordon": Scenario(cordon, 0.0, "a node cordoned at +20s"),
    "cert-rotation": Scenario(cert_rotation, 0.0, "a kubelet rotates its client certificate at +20s"),
    "churn": Scenario(churn, 0.0, "a node deleted every 90s and a new one joining"),
}


def scenario_names() -> list[str]:
    return list(SCENARIOS)


@dataclass
class Plan:
    parts: list[Scenario] = field(default_factory=list)

    @property
    def history(self) -> float:
        return max((s.history for s in self.parts), default=0.0)

    def resolve(self, fleet: ScenarioFleet, picker: Picker) -> list[Step]:
        steps: list[Step] = []
        for s in self.parts:
            steps.extend(s.build(fleet, picker))
        steps.sort(key=lambda st: st[0])
        return steps


def plan(name: str, nodes: int = 0) -> Plan:
    """The plan for ``name`` (parts joined with ``+``). Raises ValueError for an unknown name."""
    parts = []
    for part in (name or "steady").split("+"):
        part = part.strip()
        if part not in SCENARIOS:
            raise ValueError(f"unknown scenario {part!r}; one of: {', '.join(SCENARIOS)} (join with +)")
        parts.append(SCENARIOS[part])
    return Plan(parts)
