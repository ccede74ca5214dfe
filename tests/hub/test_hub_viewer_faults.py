"""A viewer never shows a stale screen as live: whatever is wrong with a frame from the hub (a
snapshot part of another snapshot, a field of the wrong type), the connection is dropped, the
dashboard says the hub connection is lost, and the viewer reconnects to a fresh snapshot.

Before, the part of another snapshot raised a NameError (WireError was never imported) and any
exception outside a short list killed the connection thread: the screen stayed on its last frame,
marked connected, for good."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from nodewatch.hub import protocol
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.hub.viewer_state import HUB_STREAM
from support.hub_support import RawClient, demo_hub
from support.simserver import wait_until


def _good_snapshot(tmp_path: Path) -> list[dict]:
    """A real hub's hello and first snapshot (with its parts), as a viewer gets them."""
    (tmp_path / "real").mkdir()
    with demo_hub(tmp_path / "real", nodes=12) as hub:
        raw = RawClient(hub.socket_path)
        try:
            frames = [raw.read_until("snap")]
            for _ in range(int(frames[0].get("parts", 0))):
                frames.append(raw.read_until("part"))
        finally:
            raw.close()
    return [{"k": "hello", "v": protocol.VERSION}, *frames]


class FakeHub:
    """A hub that sends a good snapshot and then ``bad`` on the first connection; on the next
    ones, once ``release`` is set, the good snapshot again."""

    def __init__(self, path: str, good: list[dict], bad: dict) -> None:
        self.good, self.bad = good, bad
        self.release = threading.Event()
        self.connections = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)
            self.connections += 1
            threading.Thread(target=self._session, args=(conn, self.connections), daemon=True).start()

    def _session(self, conn: socket.socket, n: int) -> None:
        try:
            protocol.recv_frame(conn)  # the viewer's hello
            if n > 1:
                self.release.wait(30)
            for msg in self.good:
                conn.sendall(protocol.encode(msg))
            if n == 1:
                conn.sendall(protocol.encode(self.bad))
            while conn.recv(65536):  # held open: only the viewer may end it
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        for c in self.open:
            c.close()


BAD_FRAMES = {
    "a part of another snapshot": lambda snap: {"k": "part", "seq": snap["seq"] + 7, "nodes": []},
    "labels that are not a mapping": lambda snap: {"k": "delta", "seq": snap["seq"] + 1, "now": snap["now"],
                                                   "up": [], "labels": [1, 2]},
    "a node that is not a node": lambda snap: {"k": "delta", "seq": snap["seq"] + 1, "now": snap["now"],
                                               "up": [None]},
}


@pytest.mark.parametrize("what", sorted(BAD_FRAMES))
def test_a_bad_frame_shows_the_connection_lost_and_the_viewer_reconnects(tmp_path, what):
    good = _good_snapshot(tmp_path)
    path = str(tmp_path / "hub.sock")
    fake = FakeHub(path, good, BAD_FRAMES[what](good[1]))
    v = ViewerSource(HubAddress(path=path), reconnect_for=60)
    try:
        v.start()
        # the bad frame: the screen is marked blind at once, the fleet still shown
        fv = wait_until(lambda: (f := v.state.evaluate(v.clock.now())).leases_blind and f, timeout=10)
        assert not v.state.connected and not fv.health[HUB_STREAM].connected
        assert "hub connection lost" in fv.blind_reason
        assert v.state.last_error, "the banner says why"
        assert len(fv.nodes) == 12
        wait_until(lambda: fake.connections >= 2, timeout=10)  # it tries again
        fake.release.set()
        fv = wait_until(lambda: v.state.connected and (f := v.state.evaluate(v.clock.now())) and not f.leases_blind
                        and f, timeout=10)
        assert len(fv.nodes) == 12 and fv.health[HUB_STREAM].connected
        assert not v.gone.is_set()
    finally:
        v.stop()
        fake.close()
