"""Every parameter of the estimator and simulator nodes, declared once.

The table (:data:`ESTIMATOR_PARAMS`, :data:`SIMULATOR_PARAMS`) gives name,
default, description and range; :func:`declare` turns it into
``ParameterDescriptor`` declarations on a node, :func:`parse_estimator`
validates the values and builds the frozen
:class:`~mbfg_ros.estimation.estimator.EstimatorConfig` the core receives
(generate_parameter_library's habit: one place, one frozen object).
The replay tool reads the same table from a ROS parameters file
(:func:`load_params_file`), so the node and the replay agree on names,
defaults and validation. No rclpy import at module level.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ..core.errors import MbfgError
from ..estimation.control import KD_MAX, KP_MAX
from ..estimation.estimator import EstimatorConfig

_CONFIG_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EstimatorConfig)}

__all__ = ['ParameterError', 'ParamSpec', 'ESTIMATOR_PARAMS', 'SIMULATOR_PARAMS',
           'EstimatorSettings', 'SimulatorSettings', 'ValuesByName', 'declare', 'read',
           'parse_estimator', 'parse_simulator', 'load_params_file', 'defaults', 'check_live',
           'NOISE_PARAMS', 'noise_note']


class ParameterError(MbfgError):
    """A node parameter (or parameters file entry) is invalid; the message names it."""


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``kind`` is double, int, bool, string or string_array."""

    name: str
    default: Any
    description: str
    kind: str = 'double'
    lo: float | None = None
    hi: float | None = None
    config: bool = False          # True: an EstimatorConfig field of the same name
    live: bool = False            # True: ros2 param set changes it while running


def _cfg(name: str) -> Any:
    """Default of an EstimatorConfig field: the one source of the estimator's defaults."""
    value = _CONFIG_DEFAULTS[name]
    return list(value) if isinstance(value, tuple) else value


