"""Every ``pytest.approx`` in the tests says its tolerance.

Why: its default is relative (1e-6 of the expected value), and the tests' clock starts at
``T0 = 1.8e9``: ``approx(T0 + 300)`` accepted anything within 30 minutes of it. Found when a test of
a 100 s shift in an eviction time passed with the rule under test switched off (53 such calls).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _calls(text: str) -> list[tuple[int, str]]:
    """(line, arguments) of each ``pytest.approx(...)`` call in ``text``."""
    out = []
    i = 0
    while (j := text.find("pytest.approx(", i)) >= 0:
        k = m = j + len("pytest.approx(")
        depth = 1
        while depth and m < len(text):
            depth += {"(": 1, ")": -1}.get(text[m], 0)
            m += 1
        out.append((text.count("\n", 0, j) + 1, text[k:m - 1]))
        i = m
    return out


def test_every_approx_names_its_tolerance():
    loose = [f"{path.relative_to(TESTS)}:{line}" for path in sorted(TESTS.rglob("*.py")) if path != Path(__file__)
             for line, args in _calls(path.read_text(encoding="utf-8")) if "abs=" not in args and "rel=" not in args]
    assert loose == [], "pytest.approx without abs= or rel= (relative 1e-6 of a timestamp is half an hour): " + \
        ", ".join(loose)


def test_the_check_finds_a_loose_call():
    assert _calls("x == pytest.approx(T0 + f(1)) and y == pytest.approx(2, abs=1)") == [(1, "T0 + f(1)"), (1, "2, abs=1")]
