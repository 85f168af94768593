"""python -m mbfg_ros.cli.demo (make demo): simulate, record, replay, compare.

    python -m mbfg_ros.cli.demo [--mechanism YAML|URDF [--overlay YAML]] [--duration S]
                            [--out DIR] [--seed N] [--rate HZ]

Without ``--mechanism`` it runs two demos, the planar four-bar then a 6R arm from a URDF:

1. Simulate: the four-bar (``config/fourbar.yaml``, or any mechanism YAML with named
   ``joints``) falling under gravity with the factor-graph forward dynamics (seed 000
   §5.1/5.2); the UR5 (``config/urdf/ur5.urdf`` + ``ur5_sensors.yaml``, or any URDF +
   overlay) following a smooth reference under computed torque
   (:func:`~mbfg_ros.spatial.sensor_sim.track_reference`).
2. Sample noisy, quantised encoders (the arm's with its motor efforts) and a noisy IMU
   (planar; the arm's 3-axis wrist IMU) and write them, with the true state on
   ``/simulator_node/ground_truth``, to an MCAP rosbag2 through rosbags (no DDS, no ROS
   installation needed).
3. Replay the bag through the estimator exactly as ``mbfg-replay`` does
   (``config/estimator.yaml``, ``config/estimator_urdf.yaml``).
4. Print RMSE against the truth (raw encoder / finite-difference rate vs the
   estimate), milliseconds per tick and the speed-up over real time, and the
   path of the plot.

Outputs in ``--out`` (default ``out/demo``) are named after the mechanism
(its ``name``, else the file stem): ``<name>_sim`` (the simulated bag),
``<name>_estimates`` (+ ``.csv``) and ``<name>_demo.png``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.bag import BagWriter, typestore
from ..core.output import atomic_dir
from .common import Progress, plain, run_cli, speed_phrase
from ..loader import load_mechanism
from ..ros import conversions as cv

__all__ = ['main', 'config_path', 'write_simulation_bag', 'accuracy_table', 'torque_line']

NS = 1_000_000_000
T0 = 1.0      # stamp of simulation time 0 (a zero stamp means "unset" in ROS)


def config_path(name: str) -> Path:
    """A file of the package's ``config/`` (source tree, else the installed share)."""
    here = Path(__file__).resolve().parents[2] / 'config' / name
    if here.exists():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory('mbfg_ros')) / 'config' / name
    except Exception:  # noqa: BLE001
        return here


def write_simulation_bag(path: Path, system, traj, measurements, truth_rate: float = 100.0,
                         storage: str = 'mcap') -> int:
    """Write sensor records, ground truth and /clock of a simulation to a rosbag2."""
    store = typestore()
    kit = cv.rosbags_kit(store)
    mech = system.description
    imu_topic = {s.name: '/' + s.topic.lstrip('/') for s in mech.sensors}
    frame = {s.name: s.frame_id for s in mech.sensors}
    rows = []
    for rec in measurements:
        t_ns = int(round((rec.t + T0) * NS))
        if hasattr(rec, 'sensor'):
            rows.append((t_ns, imu_topic[rec.sensor], cv.TYPES['Imu'],
                         cv.imu_msg(kit, t_ns, frame[rec.sensor], rec.gyro, rec.accel,
                                    rec.orientation)))
        else:
            rows.append((t_ns, '/joint_states', cv.TYPES['JointState'],
                         cv.joint_state_msg(kit, t_ns, rec.names, rec.position, rec.velocity,
                                            rec.effort)))
    step = max(1, int(round(1.0 / (truth_rate * (traj.t[1] - traj.t[0])))))
    names = mech.coordinate_names
    for k in range(0, len(traj.t), step):
        t_ns = int(round((traj.t[k] + T0) * NS))
        rows.append((t_ns, '/simulator_node/ground_truth', cv.TYPES['JointState'],
                     cv.joint_state_msg(kit, t_ns, names, traj.q[k], traj.qd[k])))
        rows.append((t_ns, '/clock', cv.TYPES['Clock'], cv.clock_msg(kit, t_ns)))
    rows.sort(key=lambda r: r[0])
    with atomic_dir(path, 'bag') as tmp, BagWriter(tmp, storage, store) as w:
        for t_ns, topic, msgtype, msg in rows:
            w.write(topic, msgtype, t_ns, msg)
    return len(rows)


def _rmse(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.sqrt(np.mean(x ** 2))) if x.size else float('nan')


