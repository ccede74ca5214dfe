"""A recorder of everything a SimFleet emits, with the virtual time, for the simulator's tests."""

from __future__ import annotations

from nodewatch.sim.fleet import SimFleet


class Tape:
    """Everything a fleet emits, with its virtual time."""

    def __init__(self, fleet: SimFleet) -> None:
        self.items: list[tuple[float, str, str, dict]] = []
        fleet.subscribe(lambda r, e, o, t: self.items.append((t, r, e, o)))

    def of(self, resource: str, name: str | None = None) -> list[tuple[float, str, dict]]:
        return [(t, e, o) for t, r, e, o in self.items
                if r == resource and (name is None or o["metadata"]["name"] == name)]

    def renewals(self, node: str) -> list[float]:
        return [t for t, e, o in self.of("leases", node) if e == "MODIFIED"]

    def ready_became(self, node: str, status: str) -> float | None:
        for t, _e, o in self.of("nodes", node):
            ready = next((c for c in o["status"]["conditions"] if c["type"] == "Ready"), None)
            if ready and ready["status"] == status:
                return t
        return None

    def taint_added(self, node: str, key: str, effect: str = "NoExecute") -> float | None:
        for t, _e, o in self.of("nodes", node):
            for taint in o["spec"].get("taints", []):
                if taint["key"] == key and taint["effect"] == effect:
                    return t
        return None
