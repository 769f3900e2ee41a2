"""Importers of the topology descriptions operators already have.

- :mod:`palopt.importers.nvidia_smi`: the GPU matrix of ``nvidia-smi topo -m`` (inside a server);
- :mod:`palopt.importers.slurm`: a Slurm ``topology.conf`` of the tree plugin (between servers);
- :mod:`palopt.importers.assemble`: both joined into one :class:`~palopt.topology.Topology`.
"""
