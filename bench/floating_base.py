"""Floating-base peers on the simulated quadruped's bags (issue 28, item 5, first part).

    python bench/floating_base.py [BAG ...] [--scenario trot sway push] [--duration S]
        [--seed 0] [--contact-rate HZ] [--contact-threshold N] [--only NAME ...] [--quick]

Runs, on the same bag, the package's floating-base estimator
(``mbfg_ros.estimation.floating.FloatingEstimator``, fed as a node would: :func:`run_floating`;
once with the bag's contacts, once with its contacts estimated from the joint efforts),
GTSAM 4.3's legged estimators (``LeggedInvariantEKF``,
``LeggedInvariantIEKF``, ``LeggedFixedLagSmoother``, ``LeggedCombinedFixedLagSmoother``)
and a baseline "leg odometry + IMU integration" (point feet, and feet as balls rolling
without slipping: solo's feet are 16 mm balls, and a point-foot model mistakes their
rolling for the base's motion), and prints one markdown table per bag:
base velocity RMSE, position drift per metre walked, yaw drift, z drift against the
truth (``/truth/odom``), contact-force RMSE against ``/truth/feet/*/wrench`` (the package's
estimator only), and the thread CPU time per estimate (``time.thread_time_ns``
around the estimator's calls and the leg kinematics; noisy on a shared machine, the
lead takes the final numbers on a quiet one) with the estimates per second on one core
it allows.

Without BAG, one bag per ``--scenario`` (default: a 12 s trot, an 8 s sway, a 4 s push) is
simulated first (scripts/simulate_quadruped.py's models) into a temporary directory and
read back, so the peers see exactly what a bag gives them.

Inputs of every estimator: the base IMU (``/imu/base``, at the base origin, axes of
``base_link``), leg kinematics (Pinocchio's forward kinematics of the solo12 URDF at the
measured joint positions: the foot centre in the base frame; its Jacobian for the
baseline) and the contact flags (``/feet/<FOOT>/contact``). All start from the truth's
first pose and velocity with the feet's true positions, and all use the same gyro bias:
the mean gyro reading over the first 0.4 s (the robot stands still then in every
scenario), accelerometer bias 0; their noise parameters are the sensor models' values
(bench/quadruped/sim.py's SensorNoise).
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.quadruped.sim import DT, FOOT_RADIUS, SCENARIOS, SOLO12_URDF, SensorNoise, simulate  # noqa: E402
from bench.quadruped.bag import FOOT_LINKS, read_bag, write_bag  # noqa: E402
from mbfg_ros.cli.common import run_cli  # noqa: E402
from mbfg_ros.core.bag import BagError  # noqa: E402

OURS = 'FloatingEstimator (mbfg_ros)'
OURS_EFFORT = 'FloatingEstimator, contacts from efforts'
PEERS = (OURS, OURS_EFFORT, 'leg odometry + IMU', 'leg odometry (rolling feet) + IMU',
         'LeggedInvariantEKF', 'LeggedInvariantIEKF', 'LeggedFixedLagSmoother',
         'LeggedCombinedFixedLagSmoother')
BIAS_WINDOW = 0.4
"""Seconds of standing at the start whose mean gyro reading is every estimator's gyro bias."""
GRAVITY = 9.81


