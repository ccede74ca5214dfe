"""X.509 NotAfter from the PEM a CSR's ``status.certificate`` carries (base64 in the API)."""

from __future__ import annotations

import base64
import binascii

from cryptography import x509


def certificate_not_after(value: object) -> float | None:
    """NotAfter (epoch seconds) of the first certificate in ``value``; None when unreadable.

    The API returns ``status.certificate`` base64-encoded; a recording or a test may hold the PEM
    itself. Both are accepted.
    """
    if not isinstance(value, (str, bytes)) or not value:
        return None
    data = value.encode() if isinstance(value, str) else value
    if b"-----BEGIN" not in data:
        try:
            data = base64.b64decode(data, validate=False)
        except (binascii.Error, ValueError):
            return None
    try:
        cert = x509.load_pem_x509_certificate(data)
    except (ValueError, TypeError):
        return None
    return cert.not_valid_after_utc.timestamp()
