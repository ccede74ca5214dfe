"""Recording format "columnar" (nwcol v2): the same recording lines as JSON Lines v1, a tenth of the disk.

Why: at 65,000 nodes the kubelets renew 6,500 Leases a second. As gzip JSON Lines each renewal costs
~82 bytes (gzip's 32 KB window never reaches the same Lease's previous renewal, ~40 MB back), so the
hub's 2 GB kept one hour, not a day. Here a renewal that changes nothing but its ``renewTime``, its
``resourceVersion`` and its kubelet's ``managedFields`` time is a row of small integers (the Lease's
index in a per-file dictionary, its receive time as a delta from the row before, ``renewTime -
receive time`` as a delta from the same Lease's last, the ``resourceVersion`` as a delta), stored
column by column (each integer column byte-planed, so the always-zero high bytes cost nothing) and
compressed with zstd. Every other line (Nodes, Pods, Events, CSRs, health, certificates, settings,
listed or changed Leases) is kept as the recording line itself, its object as a field-level patch of
the same object's previous version in the file when there is one; a Node status report, which
changes its heartbeat times, resourceVersion and managedFields time and nothing else, as the new
values of those strings alone (``splice``, version 2).

Lossless by construction: what a reader gets back is the JSON Lines v1 recording, line for line
(the same values of the same JSON types, in the same order, with the same key order; byte for byte
when nodewatch wrote the lines, its JSON being orjson's), which is how every reader of recordings
reads this format (``iter_file_lines``; ``recording_input.open_binary`` sniffs the magic). A row is only
made compact when rebuilding it gives back the very same bytes (``_lease_shape``); anything else
stays a whole line. A receive time is kept as microseconds and the float's distance from them in
units of its last place (``micros``): the very same float comes back.

Layout (``docs/recording-format.md``): ``MAGIC`` (8 bytes, the version in it), then one zstd stream
made of *blocks*, each ``<u32 length><u32 crc32><body>``; block 0 is the v1 header (JSON), every
other block the rows of at most one second of receive time. Each block is flushed to disk as a whole
(a zstd flush point), at least once a second: ``kill -9`` loses at most the last second, and a reader
of a torn file reads up to its last whole block and says what it did not read, in one line.

A file is self-contained (its dictionary and patches start empty): the flight recorder writes one per
segment, each headed by its keyframe.
"""

from __future__ import annotations

import calendar
import functools
import io
import itertools
import math
import re
import struct
import threading
import time
import zlib
from array import array
from collections import deque
from typing import IO, Any, Callable, Iterable, Iterator

import orjson
import zstandard

from ..core.clock import Clock, SystemClock
from ..core.settings import Settings
from ..core.timeutil import parse_time
from . import writer_lock
from .columnar_blocks import FRAME, MAGIC, MAGIC_PREFIX, BlockReader, check_magic
from .columnar_range import MAX_BUFFERED, MAX_WAIT, SHORT_RUN, FastRange
from .columnar_reports import MAX_WAITING, Report, StatusReports
from .columnar_reports import PENDING_SECONDS as REPORT_PENDING_SECONDS
from .columnar_whole import Plain, Raw, decoded, plain, split
from .line_stream import SegmentStream
from .recording import (
    FORMAT_VERSION,
    HEADER_KEY,
    ClusterRecorder,
    FlushedWriter,
    RecordingError,
    sanitize,
    settings_payload,
)
from .trained_zstd import TrainedCompressor

EXTENSION = ".nwcol"
LEVEL = 6
"""zstd level: 5 % fewer bytes than level 3 for well under 1 % of a core at 65,000 nodes (the same
segments recompressed: 0.17 s against 0.09 s for 17 minutes of 2,000 nodes)."""
FLUSH_INTERVAL = 0.5
MAX_BLOCK_ROWS = 65_536
"""A block is closed at a new second of receive time, on a flush, or at this many rows."""

_PLAIN = ["t", "resource", "type", "object"]
_PLAIN_CLUSTER = ["t", "cluster", "resource", "type", "object"]
"""The keys of an event line, in the order a renewal row is rebuilt with."""
_U32 = struct.Struct("<I")
_ROW_LEASE = 0
_ROW_LINE = 1
_ROW_PATCHED = 2
_ROW_SPLICED = 3
_HOLES = re.compile(rb'("(?:lastHeartbeatTime|resourceVersion|time)":")([^"\\]*)(?=")')
"""The string values a status report changes (a Node's condition heartbeats, every object's
resourceVersion, a managedFields entry's time) in an object's JSON: ``split`` gives the constant
text, the key, the value, the constant text... (nothing of the JSON dropped: joined, the same bytes).
A value holds no quote and no backslash, so it cannot reach outside its string."""


def is_columnar(head: bytes) -> bool:
    return head.startswith(MAGIC_PREFIX)


# --- times as Kubernetes writes them ------------------------------------------------------------------

_prefix_cache: dict[int, str] = {}
_secs_cache: dict[str, int] = {}


def _remember(cache: dict, key: Any, value: Any) -> Any:
    """``value``, kept in ``cache`` (emptied past 8,192 entries: a block's renewals share a handful
    of seconds)."""
    if len(cache) > 8192:
        cache.clear()
    cache[key] = value
    return value


