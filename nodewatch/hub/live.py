"""The live source as the hub runs it: several viewers may drill into several nodes at once.

``LiveSource`` watches the pods and events of one focused node and of the nodes that are not
Ready, at most ``MAX_SCOPED_NODES`` in all. The hub's viewers each focus their own node: they all
come first (the most recent first), then the nodes that are not Ready, within the same cap, so the
API server never sees more scoped watches from a hub than from one nodewatch.
"""

from __future__ import annotations

from ..sources.live import LiveSource


class HubLiveSource(LiveSource):
    """A ``LiveSource`` with a list of focused nodes instead of one."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._foci: list[str] = []

    def focus_nodes(self, nodes: list[str]) -> None:
        """The nodes viewers drill into, the most recent first."""
        self._foci = list(nodes)
        super().focus_node(nodes[0] if nodes else None)  # wakes the housekeeping at once

    def focus_node(self, node: str | None) -> None:
        self.focus_nodes([node] if node else [])

    def wanted_scoped(self) -> list[str]:
        foci = list(self._foci)
        chosen = set(foci)
        return foci + [n for n in self.state.not_ready_nodes() if n not in chosen]
