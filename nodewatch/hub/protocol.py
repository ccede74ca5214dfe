"""The hub's wire protocol: length-prefixed orjson frames, optionally zlib-compressed.

A frame is a 4-byte big-endian length, one flag byte (1: the payload is zlib-compressed) and the
payload, one JSON object with a kind ``k``. Why not newline-delimited: a snapshot of 65,000 nodes
is megabytes, and a reader that knows the length reads it in one go, without scanning for a
newline, and refuses an absurd length before allocating it.

Hub to viewer (every frame carries ``now``, the hub's clock: the only "now" a viewer shows):

- ``hello``: protocol version, the source's name, whether its clock is virtual (a demo's), the hub's limits.
- ``snap``: the whole fleet: ``meta`` (counts, zones, health, settings, and for a hub of several
  clusters the cluster strip), then every node's view (with its cluster, when there are several)
  and labels (for the search box), worst first, in this frame and the ``parts`` ``part`` frames
  that follow it at once. Sent first, and again to a viewer that fell behind.
- ``delta``: ``meta`` and the views that changed since the previous frame (``up``; a view whose
  only change is an on-time lease renewal as its key and four values in ``renew``), the nodes gone
  (``del``), labels that changed. Applied in order on top of the snapshot.
- ``details``: the drill-down node's pods, events, record and timeline, while one is asked for.
- ``bye``: the hub is shutting down (the viewer shows it and tries again).
- ``error``: a request refused (bad token, unknown request): said, then the connection closes.

Viewer to hub (requests only: viewers are read-only): ``hello`` (with the token on TCP),
``focus`` (a node, or null), ``ping``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import zlib
from typing import Any

import orjson

VERSION = 2
"""2: label sets, renewals in ``renew``, the snapshot's first part sent alone (``hub/publisher.py``)."""
HEADER = struct.Struct(">IB")
FLAG_ZLIB = 1
COMPRESS_ABOVE = 16 * 1024
"""Payloads larger than this are compressed (once, for every viewer that gets them)."""
MAX_FRAME = 256 * 1024 * 1024
"""A longer frame is a broken or hostile peer: the connection is closed."""
MAX_REQUEST = 64 * 1024
"""What a viewer may send in one frame (requests are small)."""


class ProtocolError(Exception):
    """The other side broke the protocol; the connection is closed."""


def encode(msg: dict[str, Any], *, compress: bool = True) -> bytes:
    """One frame, ready to write."""
    payload = orjson.dumps(msg)
    flags = 0
    if compress and len(payload) > COMPRESS_ABOVE:
        payload = zlib.compress(payload, 1)
        flags = FLAG_ZLIB
    return HEADER.pack(len(payload), flags) + payload


def decode(flags: int, payload: bytes, limit: int = MAX_FRAME) -> dict[str, Any]:
    if flags & FLAG_ZLIB:
        d = zlib.decompressobj()
        try:
            payload = d.decompress(payload, limit)
        except zlib.error as exc:
            raise ProtocolError(f"not a zlib stream: {exc}") from None
        if d.unconsumed_tail:
            raise ProtocolError("frame inflates beyond the limit")
    try:
        msg = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("k"), str):
        raise ProtocolError("a frame without a kind")
    return msg


async def read_frame(reader: asyncio.StreamReader, limit: int = MAX_FRAME) -> dict[str, Any] | None:
    """The next frame, or None at a clean end of stream."""
    try:
        head = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise ProtocolError("connection closed inside a frame header") from None
    length, flags = HEADER.unpack(head)
    if length > limit:
        raise ProtocolError(f"frame of {length} bytes is over the limit of {limit}")
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed inside a frame") from None
    return decode(flags, payload, limit)


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME) -> dict[str, Any] | None:
    """Blocking read of the next frame from a socket (the viewer's side); None at end of stream."""
    head = _recv_exactly(sock, HEADER.size, allow_eof=True)
    if head is None:
        return None
    length, flags = HEADER.unpack(head)
    if length > limit:
        raise ProtocolError(f"frame of {length} bytes is over the limit of {limit}")
    payload = _recv_exactly(sock, length, allow_eof=False)
    assert payload is not None
    return decode(flags, payload, limit)


def _recv_exactly(sock: socket.socket, n: int, *, allow_eof: bool) -> bytes | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0 and allow_eof:
                return None
            raise ProtocolError("connection closed inside a frame")
        got += k
    return bytes(buf)
