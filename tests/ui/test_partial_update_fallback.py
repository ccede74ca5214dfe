"""ui/partial_update.py replaces a private Textual method (pinned in pyproject.toml to the Textual
the tests prove it on); a Textual without it must leave the process on Textual's own method."""

from __future__ import annotations

import importlib

import textual._compositor as compositor

from nodewatch.ui import partial_update


def test_a_textual_that_moved_the_private_class_keeps_its_own_way(monkeypatch):
    partial_update.uninstall()  # so that the reloads below find Textual's own method on the class
    textuals_own = partial_update._ORIGINAL
    chops_update = compositor.ChopsUpdate
    monkeypatch.delattr(compositor, "ChopsUpdate")
    try:
        importlib.reload(partial_update)
        assert partial_update.ChopsUpdate is None and partial_update._ORIGINAL is None
        partial_update.uninstall()
        vars(chops_update)["render_segments"]  # still there: nothing was put back or taken away
        partial_update.install()  # a no-op, not an error at start-up
    finally:
        monkeypatch.undo()
        importlib.reload(partial_update)
    assert partial_update._ORIGINAL is textuals_own
    partial_update.install()
    assert compositor.ChopsUpdate.render_segments is partial_update.render_segments


def test_the_pinned_textual_has_what_the_replacement_reads():
    """The replacement reads ``chops``, ``chop_ends`` and ``spans`` of Textual 8.2's ChopsUpdate."""
    update = compositor.ChopsUpdate([{}], [(0, 0, 0)], [[]])
    assert (update.chops, update.spans, update.chop_ends) == ([{}], [(0, 0, 0)], [[]])
