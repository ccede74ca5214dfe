"""Several live clusters as one Source: one ``LiveSource`` per cluster, each with its own streams,
settings and health, all feeding one ``MultiFleet`` (``core/multi.py``).

Clusters never wait for each other. Each is started on its own thread (reading a kubeconfig entry
may run an exec credential plugin, which may be slow), so a cluster whose kubeconfig entry cannot be
loaded, whose server refuses or whose credentials are rejected is a cluster with an error (a red
cell), not a dashboard that hangs: its ``LiveSource`` keeps retrying in the background (the
reflectors back off and reconnect), and an entry that could not be loaded at all is loaded again
every ``RETRY_MAX`` seconds at most.

With a ``recorder`` (set before ``start``), every cluster records into the one file, each line
saying its cluster (``recording.py``); a kubeconfig entry that cannot be loaded is recorded as its
cluster's health, so a replay shows that cluster red too.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..core.clock import Clock, SystemClock
from ..core.multi import ClusterState, Member, MultiFleet
from ..core.settings import Settings
from .kubeconfig import KubeconfigError
from .live import LiveSource
from .multi_config import ClusterSpec
from .recording import Recorder, settings_payload

RETRY_FIRST = 1.0
RETRY_MAX = 30.0
"""Seconds between attempts to load a kubeconfig entry that failed (doubling up to this)."""
STOP_JOIN_SECONDS = 10.0


class ClusterFeed:
    """One cluster of a ``MultiSource``: its state, and its ``LiveSource`` once one could be made."""

    def __init__(self, spec: ClusterSpec, settings: Settings) -> None:
        self.spec = spec
        self.name = spec.name
        self.settings = settings
        self.state = ClusterState(spec.name, settings)
        for res in ("nodes", "leases"):  # until its LiveSource says more: not seen yet, not blind
            self.state.update_health(res, connected=False, synced=False, down_since=None, last_error="connecting")
        self.live: LiveSource | None = None
        self.load_error: str | None = None
        """Why the kubeconfig entry could not be loaded (the last attempt), or None."""
        self.load_error_recorded: str | None = None
        self.thread: threading.Thread | None = None

    def error(self) -> str | None:
        """Why this cluster cannot be read at all right now, or None (see ``LiveSource.fatal``)."""
        live = self.live
        if live is None:
            return self.load_error
        return live.fatal()


class MultiSource:
    """See the module docstring. Implements ``core.source.Source``."""

    live_class: type[LiveSource] = LiveSource
    """What watches each cluster (the hub's subclass watches several drill-downs at once)."""

    def __init__(self, specs: list[ClusterSpec], settings: Settings, *, cert_cache_dir: str | None = None,
                 probe_kubelet_tls: bool = False, kubelet_metrics: bool = False, watch_timeout: float = 300.0,
                 stall_timeout: float | None = None, clock: Clock | None = None) -> None:
        if not specs:
            raise ValueError("no clusters to watch")
        self.feeds = [ClusterFeed(spec, spec.settings(settings)) for spec in specs]
        self.state = MultiFleet([Member(f.name, f.state, f.error, f.spec.context) for f in self.feeds])
        self.clock: Clock = clock or SystemClock()
        self.replay = None
        self.recorder: Recorder | None = None
        """Set before ``start`` to record every cluster into one file (the caller closes it after ``stop``)."""
        self.name = f"{len(self.feeds)} clusters: {', '.join(f.name for f in self.feeds)}"
        self._live_options: dict[str, Any] = dict(
            cert_cache_dir=cert_cache_dir, probe_kubelet_tls=probe_kubelet_tls, kubelet_metrics=kubelet_metrics,
            watch_timeout=watch_timeout, stall_timeout=stall_timeout)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._started = False
        self._focus: str | None = None

    def recording_source(self) -> dict[str, Any]:
        """What a recording's header says about where its events came from."""
        return {"kind": "multi", "name": self.name}

    def recording_clusters(self) -> list[dict[str, Any]]:
        """The header's ``clusters``: each cluster's name, context and settings (its server version
        follows in a settings line of its own once its API server has said it)."""
        return [{"name": f.name, "context": f.spec.context, "settings": settings_payload(f.settings)}
                for f in self.feeds]

    # --- Source ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every cluster on its own thread; returns at once."""
        with self._lock:
            if self._started or self._stop.is_set():
                return
            self._started = True
            for feed in self.feeds:
                feed.thread = threading.Thread(target=self._run, args=(feed,), name=f"multi-{feed.name}"[:40],
                                               daemon=True)
                feed.thread.start()

    def _run(self, feed: ClusterFeed) -> None:
        delay = RETRY_FIRST
        recorder = self.recorder.for_cluster(feed.name) if self.recorder is not None else None
        while not self._stop.is_set():
            try:
                live = self.live_class(feed.settings, kubeconfig=feed.spec.kubeconfig, context=feed.spec.context,
                                  clock=self.clock, state=feed.state, recorder=recorder,  # type: ignore[arg-type]
                                  **self._live_options)
            except KubeconfigError as exc:
                feed.load_error = str(exc)
                health = dict(connected=False, synced=False, last_error=str(exc)[:200])
                feed.state.update_health("nodes", **health)
                if recorder is not None and feed.load_error_recorded != feed.load_error:
                    feed.load_error_recorded = feed.load_error
                    recorder.write_health("nodes", self.clock.now(), **health)
                self._stop.wait(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            with self._lock:
                if self._stop.is_set():
                    live.stop()
                    return
                feed.live = live
                feed.load_error = None
            live.start()
            self._focus_feed(feed, live)
            return

    def _focus_feed(self, feed: ClusterFeed, live: LiveSource) -> None:
        """A cluster whose source starts late learns the drill-down asked for meanwhile."""
        focus = self._focus
        hit = self.state.split(focus) if focus else None
        if hit is not None and hit[0].name == feed.name:
            live.focus_node(hit[1])

    def stop(self) -> None:
        """Stop every cluster's source (in parallel: each joins its own threads); idempotent."""
        self._stop.set()
        with self._lock:
            lives = [f.live for f in self.feeds if f.live is not None]
            threads = [f.thread for f in self.feeds if f.thread is not None]
        stoppers = [threading.Thread(target=live.stop, daemon=True) for live in lives]
        for t in stoppers:
            t.start()
        deadline = time.monotonic() + STOP_JOIN_SECONDS
        for t in stoppers + threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def focus_node(self, node: str | None) -> None:
        """``node`` is a node key (``cluster/name``): that cluster watches its pods and events, the
        others none."""
        self._focus = node
        hit = self.state.split(node) if node else None
        for feed in self.feeds:
            live = feed.live
            if live is not None:
                live.focus_node(hit[1] if hit is not None and hit[0].name == feed.name else None)

    # --- for status and tests --------------------------------------------------------------------

    def threads_alive(self) -> int:
        runners = sum(1 for f in self.feeds if f.thread is not None and f.thread.is_alive())
        return runners + sum(f.live.threads_alive() for f in self.feeds if f.live is not None)

    def settled(self, node: str | None = None) -> dict[str, bool | None]:
        """Per cluster: True once it has listed what an answer needs, False when it has an error
        that waiting cannot mend (before it listed), None while it is still to be waited for."""
        out: dict[str, bool | None] = {}
        for feed in self.feeds:
            live = feed.live
            if live is None:
                out[feed.name] = None
            elif not live.not_listed(node):
                out[feed.name] = True
            else:
                out[feed.name] = False if live.fatal() is not None else None
        return out

    def wait_settled(self, timeout: float, node: str | None = None) -> dict[str, bool]:
        """Wait (real seconds, at most ``timeout`` in all) until every cluster has listed what an
        answer needs or has an error that waiting cannot mend; returns, per cluster, whether it
        listed everything. Clusters are waited for together, not one after another."""
        deadline = time.monotonic() + timeout
        done: dict[str, bool] = {}
        while True:
            for name, ok in self.settled(node).items():
                if name not in done and ok is not None:
                    done[name] = ok
            if len(done) == len(self.feeds) or time.monotonic() >= deadline or self._stop.is_set():
                break
            time.sleep(0.02)
        return {f.name: done.get(f.name, False) for f in self.feeds}
