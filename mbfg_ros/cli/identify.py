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

from ..core.errors import MbfgError
from ..planar.problems.identify import (
    IdentifyConfig, identified_yaml, identify_regressed, regress_logs,
)
from ..planar.problems.measured import torque_fit
from ..core.output import write_text_atomic
from ..loader import is_urdf
from .common import add_force_argument, check_writable, load_checked, plain, run_cli
from .identify_urdf import add_identify_urdf_arguments, identify_urdf_cli
from .measured_options import (
    add_measured_arguments, derivative_options, measured_logs, split_names,
)
from .spatial import add_urdf_arguments

__all__ = ['main']


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
            weights = tuple(float(w) for w in split_names(args.weights) or ())
        except ValueError:
            raise MbfgError(f'--weights: not numbers: {args.weights!r}') from None
    opts = derivative_options(args, logs[0])
    cfg = IdentifyConfig(friction=not args.no_friction, stribeck=args.stribeck,
                         rotor=not args.no_rotor,
                         same_rotor=args.same_rotor, fixed=tuple(split_names(args.fix) or ()),
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
