"""Terminal: bytes the dashboard writes per second at one refresh a second, 65k nodes, 200x60.

What a slow SSH link has to carry. The real ``NodewatchApp`` runs in a child process on a
pseudo-terminal of 200x60 (``TERM=xterm-256color``, ``COLORTERM=truecolor``) with Textual's real
Linux driver; the parent counts the bytes read from the pty's master side. The fleet: ``nodes``
nodes, one in 37 unreachable (the top of the worst-first table: countdowns that move every
second), the rest renewing their leases every 10 s in real time (6,500 renewals/s at 65k). After
a warm-up the bytes over ``seconds`` seconds are counted.

Reference: the same app and fleet, but the whole screen repainted at every tick
(``App.refresh``): what a dashboard that redraws everything sends.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from .harness import Figure

COLS, ROWS = 200, 60
WARMUP = 3.0
TARGET = 20_000


# --- the child: the real app on a pty -------------------------------------------------------


def _child(mode: str, nodes: int) -> None:
    from nodewatch.core.clock import SystemClock
    from nodewatch.ui.app import NodewatchApp

    from .frame import Renewer, build_state

    now = time.time()
    state = build_state(nodes, now)
    state.evaluate(now)
    clock = SystemClock()
    renew = Renewer(state, nodes)
    stop = threading.Event()

    def feed() -> None:  # a tenth of the fleet per second, in ten slices
        renew.n = nodes
        while not stop.wait(0.1):
            t = clock.now()
            with state.lock:
                for _ in range(max(1, nodes // 100)):
                    i = renew.i
                    renew.i = (renew.i + 1) % nodes
                    if i % renew.bad_every:
                        state.apply("leases", "MODIFIED", _lease(i, t), t)

    class Source:
        name = f"bench: {nodes} nodes"
        replay = None

        def __init__(self) -> None:
            self.state, self.clock = state, clock

        def start(self) -> None: ...
        def stop(self) -> None: ...
        def focus_node(self, node: str | None) -> None: ...

    class FullRedraw(NodewatchApp):
        CSS_PATH = str(Path(sys.modules[NodewatchApp.__module__].__file__).parent / "app.tcss")  # type: ignore[arg-type]

        def _show(self, *args, **kwargs) -> None:
            super()._show(*args, **kwargs)
            self.refresh()  # repaint the whole screen, every tick

    threading.Thread(target=feed, daemon=True).start()
    app = (FullRedraw if mode == "full" else NodewatchApp)(Source())  # type: ignore[arg-type]
    app.run()
    stop.set()
    sys.exit(app.return_code or 0)


def _lease(i: int, t: float) -> dict:
    from .frame import lease_obj, node_name

    return lease_obj(node_name(i), t - 0.2)


# --- the parent: count what the app writes ----------------------------------------------------


def measure(mode: str, nodes: int, seconds: float, start_timeout: float = 300,
            argv: list[str] | None = None) -> tuple[float, float]:
    """(bytes per second over the window, bytes of the first screen). ``argv``: another child
    command (to measure a prototype the same way)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "TEXTUAL_ANIMATIONS": "none"}
    proc = subprocess.Popen(argv or [sys.executable, "-m", "bench.terminal", "child", mode, str(nodes)],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                            cwd=str(Path(__file__).resolve().parent.parent))
    os.close(slave)
    log: list[tuple[float, int]] = []
    lock = threading.Lock()

    def reader() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            with lock:
                log.append((time.perf_counter(), len(data)))

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        deadline = time.perf_counter() + start_timeout
        while True:
            with lock:
                if log:
                    first = log[0][0]
                    break
            if time.perf_counter() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the dashboard wrote nothing (exit {proc.poll()})")
            time.sleep(0.05)
        time.sleep(WARMUP)
        a = time.perf_counter()
        time.sleep(seconds)
        b = time.perf_counter()
        if proc.poll() is not None:
            raise RuntimeError(f"the dashboard exited early ({proc.returncode})")
        with lock:
            window = sum(n for t, n in log if a <= t < b)
            startup = sum(n for t, n in log if t < first + 1.0)
        return window / (b - a), startup
    finally:
        proc.kill()
        proc.wait(10)
        os.close(master)
        th.join(2)


def run(nodes: int = 65_000, seconds: float = 10) -> list[Figure]:
    print(f"  terminal: dashboard on a {COLS}x{ROWS} pty, {nodes:,} nodes, {seconds:g}s", file=sys.stderr, flush=True)
    rate, first = measure("app", nodes, seconds)
    print("  terminal: the same with a full-screen repaint every tick", file=sys.stderr, flush=True)
    ref, _ = measure("full", nodes, seconds)
    return [Figure(f"terminal: bytes/s at 1 refresh/s, {nodes:,} nodes, {COLS}x{ROWS}", f"{rate / 1e3:,.1f} KB/s",
                   f"<= {TARGET // 1000} KB/s", f"full-screen repaint {ref / 1e3:,.1f} KB/s", rate <= TARGET,
                   f"real Textual driver on a pty, truecolor; first screen {first / 1e3:,.1f} KB; "
                   f"counted over {seconds:g}s after a {WARMUP:g}s warm-up")]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        _child(sys.argv[2], int(sys.argv[3]))
    from .harness import print_table

    print_table(run(nodes=2_000, seconds=3))
