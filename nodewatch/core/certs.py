"""X.509 NotAfter and subject from the PEM a CSR's ``status.certificate`` carries (base64 in the API)."""

from __future__ import annotations

import base64
import binascii

from cryptography import x509


def certificate_not_after(value: object) -> float | None:
    """NotAfter (epoch seconds) of the first certificate in ``value``; None when unreadable.

    The API returns ``status.certificate`` base64-encoded; a recording or a test may hold the PEM
    itself. Both are accepted.
    """
    facts = certificate_facts(value)
    return facts[0] if facts is not None else None


def certificate_facts(value: object) -> tuple[float, str | None] | None:
    """(NotAfter in epoch seconds, the subject's common name or None) of the first certificate in
    ``value`` (as ``certificate_not_after`` reads it); None when unreadable."""
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
        names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    except (ValueError, TypeError):
        return None
    cn = names[0].value if names else None
    return cert.not_valid_after_utc.timestamp(), cn if isinstance(cn, str) else None
