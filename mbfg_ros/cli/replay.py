"""``mbfg-replay``: run the estimator over a recorded rosbag2, as fast as possible.

    mbfg-replay MECHANISM BAG [--params FILE] [--output OUT] [--plot FILE.png]

(the mechanism first, as in the other tools; the old ``mbfg-replay BAG --mechanism
YAML`` still works and prints a deprecation note).

Reads JointState and Imu messages (MCAP or sqlite3, through rosbags; no ROS
installation needed) and feeds them, converted exactly as the live node
converts them (:mod:`mbfg_ros.ros.conversions`), to the same
:class:`~mbfg_ros.ros.driver.EstimatorDriver` the node owns. The clock is the
message stamps: before queueing a message stamped ``s`` every grid tick
``< s`` runs, which is what the node does under ``use_sim_time`` when its
``/clock`` passes each tick after the messages stamped before it arrived; so
replay and live give the same estimates (the tests show it over DDS).

Writes the estimator's topics (same names and types as the node:
``/estimator_node/{joint_states,state,state_stddev,torque_commands}``,
``/diagnostics``; with efforts in the JointStates also ``external_torques``,
``external_torques_sigma``, ``contact`` and ``external_wrench``: docs/external-torques.md)
to ``OUT`` (a rosbag2 directory), a CSV ``OUT.csv`` and,
with ``--plot``, the estimated joints against the measured ones (and against
``*/ground_truth`` when the bag has it). A bag that breaks part-way still
gets everything estimated until then written out; the error is then printed
as one line and the exit status is 2. So is a bag whose JointState names match
none of the mechanism's joints (the message lists both).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..loader import load_mechanism, mechanism_warning
from ..core.columns import TIME, columns
from ..core.bag import BagError, BagWriter, bag_topics, read_messages, typestore
from ..core.output import atomic_dir, atomic_path, check_output
from ..ros import conversions as cv
from ..ros.driver import EstimatorDriver, TickOutput
from ..ros.params import ESTIMATOR_PARAMS, load_params_file, parse_estimator
from .replay_plot import plot_replay, truth_joint_positions  # noqa: F401 - re-exported
from .common import (
    Progress,
    add_force_argument,
    check_writable,
    plain,
    run_cli,
    speed_phrase,
)

__all__ = ['ReplayResult', 'replay', 'main', 'NODE', 'csv_header']

NODE = 'estimator_node'
NS = 1_000_000_000


def _absolute(topic: str, node: str = NODE) -> str:
    if topic.startswith('~'):
        return f'/{node}' + topic[1:]
    return topic if topic.startswith('/') else '/' + topic


@dataclass
class ReplayResult:
    """What a replay produced (arrays are per tick with an estimate)."""

    t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q: list = field(default_factory=list)
    qd: list = field(default_factory=list)
    joint_position: list = field(default_factory=list)
    joint_velocity: list = field(default_factory=list)
    command: list = field(default_factory=list)
    tick_seconds: list = field(default_factory=list)
    times: list = field(default_factory=list)
    measured: list = field(default_factory=list)  # (t, names, position, velocity, effort)
    truth: list = field(default_factory=list)           # (t, q, qd)
    outputs: list = field(default_factory=list)         # every TickOutput, in order
    messages: int = 0
    span: float = 0.0
    wall: float = 0.0
    error: str | None = None
    bag_joints: dict = field(default_factory=dict)     # JointState names seen, in order
    matched: int = 0                                  # JointState messages with a joint
    counters: dict = field(default_factory=dict)
    joint_names: tuple = ()
    coordinate_names: tuple = ()
    output: Path | None = None
    csv: Path | None = None
    plot: Path | None = None


def csv_header(coordinates: Sequence[str], joints: Sequence[str], commands: Sequence[str]
               ) -> list[str]:
    """Columns of the replay CSV (the convention of :mod:`mbfg_ros.core.columns`).

    ``t``; per coordinate ``.position``, ``.velocity`` and their ``_std`` (``~/state``,
    ``~/state_stddev``); per joint that is not a coordinate ``.position``, ``.velocity``;
    per joint the estimated torque τ̂ ``<joint>.effort`` (NaN on a joint no actuator
    drives; ``~/joint_states`` effort); per command ``<name>.command``; ``status``,
    ``tick_ms`` (issue 30 item 1).
    """
    coords = set(coordinates)
    only = [j for j in joints if j not in coords]
    return ([TIME] + columns(coordinates, 'position') + columns(coordinates, 'velocity')
            + columns(coordinates, 'position', 'std') + columns(coordinates, 'velocity', 'std')
            + columns(only, 'position') + columns(only, 'velocity') + columns(joints, 'effort')
            + columns(commands, 'command') + ['status', 'tick_ms'])


class _Sink:
    """Writes tick outputs to the output bag and the CSV as they come."""

    def __init__(self, driver: EstimatorDriver, output: Path | None, csv_path: Path | None,
                 storage: str, command_topic: str, result: ReplayResult) -> None:
        self.d = driver
        self.res = result
        self.store = typestore()
        self.kit = cv.rosbags_kit(self.store)
        self.msgs = cv.EstimateMessages(self.kit, driver.joint_names, driver.coordinate_names)
        self.ext_msgs = cv.ExternalMessages(self.kit, driver.external.names,
                                            driver.external.config.wrench_link)
        self.bag = BagWriter(output, storage, self.store) if output else None
        if self.bag is not None:
            self.bag.open()
        self.topics = {k: _absolute(k) for k in ('~/joint_states', '~/state', '~/state_stddev')}
        self.topics['~/torque_commands'] = _absolute(command_topic)
        self.topics.update({k: _absolute(k) for k in cv.EXTERNAL_TOPICS})
        self._next_diag: int | None = None
        self.csv_file = open(csv_path, 'w', newline='') if csv_path else None
        self.writer = csv.writer(self.csv_file) if self.csv_file else None
        # joints that are coordinates too (every URDF joint) are written once, as coordinates
        coords = set(driver.coordinate_names)
        self._joints_only = np.array([k for k, j in enumerate(driver.joint_names)
                                      if j not in coords], dtype=int)
        self._no_effort = np.full(len(driver.joint_names), np.nan)
        if self.writer:
            self.writer.writerow(csv_header(driver.coordinate_names, driver.joint_names,
                                            driver.law.names))

    def add(self, out: TickOutput) -> None:
        d, res = self.d, self.res
        res.outputs.append(out)
        est = out.estimate
        if est is not None:
            res.times.append(out.t_ns / NS)
            res.q.append(np.asarray(est.q, float))
            res.qd.append(np.asarray(est.qd, float))
            res.joint_position.append(np.asarray(est.joint_position, float))
            res.joint_velocity.append(np.asarray(est.joint_velocity, float))
            cmd = out.command if out.command is not None else np.full(len(d.law.names), np.nan)
            res.command.append(cmd)
            res.tick_seconds.append(est.tick_seconds)
            if self.writer:
                only = self._joints_only
                effort = out.joint_effort if out.joint_effort is not None else self._no_effort
                self.writer.writerow([f'{out.t_ns / NS:.9f}'] + [f'{v:.9g}' for v in np.r_[
                    est.q, est.qd, est.q_std, est.qd_std, np.asarray(est.joint_position)[only],
                    np.asarray(est.joint_velocity)[only], effort, cmd]]
                    + [out.message, f'{1e3 * est.tick_seconds:.3f}'])
        if self.bag is None:
            return
        if est is not None:
            self.msgs.fill(out.t_ns, est, out.joint_effort, out.command)
            for key, msg in self.msgs.by_topic.items():
                if key == '~/torque_commands' and out.command is None:
                    continue
                self.bag.write(self.topics[key], cv.TYPES[
                    'Float64MultiArray' if key == '~/torque_commands' else 'JointState'],
                    out.t_ns, msg)
            if out.external is not None and out.external.valid:
                self.ext_msgs.fill(out.t_ns, out.external)
                for key, msg in self.ext_msgs.by_topic.items():
                    self.bag.write(self.topics[key], cv.TYPES[cv.EXTERNAL_TOPICS[key]],
                                   out.t_ns, msg)
        if self._next_diag is None or out.t_ns >= self._next_diag:   # 1 Hz, as the node
            self._next_diag = out.t_ns + NS
            self.write_diagnostics(out.t_ns)

    def write_diagnostics(self, t_ns: int) -> None:
        if self.bag is None:
            return
        level, message, values = self.d.diagnostics()
        self.bag.write('/diagnostics', cv.TYPES['DiagnosticArray'], t_ns,
                       cv.diagnostics_msg(self.kit, t_ns, f'{NODE}: estimator',
                                          self.d.sys.description.name, level, message, values))

    def close(self) -> None:
        if self.bag is not None:
            self.bag.close()
        if self.csv_file is not None:
            self.csv_file.close()


def replay(bag: str | Path, mechanism: str | Path, params: dict | None = None,
           output: str | Path | None = None, csv_path: str | Path | None = None,
           plot: str | Path | None = None, storage: str = 'mcap',
           show_progress: bool = True) -> ReplayResult:
    """Replay ``bag`` through the estimator (see the module docstring).

    :raises BagError: after writing what was estimated, when the bag is
        missing, lacks the expected topics, or breaks part-way.
    """
    bag = Path(bag)
    values = dict(params or {})
    values['mechanism'] = str(mechanism)
    values.pop('use_sim_time', None)
    settings = parse_estimator(values, where='parameters')
    system = load_mechanism(settings.mechanism, settings.values['overlay'])
    if mechanism_warning(system):
        print(f'mbfg-replay: warning: {mechanism_warning(system)}', file=sys.stderr)
    driver = EstimatorDriver(system, settings)
    mech = system.description
    res = ReplayResult(joint_names=driver.joint_names,
                       coordinate_names=driver.coordinate_names)
    jtopic = _absolute(settings.values['joint_states_topic'])
    imu_topics = {_absolute(s.topic): s.name for s in mech.sensors}
    ref_topic = _absolute(settings.values['reference_topic'])
    have = bag_topics(bag)
    wanted = {jtopic: cv.TYPES['JointState'], ref_topic: cv.TYPES['JointTrajectory']}
    wanted.update({t: cv.TYPES['Imu'] for t in imu_topics})
    if not any(t in have for t in [jtopic, *imu_topics]):
        listing = ', '.join(f'{t} ({m})' for t, m in sorted(have.items())) or 'nothing'
        raise BagError(f'{bag}: none of the expected topics {jtopic}, '
                       f'{", ".join(imu_topics) or "(no IMUs)"}; the bag has: {listing}')
    truth_topics = [t for t, m in have.items()
                    if t.endswith('/ground_truth') and m == cv.TYPES['JointState']]
    wanted.update({t: cv.TYPES['JointState'] for t in truth_topics})
    out_path = Path(output) if output else None
    csv_p = Path(csv_path) if csv_path else (out_path.with_name(out_path.name + '.csv')
                                              if out_path else None)
    for path, what in ((out_path, 'bag'), (csv_p, 'CSV')):    # never the input (issue 26)
        check_output(path, what, force=True, inputs=(bag, mechanism),
                     directory=what == 'bag')
    res.output, res.csv = out_path, csv_p
    # issue 26: bag and CSV go to temporaries beside them, renamed into place only when the
    # replay ends (a bag breaking part-way included: what was estimated is kept); a signal
    # or an error removes them and leaves the old outputs as they were
    with contextlib.ExitStack() as outputs:
        bag_tmp = outputs.enter_context(atomic_dir(out_path, 'bag')) if out_path else None
        csv_tmp = outputs.enter_context(atomic_path(csv_p, 'CSV')) if csv_p else None
        sink = _Sink(driver, bag_tmp, csv_tmp, storage, settings.values['command_topic'], res)
        _feed(bag, driver, settings, sink, res, jtopic, imu_topics, ref_topic, truth_topics,
              wanted, have, show_progress)
    res.counters = dict(driver.counters)
    res.t = np.array(res.times)
    if res.bag_joints and not res.matched and driver.joint_names:
        raise BagError(f'{bag}: none of the joint names in {jtopic} is a joint of '
                       f'{mechanism}: the bag has {", ".join(res.bag_joints)}; the mechanism '
                       f'has {", ".join(driver.joint_names)} (its joints[].name must match '
                       'JointState.name)')
    if plot:
        res.plot = Path(plot)
        plot_replay(res, system, res.plot)
    if res.error:
        raise BagError(f'{res.error} (wrote what was estimated before: {len(res.times)} ticks)')
    return res


def _feed(bag: Path, driver: EstimatorDriver, settings: Any, sink: _Sink, res: ReplayResult,
          jtopic: str, imu_topics: dict, ref_topic: str, truth_topics: list, wanted: dict,
          have: dict, show_progress: bool) -> None:
    """Every message of ``bag`` through ``driver`` in stamp order, tick outputs to ``sink``."""
    first = last = None
    clock = None
    tolerance = max(float(getattr(settings.config, 'backwards_tolerance', 0.5)), 0.0)
    progress = None
    bag_joints = res.bag_joints            # JointState names seen, in order
    start = time.perf_counter()
    try:
        for m in read_messages(bag, {t: v for t, v in wanted.items() if t in have}):
            res.messages += 1
            if progress is None:
                span = _bag_span(bag)
                progress = Progress(span or 1.0, 'replay', enabled=show_progress)
            if m.topic in truth_topics:
                try:
                    res.truth.append((cv.stamp_ns(m.msg.header.stamp) / NS,
                                      np.asarray(m.msg.position, float),
                                      np.asarray(m.msg.velocity, float)))
                except Exception:  # noqa: BLE001
                    pass
                continue
            if m.topic == ref_topic:
                driver.reference_message(m.msg, m.log_ns)
                continue
            # the stamp clock: monotone, except a jump back beyond the tolerance (bag loop),
            # which the driver reads as a clock gone back (reset), as the live node does
            try:
                t = cv.stamp_ns(m.msg.header.stamp)
            except Exception:  # noqa: BLE001 - the driver counts the broken message
                t = 0
            if t > 0 and (clock is None or t > clock or t < clock - int(tolerance * NS)):
                clock = t
            if clock is not None:
                for out in driver.advance(clock, inclusive=False):
                    sink.add(out)
            if m.topic == jtopic:
                try:
                    bag_joints.update(dict.fromkeys(str(n) for n in m.msg.name))
                except TypeError:
                    pass
                rec = driver.joint_state(m.msg)
                if rec is not None:
                    res.matched += 1
                    res.measured.append((t / NS, rec.names, rec.position, rec.velocity,
                                         rec.effort))
            else:
                driver.imu(m.msg, imu_topics[m.topic])
            if t <= 0:
                continue
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
            progress.update((m.log_ns - _bag_start(bag)) / NS)
    except BagError as exc:
        res.error = str(exc)
    finally:
        if clock is not None:
            for out in driver.advance(clock, inclusive=True):
                sink.add(out)
            sink.write_diagnostics(clock)
        sink.close()
        if progress is not None:
            progress.close()
    res.wall = time.perf_counter() - start
    res.span = (last - first) / NS if first is not None else 0.0


_SPAN_CACHE: dict = {}


def _bag_meta(bag: Path) -> tuple[int, int]:
    key = str(bag)
    if key not in _SPAN_CACHE:
        from rosbags.rosbag2 import Reader
        try:
            with Reader(bag) as r:
                _SPAN_CACHE.clear()
                _SPAN_CACHE[key] = (r.start_time, r.end_time)
        except Exception:  # noqa: BLE001
            _SPAN_CACHE[key] = (0, 0)
    return _SPAN_CACHE[key]


def _bag_span(bag: Path) -> float:
    a, b = _bag_meta(bag)
    return max(b - a, 0) / NS


def _bag_start(bag: Path) -> int:
    return _bag_meta(bag)[0]


BAG_HELP = """\
What the bag must hold (a rosbag2 directory, MCAP or sqlite3, as written by
"ros2 bag record", simulator_node or the demo; no ROS installation is needed to read it):

  /joint_states        sensor_msgs/msg/JointState: the encoders. "name" lists joint
                       names of the mechanism (a URDF's movable joints; a planar
                       YAML's "joints:"); other names are ignored. "position" their
                       angles [rad] or slider positions [m]; "velocity" (optional)
                       their rates, "effort" (optional) the motor torques. Each
                       message carries its time in header.stamp.
  /imu/<name>          sensor_msgs/msg/Imu, one topic per IMU (a URDF overlay's
                       "imus:", a planar YAML's "sensors:"; its "topic" if given), in
                       the IMU's frame: URDF robot, angular_velocity [rad/s] and
                       linear_acceleration [m/s^2] on all three axes, orientation
                       when its covariance[0] is not -1; planar mechanism,
                       angular_velocity.z and linear_acceleration.x/.y.
  /estimator_node/reference (optional)
                       trajectory_msgs/msg/JointTrajectory: the desired motion of the
                       actuated joints, for the torque commands.
  */ground_truth (optional)
                       sensor_msgs/msg/JointState of the true coordinates (the
                       simulator's): plotted against the estimate.

At least one of the joint or IMU topics must be there. Topic names follow the
parameters file (joint_states_topic, reference_topic), as for the node.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='mbfg-replay',
                                usage='mbfg-replay [-h] MECHANISM BAG [--overlay YAML] '
                                      '[--params FILE] [--output DIR] [--csv FILE] [--plot FILE] '
                                      '[--storage {mcap,sqlite3}] [--quiet]',
                                description=plain(__doc__.split('\n\n')[0]),
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=BAG_HELP)
    p.add_argument('paths', nargs='+', metavar='MECHANISM BAG',
                   help='the mechanism (planar YAML or URDF), then the rosbag2 directory to '
                        'replay (see '
                        'below for what it must hold)')
    p.add_argument('--mechanism', help='deprecated: the old form "mbfg-replay BAG '
                   '--mechanism YAML"; give the mechanism first instead')
    p.add_argument('--overlay', help='overlay YAML of a URDF mechanism (IMUs, loops, '
                   'actuators, limits; same as the node parameter overlay)')
    p.add_argument('--params', help='ROS parameters file (estimator_node or /** '
                   'ros__parameters), as given to the node')
    p.add_argument('--output', help='output rosbag2 directory (default: BAG_estimates)')
    p.add_argument('--csv', help='CSV of the estimates (default: OUTPUT.csv): t; per '
                   'coordinate <name>.position, .velocity and their standard deviations '
                   '.position_std, .velocity_std; per other joint <joint>.position, .velocity; '
                   'the estimated torque per joint <joint>.effort; the commands '
                   '<name>.command; status, tick_ms (docs/cli.md, CSV columns)')
    p.add_argument('--plot', help='PNG with estimated vs measured joints')
    p.add_argument('--storage', choices=('mcap', 'sqlite3'), default='mcap',
                   help='storage of the output bag: mcap (one file, default) or sqlite3 '
                        '(the older rosbag2 default)')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    add_force_argument(p)
    return p


def _mechanism_and_bag(p: argparse.ArgumentParser, a: argparse.Namespace) -> tuple[str, str]:
    if a.mechanism is not None:
        if len(a.paths) != 1:
            p.error('with --mechanism give only BAG (better: mbfg-replay MECHANISM BAG)')
        print('mbfg-replay: note: --mechanism is deprecated; use '
              f'"mbfg-replay {a.mechanism} {a.paths[0]}"', file=sys.stderr)
        return a.mechanism, a.paths[0]
    if len(a.paths) != 2:
        p.error('expected MECHANISM BAG (the mechanism: a URDF or a planar YAML, then the bag '
                'directory)')
    return a.paths[0], a.paths[1]


def _main(argv: Sequence[str] | None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    mechanism, bag = _mechanism_and_bag(p, a)
    params = load_params_file(a.params, NODE) if a.params else {}
    if a.overlay:
        params['overlay'] = a.overlay
    unknown = set(params) - {p.name for p in ESTIMATOR_PARAMS} - {'use_sim_time'}
    if unknown:
        parse_estimator(params, where=str(a.params))      # raises, naming the key
    output = a.output or str(Path(bag).resolve()) + '_estimates'
    inputs = (mechanism, bag, a.params, a.overlay)
    check_writable(output, 'directory', a.force, inputs)
    check_writable(a.csv or output + '.csv', 'CSV', a.force, inputs)
    check_writable(a.plot, 'plot', a.force, inputs)
    res = replay(bag, mechanism, params, output=output, csv_path=a.csv, plot=a.plot,
                 storage=a.storage, show_progress=not a.quiet)
    ms = 1e3 * float(np.mean(res.tick_seconds)) if res.tick_seconds else float('nan')
    print(f'{res.messages} messages, {len(res.times)} ticks ({ms:.2f} ms per tick), '
          f'{res.span:.2f} s of data in {res.wall:.2f} s: {speed_phrase(res.wall, res.span)}')
    print(f'estimates: {res.output} (bag), {res.csv} (CSV)'
          + (f', {res.plot} (plot)' if res.plot else ''))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``mbfg-replay``."""
    return run_cli(_main, argv, 'mbfg-replay')


if __name__ == '__main__':
    raise SystemExit(main())
