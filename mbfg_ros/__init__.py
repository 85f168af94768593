"""mbfg_ros: factor-graph multibody dynamics for ROS 2."""

__version__ = "0.1.0"
