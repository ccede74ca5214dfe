"""The read-ahead of a watch stream hands over exactly what the stream gave, in order."""

from __future__ import annotations

import threading

import pytest

from nodewatch.sources.read_ahead import ReadAhead


class Stream:
    """A response whose ``read1`` gives ``chunks``, then ``end`` (b"" or an exception); a read past
    the end blocks until ``shutdown``, as a socket read does."""

    def __init__(self, chunks: list[bytes], end: bytes | BaseException | None = b"") -> None:
        self.chunks = list(chunks)
        self.end = end
        self.reads = 0
        self.down = threading.Event()

    def read1(self, size: int) -> bytes:
        self.reads += 1
        if self.chunks:
            return self.chunks.pop(0)[:size]
        if self.end is None:  # a quiet stream: wait for data that never comes
            self.down.wait()
            raise OSError("shut down")
        if isinstance(self.end, BaseException):
            raise self.end
        return self.end

    def shutdown(self) -> None:
        self.down.set()


def test_chunks_come_in_order_then_the_end():
    ahead = ReadAhead(Stream([b"a", b"b", b"c"]), 1024)
    assert [ahead.read() for _ in range(4)] == [b"a", b"b", b"c", b""]
    assert ahead.close()


def test_what_ended_the_stream_is_raised_after_what_came_before_it():
    ahead = ReadAhead(Stream([b"x" * 10, b"y"], TimeoutError("no data for 60s")), 4)
    assert ahead.read() == b"xxxx"  # read1's size is kept
    assert ahead.read() == b"y"
    with pytest.raises(TimeoutError, match="no data"):
        ahead.read()
    assert ahead.close()


def test_a_shut_down_stream_stops_a_reader_blocked_in_a_read():
    stream = Stream([b"a"], end=None)
    ahead = ReadAhead(stream, 16)
    assert ahead.read() == b"a"
    stream.shutdown()
    assert ahead.close(timeout=5)
