"""core/v1 Events as the real components write them: reasons, sources, aggregation, the 1h TTL."""

from __future__ import annotations

from . import objects
from .objects import fmt_time
from .schedule import PRIO_CONTROLLER
from .shapes import SimNode, SimPod, make_uid, public_copy
from .world import SimWorld

EVENT_TTL = 3600.0
"""kube-apiserver --event-ttl."""


class EventRecorder:
    """core/v1 Events, aggregated like client-go's correlator, deleted by the 1h TTL."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self.objects: dict[tuple[str, str], dict] = {}
        self._by_key: dict[tuple, tuple[str, str]] = {}
        self._names: set[str] = set()
        self.ttl = EVENT_TTL

    def node_event(self, node: SimNode, reason: str, message: str, *, component: str, controller: bool = False,
                   type_: str = "Normal") -> None:
        # kubelet events name the node with UID = its name; controller events carry the real UID
        inv = {"kind": "Node", "name": node.name, "uid": node.uid if controller else node.name, "apiVersion": "v1"}
        self.record(inv, reason, message, component=component, host=None if controller else node.name,
                    namespace="default", type_=type_)

    def pod_event(self, pod: SimPod, reason: str, message: str, *, component: str, type_: str = "Normal",
                  host: str | None = None) -> None:
        inv = {"kind": "Pod", "namespace": pod.wl.namespace, "name": pod.name, "uid": pod.uid, "apiVersion": "v1"}
        self.record(inv, reason, message, component=component, host=host, namespace=pod.wl.namespace, type_=type_)

    def record(self, involved: dict, reason: str, message: str, *, component: str, host: str | None = None,
               namespace: str = "default", type_: str = "Normal") -> None:
        world = self.world
        now = world.now
        agg = (namespace, involved.get("kind"), involved.get("name"), involved.get("uid"), reason, message,
               component, host, type_)
        existing = self._by_key.get(agg)
        if existing is not None and existing in self.objects:
            ev = self.objects[existing]
            ev["count"] += 1
            ev["lastTimestamp"] = fmt_time(now)
            ev["_updated"] = now
            world.emit("events", "MODIFIED", public_copy(ev))
            world.at(now + self.ttl, self.expire, existing, now, prio=PRIO_CONTROLLER)
            return
        ns_time = int(now * 1e9)
        name = f"{involved.get('name')}.{ns_time:x}"
        while name in self._names:
            ns_time += 1
            name = f"{involved.get('name')}.{ns_time:x}"
        self._names.add(name)
        ev = objects.event(name, namespace, involved, reason, message, at=now, component=component, host=host,
                           uid=make_uid(world.rng), type_=type_)
        ev["_updated"] = now
        key = (namespace, name)
        self.objects[key] = ev
        self._by_key[agg] = key
        world.emit("events", "ADDED", public_copy(ev))
        world.at(now + self.ttl, self.expire, key, now, prio=PRIO_CONTROLLER)

    def expire(self, key: tuple[str, str], written: float) -> None:
        ev = self.objects.get(key)
        if ev is None or ev["_updated"] != written:
            return  # updated since: a later TTL timer owns it
        del self.objects[key]
        self._names.discard(key[1])
        self.world.emit("events", "DELETED", public_copy(ev))

    def listing(self) -> list[dict]:
        return [public_copy(ev) for ev in self.objects.values()]
