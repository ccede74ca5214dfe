"""nodewatch: is every node of a Kubernetes fleet still alive?

Layers (enforced by tests/project/test_layers.py):

- ``nodewatch.core``: Kubernetes objects -> per-node heartbeat state, the lifecycle rules. No UI.
- ``nodewatch.sources``: live cluster, recording, replay and demo feeds into the core. No UI.
- ``nodewatch.sim``: the simulated fleet and its Kubernetes-compatible API server. No UI.
- ``nodewatch.ui``: the Textual dashboard, which only reads the core's state.
"""

__version__ = "0.1.0"
