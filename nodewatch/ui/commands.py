"""The command palette (ctrl+p): every dashboard action by name, plus "open node ...".

Titles carry zone and node names from the cluster, so they reach the palette as ``Text`` (via
``ui/plain.py``), never as a ``str``: Textual reads a ``str`` prompt as markup. Help texts are
always markup in Textual, so they hold only nodewatch's own words (state names), never cluster text.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..core.rules import NodeState
from ..core.text import safe
from .plain import highlighted
from .rows import COLUMNS, NOT_READY

if TYPE_CHECKING:
    from .app import NodewatchApp

MAX_NODE_COMMANDS = 500
"""Only the worst nodes get an "open node" command: the palette is not a 65,000-row search."""


class NodewatchCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app: NodewatchApp = self.app  # type: ignore[assignment]
        cmds: list[tuple[str, Callable[[], object], str]] = [
            ("Toggle wall mode", app.action_toggle_wall, "big counts and only the nodes not Ready"),
            ("Show keys (help)", app.action_help, "every key binding"),
            ("Search nodes", app.action_search, "names and labels"),
            ("Clear filters and search", app.action_clear, "show the whole fleet, worst first"),
            ("Reverse sort order", app.action_sort_reverse, ""),
            ("Toggle light/dark theme", app.action_toggle_theme, ""),
        ]
        for col in COLUMNS:
            cmds.append((f"Sort by {col.title.lower()}", partial(app.set_sort, col.key), ""))
        cmds.append(("Filter: all nodes", partial(app.set_state_filter, None), ""))
        cmds.append(("Filter: not Ready", partial(app.set_state_filter, NOT_READY), ""))
        for s in sorted(NodeState, key=lambda s: s.rank):
            cmds.append((f"Filter: {s.word} only", partial(app.set_state_filter, s), ""))
        cmds.append(("Filter: cordoned only", partial(app.set_cordoned_filter, True), "whatever their state"))
        cmds.append(("Filter: cordoned or not", partial(app.set_cordoned_filter, False), ""))
        cmds.append(("Zone: all zones", partial(app.set_zone_filter, None), ""))
        if app.view is not None:
            for z in app.view.zones:
                label = safe(z.name, 40) or "(no zone)"
                cmds.append((f"Zone: {label}", partial(app.set_zone_filter, z.name), z.state.value))
        if app.source.replay is not None:
            cmds += [
                ("Replay: play/pause", app.action_replay_toggle, ""),
                ("Replay: faster", app.action_replay_faster, ""),
                ("Replay: slower", app.action_replay_slower, ""),
                ("Replay: jump to next state change", app.action_replay_next_change, ""),
                ("Replay: back 1 minute", partial(app.action_replay_seek, -60.0), ""),
                ("Replay: forward 1 minute", partial(app.action_replay_seek, 60.0), ""),
                ("Replay: go to a time", app.action_replay_goto, "t"),
            ]
        if app.view is not None:
            for v in app.view.nodes[:MAX_NODE_COMMANDS]:
                cmds.append((f"Open node {safe(v.key, 80)}", partial(app.open_node, v.key),
                             f"{v.state.symbol} {v.state.word}"))
        return cmds

    async def discover(self) -> Hits:
        for title, cb, help_text in self._commands():
            if not title.startswith("Open node"):
                yield DiscoveryHit(highlighted(title, (), None), cb, text=title, help=help_text or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, cb, help_text in self._commands():
            score, offsets = matcher.fuzzy_search.match(matcher.query, title)
            if score > 0:
                # not matcher.highlight(): it parses its argument as markup, and titles hold cluster text
                yield Hit(score, highlighted(title, offsets, matcher.match_style), cb, text=title,
                          help=help_text or None)
