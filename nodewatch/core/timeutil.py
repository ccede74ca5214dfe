"""RFC 3339 parsing and formatting for Kubernetes timestamps.

Kubernetes writes ``metav1.Time`` with second precision and ``metav1.MicroTime`` (Lease
``renewTime``, event ``eventTime``) with microseconds. Everything inside nodewatch is a float of
seconds since the epoch so that rules can subtract times without timezone traps. Parsing never
raises: a malformed timestamp from the cluster is ``None`` ("unknown"), not a crash.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-]\d{2}:?\d{2})?$"
)
_fromiso = datetime.fromisoformat


def parse_time(value: object) -> float | None:
    """Seconds since the epoch for an RFC 3339 string, or ``None`` when it is absent or malformed."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
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
    return dt.timestamp()


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
    return base + frac - offset


def format_time(t: float | None, micro: bool = False) -> str | None:
    """RFC 3339 UTC (``Z``); microseconds only when asked, as Kubernetes' MicroTime does."""
    if t is None:
        return None
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_when(value: str, start: float | None) -> float:
    """A ``--at``/``--start`` argument: RFC 3339, or ``+SECONDS`` / ``-SECONDS`` relative to ``start``.

    Raises ``ValueError`` with a message meant for the user.
    """
    text = value.strip()
    if text[:1] in "+-" and text[1:].replace(".", "", 1).isdigit():
        if start is None:
            raise ValueError(f"{value!r} is relative, but the start time is unknown")
        return start + float(text)
    t = parse_time(text)
    if t is None:
        raise ValueError(f"{value!r} is neither RFC 3339 (2026-11-29T10:00:00Z) nor +SECONDS")
    return t