def _estimator_params() -> tuple[ParamSpec, ...]:
    big = 1e9
    return (
        ParamSpec('mechanism', '', 'Path of the mechanism: a planar YAML (joints, actuators, '
                  'sensors) or a URDF file (then see overlay).', 'string'),
        ParamSpec('robot_description', '', 'URDF text of the robot (the usual ROS parameter, '
                  'from a launch file or a parameters file; on the command line give the file '
                  'as mechanism instead); used when mechanism is empty.', 'string'),
        ParamSpec('overlay', '', 'Path of the URDF overlay YAML: IMUs, loop joints, '
                  'actuators, limits, gravity, q0 (URDF robots only).', 'string'),
        ParamSpec('frequency', _cfg('frequency'),
                  'Tick rate in Hz: measurements are fused and outputs published at this '
                  'rate, on the node clock (use_sim_time respected).', lo=0.1, hi=10000.0,
                  config=True),
        ParamSpec('align_ticks', True, 'Put the tick grid on the encoders\' stamps: its '
                  'phase is the first JointState\'s stamp modulo the period (taken again after '
                  'a reset), so estimates go out as soon as their readings are in and the '
                  'readings sit at the ticks; false: ticks at whole multiples of the period.',
                  'bool'),
        ParamSpec('lag_duration', _cfg('lag_duration'),
                  'Fixed-lag smoother window in seconds; older measurements are dropped.',
                  lo=1e-3, hi=60.0, config=True),
        ParamSpec('sensor_timeout', _cfg('sensor_timeout'),
                  'Seconds without any measurement before diagnostics report silence.',
                  lo=1e-3, hi=3600.0, config=True),
        ParamSpec('encoder_sigma', _cfg('encoder_sigma'),
                  'Encoder (JointState.position) noise, rad or m.', lo=1e-9, hi=big, config=True,
                  live=True),
        ParamSpec('encoder_rate_sigma', _cfg('encoder_rate_sigma'),
                  'Joint rate (JointState.velocity) noise, rad/s or m/s.', lo=1e-9, hi=big,
                  config=True, live=True),
        ParamSpec('gyro_sigma', _cfg('gyro_sigma'),
                  'Gyroscope noise (Imu.angular_velocity: z on a planar mechanism, every '
                  'axis on a URDF robot), rad/s, used when the message covariance is zero.',
                  lo=1e-9, hi=big, config=True, live=True),
        ParamSpec('accel_sigma', _cfg('accel_sigma'),
                  'Accelerometer noise (Imu.linear_acceleration: x, y planar, every axis '
                  'on a URDF robot), m/s^2.', lo=1e-9,
                  hi=big, config=True, live=True),
        ParamSpec('orientation_sigma', _cfg('orientation_sigma'),
                  'IMU orientation noise (yaw planar, per axis on a URDF robot), rad.',
                  lo=1e-9, hi=big, config=True, live=True),
        ParamSpec('dynamics_sigma', _cfg('dynamics_sigma'),
                  'Uncertainty of the equations of motion (unmodelled forces), in units of '
                  'generalised acceleration.', lo=1e-9, hi=big, config=True, live=True),
        ParamSpec('unknown_effort_sigma', _cfg('unknown_effort_sigma'),
                  'Size of the unknown torque of an actuator whose effort JointState does not '
                  'give (N·m or N); 0: such an actuator applies zero torque (a passive '
                  'mechanism). Set it for a powered robot without effort feedback.', lo=0.0,
                  hi=big, config=True, live=True),
        ParamSpec('dynamics_sigma_length', _cfg('dynamics_sigma_length'),
                  'dynamics_sigma on point coordinates, m/s^2 (0: dynamics_sigma).',
                  lo=0.0, hi=big, config=True, live=True),
        ParamSpec('dynamics_sigma_angle', _cfg('dynamics_sigma_angle'),
                  'dynamics_sigma on angle coordinates, rad/s^2 (0: dynamics_sigma).',
                  lo=0.0, hi=big, config=True, live=True),
        ParamSpec('integrator_jerk_length', _cfg('integrator_jerk_length'),
                  'Integrator jerk bound on point coordinates, m/s^3 (0: integrator_jerk).',
                  lo=0.0, hi=big, config=True),
        ParamSpec('integrator_jerk_angle', _cfg('integrator_jerk_angle'),
                  'Integrator jerk bound on angle coordinates, rad/s^3 (0: integrator_jerk).',
                  lo=0.0, hi=big, config=True),
        ParamSpec('command_joints', list(_cfg('command_joints')),
                  'Order of the ~/torque_commands array: actuator names or the joints they '
                  'drive (a forward_command_controller joints list). Empty: the actuators in '
                  'order (the YAML actuators, or the overlay actuators of a URDF robot).',
                  'string_array', config=True),
        ParamSpec('kp', _cfg('kp'),
                  'Proportional gain of the computed-torque law on the actuated joints, 1/s^2 '
                  '(tracking and the PD hold).', lo=0.0, hi=KP_MAX, config=True, live=True),
        ParamSpec('kd', _cfg('kd'),
                  'Derivative gain of the computed-torque law on the actuated joints, 1/s '
                  '(tracking and the PD hold).', lo=0.0, hi=KD_MAX, config=True, live=True),
        ParamSpec('command_timeout', 0.0,
                  'No torque command while the newest reading the estimator used is older than '
                  'this many seconds (/diagnostics ERROR says why); 0: sensor_timeout. The '
                  'controller must have its own timeout too (docs/torque-commands.md).',
                  lo=0.0, hi=3600.0),
        ParamSpec('joint_states_topic', 'joint_states', 'Input JointState topic (encoders).',
                  'string'),
        ParamSpec('reference_topic', '~/reference',
                  'Input JointTrajectory topic with the desired motion of the actuated joints.',
                  'string'),
        ParamSpec('command_topic', '~/torque_commands',
                  'Output Float64MultiArray topic of actuator torques (command_joints order).',
                  'string'),
        ParamSpec('joint_rejection_threshold', _cfg('joint_rejection_threshold'),
                  'Innovation gate of encoder readings: Mahalanobis distance to the prediction '
                  'above which a reading is rejected (rejected_outlier); 0 turns it off.',
                  lo=0.0, hi=big, config=True),
        ParamSpec('imu_rejection_threshold', _cfg('imu_rejection_threshold'),
                  'Innovation gate of IMU readings (gyroscope, accelerometer, orientation); '
                  '0 turns it off.', lo=0.0, hi=big, config=True),
        ParamSpec('outlier_reset_time', _cfg('outlier_reset_time'),
                  'Seconds of one sensor\'s readings all rejected before the estimate is '
                  'taken as lost and re-initialised from the readings.', lo=1e-3, hi=3600.0,
                  config=True),
        ParamSpec('covariance_every', _cfg('covariance_every'),
                  'Marginal covariance (~/state_stddev) every k ticks.', 'int', lo=1,
                  hi=1_000_000, config=True),
        ParamSpec('future_tolerance', 0.25, 'Readings stamped more than this many seconds '
                  'ahead of the node clock are dropped (dropped.future).', lo=1e-3, hi=1e6),
        ParamSpec('diagnostics_period', 1.0, 'Seconds between /diagnostics messages (steady '
                  'clock, so they also come when the input or /clock stops).', lo=0.05,
                  hi=3600.0),
        ParamSpec('max_tick_load', 0.6, 'Fraction of one core the ticks may use; beyond it '
                  'ticks are merged (longer steps), readings are never dropped for it.',
                  lo=0.05, hi=1.0),
        ParamSpec('predict_between_ticks', False, 'While the max_tick_load budget holds the '
                  'due tick back, publish the newest smoothed estimate carried to the due grid '
                  'time by the model (a predicted estimate, ticks.predicted) and its torque '
                  'command, so an estimate goes out at every grid tick.', 'bool'),
        ParamSpec('predict_max_spacing', 5, 'With predict_between_ticks: the smoother ticks '
                  'at least every this many grid periods (its share of max_tick_load reserved '
                  'first); the predictions fill the rest of the budget and are thinned '
                  '(ticks.thinned) when it does not stretch (bench/predicted_estimates.py '
                  'prints the spacing that keeps the accuracy; 2 on an arm without effort '
                  'readings).', 'int', lo=1, hi=1000),
        ParamSpec('max_merge_ticks', 10, 'When behind, one tick may merge at most this many '
                  'grid ticks (a longer step); the rest follow in later ticks.', 'int', lo=1,
                  hi=1000),
        ParamSpec('executor', 'auto', 'How the node runs: auto (= loop: a tick loop on the '
                  'main thread polls the sensor topics and /clock, rclpy\'s '
                  'SingleThreadedExecutor serves the rest every few ms; every distro), single '
                  '(a callback per message under the SingleThreadedExecutor) or events '
                  '(the same under rclpy\'s EventsExecutor: Kilted, recent Jazzy; not '
                  'Humble).', 'string'),
        ParamSpec('markers_rate', 30.0, 'Rate of ~/markers (visualization_msgs/MarkerArray '
                  'of the estimated mechanism, for RViz/Foxglove), Hz, on the steady clock; '
                  '0 turns them off. Nothing is built while no one subscribes.', lo=0.0,
                  hi=1000.0),
        ParamSpec('frame_id', 'world', 'Frame of the markers (the mechanism plane is its '
                  'x-y plane).', 'string'),
        ParamSpec('marker_ellipses', True, 'Draw an uncertainty ellipse per moving point '
                  '(from the marginal standard deviations).', 'bool'),
        ParamSpec('ellipse_scale', 3.0, 'Semi-axes of the uncertainty ellipses in standard '
                  'deviations.', lo=0.1, hi=1000.0),
        ParamSpec('max_queue', 10000, 'Measurements kept waiting for a tick; beyond this the '
                  'oldest are dropped (bursts).', 'int', lo=1, hi=10_000_000),
        ParamSpec('jerk_process', _cfg('jerk_process'),
                  'Always bound the change of q̈ between ticks by integrator_jerk (not only '
                  'for unknown efforts), so that q̈ follows the encoders and not only the '
                  'dynamics: set it for ~/external_torques (docs/external-torques.md).',
                  'bool', config=True),
        ParamSpec('disturbance_process', _cfg('disturbance_process'),
                  'With measured efforts, bound the change of the mismatch qdd - qdd(q, qd, '
                  'tau) between ticks instead of qdd itself (implies jerk_process): a step of '
                  'the motor torques moves qdd with the model and only contacts show in '
                  '~/external_torques (docs/external-torques.md).', 'bool', config=True),
        ParamSpec('contact_threshold', 3.0,
                  'k of the contact flag (~/contact): a joint whose |external torque| exceeds '
                  'k times its sigma.', lo=0.0, hi=1e6),
        ParamSpec('contact_min_duration', 0.0,
                  'Seconds some joint must stay above contact_threshold before ~/contact '
                  'rises (0: the first tick above).', lo=0.0, hi=3600.0),
        ParamSpec('contact_effort_fraction', _cfg('contact_effort_fraction'),
                  'With measured efforts, the innovation gate allows an unseen contact torque '
                  'of this fraction of each joint effort limit on the encoders, so a push is '
                  'a disturbance, not an outlier (0: no such room).', lo=0.0, hi=10.0,
                  config=True),
        ParamSpec('external_effort_sigma', 0.0,
                  'Noise of the measured efforts (JointState.effort), N·m or N, added to the '
                  'sigma of ~/external_torques.', lo=0.0, hi=big),
        ParamSpec('external_wrench_link', '',
                  'URDF link of ~/external_wrench (geometry_msgs/WrenchStamped, link frame); '
                  'empty: no wrench.', 'string'),
        ParamSpec('external_wrench_damping', 1e-3,
                  'Damping of the least squares from the external torques to the wrench.',
                  lo=0.0, hi=big),
    )


