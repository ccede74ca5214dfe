"""The simulated fleet (``fleet.SimFleet``) and the simulated API server that serves it.

Simulation modules: ``shapes`` (nodes, workloads, pods and their JSON), ``kubelet``, ``controllers``
(node lifecycle, taint eviction, workloads, events, CSRs), ``scenarios``, ``pki``. Nothing here may
import textual or rich.
"""
