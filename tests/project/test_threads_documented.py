"""Every thread nodewatch starts under a name of its own is in docs/threading.md, which says who
starts it, what it owns and how it stops: a thread added without a row there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _thread_names() -> dict[str, str]:
    """Each literal name given to ``threading.Thread(name=...)`` or ``LoopThread(...)`` in the
    package, with a file that starts it (names built at run time, such as ``watch <what>``, are
    left to the doc's prose)."""
    names: dict[str, str] = {}
    for path in sorted((ROOT / "nodewatch").rglob("*.py")):
        text = path.read_text()
        for m in re.finditer(r"threading\.Thread\(|LoopThread\(", text):
            depth, call = 1, text[m.end():m.end() + 400]
            for i, ch in enumerate(call):
                depth += (ch == "(") - (ch == ")")
                if depth == 0:
                    call = call[:i]
                    break
            found = re.search(r'name="([^"{]+)"', call)
            if found is None and m.group().startswith("LoopThread"):
                found = re.match(r'\s*"([^"]+)"', call)
            if found is not None:
                names.setdefault(found.group(1), str(path.relative_to(ROOT)))
    return names


def test_every_named_thread_has_its_row_in_docs_threading():
    names = _thread_names()
    assert {"hub-ticker", "nodewatch-terminal-watch", "replay-index", "hub-loop"} <= set(names)  # (the scan finds them)
    doc = (ROOT / "docs" / "threading.md").read_text()
    missing = {n: where for n, where in names.items() if f"`{n}`" not in doc}
    assert not missing, f"threads without a row in docs/threading.md: {missing}"