def _simulator_params() -> tuple[ParamSpec, ...]:
    return (
        ParamSpec('mechanism', '', 'Path of the mechanism to simulate: a planar YAML or a URDF '
                  'file (then see overlay).', 'string'),
        ParamSpec('robot_description', '', 'URDF text of the robot to simulate (from a '
                  'launch file or a parameters file; on the command line give the file as '
                  'mechanism instead); used when mechanism is empty.', 'string'),
        ParamSpec('overlay', '', 'Path of the URDF overlay YAML (IMUs, loops, actuators, '
                  'limits, gravity, q0; URDF robots only).', 'string'),
        ParamSpec('dt', 1e-3, 'Integration step of the forward dynamics, s.', lo=1e-6, hi=1.0),
        ParamSpec('window', 2, 'Fixed-lag window of the factor-graph integrator (steps).',
                  'int', lo=2, hi=100),
        ParamSpec('joint_limits', True, 'True: joints stop at their position limits (a URDF '
                  "robot's <limit>/overlay limits: inelastic end stops; a planar YAML's "
                  'limits: position: stiff one-sided spring-dampers) and velocity-limit excess '
                  'is reported in the log and /diagnostics; False: limits ignored.', 'bool'),
        ParamSpec('duration', 0.0, 'Simulated seconds before the node exits with code 0; '
                  '0 runs until shut down.', lo=0.0, hi=1e7),
        ParamSpec('realtime', True, 'True: pace the simulation on the node clock; False: run as '
                  'fast as possible and publish /clock (offline runs).', 'bool'),
        ParamSpec('rate_scale', 1.0, 'Simulated seconds per clock second when realtime.',
                  lo=1e-3, hi=1e3),
        ParamSpec('publish_rate', 100.0, 'JointState / Imu publishing rate, Hz.', lo=0.1,
                  hi=10000.0),
        ParamSpec('encoder_resolution', 0.0, 'Encoder quantisation step (rad or m); 0: none.',
                  lo=0.0, hi=1.0),
        ParamSpec('encoder_sigma', 0.0, 'Encoder noise standard deviation, rad or m (0: '
                  'exact; config/simulator_noise.yaml has realistic values).', lo=0.0, hi=1e3),
        ParamSpec('encoder_rate_sigma', 0.0, 'Joint rate noise standard deviation, rad/s or '
                  'm/s.', lo=0.0, hi=1e3),
        ParamSpec('gyro_sigma', 0.0, 'Gyroscope noise standard deviation per axis, rad/s.',
                  lo=0.0, hi=1e3),
        ParamSpec('accel_sigma', 0.0, 'Accelerometer noise standard deviation per axis, '
                  'm/s^2.', lo=0.0, hi=1e3),
        ParamSpec('seed', 0, 'Random seed of the sensor noise.', 'int', lo=0, hi=2 ** 31 - 1),
        ParamSpec('record', False, 'Record everything published to a rosbag2 at `output`.',
                  'bool'),
        ParamSpec('output', 'simulation_bag', 'Path of the recorded bag directory.', 'string'),
        ParamSpec('storage', 'mcap', 'Bag storage: mcap or sqlite3.', 'string'),
        ParamSpec('markers_rate', 30.0, 'Rate of ~/markers (the true mechanism as a '
                  'visualization_msgs/MarkerArray, drawn in red), Hz; 0 turns them off.',
                  lo=0.0, hi=1000.0),
        ParamSpec('frame_id', 'world', 'Frame of the markers.', 'string'),
    )


