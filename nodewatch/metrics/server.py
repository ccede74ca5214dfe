"""``--metrics HOST:PORT``: the exposition, ``/healthz`` and ``/readyz`` on one port, in a thread of
their own.

- ``/metrics``: the Prometheus text format, or OpenMetrics when the scraper's ``Accept`` asks for
  it (``prometheus_client``'s ``choose_encoder``); gzip when accepted (a 65,000-node body is tens
  of MB of text, a few MB gzipped).
- ``/healthz``: 200 while the process serves (Kubernetes' liveness probe).
- ``/readyz``: 200 when every cluster was listed and its node and lease streams are up; 503 with
  the reason otherwise.

Why a thread with its own HTTP server: a scrape must never wait for a screen, nor a screen for a
scrape; the only thing shared is the state's lock, held while a sample copies the views
(``sample.py``). TLS is optional (``ssl_context``); no token: the metrics say which nodes are down,
nothing of the cluster's credentials.
"""

from __future__ import annotations

import gzip
import logging
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .collector import BlindMeter, FleetCollector, api_cost
from .sample import NODES_ALL, FleetSample, take_sample

log = logging.getLogger("nodewatch.metrics")


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9100``; port 0: any free port); ValueError with a one-line reason."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--metrics {text!r}: expected HOST:PORT, like 127.0.0.1:9910")
    return host, int(port)


class MetricsServer:
    """Serves one source's fleet. ``start()`` returns once the port accepts scrapes."""

    def __init__(self, source: Any, address: tuple[str, int], *, nodes: str = NODES_ALL,
                 ssl_context: ssl.SSLContext | None = None, cluster: str | None = None,
                 blind: BlindMeter | None = None) -> None:
        self.source = source
        self.nodes = nodes
        self.cluster = cluster
        self.blind = blind or BlindMeter()
        self.collector = FleetCollector(self.sample, api_cost=lambda: api_cost(source), blind=self.blind)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.ssl_context = ssl_context
        self._httpd = _Server(address, _handler(self))
        if ssl_context is not None:
            self._httpd.socket = ssl_context.wrap_socket(self._httpd.socket, server_side=True,
                                                           do_handshake_on_connect=False)  # in the handler thread
        self._thread: threading.Thread | None = None
        self.scrapes = 0

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    def sample(self, nodes: str | None = None) -> FleetSample:
        return take_sample(self.source, nodes=nodes or self.nodes, cluster=self.cluster)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="metrics-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept or "")
        self.scrapes += 1
        return encoder(self.registry), content_type


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type) -> None:
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics request from %s failed", client_address, exc_info=True)


def _handler(server: MetricsServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "nodewatch-metrics"

        def do_GET(self) -> None:  # http.server's name
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    body, ctype = server.exposition(self.headers.get("Accept"))
                    self._send(200, body, ctype, gzip_ok="gzip" in (self.headers.get("Accept-Encoding") or ""))
                elif path == "/healthz":
                    self._send(200, b"ok\n")
                elif path == "/readyz":
                    ok, why = server.sample("not-ready").ready()
                    self._send(200 if ok else 503, (why + "\n").encode())
                elif path == "/":
                    self._send(200, b"nodewatch: /metrics /healthz /readyz\n")
                else:
                    self._send(404, b"not found\n")
            except Exception as exc:  # one failed scrape is one 500, not a dead thread
                log.exception("metrics: %s failed", path)
                self._send(500, f"{type(exc).__name__}: {exc}\n".encode())

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8", gzip_ok: bool = False) -> None:
            if gzip_ok:
                body = gzip.compress(body, compresslevel=1)
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if gzip_ok:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # http.server's name
            pass  # scrapes every 15 s are not news

    return Handler


def start_metrics(source: Any, address: str, *, nodes: str = NODES_ALL, ssl_context: ssl.SSLContext | None = None,
                  announce: Callable[[str], None] | None = None) -> MetricsServer:
    """Parse ``HOST:PORT``, listen, serve; OSError/ValueError say why not."""
    srv = MetricsServer(source, parse_address(address), nodes=nodes, ssl_context=ssl_context)
    srv.start()
    if announce is not None:
        announce(f"metrics: {srv.url}/metrics  (/healthz, /readyz)")
    return srv
