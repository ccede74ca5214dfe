"""Plain-text formatting of what the views say: clock times, countdowns, bars, conditions, taints.

Everything here returns ``str`` and knows nothing of Rich or Textual (it sits in the core beside
``text.py``), so it is cheap to test and to fuzz, and the dashboard and ``status`` share it. The one
rule that matters most: every string that came from the cluster (or from a recording) goes through
``text.safe`` before it is shown; the widgets then wrap it in ``rich.text.Text`` so it is never read
as markup.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from .rules import Taint
from .text import duration, safe, short_duration

# --- time ---------------------------------------------------------------------------------------


def clock_time(t: float | None, *, date: bool = False) -> str:
    """``HH:MM:SSZ`` (UTC), with the date when asked; ``?`` when unknown."""
    if t is None or not math.isfinite(t):
        return "?"
    try:
        dt = datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return "?"
    return dt.strftime("%Y-%m-%d %H:%M:%SZ" if date else "%H:%M:%SZ")


def ago(t: float | None, now: float) -> str:
    """``3m05s ago`` or ``in 12s``."""
    if t is None:
        return "?"
    d = now - t
    return f"{duration(d)} ago" if d >= 0 else f"in {duration(-d)}"


def since_then(t: float, now: float) -> float:
    """Seconds since ``t``, a time the cluster stamped (a condition's transition, a taint's
    ``timeAdded``), never below 0: a controller's clock a few seconds ahead of this machine's would
    otherwise show ``Unknown for -3s``. (A renewal's age is measured from its receive time, on this
    machine's clock, and needs no such care.)"""
    return max(0.0, now - t)


def bar(fraction: float | None, width: int) -> str:
    """A bar of ``width`` cells, ``fraction`` of it full (eighths for smoothness); unknown: ``?``s."""
    if width <= 0:
        return ""
    if fraction is None or math.isnan(fraction):
        return "·" * width
    f = min(max(fraction, 0.0), 1.0)
    eighths = int(round(f * width * 8))
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if full < width and part else ""
    return ("█" * full + partial).ljust(width, "░" if full < width else "█")[:width]


def grace_text(state_word: str, ready: str | None, grace_remaining: float | None, since: float | None,
               now: float, *, compact: bool = False) -> str:
    """The grace countdown column.

    Ready as far as the API knows: ``NotReady in 12s`` (when ``kubectl get nodes`` will show
    NotReady, give or take a monitor period), or ``grace over 5s ago`` once the grace has run out
    but the controller has not acted yet. Otherwise how long the node has been down:
    ``Unknown for 3m`` / ``NotReady for 40s``. ``compact`` (ten cells, the state column says the
    rest): ``in 12s``, ``over 5s``, ``down 3m00s``.
    """
    if ready in ("Unknown", "False") or ready is None and state_word not in ("Ready", "Late", "Overdue"):
        word = "down" if compact else "NotReady" if ready == "False" else "Unknown"
        if since is None:
            return word
        return f"{word}{'' if compact else ' for'} {duration(since_then(since, now))}"
    if grace_remaining is None:
        return "?" if compact else "lease age unknown"
    if grace_remaining > 0:
        return f"{'in' if compact else 'NotReady in'} {duration(grace_remaining)}"
    return f"{'over' if compact else 'grace over'} {duration(-grace_remaining)}"


def eviction_text(eviction_in: float | None, *, compact: bool = False) -> str:
    """``evict in 4m32s`` / ``evicted 12s ago`` / empty when no eviction is pending; ``compact``:
    ``in 4m32s`` / ``12s ago``."""
    if eviction_in is None:
        return ""
    if eviction_in > 0:
        return f"{'in' if compact else 'evict in'} {duration(eviction_in)}"
    return f"{'' if compact else 'evicted '}{duration(-eviction_in)} ago"


EXPIRED = "EXPIRED"
"""A kubelet certificate past its notAfter, in every table that shows one."""


def cert_text(not_after: float | None, now: float) -> str:
    """Days left on the kubelet client certificate: ``123d``, ``6d``, ``5h``, ``EXPIRED``, ``?``."""
    if not_after is None:
        return "?"
    left = not_after - now
    if left <= 0:
        return EXPIRED
    if left < 86400:
        return f"{int(left // 3600)}h"
    return f"{int(left // 86400)}d"


def zone_short(zone_key: str) -> str:
    """The zone part of a ``region/zone`` key (``eu-west-1a``): the region is usually in it."""
    return zone_key.rsplit("/", 1)[-1]


# --- conditions and taints ------------------------------------------------------------------

READY_MARK = {"True": "R", "False": "✗", "Unknown": "?", None: "-"}


def conditions_text(ready: str | None, pressure: tuple[str, ...], network_unavailable: bool) -> str:
    """``R · · · ·``: Ready (R, ✗ False, ? Unknown, - absent), then M D P N when that flag is set."""
    flags = [
        READY_MARK.get(ready, "?"),
        "M" if "MemoryPressure" in pressure else "·",
        "D" if "DiskPressure" in pressure else "·",
        "P" if "PIDPressure" in pressure else "·",
        "N" if network_unavailable else "·",
    ]
    return " ".join(flags)


_TAINT_PREFIX = "node.kubernetes.io/"
_EFFECTS = {"NoExecute": "NoExec", "NoSchedule": "NoSched", "PreferNoSchedule": "PrefNoSched"}


def taint_label(t: Taint, *, short_effect: bool = False) -> str:
    """``unreachable:NoExecute`` (``unreachable:NoExec`` with ``short_effect``): the well-known
    ``node.kubernetes.io/`` prefix dropped. Not made safe: callers cut and clean the whole line."""
    effect = _EFFECTS.get(t.effect, t.effect) if short_effect else t.effect
    return f"{t.key.removeprefix(_TAINT_PREFIX)}:{effect}"


def taint_short(t: Taint, now: float, max_len: int = 40) -> str:
    """``unreachable:NoExec 3m``: the short label, with the taint's age when known."""
    age = f" {short_duration(since_then(t.time_added, now))}" if t.time_added is not None else ""
    return safe(f"{taint_label(t, short_effect=True)}{age}", max_len)


def taints_text(taints: tuple[Taint, ...], now: float, max_len: int = 40) -> str:
    """The most telling taint (NoExecute first), ``+N`` for the rest."""
    if not taints:
        return ""
    first = sorted(taints, key=lambda t: (t.effect != "NoExecute", t.key))[0]
    more = f" +{len(taints) - 1}" if len(taints) > 1 else ""
    return taint_short(first, now, max(1, max_len - len(more))) + more


def version_key(v: str) -> tuple[int, ...]:
    """``v1.33.10`` sorts after ``v1.33.9``."""
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.\-+]", v.lstrip("v"))[:3])


