"""NodewatchApp: the dashboard. It reads a Source's state; it never knows what kind of source.

Every ``refresh_seconds`` the app asks the state for the fleet at the source clock's ``now``
(``FleetState.evaluate`` is incremental) and hands the pieces to the widgets, which repaint only
what is visible. The app does not start or stop the source: ``run_dashboard`` does, so tests can
build the app around a source they drive themselves. Replay controls appear only when
``source.replay`` is not None.

Work off the event loop (the evaluation of a big fleet) runs in Textual workers; a worker that
fails is reported on screen by ``on_worker_state_changed``, the one place that watches them. Keys
can be remapped by binding id (``ui/keymap.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import signal
import time
from collections.abc import Callable, Iterable

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.widgets import Footer, Input
from textual.worker import Worker, WorkerState

from ..config import UserConfig, remember_theme, remembered_theme
from ..core.clock import is_virtual
from ..core.rules import NodeState
from ..core.search import LabelSearch
from ..core.source import Source
from ..core.text import safe
from ..core.views import FleetView
from .ascii import AsciiFilter
from .cells import RowContext
from .cluster_strip import ClusterStrip, cluster_text, wall_cluster_text
from .commands import NodewatchCommands
from .drilldown import DrillDown
from .fleet_table import FleetTable
from .header import Banner, FleetHeader, banner_text, header_text, listing_text
from .help import HelpScreen
from .keymap import keymap_path, load_keymap
from .messages import NodeChosen
from .problems import ProblemsScreen
from .replay_bar import NextChange, ReplayBar
from .rows import COLUMN_KEYS, NOT_READY, WALL_COLUMNS, RowQuery, select_rows, state_slice, with_cluster
from .source_actions import SourceActions
from .terminal import MODERN, Terminal
from .theme import ANSI_THEMES, Palette, palette_16, palette_from_variables
from .timeline import FleetTimeline, history_for, live_span
from .wall import WallView
from .zone_strip import IncidentSummary, ZoneStrip, summary_text, zone_text

THREADED_EVALUATE_NODES = 5000
"""From this many nodes the periodic evaluate runs in a worker thread, off the event loop."""
LIST_CHECK_SECONDS = 0.05
"""How often the app looks whether a list has completed (a counter compared; nothing drawn)."""
LISTING_WAIT_SECONDS = 10.0
"""How long a fleet of ``THREADED_EVALUATE_NODES`` or more waits for its first lease list before it
shows frames judged without it: each such frame judges every node blind, and all of them again
once the list is in (at 130,000 nodes ~0.5 s of the process's GIL apiece, taken from the list)."""
STATE_FILTERS: tuple[str | NodeState | None, ...] = (None, NOT_READY) + tuple(sorted(NodeState, key=lambda s: s.rank))
MAIN_ONLY_ACTIONS = {"sort_next", "sort_reverse", "filter_state", "filter_zone", "filter_cluster", "filter_cordoned",
                     "search"}
MAX_NOTIFY_LINES = 12
"""A notification shows at most this many lines (each one bounded by ``safe``)."""
SHORT_LINES = 20
"""A terminal of fewer lines folds the timeline away (the ``-short`` class), and wall mode's counts to
a line each (``ui/wall.py``): four lines of chart, or three of big digits, left a 60x15 terminal a
table of no rows at all, and the rows are what the screen is for."""
REPLAY_ACTIONS = {"replay_toggle", "replay_faster", "replay_slower", "replay_step", "replay_seek", "replay_goto",
                  "replay_next_change", "replay_next_mark"}


def filter_label(f: str | NodeState | None) -> str:
    if f is None:
        return "all"
    if f == NOT_READY:
        return "not Ready"
    assert isinstance(f, NodeState)
    return f.word


def next_choice(options: list[str], current: str | None) -> str | None:
    """A filter key's cycle: all (None), then each option in turn, then all again (also when the
    current choice is gone)."""
    cycle: list[str | None] = [None, *options]
    try:
        i = cycle.index(current)
    except ValueError:
        i = 0
    return cycle[(i + 1) % len(cycle)]


HOST_WRITING_COMMANDS = frozenset({"Screenshot"})
"""Textual's palette commands that write a file where the dashboard runs (the Downloads folder)."""


def front_door_session() -> bool:
    """Is this dashboard a viewer of an SSH or web front door (``NODEWATCH_FRONTDOOR``)? Then it
    runs on the hub's host for someone who is not its owner: nothing it offers writes a file."""
    return bool(os.environ.get("NODEWATCH_FRONTDOOR"))


class NodewatchApp(SourceActions, App):
    """The dashboard. See the module docstring."""

    CSS_PATH = "app.tcss"
    TITLE = "nodewatch"
    COMMANDS = App.COMMANDS | {NodewatchCommands}
    ENABLE_COMMAND_PALETTE = True
    AUTO_FOCUS = None

    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("slash", "search", "Search", id="app.search"),
        Binding("escape", "clear", "Clear", show=False, id="app.clear"),
        Binding("s", "sort_next", "Sort", id="app.sort_next"),
        Binding("r", "sort_reverse", "Reverse", show=False, id="app.sort_reverse"),
        Binding("f", "filter_state", "State filter", id="app.filter_state"),
        Binding("z", "filter_zone", "Zone filter", show=False, id="app.filter_zone"),
        Binding("c", "filter_cluster", "Cluster filter", show=False, id="app.filter_cluster",
                tooltip="several clusters: show one cluster's nodes, the next, ..., all"),
        Binding("C", "filter_cordoned", "Cordoned", show=False, id="app.filter_cordoned",
                tooltip="only the cordoned nodes (whatever their state), again: all"),
        Binding("w", "toggle_wall", "Wall", id="app.wall"),
        Binding("T", "toggle_theme", "Light/dark", show=False, id="app.theme"),
        Binding("p", "problems", "Problems", id="app.problems"),
        Binding("h", "history", "History", id="app.history",
                tooltip="replay the hub's last hour here while live goes on (l: back to live)"),
        Binding("l", "live", "Back to live", id="app.live"),
        Binding("space", "replay_toggle", "Play/pause", id="replay.toggle"),
        Binding("plus,equals_sign", "replay_faster", "Faster", id="replay.faster"),
        Binding("minus", "replay_slower", "Slower", show=False, id="replay.slower"),
        Binding("full_stop", "replay_step(1)", "Step +1s", show=False, id="replay.step"),
        Binding("comma", "replay_step(-1)", "Step -1s", show=False, id="replay.step_back"),
        Binding("left_square_bracket", "replay_seek(-10)", "-10s", show=False, id="replay.back_10s"),
        Binding("right_square_bracket", "replay_seek(10)", "+10s", show=False, id="replay.forward_10s"),
        Binding("left_curly_bracket", "replay_seek(-60)", "-1m", show=False, id="replay.back_1m"),
        Binding("right_curly_bracket", "replay_seek(60)", "+1m", show=False, id="replay.forward_1m"),
        Binding("t", "replay_goto", "Go to time", show=False, id="replay.goto"),
        Binding("n", "replay_next_change", "Next change", id="replay.next_change"),
        Binding("m", "replay_next_mark", "Next mark", id="replay.next_mark",
                tooltip="jump to the next mark of the fleet timeline: Z zone, T NoExecute taint, E eviction"),
    ]

    def __init__(self, source: Source, *, wall: bool = False, focus: str | None = None,
                 refresh_seconds: float = 1.0, keymap: dict[str, str] | None = None,
                 keymap_problems: list[str] | None = None, source_problems: list[str] | None = None,
                 columns: tuple[str, ...] | None = None, theme: str | None = None,
                 on_theme_chosen: Callable[[str], str | None] | None = None,
                 terminal: Terminal = MODERN) -> None:
        super().__init__()
        self.terminal = terminal
        """What the terminal draws (``ui/terminal.py``): ASCII only, 16 colours; NO_COLOR is Textual's."""
        if terminal.ascii:
            # Textual's own list of line filters (NO_COLOR's lives there too): every line of every widget
            self._filters.append(AsciiFilter())
        self.column_keys = columns or COLUMN_KEYS
        """The fleet table's columns (the user's config file may choose fewer)."""
        self.initial_theme = theme
        self.on_theme_chosen = on_theme_chosen
        """Called with the theme the user picks (``run_dashboard`` remembers it; tests pass none)."""
        self.source_problems = list(source_problems or [])
        """What the source skipped or found damaged while reading (a recording's line numbers)."""
        self.keymap = dict(keymap or {})
        """Binding id -> keys, from the user's keymap file (``ui/keymap.py``)."""
        self.keymap_problems = list(keymap_problems or [])
        self.source = source
        self.wall = wall
        self.initial_focus = focus
        self.refresh_seconds = refresh_seconds
        self.query_rows = RowQuery()
        self.label_search = LabelSearch(source.state)
        self.view: FleetView | None = None
        self.now: float = 0.0
        self.palette: Palette = palette_from_variables({})
        self.last_tick_seconds = 0.0
        """Wall time the last tick took (evaluate + row selection + widget updates)."""
        self.ticks = 0
        self._tick_seq = 0
        self._created_at = time.monotonic()
        self.next_change = NextChange()
        self.worker_errors = 0
        self._last_worker_error = ""
        self.history, self._history_job = history_for(source)
        """The fleet timeline's history: a recording's (sampled in the background), or the ticks'."""
        self._live_source: Source | None = None
        """While a hub viewer replays the hub's history (``h``): the live source to go back to."""
        self.front_door = front_door_session()
        """A viewer of an SSH or web front door: no palette command that writes a file."""

    # --- nothing a front-door viewer does writes a file on the hub's host -----------------------

    def get_system_commands(self, screen) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            if self.front_door and command.title in HOST_WRITING_COMMANDS:
                continue
            yield command

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        if self.front_door:
            self.notify("screenshots are off in a front-door session (they would be written on the hub's host)",
                        severity="warning")
            return None
        return super().deliver_screenshot(filename, path, time_format)

    def save_screenshot(self, filename: str | None = None, path: str | None = None,
                        time_format: str | None = None) -> str:
        if self.front_door:
            raise PermissionError("no files are written from a front-door session")
        return super().save_screenshot(filename, path, time_format)

    def deliver_text(self, *args, **kwargs):
        if self.front_door:
            return None
        return super().deliver_text(*args, **kwargs)

    def deliver_binary(self, *args, **kwargs):
        if self.front_door:
            return None
        return super().deliver_binary(*args, **kwargs)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification is plain text (``ui/plain.py``): they quote zone names, errors and
        recording problems, and Textual would read them as markup. ``markup`` is ignored."""
        text = "\n".join(safe(line, 500) for line in str(message).splitlines()[:MAX_NOTIFY_LINES])
        super().notify(text, title=safe(title, 80), severity=severity, timeout=timeout, markup=False)

    # --- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield FleetHeader(Text(""), id="header")
        yield Banner(Text(""), id="banner")
        with Vertical(id="main"):
            yield ClusterStrip(Text(""), id="clusters")
            yield ZoneStrip(Text(""), id="zones")
            yield IncidentSummary(Text(""), id="summary")
            yield Input(placeholder="search node names and labels (Enter: keep, Escape: clear)", id="search",
                        disabled=True)
            yield FleetTable(columns=self.column_keys, id="table")
        yield WallView(id="wall")
        yield Input(placeholder="go to: HH:MM[:SS] (UTC), +90 or +15m from the start, or RFC 3339 "
                    "(Enter: go, Escape: close)", id="goto", disabled=True)  # (``t``: a replay's; a hub viewer's history too)
        yield FleetTimeline(self.history, live=self._history_job is None, id="timeline")
        if self.source.replay is not None:
            yield ReplayBar(self.source.replay, id="replay")
        yield Footer()

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, ending the app when the terminal goes away without a SIGHUP
        (``ui/terminal_driver.py``); any other (a front door's web driver, ``TEXTUAL_DRIVER``) as it is."""
        driver = super().get_driver_class()
        if driver.__name__ != "LinuxDriver":
            return driver
        from .terminal_driver import DashboardDriver, LinuxDriver  # (POSIX only: imported where it is Textual's choice)

        return DashboardDriver if driver is LinuxDriver else driver

    def _exit_on_hang_up(self) -> None:
        """SIGHUP (the terminal or the SSH session closed under the dashboard) and SIGTERM end the app
        the way ``q`` does, so the command's own ending runs: the sources stop and the exit handlers
        remove what the process wrote (``sources/credential_files``: a kubeconfig's client key).
        Their default action killed the process on the spot. Not in a headless app (tests run
        many in one process, whose signals are not theirs to take)."""
        if self.is_headless:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.add_signal_handler(sig, self.exit)

    def on_mount(self) -> None:
        self._exit_on_hang_up()
        if self.keymap:
            self.set_keymap(self.keymap)
        for problem in self.keymap_problems:
            self.notify(problem, severity="warning", timeout=10, markup=False)
        if self.source_problems:
            shown = self.source_problems[:MAX_NOTIFY_LINES - 1]
            more = len(self.source_problems) - len(shown)
            self.notify("\n".join(shown + ([f"... and {more} more (nodewatch status --replay FILE lists them)"]
                                            if more else [])),
                        title=f"{len(self.source_problems)} problems reading the source", severity="warning",
                        timeout=60)
        if self.terminal.colors16:
            light = self.initial_theme in self.available_themes and not self.get_theme(self.initial_theme).dark
            self.theme = ANSI_THEMES[not light]  # the terminal's 16 colours, whatever theme was chosen
        elif self.initial_theme:
            if self.initial_theme in self.available_themes:
                self.theme = self.initial_theme
            else:
                self.notify(f"theme {self.initial_theme!r} is not one of Textual's: "
                            f"{', '.join(sorted(self.available_themes))}", severity="warning", timeout=10)
        self._theme_kept = self.theme  # what the user already has: applying it is no new choice
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self.palette = self._palette()
        self._apply_wall()
        self.tick()
        self.set_interval(self.refresh_seconds, self._scheduled_tick, name="tick")
        self._lists_seen = self.source.state.lists_completed()
        self.set_interval(LIST_CHECK_SECONDS, self._tick_if_listed, name="listed")
        if self.initial_focus:
            self.open_node(self.initial_focus)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < SHORT_LINES, "-short")

    def on_unmount(self) -> None:
        if self._history_job is not None:
            self._history_job.close()
        if self._live_source is not None:
            self.source.stop()  # the history this dashboard opened (the caller stops the live one)

    def _palette(self) -> Palette:
        """The styles of the table and panes: the 16 ANSI colours under an ANSI theme (16-colour
        mode, or a user who picked one), else the theme's own colours."""
        if self.terminal.colors16 or self.current_theme.ansi:
            return palette_16(self.current_theme.dark)
        return palette_from_variables(self.get_css_variables())

    def _on_theme_changed(self, _theme: object) -> None:
        self.palette = self._palette()
        self.tick()
        if self.terminal.colors16:
            return  # light/dark of the 16 colours: not a theme to bring to a better terminal
        if self.on_theme_chosen is not None and self.theme != self._theme_kept:
            self._theme_kept = self.theme
            problem = self.on_theme_chosen(self.theme)
            if problem:
                self.notify(problem, severity="warning", timeout=10)

    def _apply_wall(self) -> None:
        self.set_class(self.wall, "-wall")
        self.query_one("#main").display = not self.wall
        self.query_one("#wall").display = self.wall
        # The wall table has no cursor but takes the focus, so that no hidden widget keeps it.
        self.query_one("#wall-table" if self.wall else "#table", FleetTable).focus()

    # --- the tick ----------------------------------------------------------------------------

    def _tick_if_listed(self) -> None:
        """A list has completed since the last look (the Leases at start: every heartbeat; the
        Nodes: the complete frame): a frame now, not up to ``refresh_seconds`` later."""
        done = self.source.state.lists_completed()
        if done != self._lists_seen and not self._exit:
            self._lists_seen = done
            try:
                self._scheduled_tick()
            except NoMatches:
                pass  # the app is closing: its widgets are gone (a list completed as it did)

    def _scheduled_tick(self) -> None:
        """The interval's tick. A big fleet is evaluated in a thread so keys stay responsive, and
        not at all while its first lease list comes in (``LISTING_WAIT_SECONDS``): the banner says
        how far it has got, the frame before stays."""
        state = self.source.state
        listed = state.first_lease_list()
        if (listed is not None and listed >= THREADED_EVALUATE_NODES
                and time.monotonic() - self._created_at < LISTING_WAIT_SECONDS):
            self.query_one("#banner", Banner).show(listing_text(listed, self.palette))
            if self.view is not None:  # its counts are of the few nodes known then: not said
                self.query_one("#header", FleetHeader).show(self._header(self.view, self.now, listing=listed))
            return
        if state.node_count() >= THREADED_EVALUATE_NODES:
            self.run_worker(self._evaluate_in_thread, name="evaluate", thread=True, exclusive=True,
                            group="evaluate", exit_on_error=False)
        else:
            self.tick()

    def _evaluate_in_thread(self) -> None:
        seq = self._tick_seq
        started = time.perf_counter()
        now = self.source.clock.now()
        view = self.source.state.evaluate(now)
        self._sample_history(view)
        # Collect the evaluation's young garbage here, in the worker, rather than letting the
        # collector fire in the middle of the next paint on the event loop (~2 ms at 65k nodes).
        gc.collect(0)
        self.call_from_thread(self._show_if_current, seq, view, now, started)

    def _show_if_current(self, seq: int, view: FleetView, now: float, started: float) -> None:
        self._last_worker_error = ""
        if seq == self._tick_seq:  # no key press re-evaluated meanwhile (a seek, a filter...)
            self._show(view, now, started)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker's failure ends here: shown to the user (once per distinct error while it
        repeats), and the dashboard carries on; the next tick tries again."""
        if event.state is not WorkerState.ERROR:
            return
        self.worker_errors += 1
        error = event.worker.error
        text = f"{event.worker.name or event.worker.group} failed: {type(error).__name__}: {error}"
        if text != self._last_worker_error:
            self._last_worker_error = text
            self.notify(safe(text, 300), title="nodewatch problem", severity="error", timeout=30, markup=False)

    def tick(self) -> None:
        """Evaluate the fleet at the source's ``now`` and repaint what is on screen."""
        self._tick_seq += 1
        started = time.perf_counter()
        now = self.source.clock.now()
        view = self.source.state.evaluate(now)
        self._sample_history(view)
        self._show(view, now, started)

    def _sample_history(self, view: FleetView) -> None:
        """A live or demo fleet's timeline is what the ticks saw (a recording's is sampled apart)."""
        if self._history_job is None and self.source.replay is None:
            self.history.observe(self.source.state, view)

    def _header(self, view: FleetView, now: float, listing: int | None = None) -> Text:
        return header_text(self.source.name, view, now, self.palette,
                           virtual=is_virtual(self.source.clock),
                           problems=self.source.state.problem_counts(), width=self.size.width,
                           problems_key=self.keymap.get("app.problems", "p"), listing=listing)

    def _show(self, view: FleetView, now: float, started: float) -> None:
        state = self.source.state
        self.view, self.now = view, now
        p = self.palette
        blind_since = None
        if view.leases_blind:
            h = view.health.get("leases")
            if h is not None:
                blind_since = h.down_since if h.down_since is not None else h.last_activity
            blind_since = blind_since if blind_since is not None else now
        ctx = RowContext(now, p, blind_since)
        self.query_one("#header", FleetHeader).show(self._header(view, now))
        self.query_one("#banner", Banner).show(banner_text(view, now, p))
        multi = bool(view.clusters)
        cluster_width = max((len(c.name) for c in view.clusters), default=0)
        cluster_width = min(max(cluster_width, 7), 24)
        if self.wall:
            wall = self.query_one("#wall", WallView)
            wall.show_counts(view, p)
            wall.query_one("#wall-clusters", ClusterStrip).show(wall_cluster_text(view, p) if multi else None)
            wall.query_one("#wall-zones", ZoneStrip).show(zone_text(view, p, compact=True))
            table = wall.query_one("#wall-table", FleetTable)
            if multi:
                table.set_columns(with_cluster(WALL_COLUMNS), cluster_width)
            table.empty_message = "every node is Ready"
            table.set_rows(state_slice(view, NOT_READY), ctx, shown=view)
        else:
            self.query_one("#clusters", ClusterStrip).show(
                cluster_text(view, p, compact=self.size.width < 120) if multi else None)
            self.query_one("#zones", ZoneStrip).show(zone_text(view, p, compact=self.size.width < 120))
            self.query_one("#summary", IncidentSummary).show(summary_text(view, p))
            q = self.query_rows
            table = self.query_one("#table", FleetTable)
            if multi:
                table.set_columns(with_cluster(self.column_keys), cluster_width)
            table.empty_message = ("no node matches the filters" if (q.states or q.zone or q.search or q.cluster
                                                                     or q.cordoned)
                                   else "no nodes")
            table.set_rows(select_rows(view, q, self.label_search), ctx, sort=q.sort, reverse=q.reverse, shown=view)
        self._update_subtitle()
        timeline = self.query_one("#timeline", FleetTimeline)
        timeline.palette = p
        if self.source.replay is not None:
            timeline.show(self.source.replay.start, self.source.replay.end)
            bar = self.query_one("#replay", ReplayBar)
            bar.palette = p
            bar.next_change = self.next_change.at(self.source.replay)
            bar.next_mark = self.history.next_mark(now)
            bar.refresh()
        else:
            timeline.show(*live_span(self.history, now))
        if isinstance(self.screen, DrillDown):
            self.screen.show(state, now, p, view)
        elif isinstance(self.screen, ProblemsScreen):
            self.screen.show(state, now, p)
        self.ticks += 1
        self.last_tick_seconds = time.perf_counter() - started

    def _update_subtitle(self) -> None:
        q = self.query_rows
        parts = [f"sort {q.sort}{' reversed' if q.reverse else ''}", f"state {filter_label(q.states)}"]
        if q.cluster is not None:
            parts.append(f"cluster {safe(q.cluster, 40)}")
        if q.zone is not None:
            parts.append(f"zone {safe(q.zone, 40) or '(no zone)'}")
        if q.cordoned:
            parts.append("cordoned only")
        if q.search:
            parts.append(f"search {safe(q.search, 40)!r}")
        self.sub_title = " · ".join(parts)

    # --- rows: sort, filter, search -------------------------------------------------------------

    def _set_query(self, **changes: object) -> None:
        values = {**self.query_rows.__dict__, **changes}
        self.query_rows = RowQuery(**values)
        self.tick()

    def set_sort(self, column: str) -> None:
        self._set_query(sort=column)
        self.notify(f"sorted by {column}", timeout=2)

    def set_state_filter(self, f: str | NodeState | None) -> None:
        self._set_query(states=f)
        self.notify(f"state filter: {filter_label(f)}", timeout=2)

    def set_zone_filter(self, zone: str | None) -> None:
        self._set_query(zone=zone)
        self.notify(f"zone filter: {'all' if zone is None else (safe(zone, 40) or '(no zone)')}", timeout=2,
                    markup=False)

    def set_cluster_filter(self, cluster: str | None) -> None:
        self._set_query(cluster=cluster)
        self.notify(f"cluster filter: {'all' if cluster is None else safe(cluster, 40)}", timeout=2, markup=False)

    def action_filter_cluster(self) -> None:
        """Several clusters: all, then each cluster in turn, then all again."""
        clusters = [c.name for c in (self.view.clusters if self.view else [])]
        self.set_cluster_filter(next_choice(clusters, self.query_rows.cluster))

    def action_sort_next(self) -> None:
        keys = with_cluster(COLUMN_KEYS) if self.view is not None and self.view.clusters else COLUMN_KEYS
        i = keys.index(self.query_rows.sort) if self.query_rows.sort in keys else -1
        self.set_sort(keys[(i + 1) % len(keys)])

    def action_sort_reverse(self) -> None:
        self._set_query(reverse=not self.query_rows.reverse)

    def action_filter_state(self) -> None:
        i = STATE_FILTERS.index(self.query_rows.states)
        self.set_state_filter(STATE_FILTERS[(i + 1) % len(STATE_FILTERS)])

    def set_cordoned_filter(self, on: bool) -> None:
        self._set_query(cordoned=on)
        self.notify(f"cordoned filter: {'only cordoned nodes' if on else 'all'}", timeout=2)

    def action_filter_cordoned(self) -> None:
        self.set_cordoned_filter(not self.query_rows.cordoned)

    def action_filter_zone(self) -> None:
        self.set_zone_filter(next_choice([z.name for z in (self.view.zones if self.view else [])],
                                         self.query_rows.zone))

    def action_search(self) -> None:
        if not self.wall:
            self._open_box("#search")

    def _open_box(self, selector: str) -> None:
        """Show the input box ``selector`` (search, go to a time) and type into it."""
        box = self.query_one(selector, Input)
        box.disabled = False
        box.add_class("-on")
        box.focus()

    def _close_box(self, selector: str, clear: bool = True) -> Input:
        """Hide the input box ``selector`` (``clear``: its text emptied too); the box."""
        box = self.query_one(selector, Input)
        if clear:
            box.value = ""
        box.remove_class("-on")
        box.disabled = True
        return box

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self._set_query(search=event.value.strip())

    @on(Input.Submitted, "#search")
    def _search_done(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self._close_box("#search", clear=False)
        self.query_one("#table", FleetTable).focus()

    def action_replay_goto(self) -> None:
        """``t``: a box for the time to go to (``SourceActions.replay_go_to``)."""
        self._open_box("#goto")

    @on(Input.Submitted, "#goto")
    def _goto_done(self, event: Input.Submitted) -> None:
        if event.value.strip():
            why = self.replay_go_to(event.value.strip())
            if why is not None:
                self.notify(why, severity="warning", timeout=6, markup=False)
                return  # (the box stays, to be mended)
        self._close_goto()

    def _close_goto(self) -> bool:
        """Close the go-to box if it is open (its text cleared); whether it was."""
        if not self.query_one("#goto", Input).has_class("-on"):
            return False
        self._close_box("#goto")
        self.query_one("#wall-table" if self.wall else "#table", FleetTable).focus()
        return True

    def action_clear(self) -> None:
        """Escape: close the go-to box if it is open; else close the search box and clear search and filters."""
        if self._close_goto():
            return
        self._close_box("#search")
        self.query_rows = RowQuery(sort=self.query_rows.sort, reverse=self.query_rows.reverse)
        if not self.wall:
            self.query_one("#table", FleetTable).focus()
        self.tick()

    # --- panes --------------------------------------------------------------------------------

    def action_toggle_wall(self) -> None:
        self.wall = not self.wall
        self._apply_wall()
        self.tick()

    def action_toggle_theme(self) -> None:
        if self.terminal.colors16:
            self.theme = ANSI_THEMES[not self.current_theme.dark]
        else:
            self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def _binding_groups(self) -> list[tuple[str, list[Binding]]]:
        """The bindings by screen, with the keys the user's keymap gave them."""
        app_keys = [b for b in self.BINDINGS if isinstance(b, Binding) and not (b.id or "").startswith("replay.")
                    and self._ever_usable(b.action)]
        groups = [("Dashboard", app_keys), ("Fleet table", list(FleetTable.BINDINGS)),
                  ("Drill-down", list(DrillDown.BINDINGS)), ("Errors and notices", list(ProblemsScreen.BINDINGS))]
        if self.source.replay is not None:
            groups.append(("Replay", [b for b in self.BINDINGS if isinstance(b, Binding) and (b.id or "").startswith("replay.")]))
        groups.append(("Everywhere", [Binding("ctrl+p", "command_palette", "Command palette", id="app.palette"),
                                      Binding("ctrl+q", "quit", "Quit", id="app.ctrl_quit")]))
        return [(title, [dataclasses.replace(b, key=self.keymap[b.id]) if b.id in self.keymap else b
                         for b in bindings]) for title, bindings in groups]

    def _ever_usable(self, action: str) -> bool:
        """Whether a key can do anything with this source, at some moment (the help lists no key that
        never can: a replay's help listed "h History" and "l Back to live", which did nothing)."""
        if action in ("history", "live"):  # a hub viewer's: its recorded history, and back
            return self._live_source is not None or hasattr(self.source, "open_history")
        if action == "filter_cluster":
            return self.view is not None and bool(self.view.clusters)
        return True

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self._binding_groups(), str(keymap_path())))

    def action_problems(self) -> None:
        """The list behind the header's error and notice counts."""
        if not isinstance(self.screen, ProblemsScreen):
            self.push_screen(ProblemsScreen())
            self.call_after_refresh(self.tick)

    @on(NodeChosen)
    def _node_chosen(self, event: NodeChosen) -> None:
        self.open_node(event.name)

    def open_node(self, name: str) -> None:
        """The drill-down of ``name`` (a node key: ``cluster/name`` when several clusters are
        watched); the source is asked for its pods and events."""
        if isinstance(self.screen, DrillDown):
            self.pop_screen()
        self.source.focus_node(name)
        screen = DrillDown(name)
        self.push_screen(screen, callback=self._drilldown_closed)
        self.call_after_refresh(self.tick)

    def _drilldown_closed(self, _result: object) -> None:
        self.source.focus_node(None)
        self.tick()

    # --- replay -------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS:
            return self.source.replay is not None
        if action in MAIN_ONLY_ACTIONS and (self.wall or not self._on_main_screen()):
            return False
        if action == "toggle_wall" and not self._on_main_screen():
            return False
        if action == "filter_cluster" and not (self.view is not None and self.view.clusters):
            return False
        if action == "history":
            return self._live_source is None and hasattr(self.source, "open_history") and self._on_main_screen()
        if action == "live":
            return self._live_source is not None and self._on_main_screen()
        return True

    def _on_main_screen(self) -> bool:
        return not isinstance(self.screen, (DrillDown, HelpScreen, ProblemsScreen))


