"""The user's own keys: a TOML file of binding id = keys, handed to Textual's ``App.set_keymap``.

Every binding has an id (``?`` lists them), so a key can be moved without touching the code::

    # ~/.config/nodewatch/keys.toml  (or the file named by $NODEWATCH_KEYMAP)
    app.search = "ctrl+f"           # TOML dotted keys: the binding id app.search
    "table.choose" = "enter,o"      # several keys: comma-separated
    [replay]
    next_change = "N"

A file that cannot be read, or ids the dashboard does not have, are reported on screen, never fatal:
the dashboard must start even with a broken keymap.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

ENV = "NODEWATCH_KEYMAP"


def keymap_path(environ: dict[str, str] | None = None) -> Path:
    """``$NODEWATCH_KEYMAP``, else ``$XDG_CONFIG_HOME/nodewatch/keys.toml`` (``~/.config`` by default)."""
    env = os.environ if environ is None else environ
    if env.get(ENV):
        return Path(env[ENV]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nodewatch" / "keys.toml"


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def load_keymap(path: Path, known_ids: set[str]) -> tuple[dict[str, str], list[str]]:
    """The keymap in ``path`` (empty when there is no file), and what was wrong with it."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        return {}, []
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return {}, [f"keymap {path}: {exc}"]
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, keys in _flatten(raw).items():
        if binding_id not in known_ids:
            problems.append(f"keymap {path}: no binding with the id {binding_id!r} (see ? for the ids)")
        elif not isinstance(keys, str) or not keys.strip():
            problems.append(f"keymap {path}: {binding_id} must be a string of keys, such as \"ctrl+f\"")
        else:
            keymap[binding_id] = keys.strip()
    return keymap, problems
