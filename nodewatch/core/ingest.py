"""Watch events in: the part of ``FleetState`` that the sources feed.

Every source (live cluster, replay, simulation) calls ``apply`` with the same
``(resource, type, object, received_at)`` tuples. Each handler parses the object into a record of
``core/objects.py``, replaces the one it had (records are never mutated, so readers and keyframes
may share them), and marks the node for re-evaluation. A Ready node renewing its lease on time,
the event that is nearly all the traffic, replaces only its view, by one whose lease fields moved
(``Evaluator.renewed``).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import replace
from typing import Any, Iterable

from . import pod_tolerations
from .evaluation import Evaluator
from .evidence import UNDATED
from .fleet_data import Store
from .objects import (
    NODE_LEASE_NAMESPACE,
    BadObject,
    CSRRecord,
    EventRecord,
    LeaseRecord,
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
    NODE_CONTROLLER,
    NODE_USER_PREFIX,
    REGISTERED_NODE,
    keep_eviction_start,
    pod_eviction_at,
    renew_interval,
)
from .settings import Settings, writes_follow_renewals
from .views import (
    MAX_BEATS,
    MAX_EVENTS_PER_NODE,
    MAX_TIMELINE,
    PROBLEM_ERROR,
    PROBLEM_NOTICE,
    CertInfo,
    LeaseTrack,
    Problem,
    WatchHealth,
)
from .wire import _MISSING, _lease_record, _lease_seconds, _micro_time


class Ingest:
    """Part of ``FleetState``: feeding it. The only writer of the ``Store``; tells the evaluator
    which nodes changed, never touches its fields. Thread-safe: every entry point takes the
    store's lock (sources apply from their own threads)."""

    def __init__(self, store: Store, evaluator: Evaluator) -> None:
        self.store = store
        self.evaluator = evaluator

    def set_settings(self, settings: Settings) -> None:
        """New settings (a recording's, a server version learned); what the pods showed stays."""
        with self.store.lock:
            self.store.settings = replace(settings, learned_tolerations=self.store.settings.learned_tolerations)
            self.evaluator.mark_all(self.store.nodes)
            self.store.generation += 1

    def apply(self, resource: str, etype: str, obj: Any, received_at: float | None = None,
              listing: bool = False) -> bool:
        """Apply one watch event. Returns False (and records a Problem) when it cannot be used.

        ``received_at`` is when nodewatch received the event (None: unknown, as in a kubectl
        log). ``listing`` marks items of an initial list or relist, whose renewals happened at an
        unknown time before they were received.
        """
        with self.store.lock:
            try:
                return self._apply(resource, etype, obj, received_at, listing)
            except BadObject as exc:
                self.problem(received_at, f"{resource} {etype}", str(exc))
                return False
            except Exception as exc:  # noqa: BLE001 - the cluster must never crash the dashboard
                self.problem(received_at, f"{resource} {etype}", f"{type(exc).__name__}: {exc}")
                return False

    def listed(self, resource: str, name: str) -> None:
        """The list in progress gave this Node or Lease, whose event a one-shot read left out (a
        later one supersedes it): its SYNCED keeps it (``Store.relisted``)."""
        if resource in ("nodes", "leases"):
            with self.store.lock:
                _listed(self.store, resource, name)

    def apply_lease_watch(self, events: list[Any], received_at: float) -> None:
        """The Lease events of one read of the synced watch, as the typed decoder's structs
        (``TypedDecoder.decode_watch``), applied in order under one lock. The steady state's hot
        path (13,000 renewals a second at 130k nodes): a renewal of a known Lease by its holder,
        later than the last, sets its track in place and has the evaluator swap the view, as
        ``_on_lease`` does, without a record, a batch tuple or a call per event; every other
        event (a new Lease, a DELETED, a new holder, a renewTime that did not advance, a stream
        not synced) is made a record and applied the general way (``apply``) where it comes.
        tests/core/test_lease_watch.py holds the two ways equal."""
        st = self.store
        with st.lock:
            if "leases" not in st.synced:
                self._apply_structs(events, received_at)
                return
            leases = st.leases
            beats = st.beats
            renewed = self.evaluator.renewed
            mark = self.evaluator.mark
            default = st.settings.lease_duration_seconds
            given: Any = _MISSING  # the last leaseDurationSeconds read, and its duration (one in a fleet)
            duration = default
            fast = 0
            for ev in events:
                obj = ev.object
                meta = obj.metadata
                spec = obj.spec
                try:
                    track = leases.get(meta.name)
                    if (track is None or ev.type != "MODIFIED" or spec is None or track.unrenewed is not None
                            or meta.namespace != NODE_LEASE_NAMESPACE or spec.holderIdentity != track.holder):
                        raise LookupError
                    renew = _micro_time(spec.renewTime)
                    old = track.renew_time
                    if renew is None or (old is not None and renew <= old):
                        raise LookupError
                    name = meta.name
                except (LookupError, AttributeError, TypeError):
                    self._apply_structs((ev,), received_at)
                    continue
                try:
                    d = spec.leaseDurationSeconds
                    if d is not given or type(d) is not int:
                        given = d
                        duration = _lease_seconds(d) or default
                    track.duration = duration
                    track.observed_at = received_at
                    track.skew = received_at - renew
                    track.age_from = "receipt"
                    b = beats.get(name)
                    if b is None:
                        b = beats[name] = array("d")
                    b.append(received_at)
                    if len(b) > MAX_BEATS:
                        del b[0]
                    track.renew_time = renew
                    track.renewals += 1
                    if not renewed(name, track):
                        mark(name)
                    fast += 1
                except Exception as exc:  # noqa: BLE001 - the cluster must never crash the dashboard
                    self.problem(received_at, "leases MODIFIED", f"{type(exc).__name__}: {exc}")
            if fast:
                last = st.last_received
                st.last_received = received_at if last is None or received_at > last else last
                h = st.health.get("leases")
                if h is not None:
                    h.last_activity = received_at
                st.generation += fast

    def _apply_structs(self, events: Iterable[Any], received_at: float) -> None:
        """Lease structs the general way: each one's record (None: no name, nothing to apply)."""
        for ev in events:
            rec = _lease_record(ev.object)
            if rec is not None:
                self.apply("leases", ev.type, rec, received_at)

    def problem(self, at: float | None, where: str, message: str, kind: str = PROBLEM_ERROR) -> None:
        """Something could not be used (kept with the last ``MAX_PROBLEMS``; the header counts them)."""
        with self.store.lock:
            self.store.problems.append(Problem(at, where, message[:500], kind))
            self.store.generation += 1

    def notice(self, at: float | None, where: str, message: str) -> None:
        """Nothing failed, but the operator should know of a limit (shown apart from the errors)."""
        self.problem(at, where, message, PROBLEM_NOTICE)

    def update_health(self, resource: str, **changes: Any) -> WatchHealth:
        with self.store.lock:
            h = self.store.health.get(resource)
            if h is None:
                h = self.store.health[resource] = WatchHealth(resource)
            was_synced = h.synced
            for k, v in changes.items():
                setattr(h, k, v)
            if h.synced and not was_synced:
                self.store.lists_done += 1  # its list is in (SYNCED applied), and the stream says so
            self.store.generation += 1
            if resource == "leases":
                self.evaluator.mark_all(self.store.nodes)
            return h

    def _apply(self, resource: str, etype: str, obj: Any, received_at: float | None, listing: bool) -> bool:
        st = self.store
        if received_at is not None:
            last = st.last_received
            st.last_received = received_at if last is None or received_at > last else last
            h = st.health.get(resource)
            if h is not None:
                h.last_activity = received_at
        if etype == "SYNCED":
            listed = st.relisted.pop(resource, None)
            if listed:
                self._replace(resource, listed)
            self.store.synced.add(resource)
            if received_at is not None:
                self.store.listed_at[resource] = received_at
            if resource == "nodes":
                # placeholders of nodes that do not exist go (the others were judged again when
                # their Node arrived)
                nodes = self.store.nodes
                self.evaluator.mark_all(n for n in self.store.leases if n not in nodes)
            self.store.generation += 1
            return True
        if etype == "BOOKMARK":
            return True
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise BadObject(f"unknown event type {etype!r}")
        handler = _HANDLERS.get(resource)
        if handler is None:
            raise BadObject(f"unknown resource {resource!r}")
        handler(self, etype, obj, received_at, listing)
        st.generation += 1
        return True

    def _timeline(self, node: str, t: float | None, text: str) -> None:
        if t is None:
            return
        tl = self.store.timelines.get(node)
        if tl is None:
            tl = self.store.timelines[node] = deque(maxlen=MAX_TIMELINE)
        tl.append((t, text))

    def _replace(self, resource: str, listed: set[str]) -> None:
        """The end of a list that gave ``listed`` (at least one object): the nodes or leases held
        and not in it are deleted (``Store.relisted``). A live reflector sends those deletions itself
        before its SYNCED; a recording read across a restart of its recorder does not have them."""
        st = self.store
        if resource == "nodes":
            for name in [n for n in st.nodes if n not in listed]:
                self._forget_node(name)
        elif resource == "leases":
            for name in [n for n in st.leases if n not in listed]:
                self._forget_lease(name)

    def _forget_node(self, name: str) -> None:
        """A deleted node is forgotten entirely (its timeline and certificate date too): a node
        registering later under the same name is a new machine with a new kubelet. Its pods and
        events leave with their own DELETED events."""
        st = self.store
        st.nodes.pop(name, None)
        st.not_ready.discard(name)
        st.timelines.pop(name, None)
        st.certs.pop(name, None)
        self.evaluator.mark(name)

    def _forget_lease(self, name: str) -> None:
        self.store.leases.pop(name, None)
        self.store.beats.pop(name, None)
        self.evaluator.mark(name)

    def _on_node(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = node_from_dict(obj)
        name = rec.name
        if etype == "DELETED":
            self._forget_node(name)
            return
        if listing:
            _listed(self.store, "nodes", name)
        old = self.store.nodes.get(name)
        if old is not None and old.taints:
            rec.taints = keep_eviction_start(old.taints, rec.taints)
        self.store.nodes[name] = rec
        if rec.ready == "True":
            self.store.not_ready.discard(name)
        else:
            self.store.not_ready.add(name)
        self.evaluator.mark(name)
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
        """A Lease event. The hot path of the steady state (13,000 renewals a second at 130k
        nodes): a renewal of a known lease on the synced watch sets the track's fields in place
        and has the evaluator swap the node's view (``Evaluator.renewed``); nothing else is built."""
        rec = obj if type(obj) is LeaseRecord else lease_from_dict(obj)
        namespace = rec.namespace
        if namespace and namespace != NODE_LEASE_NAMESPACE:
            return
        name = rec.name
        st = self.store
        if etype == "DELETED":
            self._forget_lease(name)
            return
        if listing:
            _listed(st, "leases", name)
        duration = rec.duration_seconds or st.settings.lease_duration_seconds
        renew = rec.renew_time
        track = st.leases.get(name)
        if track is None:
            track = st.leases[name] = LeaseTrack(renew, None, None, duration, rec.holder)
            advanced = renew is not None
        else:
            advanced = renew is not None and (track.renew_time is None or renew > track.renew_time)
            track.duration = duration
            track.holder = rec.holder
        if advanced:
            if received_at is not None and not listing and "leases" in st.synced:
                track.observed_at = received_at
                track.skew = received_at - renew
                track.age_from = "receipt"
                self._beat(name, received_at)
            else:
                # the last renewal seen, if it was timed on our or the server's clock
                seen_before = track.observed_at if track.renewals and track.age_from in ("receipt", "server") else None
                track.observed_at, track.age_from, skew = listed_renewal(
                    renew, rec.written_at, received_at, seen_before, self._writes_follow_renewals())
                if skew is not None:
                    track.skew = skew
                self._beat(name, math.nan)
            track.renew_time = renew
            track.renewals += 1
            if track.unrenewed is not None:
                track.unrenewed = None  # counted again: judged again below (the cause goes)
            elif self.evaluator.renewed(name, track):
                return
        elif renew is None:
            track.renew_time = None
            track.observed_at = None
            track.unrenewed = None
        elif (not listing and received_at is not None and "leases" in st.synced and track.renew_time is not None
              and renew <= track.renew_time):
            # Written, but not a renewal (the controller's rule: a newer renewTime only), which from
            # 1.37 keeps the controller off the node all the same. An older renewTime tells the
            # node's clock now: the Ready heartbeat the kubelet posts next is on that clock, and the
            # controller counts its change at receipt (``probe_time``).
            track.unrenewed = (received_at, renew)
            if renew < track.renew_time:
                track.skew = received_at - renew
        self.evaluator.mark(name)

    def judge_lists_at_once(self) -> None:
        """Judge a listed lease by its list at once, however it is dated (``core/evidence.py``): for
        an answer that cannot wait a renewal interval and names its doubts (``status``)."""
        with self.store.lock:
            self.store.await_evidence = False
            self.evaluator.mark_all(self.store.leases)

    def ages_in_doubt(self, now: float, names: Iterable[str] | None = None) -> dict[str, float]:
        """Nodes the API server still calls Ready whose lease looks late only by when a list says it
        was renewed (renewTime on the node's clock, or a write time that is only a bound), with
        each lease's renewal interval. One renewal seen on the watch settles it: a one-shot answer
        waits that long for them (a node whose clock is behind is not late; the node lifecycle
        controller, which times renewals by seeing renewTime change, keeps it Ready). ``names``:
        look at these nodes only."""
        out: dict[str, float] = {}
        with self.store.lock:
            tracks = self.store.leases.items() if names is None else ((n, self.store.leases.get(n)) for n in names)
            for name, track in tracks:
                if track is None or track.age_from not in UNDATED or track.observed_at is None:
                    continue
                rec = self.store.nodes.get(name)
                interval = renew_interval(track.duration)
                if rec is not None and rec.ready == "True" and now - track.observed_at > 2 * interval:
                    out[name] = interval
        return out

    def _writes_follow_renewals(self) -> bool:
        """Whether the API server moves a field manager's time on every write that changes a value
        (v1.25 on, kubernetes PR #110058); before, only when the writer's set of fields changes."""
        return writes_follow_renewals(self.store.settings.server_version)

    def _beat(self, node: str, received_at: float) -> None:
        """Remember one renewal's receive time for the heartbeat history (NaN: when it happened is
        unknown, a gap). Bounded: the last ``MAX_BEATS``; a node never seen renewing has none."""
        beats = self.store.beats.get(node)
        if beats is None:
            if received_at != received_at:  # NaN: nothing before it to break
                return
            beats = self.store.beats[node] = array("d")
        elif received_at != received_at and beats[-1] != beats[-1]:
            return  # one gap mark is enough
        beats.append(received_at)
        if len(beats) > MAX_BEATS:
            del beats[0]

    def _on_pod(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = pod_from_dict(obj)
        key = rec.key
        old = self.store.pods.get(key)
        if old is not None and (etype == "DELETED" or old.node_name != rec.node_name):
            _unindex(self.store.pods_by_node, old.node_name, key)
        if etype == "DELETED" or old is None or old.tolerations != rec.tolerations:
            self._tally(old, None if etype == "DELETED" else rec)
        if etype == "DELETED":
            self.store.pods.pop(key, None)
            self.store.pod_schedules.pop(key, None)
            return
        if old is not None and old.tolerations != rec.tolerations and received_at is not None:
            self._keep_pod_schedule(key, old, rec, received_at)
        self.store.pods[key] = rec
        if rec.node_name:
            self.store.pods_by_node.setdefault(rec.node_name, set()).add(key)

    def _tally(self, old: PodRecord | None, new: PodRecord | None) -> None:
        """A pod's tolerations counted again (``pod_tolerations``)."""
        seconds_of = pod_tolerations.seconds_of
        if self.store.tolerations.change(seconds_of(old.tolerations) if old is not None else (),
                                         seconds_of(new.tolerations) if new is not None else ()):
            self._learned_tolerations()

    def learn_tolerations(self, learned: pod_tolerations.Seconds) -> None:
        """What a one-shot answer's own tally learned from pods it does not apply
        (``replay/superseded.py``)."""
        with self.store.lock:
            self.store.tolerations.learned = learned
            self._learned_tolerations()

    def _learned_tolerations(self) -> None:
        """The settings count with what the pods show now: every node judged again if it changed."""
        learned = self.store.tolerations.learned
        if learned != self.store.settings.learned_tolerations:
            self.store.settings = replace(self.store.settings, learned_tolerations=learned)
            self.evaluator.mark_all(self.store.nodes)
            self.store.generation += 1

    def _keep_pod_schedule(self, key: tuple[str, str], old: Any, rec: Any, at: float) -> None:
        """A pod's tolerations changed: remember the eviction scheduled under the old ones (the
        controller keeps it; ``rules.process_pod_on_node``)."""
        node = self.store.nodes.get(rec.node_name)
        if node is None or rec.node_name != old.node_name:
            self.store.pod_schedules.pop(key, None)
            return
        kept = self.store.pod_schedules.get(key)
        scheduled = kept[0] if kept is not None else pod_eviction_at(node.taints, old.tolerations)
        if scheduled is not None and scheduled > at:
            self.store.pod_schedules[key] = (scheduled, at)
        else:
            self.store.pod_schedules.pop(key, None)

    def _on_event(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        rec = event_from_dict(obj)
        key = rec.key
        if etype == "DELETED":
            old = self.store.events.pop(key, None)
            if old is not None:
                for node in _event_nodes(old):
                    _unindex(self.store.events_by_node, node, key)
            return
        self.store.events[key] = rec
        if _is_registration(rec):
            self._registered(rec)
        for node in _event_nodes(rec):
            bucket = self.store.events_by_node.setdefault(node, set())
            bucket.add(key)
            if len(bucket) > MAX_EVENTS_PER_NODE:
                oldest = min(bucket, key=lambda k: self.store.events[k].time or 0.0 if k in self.store.events else 0.0)
                bucket.discard(oldest)

    def registration(self, obj: Any, received_at: float | None) -> None:
        """``FleetState.registration``: an event that may be the node controller's registration of a
        node, applied for that alone (``received_at``: when a problem with it is reported)."""
        with self.store.lock:
            try:
                rec = event_from_dict(obj)
            except Exception as exc:  # noqa: BLE001 - the cluster must never crash the dashboard
                self.problem(received_at, "events (registrations)", f"{type(exc).__name__}: {exc}")
                return
            if _is_registration(rec):
                self._registered(rec)

    def _registered(self, rec: EventRecord) -> None:
        """The node controller registered the node (``Store.registered``): at its start (a restart,
        a new leader) it does so for every node, and counts each one's grace from then. When: the
        event's own time (the controller's clock, whole seconds: at most a second early), however
        it came: the controller writes its events asynchronously, rate-limited, so one can arrive
        seconds after the pass it records (on a loaded testbed, after the grace of a node cut right
        after its registration), and a watch may deliver an old event again. Dated by its arrival,
        such an event moved the node's probe past the controller's: Late where the controller had
        already marked it Unknown."""
        t = rec.time
        node = rec.object_name
        if t is None or t <= self.store.registered.get(node, -math.inf):
            return
        self.store.registered[node] = t
        self.evaluator.mark(node)

    def _on_csr(self, etype: str, obj: Any, received_at: float | None, listing: bool) -> None:
        if etype == "DELETED":
            return  # the CSR cleaner deletes issued CSRs after 1h; the NotAfter we learned stays
        rec = csr_from_dict(obj)
        self.learn_cert(rec)

    def learn_cert(self, rec: CSRRecord, source: str | None = None) -> None:
        """Remember a kubelet client certificate's NotAfter (the newest per node wins). The node is
        the one the certificate names (its subject, ``system:node:<name>``, which the signer
        requires), not the requester: a node's first certificate is asked for with a bootstrap
        credential, and only its rotations by the node itself."""
        if rec.signer != KUBELET_CLIENT_SIGNER or rec.not_after is None:
            return
        if rec.subject is None or not rec.subject.startswith(NODE_USER_PREFIX):
            return
        node = rec.subject[len(NODE_USER_PREFIX):]
        cur = self.store.certs.get(node)
        if cur is None or rec.not_after > cur.not_after:
            self.store.certs[node] = CertInfo(rec.not_after, source or f"CSR {rec.name}")
            self.evaluator.mark(node)

    def remember_cert(self, node: str, not_after: float, source: str) -> None:
        """A NotAfter learned elsewhere (the local cache, a TLS probe, kubelet metrics)."""
        with self.store.lock:
            cur = self.store.certs.get(node)
            if cur is None or not_after > cur.not_after:
                self.store.certs[node] = CertInfo(not_after, source)
                self.evaluator.mark(node)
                self.store.generation += 1




def listed_renewal(renew: float, written: float | None, received: float | None, seen_before: float | None,
                   written_follows_renewals: bool) -> tuple[float, str, float | None]:
    """When a lease that arrived in a list (or relist) was renewed, on nodewatch's time line:
    ``(observed_at, age_from, skew or None)``.

    It was renewed at some unknown moment before it was received. renewTime says when on the
    node's clock, which may be minutes off (95 s behind: the node looks overdue while the node
    lifecycle controller, which times a renewal by seeing renewTime change, keeps it Ready). The
    API server's time of the kubelet's last write (``written``, whole seconds) is on the server's
    clock: from v1.25 it is the renewal's own time; before, the time the kubelet's fields last
    changed, which is never later than its last renewal. So it is used when it is later than what
    renewTime tells (the node's clock is behind), or always where it follows renewals, and never
    when it is not after a renewal already seen (``seen_before``): renewTime changed since, so that
    write was not this renewal. Both are clamped to the receipt.
    """
    by_node = renew if received is None else min(renew, received)
    if written is None or received is None or (seen_before is not None and written <= seen_before):
        return by_node, "renewTime", None
    written = min(written, received)
    if written_follows_renewals:
        if written <= renew < written + 1.0:
            return by_node, "server", 0.0  # the clocks agree to the second: renewTime is the finer time
        return written, "server", written - renew
    if written > by_node:
        return written, "server-bound", None
    return by_node, "renewTime", None


def _listed(st: Store, resource: str, name: str) -> None:
    """``name`` was given by its resource's list in progress (``Store.relisted``)."""
    seen = st.relisted.get(resource)
    if seen is None:
        seen = st.relisted[resource] = set()
    seen.add(name)


def _unindex(index: dict[str, set], node: str, key: tuple[str, str]) -> None:
    """Drop ``key`` from a per-node index, and the node's entry once it is empty."""
    bucket = index.get(node)
    if bucket is not None:
        bucket.discard(key)
        if not bucket:
            del index[node]


def _is_registration(e: EventRecord) -> bool:
    """The node controller's ``RegisteredNode`` event (``Store.registered``)."""
    return e.reason == REGISTERED_NODE and e.object_kind == "Node" and e.source.startswith(NODE_CONTROLLER)


def _event_nodes(e: EventRecord) -> list[str]:
    nodes = []
    if e.object_kind == "Node" and e.object_name:
        nodes.append(e.object_name)
    host = e.source.split(", ", 1)[1] if ", " in e.source else ""
    if host and host not in nodes:
        nodes.append(host)
    return nodes




_HANDLERS = {
    "nodes": Ingest._on_node,
    "leases": Ingest._on_lease,
    "pods": Ingest._on_pod,
    "events": Ingest._on_event,
    "certificatesigningrequests": Ingest._on_csr,
}

