"""Keyframes: a copy of what ``FleetState.apply`` built, to jump back to (replay's seek).

A replay keeps one every few thousand events; seeking restores the keyframe before ``t`` and
applies the few events in between, so the state becomes exactly what it was at ``t``. Records
(NodeRecord, PodRecord, EventRecord, CertInfo) are replaced, never mutated, by the core, so a
keyframe shares them; lease tracks, stream health, sets and deques are mutated and are copied.

A keyframe taken after another (``prev``) shares with it the copies of what has not changed since:
lease tracks, the sets of each node's pods and events, timelines. A replay of 65,000 nodes takes one
every 20,000 events (three seconds of its recording), in which about 20,000 of its 65,000 leases
renew: copying every track each time was 5.6 of a keyframe's 9.6 MB and most of its 0.3 s.
``added_bytes`` estimates what a keyframe holds that the one before it does not (the replay's
keyframes keep to a budget with it, ``replay/keyframes.py``).
"""

from __future__ import annotations

import copy
import sys
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from . import pod_tolerations
from .fleet_data import Store
from .objects import EventRecord, NodeRecord, PodRecord
from .views import MAX_TIMELINE, CertInfo, LeaseTrack, Problem, WatchHealth

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Keyframe:
    """Everything a state was fed, frozen; the caches derived from it are rebuilt on restore."""

    nodes: dict[str, NodeRecord]
    leases: dict[str, LeaseTrack]
    pods: dict[tuple[str, str], PodRecord]
    pods_by_node: dict[str, frozenset[tuple[str, str]]]
    events: dict[tuple[str, str], EventRecord]
    events_by_node: dict[str, frozenset[tuple[str, str]]]
    certs: dict[str, CertInfo]
    health: dict[str, WatchHealth]
    problems: tuple[Problem, ...]
    timelines: dict[str, tuple[tuple[float, str], ...]]
    synced: frozenset[str]
    last_received: float | None
    pod_schedules: dict[tuple[str, str], tuple[float, float]] | None = None
    """Evictions kept across a toleration change (``Store.pod_schedules``)."""
    relisted: dict[str, frozenset[str]] | None = None
    """A list in progress (``Store.relisted``): a keyframe taken in the middle of one keeps what it gave."""
    tolerations: pod_tolerations.Tally = field(default_factory=pod_tolerations.Tally)
    """A copy of ``Store.tolerations`` (what the pods show of the default toleration, and what they
    showed once they are gone), not counted again from ``pods`` at each seek."""
    registered: dict[str, float] = field(default_factory=dict)
    """``Store.registered``: when the node controller last registered each node."""


def take(state: Store, prev: Keyframe | None = None) -> Keyframe:
    """A keyframe of ``state``. ``prev`` (the previous keyframe) lets what did not change since share
    its copies (lease tracks, timelines, each node's pod and event sets), so ninety keyframes of a
    quiet fleet do not hold ninety copies of each."""
    with state.lock:
        prev_tl = prev.timelines if prev else {}
        timelines = {}
        for name, dq in state.timelines.items():
            old = prev_tl.get(name)
            if old is not None and len(old) == len(dq) and (not dq or old[-1] is dq[-1]):
                timelines[name] = old
            else:
                timelines[name] = tuple(dq)
        return Keyframe(
            nodes=dict(state.nodes),
            leases=_shared(state.leases, prev.leases if prev else {}, _copy_track),
            pods=dict(state.pods),
            pods_by_node=_shared(state.pods_by_node, prev.pods_by_node if prev else {}, frozenset),
            events=dict(state.events),
            events_by_node=_shared(state.events_by_node, prev.events_by_node if prev else {}, frozenset),
            certs=dict(state.certs),
            health={k: copy.copy(h) for k, h in state.health.items()},
            problems=tuple(state.problems),
            timelines=timelines,
            synced=frozenset(state.synced),
            last_received=state.last_received,
            pod_schedules=dict(state.pod_schedules),
            relisted={k: frozenset(v) for k, v in state.relisted.items()},
            tolerations=state.tolerations.copy(),
            registered=(prev.registered if prev is not None and prev.registered == state.registered
                        else dict(state.registered)),  # the same dict while no controller restarted
        )


