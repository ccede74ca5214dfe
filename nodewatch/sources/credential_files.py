"""Where the kubeconfig's inline credentials go on disk while nodewatch runs, and that they go away.

Why: TLS in Python reads a CA, a client certificate and its key from files, so the official
client writes a kubeconfig's ``certificate-authority-data``, ``client-certificate-data`` and
``client-key-data`` to temporary files and removes them at exit (``atexit``). A process that does
not exit normally (a terminal closed under a dashboard: SIGHUP; ``kill``; the OOM killer) leaves
them in ``/tmp``: a copy of the user's client key for every such run (found as hundreds of files
in ``/tmp`` on the test machine).

So each process keeps them in a directory of its own (``directory``: mode 0700, named by its PID,
in ``$XDG_RUNTIME_DIR`` when there is one, a per-user tmpfs, else the temporary directory),
removed at exit, and the next nodewatch to start removes those of processes that are gone. The
list worker's child reads the same files while its parent lives (``list_worker``).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading

PREFIX = "nodewatch-credentials-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")

_lock = threading.Lock()
_dir: str | None = None


def base() -> str:
    """The directory the per-process directories are made in."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        return runtime
    return tempfile.gettempdir()


def directory() -> str:
    """This process's directory for credential files (made on first use, removed at exit)."""
    global _dir
    with _lock:
        if _dir is None or not os.path.isdir(_dir):
            where = base()
            sweep(where)
            _dir = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=where)
            atexit.register(_remove, _dir, os.getpid())
        return _dir


def sweep(where: str) -> list[str]:
    """Remove the credential directories in ``where`` of processes that no longer run (only ours:
    same owner); the names removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return removed
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None or not _is_own_dir(entry) or _alive(int(m.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.name)
    return removed


def _is_own_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process, alive
        return True
    return True


def _remove(path: str, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that exits: the parent still reads them
        shutil.rmtree(path, ignore_errors=True)
