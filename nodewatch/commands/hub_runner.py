"""A hub assembled from the command line: its source, its flight recorder, its listeners, and
its front doors (SSH and web, on an event loop of their own: ``frontdoor.background``).

The doors start after the hub's socket accepts viewers (each session runs ``nodewatch attach
DIR``, which connects to it) and close before the hub stops, so every session's viewer is ended
by its door (SIGHUP, or Textual's quit for a page) rather than left showing a vanished hub."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.settings import Settings
from ..hub import paths
from ..hub.flight_recorder import SegmentedRecorder
from ..hub.multi import HubMultiSource
from ..hub.server import Hub


class HubRunner:
    """What ``nodewatch hub`` runs; tests build one with ``args`` of their own."""

    def __init__(self, args: argparse.Namespace, directory: Path, settings: Settings) -> None:
        from .common import CommandError

        self.directory = directory
        self.args = args
        self.doors: list[Any] = []
        self.door_lines: list[str] = []
        self._door_thread: Any = None
        self.metrics: Any = None
        self.source = _source(args, settings)
        self.recorder: SegmentedRecorder | None = None
        if not getattr(args, "no_record", False):
            info = self.source.recording_source() if hasattr(self.source, "recording_source") else {
                "kind": "demo", "name": self.source.name}
            several = isinstance(self.source, HubMultiSource)
            self.recorder = SegmentedRecorder(
                directory / paths.RECORDINGS, {**info, "hub": True},
                settings if several else self.source.state.settings,
                segment_seconds=args.segment, keep_seconds=args.keep, keep_bytes=args.keep_bytes,
                clock=self.source.clock,
                records=None if several else self.source.state.node_records,
                clusters=self.source.recording_clusters() if several else None,
                cluster_records=self.source.cluster_records if several else None,
                record_format=getattr(args, "record_format", None) or "columnar")
            self.source.recorder = self.recorder
        tcp = ssl_context = token = None
        self.viewer_config: Path | None = None
        if getattr(args, "listen", None):
            from ..hub.tls import load_or_create

            host, _, port = args.listen.rpartition(":")
            host = host.strip("[]")
            if not host or not port.isdigit():
                raise CommandError(f"--listen {args.listen!r}: expected HOST:PORT")
            tcp = (host, int(port))
            ssl_context, token = load_or_create(directory, host, int(port))
        self.hub = Hub(self.source, str(directory / paths.SOCKET), tcp=tcp, ssl_context=ssl_context, token=token,
                       tick_seconds=getattr(args, "tick_seconds", 1.0))

    def start(self) -> None:
        try:
            self.hub.start()
        except OSError as exc:
            from .common import CommandError

            self.stop()
            raise CommandError(f"cannot listen: {exc.strerror or exc}") from None
        if self.hub.tcp is not None:
            from ..hub.tls import write_viewer_config

            self.viewer_config = write_viewer_config(self.directory, self.hub.tcp[0], self.hub.tcp_port or 0)
        if getattr(self.args, "ssh", None) or getattr(self.args, "web", None):
            self._open_doors()
        self._start_metrics()

    def _start_metrics(self) -> None:
        """``--metrics`` / ``--alertmanager``: their own threads, reading the hub's source."""
        from .metrics_options import MetricsServices

        services = MetricsServices(self.source, self.args, self.directory)
        if services.wanted:
            try:
                services.start()
            except Exception:
                self.stop()
                raise
            self.metrics = services

    def _open_doors(self) -> None:
        from ..frontdoor.background import DoorThread
        from ..frontdoor.doors import open_doors
        from ..frontdoor.viewer import default_viewer_command
        from .common import CommandError

        self._door_thread = DoorThread()
        try:
            self.doors = self._door_thread.run(open_doors(
                self.directory, self.args, default_viewer_command(str(self.directory)),
                announce=lambda line: self.door_lines.append("  " + line.removeprefix("nodewatch: "))))
        except (OSError, ValueError) as exc:
            self.stop()
            raise CommandError(f"front door: {getattr(exc, 'strerror', None) or exc}") from None

    def stop(self) -> None:
        """Close the doors (ending their sessions' viewers), then the hub; idempotent."""
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            metrics.stop()
        thread, self._door_thread = self._door_thread, None
        if thread is not None:
            doors, self.doors = self.doors, []
            thread.close(*doors)
        self.hub.stop()
        if self.recorder is not None:
            self.recorder.close()

    def banner(self) -> list[str]:
        out = [f"nodewatch hub: {self.source.name}", f"  viewers: nodewatch attach {self.directory}"]
        if self.viewer_config is not None:
            out.append(f"  over TCP: nodewatch attach {self.viewer_config}  (TLS; token in "
                       f"{self.directory / 'token'})")
        if self.recorder is not None:
            out.append(f"  recording: {self.recorder.directory}")
        return out + self.door_lines + (self.metrics.lines if self.metrics is not None else [])


def _source(args: argparse.Namespace, settings: Settings) -> Any:
    """The demo, one live cluster, or several (``--context`` repeated, ``--all-contexts``,
    ``--fleet``: parsed as the dashboard parses them, ``commands.common.cluster_specs_from_args``)."""
    from .common import CommandError, cluster_specs_from_args

    specs = cluster_specs_from_args(args)
    if getattr(args, "demo", False):
        from ..sources.demo import DemoSource

        if specs is not None:
            raise CommandError("--demo serves the simulated fleet: not with several clusters")
        return DemoSource(settings=settings, nodes=args.nodes, scenario=args.scenario, seed=args.seed,
                          speed=args.speed)
    if specs is not None:
        return HubMultiSource(specs, settings, cert_cache_dir=args.cert_cache_dir,
                              probe_kubelet_tls=args.probe_kubelet_tls, kubelet_metrics=args.kubelet_metrics)
    from ..hub.live import HubLiveSource
    from ..sources.live import KubeconfigError

    try:
        return HubLiveSource(settings, kubeconfig=args.kubeconfig, context=args.context,
                             cert_cache_dir=args.cert_cache_dir, probe_kubelet_tls=args.probe_kubelet_tls,
                             kubelet_metrics=args.kubelet_metrics)
    except KubeconfigError as exc:
        raise CommandError(str(exc)) from None
