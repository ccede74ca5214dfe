"""A watch stream read a few chunks ahead of its decoder, in a thread of its own.

Why: the 65,000 Nodes of a streaming list are 670 MB over TLS; decrypting them and parsing the
HTTP chunks cost the reflector ~0.75 s of CPU, one chunk after another with the decoding. OpenSSL
decrypts with the GIL released, so a reader thread decrypts the next chunks on the other core
while the reflector's thread decodes this one (in C, with the GIL held).

The reader ends with the stream: an empty chunk at its end, or the exception that ended it,
is handed to the decoder in order, after every chunk read before it. ``close`` stops it: the
caller shuts the response down first (unblocking a read), so the connection is never handed back
to the pool while the reader still reads from it.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

DEPTH = 8
"""Chunks read ahead at most (8 x 256 KB): enough to keep both cores busy, little memory."""


class ReadAhead:
    """``read()`` returns what ``resp.read1(size)`` would, read ahead by a thread; see the module."""

    def __init__(self, resp: Any, size: int, name: str = "read-ahead") -> None:
        self._resp = resp
        self._size = size
        self._chunks: queue.Queue[bytes | BaseException] = queue.Queue(DEPTH)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                chunk = self._resp.read1(self._size)
                self._put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> None:
        while not self._closed.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read(self) -> bytes:
        """The next chunk (b"" at the end of the stream); raises what ended the stream otherwise."""
        item = self._chunks.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self, timeout: float = 5.0) -> bool:
        """Stop reading; True once the reader has stopped (shut the response down before, if the
        stream may still be open, so a blocked read returns)."""
        self._closed.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()
