"""The questions readers ask ``FleetState`` beyond ``evaluate``: one node in full, its pods, events
and timeline, counts, and what the sources need to decide what to watch.

Every answer is a copy or an immutable record, taken under the state's lock: readers (the UI
thread, ``status``, the sources) never hold the lock while they draw, and never touch the state's
fields (tests/project/test_layers.py checks that no module outside the core does).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from contextlib import AbstractContextManager

from .evaluation import Evaluator, controller_skips
from .fleet_data import Store
from .objects import EventRecord, NodeRecord, PodRecord
from .rules import (
    evict_after_restart,
    eviction_taints,
    noexecute_taints,
    pod_eviction_at,
    process_pod_on_node,
    restarted_taints,
)
from .views import (
    AT_RISK_STATES,
    PROBLEM_NOTICE,
    CertInfo,
    NodeDetails,
    NodeView,
    PodView,
    Problem,
    WatchHealth,
)

MAX_TAINTS_IN_TIMELINE = 32
"""A hostile node may carry thousands of taints: the timeline takes the first few."""


class Queries:
    """Part of ``FleetState``: what readers may ask it. No fields of its own: reads the store and
    the evaluator under the store's lock, answers with copies and frozen records."""

    def __init__(self, store: Store, evaluator: Evaluator) -> None:
        self.store = store
        self.evaluator = evaluator

    def node_view(self, name: str, now: float) -> NodeView | None:
        with self.store.lock:
            if name not in self.store.nodes:
                return None
            return self.evaluator.judge(name, now)

    def pods_on(self, node: str, now: float) -> list[PodView]:
        """The node's pods with their own eviction countdowns and StatefulSet risk."""
        with self.store.lock:
            rec = self.store.nodes.get(node)
            view = self.node_view(node, now)
            # Only NoExecute taints decide an eviction: filter once, not once per pod (a node may
            # carry thousands of taints and hundreds of pods). Eviction taints the controller takes
            # off at its next pass (Ready again, master disruption mode) count for nothing.
            taints = noexecute_taints(self.evaluator.judged_taints(rec)) if rec else []
            restart = self.store.registered.get(node)
            out = []
            for key in sorted(self.store.pods_by_node.get(node, ())):
                p = self.store.pods.get(key)
                if p is None:
                    continue
                # The pod's own tolerations: the 300s defaults are written into it by the admission
                # plugin at creation; a stored pod without them is deleted at once.
                at = pod_eviction_at(taints, p.tolerations)
                kept = self.store.pod_schedules.get(key)
                if kept is not None and at is not None and all(
                        t.time_added is None or t.time_added <= kept[1] for t in taints):
                    at = process_pod_on_node(kept[0], taints, p.tolerations, kept[1])
                if restart is not None and evict_after_restart(at, taints, restart):  # timed anew by a restart
                    at = pod_eviction_at(restarted_taints(taints, restart), p.tolerations)
                risk = p.owner_kind == "StatefulSet" and view is not None and view.state in AT_RISK_STATES
                out.append(PodView(p.namespace, p.name, p.owner_kind, p.owner_name, p.phase, p.terminating,
                                   at, risk, p.disruption_target))
            out.sort(key=lambda pv: (not pv.statefulset_risk, pv.eviction_at if pv.eviction_at is not None else math.inf,
                                     pv.namespace, pv.name))
            return out

    def events_for(self, node: str) -> list[EventRecord]:
        """Kubelet and controller events about the node, newest first."""
        with self.store.lock:
            evs = [self.store.events[k] for k in self.store.events_by_node.get(node, ()) if k in self.store.events]
        evs.sort(key=lambda e: e.time or 0.0, reverse=True)
        return evs

    def timeline_for(self, node: str, now: float) -> list[tuple[float, str]]:
        """What happened to the node, and what the rules say happens next, in time order."""
        with self.store.lock:
            items = list(self.store.timelines.get(node, ()))
            rec = self.store.nodes.get(node)
            if rec is not None:
                known = {text for _, text in items}
                rc = rec.conditions.get("Ready")
                if rc is not None and rc.last_transition is not None and not any("Ready" in k for k in known):
                    items.append((rc.last_transition, f"Ready is {rc.status} ({rc.reason or 'no reason'}) since"))
                for t in rec.taints[:MAX_TAINTS_IN_TIMELINE]:
                    if t.time_added is not None and not any(t.key in k for k in known):
                        items.append((t.time_added, f"taint {t.key}:{t.effect} added"))
            view = self.node_view(node, now)
            track = self.store.leases.get(node)
            if track is not None and track.renew_time is not None:
                items.append((track.observed_at or track.renew_time, "last lease renewal seen"))
            if view is not None:
                if (view.lease_observed_at is not None and view.ready == "True"
                        and not controller_skips(track, self.store.settings)):  # skipped: no Unknown comes
                    items.append((view.lease_observed_at + view.grace,
                                  "grace ends: the controller marks Ready=Unknown at its next pass"))
                if view.eviction_at is not None:
                    items.append((view.eviction_at, "eviction due (default toleration ends)"))
        items.sort(key=lambda x: x[0])
        return items


    def node_details(self, name: str, now: float, *, max_pods: int | None = None,
                     max_events: int | None = None) -> NodeDetails:
        """The node in full (the drill-down): one consistent copy, taken under the lock."""
        with self.store.lock:
            track = self.store.leases.get(name)
            lease = None if track is None else dataclasses.replace(track)
            return NodeDetails(
                name=name, now=now, view=self.node_view(name, now), record=self.store.nodes.get(name), lease=lease,
                cert=self.store.certs.get(name), pods=self.pods_on(name, now)[:max_pods],
                events=self.events_for(name)[:max_events], timeline=self.timeline_for(name, now),
                beats=list(self.store.beats.get(name, ())), server_version=self.store.settings.server_version,
            )

    def node_count(self) -> int:
        with self.store.lock:
            return len(self.store.nodes)

    def has_node(self, name: str) -> bool:
        with self.store.lock:
            return name in self.store.nodes

    def node_records(self) -> dict[str, NodeRecord]:
        """Every Node record by name (a new dict; the records are never mutated): for probes that
        need a node's addresses."""
        with self.store.lock:
            return dict(self.store.nodes)

    def not_ready_nodes(self) -> list[str]:
        """Names of the nodes whose Ready condition is not True, sorted: the live source watches
        their pods and events."""
        with self.store.lock:
            return sorted(self.store.not_ready)

    def eviction_tainted_nodes(self) -> list[str]:
        """Names of the nodes tainted ``not-ready``/``unreachable`` NoExecute, sorted: their pods'
        countdowns, and the default toleration the pods show (``pod_tolerations``), are asked of
        the pods a live source watches."""
        with self.store.lock:
            return sorted(n for n, rec in self.store.nodes.items() if rec.taints and eviction_taints(rec.taints))

    def cert_dates(self) -> dict[str, CertInfo]:
        """Every kubelet client certificate date known, by node (to save in the local cache)."""
        with self.store.lock:
            return dict(self.store.certs)

    def first_lease_list(self) -> int | None:
        with self.store.lock:
            h = self.store.health.get("leases")
            if h is None or not h.connected or h.forbidden or "leases" in self.store.synced:
                return None
            return len(self.store.leases)

    def stream_health(self, resource: str) -> WatchHealth | None:
        """A copy of how the stream of ``resource`` is doing (None: never reported on)."""
        with self.store.lock:
            h = self.store.health.get(resource)
            return None if h is None else dataclasses.replace(h)

    def is_synced(self, *resources: str) -> bool:
        """Have these resources been listed (a SYNCED event applied for each)?"""
        with self.store.lock:
            return set(resources) <= self.store.synced

    def problem_count(self) -> int:
        with self.store.lock:
            return len(self.store.problems)

    def problem_counts(self) -> tuple[int, int]:
        """(errors, notices) among the problems kept."""
        with self.store.lock:
            notices = sum(1 for p in self.store.problems if p.kind == PROBLEM_NOTICE)
            return len(self.store.problems) - notices, notices

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        """The node's labels: the record's own mapping, replaced (never mutated) when the Node changes."""
        with self.store.lock:
            rec = self.store.nodes.get(name)
            return rec.labels if rec is not None else None

    def details_not_watched(self, name: str) -> str | None:
        """None: a state fed by its own source has what that source watches (the focused node
        comes first within the live source's cap); only a hub's viewer can be told otherwise."""
        return None

    def pod_records_on(self, nodes: list[str]) -> dict[str, list[PodRecord]]:
        """The pod records on these nodes, by node, sorted. Records, not ``pods_on``'s views: the
        fleet history samples nodes at risk every second and needs no eviction times."""
        with self.store.lock:
            out = {}
            for node in nodes:
                keys = sorted(self.store.pods_by_node.get(node, ()))
                out[node] = [self.store.pods[k] for k in keys if k in self.store.pods]
            return out

    def recent_problems(self, n: int) -> list[Problem]:
        """The last ``n`` things the state could not use, oldest first."""
        with self.store.lock:
            return list(self.store.problems)[-n:] if n > 0 else []

    def lists_completed(self) -> int:
        """Lists completed so far (``lists_done``: SYNCED applied and the stream's health synced)."""
        return self.store.lists_done

    def batch(self) -> AbstractContextManager[bool]:
        """Hold the state still while applying a run of events: one lock for the run, and readers
        never see half of it. Re-entrant: ``apply`` inside takes the same lock again."""
        return self.store.lock
