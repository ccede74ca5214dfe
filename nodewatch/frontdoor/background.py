"""The front doors on an event loop of their own, in a thread, for a caller that has no loop
(a threaded hub, the tests):

    doors = DoorThread()
    ssh = doors.run(start_ssh(...))
    ...
    doors.close(ssh)        # closes each door given, waits for its sessions, stops the loop
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..loop_thread import LoopThread


class DoorThread(LoopThread):
    def __init__(self, name: str = "nodewatch-frontdoors") -> None:
        super().__init__(name)

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
            self.stop(timeout)
