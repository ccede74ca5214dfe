"""What the hub has told its viewers, and what changed since: snapshots and deltas of the fleet.

The hub evaluates the fleet once per tick (``FleetState.evaluate`` at the hub's ``now``: a frozen,
published snapshot, docs/snapshots.md) and turns the result into one frame that every up-to-date viewer gets, encoded once: the views that changed
since the previous tick, the nodes gone, the labels that changed, and the small ``meta`` (counts,
zones, health, settings). A viewer that just arrived, or fell behind, gets a snapshot instead,
built from the same bookkeeping, so snapshot + deltas always equal what the hub evaluated.

Nodes are named by their key (``NodeView.key``): the name, or ``cluster/name`` when the hub watches
several clusters (the ``meta`` then carries the cluster strip, one ``ClusterView`` per cluster).

Viewers receive evaluated views, not watch events: they never run the rules, so no viewer can
disagree with the hub about a node (and none needs the memory of a FleetState).

Labels travel as indexes into a table of ``[key, value]`` pairs that grows as new pairs appear
(zone, instance type, pool... repeat on thousands of nodes; the hostname label does not), so a
65,000-node snapshot carries each distinct pair once.

A snapshot is sent worst first and in parts: a ``snap`` frame with the meta and the first
``FIRST_PART`` nodes (more than a screenful: the viewer draws its first frame from it), then
``part`` frames of ``PART`` nodes, each with the labels of its nodes and the pairs not sent yet
(the last one carries whatever pairs are left, so a viewer ends up with the whole table). A viewer
decodes and builds one part at a time, never the whole fleet's JSON at once. The parts are
concatenated into one bytes object: one queue entry for the hub, a stream of frames on the wire.
"""

from __future__ import annotations

import operator
from typing import Any

from ..core.objects import NodeRecord
from ..core.views import FleetView, NodeView
from . import protocol
from .codec import VIEW_FIELDS, to_wire, view_to_wire

_key = operator.attrgetter(*VIEW_FIELDS)
FIRST_PART = 300
"""Nodes in the ``snap`` frame itself: the worst first, more than any screen shows."""
PART = 5000
"""Nodes in each following ``part`` frame."""


class Publisher:
    """The hub's bookkeeping of what viewers were sent. Used from one thread (the hub's ticker)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seq = 0
        """Number of the last frame built; deltas are numbered so a viewer can tell a gap."""
        self._keys: dict[str, tuple] = {}
        self._last: dict[str, NodeView] = {}
        """The view each node had in the last update. Views are frozen and an unchanged node keeps
        its view object from one snapshot to the next: the same object was sent already, and its
        fields need no comparing (most of a 65,000-node fleet, each tick)."""
        self._wire: dict[str, list] = {}
        self._records: dict[str, NodeRecord] = {}
        self._labels: dict[str, list[int]] = {}
        self._pairs: dict[tuple[str, str], int] = {}
        self._pair_list: list[list[str]] = []
        self._meta: dict[str, Any] = {}
        self._order: tuple[NodeView, ...] = ()
        """The last snapshot's nodes, worst first (the snapshot's order): its own frozen tuple."""
        self._now = 0.0
        self._snapshot: bytes | None = None

    def update(self, view: FleetView, records: dict[str, NodeRecord], now: float, *,
               problems: int, name: str, recent: list | None = None) -> bytes:
        """Take in the fleet as evaluated at ``now``; returns the delta frame since the last update.
        ``records``: the Node records by node key (``NodeView.key``: ``cluster/name`` when the hub
        watches several clusters), for their labels."""
        self.seq += 1
        self.name = name
        up: list[list] = []
        keys, wire, last = self._keys, self._wire, self._last
        seen = set()
        for v in view.nodes:
            n = v.key
            seen.add(n)
            if last.get(n) is v:
                continue
            last[n] = v
            k = _key(v)
            if keys.get(n) != k:
                keys[n] = k
                wire[n] = w = view_to_wire(v)
                up.append(w)
        gone = [n for n in keys if n not in seen]
        for n in gone:
            del keys[n]
            del wire[n]
            last.pop(n, None)
            self._records.pop(n, None)
            self._labels.pop(n, None)
        labels: dict[str, list[int]] = {}
        first_pair = len(self._pair_list)
        for n, rec in records.items():
            if self._records.get(n) is rec:
                continue
            self._records[n] = rec
            idx = self._label_indexes(rec.labels)
            if self._labels.get(n) != idx:
                self._labels[n] = idx
                labels[n] = idx
        self._meta = _meta(view, problems, recent)
        self._order = view.nodes
        self._now = now
        self._snapshot = None
        msg: dict[str, Any] = {"k": "delta", "seq": self.seq, "now": now, "name": name, "meta": self._meta,
                               "up": up, "del": gone}
        if labels:
            msg["labels"] = labels
            msg["pairs_from"] = first_pair
            msg["pairs"] = self._pair_list[first_pair:]
        return protocol.encode(msg)

    def snapshot(self) -> bytes:
        """The whole fleet as of the last update, worst first, as a ``snap`` frame and its ``part``
        frames (see the module docstring); built once per tick, shared by every viewer."""
        if self._snapshot is None:
            wire, labels, pair_list = self._wire, self._labels, self._pair_list
            order = [v.key for v in self._order]
            chunks = [order[:FIRST_PART]] + [order[i:i + PART] for i in range(FIRST_PART, len(order), PART)]
            unlisted = [n for n in labels if n not in wire]  # (a record the view does not list yet)
            sent: set[int] = set()
            frames = []
            for i, names in enumerate(chunks):
                last = i == len(chunks) - 1
                part_labels = {n: labels[n] for n in (names + unlisted if last else names) if n in labels}
                new = {j for idx in part_labels.values() for j in idx} - sent
                if last:
                    new = set(range(len(pair_list))) - sent
                sent |= new
                body: dict[str, Any] = {"seq": self.seq, "now": self._now, "nodes": [wire[n] for n in names],
                                        "labels": part_labels, "pair_idx": sorted(new)}
                body["pairs"] = [pair_list[j] for j in body["pair_idx"]]
                if i == 0:
                    msg = {"k": "snap", "name": self.name, "meta": self._meta, "parts": len(chunks) - 1, **body}
                else:
                    msg = {"k": "part", "i": i, **body}
                frames.append(protocol.encode(msg))
            self._snapshot = b"".join(frames)
        return self._snapshot

    def _label_indexes(self, labels: dict[str, str]) -> list[int]:
        pairs = self._pairs
        out = []
        for kv in labels.items():
            i = pairs.get(kv)
            if i is None:
                i = pairs[kv] = len(self._pair_list)
                self._pair_list.append(list(kv))
            out.append(i)
        return out


def _meta(view: FleetView, problems: int, recent: list | None = None) -> dict[str, Any]:
    """Everything of a FleetView but its nodes: small, sent in full every tick."""
    return {
        "settings": to_wire(view.settings),
        "zones": to_wire(view.zones),
        "counts": {s.name: n for s, n in view.counts.items()},
        "all_zones_full": view.all_zones_full,
        "leases_blind": view.leases_blind,
        "blind_reason": view.blind_reason,
        "health": to_wire(view.health),
        "generation": view.generation,
        "statefulset_at_risk": view.statefulset_at_risk,
        "controller_suspect": view.controller_suspect,
        "awaiting_renewals": view.awaiting_renewals,
        "cordoned": view.cordoned,
        "problems": problems,
        "recent_problems": to_wire(recent or []),
        "clusters": to_wire(view.clusters),
    }
