"""The simulated fleet (``fleet.SimFleet``) and the simulated API server that serves it.

Simulation modules: ``catalogue`` (what the fleet is made of), ``shapes`` (nodes, workloads, pods
and their JSON, rendered with ``objects``, the one builder of Kubernetes objects), ``world`` (the
simulated cluster every part is handed: objects, event heap, random stream, sinks), ``kubelet``,
the control plane (``node_lifecycle``, ``pod_controllers`` for taint eviction and workloads,
``events``, ``csrs``), ``operations`` (what scenarios and tests do to the fleet), ``scenarios``,
``pki``, and the API server (``server``, ``server_reads``, ``server_watch``, ``store``,
``faults``). ``fleet.SimFleet`` builds the parts and wires them; none of them imports it.
Nothing here may import textual or rich.
"""
