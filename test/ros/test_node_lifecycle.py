"""Process life cycle of both nodes over real DDS: clean shutdown under the signals a terminal
and ``ros2 launch`` send.

Ctrl-C in a terminal sends SIGINT to the whole process group; launch then sends its own
SIGINT and, after a timeout, SIGTERM. Each node runs in its own process group
(``start_new_session``); the test waits until the node is up (its first message received, not
a fixed sleep), sends a signal sequence to the group with ``os.killpg`` and checks the exit
code 0 and that nothing was printed as a traceback.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support.ros_data import fourbar_path, ros_env, unique_domain

pytestmark = pytest.mark.ros

SEQUENCES = {
    'one SIGINT': [signal.SIGINT],
    'two SIGINTs 50 ms apart': [signal.SIGINT, 0.05, signal.SIGINT],
    'SIGINT then SIGTERM': [signal.SIGINT, 0.05, signal.SIGTERM],
    'SIGTERM alone': [signal.SIGTERM],
}
# what each node publishes once it is spinning, and its parameters
NODES = {
    'estimator_node': ('/diagnostics', 'DiagnosticArray',
                       {'mechanism': fourbar_path(), 'frequency': 100.0}),
    'simulator_node': ('/joint_states', 'JointState',
                       {'mechanism': fourbar_path(), 'realtime': 'true', 'publish_rate': 100.0}),
}


def start_in_own_group(module: str, params: dict, domain: int, log_path):
    args = [sys.executable, '-m', f'mbfg_ros.ros.{module}', '--ros-args']
    for k, v in params.items():
        args += ['-p', f'{k}:={v}']
    log = open(log_path, 'w')
    proc = subprocess.Popen(args, env=ros_env(domain), stdout=log, stderr=subprocess.STDOUT,
                            cwd=log_path.parent, start_new_session=True)
    log.close()
    return proc


def wait_for_first_message(domain: int, topic: str, short: str, proc, timeout: float = 60.0):
    """Spin a private rclpy context until ``topic`` delivers one message (or the node died)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from mbfg_ros.ros import conversions as cv

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    try:
        node = rclpy.create_node('lifecycle_probe', context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        got = []
        node.create_subscription(cv.message_class(short), topic, got.append, 10)
        deadline = time.monotonic() + timeout
        while not got:
            assert proc.poll() is None, f'the node exited early with {proc.returncode}'
            assert time.monotonic() < deadline, f'no message on {topic} after {timeout:g} s'
            ex.spin_once(timeout_sec=0.05)
        ex.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def send_to_group(proc, sequence) -> None:
    pgid = os.getpgid(proc.pid)
    for item in sequence:
        if isinstance(item, float):
            time.sleep(item)            # the spacing of the signals under test, not a wait
        else:
            os.killpg(pgid, item)


def finish(proc, timeout: float = 30.0) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
        proc.wait(5)
        raise AssertionError(f'the node did not exit within {timeout:g} s of the signals')


@pytest.mark.parametrize('sequence', SEQUENCES, ids=list(SEQUENCES))
@pytest.mark.parametrize('module', NODES)
def test_signals_to_the_process_group_end_the_node_with_0_and_no_traceback(module, sequence,
                                                                          tmp_path):
    topic, short, params = NODES[module]
    domain = unique_domain(40 + list(NODES).index(module))
    log_path = tmp_path / f'{module}.log'
    proc = start_in_own_group(module, params, domain, log_path)
    try:
        wait_for_first_message(domain, topic, short, proc)
        send_to_group(proc, SEQUENCES[sequence])
        code = finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
            proc.wait(5)
    out = log_path.read_text()
    assert code == 0, f'exit code {code}\n{out}'
    assert 'Traceback' not in out and 'KeyboardInterrupt' not in out, out
