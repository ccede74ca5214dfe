"""Sources feed the core's FleetState: a live cluster, a recording being replayed, the demo fleet.

They are interchangeable: the dashboard receives a ``Source`` and never asks which kind it is.
"""
