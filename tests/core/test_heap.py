"""``sources/heap``: glibc's mmap threshold fixed, so a freed big buffer does not pull the next
ones into the heap (where, freed among live objects, they keep the process large)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the knob is glibc's")

_PROBE = r"""
import ctypes, sys
from nodewatch.sources import heap

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fix":
    assert heap.fix_mmap_threshold() and heap.fix_mmap_threshold()  # once; the same answer after
big = bytearray(8 << 20)
del big  # glibc's dynamic threshold would now rise to 8 MiB
before = libc.mallinfo2().hblks
buf = bytearray(256 << 10)  # one read of a watch stream
print(libc.mallinfo2().hblks - before)
"""


def _mapped_blocks_added(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_big_buffer_is_mapped_on_its_own_after_a_bigger_one_was_freed() -> None:
    assert _mapped_blocks_added("fix") == 1


def test_without_it_glibc_puts_the_buffer_in_the_heap() -> None:
    """The reason for the module: the dynamic threshold is what it turns off."""
    assert _mapped_blocks_added("default") == 0