def accuracy_table(system, traj, measurements, res) -> list[tuple[str, float, float]]:
    """Rows (quantity [unit], raw-sensor RMSE, estimate RMSE) against the simulated truth.

    Raw rate = finite difference of consecutive encoder readings (what a
    controller without an estimator would use).
    """
    from ..core.angles import wrap_angle

    mech = system.description
    sm = system.sensor_model()
    t_true = traj.t + T0
    jp = np.array([sm.joint_positions(q) for q in traj.q])
    jv = np.array([sm.joint_velocities(q, qd) for q, qd in zip(traj.q, traj.qd)])
    jp_unwrapped = np.unwrap(jp, axis=0)
    rows = []
    enc = [m for m in measurements if not hasattr(m, 'sensor')]
    t_enc = np.array([m.t + T0 for m in enc])
    est_t = res.t
    est_p = np.array(res.joint_position)
    est_v = np.array(res.joint_velocity)
    for j, joint in enumerate(mech.joints):
        raw = np.array([m.position[list(m.names).index(joint.name)] for m in enc])
        truth_at_enc = np.interp(t_enc, t_true, jp_unwrapped[:, j])
        raw_err = wrap_angle(raw - truth_at_enc)
        fd = np.diff(np.unwrap(raw)) / np.diff(t_enc)
        t_mid = 0.5 * (t_enc[1:] + t_enc[:-1])
        fd_err = fd - np.interp(t_mid, t_true, jv[:, j])
        est_err = wrap_angle(est_p[:, j] - np.interp(est_t, t_true, jp_unwrapped[:, j]))
        est_verr = est_v[:, j] - np.interp(est_t, t_true, jv[:, j])
        unit = 'rad' if joint.type == 'revolute' else 'm'
        rows.append((f'{joint.name} position [{unit}]', _rmse(raw_err), _rmse(est_err)))
        rows.append((f'{joint.name} rate [{unit}/s]', _rmse(fd_err), _rmse(est_verr)))
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='mbfg-demo', description=plain(__doc__.split('\n\n')[0]))
    p.add_argument('--mechanism', default=None,
                   help='a mechanism YAML with named joints, or a URDF (then --overlay); '
                   'default: the planar four-bar (config/fourbar.yaml), then the UR5 arm '
                   '(config/urdf/ur5.urdf + ur5_sensors.yaml); outputs are named after it')
    p.add_argument('--overlay', default=None, help='overlay YAML of a URDF --mechanism')
    p.add_argument('--duration', type=float, default=3.0, help='simulated seconds')
    p.add_argument('--out', default='out/demo', help='output directory')
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--rate', type=float, default=None,
                   help='sensor and tick rate, Hz (default: 200 planar, 500 URDF)')
    return p


def _main(argv: Sequence[str] | None) -> int:
    from ..loader import is_urdf

    a = _parser().parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    wall0 = time.perf_counter()
    if a.mechanism is None:
        _planar(str(config_path('fourbar.yaml')), a, out)
        print()
        _spatial(str(config_path('urdf/ur5.urdf')), str(config_path('urdf/ur5_sensors.yaml')),
                 a, out)
    elif is_urdf(a.mechanism):
        _spatial(a.mechanism, a.overlay, a, out)
    else:
        _planar(a.mechanism, a, out)
    print(f'\ntotal          {time.perf_counter() - wall0:.1f} s '
          '(timings on a shared machine are pessimistic)')
    return 0


def _report(rows, res, t_sim: float, duration: float) -> None:
    ms = 1e3 * float(np.mean(res.tick_seconds)) if res.tick_seconds else float('nan')
    print()
    print(f'{"quantity":<34}{"raw sensor RMSE":>18}{"estimate RMSE":>16}')
    for name, raw, est in rows:
        print(f'{name:<34}{raw:>18.5f}{est:>16.5f}')
    print('(raw rate = finite difference of the encoder)')
    print()
    print(f'simulation     {t_sim:8.2f} s for {duration:g} s '
          f'({speed_phrase(t_sim, duration)})')
    print(f'estimator      {ms:8.2f} ms per tick (mean), replay {res.wall:.2f} s for '
          f'{res.span:.2f} s of data: {speed_phrase(res.wall, res.span)}')
    print(f'plot           {res.plot}')
    print(f'estimates      {res.output} (rosbag2), {res.csv} (CSV)')