def quat_to_rot(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def yaw_of(R: np.ndarray) -> float:
    return math.atan2(R[1, 0], R[0, 0])


class LegKinematics:
    """Feet centres in the base frame and their Jacobians (Pinocchio, fixed-base solo12)."""

    def __init__(self, urdf: Path = SOLO12_URDF, joint_names: Sequence[str] = ()) -> None:
        import pinocchio as pin

        self.pin = pin
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        self.frames = [self.model.getFrameId(f) for f in FOOT_LINKS]
        names = list(self.model.names[1:])
        # bag order → Pinocchio order (the same for this URDF; checked, not assumed)
        self.order = np.array([list(joint_names).index(n) for n in names]
                              if joint_names else range(len(names)))
        self.omega = np.zeros((len(self.frames), 3))

    def feet(self, q: np.ndarray, qd: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray | None]:
        """(4×3 positions, 4×3 velocities relative to the base or None), base frame.

        With ``qd``, :attr:`omega` holds the feet's angular velocities relative to the
        base (4×3, base frame) afterwards."""
        pin = self.pin
        qq = q[self.order]
        if qd is None:
            pin.framesForwardKinematics(self.model, self.data, qq)
            return np.array([self.data.oMf[f].translation for f in self.frames]), None
        vv = qd[self.order]
        pin.forwardKinematics(self.model, self.data, qq, vv)
        pin.updateFramePlacements(self.model, self.data)
        rf = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        pos = np.array([self.data.oMf[f].translation for f in self.frames])
        twists = [pin.getFrameVelocity(self.model, self.data, f, rf) for f in self.frames]
        self.omega = np.array([t.angular for t in twists])
        return pos, np.array([t.linear for t in twists])


@dataclass
class Track:
    """An estimator's output at every tick: position, velocity (world), rotation; the
    contact forces (T×4×3, world, NaN where not estimated) for the estimators that give them."""

    p: np.ndarray
    v: np.ndarray
    R: np.ndarray
    cpu_ns: np.ndarray
    forces: np.ndarray | None = None
    counters: dict | None = None
    """The package estimator's counters at the end of the run."""


def _skew(w: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _expm_so3(w: np.ndarray) -> np.ndarray:
    th = float(np.linalg.norm(w))
    K = _skew(w)
    if th < 1e-12:
        return np.eye(3) + K
    return (np.eye(3) + math.sin(th) / th * K + (1 - math.cos(th)) / th ** 2 * K @ K)


def leg_odometry(d: dict, kin: LegKinematics, bias_g: np.ndarray, radius: float = 0.0
                 ) -> Track:
    """Baseline: R by integrating the gyro; v from the stance legs' kinematics,
    v_base = −R (J q̇ + ω × p_foot) averaged over the feet in contact (the IMU's
    acceleration integrated when none is); p integrated.

    With ``radius`` > 0 the feet are balls rolling without slipping: the contact point's
    material velocity is zero, so the ball's centre moves at ω_foot × r e_z and
    v_base = ω_foot × r Rᵀe_z − ω × p_foot − J q̇ (base frame), ω_foot = ω + the leg's."""
    n = len(d['t'])
    R = quat_to_rot(d['quat'][0])
    v = R @ d['v'][0]
    p = d['p'][0].copy()
    g = np.array([0.0, 0.0, -GRAVITY])
    out = Track(np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(n))
    for k in range(n):
        c0 = time.thread_time_ns()
        w = d['gyro'][k] - bias_g
        R = R @ _expm_so3(w * DT)
        pf, vf = kin.feet(d['q'][k], d['qd'][k])
        stance = d['contact'][k] > 0.5
        if stance.any():
            vb = -(vf[stance] + np.cross(w, pf[stance])).mean(axis=0)
            if radius > 0.0:
                up = radius * R[2]                   # r Rᵀ e_z: the world's up in the base
                vb += np.cross(w + kin.omega[stance], up).mean(axis=0)
            v = R @ vb
        else:
            v = v + (R @ d['acc'][k] + g) * DT
        p = p + v * DT
        out.cpu_ns[k] = time.thread_time_ns() - c0
        out.p[k], out.v[k], out.R[k] = p, v, R
    return out


def floating_system():
    """solo12 as ``FloatingBaseDynamics`` (URDF + the overlay of docs/floating-base.md)."""
    from mbfg_ros.spatial.floating import load_floating
    return load_floating(str(SOLO12_URDF), {'floating_base': True,
                                            'contacts': list(FOOT_LINKS)})


def floating_config(threshold: float = 0.0, **kw: object):
    """The package estimator's config for solo12's bags: ball feet of the simulated
    radius; contacts from the foot forces when ``threshold`` > 0 (``contact_source:
    effort`` in ``kw``: estimated from the joint efforts, no contact topic read)."""
    from mbfg_ros.estimation.floating import FloatingEstimatorConfig
    if threshold > 0:
        kw = {**kw, 'contact_source': 'force', 'contact_force_threshold': threshold}
    return FloatingEstimatorConfig(**{'foot_radius': FOOT_RADIUS, **kw})


def run_floating(d: dict, config: object = None, contact_every: int = 1,
                 system: object = None, from_truth: bool = True) -> Track:
    """The package's ``FloatingEstimator`` fed the bag's arrays as a node would: per 1 kHz
    sample the IMU, the joint states (position, velocity, effort), every foot's contact
    flag and force (every ``contact_every`` samples), then ``tick``. It starts, like the
    peers, at the truth's first pose and velocity (``from_truth``); the gyro bias is its own
    start-up's (the first ``init_time`` s, standing). Before the start-up the rows hold the
    first estimate (the robot stands still then). ``cpu_ns``: thread CPU time of the
    ``add_*`` calls and the tick."""
    from mbfg_ros.estimation.floating import FloatingEstimator
    system = system or floating_system()
    est = FloatingEstimator(system, config or floating_config())
    if from_truth:
        q0 = d['quat'][0]
        est.set_initial_pose(d['p'][0], [q0[1], q0[2], q0[3], q0[0]],
                             quat_to_rot(q0) @ d['v'][0])
    order = [list(d['joint_names']).index(nm) for nm in est.joint_names]
    q, qd, tau = d['q'][:, order], d['qd'][:, order], d['tau'][:, order]
    feet = list(FOOT_LINKS)
    fi = [feet.index(c) for c in est.contact_names]
    n = len(d['t'])
    out = Track(np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(n),
                np.full((n, 4, 3), np.nan))
    first = None
    for k in range(n):
        t = float(d['t'][k])
        c0 = time.thread_time_ns()
        est.add_imu(t, d['gyro'][k], d['acc'][k])
        est.add_joints(t, q[k], qd[k], tau[k])
        if k % contact_every == contact_every - 1:
            for c, i in zip(est.contact_names, fi):
                est.add_contact(t, c, bool(d['contact'][k, i] > 0.5))
                est.add_foot_force(t, c, d['force'][k, i])
        e = est.tick(t)
        out.cpu_ns[k] = time.thread_time_ns() - c0
        if e is None:
            continue
        first = k if first is None else first
        x, y, z, w = e.quaternion_xyzw
        out.R[k] = quat_to_rot(np.array([w, x, y, z]))
        out.p[k], out.v[k] = e.position, out.R[k] @ e.linear_velocity
        out.forces[k, fi] = e.contact_forces
    if first is None:
        raise RuntimeError('the floating-base estimator never started (too short a bag?)')
    out.p[:first], out.v[:first], out.R[:first] = out.p[first], out.v[first], out.R[first]
    out.counters = dict(est.counters)
    return out


CONTACT_SIGMA = 3e-3
"""σ (m) of the foot position in the base frame given to the Legged* estimators. The
encoders alone give ~3e-5 m; the point-foot model of a rolling, sinking sphere with a
contact flag raised at the first touch is what is wrong by millimetres (leg odometry from
the *true* joint states has 5 cm/s RMS velocity error on the trot). GTSAM's default, 3 cm,
lets a 3 s trot sink the base by 12 cm; 3 mm halves the velocity error."""


def _legged(name: str, d: dict, bias_g: np.ndarray, noise: SensorNoise,
            kin: LegKinematics, contact_every: int, contact_sigma: float = CONTACT_SIGMA
            ) -> Track:
    """One of GTSAM's Legged* estimators on the bag's arrays."""
    import gtsam

    n = len(d['t'])
    R0 = quat_to_rot(d['quat'][0])
    p0, v0 = d['p'][0], R0 @ d['v'][0]
    pf0, _ = kin.feet(d['q'][0])
    footholds = (p0[:, None] + R0 @ pf0.T)                    # 3×4, world
    nav0 = gtsam.NavState(gtsam.Rot3(R0), gtsam.Point3(*p0), v0)

    combined = name == 'LeggedCombinedFixedLagSmoother'
    pre = (gtsam.PreintegrationCombinedParams.MakeSharedU(GRAVITY) if combined
           else gtsam.PreintegrationParams.MakeSharedU(GRAVITY))
    pre.setGyroscopeCovariance(noise.gyro_density ** 2 * np.eye(3))
    pre.setAccelerometerCovariance(noise.acc_density ** 2 * np.eye(3))
    pre.setIntegrationCovariance(1e-8 * np.eye(3))
    if combined:
        pre.setBiasAccCovariance(noise.acc_walk ** 2 * np.eye(3))
        pre.setBiasOmegaCovariance(noise.gyro_walk ** 2 * np.eye(3))
    params = gtsam.LeggedEstimatorParams()
    params.preintegrationParams = pre
    params.body_P_imu = gtsam.Pose3()
    params.imuBias = gtsam.imuBias.ConstantBias(np.zeros(3), bias_g)
    params.biasAccRandomWalkSigma = noise.acc_walk
    params.biasOmegaRandomWalkSigma = noise.gyro_walk
    params.contactCovariance = contact_sigma ** 2 * np.eye(3)
    feet = list(FOOT_LINKS)
    base_cov = np.diag([1e-6] * 3 + [1e-6] * 3 + [1e-4] * 3)
    if name in ('LeggedInvariantEKF', 'LeggedInvariantIEKF'):
        P0 = np.eye(9 + 3 * len(feet)) * 1e-4
        P0[:9, :9] = base_cov
        est = getattr(gtsam, name)(nav0, footholds, P0, params, feet)
    else:
        est = getattr(gtsam, name)(nav0, footholds, base_cov, params, 0.1, feet)
    out = Track(np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(n))
    prev = np.zeros(4, dtype=bool)
    since = np.zeros(4, dtype=bool)       # touched down since the last contact update
    for k in range(n):
        c0 = time.thread_time_ns()
        est.predict(d['gyro'][k], d['acc'][k], DT)
        stance = d['contact'][k] > 0.5
        since |= stance & ~prev
        prev = stance
        if k % contact_every == contact_every - 1:
            pf, _ = kin.feet(d['q'][k])
            active = []
            for i in np.flatnonzero(stance):
                m = gtsam.ContactMeasurement()
                m.foot, m.bodyPoint, m.touchdown = int(i), pf[i], bool(since[i])
                active.append(m)
            since[:] = False
            est.processContacts(active)
        x = est.estimate()
        out.cpu_ns[k] = time.thread_time_ns() - c0
        out.R[k] = x.rotation().matrix()
        out.p[k], out.v[k] = x.x(0), x.x(1)
    return out


def metrics(d: dict, tr: Track) -> dict[str, float]:
    """Velocity RMSE (world, m/s), xy drift per metre walked (%), yaw and z drift at the end."""
    Rt = np.array([quat_to_rot(q) for q in d['quat']])
    v_true = np.einsum('kij,kj->ki', Rt, d['v'])
    ok = np.all(np.isfinite(tr.v), axis=1)
    err = np.linalg.norm(tr.v - v_true, axis=1)
    walked = float(np.linalg.norm(np.diff(d['p'][:, :2], axis=0), axis=1).sum())
    drift = float(np.linalg.norm(tr.p[-1, :2] - d['p'][-1, :2]))
    dyaw = yaw_of(tr.R[-1]) - yaw_of(Rt[-1])
    dyaw = (dyaw + math.pi) % (2 * math.pi) - math.pi
    return {'v_rmse': float(np.sqrt(np.mean(err[ok] ** 2))) if ok.all() else float('nan'),
            'walked': walked,
            'drift_pct': 100.0 * drift / walked if walked > 0.05 else float('nan'),
            'drift_m': drift,
            'yaw_deg': abs(math.degrees(dyaw)),
            'z_cm': 100.0 * abs(float(tr.p[-1, 2] - d['p'][-1, 2])),
            'f_rmse': force_rmse(d, tr),
            'tick_us': float(np.mean(tr.cpu_ns)) / 1e3}


def force_rmse(d: dict, tr: Track) -> float:
    """RMSE (N) of the estimated contact forces against ``/truth/feet/*/wrench`` over the
    samples where both the estimate and the truth say stance (NaN: none estimated)."""
    if tr.forces is None:
        return float('nan')
    both = np.isfinite(tr.forces[:, :, 0]) & (np.linalg.norm(d['force_true'], axis=2) > 0)
    if not both.any():
        return float('nan')
    err = np.linalg.norm(tr.forces - d['force_true'], axis=2)[both]
    return float(np.sqrt(np.mean(err ** 2)))


def run_peers(d: dict, names: Sequence[str] = PEERS, contact_every: int = 1,
              noise: SensorNoise = SensorNoise(), threshold: float = 0.0
              ) -> dict[str, dict[str, float]]:
    """``{peer: metrics}`` on the arrays of one bag (:func:`read_bag`). ``threshold`` > 0:
    the package's estimator takes its contacts from the foot forces (``contact_source:
    force``); give the peers :func:`contact_from_force`'s arrays for the same."""
    kin = LegKinematics(joint_names=d['joint_names'])
    still = d['t'] <= BIAS_WINDOW
    bias_g = d['gyro'][still].mean(axis=0)
    runners: dict[str, Callable[[], Track]] = {
        OURS: lambda: run_floating(d, floating_config(threshold), contact_every),
        OURS_EFFORT: lambda: run_floating(d, floating_config(contact_source='effort'),
                                          contact_every),
        'leg odometry + IMU': lambda: leg_odometry(d, kin, bias_g),
        'leg odometry (rolling feet) + IMU': lambda: leg_odometry(d, kin, bias_g, FOOT_RADIUS)}
    for name in PEERS[4:]:
        runners[name] = (lambda nm=name: _legged(nm, d, bias_g, noise, kin, contact_every))
    return {name: metrics(d, runners[name]()) for name in names}


def table(title: str, rows: dict[str, dict[str, float]]) -> str:
    walked = next(iter(rows.values()))['walked'] if rows else 0.0
    lines = [f'### {title} ({walked:.2f} m travelled in xy)', '',
             '| estimator | v RMSE (m/s) | xy drift (% of distance) | xy drift (m) | '
             'yaw drift (°) | z drift (cm) | contact-force RMSE (N) | tick CPU (µs) | '
             'estimates/s (1 core) |',
             '|---|---|---|---|---|---|---|---|---|']
    for name, m in rows.items():
        f = f'{m["f_rmse"]:.2f}' if math.isfinite(m['f_rmse']) else '–'
        lines.append(f'| {name} | {m["v_rmse"]:.4f} | {m["drift_pct"]:.2f} | '
                     f'{m["drift_m"]:.3f} | {m["yaw_deg"]:.2f} | {m["z_cm"]:.2f} | {f} | '
                     f'{m["tick_us"]:.0f} | {1e6 / m["tick_us"]:.0f} |')
    return '\n'.join(lines)


DURATIONS = {'trot': 12.0, 'sway': 8.0, 'push': 4.0, 'stand': 4.0}
"""Default simulated seconds per scenario when no bag is given."""


def contact_from_force(d: dict, threshold: float) -> dict:
    """The bag's arrays with the contact flags replaced by ‖foot force‖ > ``threshold`` (N):
    what a robot with foot force sensors and a threshold detector would feed."""
    out = dict(d)
    out['contact'] = (np.linalg.norm(d['force'], axis=2) > threshold).astype(float)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('bags', nargs='*', help='quadruped bags (scripts/simulate_quadruped.py)')
    ap.add_argument('--scenario', nargs='+', choices=SCENARIOS, default=['trot', 'sway', 'push'],
                    help='scenarios simulated when no bag is given (trot sway push)')
    ap.add_argument('--duration', type=float, default=None,
                    help='simulated seconds of each (trot 12, sway 8, push 4, stand 4)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--contact-rate', type=float, default=1000.0,
                    help='contact updates per second (the IMU is predicted at 1 kHz); 1000')
    ap.add_argument('--contact-threshold', type=float, default=0.0,
                    help='N: contact = foot force norm above it (0: the bag\'s contact flags)')
    ap.add_argument('--only', nargs='+', choices=PEERS, default=list(PEERS))
    ap.add_argument('--quick', action='store_true', help='a 4 s trot only')
    a = ap.parse_args(argv)
    if a.quick:
        a.scenario, a.duration = ['trot'], a.duration or 4.0
    every = max(1, int(round(1.0 / (a.contact_rate * DT))))
    source = (f'force > {a.contact_threshold:g} N' if a.contact_threshold > 0
              else 'contact flags')
    bags = [Path(b) for b in a.bags]
    for b in bags:
        if not b.exists():
            raise BagError(f'{b}: no such bag (expected a rosbag2 directory)')
    with tempfile.TemporaryDirectory() as tmp:
        if not bags:
            for sc in a.scenario:
                duration = a.duration or DURATIONS[sc]
                bag = Path(tmp) / f'{sc}_{duration:g}s'
                print(f'simulating {bag.name}', file=sys.stderr, flush=True)
                write_bag(simulate(sc, duration, seed=a.seed), bag)
                bags.append(bag)
        for bag in bags:
            d = read_bag(bag)
            if a.contact_threshold > 0:
                d = contact_from_force(d, a.contact_threshold)
            rows = {}
            # the effort-contacts row reads no contact input: the same with a threshold
            names = [n for n in a.only if not (a.contact_threshold > 0 and n == OURS_EFFORT)]
            for name in names:
                print(f'{bag.name}: {name}', file=sys.stderr, flush=True)
                rows.update(run_peers(d, (name,), every, threshold=a.contact_threshold))
            print(table(f'{bag.name}: {source} at {1.0 / (every * DT):g} Hz, IMU at 1 kHz',
                        rows))
            print(flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(run_cli(main, prog='floating_base.py'))
