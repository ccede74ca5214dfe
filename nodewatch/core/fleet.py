"""The fleet state: watch events in, per-node heartbeat views out.

Every source (live cluster, replay, simulation) feeds ``FleetState.apply`` with the same
``(resource, type, object, received_at)`` tuples; the dashboard and ``status`` read
``FleetState.evaluate(now)``. The state is thread-safe (one lock): sources apply from their
threads, the UI reads from its own.

Views are cached per node and re-evaluated only when the node's objects changed or ``now`` crosses
the next threshold the rules know of (Late, Overdue, eviction deadline), so a tick of a
65,000-node fleet costs only what changed.
"""

from __future__ import annotations

import copy
import heapq
import math
import threading
from collections import deque
from typing import Any, Iterable

from sortedcontainers import SortedKeyList

from .causes import likely_causes
from .objects import (
    BadObject,
    CSRRecord,
    EventRecord,
    NodeRecord,
    PodRecord,
    csr_from_dict,
    event_from_dict,
    lease_from_dict,
    node_from_dict,
    pod_from_dict,
)
from .rules import (
    KUBELET_CLIENT_SIGNER,
    NODE_USER_PREFIX,
    PRESSURE_CONDITIONS,
    NodeState,
    all_zones_full,
    eviction_taints,
    node_eviction_deadline,
    node_state,
    pod_eviction_at,
    renew_interval,
    with_default_tolerations,
    zone_state,
    zone_taint_rate,
)
from .settings import Settings
from .views import (  # noqa: F401 - re-exported: readers import them from here too
    AT_RISK_STATES,
    EVENT_TYPES,
    MAX_EVENTS_PER_NODE,
    MAX_TIMELINE,
    RESOURCES,
    CertInfo,
    FleetView,
    LeaseTrack,
    NodeView,
    PodView,
    Problem,
    WatchHealth,
    ZoneView,
)


