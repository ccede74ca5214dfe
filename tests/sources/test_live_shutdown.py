"""Stopping the live source is safe at any moment: before it starts, while it starts (from another
thread), while its threads start watches, and twice. Real HTTPS to the simulated API server.

Found against a real kube-apiserver: on a loaded machine ``nodewatch status`` once exited with
"cannot join thread before it is started", because ``stop()`` joined a watch thread that the
housekeeping thread had created but not started yet.
"""

from __future__ import annotations

import os
import threading
import time

from nodewatch.core.settings import Settings
from nodewatch.sources.kubeconfig import Connection
from nodewatch.sources.live import LiveSource
from nodewatch.sources.reflector import NODES, Reflector
from support.simserver import TinyFleet, running_server, wait_until


def new_live(srv, tmp_path) -> LiveSource:
    return LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), cert_cache_dir=str(tmp_path / "cache"))


def test_stop_before_start_starts_nothing(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as srv:
        src = new_live(srv, tmp_path)
        src.stop()
        src.start()
        src.stop()
        assert src.threads_alive() == 0
        assert not srv.request_log


def test_stop_twice_after_a_run(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as srv:
        src = new_live(srv, tmp_path)
        src.start()
        src.focus_node("node-001")
        assert src.wait_synced(15, "node-001")
        src.stop()
        src.stop()
        assert src.threads_alive() == 0


def test_stop_from_another_thread_while_start_is_reading_the_cert_cache(tmp_path):
    """Deterministic: the cert cache file is a FIFO, so ``start()`` blocks reading it until the test,
    having called ``stop()`` from a third thread meanwhile, writes the cache's content."""
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as srv:
        src = new_live(srv, tmp_path)
        os.makedirs(src.cert_cache.dir)
        os.mkfifo(src.cert_cache.path)
        errors: list[BaseException] = []

        def call(fn):
            def run() -> None:
                try:
                    fn()
                except BaseException as exc:  # noqa: BLE001 - reported by the test
                    errors.append(exc)
            return threading.Thread(target=run)

        starting = call(src.start)
        starting.start()
        # opening the writing end succeeds only once start() has the reading end open
        fd = wait_until(lambda: _open_writer(src.cert_cache.path), timeout=10)
        stopping = call(src.stop)
        stopping.start()
        wait_until(lambda: src.stopping)
        os.write(fd, b'{"nodes": {}}')
        os.close(fd)  # start() reads to the end, sees the stop, and starts nothing
        starting.join(10)
        stopping.join(10)
        assert errors == []
        assert not starting.is_alive() and not stopping.is_alive()
        assert src.threads_alive() == 0
        assert not srv.request_log  # not a single watch was started after the stop


def _open_writer(path: str) -> int | None:
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: nobody reads it yet
        return None


def test_a_watch_stopped_while_its_thread_starts(tmp_path):
    """Many iterations of ``start()`` in one thread racing ``stop()`` in another: the stop must never
    fail, and the watch must end either way."""
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as srv:
        conn = Connection(str(srv.kubeconfig_path))
        ignore = lambda *a, **k: None  # noqa: E731
        try:
            for _ in range(300):
                r = Reflector(conn, NODES, ignore, ignore, ignore)
                t = threading.Thread(target=r.start)
                t.start()
                r.stop()
                t.join(5)
                r.stop()  # a second stop finds the thread (if the start came after the first)
                wait_until(lambda: not r.alive, timeout=10)
        finally:
            conn.close()


def test_live_source_stopped_at_random_moments_of_a_run(tmp_path):
    """start, focus (the housekeeping adds watches) and stop from another thread, at varying moments."""
    with running_server(tmp_path, fleet=TinyFleet(nodes=3, start=time.time())) as srv:
        errors: list[BaseException] = []
        for i in range(20):
            src = new_live(srv, tmp_path)
            stopper = threading.Timer(0.005 * i, lambda s=src: _guarded(s.stop, errors))
            stopper.start()
            src.start()
            src.focus_node("node-001")
            stopper.join(10)
            src.stop()
            assert src.threads_alive() == 0
        assert errors == []


def _guarded(fn, errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