def binding_ids() -> set[str]:
    """Every binding id a keymap may name."""
    classes = (NodewatchApp, FleetTable, DrillDown, HelpScreen, ProblemsScreen)
    return {b.id for cls in classes for b in cls.BINDINGS if isinstance(b, Binding) and b.id}


def theme_memory(environ: dict[str, str] | None = None) -> Callable[[str], str | None] | None:
    """What remembers a theme the user picks: nothing in a front-door session (SSH, web), whose
    viewer must never make the hub's host write a file; the state directory otherwise."""
    env = os.environ if environ is None else environ
    return None if env.get("NODEWATCH_FRONTDOOR") else remember_theme


def run_dashboard(source: Source, *, wall: bool = False, problems: list[str] | None = None,
                  focus: str | None = None, config: UserConfig | None = None,
                  terminal: Terminal = MODERN, started: bool = False) -> int:
    """Start the source, run the dashboard until the user quits, stop the source. The user's
    keymap (``ui/keymap.py``) is read here, so tests build the app without one. ``focus``: a node
    whose drill-down opens first (``--node``: k9s' plugin and scripts open one node); ``config``: the
    user's settings file (``nodewatch/config.py``): theme (else the one last chosen), refresh, columns;
    ``terminal``: ASCII and 16-colour mode (``ui/terminal.py``, decided by the command);
    ``started``: the caller started the source already (it is stopped here all the same)."""
    try:
        keymap, keymap_problems = load_keymap(keymap_path(), binding_ids())
        config = config or UserConfig()
    except BaseException:
        if started:
            source.stop()
        raise
    if not started:
        source.start()
    try:
        app = NodewatchApp(source, wall=wall, focus=focus, keymap=keymap,
                           keymap_problems=[*keymap_problems, *config.problems], source_problems=problems,
                           refresh_seconds=config.refresh or 1.0, columns=config.columns,
                           theme=config.theme or remembered_theme(), on_theme_chosen=theme_memory(),
                           terminal=terminal)
        app.run()
        return app.return_code or 0
    finally:
        source.stop()
