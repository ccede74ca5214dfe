"""The two names every reader of a recording needs: the header's key and the error a user sees.

Their own module so that ``segments.py`` (a directory of segments read as one stream) needs nothing
of ``recording.py``, which opens a directory through it: the dependency goes one way."""

from __future__ import annotations

FORMAT_VERSION = 1
HEADER_KEY = "nodewatch_recording"


class RecordingError(Exception):
    """A recording nodewatch cannot replay at all (missing file, wrong version...): for the user."""