def _copy_track(t: LeaseTrack) -> LeaseTrack:
    """A copy of a lease track (the constructor: ``copy.copy`` goes through ``__reduce_ex__``: ten times as long)."""
    return LeaseTrack(t.renew_time, t.observed_at, t.skew, t.duration, t.holder, t.renewals, t.age_from, t.unrenewed)


def _shared(current: Mapping[str, Any], prev: Mapping[str, _T], copy_of: Callable[[Any], _T]) -> dict[str, _T]:
    """A copy of each of ``current``'s values, or the previous keyframe's where it is equal (a lease
    track, a set of pods or events: compared with the state's own, which ``Ingest`` changes in place)."""
    out: dict[str, _T] = {}
    for k, v in current.items():
        was = prev.get(k)
        out[k] = was if was is not None and was == v else copy_of(v)
    return out


def added_bytes(kf: Keyframe, prev: Keyframe | None) -> int:
    """About how many bytes ``kf`` holds that ``prev`` (the keyframe before it, None: none) does not:
    its dictionaries, and the copies it does not share with ``prev``. Records are shared with the
    state and with every keyframe, and not counted."""
    size = sys.getsizeof
    total = sum(size(d) for d in (kf.nodes, kf.leases, kf.pods, kf.pods_by_node, kf.events,
                                  kf.events_by_node, kf.certs, kf.health, kf.timelines))
    before = prev or _EMPTY
    old = before.leases
    total += _TRACK_BYTES * sum(1 for k, v in kf.leases.items() if old.get(k) is not v)
    for mine, theirs in ((kf.pods_by_node, before.pods_by_node), (kf.events_by_node, before.events_by_node),
                         (kf.timelines, before.timelines)):
        total += sum(size(v) for k, v in mine.items() if theirs.get(k) is not v)
    return total


def restore(state: Store, kf: Keyframe | None) -> None:
    """Make the store hold exactly the keyframe (None: empty), in place so its readers keep their
    reference. The caller resets what was derived from it (``FleetState.restore``: the
    evaluator's caches), so every node is judged again at the next ``evaluate``."""
    with state.lock:
        if kf is None:
            state.nodes, state.leases, state.pods, state.pods_by_node = {}, {}, {}, {}
            state.tolerations = pod_tolerations.Tally()
            state.not_ready = set()
            state.events, state.events_by_node, state.certs, state.health = {}, {}, {}, {}
            state.problems.clear()
            state.timelines, state.synced, state.last_received = {}, set(), None
            state.pod_schedules = {}
            state.relisted = {}
            state.registered = {}
        else:
            state.nodes = dict(kf.nodes)
            state.not_ready = {n for n, rec in kf.nodes.items() if rec.ready != "True"}
            state.leases = {k: _copy_track(v) for k, v in kf.leases.items()}
            state.pods = dict(kf.pods)
            state.tolerations = kf.tolerations.copy()
            state.pods_by_node = {k: set(v) for k, v in kf.pods_by_node.items()}
            state.events = dict(kf.events)
            state.events_by_node = {k: set(v) for k, v in kf.events_by_node.items()}
            state.certs = dict(kf.certs)
            state.health = {k: copy.copy(h) for k, h in kf.health.items()}
            state.problems.clear()
            state.problems.extend(kf.problems)
            state.timelines = {k: deque(v, maxlen=MAX_TIMELINE) for k, v in kf.timelines.items()}
            state.synced = set(kf.synced)
            state.last_received = kf.last_received
            state.pod_schedules = dict(kf.pod_schedules or {})
            state.relisted = {k: set(v) for k, v in (kf.relisted or {}).items()}
            state.registered = dict(kf.registered)
        state.settings = replace(state.settings, learned_tolerations=state.tolerations.learned)
        state.beats = {}  # derived from lease events, not in keyframes (see ``Store.beats``)
        state.listed_at = {}  # not in keyframes either (see ``Store.listed_at``)
        state.generation += 1


_TRACK_BYTES = sys.getsizeof(LeaseTrack(None, None, None, 0.0, "")) + 3 * sys.getsizeof(0.0)
"""A copied track and its three times (a renewal's own floats, which only the keyframe keeps once the
state's track moves on): at 65,000 nodes they brought the estimate within ~20 % of the memory the
keyframes took."""
_EMPTY = Keyframe({}, {}, {}, {}, {}, {}, {}, {}, (), {}, frozenset(), None)
