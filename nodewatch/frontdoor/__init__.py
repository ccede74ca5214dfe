"""The front doors: the dashboard served to SSH clients (``ssh.py``) and to browsers (``web.py``).

Neither door runs a dashboard itself: each session spawns one viewer command (by default
``nodewatch attach DIR``) on its own terminal, so a viewer that crashes or hangs takes only its own
session with it, and the doors need nothing from the fleet state. ``viewer.py`` decides which
command a session gets; ``files.py`` keeps the keys and tokens they generate.

Entry points for the hub: ``ssh.start_ssh`` and ``web.start_web`` (imported from their modules,
so that a hub without front doors never loads asyncssh or aiohttp).
"""
