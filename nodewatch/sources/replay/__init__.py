"""Replay a recording (v1 or a kubectl watch log) into a fresh FleetState, in virtual time.

Why an index and keyframes: a one-hour recording of 5,000 nodes holds about two million events
(every lease renews every 10s). The file is read once to build an index (time, byte offset, length
of each event line: ``index.py``) and events are parsed again only when applied, so memory holds
the index, not the objects. A background pass applies everything once on a scratch state and keeps
a *keyframe* (a copy of the state's records) every ``KEYFRAME_EVENTS`` events (``keyframes.py``);
a seek restores the nearest keyframe before ``t`` and applies the few events between, so the state
becomes exactly what it was at ``t``, in a fraction of a second, backward or forward
(``player.py``). The look-ahead to the next node state change is ``lookahead.py``. One instant
alone (``status --replay``) needs no index: ``instant.py`` reads the file once, and leaves out what
a later event supersedes (``superseded.py``).
"""

from __future__ import annotations

from ..recording import RecordingError
from .instant import state_at
from .player import ReplayPlayer, ReplaySource

__all__ = ["RecordingError", "ReplayPlayer", "ReplaySource", "state_at"]
