"""Planar mechanisms in natural coordinates (seed 000/001): the YAML model, constraints,
forces, kinematics, dynamics (``System``) and sensor models. The spatial counterpart is
:mod:`mbfg_ros.spatial`; problems serving both talk to :mod:`mbfg_ros.core.interface`."""
