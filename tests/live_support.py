"""Helpers shared by the tests of the live source and of the recording readers."""

from __future__ import annotations

from nodewatch.core.settings import Settings
from nodewatch.sources.live import LiveSource
from nodewatch.sources.recording import RecordingError
from nodewatch.sources.replay import ReplaySource


def start_live(srv, tmp_path, cache: str = "cache", wait: float = 15, **kw) -> LiveSource:
    """A live source on the simulated server's kubeconfig, started and synced."""
    kw.setdefault("cert_cache_dir", str(tmp_path / cache))
    src = LiveSource(Settings(), kubeconfig=str(srv.kubeconfig_path), **kw)
    src.start()
    assert src.wait_synced(wait)
    return src


def replay_through(path: str) -> None:
    """Open, seek to the end, evaluate and look ahead: what a fuzzed file must survive."""
    try:
        src = ReplaySource(path)
    except RecordingError:
        return
    src.seek(src.t_end)
    src.state.evaluate(src.t_end)
    src.next_change()
    src.stop()
