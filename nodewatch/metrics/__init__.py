"""Prometheus metrics and Alertmanager alerts from the fleet state (``--metrics``, ``--alertmanager``)."""
