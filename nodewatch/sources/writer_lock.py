"""Whether a recording is still being written: its writer holds an exclusive ``flock`` on it.

A reader of a file that a recorder (``record``, a hub's flight recorder) is still writing finds it
without its end: no zstd end mark, a block or a gzip member half flushed. Read after a crash that is
a writer that died, and says so; read while the writer runs (``report`` of a live hub's directory,
``status --replay`` of a ``record`` in progress) it is only the present, and calling it "ends
abruptly (the writer stopped without closing it)" is a false alarm. So each writer holds the lock
for as long as the file is open (the kernel drops it when the writer dies), and a reader that meets
such an end asks first. Readers take no lock that a writer would wait for: a shared lock, tried
without blocking and dropped at once.
"""

from __future__ import annotations

import fcntl
from typing import IO, Any


def hold(raw: IO[bytes]) -> None:
    """Mark ``raw`` (just opened for writing) as being written, until it is closed."""
    try:
        fcntl.flock(raw.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a file system without locks, or another writer: nothing to mark
        pass


def being_written(f: Any) -> bool:
    """Whether a writer holds ``f``'s file (an open file, or an object wrapping one as
    ``fileobj``/``raw``); False when that cannot be told."""
    for _ in range(4):  # a GzipFile's fileobj, a BufferedReader's raw, ...
        fileno = getattr(f, "fileno", None)
        try:
            fd = fileno() if fileno is not None else None
        except (OSError, ValueError):
            fd = None
        if isinstance(fd, int):
            break
        f = getattr(f, "fileobj", None) or getattr(f, "raw", None)
        if f is None:
            return False
    else:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False