ESTIMATOR_PARAMS = _estimator_params()
SIMULATOR_PARAMS = _simulator_params()

NOISE_PARAMS = ('encoder_resolution', 'encoder_sigma', 'encoder_rate_sigma', 'gyro_sigma',
                'accel_sigma')
"""The simulator's sensor-imperfection parameters (all 0 by default: exact readings)."""


def noise_note(values: Mapping[str, Any]) -> str | None:
    """The simulator's start-up note when every sensor is exact (issue 30 item 4), else None.

    Zero noise is the default (a model check); a user expecting robot-like readings is
    pointed to ``config/simulator_noise.yaml``.
    """
    if any(float(values.get(name, 0.0)) > 0.0 for name in NOISE_PARAMS):
        return None
    return ('sensor noise is off (' + ', '.join(NOISE_PARAMS) + ' are 0): the readings are '
            'the exact truth; for realistic ones pass --params-file '
            'config/simulator_noise.yaml or set them')


def defaults(specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """``{name: default}`` of a parameter table."""
    return {p.name: p.default for p in specs}


# ------------------------------------------------------------------ validation

def _check(spec: ParamSpec, value: Any, where: str) -> Any:
    def bad(what: str) -> ParameterError:
        return ParameterError(f'{where}: parameter {spec.name!r}: {what}, got {value!r}')

    if spec.kind == 'double':
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad('expected a number')
        value = float(value)
        if not math.isfinite(value):
            raise bad('expected a finite number')
    elif spec.kind == 'int':
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise bad('expected an integer')
    elif spec.kind == 'bool':
        if not isinstance(value, bool):
            raise bad('expected true or false')
    elif spec.kind == 'string':
        if not isinstance(value, str):
            raise bad('expected a string')
    elif spec.kind == 'string_array':
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, str) for v in value):
            raise bad('expected a list of strings')
        value = [v for v in value if v]
    if spec.lo is not None and value < spec.lo:
        raise bad(f'must be >= {spec.lo:g}')
    if spec.hi is not None and value > spec.hi:
        raise bad(f'must be <= {spec.hi:g}')
    return value


