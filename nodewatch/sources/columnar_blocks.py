"""The framing of a columnar (nwcol) file: its magic, then one zstd stream of checksummed blocks.

Kept apart from the rows' coding (``columnar.py``) because two readers need the blocks and not the
lines: ``iter_file_lines`` (every line) and ``received_until`` (only when the file's last row was
received, which a directory's "recorded until" is read from; a copy of a directory keeps its lines,
not its files' times).

A block is ``<u32 length><u32 crc32><body>``; block 0 is the v1 header (JSON), every other one the
rows of at most a second. A torn or corrupt tail ends the blocks at the last whole one, and
``BlockReader.problem`` says what was not read.
"""

from __future__ import annotations

import struct
import zlib
from typing import IO, Iterator

import zstandard

from .recording_format import RecordingError

VERSION = 2
MAGIC = b"NWCOL" + bytes([VERSION]) + b"\r\n"
"""8 bytes: ``NWCOL``, the format version, CR LF (a text-mode copy that mangles line ends is caught).
What this writer writes; it reads ``READS``."""
READS = (1, 2)
"""Versions read: 2 adds a row kind to 1 (a spliced object, ``columnar._ROW_SPLICED``), so a file of
version 1 is one of version 2 without it."""
MAGIC_PREFIX = b"NWCOL"
MAX_BLOCK_BYTES = 256 * 1024 * 1024
"""A longer block length is a corrupt file, not a block (never allocated)."""
FRAME = struct.Struct("<II")
_READ = 1 << 20


def check_magic(raw: IO[bytes], name: str) -> None:
    """Reads the magic; raises RecordingError for a file that is not nwcol of a version read here."""
    head = raw.read(len(MAGIC))
    if not head.startswith(MAGIC_PREFIX):
        raise RecordingError(f"{name}: not a columnar recording")
    version = head[5] if len(head) > 5 else None
    if version not in READS or head[6:] != MAGIC[6:]:
        raise RecordingError(f"{name}: columnar recording format version {version!r} is not supported "
                             f"(this nodewatch reads versions {', '.join(map(str, READS))})")


class BlockReader:
    """The whole blocks of ``raw`` (after its magic), each body checked against its checksum.

    Iterate it once. The consumer that cannot decode a body sets ``why`` and stops; afterwards
    ``blocks`` is the number of whole blocks given and ``problem(name, at)`` the one line saying
    what was not read (None when the file ended cleanly)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._dz = zstandard.ZstdDecompressor().decompressobj()
        self.blocks = 0
        self.why: str | None = None
        self._left = 0
        self._rest = 0

    def __iter__(self) -> Iterator[bytes]:
        buf = bytearray()
        pos = 0
        try:
            while self.why is None:
                chunk = self._raw.read(_READ)
                if not chunk:
                    break
                try:
                    buf += self._dz.decompress(chunk)
                except zstandard.ZstdError as exc:
                    self.why = f"corrupt compressed data ({str(exc)[:80]})"
                    self._rest = len(chunk)
                    break
                while len(buf) - pos >= FRAME.size:
                    n, crc = FRAME.unpack_from(buf, pos)
                    if n > MAX_BLOCK_BYTES:
                        self.why = "a corrupt block length"
                        break
                    if len(buf) - pos - FRAME.size < n:
                        break
                    with memoryview(buf) as view:  # (one copy: a bytearray's slice would be a second)
                        body = bytes(view[pos + FRAME.size:pos + FRAME.size + n])
                    if zlib.crc32(body) != crc:
                        self.why = f"block {self.blocks} fails its checksum"
                        break
                    pos += FRAME.size + n
                    self._left = len(buf) - pos  # (a consumer that stops here reads ``problem`` next)
                    yield body
                    if self.why is not None:
                        break
                    self.blocks += 1
                if pos > _READ:
                    del buf[:pos]
                    pos = 0
        finally:
            self._left = len(buf) - pos

    def problem(self, name: str, at: str) -> str | None:
        """What was not read, after the iteration (``at``: where the reading stopped, for the
        message, as `` (time)`` or empty)."""
        if self.why is not None:
            return (f"{name}: {self.why}; read up to its last whole block{at}, "
                    f"the rest ({self._left + self._rest} bytes or more) not read")
        if self._left or not self._dz.eof:
            what = f"{self._left} bytes of a block cut short" if self._left else "no end mark"
            return (f"{name}: ends abruptly (the writer stopped without closing it: {what}); "
                    f"read up to its last whole block{at}, the rest not read")
        return None