class FleetState:
    """The heart of nodewatch; see the module docstring."""

    def __init__(self, settings: Settings | None = None, *, silence_seconds: float | None = None) -> None:
        self.settings = settings or Settings()
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeRecord] = {}
        self.leases: dict[str, LeaseTrack] = {}
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self.events: dict[tuple[str, str], EventRecord] = {}
        self.events_by_node: dict[str, set[tuple[str, str]]] = {}
        self.certs: dict[str, CertInfo] = {}
        self.health: dict[str, WatchHealth] = {}
        self.problems: deque[Problem] = deque(maxlen=200)
        self.timelines: dict[str, deque[tuple[float, str]]] = {}
        self.synced: set[str] = set()
        self.generation = 0
        self.last_received: float | None = None
        self.silence_seconds = silence_seconds
        """Lease stream silent this long (no event, no bookmark) = the dashboard may be blind.
        None: 2 x the renew interval."""
        self._views: dict[str, NodeView] = {}
        self._dirty: set[str] = set()
        self._order: SortedKeyList = SortedKeyList(key=_sort_key)
        """Worst first. A sorted list of sublists: moving a node costs O(log n), not a memmove of
        the whole fleet (which made a 20,000-node zone outage cost seconds)."""
        self._counts: dict[NodeState, int] = {st: 0 for st in NodeState}
        self._tally: dict[str, list[int]] = {}
        self._due: list[tuple[float, str]] = []
        self._blind_cached: bool | None = None

    # --- feeding --------------------------------------------------------------------------

    def set_settings(self, settings: Settings) -> None:
        with self.lock:
            self.settings = settings
            self._dirty.update(self.nodes)
            self.generation += 1

    def apply(self, resource: str, etype: str, obj: Any, received_at: float | None = None,
              listing: bool = False) -> bool:
        """Apply one watch event. Returns False (and records a Problem) when it cannot be used.

        ``received_at`` is when nodewatch received the event (None: unknown, as in a kubectl
        log). ``listing`` marks items of an initial list or relist, whose renewals happened at an
        unknown time before they were received.
        """
        with self.lock:
            try:
                return self._apply(resource, etype, obj, received_at, listing)
            except BadObject as exc:
                self.problem(received_at, f"{resource} {etype}", str(exc))
                return False
            except Exception as exc:  # noqa: BLE001 - the cluster must never crash the dashboard
                self.problem(received_at, f"{resource} {etype}", f"{type(exc).__name__}: {exc}")
                return False

    def apply_many(self, items: Iterable[tuple[str, str, Any, float | None, bool]]) -> int:
        ok = 0
        with self.lock:
            for resource, etype, obj, received_at, listing in items:
                ok += self.apply(resource, etype, obj, received_at, listing)
        return ok

    def problem(self, at: float | None, where: str, message: str) -> None:
        with self.lock:
            self.problems.append(Problem(at, where, message[:500]))
            self.generation += 1

    def update_health(self, resource: str, **changes: Any) -> WatchHealth:
        with self.lock:
            h = self.health.get(resource)
            if h is None:
                h = self.health[resource] = WatchHealth(resource)
            for k, v in changes.items():
                setattr(h, k, v)
            self.generation += 1
            if resource == "leases":
                self._dirty.update(self.nodes)
            return h

    def _apply(self, resource: str, etype: str, obj: Any, received_at: float | None, listing: bool) -> bool:
        if received_at is not None:
            self.last_received = received_at if self.last_received is None else max(self.last_received, received_at)
            h = self.health.get(resource)
            if h is not None:
                h.last_activity = received_at
        if etype == "SYNCED":
            self.synced.add(resource)
            self.generation += 1
            return True
        if etype == "BOOKMARK":
            return True
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise BadObject(f"unknown event type {etype!r}")
        handler = _HANDLERS.get(resource)
        if handler is None:
            raise BadObject(f"unknown resource {resource!r}")
        handler(self, etype, obj, received_at, listing)
        self.generation += 1
        return True

    def _timeline(self, node: str, t: float | None, text: str) -> None:
        if t is None:
            return
        tl = self.timelines.get(node)
        if tl is None:
            tl = self.timelines[node] = deque(maxlen=MAX_TIMELINE)
        tl.append((t, text))

    def _on_node(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = node_from_dict(obj)
        name = rec.name
        if etype == "DELETED":
            # A deleted node is forgotten entirely (its timeline and certificate date too): a node
            # registering later under the same name is a new machine with a new kubelet. Its pods
            # and events leave with their own DELETED events.
            self.nodes.pop(name, None)
            self.timelines.pop(name, None)
            self.certs.pop(name, None)
            self._dirty.add(name)
            return
        old = self.nodes.get(name)
        self.nodes[name] = rec
        self._dirty.add(name)
        self._node_timeline(old, rec, received_at)

    def _node_timeline(self, old: NodeRecord | None, new: NodeRecord, received_at: float | None) -> None:
        if old is None:
            return  # what a node looked like when first seen is in its record; the timeline keeps changes
        r_old = old.conditions.get("Ready") if old else None
        r_new = new.conditions.get("Ready")
        if r_new is not None and (r_old is None or r_old.status != r_new.status):
            when = r_new.last_transition or received_at
            was = r_old.status if r_old else "?"
            self._timeline(new.name, when, f"Ready {was} -> {r_new.status} ({r_new.reason or 'no reason'})")
        old_keys = {(t.key, t.effect) for t in old.taints} if old else set()
        for t in new.taints:
            if (t.key, t.effect) not in old_keys:
                self._timeline(new.name, t.time_added or received_at, f"taint added {t.key}:{t.effect}")
        new_keys = {(t.key, t.effect) for t in new.taints}
        for key, effect in old_keys - new_keys:
            self._timeline(new.name, received_at, f"taint removed {key}:{effect}")

    def _on_lease(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = lease_from_dict(obj)
        if rec.namespace and rec.namespace != "kube-node-lease":
            return
        name = rec.name
        if etype == "DELETED":
            self.leases.pop(name, None)
            self._dirty.add(name)
            return
        duration = rec.duration_seconds or self.settings.lease_duration_seconds
        track = self.leases.get(name)
        advanced = track is None or (
            rec.renew_time is not None and (track.renew_time is None or rec.renew_time > track.renew_time)
        )
        if track is None:
            track = self.leases[name] = LeaseTrack(rec.renew_time, None, None, duration, rec.holder)
        track.duration = duration
        track.holder = rec.holder
        if advanced and rec.renew_time is not None:
            known = received_at is not None and not listing and "leases" in self.synced
            track.renew_time = rec.renew_time
            if known:
                track.observed_at = received_at
            elif received_at is not None:
                # Listed: renewed at some unknown time before we received it. renewTime is on the
                # node's clock, so it may even be "in the future"; never later than the receipt.
                track.observed_at = min(rec.renew_time, received_at)
            else:
                track.observed_at = rec.renew_time
            if known:  # a listed lease was renewed at some unknown earlier time: no skew to learn
                track.skew = received_at - rec.renew_time
            track.renewals += 1
            if self._renewed_on_time(name, track):
                return
        elif rec.renew_time is None:
            track.renew_time = None
            track.observed_at = None
        self._dirty.add(name)

    def _renewed_on_time(self, name: str, track: LeaseTrack) -> bool:
        """The hot path: a Ready node renewed its lease. Only the lease fields of its view move;
        its state, place in the order and zone tally stay as they are."""
        v = self._views.get(name)
        if (v is None or v.state is not NodeState.READY or v.lease_observed_at is None
                or self._blind_cached or name in self._dirty or track.observed_at is None):
            return False
        v.lease_observed_at = track.observed_at
        v.skew = track.skew
        v.lease_duration = track.duration
        nxt = track.observed_at + 2 * renew_interval(track.duration)
        if v.cert_not_after is not None and v.cert_not_after > track.observed_at:
            nxt = min(nxt, v.cert_not_after)
        v.next_change = nxt
        heapq.heappush(self._due, (nxt, name))
        return True

    def _on_pod(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = pod_from_dict(obj)
        key = rec.key
        old = self.pods.get(key)
        if old is not None and (etype == "DELETED" or old.node_name != rec.node_name):
            _unindex(self.pods_by_node, old.node_name, key)
        if etype == "DELETED":
            self.pods.pop(key, None)
            return
        self.pods[key] = rec
        if rec.node_name:
            self.pods_by_node.setdefault(rec.node_name, set()).add(key)

    def _on_event(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = event_from_dict(obj)
        key = rec.key
        if etype == "DELETED":
            old = self.events.pop(key, None)
            if old is not None:
                for node in _event_nodes(old):
                    _unindex(self.events_by_node, node, key)
            return
        self.events[key] = rec
        for node in _event_nodes(rec):
            bucket = self.events_by_node.setdefault(node, set())
            bucket.add(key)
            if len(bucket) > MAX_EVENTS_PER_NODE:
                oldest = min(bucket, key=lambda k: self.events[k].time or 0.0 if k in self.events else 0.0)
                bucket.discard(oldest)

    def _on_csr(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        if etype == "DELETED":
            return  # the CSR cleaner deletes issued CSRs after 1h; the NotAfter we learned stays
        rec = csr_from_dict(obj)
        self.learn_cert(rec)

    def learn_cert(self, rec: CSRRecord, source: str | None = None) -> None:
        """Remember a kubelet client certificate's NotAfter (the newest per node wins)."""
        if rec.signer != KUBELET_CLIENT_SIGNER or not rec.username.startswith(NODE_USER_PREFIX):
            return
        if rec.not_after is None:
            return
        node = rec.username[len(NODE_USER_PREFIX):]
        cur = self.certs.get(node)
        if cur is None or rec.not_after > cur.not_after:
            self.certs[node] = CertInfo(rec.not_after, source or f"CSR {rec.name}")
            self._dirty.add(node)

    def remember_cert(self, node: str, not_after: float, source: str) -> None:
        """A NotAfter learned elsewhere (the local cache, a TLS probe, kubelet metrics)."""
        with self.lock:
            cur = self.certs.get(node)
            if cur is None or not_after > cur.not_after:
                self.certs[node] = CertInfo(not_after, source)
                self._dirty.add(node)
                self.generation += 1

    # --- keyframes (replay) ----------------------------------------------------------------

    def snapshot(self, prev: dict | None = None) -> dict:
        """A copy of everything ``FleetState.apply`` builds, sharing the immutable-by-convention records.

        Records (NodeRecord, PodRecord, EventRecord, CertInfo) are replaced, never mutated, by the core,
        so sharing them is safe; LeaseTrack, WatchHealth, sets and deques are mutated and are copied.
        ``prev`` (the previous keyframe) lets unchanged timelines share their tuples.
        """
        with self.lock:
            prev_tl = prev["timelines"] if prev else {}
            timelines = {}
            for name, dq in self.timelines.items():
                old = prev_tl.get(name)
                if old is not None and len(old) == len(dq) and (not dq or old[-1] is dq[-1]):
                    timelines[name] = old
                else:
                    timelines[name] = tuple(dq)
            return {
                "nodes": dict(self.nodes),
                "leases": {k: copy.copy(v) for k, v in self.leases.items()},
                "pods": dict(self.pods),
                "pods_by_node": {k: frozenset(v) for k, v in self.pods_by_node.items()},
                "events": dict(self.events),
                "events_by_node": {k: frozenset(v) for k, v in self.events_by_node.items()},
                "certs": dict(self.certs),
                "health": {k: copy.copy(h) for k, h in self.health.items()},
                "problems": tuple(self.problems),
                "timelines": timelines,
                "synced": frozenset(self.synced),
                "last_received": self.last_received,
            }


    def restore(self, snap: dict | None) -> None:
        """Make ``s`` hold exactly the snapshot (None: empty), in place so its readers keep their reference."""
        with self.lock:
            if snap is None:
                self.nodes, self.leases, self.pods, self.pods_by_node = {}, {}, {}, {}
                self.events, self.events_by_node, self.certs, self.health = {}, {}, {}, {}
                self.problems.clear()
                self.timelines, self.synced, self.last_received = {}, set(), None
            else:
                self.nodes = dict(snap["nodes"])
                self.leases = {k: copy.copy(v) for k, v in snap["leases"].items()}
                self.pods = dict(snap["pods"])
                self.pods_by_node = {k: set(v) for k, v in snap["pods_by_node"].items()}
                self.events = dict(snap["events"])
                self.events_by_node = {k: set(v) for k, v in snap["events_by_node"].items()}
                self.certs = dict(snap["certs"])
                self.health = {k: copy.copy(h) for k, h in snap["health"].items()}
                self.problems.clear()
                self.problems.extend(snap["problems"])
                self.timelines = {k: deque(v, maxlen=MAX_TIMELINE) for k, v in snap["timelines"].items()}
                self.synced = set(snap["synced"])
                self.last_received = snap["last_received"]
            # Every private attribute is a cache derived from the data above (views, order, counts...):
            # take them from a fresh state, whatever they are, and mark every node for re-evaluation.
            fresh = FleetState(self.settings, silence_seconds=self.silence_seconds)
            for name, value in vars(fresh).items():
                if name.startswith("_"):
                    setattr(self, name, value)
            self._dirty = set(self.nodes)
            self.generation += 1

    # --- judging ---------------------------------------------------------------------------

    def leases_blind(self, now: float) -> tuple[bool, str]:
        """Is the lease stream down or silent? Then no node may be blamed for its lease's age."""
        h = self.health.get("leases")
        if h is None:
            return False, ""  # no live stream tracked (replay, tests): the data is what it is
        if h.forbidden:
            return True, f"no permission to watch leases ({h.last_error})"
        if not h.connected:
            since = f" since {_ago(now, h.down_since)}" if h.down_since else ""
            return True, f"lease stream down{since}: {h.last_error or 'connecting'}"
        if not h.synced:
            return True, "lease stream listing"
        silence = self.silence_seconds
        if silence is None:
            silence = 2 * renew_interval(self.settings.lease_duration_seconds)
        if self.leases and h.last_activity is not None and now - h.last_activity > silence:
            return True, f"lease stream silent for {now - h.last_activity:.0f}s (no event, no bookmark)"
        return False, ""

    def _view(self, name: str, now: float, blind: bool, grace: float) -> NodeView:
        s = self.settings
        rec = self.nodes[name]
        track = self.leases.get(name)
        ready = rec.ready
        duration = track.duration if track else s.lease_duration_seconds
        observed = None if (blind or track is None) else track.observed_at
        lease_age = None if observed is None else now - observed
        ev_taints = eviction_taints(rec.taints)
        deadline = node_eviction_deadline(rec.taints, s.toleration_seconds)
        state = node_state(ready=ready, lease_age=lease_age, grace=grace, lease_duration=duration,
                           eviction_taint=bool(ev_taints), eviction_deadline=deadline, now=now)
        cert = self.certs.get(name)
        cert_not_after = cert.not_after if cert else None
        causes = likely_causes(rec, state, lease_age=lease_age, has_lease=track is not None, grace=grace,
                               cert_not_after=cert_not_after, now=now)
        # When could the state change with time alone?
        nxt = math.inf
        late_at = overdue_at = None
        if observed is not None:
            late_at = observed + 2 * renew_interval(duration)
            overdue_at = observed + grace
        if state is NodeState.EVICTING and deadline is not None:
            nxt = deadline
        elif state is NodeState.READY and observed is not None:
            nxt = late_at if now <= late_at else overdue_at  # type: ignore[assignment]
        elif state is NodeState.LATE and overdue_at is not None:
            nxt = overdue_at
        if cert_not_after is not None and cert_not_after > now:
            nxt = min(nxt, cert_not_after)
        # When did it start?
        rc = rec.conditions.get("Ready")
        since: float | None = None
        if state in (NodeState.EVICTED, NodeState.EVICTING):
            since = min((t.time_added for t in ev_taints if t.time_added is not None), default=None)
        elif state in (NodeState.UNKNOWN, NodeState.NOT_READY):
            since = rc.last_transition if rc else None
        elif state is NodeState.OVERDUE:
            since = overdue_at
        elif state is NodeState.LATE:
            since = late_at
        elif rc is not None:
            since = rc.last_transition
        if state is NodeState.READY:
            sort_deadline = math.inf
        elif state in (NodeState.EVICTING, NodeState.EVICTED):
            sort_deadline = deadline if deadline is not None else math.inf
        elif state in (NodeState.OVERDUE, NodeState.LATE) and overdue_at is not None:
            sort_deadline = overdue_at
        else:
            sort_deadline = since if since is not None else math.inf
        return NodeView(
            name=name,
            zone=rec.zone,
            state=state,
            ready=ready,
            lease_observed_at=observed,
            lease_duration=duration,
            grace=grace,
            skew=track.skew if track else None,
            eviction_at=deadline,
            taints=rec.taints,
            cordoned=rec.unschedulable,
            pressure=tuple(c for c in PRESSURE_CONDITIONS
                           if (cc := rec.conditions.get(c)) is not None and cc.status == "True"),
            network_unavailable=(nu := rec.conditions.get("NetworkUnavailable")) is not None and nu.status == "True",
            cert_not_after=cert_not_after,
            kubelet_version=rec.kubelet_version,
            causes=tuple(causes),
            state_since=since,
            next_change=nxt,
            sort_deadline=sort_deadline,
            excluded=rec.exclude_disruption,
        )

    def evaluate(self, now: float) -> FleetView:
        """The whole fleet at ``now``, worst first.

        Only views whose node changed, or whose next rule threshold has passed, are recomputed;
        the worst-first order, the state counts and the zone tallies are kept up to date
        incrementally, so a tick of a 65,000-node fleet costs what changed, not the fleet's size.
        Views are updated in place: a FleetView reflects the state of its own ``evaluate`` call
        until the next one.
        """
        with self.lock:
            blind, reason = self.leases_blind(now)
            if blind != self._blind_cached:
                self._blind_cached = blind
                self._dirty.update(self.nodes)
                self._dirty.update(self._views)
            grace = self.settings.grace
            todo = self._dirty
            self._dirty = set()
            due = self._due
            views = self._views
            while due and due[0][0] <= now:
                t, name = heapq.heappop(due)
                v = views.get(name)
                if v is not None and v.next_change == t:
                    todo.add(name)
            for name in todo:
                self._refresh(name, now, blind, grace)
            order = self._order
            counts = dict(self._counts)
            zones = self._zone_views()
            bad = len(order) - counts[NodeState.READY] - counts[NodeState.LATE]
            limit = self.settings.grace + 2 * self.settings.monitor_period_seconds
            controller_suspect = any(
                v.state is NodeState.OVERDUE and v.lease_observed_at is not None and now - v.lease_observed_at > limit
                for v in order[:bad]
            )
            at_risk = 0
            for v in order:
                if v.state not in AT_RISK_STATES:
                    break
                for key in self.pods_by_node.get(v.name, ()):
                    p = self.pods.get(key)
                    if p is not None and p.owner_kind == "StatefulSet":
                        at_risk += 1
            return FleetView(
                at=now,
                settings=self.settings,
                nodes=list(order),
                zones=zones,
                counts=counts,
                all_zones_full=all_zones_full(z.state for z in zones),
                leases_blind=blind,
                blind_reason=reason,
                health={k: WatchHealth(**{f: getattr(h, f) for f in h.__slots__}) for k, h in self.health.items()},
                generation=self.generation,
                statefulset_at_risk=at_risk,
                controller_suspect=controller_suspect,
            )

    def _refresh(self, name: str, now: float, blind: bool, grace: float) -> None:
        """Recompute one node's view and move it within the order, counts and zone tallies."""
        views = self._views
        old = views.get(name)
        if name not in self.nodes:
            if old is not None:
                self._unplace(old)
                del views[name]
            return
        new = self._view(name, now, blind, grace)
        if old is None:
            views[name] = new
            self._place(new)
            cur = new
        elif _sort_key(old) == _sort_key(new):
            # Same place in the order (and so the same state): only the zone tally may move.
            self._tally_add(old, -1)
            for f in _VIEW_FIELDS:
                setattr(old, f, getattr(new, f))
            self._tally_add(old, 1)
            cur = old
        else:
            self._unplace(old)
            for f in _VIEW_FIELDS:
                setattr(old, f, getattr(new, f))
            self._place(old)
            cur = old
        if cur.next_change != math.inf:
            heapq.heappush(self._due, (cur.next_change, name))

    def _place(self, v: NodeView) -> None:
        self._order.add(v)
        self._counts[v.state] += 1
        self._tally_add(v, 1)

    def _unplace(self, v: NodeView) -> None:
        self._order.remove(v)
        self._counts[v.state] -= 1
        self._tally_add(v, -1)

    def _tally_add(self, v: NodeView, n: int) -> None:
        if v.excluded:
            return
        t = self._tally.get(v.zone)
        if t is None:
            t = self._tally[v.zone] = [0, 0]
        t[0 if v.ready == "True" else 1] += n
        if t[0] == 0 and t[1] == 0:
            del self._tally[v.zone]

    def _zone_views(self) -> list[ZoneView]:
        s = self.settings
        states = {z: zone_state(r, nr, s.unhealthy_zone_threshold) for z, (r, nr) in self._tally.items()}
        full = all_zones_full(states.values())
        out = []
        for z in sorted(self._tally):
            r, nr = self._tally[z]
            out.append(ZoneView(
                name=z, state=states[z], nodes=r + nr, ready=r, not_ready=nr,
                taint_rate=zone_taint_rate(states[z], r + nr, all_full=full, eviction_rate=s.eviction_rate,
                                           secondary_eviction_rate=s.secondary_eviction_rate,
                                           large_cluster_threshold=s.large_cluster_threshold),
            ))
        return out

    def node_view(self, name: str, now: float) -> NodeView | None:
        with self.lock:
            if name not in self.nodes:
                return None
            blind, _ = self.leases_blind(now)
            return self._view(name, now, blind, self.settings.grace)

    def pods_on(self, node: str, now: float) -> list[PodView]:
        """The node's pods with their own eviction countdowns and StatefulSet risk."""
        with self.lock:
            rec = self.nodes.get(node)
            view = self.node_view(node, now)
            taints = rec.taints if rec else ()
            out = []
            for key in sorted(self.pods_by_node.get(node, ())):
                p = self.pods.get(key)
                if p is None:
                    continue
                tolerations = with_default_tolerations(p.tolerations, self.settings.toleration_seconds)
                at = pod_eviction_at(taints, tolerations)
                risk = p.owner_kind == "StatefulSet" and view is not None and view.state in AT_RISK_STATES
                out.append(PodView(p.namespace, p.name, p.owner_kind, p.owner_name, p.phase, p.terminating,
                                   at, risk, p.disruption_target))
            out.sort(key=lambda pv: (not pv.statefulset_risk, pv.eviction_at if pv.eviction_at is not None else math.inf,
                                     pv.namespace, pv.name))
            return out

    def events_for(self, node: str) -> list[EventRecord]:
        """Kubelet and controller events about the node, newest first."""
        with self.lock:
            evs = [self.events[k] for k in self.events_by_node.get(node, ()) if k in self.events]
        evs.sort(key=lambda e: e.time or 0.0, reverse=True)
        return evs

    def timeline_for(self, node: str, now: float) -> list[tuple[float, str]]:
        """What happened to the node, and what the rules say happens next, in time order."""
        with self.lock:
            items = list(self.timelines.get(node, ()))
            rec = self.nodes.get(node)
            if rec is not None:
                known = {text for _, text in items}
                rc = rec.conditions.get("Ready")
                if rc is not None and rc.last_transition is not None and not any("Ready" in k for k in known):
                    items.append((rc.last_transition, f"Ready is {rc.status} ({rc.reason or 'no reason'}) since"))
                for t in rec.taints:
                    if t.time_added is not None and not any(t.key in k for k in known):
                        items.append((t.time_added, f"taint {t.key}:{t.effect} added"))
            view = self.node_view(node, now)
            track = self.leases.get(node)
            if track is not None and track.renew_time is not None:
                items.append((track.observed_at or track.renew_time, "last lease renewal seen"))
            if view is not None:
                if view.lease_observed_at is not None and view.ready == "True":
                    items.append((view.lease_observed_at + view.grace,
                                  "grace ends: the controller marks Ready=Unknown at its next pass"))
                if view.eviction_at is not None:
                    items.append((view.eviction_at, "eviction due (default toleration ends)"))
        items.sort(key=lambda x: x[0])
        return items


_VIEW_FIELDS = tuple(NodeView.__slots__)


def _sort_key(v: NodeView) -> tuple:
    return (v.state.rank, v.sort_deadline, v.name)


def _unindex(index: dict[str, set], node: str, key: tuple[str, str]) -> None:
    """Drop ``key`` from a per-node index, and the node's entry once it is empty."""
    bucket = index.get(node)
    if bucket is not None:
        bucket.discard(key)
        if not bucket:
            del index[node]


def _event_nodes(e: EventRecord) -> list[str]:
    nodes = []
    if e.object_kind == "Node" and e.object_name:
        nodes.append(e.object_name)
    host = e.source.split(", ", 1)[1] if ", " in e.source else ""
    if host and host not in nodes:
        nodes.append(host)
    return nodes


def _ago(now: float, t: float) -> str:
    return f"{max(0, now - t):.0f}s ago"


_HANDLERS = {
    "nodes": FleetState._on_node,
    "leases": FleetState._on_lease,
    "pods": FleetState._on_pod,
    "events": FleetState._on_event,
    "certificatesigningrequests": FleetState._on_csr,
}
