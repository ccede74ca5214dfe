"""A fake Source for the dashboard's tests: a crafted incident in a FleetState, a ManualClock.

The dashboard only reads ``source.state`` / ``source.clock`` / ``source.replay`` and calls
``focus_node``; this fake records those calls so tests can check them, and never runs a thread.
"""

from __future__ import annotations

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_NOT_READY, TAINT_UNREACHABLE
from nodewatch.core.settings import Settings
from nodewatch.core.views import RESOURCES
from support.factories import T0, csr, event, lease, node, pod, taint


class FakeReplay:
    """ReplayControls over a ManualClock: seek/step set the clock; nothing plays by itself."""

    def __init__(self, clock: ManualClock, start: float, end: float, changes: list[float] | None = None) -> None:
        self.clock = clock
        self.start = start
        self.end = end
        self.changes = sorted(changes or [])
        self._playing = False
        self._speed = 1.0
        self.calls: list[tuple] = []
        self.next_change_calls = 0
        self.complete = True

    def position(self) -> float:
        return self.clock.now()

    def play(self) -> None:
        self.calls.append(("play",))
        self._playing = True

    def pause(self) -> None:
        self.calls.append(("pause",))
        self._playing = False

    @property
    def playing(self) -> bool:
        return self._playing

    @property
    def speed(self) -> float:
        return self._speed

    def set_speed(self, speed: float) -> None:
        self.calls.append(("speed", speed))
        self._speed = speed

    def seek(self, t: float) -> None:
        self.calls.append(("seek", t))
        self.clock.set(t)

    def step(self, seconds: float) -> None:
        self.calls.append(("step", seconds))
        self._playing = False
        self.clock.advance(seconds)

    def next_change(self) -> float | None:
        self.next_change_calls += 1
        pos = self.clock.now()
        return next((t for t in self.changes if t > pos), None)


class FakeSource:
    """A Source the test drives by hand."""

    def __init__(self, state: FleetState, clock: ManualClock, *, name: str = "fake: incident, 12 nodes",
                 replay: FakeReplay | None = None) -> None:
        self.name = name
        self.state = state
        self.clock = clock
        self.replay = replay
        self.focused: list[str | None] = []
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def focus_node(self, node_name: str | None) -> None:
        self.focused.append(node_name)


def feed(state: FleetState, objs: list[tuple[str, dict]], received: float = T0) -> FleetState:
    for resource, obj in objs:
        assert state.apply(resource, "ADDED", obj, received, listing=True), state.problems
    for r in RESOURCES:
        state.apply(r, "SYNCED", None, received)
    return state


def incident_objects(now: float = T0) -> list[tuple[str, dict]]:
    """Twelve nodes in three zones during an incident: one zone cut off, evictions pending."""
    objs: list[tuple[str, dict]] = []

    def add(n: dict, renew: float | None) -> None:
        objs.append(("nodes", n))
        if renew is not None:
            objs.append(("leases", lease(n["metadata"]["name"], renew)))

    for i in range(3):
        add(node(f"worker-a-{i}", zone="eu-1a", region="eu-1"), now - 3 - i)
    add(node("worker-a-late", zone="eu-1a", region="eu-1"), now - 25)
    # eu-1b: the whole zone unreachable for 170s; unreachable taints added 120s ago.
    for i in range(3):
        name = f"worker-b-{i}"
        add(node(name, "Unknown", zone="eu-1b", region="eu-1", reason="NodeStatusUnknown",
                 message="Kubelet stopped posting node status.", transition=now - 120,
                 taints=[taint(TAINT_UNREACHABLE, "NoExecute", now - 120), taint(TAINT_UNREACHABLE, "NoSchedule", now - 120)]),
            now - 170)
    # eu-1c: a mix.
    add(node("worker-c-runtime", "False", zone="eu-1c", region="eu-1", reason="KubeletNotReady",
             message="container runtime is down", transition=now - 400,
             taints=[taint(TAINT_NOT_READY, "NoExecute", now - 400)]), now - 2)
    add(node("worker-c-overdue", zone="eu-1c", region="eu-1"), now - 70)
    add(node("worker-c-cert", zone="eu-1c", region="eu-1"), now - 4)
    add(node("worker-c-mem", zone="eu-1c", region="eu-1", conditions={"MemoryPressure": "True"},
             taints=[taint("node.kubernetes.io/memory-pressure", "NoSchedule", now - 600)]), now - 5)
    add(node("worker-c-cordoned", zone="eu-1c", region="eu-1", unschedulable=True,
             taints=[taint("node.kubernetes.io/unschedulable", "NoSchedule", now - 900)]), now - 6)
    objs.append(("certificatesigningrequests", csr("csr-c-cert", "worker-c-cert", now + 5 * 86400)))
    objs.append(("certificatesigningrequests", csr("csr-a-0", "worker-a-0", now + 200 * 86400)))
    objs += [
        ("pods", pod("db-0", "worker-b-0", owner_kind="StatefulSet", owner_name="db", namespace="prod")),
        ("pods", pod("web-abc-1", "worker-b-0", namespace="prod")),
        ("pods", pod("cache-0", "worker-b-1", owner_kind="StatefulSet", owner_name="cache", namespace="prod")),
        ("pods", pod("agent-x", "worker-b-0", owner_kind="DaemonSet", owner_name="agent", namespace="kube-system",
                     tolerations=[{"operator": "Exists"}])),
        ("events", event("ev1", "worker-b-0", "NodeNotReady", "Node worker-b-0 status is now: NodeNotReady",
                         now - 118, component="node-controller")),
        ("events", event("ev2", "worker-b-0", "Starting", "Starting kubelet.", now - 86400)),
    ]
    return objs


def incident_state(now: float = T0) -> FleetState:
    state = FleetState(Settings(server_version="v1.33.2"))
    return feed(state, incident_objects(now), received=now)


def incident_source(now: float = T0, *, replay: bool = False) -> FakeSource:
    clock = ManualClock(now)
    rp = FakeReplay(clock, now - 300, now + 600, changes=[now + 30, now + 180]) if replay else None
    return FakeSource(incident_state(now), clock, replay=rp)


def big_state(n: int, now: float = T0, zones: int = 3) -> FleetState:
    """``n`` nodes, a few percent of them in trouble, for frame-time measurements."""
    state = FleetState(Settings(server_version="v1.33.2"))
    with state.lock:
        for i in range(n):
            z = f"zone-{i % zones}"
            name = f"node-{i:05d}"
            if i % 37 == 0:
                n_obj = node(name, "Unknown", zone=z, transition=now - 100,
                             taints=[taint(TAINT_UNREACHABLE, "NoExecute", now - 100 + (i % 50))])
                renew = now - 160
            else:
                n_obj = node(name, zone=z)
                renew = now - (i % 30)
            state.apply("nodes", "ADDED", n_obj, now, listing=True)
            state.apply("leases", "ADDED", lease(name, renew), now, listing=True)
        for r in RESOURCES:
            state.apply(r, "SYNCED", None, now)
    return state


