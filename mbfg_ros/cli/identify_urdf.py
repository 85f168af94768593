"""The URDF branch of ``mbfg-identify`` (issue 27 item 3; docs/real-arms.md).

    mbfg-identify ROBOT.urdf [--overlay O.yaml] (--measured FILE.csv ... | --bag BAG ...)
                  [--joints ..] [measured-motion options] [--regularisation L]
                  [--fit-fraction F] [--stride K] --output IDENTIFIED.urdf
                  [--output-overlay IDENTIFIED.yaml]

Each run's joint states come from the measured-motion path (mbfg_ros.spatial.measured: the
derivative options, resampling of jittered stamps), half a Savitzky-Golay window dropped at
each end; the links (log-Cholesky, physically consistent) and the joints' friction, offset and
rotor inertia are fitted by mbfg_ros.spatial.identify, regularised toward the URDF and overlay.
It prints the base parameters' count, the regressor's condition number, the poorly excited
parameters and the cross-validated torque RMSE per joint beside an unconstrained
least-squares fit and the URDF's, then writes the identified URDF and overlay.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..core.errors import MbfgError
from .measured_options import derivative_options, measured_logs

__all__ = ['add_identify_urdf_arguments', 'identify_urdf_cli']


def add_identify_urdf_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the URDF branch (the measured-motion ones are shared)."""
    from ..spatial.identify import IdentifyConfig
    g = p.add_argument_group('URDF robots (CONFIG ending in .urdf)')
    g.add_argument('--regularisation', type=float, default=IdentifyConfig.regularisation,
                   help='weight of the pull toward the URDF and overlay values (default '
                        f'{IdentifyConfig.regularisation:g})')
    g.add_argument('--fit-fraction', type=float, default=IdentifyConfig.fit_fraction,
                   help='share of each run fitted in the cross-validation, the rest predicted '
                        f'(default {IdentifyConfig.fit_fraction:g})')
    g.add_argument('--max-evaluations', type=int, default=IdentifyConfig.max_evaluations,
                   help="the constrained fit's cap on residual evaluations; the report says "
                        'whether it converged before it (default '
                        f'{IdentifyConfig.max_evaluations})')
    g.add_argument('--stride', type=int, default=None,
                   help='use every K-th sample (default: at most 4000 samples per run)')
    g.add_argument('--output-overlay', help='identified overlay YAML to write (default: '
                   '--output with .yaml)')


def identify_urdf_cli(args: argparse.Namespace) -> int:
    """Identify a URDF robot from measured runs; write the identified URDF and overlay."""
    from ..spatial.identify import IdentifyConfig, Samples, identify_urdf, write_identified
    from ..spatial.measured import measured_inverse
    from ..spatial.urdf import load_overlay
    from .common import check_writable
    from .spatial import urdf_system
    if not 0.0 < args.fit_fraction < 1.0:
        raise MbfgError(f'--fit-fraction must be between 0 and 1, got {args.fit_fraction:g}')
    if args.regularisation < 0:
        raise MbfgError(f'--regularisation must be >= 0, got {args.regularisation:g}')
    if args.max_evaluations < 1:
        raise MbfgError(f'--max-evaluations must be >= 1, got {args.max_evaluations}')
    if args.stride is not None and args.stride < 1:
        raise MbfgError(f'--stride must be >= 1, got {args.stride}')
    if not str(args.output).lower().endswith('.urdf'):
        raise MbfgError(f'--output: the identified model of a URDF robot is a .urdf, got '
                        f'{args.output!r}')
    out_overlay = Path(args.output_overlay or Path(args.output).with_suffix('.yaml'))
    inputs = (args.config, *(args.overlay and [args.overlay] or ()), *args.measured, *args.bag)
    check_writable(args.output, 'URDF', args.force, inputs)
    check_writable(out_overlay, 'overlay', args.force, inputs)
    system = urdf_system(args)
    logs = measured_logs(args, system.description, args.measured, args.bag)
    opts = derivative_options(args, logs[0])
    parts = []
    for k, log in enumerate(logs, 1):
        print(f'[{k}/{len(logs)}] states of {log.source} ({len(log.t)} samples)',
              file=sys.stderr, flush=True)
        res = measured_inverse(system, log, opts)
        if res.effort is None or not np.isfinite(res.effort).all():
            raise MbfgError(f'{log.source}: identification needs a measured effort for every '
                            f'actuated joint ({", ".join(system.actuator_names)})')
        tau = res.effort @ system.B.T                   # passive joints: zero torque
        skip = opts.window // 2
        keep = slice(skip, len(res.t) - skip)
        N = len(res.t) - 2 * skip
        stride = args.stride or max(1, -(-N // 4000))
        parts.append(Samples(*(x[keep][::stride] for x in (res.q, res.qd, res.qdd, tau))))
    cfg = IdentifyConfig(regularisation=args.regularisation, fit_fraction=args.fit_fraction,
                         max_evaluations=args.max_evaluations)
    result = identify_urdf(system, parts, cfg)
    print(result.report())
    overlay = load_overlay(args.overlay)[0] if args.overlay else {}
    write_identified(args.output, out_overlay, Path(args.config).read_bytes(), overlay,
                     system, result)
    print(f'wrote {args.output} and {out_overlay} (mbfg-inverse {args.output} --overlay '
          f'{out_overlay} ... uses them)', file=sys.stderr)
    return 0
