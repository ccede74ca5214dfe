"""Where a hub listens, as a viewer names it (``nodewatch attach DIR``, ``https://HOST:PORT``).

Its own module so that the viewer's history (``viewer_history.py``) and its connection
(``viewer_source.py``) both use it without importing each other."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .paths import SOCKET as SOCKET_NAME


@dataclass(frozen=True)
class HubAddress:
    """Where a hub listens: a Unix socket path, or TCP with TLS."""

    path: str | None = None
    host: str | None = None
    port: int | None = None

    @property
    def display(self) -> str:
        return f"hub {self.path}" if self.path else f"hub https://{self.host}:{self.port}"


def parse_address(text: str) -> HubAddress:
    """``DIR`` (its ``hub.sock``), a socket path, ``unix:PATH``, ``https://HOST:PORT`` or ``HOST:PORT``.
    Raises ValueError with a message for the user."""
    if text.startswith("unix:"):
        return HubAddress(path=text[5:])
    if text.startswith("https://") or (":" in text and not text.startswith(("/", ".", "~"))):
        rest = text.removeprefix("https://").rstrip("/")
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            raise ValueError(f"{text!r}: expected https://HOST:PORT")
        return HubAddress(host=host, port=int(port))
    path = os.path.expanduser(text)
    if os.path.isdir(path):
        path = os.path.join(path, SOCKET_NAME)
    return HubAddress(path=path)


__all__ = ["SOCKET_NAME", "HubAddress", "parse_address"]