def _prefix(sec: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a second (cached)."""
    p = _prefix_cache.get(sec)
    return p if p is not None else _remember(_prefix_cache, sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))


def _secs(prefix: str) -> int | None:
    """The second of a ``YYYY-MM-DDTHH:MM:SS``, only when ``_prefix`` writes it back the same."""
    s = _secs_cache.get(prefix)
    if s is None:
        try:
            s = calendar.timegm(time.strptime(prefix, "%Y-%m-%dT%H:%M:%S"))
        except (ValueError, OverflowError):
            return None
        if _prefix(s) != prefix:
            return None
        _remember(_secs_cache, prefix, s)
    return s


def micro_of(text: Any) -> int | None:
    """Microseconds of a ``metav1.MicroTime`` (``...T20:31:03.123456Z``) that ``micro_text`` writes back
    identically; None for any other text."""
    if type(text) is not str or len(text) != 27 or text[19] != "." or text[26] != "Z":
        return None
    frac = text[20:26]
    if not (frac.isascii() and frac.isdigit()):
        return None
    sec = _secs(text[:19])
    return None if sec is None else sec * 1_000_000 + int(frac)


def micro_text(us: int) -> str:
    return f"{_prefix(us // 1_000_000)}.{us % 1_000_000:06d}Z"


_prefix_bytes_cache: dict[int, bytes] = {}


def _prefix_bytes(sec: int) -> bytes:
    """``_prefix`` as bytes (cached too): a renewal's line is built from bytes, millions a segment."""
    p = _prefix_bytes_cache.get(sec)
    return p if p is not None else _remember(_prefix_bytes_cache, sec, _prefix(sec).encode())


def _micro_bytes(us: int) -> bytes:
    """``micro_text`` as bytes."""
    return _prefix_bytes(us // 1_000_000) + b".%06dZ" % (us % 1_000_000)


def second_of(text: Any) -> int | None:
    """The second of a ``metav1.Time`` (``...T20:31:03Z``) written back identically, else None."""
    if type(text) is not str or len(text) != 20 or text[19] != "Z":
        return None
    return _secs(text[:19])


_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def micros(t: Any) -> tuple[int, int] | None:
    """``t`` (seconds, a float) as (microseconds, the float's distance in units of its last place from
    ``microseconds / 1e6``): both small integers, and ``from_micros`` gives back the very same float
    (a receive time from ``time.time()`` is no multiple of a microsecond). None: not a usable number."""
    if type(t) is not float:
        return None  # an int (JSON without a fraction) is kept in its line as it is
    try:
        us = round(t * 1_000_000)
    except (OverflowError, ValueError):
        return None
    if abs(us) >= 2**62:
        return None
    base = us / 1_000_000
    if base == t:
        return us, 0
    if t > 0 and base > 0 and math.ulp(t) == math.ulp(base):  # one binade: t - base is exact, in ulps
        return us, int((t - base) / math.ulp(t))
    return us, _Q.unpack(_D.pack(t))[0] - _Q.unpack(_D.pack(base))[0]


def from_micros(us: int, resid: int) -> float:
    base = us / 1_000_000
    return base if not resid else _D.unpack(_Q.pack(_Q.unpack(_D.pack(base))[0] + resid))[0]


# --- integer columns -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=128)
def _lanes(n: int) -> tuple[int, int, int, int]:
    """Masks over ``n`` 64-bit lanes of one big integer: each lane's bit 0, every bit, every bit
    but bit 0, every bit but bit 63."""
    low = int.from_bytes(b"\x01\x00\x00\x00\x00\x00\x00\x00" * n, "little")
    ones = (low << 64) - low
    return low, ones, ones ^ low, ones ^ (low << 63)


def _pack(values: list[int]) -> bytes:
    """Zigzag, 8 bytes each, byte-planed (all first bytes, then all second bytes...): the planes of
    small numbers are zeros, which zstd stores in a few bytes. The zigzag of every value at once, on
    the column as one big integer of 64-bit lanes (in C: ``(v << 1) ^ (v >> 63)`` lane by lane, the
    bit shifted in from the next lane masked away)."""
    if not values:
        return b""
    n = len(values)
    low, _, not_low, _ = _lanes(n)
    x = int.from_bytes(array("q", values).tobytes(), "little")
    sign = (x >> 63) & low
    raw = (((x << 1) & not_low) ^ ((sign << 64) - sign)).to_bytes(8 * n, "little")
    return b"".join(raw[i::8] for i in range(8))


def _unpack(data: bytes | memoryview, n: int) -> list[int]:
    """``_pack``'s values back: un-planed by slice copies, un-zigzagged lane by lane as ``_pack``
    does (``(z >> 1) ^ -(z & 1)``), read by ``array``: no Python operation per value."""
    if n == 0:
        return []
    if len(data) != 8 * n:
        raise ValueError("column of the wrong length")
    raw = bytearray(8 * n)
    for i in range(8):
        raw[i::8] = data[i * n:(i + 1) * n]
    low, _, _, not_top = _lanes(n)
    x = int.from_bytes(raw, "little")
    sign = x & low
    return array("q", (((x >> 1) & not_top) ^ ((sign << 64) - sign)).to_bytes(8 * n, "little")).tolist()


# --- Leases as rows --------------------------------------------------------------------------------


_VOLATILE = re.compile(rb'"(renewTime|resourceVersion|time)":"([^"\\]*)"')
"""What changes from one renewal of a Lease to the next, found in its JSON (the values hold no
escapes; a key inside a string cannot match: its quotes would be escaped)."""


def _lease_shape(data: bytes) -> tuple[bytes, int, int | None, list[int], list[bytes], str] | None:
    """A Lease's JSON as (its shape: the JSON without the values of its ``renewTime``,
    ``resourceVersion`` and ``time`` fields, renewTime in microseconds, resourceVersion, the
    ``time`` seconds, the pieces between the values, their kinds), when each value is of the form a
    row rebuilds exactly (one MicroTime renewTime, at most one decimal resourceVersion, ``time``s
    that are metav1.Time); None otherwise (the renewal is kept as a whole line). The pieces and the
    values joined again are ``data`` itself."""
    pieces = _VOLATILE.split(data)
    if len(pieces) < 4:
        return None
    renew: int | None = None
    rv: int | None = None
    seconds: list[int] = []
    kinds = []
    parts = []
    for i in range(0, len(pieces) - 1, 3):
        text, key, value = pieces[i], pieces[i + 1], pieces[i + 2]
        parts.append(text + b'"' + key + b'":')
        v = value.decode("ascii", "replace")
        if key == b"renewTime":
            if renew is not None:
                return None
            renew = micro_of(v)
            if renew is None:
                return None
            kinds.append("T")
        elif key == b"resourceVersion":
            if rv is not None:
                return None
            rv = _rv_of(v)
            if rv is None:
                return None
            kinds.append("R")
        else:
            sec = second_of(v)
            if sec is None:
                return None
            seconds.append(sec)
            kinds.append("M")
    if renew is None:
        return None
    parts.append(pieces[-1])
    return b"\x00".join(parts), renew, rv, seconds, parts, "".join(kinds)


def _rv_of(v: str) -> int | None:
    """A resourceVersion that ``str(int)`` writes back identically, as that int."""
    if not v.isascii() or not v.isdigit() or len(v) > 18 or (v[0] == "0" and v != "0"):
        return None
    return int(v)


class _Template:
    """One Lease of the dictionary: its shape and what its next renewal is a delta from."""

    __slots__ = ("shape", "parts", "kinds", "offset", "cluster", "index", "prefix", "name", "droppable", "has_rv",
                 "n_mf", "key", "kubelet")

    def __init__(self, shape: tuple, cluster: str | None, index: int, name: Any = None) -> None:
        self.name = name
        self.key = (cluster, name)
        """What ``Supersession`` knows its Lease by (``Superseded``'s key, with the cluster)."""
        self.droppable = False
        """Its renewals may be left out where a later one supersedes them (``Supersession``)."""
        self.shape = shape[0]
        self.parts = shape[4]
        self.kinds = shape[5]
        self.has_rv = "R" in self.kinds
        self.n_mf = self.kinds.count("M")
        self.offset = 0
        self.cluster = cluster
        self.index = index
        self.prefix = _cluster_field(cluster) + b',"resource":"leases","type":"MODIFIED","object":'
        p = self.parts
        self.kubelet = ((p[0] + b'"', b'"' + p[1] + b'"', b'Z"' + p[2] + b'"', b'"' + p[3])
                        if self.kinds == "RMT" else None)
        """A kubelet's Lease (the bulk of them): the pieces of its JSON around its resourceVersion,
        managedFields second and renewTime (``build``, ``_kubelet_line``)."""

    def match(self, data: bytes) -> tuple[int, int | None, list[int]] | None:
        """(renewTime in microseconds, resourceVersion, the ``time`` seconds) of a renewal's JSON that
        is this shape with its values in the forms a row rebuilds exactly (``build`` gives back
        ``data`` itself); None otherwise. What ``_lease_shape`` and a comparison of shapes decide,
        without splitting the JSON: the pieces are compared where they must be."""
        parts = self.parts
        if not data.startswith(parts[0]):
            return None
        if self.kinds == "RMT":  # a kubelet's Lease (the bulk of them), unrolled
            return self._match_kubelet(data)
        pos = len(parts[0])
        renew = 0
        rv = None
        seconds = []
        i = 0
        for kind in self.kinds:
            i += 1
            if data[pos:pos + 1] != b'"':
                return None
            end = data.find(b'"', pos + 1)
            if end < 0 or not data.startswith(parts[i], end + 1):
                return None
            raw = data[pos + 1:end]
            if b"\\" in raw:
                return None
            v = raw.decode("ascii", "replace")
            if kind == "T":
                us = micro_of(v)
                if us is None:
                    return None
                renew = us
            elif kind == "R":
                rv = _rv_of(v)
                if rv is None:
                    return None
            else:
                sec = second_of(v)
                if sec is None:
                    return None
                seconds.append(sec)
            pos = end + 1 + len(parts[i])
        return (renew, rv, seconds) if pos == len(data) else None

    def _match_kubelet(self, data: bytes) -> tuple[int, int | None, list[int]] | None:
        """``match`` of the "RMT" shape: resourceVersion, the managedFields time, renewTime."""
        p0, p1, p2, p3 = self.parts
        a = len(p0) + 1
        b = data.find(b'"', a)
        c = b + 1 + len(p1) + 1
        d = data.find(b'"', c)
        e = d + 1 + len(p2) + 1
        f = data.find(b'"', e)
        if (b < 0 or d < 0 or f < 0 or data[a - 1] != 34 or data[c - 1] != 34 or data[e - 1] != 34
                or not data.startswith(p1, b + 1) or not data.startswith(p2, d + 1)
                or len(data) != f + 1 + len(p3) or not data.endswith(p3)):
            return None
        rv = _rv_of(data[a:b].decode("ascii", "replace"))
        sec = second_of(data[c:d].decode("ascii", "replace"))
        renew = micro_of(data[e:f].decode("ascii", "replace"))
        if rv is None or sec is None or renew is None:
            return None
        return renew, rv, [sec]

    def build(self, renew: int, rv: int | None, seconds: list[int]) -> bytes:
        parts = self.parts
        if self.kubelet is not None:  # a kubelet's Lease: resourceVersion, its managedFields entry, renewTime
            return _kubelet_object(self.kubelet, renew, rv, seconds[0])
        out = [parts[0]]
        mi = 0
        for i, kind in enumerate(self.kinds):
            if kind == "T":
                out.append(b'"' + micro_text(renew).encode() + b'"')
            elif kind == "R":
                out.append(b'"' + str(rv).encode() + b'"')
            else:
                out.append(b'"' + _prefix(seconds[mi]).encode() + b'Z"')
                mi += 1
            out.append(parts[i + 1])
        return b"".join(out)


def _cluster_field(cluster: str | None) -> bytes:
    return b"" if cluster is None else b',"cluster":' + orjson.dumps(cluster)


# --- objects as patches ----------------------------------------------------------------------------

_SAME = object()


def diff(a: Any, b: Any) -> Any:
    """A patch that turns ``a`` into ``b`` exactly (types, key order), or ``_SAME``:
    ``["d", {key: patch}]`` (a dict with the same keys in the same order), ``["l", [[i, patch], ...]]``
    (a list of the same length), ``["s", value]`` (the value itself). Containers are compared by
    their JSON first (in C: a Node's images and capacity are skipped at once; exact where ``==``
    would take 1 for 1.0 or True), and only those that differ are walked."""
    ta = type(a)
    if ta is not type(b):
        return ["s", b]
    if ta is dict:
        if len(a) != len(b) or list(a) != list(b):
            return ["s", b]
        changes = {}
        for k, va in a.items():
            vb = b[k]
            if va is vb:
                continue
            tv = type(va)
            if tv is type(vb) and (tv in _EXACT and va == vb or tv in _CONTAINERS and _same(va, vb)):
                continue
            p = diff(va, vb)
            if p is not _SAME:
                changes[k] = p
        return ["d", changes] if changes else _SAME
    if ta is list:
        if len(a) != len(b):
            return ["s", b]
        items = []
        for i, (va, vb) in enumerate(zip(a, b)):
            if va is vb:
                continue
            tv = type(va)
            if tv is type(vb) and (tv in _EXACT and va == vb or tv in _CONTAINERS and _same(va, vb)):
                continue
            p = diff(va, vb)
            if p is not _SAME:
                items.append([i, p])
        return ["l", items] if items else _SAME
    return _SAME if a == b and (ta is not float or repr(a) == repr(b)) else ["s", b]  # 0.0 is not -0.0


_CONTAINERS = (dict, list)
_EXACT = (str, int, bool)
"""Scalars whose ``==`` is their JSON's equality when both are of the one type (not floats: 0.0 ==
-0.0): equal ones are passed over in the walk without a call each (a Node decoded from a watch
shares no object with its previous version, so every unchanged string was a call)."""


def _same(a: Any, b: Any) -> bool:
    """Whether two containers are the same JSON. ``==`` first, in C: containers that differ are
    told so at their first difference, without writing either out (``==`` says 1 == 1.0 == True and
    0.0 == -0.0, so only where it says equal is the JSON compared, to be exact)."""
    try:
        if a != b:
            return False
    except Exception:  # noqa: BLE001 - a caller's own object whose == fails: compared by JSON below
        pass
    return _dumps(a) == _dumps(b)


def _dumps(v: Any) -> bytes:
    try:
        return orjson.dumps(v)
    except TypeError:  # not JSON (a caller's own object): never equal, walked
        return repr(id(v)).encode()


def patch(a: Any, p: Any) -> Any:
    """``b`` from ``a`` and ``diff(a, b)`` (a new value; ``a`` is not changed)."""
    op = p[0]
    if op == "s":
        return p[1]
    if op == "d":
        if type(a) is not dict:
            raise ValueError("a dict patch of a non-dict")
        out = dict(a)
        for k, sub in p[1].items():
            out[k] = patch(a[k], sub)
        return out
    if op == "l":
        if type(a) is not list:
            raise ValueError("a list patch of a non-list")
        out_l = list(a)
        for i, sub in p[1]:
            out_l[i] = patch(a[i], sub)
        return out_l
    raise ValueError(f"unknown patch {op!r}")


def spliced_values(before: Any, after: bytes) -> list[str | None] | None:
    """The values that turn JSON ``before`` into ``after`` when only ``_HOLES`` values differ
    (a status report): each hole's new value, None where it is the same; None when anything else
    differs (the object is then a patch). Joining ``before``'s split with these values is ``after``,
    byte for byte (``splice``), because every other piece of the two splits is equal."""
    return spliced_spans(before, after)[0]


def spliced_spans(before: Any, after: bytes) -> tuple[list[str | None] | None, bytes]:
    """``spliced_values``, and where ``after``'s hole values are (start, end offsets as an
    ``array("I")``'s bytes: for ``splice_at``)."""
    a = _HOLES.split(before)
    b = _HOLES.split(after)
    if len(a) != len(b) or len(a) == 1 or a[0::3] != b[0::3] or a[1::3] != b[1::3]:
        return None, b""
    try:
        values = [None if va == vb else vb.decode() for va, vb in zip(a[2::3], b[2::3])]
    except UnicodeDecodeError:  # (orjson writes UTF-8: not met)
        return None, b""
    offsets: list[int] = []
    pos = 0
    for i, piece in enumerate(b):
        if i % 3 == 2:
            offsets += (pos, pos + len(piece))
        pos += len(piece)
    return values, array("I", offsets).tobytes()


def splice_at(before: bytes, after: bytes, spans: bytes) -> list[str | None] | None:
    """``spliced_values(before, after)`` for texts of the same length, given where ``before``'s hole
    values are (``spans``, from ``spliced_spans`` of the version before it): ``after``'s bytes at the
    same places are the new values when the text around them is ``before``'s, which is checked by
    building ``after`` back as a reader would. None: not so (``spliced_spans`` decides). The places
    stay the hole values' from one version to the next: a value holds no quote, so changing one
    moves no string's bounds, and the lengths being equal, nothing moves at all."""
    offsets = array("I")
    offsets.frombytes(spans)
    parts: list[bytes] = []
    values: list[str | None] = []
    pos = 0
    for i in range(0, len(offsets), 2):
        s, e = offsets[i], offsets[i + 1]
        v = after[s:e]
        if b'"' in v or b"\\" in v:
            return None
        parts += (before[pos:s], v)
        try:
            values.append(None if v == before[s:e] else v.decode())
        except UnicodeDecodeError:
            return None
        pos = e
    parts.append(before[pos:])
    return values if b"".join(parts) == after else None


def splice(before: Any, values: Any) -> bytes:
    """``after`` from ``before`` and ``spliced_values(before, after)``. ValueError: they do not fit."""
    parts = _HOLES.split(before)
    _fill(parts, values)
    return b"".join(parts)


def _fill(parts: list, values: Any, checked: bool = False) -> None:
    """``parts`` (a JSON text's ``_HOLES.split``) with the hole values of a spliced row put in.
    ``checked``: the caller found every value a plain string already (``columnar_reports``)."""
    if type(values) is not list or len(parts) != 3 * len(values) + 1:
        raise ValueError("a spliced row that does not fit its object's previous version")
    for i, v in enumerate(values):
        if v is not None:
            if not checked and (type(v) is not str or '"' in v or "\\" in v):
                raise ValueError("a spliced value that is not a plain string")
            parts[3 * i + 2] = v.encode()


def _object_key(line: dict) -> tuple | None:
    """Whose previous version a line's object is a patch of (not Leases: their rows are the dictionary's)."""
    resource = line.get("resource")
    obj = line.get("object")
    if resource == "leases" or type(obj) is not dict or type(resource) is not str:
        return None
    meta = obj.get("metadata")
    if type(meta) is not dict or type(meta.get("name")) is not str:
        return None
    return (line.get("cluster"), resource, meta.get("namespace"), meta["name"])


# --- the state both ends keep ---------------------------------------------------------------------


class _Codec:
    """What the writer and the reader both learn from the lines, in the same order: the Lease
    dictionary, each Lease's last offset, the last resourceVersion per cluster, objects' last
    versions (for patches), the last receive time."""

    def __init__(self, plain: bool = False) -> None:
        """``plain``: objects kept as they are, not compressed (a one-shot read: each is read back at
        most a few times: no compression of each version, no decompression and JSON decode of each
        patch's base; a whole read late in a 65,000-node segment peaked at 1.8 GB of memory so)."""
        self.plain = plain
        self.leases: dict[tuple, _Template] = {}
        self.by_index: list[_Template | None] = []
        self.rv: dict[str | None, int] = {}
        self.objects: dict[tuple, Any] = {}
        """Each object's last version, JSON compressed on its own with a dictionary trained on the
        first ones (``trained_zstd``)."""
        self._z = TrainedCompressor()
        self.last_us = 0

    def learn_line(self, line: dict, t_us: int, data: bytes | None = None) -> None:
        """A whole line went by: a Lease's shape enters (or leaves) the dictionary; an object's version is kept.
        ``data``: the object's JSON, when the writer has it already (what the file holds of it)."""
        resource = line.get("resource")
        etype = line.get("type")
        obj = line.get("object")
        if resource == "leases" and type(obj) is dict and type(etype) is str:
            meta = obj.get("metadata") if type(obj.get("metadata")) is dict else {}
            cluster = line.get("cluster")
            self._learn_lease(cluster, meta.get("namespace"), meta.get("name"), etype, obj, data, t_us)
            return
        key2 = _object_key(line)
        if key2 is not None:
            if etype == "DELETED":
                self.objects.pop(key2, None)
            else:
                self.objects[key2] = obj if self.plain else self._z.compress(orjson.dumps(obj) if data is None else data)

    def _learn_lease(self, cluster: Any, namespace: Any, name: Any, etype: str, obj: Any, data: Any,
                     t_us: int) -> None:
        """A Lease's whole line: its shape enters (or leaves) the dictionary. ``obj`` its object, or
        ``data`` the object's JSON as ``orjson`` writes it."""
        key = (cluster, namespace, name)
        if etype == "DELETED":
            tpl = self.leases.pop(key, None)
            if tpl is not None:
                self.by_index[tpl.index] = None
            return
        if etype not in ("ADDED", "MODIFIED"):
            return
        shape = _lease_shape(orjson.dumps(obj) if data is None else bytes(data))
        tpl = self.leases.get(key)
        if shape is None:
            if tpl is not None:  # its next renewal cannot be a row of an older shape
                self.by_index[tpl.index] = None
                del self.leases[key]
            return
        cluster = cluster if type(cluster) is str else None
        if tpl is None or tpl.shape != shape[0] or tpl.cluster != cluster:
            if tpl is not None:
                self.by_index[tpl.index] = None
            tpl = _Template(shape, cluster, len(self.by_index), name)
            self.by_index.append(tpl)
            self.leases[key] = tpl
        tpl.offset = shape[1] - t_us
        if shape[2] is not None:
            self.rv[cluster] = shape[2]

    def learn_plain(self, line: Plain, t_us: int) -> None:
        """A plain line went by (``learn_line``'s way, its object kept as its JSON: ``plain`` decodes
        it only if a patch needs it)."""
        env = line.envelope
        if env.resource == "leases":
            meta = line.meta
            self._learn_lease(env.cluster, meta.namespace if meta is not None else None,
                              meta.name if meta is not None else None, env.type, None, env.object, t_us)
            return
        key = line.key
        if key is None:
            return
        if env.type == "DELETED":
            self.objects.pop(key, None)
        else:
            obj = env.object
            self.objects[key] = obj if self.plain else self._z.compress(bytes(obj))  # (plain: its JSON, a ``Raw``)

    def previous(self, key: tuple) -> Any:
        """The object's last version (a fresh copy; ``plain``: the very object, which no reader changes:
        ``patch`` makes a new one), or None."""
        if self.plain:
            obj = self.objects.get(key)
            if type(obj) is Raw:  # kept as its JSON (``learn_plain``): decoded for its first patch
                obj = self.objects[key] = decoded(obj)
            elif type(obj) is list:  # kept as its split text (``spliced``)
                obj = self.objects[key] = orjson.loads(b"".join(obj))
            return obj
        data = self.json_of(key)
        return None if data is None else orjson.loads(data)

    def spliced(self, key: tuple, etype: Any, values: Any) -> bytes:
        """A spliced row's object JSON (``splice`` of the object's last version), learned
        (``learn_line``'s way). ValueError: no last version, or the values do not fit it. ``plain``
        keeps the object as its split text (a list): its next splice is made without the split, as
        a Node's status reports come one after the other."""
        parts = self._filled(key, values)
        data = b"".join(parts)
        if etype == "DELETED":
            del self.objects[key]
        else:
            self.objects[key] = parts if self.plain else self._z.compress(data)
        return data

    def splice_parts(self, key: tuple, values: Any) -> list:
        """``spliced`` of a row that is not a DELETED, in a ``plain`` codec, its JSON not joined: the
        text split at its holes (``columnar_reports`` joins it only for a report it keeps, and has
        checked that every value is a plain string)."""
        parts = self.objects[key] = self._filled(key, values, True)
        return parts

    def _filled(self, key: tuple, values: Any, checked: bool = False) -> list:
        """The object's last version split at its holes, with ``values`` put in (a new list)."""
        obj = self.objects.get(key)
        if obj is None:
            raise ValueError("a splice of an object not in the file")
        if not self.plain:
            parts = _HOLES.split(self._z.decompress(obj))
        elif type(obj) is list:
            parts = list(obj)
        else:
            parts = _HOLES.split(memoryview(obj) if type(obj) is Raw else orjson.dumps(obj))
        _fill(parts, values, checked)
        return parts

    def json_of(self, key: tuple) -> bytes | None:
        """The JSON of the object's last version (what a patch or a splice of it is made from), or None."""
        obj = self.objects.get(key)
        if obj is None or not self.plain:
            return None if obj is None else self._z.decompress(obj)
        if type(obj) is list:
            return b"".join(obj)
        return bytes(obj) if type(obj) is Raw else orjson.dumps(obj)


# --- writing ----------------------------------------------------------------------------------------


class ColumnarWriter:
    """Appends recording lines (as dicts, or a Lease renewal as its parts) to an nwcol file. Not
    thread-safe (``ColumnarRecorder`` is). ``out``: a binary file; the header is the v1 header."""

    def __init__(self, out: IO[bytes], header: dict, level: int = LEVEL) -> None:
        self._out = out
        self._z = zstandard.ZstdCompressor(level=level).compressobj()
        self._c = _Codec()
        self._spans: dict[tuple, bytes] = {}
        """Each object's last version's hole values as (start, end) offsets (an ``array("I")``'s bytes) when
        its last row was a splice: the next status report of the same length is checked against them
        (``splice_at``) without splitting either text."""
        self._reset()
        self.rows = 0
        self.lease_rows = 0
        """Renewals written as rows (the rest of the rows are whole lines)."""
        self.blocks = 0
        out.write(MAGIC)
        self._emit(orjson.dumps(header, default=str))

    def _reset(self) -> None:
        self._kinds = bytearray()
        self._rx: list[int] = []
        self._res: list[int] = []
        self._idx: list[int] = []
        self._off: list[int] = []
        self._rv: list[int] = []
        self._mf: list[int] = []
        self._blobs: list[Any] = []
        self._second: int | None = None

    def _start_row(self, t_us: int, resid: int = 0) -> None:
        sec = t_us // 1_000_000
        if self._kinds and (sec != self._second or len(self._kinds) >= MAX_BLOCK_ROWS):
            self.flush()
        self._second = sec
        self._rx.append(t_us - self._c.last_us)
        self._res.append(resid)
        self._c.last_us = t_us
        self.rows += 1

    def add_event(self, t: float, resource: str, etype: str, obj: Any, listing: bool = False,
                  cluster: str | None = None, data: bytes | None = None) -> None:
        """One event line (``obj`` sanitized; ``data``: its JSON, when the caller has it already): a
        Lease renewal of a known shape becomes a row."""
        if resource == "leases" and etype == "MODIFIED" and not listing and type(obj) is dict:
            if self._renewal(t, cluster, obj, data):
                return
        line: dict[str, Any] = {"t": t}
        if cluster is not None:
            line["cluster"] = cluster
        line["resource"] = resource
        line["type"] = etype
        line["object"] = obj
        if listing:
            line["list"] = True
        self.add_line(line, data)

    def _renewal(self, t: Any, cluster: str | None, obj: dict, data: bytes | None) -> bool:
        """Write a Lease renewal as a row when its Lease is in the dictionary with the same shape."""
        tm = micros(t)
        meta = obj.get("metadata")
        if tm is None or type(meta) is not dict:
            return False
        tpl = self._c.leases.get((cluster, meta.get("namespace"), meta.get("name")))
        if tpl is None:
            return False
        values = tpl.match(orjson.dumps(obj) if data is None else data)
        if values is None:
            return False
        renew, rv, seconds = values
        self._row(tpl, tm[0], tm[1], renew, rv, 0, seconds)
        return True

    def add_renewal(self, tpl: _Template, tm: tuple[int, int], renew: int, rv: int, second: int) -> bool:
        """A Lease renewal given as its values (the flight recorder's fast path, ``hub/lease_renewal.py``):
        the row ``add_event`` writes for a renewal that ``tpl.match`` gives these values of (``tm``: the
        receive time as ``micros`` gives it). False, writing nothing, when ``tpl`` (of kinds ``RMT``) is
        not its Lease's template in this file's dictionary (a new file, a Lease learned again)."""
        by_index = self._c.by_index
        i = tpl.index
        if i >= len(by_index) or by_index[i] is not tpl:
            return False
        self._row(tpl, tm[0], tm[1], renew, rv, second, None)
        return True

    def add_renewals(self, rows: list[tuple[_Template, int, int, int]], t: float) -> int:
        """``add_renewal`` of each ``(tpl, renew, rv, second)`` in turn, all received at ``t`` (the
        renewals of one read of the Lease watch, ``write_lease_watch``): the same rows, with the
        receive time's columns and the block's bookkeeping done once for the read, not once a row.
        Returns how many were written: the row after them (if any) has a template that is not this
        file's; none when ``micros`` does not take ``t``."""
        tm = micros(t)
        if tm is None or not rows:
            return 0
        t_us, resid = tm
        c = self._c
        by_index = c.by_index
        n_index = len(by_index)
        last_rv = c.rv
        done = 0
        total = len(rows)
        while done < total:
            first = rows[done][0]
            if first.index >= n_index or by_index[first.index] is not first:
                break
            self._start_row(t_us, resid)  # the first of a run (may flush: the columns are new lists after it)
            room = MAX_BLOCK_ROWS - len(self._kinds)
            idx, off, rvs, mf = self._idx, self._off, self._rv, self._mf
            n = 0
            for tpl, renew, rv, second in rows[done:done + room]:
                i = tpl.index
                if i >= n_index or by_index[i] is not tpl:
                    break
                idx.append(i)
                offset = renew - t_us
                off.append(offset - tpl.offset)
                tpl.offset = offset
                cluster = tpl.cluster
                rvs.append(rv - last_rv.get(cluster, 0))
                last_rv[cluster] = rv
                mf.append(second - renew // 1_000_000)
                n += 1
            # the rest of the run: the same receive time, so each one's delta is 0 and its residue the first's
            self._rx.extend(itertools.repeat(0, n - 1))
            self._res.extend(itertools.repeat(resid, n - 1))
            self._kinds.extend(bytes(n))  # _ROW_LEASE
            self.rows += n - 1
            self.lease_rows += n
            done += n
        return done

    def _row(self, tpl: _Template, t_us: int, resid: int, renew: int, rv: int | None, second: int,
             seconds: list[int] | None) -> None:
        """A renewal row: its managedFields seconds are ``[second]`` when ``seconds`` is None."""
        self._start_row(t_us, resid)
        self.lease_rows += 1
        self._kinds.append(_ROW_LEASE)
        self._idx.append(tpl.index)
        offset = renew - t_us
        self._off.append(offset - tpl.offset)
        tpl.offset = offset
        if rv is not None:
            self._rv.append(rv - self._c.rv.get(tpl.cluster, 0))
            self._c.rv[tpl.cluster] = rv
        base = renew // 1_000_000
        if seconds is None:
            self._mf.append(second - base)
        else:
            self._mf.extend(s - base for s in seconds)

    def add_line(self, line: dict, data: bytes | None = None) -> None:
        """Any v1 line as a dict (its ``t`` first): a Lease renewal of a known shape becomes a row
        (when the line is exactly what a row rebuilds: these keys in this order), anything else is
        kept whole, its object as a patch when it can be. ``data``: the object's JSON as ``orjson``
        writes it, when the caller has it (not written again for the codec)."""
        keys = list(line)
        if keys == _PLAIN or keys == _PLAIN_CLUSTER:
            cluster = line.get("cluster")
            obj = line["object"]
            if (line["resource"] == "leases" and line["type"] == "MODIFIED" and type(obj) is dict
                    and (cluster is None or type(cluster) is str) and self._renewal(line["t"], cluster, obj, data)):
                return
        tm = micros(line.get("t"))
        if tm is None:
            payload = line  # kept with its own time, as it is (its row's time is the row before's)
            t_us, resid = self._c.last_us, 0
        else:
            t_us, resid = tm
            payload = {k: v for k, v in line.items() if k != "t"}
        key = _object_key(line)
        prev = self._c.objects.get(key) if key is not None else None
        self._start_row(t_us, resid)
        if prev is not None:
            assert key is not None
            before = self._c.json_of(key)
            obj = line["object"]
            if data is None:
                data = orjson.dumps(obj)
            spans = self._spans.pop(key, None)
            values = None
            if before is not None:
                if spans is not None and len(before) == len(data):
                    values = splice_at(before, data, spans)
                if values is None:
                    values, spans = spliced_spans(before, data)
            payload = dict(payload)
            payload["object"] = None
            if values is not None:
                if line.get("type") != "DELETED":
                    self._spans[key] = spans
                self._kinds.append(_ROW_SPLICED)
                self._blobs.append([payload, values, key[2], key[3]])
            else:
                p = diff(None if before is None else orjson.loads(before), obj)
                self._kinds.append(_ROW_PATCHED)
                self._blobs.append([payload, p if p is not _SAME else None, key[2], key[3]])
        else:
            self._kinds.append(_ROW_LINE)
            self._blobs.append(payload)
        self._c.learn_line(line, t_us, data)

    def flush(self) -> None:
        """The rows so far as one block, on disk (readable after a crash)."""
        if not self._kinds:
            self._out.flush()
            return
        blobs = orjson.dumps(self._blobs, default=str)
        pack = _pack
        cols = [bytes(self._kinds), pack(self._rx), pack(self._res), pack(self._idx), pack(self._off), pack(self._rv),
                pack(self._mf), blobs]
        body = b"".join([_U32.pack(len(self._kinds)), _U32.pack(len(self._rv)), _U32.pack(len(self._mf))]
                        + [_U32.pack(len(c)) + c for c in cols])
        self._reset()
        self._emit(body)

    def _emit(self, body: bytes) -> None:
        data = self._z.compress(FRAME.pack(len(body), zlib.crc32(body)) + body)
        data += self._z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        self._out.write(data)
        self._out.flush()
        self.blocks += 1

    def close(self) -> None:
        self.flush()
        self._out.write(self._z.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
        self._out.flush()


class ColumnarRecorder(FlushedWriter):
    """A ``recording.Recorder`` (same methods, same contract: thread-safe, flushed at least once a
    second) that writes the columnar format."""

    def __init__(self, path: str, source: dict, settings: Settings, started_at: float | None = None,
                 clock: Clock | None = None, clusters: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._closed = False
        self.lines = 0
        self.error: OSError | None = None
        """The write or flush that failed (a full disk), as ``recording.Recorder`` keeps it: every
        later write raises it again and the flusher stops, so the flight recorder sees it."""
        self._raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        writer_lock.hold(self._raw)
        self._header: dict[str, Any] | None = {HEADER_KEY: FORMAT_VERSION, "started_at": None, "source": source,
                                               "settings": settings_payload(settings)}
        if clusters is not None:
            self._header["clusters"] = clusters
        self._w: ColumnarWriter | None = None
        self._last_flush = self._clock.now()
        if started_at is not None:
            self._open(started_at)
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="recorder-flush", daemon=True)
        self._flusher.start()

    def _open(self, t: float) -> ColumnarWriter:
        if self._w is None:
            from ..core.timeutil import format_time

            assert self._header is not None
            self._header["started_at"] = format_time(t, micro=True)
            self._w = ColumnarWriter(self._raw, self._header)
            self._header = None
        return self._w

    def for_cluster(self, cluster: str) -> ClusterRecorder:
        return ClusterRecorder(self, cluster)  # the same methods as a Recorder

    def last_json(self, cluster: str | None, resource: str, name: str) -> bytes | None:
        """The JSON of the last version of a cluster-scoped object written to this file (what its next
        version is patched against), or None: none written, or the file failed."""
        with self._lock:
            if self._w is None or self.error is not None:
                return None
            return self._w._c.json_of((cluster, resource, None, name))

    def write(self, resource: str, etype: str, obj: dict | None, t: float, listing: bool = False,
              cluster: str | None = None) -> None:
        self.write_sanitized(resource, etype, sanitize(obj, resource), t, listing, cluster)

    def write_sanitized(self, resource: str, etype: str, obj: Any, t: float, listing: bool = False,
                        cluster: str | None = None, data: bytes | None = None) -> None:
        """``write`` of an object already sanitized (the flight recorder sanitizes once for both),
        and its JSON when the caller has it."""
        with self._lock:
            if self.error is not None:
                raise self.error
            if not self._closed:
                try:
                    self._open(t).add_event(t, resource, etype, obj, listing, cluster, data)
                    self._written()
                except OSError as exc:
                    self.error = exc
                    raise

    def write_renewal(self, tpl: _Template, tm: tuple[int, int], renew: int, rv: int, second: int) -> bool:
        """``ColumnarWriter.add_renewal`` under this recorder's lock (counted and flushed as ``write``);
        False: not written (``tpl`` is not this file's), write it the general way."""
        with self._lock:
            if self.error is not None:
                raise self.error
            w = self._w
            if self._closed or w is None:
                return False
            try:
                if not w.add_renewal(tpl, tm, renew, rv, second):
                    return False
                self._written()
            except OSError as exc:
                self.error = exc
                raise
            return True

    def write_renewals(self, rows: list[tuple[_Template, int, int, int]], t: float) -> int:
        """``ColumnarWriter.add_renewals`` under this recorder's lock, counted and flushed once:
        how many of ``rows`` were written (the rest: write them one at a time)."""
        with self._lock:
            if self.error is not None:
                raise self.error
            w = self._w
            if self._closed or w is None:
                return 0
            try:
                done = w.add_renewals(rows, t)
                if done:
                    self.lines += done - 1
                    self._written()
            except OSError as exc:
                self.error = exc
                raise
            return done

    def lease_template(self, cluster: str | None, namespace: Any, name: Any) -> _Template | None:
        """The Lease's template in this file's dictionary (its renewals are rows of it), or None."""
        with self._lock:
            return None if self._w is None else self._w._c.leases.get((cluster, namespace, name))

    def _add(self, line: dict, t: float) -> None:
        with self._lock:
            if self.error is not None:
                raise self.error
            if not self._closed:
                try:
                    self._open(t).add_line(line)
                    self._written()
                except OSError as exc:
                    self.error = exc
                    raise

    def write_health(self, resource: str, t: float, cluster: str | None = None, **health: Any) -> None:
        from .recording import HEALTH_FIELDS

        h = {"resource": resource}
        h.update({k: v for k, v in health.items() if k in HEALTH_FIELDS})
        self._add(_json_safe({**_head(t, cluster), "health": h}), t)

    def write_cert(self, node: str, not_after: float, source: str, t: float, cluster: str | None = None) -> None:
        self._add({**_head(t, cluster), "cert": {"node": node, "not_after": not_after, "source": source}}, t)

    def write_settings(self, t: float, settings: Settings, cluster: str | None = None) -> None:
        self._add(_json_safe({**_head(t, cluster), "settings": settings_payload(settings)}), t)

    def _write_line(self, data: bytes, t: float) -> None:
        """A complete v1 line (the flight recorder's keyframe lines)."""
        self._add(orjson.loads(data), t)

    def _written(self) -> None:
        self.lines += 1
        if abs(self._clock.now() - self._last_flush) >= FLUSH_INTERVAL:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._w is not None:
            self._w.flush()
        self._last_flush = self._clock.now()

    def _flush_if_due(self) -> None:
        if not self._closed and abs(self._clock.now() - self._last_flush) >= FLUSH_INTERVAL:
            self._flush_locked()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            if self.error is not None:  # not one more byte after a failed one
                try:
                    self._raw.close()
                except OSError:
                    pass
                return
            try:
                self._open(self._clock.now())
                assert self._w is not None
                self._w.close()
                self._raw.close()
            except OSError:
                pass

    def __enter__(self) -> "ColumnarRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _head(t: float, cluster: str | None) -> dict[str, Any]:
    return {"t": t} if cluster is None else {"t": t, "cluster": cluster}


def _json_safe(line: dict) -> dict:
    """What JSON Lines would have written (``default=str`` for what JSON has no type for)."""
    return orjson.loads(orjson.dumps(line, default=str))


# --- reading ------------------------------------------------------------------------------------------


def iter_file_lines(raw: IO[bytes], name: str, problems: list[str],
                    supersede: Supersession | None = None) -> Iterator[bytes]:
    """The v1 lines of an nwcol file (its header first, each ending in a newline). A torn or corrupt
    tail ends the lines at the last whole block, with one problem saying what was not read.
    ``supersede``: the renewals it finds superseded are left out."""
    check_magic(raw, name)
    codec = _Codec(plain=supersede is not None)
    reader = BlockReader(raw)
    last_t: float | None = None
    for body in reader:
        if reader.blocks == 0:
            if supersede is not None:
                supersede.header(orjson.loads(body))
                supersede.codec = codec
            yield body + b"\n"
            continue
        try:
            if supersede is None:
                for line, t, _ in _decode_block(body, codec):
                    last_t = t
                    yield line
            else:
                supersede.block(body, codec)
                last_t = codec.last_us / 1_000_000
                yield from supersede.ready()
        except (ValueError, KeyError, IndexError, TypeError, struct.error, orjson.JSONDecodeError) as exc:
            reader.why = f"block {reader.blocks} cannot be decoded ({type(exc).__name__}: {str(exc)[:60]})"
            break
    if supersede is not None:
        yield from supersede.finish()
    if reader.blocks == 0:
        raise RecordingError(f"{name}: a columnar recording without its header" +
                             (f" ({reader.why})" if reader.why else " (cut short)"))
    problem = reader.problem(name, _at(last_t))
    if problem is not None and (reader.why is not None or not writer_lock.being_written(raw)):
        problems.append(problem)  # (a tail still being written is the present, not a torn file)


def received_until(raw: IO[bytes], name: str) -> float | None:
    """When the last row of an nwcol file was received (None: no row), without making its lines:
    the receive times are deltas from the row before, so the sum of every block's column (and the
    last row's residual: the very float its line has)."""
    check_magic(raw, name)
    reader = BlockReader(raw)
    last_us: int | None = None
    last: tuple[bytes, int] | None = None
    for body in reader:
        if reader.blocks == 0:
            continue
        try:
            n = _U32.unpack_from(body, 0)[0]
            rx = _unpack(_raw_columns(body)[1], n)
        except (ValueError, struct.error):
            break
        if rx:
            last_us = (last_us or 0) + sum(rx)
            last = (body, n)
    if last_us is None or last is None:
        return None
    try:
        res = _unpack(_raw_columns(last[0])[2], last[1])[-1]
    except (ValueError, struct.error, IndexError):
        res = 0
    return _time_of(last_us, res)


def _at(t: float | None) -> str:
    if t is None:
        return ""
    from ..core.timeutil import format_time

    return f" ({format_time(t, micro=True)})"


def _raw_columns(body: bytes) -> list[memoryview]:
    """A data block's 8 columns as they are, none decoded."""
    cols = []
    p = 12
    for _ in range(8):
        (size,) = _U32.unpack_from(body, p)
        p += 4
        cols.append(memoryview(body)[p:p + size])
        p += size
    return cols


def _split(body: bytes) -> tuple[int, bytes, list[memoryview], int, int, int, list[Any]]:
    """A data block's parts: (rows, kinds, its 8 columns as they are, renewal rows, resourceVersion
    values, managedFields values, the whole lines decoded)."""
    n, n_rv, n_mf = struct.unpack_from("<III", body, 0)
    cols = _raw_columns(body)
    kinds = bytes(cols[0])
    if len(kinds) != n:
        raise ValueError("row kinds of the wrong length")
    blobs: list[Any] = split(cols[7]) if len(cols[7]) else []  # each decoded when it is read (``_whole_row``)
    return n, kinds, cols, kinds.count(_ROW_LEASE), n_rv, n_mf, blobs


def _columns(body: bytes) -> tuple[int, bytes, list[int], list[int], list[int], list[int], list[int], list[int],
                                    list[Any]]:
    """A data block's columns: (rows, kinds, rx, res, lease, offset, rv, mf, the whole lines)."""
    return _listed(_split(body))


def _listed(parts: tuple) -> tuple[int, bytes, list[int], list[int], list[int], list[int], list[int], list[int],
                                   list[Any]]:
    """``_split``'s parts as ``_columns`` gives them."""
    n, kinds, cols, n_lease, n_rv, n_mf, blobs = parts
    return (n, kinds, _unpack(cols[1], n), _unpack(cols[2], n), _unpack(cols[3], n_lease), _unpack(cols[4], n_lease),
            _unpack(cols[5], n_rv), _unpack(cols[6], n_mf), blobs)


_ulp = math.ulp


def _time_of(t_us: int, resid: int) -> float:
    """``from_micros``, cheaply where the float is in the binade of ``t_us / 1e6`` (nearly always)."""
    base = t_us / 1_000_000
    if not resid:
        return base
    u = _ulp(base)
    t = base + resid * u
    return t if _ulp(t) == u else from_micros(t_us, resid)


def _whole_row(kind: int, blob: Any, c: _Codec, t: float, t_us: int) -> tuple[bytes, Any, dict]:
    """A row kept as a whole line (its object patched back when it is a patch): (the line, its time,
    the line as a dict; of a plain line, only what a reader asks of it: ``Plain.read_as``).
    ``blob``: the block's element as its bytes (``Raw``), as a ``Plain`` line (``FastRange.may_read``
    looked at it), or decoded (``columnar_whole``)."""
    if type(blob) is Raw:
        p = plain(blob) if kind == _ROW_LINE else None
        blob = p if p is not None else decoded(blob)
    if type(blob) is Plain:
        if kind == _ROW_LINE:
            c.learn_plain(blob, t_us)
            return blob.line(t), t, blob.read_as(t)
        blob = decoded(blob.raw)
    if kind == _ROW_PATCHED:
        payload, p_, ns, nm_ = blob
        obj = c.previous((payload.get("cluster"), payload.get("resource"), ns, nm_))
        if obj is None:
            raise ValueError("a patch of an object not in the file")
        payload["object"] = obj if p_ is None else patch(obj, p_)
    elif kind == _ROW_SPLICED:
        payload, values, ns, nm_ = blob
        if payload.get("object", 0) is not None:
            raise ValueError("a spliced row with an object")
        data = c.spliced((payload.get("cluster"), payload.get("resource"), ns, nm_), payload.get("type"), values)
        payload["object"] = orjson.Fragment(data)  # (the line's JSON holds it as it is)
    elif kind == _ROW_LINE:
        payload = blob
    else:
        raise ValueError(f"unknown row kind {kind}")
    if "t" in payload:
        line = payload
        tt = payload["t"]
    else:
        line = {"t": t}
        line.update(payload)
        tt = t
    if kind != _ROW_SPLICED:  # (a splice is learned as it is made)
        c.learn_line(line, t_us)
    return orjson.dumps(line) + b"\n", tt, line


def _decode_block(body: bytes, c: _Codec) -> Iterator[tuple[bytes, Any, dict | None]]:
    """(line, its time, the line as a dict when it was a whole one) for each row of a block."""
    n, kinds, rx, res, idx, off, rvs, mfs, whole = _columns(body)
    blobs = iter(whole)
    li = ri = mi = 0
    for k in range(n):
        t_us = c.last_us + rx[k]
        c.last_us = t_us
        t = _time_of(t_us, res[k])
        kind = kinds[k]
        if kind == _ROW_LEASE:
            tpl = c.by_index[idx[li]]
            if tpl is None:
                raise ValueError(f"row of a Lease no longer in the dictionary ({idx[li]})")
            tpl.offset += off[li]
            li += 1
            renew = t_us + tpl.offset
            rv = None
            if tpl.has_rv:
                rv = c.rv.get(tpl.cluster, 0) + rvs[ri]
                c.rv[tpl.cluster] = rv
                ri += 1
            nm = tpl.n_mf
            base = renew // 1_000_000
            if tpl.kubelet is not None:
                yield _kubelet_line(t, tpl, renew, rv, base + mfs[mi]), t, None
                mi += 1
                continue
            seconds = [base + mfs[mi]] if nm == 1 else [base + s for s in mfs[mi:mi + nm]]
            mi += nm
            yield _line_of(t, tpl, renew, rv, seconds), t, None
            continue
        yield _whole_row(kind, next(blobs), c, t, t_us)


def _line_of(t: float, tpl: _Template, renew: int, rv: int | None, seconds: list[int]) -> bytes:
    """The v1 line of a renewal row."""
    if tpl.kubelet is not None:
        return _kubelet_line(t, tpl, renew, rv, seconds[0])
    return b'{"t":' + orjson.dumps(t) + tpl.prefix + tpl.build(renew, rv, seconds) + b"}\n"


def _kubelet_line(t: float, tpl: _Template, renew: int, rv: int, second: int) -> bytes:
    """``_line_of`` a kubelet's Lease (``_Template.kubelet``): most rows of a segment."""
    return _kubelet_object(tpl.kubelet, renew, rv, second, b'{"t":' + orjson.dumps(t) + tpl.prefix,
                           b"}\n")


def _kubelet_object(pieces: tuple[bytes, bytes, bytes, bytes], renew: int, rv: int, second: int, head: bytes = b"",
                    tail: bytes = b"") -> bytes:
    """A kubelet Lease's JSON from its template's pieces and a renewal's values, in one join of bytes
    (``head`` and ``tail``: its line's, around it)."""
    return b"".join((head, pieces[0], b"%d" % rv, pieces[1], _prefix_bytes(second), pieces[2], _micro_bytes(renew),
                     pieces[3], tail))


# A renewal row read by ``Supersession``, its line not built yet: a list (cheaper than an object at
# hundreds of thousands a segment) of these fields.
_T, _TPL, _RENEW, _RV, _SECONDS, _FINAL, _DROP = range(7)
"""``_FINAL``: whether it is kept or left out is decided; ``_DROP``: left out (``columnar_range`` the same)."""


def _renewal_line(r: list) -> bytes:
    return _line_of(r[_T], r[_TPL], r[_RENEW], r[_RV], r[_SECONDS])


_NEVER = 1 << 62
"""A renewTime (microseconds) no renewal is later than: a Lease whose renewTime cannot be known here."""
PENDING_SECONDS = 60.0
"""A renewal not superseded within this long (its node stopped renewing) is kept: what waits is bounded."""


class Supersession:
    """Leaves out of the lines read the Lease renewals that a later renewal of the same Lease supersedes
    in a one-shot answer at ``target`` (``replay/superseded.py`` says when: ``status --replay --at``
    would drop them after decoding them; here they are never even made lines). Only drops that
    ``Superseded`` itself makes are made, so the state answered is the same: a renewal row ``P`` is
    left out when a later row ``R`` of the same Lease (same dictionary entry, whose whole line the
    answer's own decoder reads cleanly: ``clean``) is applied (received at or before ``target``,
    while nothing read is later than ``read_until``, not before the recording's start less
    ``early_slack``), once the lease list is in, and ``R``'s renewTime is later than every renewTime
    seen of that Lease's name (any line of it that ``clean`` cannot vouch for: never again).

    That holds while the lines of each Lease name come in time order (then the answer applies them
    in reading order, whatever it does with the others). A line of a name that steps back stops the
    drops on that name; if one of them was made already, ``unsure`` says so and the caller reads
    again without this (and so does a line of any other object that steps back: ``object_in_order``).
    With ``clean_node``, the Nodes' status reports a later one supersedes are left out too
    (``columnar_reports``). One for a whole stream (a directory's segments share it); ``hidden``: the
    next lines are read but not the answer's (a later segment's keyframe), they only make dropping
    rarer. What differs from reading every line: the line numbers of problems after the first drop,
    and a renewal that duplicates an earlier line is not reported when it is left out.

    Runs of blocks in which every row is decided the same way are read a block at a time
    (``columnar_range.FastRange``: numpy over whole columns, each Lease's last row of the run
    made a renewal here when the run ends), the other blocks row by row (``_row_by_row``)."""

    def __init__(self, target: float, read_until: float, clean: Callable[[bytes], tuple[bool, float | None]],
                 early_slack: float, clean_node: Callable[[bytes], bool] | None = None) -> None:
        """``clean_node``: Nodes' status reports are left out too, where a later one supersedes them
        (``columnar_reports``; ``clean_node`` is its ``clean``)."""
        self.target = target
        self.read_until = read_until
        self._clean = clean
        self._slack = early_slack
        self.anchor: float | None = None
        self._floor = -math.inf
        """No line earlier than this is admitted (the anchor)."""
        self.hidden = 0
        self.dropped = 0
        self.unsure = False
        self.codec: _Codec | None = None
        self.queue: deque[Any] = deque()
        """Lines and renewals in reading order; the head goes out once it is decided (``ready``)."""
        self._synced: dict[Any, float] = {}
        self._newest: dict[Any, int] = {}
        self._pending: dict[tuple, list] = {}
        self._last: dict[Any, float] = {}
        """The latest time of a line of each Lease name."""
        self._object_last: dict[tuple, float] = {}
        """The latest time of a line of each other object (``object_in_order``)."""
        self._dropped_names: set[Any] = set()
        self._hi = -math.inf
        self._run: FastRange | None = None
        self._run_fits: Any = None
        """(codec, lease lines read) when a run was last refused: asked again after a Lease's next
        whole line (which may change the dictionary, a Lease's droppability or the lease list)."""
        self._lease_lines = 0
        self._wait = 0
        """Blocks to read row by row before a run is tried again (``end_run``)."""
        self._backoff = 0
        self.reports = StatusReports(clean_node) if clean_node is not None else None

    def header(self, header: Any) -> None:
        """A file's header: the first one anchors the recording (``line_guards.TimeFrame``)."""
        if self.anchor is None:
            started = header.get("started_at") if isinstance(header, dict) else None
            t = parse_time(started) if isinstance(started, str) else None
            self.anchor = self._floor = -math.inf if t is None else t - self._slack
        if isinstance(header, dict) and "clusters" in header:
            self.reports = None  # (of several clusters: ``columnar_reports`` leaves out reports of one)

    def whole(self, kind: int, blob: Any, c: _Codec, t: float, t_us: int) -> bytes | Report:
        """A whole row read (a block's rows but the renewals'): its line, or a clean status report
        waiting unbuilt for the next of its Node (``columnar_reports``), for the queue."""
        item: bytes | Report | None = None
        key = None
        if kind == _ROW_SPLICED:
            if type(blob) is Raw:
                blob = decoded(blob)
            if self.reports is not None:
                item = self.reports.report(blob, c, t, self)
        if item is None:
            data, tt, line = _whole_row(kind, blob, c, t, t_us)
            if kind == _ROW_SPLICED:  # (its object is a Fragment: keyed by the row, as the codec keys it)
                payload, _, ns, name = blob
                key = (payload.get("cluster"), payload.get("resource"), ns, name)
            self._line(data, tt, line, key)
            item = data
        if self.hidden:
            self.hidden -= 1
        return item

    def block(self, body: bytes, c: _Codec) -> None:
        """A data block read: its whole lines through ``whole``, its renewal rows decoded here, each
        one deciding the renewal of its Lease waiting (``_pending``) and waiting in turn. The rows are
        decoded as ``_decode_block`` decodes them (the same arithmetic, inline: a segment holds
        hundreds of thousands), and a renewal is a list, its line built only if it is kept. Runs of
        blocks whose rows it would all decide the same way are read a block at a time
        (``columnar_range``)."""
        parts = _split(body)
        if self._run is None:
            if self._wait:
                self._wait -= 1
            elif self._run_fits != (c, self._lease_lines) and FastRange.may_read(self, c, parts):
                ok, cluster = FastRange.fits(self, c)
                if ok:
                    self._run = FastRange(self, c, cluster, self.whole, _time_of)
                else:
                    self._run_fits = (c, self._lease_lines)  # (not asked again before a Lease's next line)
        if self._run is not None:
            if self._run.block(parts):
                if self._run.buffered > MAX_BUFFERED:
                    self.end_run()
                return
            self.end_run()
        self._row_by_row(_listed(parts), c)

    def end_run(self) -> None:
        """The run of blocks read a block at a time ends (``FastRange.end``). Starting and ending one
        costs a pass over the dictionary: after a short run, the next is tried only some blocks later
        (twice as many after each short run, up to ``MAX_WAIT``)."""
        if self._run is not None:
            short = self._run.blocks < SHORT_RUN
            self._run.end()
            self._run = None
            self._backoff = min(MAX_WAIT, max(1, 2 * self._backoff)) if short else 0
            self._wait = self._backoff

    def _row_by_row(self, cols: tuple, c: _Codec) -> None:
        n, kinds, rx, res, idx, off, rvs, mfs, whole = cols
        blobs = iter(whole)
        append = self.queue.append
        last_of = self._last
        pending = self._pending
        newest_of = self._newest
        synced = self._synced
        by_index = c.by_index
        crv = c.rv
        target, read_until = self.target, self.read_until
        floor = self._floor
        never = -_NEVER
        li = ri = mi = 0
        t_us = c.last_us
        hidden_n, hi, dropped = self.hidden, self._hi, 0  # kept here, given back around ``add``
        dropped_names = self._dropped_names
        for k in range(n):
            t_us += rx[k]
            r_ = res[k]
            if r_:
                base = t_us / 1_000_000
                u = _ulp(base)
                t = base + r_ * u
                if _ulp(t) != u:
                    t = from_micros(t_us, r_)
            else:
                t = t_us / 1_000_000
            kind = kinds[k]
            if kind != _ROW_LEASE:
                c.last_us = t_us
                self.hidden, self._hi = hidden_n, hi
                append(self.whole(kind, next(blobs), c, t, t_us))
                hidden_n, hi = self.hidden, self._hi
                continue
            tpl = by_index[idx[li]]
            if tpl is None:
                raise ValueError(f"row of a Lease no longer in the dictionary ({idx[li]})")
            offset = tpl.offset + off[li]
            tpl.offset = offset
            li += 1
            renew = t_us + offset
            rv = None
            if tpl.has_rv:
                cluster = tpl.cluster
                rv = crv.get(cluster, 0) + rvs[ri]
                crv[cluster] = rv
                ri += 1
            nm = tpl.n_mf
            if nm == 1:
                seconds = [renew // 1_000_000 + mfs[mi]]
            else:
                base_s = renew // 1_000_000
                seconds = [base_s + s for s in mfs[mi:mi + nm]]
            mi += nm
            r = [t, tpl, renew, rv, seconds, False, False]
            append(r)
            name = tpl.name
            hidden = hidden_n > 0
            if hidden:
                hidden_n -= 1
            else:
                last = last_of.get(name)
                if last is None or t >= last:
                    last_of[name] = t
                else:
                    self._in_order(name, t)
                if t > hi:
                    hi = t
            key = tpl.key
            p = pending.pop(key, None)
            newest = newest_of.get(name, never)
            if p is not None:
                if (not hidden and renew > newest and t <= target and hi <= read_until
                        and t >= floor and synced.get(tpl.cluster, math.inf) <= t):
                    p[_DROP] = True
                    dropped += 1
                    dropped_names.add(name)
                p[_FINAL] = True
            if renew > newest:
                newest_of[name] = newest = renew
            if tpl.droppable and not hidden and newest != _NEVER:
                pending[key] = r
            else:
                r[_FINAL] = True
        c.last_us = t_us
        self.hidden, self._hi = hidden_n, hi
        self.dropped += dropped

    def _line(self, data: bytes, t: Any, line: dict, key: tuple | None = None) -> None:
        """A whole line: a lease list done, or a Lease's line (it ends what was waiting of that Lease),
        or another object's (``key``: its codec key, when the line's object is not a dict)."""
        hidden = self.hidden > 0
        if not hidden and type(t) is float and t > self._hi:
            self._hi = t
        resource = line.get("resource")
        if resource != "leases":
            if key is None:
                key = _object_key(line)
            if key is not None:
                if not hidden:
                    self.object_in_order(key, t if type(t) is float else -math.inf)
                if resource == "nodes" and self.reports is not None:
                    self.reports.whole_line(key)
            return
        self._lease_lines += 1
        cluster = line.get("cluster")
        etype = line.get("type")
        if etype == "SYNCED":
            if not hidden and type(t) is float:
                self._synced.setdefault(cluster, t)
            return
        obj = line.get("object")
        meta = obj.get("metadata") if type(obj) is dict else None
        name = meta.get("name") if type(meta) is dict else None
        p = self._pending.pop((cluster, name), None)
        if p is not None:
            p[_FINAL] = True
        clean, renew = self._clean(data) if etype in ("ADDED", "MODIFIED") else (False, None)
        if not clean:
            self._newest[name] = _NEVER
        elif renew is not None:
            us = math.ceil(renew * 1_000_000) + 1
            if us > self._newest.get(name, -_NEVER):
                self._newest[name] = us
        if not hidden:
            self._in_order(name, t if type(t) is float else -math.inf)
        tpl = self.codec.leases.get((cluster, meta.get("namespace"), name)) if self.codec and type(meta) is dict else None
        if tpl is not None:
            tpl.droppable = clean

    def object_in_order(self, key: tuple, t: float) -> None:
        """A line of an object other than a Lease at ``t``. One that steps back before the object's
        last line is applied before or after it depending on how far the lines read before it went
        (``replay/instant.py``: a line more than its window late is applied where it comes), and
        the lines left out change that: the answer is read again without leaving anything out
        (``unsure``; an object's lines come in time order from its watch, so this is rare)."""
        last = self._object_last.get(key)
        if last is None or t >= last:
            self._object_last[key] = t
        else:
            self.unsure = True

    def _in_order(self, name: Any, t: float) -> None:
        """A line of Lease ``name`` at ``t``: one that steps back stops the drops on that name."""
        last = self._last.get(name)
        if last is None or t >= last:
            self._last[name] = t
            return
        if name in self._dropped_names:
            self.unsure = True
        self._newest[name] = _NEVER
        for key in [k for k in self._pending if k[1] == name]:
            self._pending.pop(key)[_FINAL] = True

    def ready(self) -> Iterator[bytes]:
        """The lines decided at the head of the queue (a renewal waiting longer than
        ``PENDING_SECONDS`` behind the newest is kept)."""
        q = self.queue
        while q:
            x = q[0]
            kind = type(x)
            if kind is list and not x[_FINAL]:
                if x[_T] >= self._hi - PENDING_SECONDS:
                    return
                x[_FINAL] = True
                key = x[_TPL].key
                if self._pending.get(key) is x:
                    del self._pending[key]
            elif kind is Report and not x.final:
                if (x.t >= self._hi - REPORT_PENDING_SECONDS and len(q) < MAX_WAITING
                        and self._hi <= self.read_until):  # (past the read's end no report is left out)
                    return
                self.reports.decided(x)
            q.popleft()
            if kind is list:
                if not x[_DROP]:
                    yield _renewal_line(x)
            elif kind is Report:
                if not x.drop:
                    yield x.line()
            else:
                yield x

    def finish(self) -> Iterator[bytes]:
        """The end of a file: whatever waits is kept."""
        self.end_run()
        for p in self._pending.values():
            p[_FINAL] = True
        self._pending.clear()
        if self.reports is not None:
            self.reports.end()
        yield from self.ready()


# --- whole files ----------------------------------------------------------------------------------


def open_columnar(raw: IO[bytes], name: str, supersede: Supersession | None = None) -> IO[bytes]:
    """An nwcol file as a buffered stream of its v1 lines (what ``recording_input.open_binary`` returns for
    one); ``supersede``: without the renewals it finds superseded."""
    problems: list[str] = []
    # named apart from the file: a reader must not map the file itself as v1 lines (replay/index.py)
    stream = SegmentStream(_closing(iter_file_lines(raw, name, problems, supersede), raw), f"{name} (columnar)")
    stream.problems = problems
    return io.BufferedReader(stream, 1 << 20)


def _closing(lines: Iterator[bytes], raw: IO[bytes]) -> Iterator[bytes]:
    """The lines, the file closed after them (stdin stays open, as ``recording_input.close_input`` keeps it)."""
    import sys

    try:
        yield from lines
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()


def write_lines(lines: Iterable[bytes], out: IO[bytes], level: int = LEVEL) -> ColumnarWriter:
    """v1 lines (the header first) into an nwcol file; returns the (closed) writer, its counts."""
    it = iter(lines)
    first = next(it, None)
    if first is None:
        raise RecordingError("nothing to write: no header")
    w = ColumnarWriter(out, orjson.loads(first), level)
    for line in it:
        if line.strip():
            w.add_line(orjson.loads(line))
    w.close()
    return w


__all__ = ["ColumnarRecorder", "ColumnarWriter", "EXTENSION", "MAGIC", "Supersession", "is_columnar",
           "iter_file_lines", "open_columnar", "write_lines"]
