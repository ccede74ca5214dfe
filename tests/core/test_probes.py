"""The opt-in certificate probes: a TLS handshake reads a kubelet's serving certificate, and
kubelet /metrics gives the client certificate's TTL. Real sockets, real certificates."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nodewatch.sources.probes import _TTL, kubelet_serving_not_after, node_address

NOT_AFTER = 1_900_000_000


@pytest.fixture
def kubelet_tls(tmp_path):
    """A TLS listener on 127.0.0.1 presenting a self-signed kubelet serving certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node-1@1700000000")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
            .not_valid_after(dt.datetime.fromtimestamp(NOT_AFTER, dt.timezone.utc)).sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "kubelet.crt", tmp_path / "kubelet.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (OSError, ssl.SSLError):
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield listener.getsockname()[1]
    stop.set()
    listener.close()


def test_tls_probe_reads_the_serving_certificate(kubelet_tls):
    assert kubelet_serving_not_after("127.0.0.1", kubelet_tls) == pytest.approx(NOT_AFTER, abs=1e-6)


def test_tls_probe_of_a_closed_port_is_unknown():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert kubelet_serving_not_after("127.0.0.1", port, timeout=1.0) is None


def test_node_address_prefers_the_internal_ip():
    class N:
        addresses = (("Hostname", "n1"), ("InternalIP", "10.0.0.7"))

    assert node_address(N()) == "10.0.0.7"


def test_metrics_ttl_line_is_found():
    body = (b"# HELP kubelet_certificate_manager_client_ttl_seconds ...\n"
            b"# TYPE kubelet_certificate_manager_client_ttl_seconds gauge\n"
            b"kubelet_certificate_manager_client_ttl_seconds 2.5916e+07\n"
            b"kubelet_certificate_manager_server_ttl_seconds 100\n")
    assert float(_TTL.search(body).group(1)) == pytest.approx(2.5916e7, abs=1e-6)
