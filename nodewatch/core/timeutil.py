"""RFC 3339 parsing and formatting for Kubernetes timestamps.

Kubernetes writes ``metav1.Time`` with second precision and ``metav1.MicroTime`` (Lease
``renewTime``, event ``eventTime``) with microseconds. Everything inside nodewatch is a float of
seconds since the epoch so that rules can subtract times without timezone traps. Parsing never
raises: a malformed timestamp from the cluster is ``None`` ("unknown"), not a crash.

Numbers are range-checked where they are read: a time is a finite number of seconds between
:data:`MIN_TIME` and :data:`MAX_TIME` (what ``datetime`` can show), a duration a finite number of
seconds of at most :data:`MAX_SECONDS` either way. ``1e308``, ``-1e308`` and NaN from a recording
or the API are "unknown" (or refused with the line number, by the readers), never a traceback
further down (``OverflowError`` in ``datetime``, a 300-digit duration on screen).
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import datetime, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-]\d{2}:?\d{2})?$"
)
_fromiso = datetime.fromisoformat

MIN_TIME = 0.0
"""1970-01-01T00:00:00Z: no Kubernetes object or recording line is older."""
MAX_TIME = 253402300799.0
"""9999-12-31T23:59:59Z: the last second RFC 3339 (and ``datetime``) can write."""
MAX_SECONDS = 100 * 365.25 * 86400
"""A century: the longest duration (toleration, lease duration, offset) taken as it is."""
TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
"""The units of a duration a user types (``duration_seconds``)."""
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"  # (no two ways to read a digit: linear on any input)
_DURATION = re.compile(rf"(?:{_NUMBER}[smhd])+|{_NUMBER}")
_DURATION_PART = re.compile(rf"({_NUMBER})([smhd])")


def valid_time(value: object) -> float | None:
    """``value`` as a time (seconds since the epoch) when it is a finite number within
    [MIN_TIME, MAX_TIME]; else None. Booleans are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        t = float(value)
    except OverflowError:  # an int beyond the float range
        return None
    return t if MIN_TIME <= t <= MAX_TIME else None


def time_problem(value: object) -> str:
    """Why ``value`` is not a usable time, for a message that also names the line or object."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    if isinstance(value, float) and math.isnan(value):
        return "is NaN"
    return f"{_short_number(value)} is outside {format_time(MIN_TIME)}..{format_time(MAX_TIME)}"


def seconds(value: object) -> float | None:
    """A duration read from the cluster or a file (``tolerationSeconds``, ``leaseDurationSeconds``):
    finite and clamped to ±MAX_SECONDS; None when it is not a number (or NaN)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        x = math.inf if value > 0 else -math.inf
    if math.isnan(x):
        return None
    return min(max(x, -MAX_SECONDS), MAX_SECONDS)


def _short_number(value: object) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def parse_time(value: object) -> float | None:
    """Seconds since the epoch for an RFC 3339 string, or ``None`` when it is absent or malformed."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return valid_time(value)
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        dt = _fromiso(value)
    except ValueError:
        return _parse(value)
    if dt.tzinfo is None:
        return None  # RFC 3339 requires an offset; a naive time would be read in the local zone
    if len(value) < 20 or value[4] != "-" or value[10] not in "Tt ":
        return _parse(value)  # fromisoformat also takes ISO forms RFC 3339 does not
    return valid_time(dt.timestamp())


def _parse(value: str) -> float | None:
    m = _RFC3339.match(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    try:
        base = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        datetime(year, month, day, hour, minute, min(second, 59))  # validates ranges
    except (ValueError, OverflowError):
        return None
    frac = float(m.group(7)) if m.group(7) else 0.0
    tz = m.group(8)
    offset = 0
    if tz and tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return valid_time(base + frac - offset)


def format_time(t: float | None, micro: bool = False) -> str | None:
    """RFC 3339 UTC (``Z``); microseconds only when asked, as Kubernetes' MicroTime does.
    None for None and for what is not a :func:`valid_time` (nothing to write, no traceback)."""
    if t is None or valid_time(t) is None:
        return None
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def time_of_day(value: str) -> int | None:
    """``HH:MM[:SS]`` (UTC) as seconds into the day; None when ``value`` is not written so. Raises
    ValueError for one written so that is no time of day (25:00)."""
    m = _CLOCK.match(value.strip())
    if not m:
        return None
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if h > 23 or mi > 59 or sec > 59:
        raise ValueError(f"{value!r}: not a time of day")
    return h * 3600 + mi * 60 + sec


def duration_seconds(text: str) -> float | None:
    """A duration as a user types it, in seconds: ``90`` or ``2.5`` (seconds), ``90s``, ``15m``, ``24h``,
    ``7d``, or parts together (``1h30m``), any case; None for anything else, and for what is not finite
    (``nan``, ``inf``, 400 digits): ``--keep``, ``--segment`` and the offsets of ``--at``."""
    t = text.lower()
    if _DURATION.fullmatch(t) is None:
        return None
    v = sum(float(n) * TIME_UNITS[u] for n, u in _DURATION_PART.findall(t)) if t[-1] in TIME_UNITS else float(t)
    return v if math.isfinite(v) else None


def parse_when(value: str, start: float | None) -> float:
    """A ``--at``/``--start`` argument: RFC 3339, ``+OFFSET`` / ``-OFFSET`` relative to ``start`` (a
    ``duration_seconds``: ``+90``, ``+15m``, ``-1h30m``), or ``HH:MM[:SS]`` (UTC): that time on
    ``start``'s day, or on the next day when that is over 12 hours before ``start`` (a recording that
    began at 23:00 and an ``--at 01:00``); a hub's directory of many days resolves it itself
    (``segments.resolve_when``).

    Raises ``ValueError`` with a message meant for the user: also for a relative offset beyond
    :data:`MAX_SECONDS` and for a result that is not a :func:`valid_time`.
    """
    text = value.strip()
    shown = _short_number(value)
    of_day = time_of_day(text)
    if of_day is not None:
        if start is None:
            raise ValueError(f"{shown!r} is a time of day, but the recording's day is unknown")
        t = start - start % 86400 + of_day
        return t if t >= start - 43200 else t + 86400
    if text[:1] in "+-" and _DURATION.fullmatch(text[1:].lower()):
        if start is None:
            raise ValueError(f"{shown!r} is relative, but the start time is unknown")
        size = duration_seconds(text[1:])
        offset = math.inf if size is None else size  # (None: 400 digits, beyond a float: refused next)
        offset = -offset if text[0] == "-" else offset
        if not abs(offset) <= MAX_SECONDS:
            raise ValueError(f"{shown!r}: an offset of more than a century (±{MAX_SECONDS:.0f} seconds)")
        t = start + offset
        if valid_time(t) is None:
            raise ValueError(f"{shown!r} is before 1970 or after 9999 ({time_problem(t)})")
        return t
    parsed = parse_time(text)
    if parsed is None:
        raise ValueError(f"{shown!r} is neither RFC 3339 (2026-11-29T10:00:00Z), an offset from the start "
                         "(+90, +15m, +1h30m) nor HH:MM[:SS] (UTC)")
    return parsed

