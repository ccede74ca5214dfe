"""A hub viewer's way back: the hub's flight recorder, replayed in the viewer's own dashboard.

A viewer on the hub's machine reaches the recordings beside the hub's socket (``DIR/recordings``;
the directory's permissions decide who may, as they do for the socket) and replays the last hour
of them while its live connection carries on underneath; one key takes it back to live. A viewer
over TCP has no access to DIR, and is told so rather than shown an empty replay: the hub sends
evaluated views only, never its recordings.
"""

from __future__ import annotations

import os

from ..sources.replay import RecordingError, ReplaySource
from ..sources.segments import SegmentWindow, list_segments
from .address import HubAddress
from .paths import RECORDINGS

HISTORY_SECONDS = 3600.0
"""How far back a viewer's replay reaches (the hub keeps more: ``nodewatch replay DIR/recordings``)."""


class HistoryUnavailable(ValueError):
    """Why this viewer cannot replay the hub's history (said to the user)."""


def recordings_of(address: HubAddress) -> str:
    """The flight recorder's directory of the hub at ``address``. Raises HistoryUnavailable."""
    if address.path is None:
        raise HistoryUnavailable("the hub's history is not available over TCP (its recordings stay on the "
                                 "hub's machine: run `nodewatch replay DIR/recordings` there)")
    directory = os.path.join(os.path.dirname(address.path), RECORDINGS)
    try:
        if list_segments(directory):
            return directory
    except OSError as exc:
        raise HistoryUnavailable(f"cannot read the hub's recordings in {directory}: {exc.strerror or exc}") from None
    raise HistoryUnavailable(f"{directory}: no recordings (is the hub running with --no-record?)")


def open_history(address: HubAddress, seconds: float = HISTORY_SECONDS) -> ReplaySource:
    """The last ``seconds`` the hub recorded, as a started ReplaySource paused at the newest moment
    (seek back from there). Raises HistoryUnavailable."""
    directory = recordings_of(address)
    segments = list_segments(directory)
    # From the segment names (the source's clock), not the files' times: a demo hub records on a
    # virtual clock. The newest segment's start less an hour covers the last hour, and at most
    # one segment more.
    start = max(segments[0].start, segments[-1].start - seconds)
    try:
        source = ReplaySource(SegmentWindow(directory, start, None))
    except (RecordingError, OSError, ValueError) as exc:
        raise HistoryUnavailable(f"cannot replay the hub's recordings: {exc}") from None
    source.replay.seek(source.replay.end)
    source.name = f"history of the hub (last {seconds / 60:.0f} min, {directory})"
    source.start()
    return source
