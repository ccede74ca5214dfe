"""Keep the live path's big transient buffers out of the long-lived heap.

glibc serves a request of 128 KiB or more with its own ``mmap`` and gives it back on ``free``,
until the first such block is freed: then its "dynamic threshold" rises to that block's size and
every later buffer of that size is carved from the heap instead. A live source frees big buffers
all the time (256 KiB reads of a watch stream, the list worker's pickled batches of 1,000 Nodes,
decoded blocks of lines) among the small objects that stay (the fleet's records, the table's
rows), and a heap whose free holes sit under live objects cannot shrink. Measured on the
dashboard against a 65,000-node incident: peak RSS 255-294 MB with the dynamic threshold,
231-245 MB with it fixed at 128 KiB (``bench/README.md``).

Fixing it costs an ``mmap``/``munmap`` pair per big buffer, a few thousand over a 65,000-node
list. Only glibc has the knob; elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter number (malloc.h); setting it also turns the dynamic threshold off."""

MMAP_THRESHOLD = 128 * 1024
"""glibc's own starting value: blocks from here up are mapped on their own and returned when freed."""

_fixed: bool | None = None


def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold for this process (once; later calls return the first answer).
    True when the C library took it."""
    global _fixed
    if _fixed is None:
        _fixed = False
        if sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):
                return False
            mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
            mallopt.restype = ctypes.c_int
            _fixed = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    return _fixed
