"""The simulated quadruped (issue 28): ``sim`` (solo12 in MuJoCo: model, controller,
sensors, truth) and ``bag`` (its runs as rosbag2 bags of standard messages, and back).
Library modules for scripts/simulate_quadruped.py and bench/floating_base.py, not
benchmarks themselves."""