def _validated(specs: Sequence[ParamSpec], values: Mapping[str, Any], where: str
               ) -> dict[str, Any]:
    known = {p.name for p in specs}
    unknown = sorted(set(values) - known - {'use_sim_time'})
    if unknown:
        raise ParameterError(f'{where}: unknown parameter {unknown[0]!r} '
                             f'(known: {", ".join(sorted(known))})')
    out = {}
    for p in specs:
        out[p.name] = _check(p, values.get(p.name, p.default), where)
    return out


@dataclass(frozen=True)
class EstimatorSettings:
    """Everything the estimator node (or replay) needs besides the mechanism itself."""

    mechanism: str
    config: Any                 # EstimatorConfig
    values: Mapping[str, Any]   # every validated parameter value


class ValuesByName:
    """Validated parameter values read as attributes (``settings.frequency`` for
    ``settings.values['frequency']``) of a settings record with a ``values`` mapping."""

    values: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class SimulatorSettings(ValuesByName):
    """Validated simulator parameters."""

    values: Mapping[str, Any]


def parse_estimator(values: Mapping[str, Any], where: str = 'estimator_node',
                    require_mechanism: bool = True) -> EstimatorSettings:
    """Validate estimator parameters and build the frozen ``EstimatorConfig``.

    Parameters that are fields of ``EstimatorConfig`` are passed to it; the
    rest stay node settings.

    :raises ParameterError: unknown name, wrong type, out of range, no mechanism.
    """
    v = _validated(ESTIMATOR_PARAMS, values, where)
    if require_mechanism and not v['mechanism'] and not v['robot_description'].strip():
        raise ParameterError(f"{where}: parameter 'mechanism' (path of the mechanism YAML or "
                             "URDF) or 'robot_description' (URDF text) is required")
    if v['executor'] not in ('auto', 'loop', 'events', 'single'):
        raise ParameterError(f"{where}: parameter 'executor': expected auto, loop, events or "
                             f"single, got {v['executor']!r}")
    fields = {f.name for f in dataclasses.fields(EstimatorConfig)}
    kwargs = {p.name: v[p.name] for p in ESTIMATOR_PARAMS if p.config and p.name in fields}
    if 'command_joints' in kwargs:
        kwargs['command_joints'] = tuple(kwargs['command_joints'])
    try:
        config = EstimatorConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f'{where}: {exc}') from None
    return EstimatorSettings(v['mechanism'] or v['robot_description'], config, v)


def parse_simulator(values: Mapping[str, Any], where: str = 'simulator_node'
                    ) -> SimulatorSettings:
    """Validate simulator parameters.

    :raises ParameterError: unknown name, wrong type, out of range, no mechanism.
    """
    v = _validated(SIMULATOR_PARAMS, values, where)
    if not v['mechanism'] and not v['robot_description'].strip():
        raise ParameterError(f"{where}: parameter 'mechanism' (path of the mechanism YAML or "
                             "URDF) or 'robot_description' (URDF text) is required")
    if v['storage'] not in ('mcap', 'sqlite3'):
        raise ParameterError(f"{where}: parameter 'storage': expected mcap or sqlite3, "
                             f"got {v['storage']!r}")
    return SimulatorSettings(v)


