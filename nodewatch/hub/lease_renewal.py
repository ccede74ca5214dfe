"""A plain Lease renewal told apart from its raw JSON alone: the flight recorder's fast path.

Why: at 65,000 nodes the hub records 6,500 Lease renewals a second, and almost every one is the
same Lease as ten seconds before with a new ``spec.renewTime``, ``metadata.resourceVersion`` and
kubelet ``managedFields`` time. Written the general way, each one is sanitized (a walk and copy of
the object), dumped to JSON, and matched against its Lease's row template in the columnar writer
(the values parsed out of the sanitized bytes): 16-22 us a renewal in ``bench/recorder.py`` on a
loaded machine, two to three times the issue's whole budget. Here a renewal costs one ``orjson.dumps`` of the object as received
(in C) and a few comparisons at fixed offsets: ``RawRenewal`` keeps the previous event's raw JSON
cut around those three values, and a new event whose JSON is that one with only those three values
changed (same lengths: the cuts stay where they were) is a plain renewal; its values are parsed
from the bytes at those offsets. Anything else (a changed holder, a new managedFields entry, a
resourceVersion one digit longer, a value in another form) returns None and goes the general way,
which learns the Lease again.

Why the bytes written are exactly the general path's (``SegmentedRecorder`` relies on it): the
sanitized object is made of the received one's own values (``recording.sanitize`` keeps shared
sub-objects, and the kubelet's managedFields entry keeps its ``time``), and ``orjson.dumps`` is
compositional, so if the raw JSON differs from the previous one's only inside those three values,
the sanitized JSON differs from the previous one's only inside the same three values (each one
appears exactly once in both, ``learn`` checks, so which is which is decided by its kind). ``learn``
also checks that the writer's template rebuilds the previous sanitized JSON from the values parsed
here, byte for byte: the template's cuts are then those values' places, and rebuilding with the new
values gives the new sanitized JSON. Every value is accepted only in the form the columnar row
rebuilds exactly (``columnar.micro_of``, ``second_of``, ``_rv_of``: digits, dashes, colons, no quote
or backslash), so a value can never reach outside its string.
"""

from __future__ import annotations

from typing import Any

from ..sources.columnar import _lease_shape, micro_of, second_of

_CACHE_MAX = 8192
_seconds: dict[bytes, int] = {}
"""``YYYY-MM-DDTHH:MM:SSZ`` or ``YYYY-MM-DDTHH:MM:SS.`` (bytes) -> its second, for the prefixes that
``columnar._secs`` writes back the same."""


def _second(text: bytes) -> int | None:
    """The second of a cut of 20 bytes (``_seconds``'s keys), remembered; None when it is not one."""
    s = second_of(text[:19].decode("ascii", "replace") + "Z") if text[19:] in (b"Z", b".") else None
    if s is not None:
        if len(_seconds) > _CACHE_MAX:
            _seconds.clear()
        _seconds[text] = s
    return s


