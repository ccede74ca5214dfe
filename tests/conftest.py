"""Shared test setup: UTC everywhere, helpers importable, and the fixtures of the sources' tests.

Waiting: ``simserver.wait_until(cond, timeout)`` is the one polling helper. It waits for I/O or
another thread, never for a timer: timers are driven by an injected clock.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

os.environ["TZ"] = "UTC"
if hasattr(time, "tzset"):
    time.tzset()

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def start_live(tmp_path) -> Iterator[Callable[..., Any]]:
    """``start_live(srv_or_kubeconfig, cache="cache", synced=15, **kw)``: a LiveSource started on the
    simulated server's kubeconfig (or the kubeconfig file given), waited for until listed unless
    ``synced`` is None, and stopped after the test (stopping it earlier is fine too)."""
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource

    started: list[LiveSource] = []

    def start(target: Any, cache: str = "cache", synced: float | None = 15, **kw: Any) -> LiveSource:
        kubeconfig = getattr(target, "kubeconfig_path", target)
        kw.setdefault("cert_cache_dir", str(tmp_path / cache))
        src = LiveSource(Settings(), kubeconfig=str(kubeconfig), **kw)
        started.append(src)
        src.start()
        if synced is not None:
            assert src.wait_synced(synced)
        return src

    yield start
    for src in started:
        src.stop()


@pytest.fixture
def open_replay() -> Iterator[Callable[..., Any]]:
    """``open_replay(path, **kw)``: a ReplaySource, stopped after the test."""
    from nodewatch.sources.replay import ReplaySource

    opened: list[ReplaySource] = []

    def open_(path: Any, **kw: Any) -> ReplaySource:
        src = ReplaySource(str(path), **kw)
        opened.append(src)
        return src

    yield open_
    for src in opened:
        src.stop()


@pytest.fixture
def replay_through() -> Callable[[str], None]:
    """``replay_through(path)``: open, seek to the end, evaluate and look ahead, what any file (a
    fuzzed one) must survive; a RecordingError (not a recording at all) is a fine answer."""
    from nodewatch.sources.recording import RecordingError
    from nodewatch.sources.replay import ReplaySource

    def run(path: str) -> None:
        try:
            src = ReplaySource(path)
        except RecordingError:
            return
        try:
            src.replay.seek(src.replay.end)
            src.state.evaluate(src.replay.end)
            src.replay.next_change()
        finally:
            src.stop()

    return run
