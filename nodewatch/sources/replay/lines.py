"""Recording lines read fast: msgspec for the common event line, ``recording.parse_line`` for the rest.

Why: a one-hour 5,000-node recording is two million lines, nearly all Lease renewals. Parsing each
into dicts (orjson) and then into records was most of a replay's time. Here an event line is decoded
into a Struct whose object stays raw bytes (``msgspec.Raw``); Nodes and Leases are then decoded by
``core.wire`` straight into records, other kinds (pods, events, CSRs) into dicts. The index needs
only a line's time and kind (``stamp``), and leaves the object undecoded.

Anything unusual (health, certificate and settings lines, a field of an unexpected type, bad JSON)
goes through ``parse_line``, so every problem is reported in the same words as before.
"""

from __future__ import annotations

from typing import Optional

import msgspec
import orjson

from ...core.timeutil import MAX_TIME, MIN_TIME
from ...core.views import EVENT_TYPES, RESOURCES
from ...core.wire import DECODERS, WireError
from ..recording import Entry, parse_line

_OBJECT_EVENTS = frozenset(("ADDED", "MODIFIED", "DELETED"))
_RESOURCES = frozenset(RESOURCES)
_EVENT_TYPES = frozenset(EVENT_TYPES)


class _Line(msgspec.Struct, gc=False):
    t: Optional[float] = None
    resource: Optional[str] = None
    type: Optional[str] = None
    # msgspec.Raw cannot be in a union: a missing field stays None, a JSON null becomes Raw(b"null")
    object: msgspec.Raw = None  # type: ignore[assignment]
    list: Optional[bool] = None
    health: msgspec.Raw = None  # type: ignore[assignment]
    cert: msgspec.Raw = None  # type: ignore[assignment]
    settings: msgspec.Raw = None  # type: ignore[assignment]
    cluster: Optional[str] = None


_decode_line = msgspec.json.Decoder(_Line).decode


def plain_event(line: bytes) -> _Line | None:
    """The decoded line when it is an ordinary, valid event line; None for anything else."""
    d = plain_line(line)
    return d if d is not None and object_fits(d) else None


def object_fits(d: _Line) -> bool:
    """The object of a ``plain_line`` is one where its event type needs one (a JSON object)."""
    return d.type not in _OBJECT_EVENTS or (d.object is not None and memoryview(d.object)[:1] == b"{")


def plain_line(line: bytes) -> _Line | None:
    """``plain_event`` but for its object: ``object_fits`` checks it (a caller that decodes the
    object into a Struct has it checked by the decoder)."""
    try:
        d = _decode_line(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return d if plain_fields(d) else None


def plain_fields(d: _Line) -> bool:
    """The checks of ``plain_line`` on a decoded line (also of a ``_Line`` subclass that types its
    object, ``superseded.deferred_lease``): an event line with a valid time and a known resource
    and type, nothing ``parse_line`` would read or report otherwise."""
    t = d.t  # a float (msgspec makes an int one): valid_time's range check is all there is to do
    if t is None or d.health is not None or d.cert is not None or d.settings is not None:
        return False
    if d.resource not in _RESOURCES or d.type not in _EVENT_TYPES or not MIN_TIME <= t <= MAX_TIME:
        return False  # parse_line reports it (a time out of range, NaN, infinite)
    return d.cluster != ""  # parse_line reads an empty cluster as none


def parse(n: int, line: bytes, problems: list[str]) -> Entry | None:
    """``parse_line``, faster: the same entries (Nodes and Leases as records), the same problems."""
    return parse_decoded(n, line, plain_event(line), problems)


def parse_decoded(n: int, line: bytes, d: _Line | None, problems: list[str]) -> Entry | None:
    """``parse`` of a line whose ``plain_event`` is ``d`` already (decoded once)."""
    if d is None:
        return parse_line(n, line, problems)
    obj = None
    if d.object is not None:
        decoder = DECODERS.get(d.resource) if d.type in _OBJECT_EVENTS else None  # type: ignore[arg-type]
        if decoder is not None:
            try:
                obj = decoder.decode_object(d.object)
            except WireError:
                obj = None
        if obj is None:
            try:
                obj = orjson.loads(memoryview(d.object))
            except orjson.JSONDecodeError:  # what msgspec lets through and orjson does not (lone surrogates)
                return parse_line(n, line, problems)
    return Entry(n, d.t, d.resource, d.type, obj, d.list is True, None, d.cluster)  # type: ignore[arg-type]


def stamp(n: int, line: bytes, problems: list[str]) -> Entry | None:
    """The line's time and kind, for the index: an Entry without its object (``obj`` None) for an
    ordinary event line, the full ``parse_line`` entry (and problems) for anything else."""
    d = plain_event(line)
    if d is None:
        return parse_line(n, line, problems)
    return Entry(n, d.t, d.resource, d.type, None, d.list is True, None, d.cluster)  # type: ignore[arg-type]


def stamp_parsed(n: int, line: bytes, problems: list[str]) -> tuple[Entry | None, Entry | None]:
    """(``stamp``, ``parse(0, line, [])``) of one line, decoded once: the index keeps the events
    of a recording's opening parsed (``index.py``)."""
    d = plain_event(line)
    if d is None:
        return parse_line(n, line, problems), None
    return (Entry(n, d.t, d.resource, d.type, None, d.list is True, None, d.cluster),  # type: ignore[arg-type]
            parse_decoded(0, line, d, []))