# ------------------------------------------------------------------ rclpy glue

def declare(node: Any, specs: Sequence[ParamSpec]) -> None:
    """Declare every parameter of ``specs`` on an rclpy node with its descriptor.

    Typing is dynamic (an integer given for a double is accepted and checked
    by :func:`read`'s validation), so a wrong type ends in one clear error
    line instead of an rclpy exception.
    """
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    for p in specs:
        d = ParameterDescriptor(
            description=p.description + (' Live: ros2 param set changes it while running.'
                                         if p.live else ''),
            dynamic_typing=True, read_only=not p.live)
        if p.kind == 'double' and p.lo is not None and p.hi is not None:
            d.floating_point_range = [FloatingPointRange(from_value=float(p.lo),
                                                         to_value=float(p.hi))]
            d.dynamic_typing = True
        if p.kind == 'int' and p.lo is not None and p.hi is not None:
            d.integer_range = [IntegerRange(from_value=int(p.lo), to_value=int(p.hi), step=0)]
        try:
            node.declare_parameter(p.name, p.default, d)
        except Exception as exc:  # noqa: BLE001 - rclpy's range/type exceptions -> one line
            reason = getattr(exc, 'args', [''])[-1] if len(getattr(exc, 'args', ())) > 2 \
                else str(exc)
            raise ParameterError(f'{node.get_name()}: parameter {p.name!r}: {reason}'
                                 ) from None


def check_live(specs: Sequence[ParamSpec], changes: Mapping[str, Any], where: str
               ) -> dict[str, Any]:
    """Validate a live change (``ros2 param set``) of parameters of ``specs``.

    Returns the validated values by name (numbers as float).

    Names outside ``specs`` (rclpy's own, such as ``use_sim_time``) are left out, as
    rclpy asks of parameter callbacks.

    :raises ParameterError: a parameter of ``specs`` that is not live, a wrong type or
        a value out of range; the message says which and why.
    """
    by_name = {p.name: p for p in specs}
    out = {}
    for name, value in changes.items():
        spec = by_name.get(name)
        if spec is None:        # rclpy's own (use_sim_time...): not ours to refuse
            continue
        if not spec.live:
            live = ', '.join(p.name for p in specs if p.live)
            raise ParameterError(f'{where}: parameter {name!r} is fixed at start-up '
                                 f'(live: {live})')
        out[name] = _check(spec, value, where)
    return out


def read(node: Any, specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """Current values of the declared parameters of ``specs``."""
    out = {}
    for p in specs:
        value = node.get_parameter(p.name).value
        if p.kind == 'string_array' and value is None:
            value = []
        out[p.name] = list(value) if isinstance(value, (tuple, list)) else value
        if p.kind == 'string_array' and hasattr(value, 'tolist'):
            out[p.name] = value.tolist()
    return out


# ------------------------------------------------------------------ parameter files

def load_params_file(path: str | Path, node_name: str = 'estimator_node') -> dict[str, Any]:
    """Parameters for ``node_name`` from a ROS 2 parameters file.

    Reads ``/**: ros__parameters`` and then ``<node_name>: ros__parameters``
    (a namespaced ``/ns/<node_name>`` too), the latter overriding, as
    ``ros2 run ... --params-file`` does.

    :raises ParameterError: unreadable file or not in the ROS parameters format.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ParameterError(f'{path}: parameters file not found') from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        line = f' line {mark.line + 1}' if mark is not None else ''
        raise ParameterError(f'{path}:{line}: not valid YAML') from None
    if not isinstance(data, dict):
        raise ParameterError(f'{path}: expected a mapping of node names to ros__parameters')
    out: dict[str, Any] = {}
    found = False
    for key in ['/**'] + [k for k in data if k != '/**']:
        if key not in data:
            continue
        if key != '/**' and key.rstrip('/').split('/')[-1] != node_name:
            continue
        entry = data[key]
        if not isinstance(entry, dict) or not isinstance(entry.get('ros__parameters'), dict):
            raise ParameterError(f'{path}: {key}: expected a ros__parameters mapping')
        out.update(entry['ros__parameters'])
        found = True
    if not found:
        raise ParameterError(f"{path}: no '/**' or '{node_name}' entry with ros__parameters")
    return out
