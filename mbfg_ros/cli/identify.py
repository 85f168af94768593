"""mbfg-identify: dynamic parameters from measured motion and torque (least squares).

    mbfg-identify CONFIG (--measured FILE.csv ... | --bag BAG ...) --joints A,B
                  [--position-columns ..] [--velocity-columns ..] [--effort-columns ..]
                  [--derivatives velocity|savgol|smoother] [--window N] [--order P]
                  [--jerk J] [--position-sigma S] [--velocity-sigma S]
                  [--no-friction] [--stribeck] [--no-rotor] [--same-rotor] [--weights W1,W2|auto]
                  [--fix NAME,..] [--unbounded]
                  [--validate FILE.csv ...] --output IDENTIFIED.yaml
    mbfg-identify ROBOT.urdf [--overlay O.yaml] (--measured ... | --bag ...)
                  [--regularisation L] [--fit-fraction F] --output IDENTIFIED.urdf

A URDF robot (mbfg_ros.cli.identify_urdf, mbfg_ros.spatial.identify): physically consistent
links, friction and rotor inertias, regularised toward the URDF, cross-validated.

Inverse dynamics is linear in the bodies' masses, first moments and inertias,
the joints' viscous and Coulomb friction and the rotor inertias
(mbfg_ros.planar.problems.identify). The runs (several --measured or --bag) are stacked into
one least-squares problem; the tool prints the identifiable base parameters
with standard errors and the fit RMSE per actuator, writes the mechanism YAML
with the identified values, and with --validate prints the torque RMSE and r
of the identified model on other runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.columns import TIME, columns as cols, find_columns, time_column
from ..core.errors import MbfgError
from ..planar.problems.identify import (
    IdentifyConfig, identified_yaml, identify_regressed, regress_logs,
)
from ..planar.problems.measured import (
    DerivativeOptions, load_joint_bag, load_joint_csv, torque_fit,
)
from ..core.output import write_text_atomic
from ..loader import is_urdf
from .common import add_force_argument, check_writable, load_checked, plain, run_cli
from .identify_urdf import add_identify_urdf_arguments, identify_urdf_cli
from .spatial import add_urdf_arguments

__all__ = ['main', 'add_measured_arguments', 'measured_logs']


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


def _split(text: str | None) -> list[str] | None:
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
    joints = _split(args.joints) or [a.joint for a in mech.actuators if a.joint is not None]
    if not joints:
        raise MbfgError('--joints: give the measured joints (the YAML actuators name none)')
    logs = []
    for path in csvs:
        header = _csv_header(Path(path))

        def columns(given: str | None, kind: str, required: bool) -> list[str] | None:
            if given is not None:
                return _split(given) or None
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


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog='mbfg-identify', description=plain(__doc__.split('\n')[0]))
    p.add_argument('config', help='mechanism YAML (its values are the starting point and the '
                   'values of parameters the data cannot identify), or a URDF robot (.urdf)')
    p.add_argument('--measured', action='append', default=[], help='CSV run (repeatable)')
    p.add_argument('--bag', action='append', default=[], help='rosbag2 run (repeatable)')
    p.add_argument('--validate', action='append', default=[], help='CSV run to evaluate the '
                   'identified model on (repeatable; same columns as --measured)')
    add_measured_arguments(p)
    p.add_argument('--no-friction', action='store_true', help='do not fit joint friction')
    p.add_argument('--stribeck', action='store_true', help='also fit each friction joint\'s '
                   'static level fs (Stribeck bump, v_st from the YAML, default 0.1 rad/s; '
                   'joints whose YAML friction has fs already get it)')
    p.add_argument('--no-rotor', action='store_true', help='do not fit rotor inertias')
    p.add_argument('--same-rotor', action='store_true', help='one rotor inertia for all motors '
                   '(identical motors)')
    p.add_argument('--weights', help="one weight per actuator (residual multipliers), or "
                   "'auto': 1/RMSE per actuator of an unweighted first fit (Gautier-Khalil "
                   'weighted least squares)')
    p.add_argument('--fix', help='parameters held at their YAML values, comma separated '
                   '(e.g. link1.my,link2.my: centres of mass on the link axes)')
    p.add_argument('--unbounded', action='store_true', help='no bounds (m, I0, b, fc, Ir >= 0 '
                   'otherwise)')
    p.add_argument('--output', required=True, help='identified mechanism YAML to write (a '
                   'URDF robot: the identified .urdf)')
    add_force_argument(p)
    add_urdf_arguments(p)
    add_identify_urdf_arguments(p)
    args = p.parse_args(argv)
    if not (args.measured or args.bag):
        raise MbfgError('give at least one run: --measured FILE.csv or --bag BAG')
    if is_urdf(args.config):
        return identify_urdf_cli(args)
    if args.overlay:
        raise MbfgError('--overlay is for URDF robots (CONFIG ending in .urdf)')
    check_writable(args.output, 'YAML', args.force,
                   (args.config, *args.measured, *args.bag, *args.validate))
    sys_ = load_checked(args.config, 'mbfg-identify')
    logs = measured_logs(args, sys_.mech, args.measured, args.bag)
    weights = None
    if args.weights and args.weights.strip() == 'auto':
        weights = 'auto'
    elif args.weights:
        try:
            weights = tuple(float(w) for w in _split(args.weights) or ())
        except ValueError:
            raise MbfgError(f'--weights: not numbers: {args.weights!r}') from None
    opts = derivative_options(args, logs[0])
    cfg = IdentifyConfig(friction=not args.no_friction, stribeck=args.stribeck,
                         rotor=not args.no_rotor,
                         same_rotor=args.same_rotor, fixed=tuple(_split(args.fix) or ()),
                         weights=weights, bounded=not args.unbounded, derivatives=opts)
    data = []
    for k, log in enumerate(logs, 1):
        print(f'[{k}/{len(logs)}] differentiating and regressing {log.source} '
              f'({len(log.t)} samples)', file=sys.stderr, flush=True)
        data.append(regress_logs(sys_, [log], cfg))
    res = identify_regressed(sys_, data, cfg)
    print(res.report())
    out = Path(args.output)
    write_text_atomic(out, identified_yaml(args.config, res), 'YAML')
    print(f'wrote {out}', file=sys.stderr)
    names = [a.name for a in sys_.mech.actuators]
    for log in measured_logs(args, sys_.mech, args.validate, []):
        st = res.predict(log, opts)
        if st.effort is None:
            raise MbfgError(f'{log.source}: --validate needs measured efforts')
        rmse, r = torque_fit(st.tau, st.effort, opts.window // 2)
        print(f'validation on {log.source}: ' + ', '.join(
            f'{n} RMSE {e:.4f} N m (r {c:.3f})' for n, e, c in zip(names, rmse, r)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(_main, argv, prog='mbfg-identify')


if __name__ == '__main__':
    raise SystemExit(main())
