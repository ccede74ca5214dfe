"""The simulated cluster's PKI: a CA, kubelet client certificates and CSRs (real X.509).

Everything is EC P-256 with RFC 6979 deterministic signatures, and keys can be derived from a seed,
so a fleet built twice with the same seed issues byte-identical certificates. RSA is avoided on
purpose: generating RSA keys takes tens of milliseconds each, and a 65,000-node fleet must not spend
minutes on key generation. Kubelets draw their keys from a small derived pool (``node_key``).

The simulated API server's identity (``kubeconfig``) uses the same ``make_ca`` / ``issue_cert`` /
``CA.from_pem`` for its HTTPS serving certificate: one CA builder for the whole simulator.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_POOL_SIZE = 16
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(int(t), tz=timezone.utc)


def derive_key(*parts: object) -> ec.EllipticCurvePrivateKey:
    """A P-256 private key derived from ``parts`` (deterministic; a fresh random key when empty)."""
    if not parts:
        return ec.generate_private_key(ec.SECP256R1())
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    value = int.from_bytes(digest, "big") % (_P256_ORDER - 1) + 1
    return ec.derive_private_key(value, ec.SECP256R1())


@lru_cache(maxsize=4 * KEY_POOL_SIZE)
def pooled_key(seed: int, slot: int) -> ec.EllipticCurvePrivateKey:
    return derive_key("nodewatch-sim-kubelet", seed, slot)


def node_key(seed: int, node_name: str) -> ec.EllipticCurvePrivateKey:
    """The kubelet key of a node: one of ``KEY_POOL_SIZE`` keys derived from the seed (cheap)."""
    slot = int.from_bytes(hashlib.sha1(node_name.encode()).digest()[:4], "big") % KEY_POOL_SIZE
    return pooled_key(seed, slot)


@dataclass(frozen=True)
class CA:
    """A certificate authority: its key and self-signed certificate."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)

    @classmethod
    def from_pem(cls, cert_pem: bytes | str, key_pem: bytes | str) -> "CA":
        """Reload a CA written earlier (a restarted sim server stays the same cluster)."""
        cb = cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
        kb = key_pem.encode() if isinstance(key_pem, str) else key_pem
        key = serialization.load_pem_private_key(kb, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is not an EC key")
        return cls(key=key, cert=x509.load_pem_x509_certificate(cb))


def make_ca(common_name: str = "kubernetes", *, now: float | None = None, years: float = 10.0,
            seed: int | None = None) -> CA:
    """A self-signed CA valid from a year before ``now`` for ``years``.

    With ``seed`` the key (and, thanks to deterministic ECDSA, the certificate) is reproducible.
    ``now`` defaults to the wall clock.
    """
    import time

    t = time.time() if now is None else now
    key = derive_key("nodewatch-sim-ca", common_name, seed) if seed is not None else derive_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    serial = _serial("ca", common_name, seed, int(t)) if seed is not None else x509.random_serial_number()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(_dt(t - 365 * 86400))
        .not_valid_after(_dt(t + years * 365 * 86400))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256(), ecdsa_deterministic=True)
    )
    return CA(key=key, cert=cert)


def _serial(*parts: object) -> int:
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:16], "big") >> 1 or 1


def issue_cert(ca: CA, public_key: ec.EllipticCurvePublicKey, common_name: str, *,
               organizations: tuple[str, ...] = (), not_before: float, not_after: float,
               client: bool = True, server: bool = False, dns_names: tuple[str, ...] = (),
               ip_addresses: tuple[str, ...] = ()) -> x509.Certificate:
    """Sign a leaf certificate (client and/or server usage) with the CA. Deterministic."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usages = []
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca.cert.subject)
        .public_key(public_key)
        .serial_number(_serial(common_name, int(not_before), int(not_after)))
        .not_valid_before(_dt(not_before))
        .not_valid_after(_dt(not_after))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca.key, hashes.SHA256(), ecdsa_deterministic=True)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8 PEM, unencrypted (the sim's keys protect nothing real)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_csr_pem(key: ec.EllipticCurvePrivateKey, common_name: str, organizations: tuple[str, ...] = ()) -> bytes:
    """A PKCS#10 request as the kubelet's certificate manager sends it (PEM)."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs)).sign(
        key, hashes.SHA256(), ecdsa_deterministic=True)
    return csr.public_bytes(serialization.Encoding.PEM)


def b64(data: bytes) -> str:
    """The API's encoding of ``spec.request`` and ``status.certificate``."""
    return base64.b64encode(data).decode("ascii")
