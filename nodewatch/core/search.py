"""Search the fleet by node name or label (``team=storage``, ``zone=eu-1a``), for one reader.

Labels live in the Node records, which only the state holds (``FleetReader.node_labels``); views carry
the name alone. A search
box is re-applied every tick, so each node's answer is remembered until its record changes (records
are replaced, never mutated: identity says "changed"), and a tick of a 65,000-node fleet does not
rescan 65,000 label sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .views import NodeView

if TYPE_CHECKING:
    from .source import FleetReader


class LabelSearch:
    """One reader's search (each keeps its own memory of answers)."""

    def __init__(self, state: FleetReader) -> None:
        self.state = state
        self._term = ""
        self._memo: dict[str, tuple[object, bool]] = {}

    def matches(self, term: str, rows: Sequence[NodeView]) -> list[NodeView]:
        """The rows whose name (with its cluster, when there are several), or one of whose labels
        as ``key=value``, contains ``term`` (case-insensitive), in the given order."""
        term = term.lower()
        if term != self._term:
            self._term = term
            self._memo.clear()
        memo = self._memo
        out = []
        labels_of = self.state.node_labels
        for v in rows:
            key = v.key  # the name, or cluster/name when several clusters meet
            labels = labels_of(key)
            hit = memo.get(key)
            if hit is None or hit[0] is not labels:
                ok = term in key.lower() or (labels is not None and any(
                    term in f"{k}={val}".lower() for k, val in labels.items()))
                memo[key] = hit = (labels, ok)
            if hit[1]:
                out.append(v)
        known = len(rows)
        if len(memo) > 2 * max(known, 1000):
            memo.clear()
        return out
