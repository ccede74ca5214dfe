"""Where a hub keeps its things: ``DIR/hub.sock``, ``DIR/recordings/``, ``DIR/tls/``, ``DIR/token``.

The directory is private (0700): the socket's permissions decide who may attach, and the token
and keys must not be readable by others.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DIR = "~/.local/state/nodewatch/hub"
SOCKET = "hub.sock"
RECORDINGS = "recordings"
LOCK = "hub.lock"


def default_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "nodewatch" / "hub"
    return Path(DEFAULT_DIR).expanduser()


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700; tighten an existing one that others could read."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write ``path`` readable by its owner only, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
