"""The one helper for an asyncio loop in a thread of its own (docs/threading.md)."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from nodewatch.loop_thread import LoopThread, keep


def test_a_coroutine_runs_on_the_loops_thread_and_its_result_or_error_comes_back():
    lt = LoopThread("test-loop")
    try:
        async def where() -> str:
            return threading.current_thread().name

        assert lt.run(where(), 5) == "test-loop"

        async def fail() -> None:
            raise KeyError("boom")

        with pytest.raises(KeyError):
            lt.run(fail(), 5)
    finally:
        lt.stop(5)


def test_stop_ends_the_thread_closes_the_loop_is_idempotent_and_calls_after_it_are_refused():
    lt = LoopThread("test-loop")
    seen: list[int] = []
    assert lt.call(seen.append, 1)
    lt.stop(5)
    assert seen == [1]  # what was queued before the stop still ran
    assert not lt.thread.is_alive() and lt.loop.is_closed()
    lt.stop(5)
    assert lt.call(seen.append, 2) is False and seen == [1]


def test_a_kept_task_survives_a_collection_while_nobody_else_holds_it():
    lt = LoopThread("test-loop")
    try:
        gate = threading.Event()
        done = threading.Event()

        async def slow() -> None:
            await asyncio.get_running_loop().run_in_executor(None, gate.wait, 5)
            done.set()

        async def start() -> None:
            keep(asyncio.ensure_future(slow()))

        lt.run(start(), 5)
        gc.collect()
        gate.set()
        assert done.wait(5)
    finally:
        lt.stop(5)