def _planar(mechanism: str, a: argparse.Namespace, out: Path) -> None:
    """The planar demo: free fall, encoders and IMU, replay (module docstring)."""
    from .replay import replay
    from ..simulation.forward import ForwardConfig, simulate
    from ..planar.sensors import SensorConfig, simulate_measurements
    from ..ros.params import load_params_file

    rate = a.rate or 200.0
    system = load_mechanism(str(mechanism))
    wall0 = time.perf_counter()
    print(f'1/3 simulating {mechanism} for {a.duration:g} s (free fall, dt 1 ms) ...',
          flush=True)
    prog = Progress(a.duration, 'simulate')
    traj = simulate(system, a.duration, ForwardConfig(dt=1e-3), progress=prog)
    prog.close()
    t_sim = time.perf_counter() - wall0
    sensors = SensorConfig(encoder_rate=rate, encoder_counts=4096, encoder_sigma=0.002,
                           imu_rate=rate, gyro_sigma=0.01, accel_sigma=0.05)
    meas = simulate_measurements(system, traj.t, traj.q, traj.qd, traj.qdd, sensors,
                                 np.random.default_rng(a.seed))
    name = system.description.name
    bag = out / f'{name}_sim'
    count = write_simulation_bag(bag, system, traj, meas)
    sensors_said = 'encoders and IMU' if system.description.sensors else 'encoders'
    print(f'2/3 wrote {count} messages to {bag} (MCAP): {sensors_said} at {rate:g} Hz, '
          'ground truth, /clock', flush=True)
    params = load_params_file(config_path('estimator.yaml'))
    params['frequency'] = rate       # tick at the sensor rate: readings fall on the ticks
    res = replay(bag, mechanism, params, output=out / f'{name}_estimates',
                 plot=out / f'{name}_demo.png')
    print(f'3/3 replayed through the estimator: {len(res.times)} ticks at '
          f'{params.get("frequency")} Hz', flush=True)
    _report(accuracy_table(system, traj, meas, res), res, t_sim, a.duration)


def _spatial(urdf: str, overlay: str | None, a: argparse.Namespace, out: Path) -> None:
    """The URDF demo: a 6R arm follows a reference under computed torque, with encoders
    (4096 counts + 0.05°), motor efforts and its wrist IMU; record, replay, compare."""
    from .replay import replay
    from ..ros.params import load_params_file
    from ..spatial.sensor_sim import (SpatialSensorConfig, reference_motion,
                                     simulate_spatial_measurements, track_reference)

    rate = a.rate or 500.0
    system = load_mechanism(urdf, overlay or '')
    wall0 = time.perf_counter()
    print(f'1/3 simulating {urdf} for {a.duration:g} s (following a reference under computed '
          'torque, dt 1 ms) ...', flush=True)
    traj = track_reference(system, reference_motion(system, a.duration, 1e-3, seed=a.seed))
    t_sim = time.perf_counter() - wall0
    sensors = SpatialSensorConfig(encoder_rate=rate, encoder_counts=4096,
                                  encoder_sigma=float(np.radians(0.05)), effort_sigma=0.0,
                                  imu_rate=rate, gyro_sigma=0.005, accel_sigma=0.05)
    meas = simulate_spatial_measurements(system, traj.t, traj.q, traj.qd, traj.qdd, traj.tau,
                                         sensors, np.random.default_rng(a.seed))
    name = system.description.name
    bag = out / f'{name}_sim'
    count = write_simulation_bag(bag, system, traj, meas)
    print(f'2/3 wrote {count} messages to {bag} (MCAP): {system.n} encoders with efforts and '
          f'{len(system.description.sensors)} IMU at {rate:g} Hz, ground truth, /clock',
          flush=True)
    params = load_params_file(config_path('estimator_urdf.yaml'))
    params['frequency'] = rate
    if overlay:
        params['overlay'] = str(overlay)
    res = replay(bag, urdf, params, output=out / f'{name}_estimates',
                 plot=out / f'{name}_demo.png')
    print(f'3/3 replayed through the estimator: {len(res.times)} ticks at '
          f'{params.get("frequency")} Hz', flush=True)
    _report(accuracy_table(system, traj, meas, res), res, t_sim, a.duration)
    print(torque_line(traj, res))


def torque_line(traj, res) -> str:
    """The estimated motor torques τ̂ against the applied ones (after the first 0.2 s)."""
    est = [(o.t_ns / 1e9 - T0, o.estimate.tau) for o in res.outputs
           if o.estimate is not None and o.t_ns / 1e9 - T0 >= 0.2]
    if not est:
        return 'torques        no estimate'
    k = np.clip(np.rint(np.array([t for t, _ in est]) / (traj.t[1] - traj.t[0])).astype(int),
                0, len(traj.t) - 1)
    err = np.array([tau for _, tau in est]) - traj.tau[k]
    rms = float(np.sqrt(np.mean(traj.tau[k] ** 2)))
    e = float(np.sqrt(np.mean(err ** 2)))
    return (f'torques        τ̂ RMSE {e:.3f} N·m against the applied motor torques '
            f'({100 * e / rms:.2f} % of their RMS {rms:.2f} N·m)')


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mbfg_ros.cli.demo``."""
    return run_cli(_main, argv, 'mbfg-demo')


if __name__ == '__main__':
    sys.exit(main())
