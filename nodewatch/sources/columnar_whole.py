"""A block's whole lines, read without making their objects (``columnar``'s reader).

Why: a columnar block keeps its whole lines (Nodes, Pods, Events, listed or changed Leases, health)
as one JSON array. Reading it with ``orjson.loads`` made a dict of every object, which the reader
then dumped again to give the v1 line, which the line's reader decoded a third time. A segment's
keyframe holds every Node of the fleet: at 65,000 Nodes the array's decode was a fifth of a seek
(1.8 s of 9.1 s) and the dump another 1.3 s. Here the array is split into its elements' bytes
(``msgspec.Raw``: a scan, nothing built), and a plain event line is given back as those bytes with
its time put in front: the same bytes ``orjson.dumps`` of the line would give, since the writer's
array is ``orjson``'s JSON of the same dicts. Only the line's envelope and its object's name are
decoded (the codec keys the object's last version by them, and a Lease's shape by them and the
object's JSON, which is those bytes too); the object itself is decoded only if a later patch needs
it (``columnar._Codec.previous``).

Anything else is decoded as before (``orjson.loads`` of the element): a patch row, a line with a
time of its own, health, certificate and settings lines, an object that is not a JSON object or
whose metadata is neither an object nor null, and any element whose envelope is not exactly
``resource``, ``type``, ``object`` and optionally ``cluster`` and ``list``, of the JSON types a
writer gives them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

Raw = msgspec.Raw


class _Meta(msgspec.Struct):
    name: Any = None
    namespace: Any = None


class _Object(msgspec.Struct):
    """An object's metadata (every other field skipped)."""

    metadata: _Meta | None = None


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """A plain event line without its time, as the writer keeps it."""

    resource: str
    type: str
    object: Raw
    cluster: str | None = None
    list: bool = False


_ELEMENTS = msgspec.json.Decoder(list[Raw])
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_OBJECT = msgspec.json.Decoder(_Object)


def split(data: Any) -> list[Raw]:
    """The elements of a block's array of whole lines, each as its bytes. ValueError: not a JSON
    array."""
    try:
        return _ELEMENTS.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"whole lines that are not a list ({exc})") from None


def decoded(blob: Raw) -> Any:
    """An element as ``orjson.loads`` gives it."""
    return orjson.loads(memoryview(blob))


class Plain:
    """A plain event line, its object still bytes."""

    __slots__ = ("raw", "envelope", "meta", "key")

    def __init__(self, raw: Raw, envelope: _Envelope, meta: _Meta | None) -> None:
        self.raw = raw
        self.envelope = envelope
        self.meta = meta
        """The object's metadata (None: null or absent)."""
        self.key = ((envelope.cluster, envelope.resource, meta.namespace, meta.name)
                    if meta is not None and type(meta.name) is str and envelope.resource != "leases" else None)
        """(cluster, resource, namespace, name): whose next version may be a patch of this one
        (``columnar._object_key``); None for a Lease (its rows are the dictionary's) or an object
        without a name."""

    def read_as(self, t: float) -> dict:
        """The line as a dict as far as ``columnar.Supersession`` reads it: its time, resource, type
        and cluster, and its object's name and namespace (the object itself is not made)."""
        env, meta = self.envelope, self.meta
        obj = {"metadata": None if meta is None else {"name": meta.name, "namespace": meta.namespace}}
        return {"t": t, "resource": env.resource, "type": env.type, "cluster": env.cluster, "object": obj}

    def line(self, t: float) -> bytes:
        """The v1 line at ``t``: ``orjson.dumps({"t": t, **payload})`` without the dict."""
        return b"".join((b'{"t":', orjson.dumps(t), b",", memoryview(self.raw)[1:], b"\n"))  # (one copy)


def plain(blob: Raw) -> Plain | None:
    """The element as a ``Plain`` line, or None when it must be decoded whole (see the module)."""
    try:
        env = _ENVELOPE.decode(blob)
    except msgspec.DecodeError:
        return None
    try:
        meta = _OBJECT.decode(env.object).metadata
    except msgspec.DecodeError:
        return None  # not an object, or its metadata not one: decoded whole, as before
    return Plain(blob, env, meta)
