"""asyncssh, imported once without its warnings about DSA.

asyncssh still supports DSA keys, and cryptography marks DSA deprecated: importing asyncssh printed
ten lines of ``CryptographyDeprecationWarning`` on the hub's console (and in every test run) before
the hub said a word. nodewatch neither makes nor accepts DSA keys (its host key is Ed25519; an
authorized DSA key is refused by OpenSSH's own clients since 7.0), so those lines tell its user
nothing. Only that warning, only during the import: any other still shows.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"DSA is deprecated")
    import asyncssh

__all__ = ["asyncssh"]
