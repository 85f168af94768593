"""The ROS 2 edge of mbfg_ros: nodes, message conversions, parameters, tick driver.

Only :mod:`.estimator_node` and :mod:`.simulator_node` import rclpy. The other
modules are pure Python and also serve the bag replay tool, which must run
without a ROS installation:

- :mod:`.conversions`: message <-> record (duck-typed, works for rclpy messages
  and for rosbags' deserialised dataclasses alike).
- :mod:`.params`: every node parameter declared once (description, range),
  parsed into the frozen :class:`~mbfg_ros.estimation.estimator.EstimatorConfig`.
- :mod:`.driver`: the tick schedule and the per-tick outputs shared by the live
  node and the replay tool (same input -> same estimates).
"""
