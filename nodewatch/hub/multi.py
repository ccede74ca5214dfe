"""Several clusters as the hub runs them: ``nodewatch hub --context a --context b``, ``--all-contexts``
or ``--fleet FILE``.

The hub's source is a ``MultiSource`` (``sources/multi.py``) whose clusters are each watched by a
``HubLiveSource``: every viewer may drill into a node of any cluster, and each cluster's API server
is asked for the pods and events of its own viewers' nodes only, within its own cap on scoped
watches (so each server sees what one nodewatch of that cluster would ask, never more).

Node keys are ``MultiFleet``'s: ``cluster/name`` (``NodeView.key``); ``MultiFleet.split`` says
which cluster a viewer's drill-down belongs to.
"""

from __future__ import annotations

from ..core.objects import NodeRecord
from ..core.views import node_key
from ..sources.live import LiveSource
from ..sources.multi import ClusterFeed, MultiSource
from .live import HubLiveSource


class HubMultiSource(MultiSource):
    """A ``MultiSource`` with a list of focused nodes (keys) instead of one."""

    live_class = HubLiveSource

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._foci: list[str] = []
        self._keys: dict[str, dict[str, str]] = {f.name: {} for f in self.feeds}
        """Per cluster, node name -> key: built once per node, not once per tick."""

    def focus_nodes(self, keys: list[str]) -> None:
        """The nodes viewers drill into (keys), the most recent first: each cluster is told its own."""
        self._foci = list(keys)
        self._focus = keys[0] if keys else None
        for feed in self.feeds:
            live = feed.live
            if live is not None:
                self._focus_feed(feed, live)

    def focus_node(self, node: str | None) -> None:
        self.focus_nodes([node] if node else [])

    def _focus_feed(self, feed: ClusterFeed, live: LiveSource) -> None:
        mine = [name for cluster, name in (self._split(k) for k in self._foci) if cluster == feed.name]
        if isinstance(live, HubLiveSource):
            live.focus_nodes(mine)
        else:
            live.focus_node(mine[0] if mine else None)

    def _split(self, key: str) -> tuple[str | None, str]:
        hit = self.state.split(key)
        return (None, key) if hit is None else (hit[0].name, hit[1])

    def scoped_nodes(self) -> list[str]:
        """The keys of the nodes whose pods and events some cluster watches (the drill-down says
        when a viewer's node is beyond its cluster's cap)."""
        return sorted(node_key(f.name, n) for f in self.feeds if f.live is not None for n in f.live.scoped_nodes())

    def fleet_records(self) -> dict[str, NodeRecord]:
        """Every cluster's Node records by key (what the hub's publisher sends labels from)."""
        out: dict[str, NodeRecord] = {}
        for f in self.feeds:
            keys = self._keys[f.name]
            records = f.state.node_records()
            if len(keys) > 2 * len(records) + 1000:  # nodes came and went: forget the keys of the gone
                keys = self._keys[f.name] = {n: k for n, k in keys.items() if n in records}
            for n, rec in records.items():
                k = keys.get(n)
                if k is None:
                    k = keys[n] = node_key(f.name, n)
                out[k] = rec
        return out

    def cluster_records(self, cluster: str) -> dict[str, NodeRecord]:
        """One cluster's Node records by name (the keyframe of a flight-recorder segment)."""
        state = self.state.state_of(cluster)
        return {} if state is None else state.node_records()
