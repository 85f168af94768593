"""Command-line tools of mbfg_ros (console_scripts entry points)."""
