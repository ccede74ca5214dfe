"""Recordings of several clusters, read back: the header's ``clusters`` and each line's ``cluster``.

A recording made while watching several clusters (``recording.py``) replays as what it was: a
``MultiFleet`` (``core/multi.py``) with one state per cluster, each judged by its own recorded
settings (its own server version, its fleet-file overrides), so the replayed dashboard has the
cluster strip and the cluster column, and ``status --replay`` and ``report`` answer per cluster.
Settings given on the replay's command line are set on every cluster, over the recorded ones.

A recording whose header has no ``clusters`` is one cluster, exactly as before: a ``cluster`` field
on its lines is ignored. In a recording of several, a line without a cluster, or with one the
header does not list, cannot be placed: it is skipped and reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Union

from ...core.fleet import FleetState
from ...core.multi import ClusterState, Member, MultiFleet
from ...core.settings import Settings
from ..multi_config import MAX_CLUSTERS
from ..recording import Entry
from ..segments import NOT_RECORDED, unrecorded

ReplayState = Union[FleetState, MultiFleet]
"""What a replay rebuilds: one cluster's state, or several clusters' (the header says which)."""


def lease_stream_down(state: ReplayState) -> bool:
    """Whether the recording last said a lease stream was down (of any cluster): a stretch without
    lines is then recorded blindness, not a stretch the recorder missed (whose own mark,
    ``segments.NOT_RECORDED``, does not count)."""
    states = [state] if isinstance(state, FleetState) else [m.state for m in state.members]
    for st in states:
        h = st.stream_health("leases")
        if h is not None and not h.connected and not h.last_error.startswith(NOT_RECORDED):
            return True
    return False


def not_recorded(directory: str, t: float, last: float, state: Callable[[], ReplayState]) -> str | None:
    """Why a hub directory's instant ``t`` cannot be judged: the recorder was not running then
    (``segments.unrecorded``: ``last``, the newest line before it, long before, a segment opened
    after it) and the recording does not say the lease stream was down (``state()``: the state at
    ``t``, asked for only then). None: it can be judged."""
    if not os.path.isdir(directory):
        return None
    gap = unrecorded(directory, t, last)
    return None if gap is None or lease_stream_down(state()) else gap


@dataclass(frozen=True)
class RecordedCluster:
    """One cluster of a recording's header."""

    name: str
    context: str | None
    settings: dict[str, Any]
    """The header's settings of this cluster (a server version learned later is added to it)."""


def recorded_clusters(header: dict, problems: list[str]) -> list[RecordedCluster] | None:
    """The clusters the header lists, or None for a one-cluster recording."""
    raw = header.get("clusters")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        problems.append("header: `clusters` is not a list of clusters; replayed as one cluster")
        return None
    if len(raw) > MAX_CLUSTERS:
        problems.append(f"header: {len(raw)} clusters; only the first {MAX_CLUSTERS} are replayed")
    out: list[RecordedCluster] = []
    for i, c in enumerate(raw[:MAX_CLUSTERS], 1):
        name = c.get("name") if isinstance(c, dict) else None
        if not isinstance(name, str) or not name or any(r.name == name for r in out):
            problems.append(f"header: cluster {i} has no name, or the name of another; its lines are skipped")
            continue
        if not isinstance(c.get("settings"), dict):
            c["settings"] = {}
        context = c.get("context")
        out.append(RecordedCluster(name, context if isinstance(context, str) and context else None, c["settings"]))
    if not out:
        problems.append("header: no usable cluster in `clusters`; replayed as one cluster")
        return None
    return out


def header_settings(header: dict, given: Settings | None, problems: list[str]) -> Settings:
    """``given`` (completed with the server version of the header), else the header's settings."""
    hs = header.get("settings")
    if not isinstance(hs, dict):
        hs = {}
    version = hs.get("server_version") if isinstance(hs.get("server_version"), str) else None
    if given is not None:
        return given if given.server_version else given.with_server_version(version)
    s = Settings(server_version=version)
    overridden = hs.get("overridden")
    if isinstance(overridden, list):
        chosen = {}
        for name in overridden:
            v = hs.get(name)
            if isinstance(name, str) and isinstance(v, (int, float)) and not isinstance(v, bool):
                chosen[name] = v
        try:
            s = s.override(**chosen)
        except (ValueError, TypeError):
            problems.append("header: unusable settings overrides ignored")
    return s


def cluster_settings(c: RecordedCluster, given: Settings | None, problems: list[str]) -> Settings:
    """The cluster's recorded settings, with the settings the command line gave set over them."""
    s = header_settings({"settings": c.settings}, None, problems)
    if given is not None and given.overridden:
        s = s.override(**{name: getattr(given, name) for name in given.overridden})
    return s


def new_state(header: dict, clusters: list[RecordedCluster] | None, given: Settings | None,
              problems: list[str]) -> ReplayState:
    """An empty state for the recording: a ``MultiFleet`` for several clusters, else a ``FleetState``
    with the header's settings (or ``given``, as before)."""
    if clusters is None:
        return FleetState(header_settings(header, given, problems))
    return MultiFleet([Member(c.name, ClusterState(c.name, cluster_settings(c, given, problems)), context=c.context)
                       for c in clusters])


def empty_like(state: ReplayState) -> ReplayState:
    """A state with the same clusters and settings as ``state``, and nothing applied."""
    if isinstance(state, MultiFleet):
        return state.empty_copy()
    return FleetState(state.settings, silence_seconds=state.silence_seconds)


def misplaced(e: Entry, clusters: list[RecordedCluster] | None) -> str | None:
    """Why a line of a recording of several clusters cannot be placed, or None."""
    if clusters is None:
        return None
    if e.cluster is None:
        return f"line {e.line}: no \"cluster\" in a recording of several clusters, skipped"
    if not any(c.name == e.cluster for c in clusters):
        return f"line {e.line}: cluster {e.cluster[:60]!r} is not in the header, skipped"
    return None


def settings_payload_of(header: dict, cluster: str | None) -> dict | None:
    """Where a settings line's server version belongs: the header's settings, or its cluster's."""
    listed = header.get("clusters")
    if cluster is None or not isinstance(listed, list):
        hs = header.get("settings")
        return hs if isinstance(hs, dict) else None
    for c in listed:
        if isinstance(c, dict) and c.get("name") == cluster and isinstance(c.get("settings"), dict):
            return c["settings"]
    return None


def target(state: ReplayState, e: Entry) -> FleetState | None:
    """The state a line applies to: its cluster's in a ``MultiFleet``; None when it has none there."""
    return cluster_state(state, e.cluster)


def cluster_state(state: ReplayState, cluster: str | None) -> FleetState | None:
    """The state of ``cluster`` (a line's): its own in a ``MultiFleet``; None when it has none there."""
    if isinstance(state, MultiFleet):
        return state.state_of(cluster) if cluster is not None else None
    return state
