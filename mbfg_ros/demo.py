"""``python -m mbfg_ros.demo``: kept as the short name of :mod:`mbfg_ros.cli.demo`."""
from .cli.demo import main

if __name__ == '__main__':
    raise SystemExit(main())