# --- compact forms (narrow terminals: every column still there, in fewer cells) ----------------

_TAINT_KEY_SHORT = {
    "unreachable": "unreach",
    "not-ready": "notready",
    "unschedulable": "unsched",
    "memory-pressure": "mem",
    "disk-pressure": "disk",
    "pid-pressure": "pid",
    "network-unavailable": "net",
    "out-of-service": "oos",
}
_EFFECTS_SHORT = {"NoExecute": "NE", "NoSchedule": "NS", "PreferNoSchedule": "PNS"}


def conditions_compact(ready: str | None, pressure: tuple[str, ...], network_unavailable: bool) -> str:
    """``R·D··``: :func:`conditions_text` without the spaces (five cells)."""
    return conditions_text(ready, pressure, network_unavailable).replace(" ", "")


def taints_compact(taints: tuple[Taint, ...], now: float, max_len: int = 16) -> str:
    """``unreach:NE 3m +1``: the most telling taint with well-known keys and effects abbreviated."""
    if not taints:
        return ""
    first = sorted(taints, key=lambda t: (t.effect != "NoExecute", t.key))[0]
    key = first.key.removeprefix(_TAINT_PREFIX)
    key = _TAINT_KEY_SHORT.get(key, key) if first.key.startswith(_TAINT_PREFIX) else key
    age = f" {short_duration(since_then(first.time_added, now))}" if first.time_added is not None else ""
    more = f" +{len(taints) - 1}" if len(taints) > 1 else ""
    label = safe(f"{key}:{_EFFECTS_SHORT.get(first.effect, first.effect)}", max_len)
    if len(label) + len(age) + len(more) > max_len:
        more = ""  # the label and its age say more than the count of the others
    return safe(label, max(1, max_len - len(age))) + age + more
