"""The secrets a front door keeps in its directory: the SSH host key and the web token.

Both are made on first start and reused after, so clients' known_hosts entries and the office
TV's bookmarked URL survive a restart. Both are written owner-only (0600) and created with
O_EXCL, so two doors starting at once cannot both write one and a secret is never world-readable,
even for a moment."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_private(path: Path, data: bytes) -> bool:
    """Create ``path`` (mode 0600) with ``data``; False if it already exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


def replace_private(path: Path, data: bytes) -> None:
    """Write ``path`` (mode 0600) with ``data``, replacing it atomically (``DIR/web-url``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    write_private(tmp, data)
    os.replace(tmp, path)


def host_key(path: Path):
    """The SSH host key at ``path``, generated (Ed25519) when there is none yet."""
    from .ssh_library import asyncssh

    if not path.exists():
        key = asyncssh.generate_private_key("ssh-ed25519", comment="nodewatch front door")
        write_private(path, key.export_private_key())
    return asyncssh.read_private_key(path)


def web_token(path: Path) -> str:
    """The web token kept at ``path``, generated when there is none yet."""
    write_private(path, (f"nwweb-{secrets.token_urlsafe(24)}\n").encode())
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"{path}: empty token file")
    return token
