"""The ``--metrics`` and ``--alertmanager`` options of ``hub``, ``watch`` and ``demo``, and the
services they start beside the source (``MetricsServices``: started after the source, stopped
before it)."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path
from typing import Any

from ..metrics.sample import NODE_MODES, NODES_ALL


def add_metrics_arguments(parser: argparse.ArgumentParser, *, hub: bool = False) -> None:
    g = parser.add_argument_group("metrics and alerts")
    g.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics (and /healthz, /readyz)")
    g.add_argument("--metrics-nodes", choices=NODE_MODES, default=NODES_ALL,
                   help="per-node series for every node (all, ~10 a node), or only for the nodes not Ready "
                        "(not-ready; the aggregates are always there)")
    g.add_argument("--metrics-tls-cert", metavar="PEM", help="serve the metrics over TLS with this certificate chain")
    g.add_argument("--metrics-tls-key", metavar="PEM", help="and this key")
    if hub:
        g.add_argument("--metrics-tls", action="store_true",
                       help="serve the metrics over TLS with the hub's own certificate (DIR/tls, as --listen)")
    g.add_argument("--alertmanager", metavar="URL",
                   help="push nodewatch's alerts to this Alertmanager (v2 API) without a Prometheus")


def _tls(args: argparse.Namespace, directory: Path | None, host: str, port: int) -> ssl.SSLContext | None:
    from .common import CommandError

    cert, key = getattr(args, "metrics_tls_cert", None), getattr(args, "metrics_tls_key", None)
    if bool(cert) != bool(key):
        raise CommandError("--metrics-tls-cert and --metrics-tls-key go together")
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise CommandError(f"--metrics-tls-cert {cert}: {getattr(exc, 'strerror', None) or exc}") from None
        return ctx
    if getattr(args, "metrics_tls", False) and directory is not None:
        from ..hub.tls import load_or_create

        listen = getattr(args, "listen", None)
        if listen and listen.rpartition(":")[0].strip("[]") != host:
            raise CommandError("--metrics-tls reuses the --listen certificate: give --metrics the same host")
        ctx, _token = load_or_create(directory, host, port)
        return ctx
    return None


class MetricsServices:
    """What ``--metrics`` and ``--alertmanager`` start for one source; ``stop()`` is idempotent."""

    def __init__(self, source: Any, args: argparse.Namespace, directory: Path | None = None) -> None:
        self.source = source
        self.args = args
        self.directory = directory
        self.server: Any = None
        self.pusher: Any = None
        self.lines: list[str] = []

    @property
    def wanted(self) -> bool:
        return bool(getattr(self.args, "metrics", None) or getattr(self.args, "alertmanager", None))

    def start(self) -> "MetricsServices":
        from ..metrics.sample import take_sample
        from ..metrics.server import MetricsServer, parse_address
        from .common import CommandError

        args = self.args
        nodes = getattr(args, "metrics_nodes", NODES_ALL)
        try:
            if getattr(args, "metrics", None):
                host, port = parse_address(args.metrics)
                self.server = MetricsServer(self.source, (host, port), nodes=nodes,
                                            ssl_context=_tls(args, self.directory, host, port))
                self.server.start()
                self.lines.append(f"  metrics: {self.server.url}/metrics  (/healthz, /readyz)")
            if getattr(args, "alertmanager", None):
                from ..metrics.alertmanager import AlertPusher

                # alerts need the nodes not Ready (and the certificates near expiry) only
                self.pusher = AlertPusher(args.alertmanager, lambda: take_sample(self.source, nodes="not-ready"),
                                          generator_url=f"{self.server.url}/metrics" if self.server else "")
                self.pusher.start()
                if self.server is not None:
                    self.server.collector.pusher = self.pusher
                self.lines.append(f"  alerts: pushed to {args.alertmanager}")
        except OSError as exc:
            self.stop()
            raise CommandError(f"--metrics {args.metrics}: cannot listen: {exc.strerror or exc}") from None
        except ValueError as exc:
            self.stop()
            raise CommandError(str(exc)) from None
        return self

    def stop(self) -> None:
        pusher, self.pusher = self.pusher, None
        if pusher is not None:
            pusher.stop()
        server, self.server = self.server, None
        if server is not None:
            server.stop()
