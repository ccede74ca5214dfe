"""An asyncio loop in a daemon thread of its own, for code that lives in threads.

The hub, the simulated API server and the front doors each serve sockets on asyncio while the rest
of nodewatch (watches, ticker, Textual's own loop) runs in threads; each used to start, feed and
stop such a loop by hand. ``LoopThread`` is that one shape (docs/threading.md lists who uses it):

    lt = LoopThread("hub-loop")
    server = lt.run(start_server(...))    # a coroutine on the loop, from any thread: its result
    lt.call(broadcast, frame)             # a plain callback on the loop; False once it has stopped
    lt.stop()                             # idempotent; the loop is closed once its thread is gone

It is not domain logic, so it lives beside the layers rather than in the core; any layer may import
it (it imports nothing of nodewatch). ``keep`` holds a task the loop would otherwise only hold
weakly (asyncio's documented trap: a task nobody references may be collected mid-flight).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_kept: set[asyncio.Future[Any]] = set()


def keep(task: asyncio.Future[T]) -> asyncio.Future[T]:
    """Hold ``task`` until it is done (the loop itself keeps only a weak reference)."""
    _kept.add(task)
    task.add_done_callback(_kept.discard)
    return task


class LoopThread:
    """A new event loop running forever in a daemon thread named ``name``, started at once."""

    def __init__(self, name: str, *,
                 exception_handler: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None
                 ) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        if exception_handler is not None:
            self.loop.set_exception_handler(exception_handler)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = False
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; its future, for a thread to wait on or ignore."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Run ``coro`` on the loop and return its result (or raise its exception) to this thread.
        Never call it from the loop's own thread: it would wait for itself."""
        return self.submit(coro).result(timeout)

    def call(self, fn: Callable[..., object], *args: Any) -> bool:
        """``fn(*args)`` on the loop, soon; False (and nothing done) once the loop is closed."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            return False
        return True

    @property
    def running(self) -> bool:
        return self.loop.is_running()

    def stop(self, timeout: float | None = 10) -> None:
        """Stop the loop after what is already queued on it, wait for the thread (up to
        ``timeout``), and close the loop once the thread is gone. Idempotent; safe from any thread
        but the loop's own (there it only asks the loop to stop)."""
        if self._stopped:
            return
        self._stopped = True
        self.call(self.loop.stop)
        if threading.current_thread() is self.thread:
            return
        self.thread.join(timeout)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()
