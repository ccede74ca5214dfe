"""``nodewatch hub``: one source and one FleetState serving many viewers, with a flight recorder.

``server`` (the hub), ``publisher`` (snapshots and deltas of evaluated views), ``protocol``
(frames), ``codec`` (views as JSON values), ``viewer_state`` and ``viewer_source`` (``attach``),
``viewer_history`` (a viewer's replay of the hub's recordings),
``segments`` (the rotating recorder and the reader across its segments), ``live`` (several
drill-downs at once), ``multi`` (several clusters, each with its own drill-downs), ``tls`` (TCP with TLS and a token), ``paths`` (the hub's directory).
"""
