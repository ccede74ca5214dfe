"""The dashboard's actions on its source: the replay controls (play, speed, step, seek, go to a
time, the next state change and the next mark) and, for a hub viewer, switching to the hub's last
hour and back.

A mixin of ``NodewatchApp`` (``ui/app.py``), apart so that the app module keeps to its layout, tick
and panes; the bindings stay in the app's ``BINDINGS``, where Textual and the help screen find them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.widgets import Footer

from ..core.history import BackgroundHistory, HistoryRecorder
from ..core.search import LabelSearch
from ..core.source import Source
from ..core.timeutil import format_time, parse_when
from .replay_bar import READING_ON, NextChange, ReplayBar, mark_text, next_speed
from .timeline import FleetTimeline, history_for

if TYPE_CHECKING:  # for the type checker the mixin is the app it is mixed into; at run time, nothing
    from textual.app import App

    _AppBase = App[Any]
else:
    _AppBase = object


class SourceActions(_AppBase):
    """Actions on ``self.source`` (a mixin: ``self`` is the ``NodewatchApp``)."""

    # the app's own fields that these actions read and replace (``NodewatchApp.__init__`` sets them)
    source: Source
    _live_source: Source | None
    label_search: LabelSearch
    history: HistoryRecorder
    _history_job: BackgroundHistory | None
    next_change: NextChange
    _tick_seq: int

    if TYPE_CHECKING:
        def tick(self) -> None: ...

    # --- a hub viewer's history ------------------------------------------------------------------

    def action_history(self) -> None:
        """Replay the hub's last hour in this dashboard (``source.open_history``) while the live
        source carries on underneath; ``l`` comes back to it."""
        self.notify("opening the hub's last hour...", timeout=3)
        self.run_worker(self._open_history, name="history", thread=True, exclusive=True, group="history",
                        exit_on_error=False)

    def _open_history(self) -> None:
        live = self.source
        try:
            history = live.open_history()  # type: ignore[attr-defined]
        except ValueError as exc:  # said why (over TCP, nothing recorded...)
            self.call_from_thread(self.notify, str(exc), title="no history", severity="warning", timeout=10)
            return
        self.call_from_thread(self._show_source, history, live)

    def action_live(self) -> None:
        live, history = self._live_source, self.source
        if live is not None:
            self._show_source(live, None)
            history.stop()
            self.notify("live", timeout=2)

    def _show_source(self, source: Source, live: Source | None) -> None:
        """Draw ``source`` from now on; ``live``: the source to go back to (None: this is it)."""
        self.source, self._live_source = source, live
        self.label_search = LabelSearch(source.state)
        if self._history_job is not None:
            self._history_job.close()
        self.history, self._history_job = history_for(source)
        timeline = self.query_one("#timeline", FleetTimeline)
        timeline.history, timeline.live = self.history, self._history_job is None
        for bar in self.query(ReplayBar):
            bar.remove()
        if source.replay is not None:
            self.mount(ReplayBar(source.replay, id="replay"), before=self.query_one(Footer))
        self.next_change = NextChange()
        self._tick_seq += 1  # a frame of the other source still being evaluated is not shown
        self.refresh_bindings()
        self.call_after_refresh(self.tick)

    def action_replay_toggle(self) -> None:
        r = self.source.replay
        if r is None:
            return
        r.pause() if r.playing else r.play()
        self.tick()

    def action_replay_faster(self) -> None:
        r = self.source.replay
        if r is not None:
            r.set_speed(next_speed(r.speed, up=True))
            self.tick()

    def action_replay_slower(self) -> None:
        r = self.source.replay
        if r is not None:
            r.set_speed(next_speed(r.speed, up=False))
            self.tick()

    def action_replay_step(self, seconds: float) -> None:
        r = self.source.replay
        if r is not None:
            r.step(float(seconds))
            self.tick()

    def action_replay_seek(self, seconds: float) -> None:
        r = self.source.replay
        if r is not None:
            r.seek(min(max(r.position() + float(seconds), r.start), r.end))
            self.tick()

    def replay_go_to(self, text: str) -> str | None:
        """Seek the replay to ``text`` (``HH:MM[:SS]`` UTC on the recording's day, ``+OFFSET`` from its
        start such as ``+90`` or ``+15m``, RFC 3339: ``timeutil.parse_when``, as ``--at`` reads it);
        None when done, else why not (the replay stays where it is)."""
        r = self.source.replay
        if r is None:
            return "not a replay"
        try:
            t = parse_when(text, r.start)
        except ValueError as exc:
            return str(exc)
        if not r.start <= t <= r.end:
            side = "before the recording's start" if t < r.start else "after the recording's end"
            more = "" if t < r.start or r.complete else READING_ON
            edge = r.start if t < r.start else r.end
            return f"{format_time(t)} is {side} ({format_time(edge)}){more}"
        r.seek(t)
        self.tick()
        return None

    def action_replay_next_change(self) -> None:
        r = self.source.replay
        if r is None:
            return
        t = self.next_change.at(r)
        if t is None:
            more = "" if r.complete else READING_ON
            self.notify(f"no further state change in the recording{more}", timeout=3)
            return
        r.seek(t)
        self.tick()

    def action_replay_next_mark(self) -> None:
        r = self.source.replay
        if r is None:
            return
        m = self.history.next_mark(r.position())
        if m is None:
            more = "" if self.history.complete else " (the timeline is still being sampled)"
            self.notify(f"no further mark in the recording{more}", timeout=3)
            return
        r.seek(m.at)
        self.tick()
        self.notify(mark_text(m), timeout=4, markup=False)
