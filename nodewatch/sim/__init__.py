"""The simulated fleet (``fleet.SimFleet``) and the simulated API server that serves it.

Simulation modules: ``shapes`` (nodes, workloads, pods and their JSON), ``kubelet``, the control
plane (``node_lifecycle``, ``pod_controllers`` for taint eviction and workloads, ``events``,
``csrs``), ``scenarios``, ``pki``. Nothing here may import textual or rich.
"""
