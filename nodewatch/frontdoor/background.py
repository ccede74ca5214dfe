"""The front doors on an event loop of their own, in a thread, for a caller that has no loop
(a threaded hub, the tests):

    doors = DoorThread()
    ssh = doors.run(start_ssh(...))
    ...
    doors.close(ssh)        # closes each door given, waits for its sessions, stops the loop
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class DoorThread:
    def __init__(self, name: str = "nodewatch-frontdoors") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Run ``coro`` on the doors' loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self, *doors: Any, timeout: float = 30) -> None:
        """Close ``doors`` (anything with ``close()`` and ``wait_closed()``), then stop the loop."""
        async def shut() -> None:
            for door in doors:
                door.close()
            await asyncio.gather(*(door.wait_closed() for door in doors))

        try:
            if doors:
                self.run(shut(), timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)
            if not self.thread.is_alive():
                self.loop.close()
