"""DemoSource: the dashboard's feed from the embedded simulated fleet (no cluster, no port).

It plays the part of a watch client: the fleet's current objects arrive first as a list (then a
``SYNCED`` per resource), then every change the fleet emits, received a few tens of milliseconds
after it happened (a deterministic delivery delay that keeps each resource's order, as one watch
stream per resource does). Virtual time starts at the fleet's start and runs at ``speed``.

The kubelet client certificate NotAfter of every node is handed to the state as a remembered
"cert cache": a nodewatch that had watched this cluster would have learned them from CSRs that
the CSR cleaner has long deleted.
"""

from __future__ import annotations

import heapq
import random
import threading

from ..core.clock import VirtualClock
from ..core.fleet import FleetState
from ..core.settings import Settings
from ..core.views import RESOURCES
from ..sim.fleet import SimFleet

TICK_SECONDS = 0.1
"""Wall-clock period of the feeding thread."""
DELIVERY_DELAY = (0.01, 0.06)
"""Virtual seconds between a change in the fleet and its arrival at the dashboard."""
CERT_CACHE_SOURCE = "cert cache"


class DemoSource:
    """A ``Source`` over a ``SimFleet``; see the module docstring."""

    def __init__(self, settings: Settings | None = None, nodes: int = 30, scenario: str = "incident",
                 seed: int = 1, speed: float = 1.0, recorder=None) -> None:
        base = settings or Settings()
        # The simulated controllers run with the user's settings, so the two agree.
        self.fleet = SimFleet(nodes=nodes, scenario=scenario, seed=seed, settings=base)
        state_settings = base if base.server_version else base.with_server_version(self.fleet.server_version)
        self.state = FleetState(state_settings)
        self.clock = VirtualClock(self.fleet.now, speed=speed)
        self.replay = None
        self.name = f"demo: {scenario}, {nodes} nodes, x{speed:g}"
        self.recorder = recorder
        self._rng = random.Random(f"nodewatch-demo/{seed}")
        self._pending: list[tuple[float, int, str, str, dict]] = []
        self._last_recv: dict[str, float] = {}
        self._seq = 0
        self._lock = threading.Lock()
        self._listed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fleet.subscribe(self._sink)

    # --- Source protocol ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._advance(self.fleet.now)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="nodewatch-demo", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)
        self._thread = None

    def focus_node(self, node: str | None) -> None:
        """The demo already delivers every pod and event."""

    def advance_to(self, t: float) -> None:
        """Headless: step the fleet to virtual time ``t`` and apply what arrived by then."""
        self._advance(t)
        if self._thread is None:
            self.clock.seek(max(t, self.fleet.start))

    # --- feeding --------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self._advance(self.clock.now())
            except Exception as exc:  # noqa: BLE001 - the demo must not take the dashboard down
                self.state.problem(self.clock.now(), "demo", f"{type(exc).__name__}: {exc}")

    def _sink(self, resource: str, etype: str, obj: dict, t: float) -> None:
        recv = max(t + self._rng.uniform(*DELIVERY_DELAY), self._last_recv.get(resource, t))
        self._last_recv[resource] = recv
        self._seq += 1
        heapq.heappush(self._pending, (recv, self._seq, resource, etype, obj))

    def _advance(self, t: float) -> None:
        with self._lock:
            if not self._listed:
                self._list()
            if t > self.fleet.now:
                self.fleet.step_to(t)
            pending = self._pending
            apply = self.state.apply
            rec = self.recorder
            while pending and pending[0][0] <= t:
                recv, _, resource, etype, obj = heapq.heappop(pending)
                apply(resource, etype, obj, received_at=recv)
                if rec is not None:
                    rec.write(resource, etype, obj, recv)

    def _list(self) -> None:
        t = self.fleet.now
        rec = self.recorder
        for resource in RESOURCES:
            for obj in self.fleet.objects(resource):
                self.state.apply(resource, "ADDED", obj, received_at=t, listing=True)
                if rec is not None:
                    rec.write(resource, "ADDED", obj, t, listing=True)
            self.state.apply(resource, "SYNCED", None, received_at=t, listing=True)
            if rec is not None:
                rec.write(resource, "SYNCED", None, t, listing=True)
        for node, not_after in sorted(self.fleet.cert_cache().items()):
            self.state.remember_cert(node, not_after, CERT_CACHE_SOURCE)
            if rec is not None and hasattr(rec, "write_cert"):
                rec.write_cert(node, not_after, CERT_CACHE_SOURCE, t)  # so a replay knows them too
        self._listed = True
