"""The heartbeat core: no Textual, no Rich, no I/O beyond what a caller hands in."""
