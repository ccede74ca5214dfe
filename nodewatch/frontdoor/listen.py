"""``HOST:PORT`` as the front doors' ``--ssh`` and ``--web`` options spell it."""

from __future__ import annotations


def parse_listen(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"127.0.0.1:2222"``, ``"[::1]:2222"``, ``":2222"`` or ``"2222"`` -> (host, port).

    Port 0 asks the system for a free port (tests). A bare port listens on loopback only: a front
    door open to the network is something to ask for by name, never a default."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or default_host
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r}: expected HOST:PORT") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{text!r}: port out of range")
    return host, number


def url_host(host: str) -> str:
    """The host as it goes into a URL (IPv6 addresses in brackets)."""
    return f"[{host}]" if ":" in host else host
