"""The options and loading of measured joint logs, shared by ``mbfg-inverse`` and both
branches of ``mbfg-identify`` (planar YAML and URDF): the columns or bag topic of each run,
and the derivative options (velocity, savgol, smoother) of mbfg_ros.planar.problems.measured.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..core.columns import TIME, columns as cols, find_columns, time_column
from ..core.errors import MbfgError
from ..planar.problems.measured import DerivativeOptions, load_joint_bag, load_joint_csv

__all__ = ['add_measured_arguments', 'measured_logs', 'derivative_options', 'split_names']


def add_measured_arguments(p: argparse.ArgumentParser) -> None:
    """The options that describe measured joint logs (shared with mbfg-inverse)."""
    p.add_argument('--topic', default='/joint_states', help='--bag: JointState topic')
    p.add_argument('--joints', help='measured joints (YAML joint names, comma separated); '
                   'default: the joints of the YAML actuators')
    p.add_argument('--time-column', default=None,
                   help='--measured: time column (default t, else time)')
    p.add_argument('--position-columns', help='--measured: position column per joint '
                   '(default <joint>.position, or the older position_<joint>; docs/cli.md, '
                   'CSV columns)')
    p.add_argument('--velocity-columns', help="--measured: velocity column per joint ('' = none;"
                   ' default <joint>.velocity or velocity_<joint> if present)')
    p.add_argument('--effort-columns', help="--measured: measured effort column per joint ('' = "
                   'none; default <joint>.effort or effort_<joint> if present)')
    p.add_argument('--derivatives', choices=('velocity', 'savgol', 'smoother'), default=None,
                   help='velocity (Savitzky-Golay fit of the measured velocities, the default '
                   'when given), savgol (positions only) or smoother (zero-lag GTSAM smoother '
                   'over the whole log: constant-jerk model, positions and measured velocities)')
    p.add_argument('--window', type=int, default=None,
                   help='Savitzky-Golay window in samples (odd; default '
                   f'{DerivativeOptions.window} for measured motion)')
    p.add_argument('--order', type=int, default=None,
                   help='Savitzky-Golay polynomial order (default '
                   f'{DerivativeOptions.order} for measured motion)')
    p.add_argument('--jerk', type=float, default=DerivativeOptions.jerk,
                   help='smoother: square root of the jerk\'s spectral density, rad/s^3/sqrt(Hz) '
                   f'(default {DerivativeOptions.jerk}; larger follows the data more closely)')
    p.add_argument('--position-sigma', type=float, default=DerivativeOptions.position_sigma,
                   help='smoother: position noise, rad (default '
                   f'{DerivativeOptions.position_sigma})')
    p.add_argument('--velocity-sigma', type=float, default=DerivativeOptions.velocity_sigma,
                   help='smoother: measured velocity noise, rad/s (default '
                   f'{DerivativeOptions.velocity_sigma})')


def split_names(text: str | None) -> list[str] | None:
    """The names of a comma-separated option (None: not given)."""
    return None if text is None else [c.strip() for c in text.split(',') if c.strip()]


def _csv_header(path: Path) -> list[str]:
    try:
        with open(path) as f:
            return [h.strip() for h in f.readline().split(',')]
    except OSError as exc:
        raise MbfgError(f'{path}: cannot read file: {exc.strerror}') from None
    except UnicodeDecodeError as exc:           # issue 26: a binary file
        raise MbfgError(f'{path}: not a text CSV (byte {exc.start} is not UTF-8)') from None


def measured_logs(args: argparse.Namespace, mech, csvs: list[str], bags: list[str]) -> list:
    """JointLogs of the CSV files and bags named on the command line."""
    joints = split_names(args.joints) or [a.joint for a in mech.actuators if a.joint is not None]
    if not joints:
        raise MbfgError('--joints: give the measured joints (the YAML actuators name none)')
    logs = []
    for path in csvs:
        header = _csv_header(Path(path))

        def columns(given: str | None, kind: str, required: bool) -> list[str] | None:
            if given is not None:
                return split_names(given) or None
            found = find_columns(header, joints, kind)
            return found or (cols(joints, kind) if required else None)
        logs.append(load_joint_csv(path, joints, columns(args.position_columns, 'position', True),
                                   columns(args.velocity_columns, 'velocity', False),
                                   columns(args.effort_columns, 'effort', False),
                                   args.time_column or time_column(header) or TIME))
    for path in bags:
        logs.append(load_joint_bag(path, joints, args.topic))
    return logs


def derivative_options(args: argparse.Namespace, log) -> DerivativeOptions:
    method = args.derivatives or ('velocity' if log.velocity is not None else 'savgol')
    return DerivativeOptions(method,
                             DerivativeOptions.window if args.window is None else args.window,
                             DerivativeOptions.order if args.order is None else args.order,
                             args.jerk, args.position_sigma, args.velocity_sigma)
