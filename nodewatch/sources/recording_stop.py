"""A recording that a full disk stops, and nothing else: what ``watch --record``, ``record`` and
``demo --record`` write through (``commands.common.open_recorder``).

Why: a ``Recorder``'s (or ``ColumnarRecorder``'s) failed write raises, and the streams write from
inside the sink that feeds the state. A reflector takes an ``OSError`` out of its sink for its
connection breaking: it relists, again and again, and within seconds the whole fleet shows Late on
a screen that was right a moment before (a false alarm about the cluster because a disk filled).
``StoppingRecorder`` keeps the error from the streams: the first failed write (or failed flush, the
flusher's, seen at the next look) stops the recording, says why once (``stopped``, ``on_stop``, the
log), and every later write is dropped.

It does not resume: one file with a hole in it would replay the hole as a quiet fleet. (The hub's
flight recorder, which can start a new segment headed by a keyframe, resumes: ``hub/flight_recorder``.)
What reached the file stays readable up to its last whole line (a recorder closed after a failed
write writes nothing more).
"""

from __future__ import annotations

import errno
import logging
import threading
from typing import Any, Callable

from ..core.settings import Settings
from .recording import ClusterRecorder

DISK_FULL = "recording stopped: disk full"

log = logging.getLogger("nodewatch.recording")


def stop_reason(exc: OSError) -> str:
    """What a screen says of a recording stopped by ``exc`` (``DISK_FULL`` for a full disk or quota)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DISK_FULL
    return f"recording stopped: {exc.strerror or exc}"


class StoppingRecorder:
    """A recorder's methods, never raising ``OSError``: a failed write stops the recording (see the
    module docstring). Thread-safe as the recorder it wraps."""

    def __init__(self, recorder: Any, on_stop: Callable[[str], None] | None = None) -> None:
        """``recorder``: a ``Recorder`` or ``ColumnarRecorder``. ``on_stop(message)``: called once,
        on the writing thread, when recording stops (``watch`` puts it among the dashboard's
        problems; the message names the file and says what it still holds)."""
        self.recorder = recorder
        self.path: str = recorder.path
        self.on_stop = on_stop
        self.stopped = ""
        """Why recording stopped (``DISK_FULL``...), "" while it records; ``/readyz`` and the
        ``nodewatch_flight_recorder_up`` metric read it (``metrics/sample.py``)."""
        self.error: OSError | None = None
        self.message = ""
        """``stopped`` said whole: what failed, and what the file still holds."""
        self.lines_at_stop: int | None = None
        """Events handed to the recorder when it stopped (the last second of them may not have
        reached the disk: they were waiting for the flush the disk refused)."""
        self._lock = threading.Lock()

    @property
    def lines(self) -> int:
        return int(self.recorder.lines)

    def for_cluster(self, cluster: str) -> ClusterRecorder:
        return ClusterRecorder(self, cluster)  # type: ignore[arg-type]  # the same methods as a Recorder

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False,
              cluster: str | None = None) -> None:
        if self._recording():
            self._guard(self.recorder.write, resource, etype, obj, t, listing, cluster=cluster)

    def write_health(self, resource: str, t: float, cluster: str | None = None, **health: Any) -> None:
        if self._recording():
            self._guard(self.recorder.write_health, resource, t, cluster=cluster, **health)

    def write_cert(self, node: str, not_after: float, source: str, t: float, cluster: str | None = None) -> None:
        if self._recording():
            self._guard(self.recorder.write_cert, node, not_after, source, t, cluster=cluster)

    def write_settings(self, t: float, settings: Settings, cluster: str | None = None) -> None:
        if self._recording():
            self._guard(self.recorder.write_settings, t, settings, cluster=cluster)

    def flush(self) -> None:
        if self._recording():
            self._guard(self.recorder.flush)

    def close(self) -> None:
        self.recorder.close()

    def check(self) -> str:
        """``stopped``, after a look at the recorder's kept error (a failed flush of its flusher
        thread, with no write since): what a command's progress loop calls."""
        self._recording()
        return self.stopped

    def _recording(self) -> bool:
        if self.stopped:
            return False
        kept = getattr(self.recorder, "error", None)
        if isinstance(kept, OSError):
            self._stop(kept)
            return False
        return True

    def _guard(self, write: Callable[..., None], *args: Any, **kw: Any) -> None:
        try:
            write(*args, **kw)
        except OSError as exc:
            self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        with self._lock:
            if self.stopped:
                return
            self.error = exc
            self.lines_at_stop = self.lines
            reason = stop_reason(exc)
            self.message = (f"{reason} ({exc.strerror or exc}): {self.path} keeps what was recorded before "
                            f"(up to {self.lines_at_stop:,} events), readable up to its last whole line; the "
                            "cluster is still watched and judged, nothing more is recorded")
            self.stopped = reason
        log.error("%s", self.message)
        if self.on_stop is not None:
            self.on_stop(self.message)