class RawRenewal:
    """One Lease's last raw JSON, cut at its resourceVersion (``R``), its kubelet's managedFields time
    (``M``) and its renewTime (``T``), in the order they come; and the writer's template (``tpl``,
    a ``columnar._Template`` of kinds ``RMT``) that the values rebuild the sanitized JSON with. The
    cuts hold the values' quotes: what lies between them is only the values."""

    __slots__ = ("tpl", "length", "first", "mid1", "at1", "mid2", "at2", "tail", "r", "r_end", "r_zero", "m", "t_at",
                 "t", "listing", "data", "values")

    def __init__(self, tpl: Any, parts: list[bytes], kinds: str, lengths: list[int]) -> None:
        self.tpl = tpl
        self.t = 0.0
        """The flight recorder's keyframe entry of the Lease (``last``): when it was last received,
        whether listed, its sanitized JSON as written the general way, or the values of the renewal
        the fast path wrote since (None: ``data`` is the last)."""
        self.listing = False
        self.data = b""
        self.values: tuple[int, int, int] | None = None
        self.first = parts[0] + b'"'
        self.tail = b'"' + parts[3]
        self.mid1 = b'"' + parts[1] + b'"'
        self.mid2 = b'"' + parts[2] + b'"'
        starts = []
        pos = len(self.first)
        for i, mid in enumerate((self.mid1, self.mid2, self.tail)):
            starts.append(pos)
            pos += lengths[i]
            if i == 0:
                self.at1 = pos
            elif i == 1:
                self.at2 = pos
            pos += len(mid)
        self.length = pos
        self.r = starts[kinds.index("R")]
        self.r_end = self.r + lengths[kinds.index("R")]
        self.r_zero = lengths[kinds.index("R")] > 1
        """A longer resourceVersion may not start with 0 (``str(int)`` would not write it back)."""
        self.m = starts[kinds.index("M")]
        self.t_at = starts[kinds.index("T")]

    def match(self, raw: bytes) -> tuple[int, int, int] | None:
        """(renewTime in microseconds, resourceVersion, the managedFields second) when ``raw`` is the
        JSON this was learned from with only those three values changed, each in the form a row
        rebuilds exactly (the lengths the same); None otherwise."""
        if (len(raw) != self.length or not raw.startswith(self.first) or not raw.endswith(self.tail)
                or not raw.startswith(self.mid1, self.at1) or not raw.startswith(self.mid2, self.at2)):
            return None
        rv = raw[self.r:self.r_end]
        m, t = self.m, self.t_at
        mf = raw[m:m + 20]  # YYYY-MM-DDTHH:MM:SSZ
        head = raw[t:t + 20]  # YYYY-MM-DDTHH:MM:SS.
        frac = raw[t + 20:t + 26]
        sec = _seconds.get(mf)
        renew = _seconds.get(head)
        if sec is None:
            sec = _second(mf)
        if renew is None:
            renew = _second(head)
        # bytes.isdigit: ASCII digits only (no sign, space or underscore int() would take)
        if (sec is None or renew is None or head[19] != 46 or raw[t + 26] != 90 or not frac.isdigit()
                or not rv.isdigit() or (self.r_zero and rv[0] == 48)):
            return None
        return renew * 1_000_000 + int(frac), int(rv), sec

    def last(self) -> tuple[float, bool, bytes]:
        """(receive time, listed, sanitized JSON) of the Lease's last event (the keyframe's line)."""
        v = self.values
        return self.t, self.listing, self.data if v is None else self.tpl.build(v[0], v[1], [v[2]])


def learn(raw: bytes, data: bytes, tpl: Any) -> RawRenewal | None:
    """A ``RawRenewal`` of a Lease whose raw JSON is ``raw`` and sanitized JSON ``data``, written
    with the writer's template ``tpl``; None when its renewals cannot take the fast path (not one
    each of the three values in either JSON, a template of other kinds, or one that does not
    rebuild ``data`` from the values of ``raw``)."""
    if tpl is None or tpl.kinds != "RMT":
        return None
    shape = _lease_shape(raw)
    if shape is None:
        return None
    parts, kinds = shape[4], shape[5]
    if len(kinds) != 3 or set(kinds) != {"R", "M", "T"}:
        return None
    pieces = _split_values(raw, parts)
    if pieces is None:
        return None
    values = dict(zip(kinds, pieces))
    renew = micro_of(values["T"].decode("ascii", "replace"))
    sec = second_of(values["M"].decode("ascii", "replace"))
    rv = values["R"]
    if renew is None or sec is None or not 0 < len(rv) <= 18 or not rv.isdigit() or (rv[0] == 48 and len(rv) > 1):
        return None
    if tpl.build(renew, int(rv), [sec]) != data:
        return None
    fast = RawRenewal(tpl, parts, kinds, [len(p) for p in pieces])
    return fast if fast.length == len(raw) and fast.match(raw) == (renew, int(rv), sec) else None


def _split_values(raw: bytes, parts: list[bytes]) -> list[bytes] | None:
    """The three values of ``raw`` between ``parts`` (``_lease_shape``'s pieces, each ending in a key's colon)."""
    pos = len(parts[0])
    out = []
    for i in range(1, 4):
        if raw[pos:pos + 1] != b'"':
            return None
        end = raw.find(b'"', pos + 1)
        if end < 0 or not raw.startswith(parts[i], end + 1):
            return None
        out.append(raw[pos + 1:end])
        pos = end + 1 + len(parts[i])
    return out if pos == len(raw) else None
