"""The simulated fleet (``fleet.SimFleet``) and the simulated API server that serves it.

Simulation modules: ``catalogue`` (what the fleet is made of), ``shapes`` (nodes, workloads, pods
and their JSON, rendered with ``objects``, the one builder of Kubernetes objects), ``kubelet``,
the control plane (``node_lifecycle``, ``pod_controllers`` for taint eviction and workloads,
``events``, ``csrs``), ``scenarios``, ``pki``, and the API server (``server``, ``server_reads``,
``server_watch``, ``store``, ``faults``). Nothing here may import textual or rich.
"""
