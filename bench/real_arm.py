"""Issue 27's targets for a real arm from its URDF: friction and rotors, measured motion and
identification (docs/real-arms.md).

    python bench/real_arm.py [--quick]

1. DFKI's double pendulum as URDF (config/urdf/double_pendulum.urdf), rigid and with the overlay
   of DFKI's friction and rotors (config/urdf/double_pendulum_dfki.yaml), against the planar
   YAML on DFKI's run 01 (default derivatives): torque RMSE and r per joint.
2. mbfg-identify's fit of that URDF on runs 01 and 04: cross-validated RMSE (first 60 % fitted,
   last 40 % predicted) beside unconstrained least squares and the URDF, consistency; then
   the identified model on runs it never saw.
3. A simulated 7-DOF arm (config/urdf/panda_like.urdf with its links moved and known friction,
   offsets and armature; 0.05 N m torque noise) identified back (--quick: 10 s of data).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbfg_ros.core.friction import Friction  # noqa: E402
from mbfg_ros.planar.dynamics import load_system  # noqa: E402
from mbfg_ros.planar.problems import measured as planar_measured  # noqa: E402
from mbfg_ros.planar.problems.measured import load_joint_csv, torque_fit  # noqa: E402
from mbfg_ros.spatial.drives import JointDrive  # noqa: E402
from mbfg_ros.spatial.identify import (  # noqa: E402
    Samples, identified_overlay, identified_urdf, identify_urdf, link_parameters,
    log_cholesky, to_log_cholesky,
)
from mbfg_ros.spatial.measured import measured_inverse  # noqa: E402
from mbfg_ros.spatial.system import build_spatial_system  # noqa: E402

URDF = ROOT / 'config' / 'urdf'
RUN = ROOT / 'test' / 'data' / 'dfki'


def run(k: str):
    return load_joint_csv(RUN / f'design_A.0_20220815_sys_id_trajectory_{k}.csv',
                          ['shoulder', 'elbow'], ['pos_meas1', 'pos_meas2'],
                          ['vel_meas1', 'vel_meas2'], ['tau_meas1', 'tau_meas2'])


def fit_row(res) -> str:
    e, r = torque_fit(res.tau, res.effort, 50)
    return ' | '.join(f'{a:.3f} (r {b:.2f})' for a, b in zip(e, r))


def dfki() -> None:
    full = build_spatial_system(URDF / 'double_pendulum.urdf', URDF / 'double_pendulum_dfki.yaml')
    print('DFKI run 01, torque RMSE N m vs measured (default derivatives)\n')
    print('| model | shoulder | elbow |\n|---|---|---|')
    rigid = build_spatial_system(URDF / 'double_pendulum.urdf')
    print(f'| URDF, rigid | {fit_row(measured_inverse(rigid, run("01")))} |')
    print(f'| URDF + DFKI overlay | {fit_row(measured_inverse(full, run("01")))} |')
    planar = planar_measured.measured_inverse(load_system(ROOT / 'config' /
                                                          'dfki_double_pendulum.yaml'), run('01'))
    print(f'| planar YAML | {fit_row(planar)} |')
    spatial = measured_inverse(full, run('01'))
    diff = np.abs(spatial.tau - planar.tau).max()
    print(f'\nURDF vs planar torques: max |difference| {diff:.1e} N m\n')
    parts = []
    for k in ('01', '04'):
        r = measured_inverse(full, run(k))
        parts.append(Samples(*(x[50:-50] for x in (r.q, r.qd, r.qdd, r.effort))))
    res = identify_urdf(full, parts)
    print('mbfg-identify on runs 01 + 04:\n')
    print(res.report())
    import tempfile

    import yaml
    tmp = Path(tempfile.mkdtemp(prefix='mbfg_bench_real_arm_'))
    (tmp / 'dp.urdf').write_text(identified_urdf((URDF / 'double_pendulum.urdf').read_bytes(),
                                                 full, res))
    (tmp / 'dp.yaml').write_text(yaml.safe_dump(identified_overlay({}, full, res)))
    ident = build_spatial_system(tmp / 'dp.urdf', tmp / 'dp.yaml')
    print('\nruns never fitted, torque RMSE N m: DFKI overlay / identified\n')
    print('| run | shoulder | elbow |\n|---|---|---|')
    for k in ('00', '02', '12'):
        a = torque_fit(*measured_inverse(full, run(k))[4:], 50)[0]
        b = torque_fit(*measured_inverse(ident, run(k))[4:], 50)[0]
        print(f'| {k} | {a[0]:.3f} / {b[0]:.3f} | {a[1]:.3f} / {b[1]:.3f} |')


def simulated(duration: float) -> None:
    rng = np.random.default_rng(1)
    S0 = build_spatial_system(URDF / 'panda_like.urdf', {'joints': {
        f'panda_joint{k}': {'friction': {'b': 0.1, 'fc': 0.2}, 'Ir': 1e-5, 'gr': 100}
        for k in range(1, 8)}})
    m0 = S0.model
    n = m0.n
    mass, com, inertia = m0.mass.copy(), m0.com.copy(), m0.inertia.copy()
    for j, pi0 in enumerate(link_parameters(m0)):
        pi = log_cholesky(to_log_cholesky(pi0) + rng.normal(0, 0.1, 10))
        c = pi[1:4] / pi[0]
        Io = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
        mass[j + 1], com[j + 1] = pi[0], c
        inertia[j + 1] = Io - pi[0] * (c @ c * np.eye(3) - np.outer(c, c))
    drives = tuple(JointDrive(friction=Friction(b=0.3 + 0.1 * j, fc=0.5 + 0.2 * j,
                                                fs=0.5 + 0.2 * j),
                              offset=0.05 * (j - 3), Ir=2e-5 * (1 + j % 3), gr=100.0)
                   if j < 7 else JointDrive(friction=Friction(b=2.0, fc=1.0, fs=1.0))
                   for j in range(n))
    true = build_spatial_system(dataclasses.replace(m0, mass=mass, com=com, inertia=inertia,
                                                    drives=drives))
    t = np.arange(0, duration, 0.02)
    w = np.array([0.3, 0.7, 1.1, 1.9])
    A = rng.uniform(0.1, 0.4, (n, 4))
    A[7:] *= 0.04
    ph = rng.uniform(0, 2 * np.pi, (n, 4))
    lo, hi = np.nan_to_num(m0.lower), np.nan_to_num(m0.upper)
    mid = np.where(np.isfinite(m0.lower) & np.isfinite(m0.upper), 0.5 * (lo + hi), 0.0)
    arg = w[None, None, :] * t[:, None, None] + ph[None]
    q = mid + np.einsum('jk,tjk->tj', A, np.sin(arg))
    qd = np.einsum('jk,tjk->tj', A * w, np.cos(arg))
    qdd = -np.einsum('jk,tjk->tj', A * w ** 2, np.sin(arg))
    tau = np.array([true.inverse(a, b, c) for a, b, c in zip(q, qd, qdd)])
    res = identify_urdf(S0, [Samples(q, qd, qdd, tau + rng.normal(0, 0.05, tau.shape))])
    print(f'\nsimulated panda_like (9 joints), {duration:g} s at 50 Hz, noise 0.05 N m:\n')
    print(res.report())
    got = np.array([res.drive(j) for j in range(n)])
    print('\n| joint | b true / fit | fc true / fit | Ir·1e5 true / fit |\n|---|---|---|---|')
    for j in range(7):
        d = drives[j]
        print(f'| {m0.joint_names[j]} | {d.friction.b:.2f} / {got[j, 0]:.3f} | '
              f'{d.friction.fc:.2f} / {got[j, 1]:.3f} | {d.Ir * 1e5:.1f} / '
              f'{got[j, 3] * 1e5:.2f} |')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--quick', action='store_true', help='10 s of simulated data instead of 20')
    args = p.parse_args()
    dfki()
    simulated(10.0 if args.quick else 20.0)


if __name__ == '__main__':
    main()
