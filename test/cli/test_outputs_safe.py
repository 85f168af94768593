"""Issue 26, "No data lost": no tool destroys what it did not write.

An existing output is refused unless --force, an input never (not even with --force),
a directory that is not a bag never; outputs appear whole or not at all: a SIGTERM,
a SIGKILL or a full disk while writing leaves the old file as it was.
"""
from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.ros_data import REPO, fourbar_path

from mbfg_ros.cli.identify import main as identify_main
from mbfg_ros.cli.inverse import main as inverse_main
from mbfg_ros.cli.replay import main as replay_main
from mbfg_ros.cli.simulate import main as simulate_main
from mbfg_ros.cli.statics import main as statics_main

CONFIG = REPO / 'config'
OLD = 'old,contents\n1,2\n'


def _digest(path: Path) -> dict[str, str]:
    """File name → sha256 of every file under ``path``."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob('*')) if p.is_file()}


def _one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def _simulate(out: Path, *extra: str) -> list[str]:
    return [str(CONFIG / 'pendulum1.yaml'), '--duration', '0.02', '--dt', '0.01', '--quiet',
            '--output', str(out), *extra]


def test_an_existing_csv_is_refused_and_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / 'sim.csv'
    out.write_text(OLD)
    assert simulate_main(_simulate(out)) == 2
    _one_error_line(capsys.readouterr().err, str(out), '--force')
    assert out.read_text() == OLD
    assert simulate_main(_simulate(out, '--force')) == 0
    assert out.read_text().startswith('t,')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['sim.csv']     # no temporaries


@pytest.mark.parametrize('tool', ['simulate', 'inverse', 'statics', 'identify', 'replay'])
def test_an_input_is_never_an_output_even_with_force(tool, tmp_path, small_bag, capsys):
    yaml = tmp_path / 'm.yaml'
    yaml.write_text((CONFIG / 'fourbars1.yaml').read_text())
    traj = tmp_path / 'traj.txt'
    traj.write_text((CONFIG / 'fourbars1-with-rel-angle-trajectory.txt').read_text())
    before = {p: p.read_bytes() for p in (yaml, traj)}
    bag_before = _digest(small_bag)
    main, args, victim = {
        'simulate': (simulate_main, [str(yaml), '--duration', '0.02', '--output', str(yaml)],
                     yaml),
        'inverse': (inverse_main, [str(CONFIG / 'fourbars1-with-rel-angle.yaml'),
                                   '--trajectory', str(traj), '--output', str(traj)], traj),
        'statics': (statics_main, [str(yaml), '--output', str(yaml)], yaml),
        'identify': (identify_main, [str(yaml), '--measured', str(traj), '--output',
                                     str(yaml)], yaml),
        'replay': (replay_main, [str(fourbar_path()), str(small_bag), '--output',
                                 str(small_bag), '--quiet'], small_bag),
    }[tool]
    assert main(args + ['--force']) == 2
    _one_error_line(capsys.readouterr().err, str(victim), 'input')
    assert {p: p.read_bytes() for p in (yaml, traj)} == before
    assert _digest(small_bag) == bag_before


def test_replay_never_removes_a_directory_that_is_not_a_bag(tmp_path, small_bag, capsys):
    home = tmp_path / 'home'
    home.mkdir()
    (home / 'thesis.tex').write_text('years of work')
    for extra in ([], ['--force']):
        assert replay_main([str(fourbar_path()), str(small_bag), '--output', str(home),
                            '--csv', str(tmp_path / 'e.csv'), '--quiet', *extra]) == 2
        _one_error_line(capsys.readouterr().err, str(home))
        assert (home / 'thesis.tex').read_text() == 'years of work'


def test_replay_replaces_its_own_bag_only_with_force_and_whole(tmp_path, small_bag, capsys):
    out = tmp_path / 'est'
    args = [str(fourbar_path()), str(small_bag), '--output', str(out), '--quiet']
    assert replay_main(args) == 0
    first = _digest(out)
    assert sorted(first) == ['est.mcap', 'metadata.yaml']     # named after the bag, not a temp
    capsys.readouterr()
    assert replay_main(args) == 2                                     # exists: refused
    _one_error_line(capsys.readouterr().err, str(out), '--force')
    assert _digest(out) == first
    assert replay_main(args + ['--force']) == 0
    assert 'metadata.yaml' in _digest(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['est', 'est.csv']


def test_a_full_disk_is_one_line_and_leaves_the_old_output(tmp_path, monkeypatch, capsys):
    from mbfg_ros.core import output

    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output.os, 'fsync', full)
    out = tmp_path / 'sim.csv'
    out.write_text(OLD)
    assert simulate_main(_simulate(out, '--force')) == 2
    _one_error_line(capsys.readouterr().err, str(out), 'No space left on device')
    assert out.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ['sim.csv']


_WRITER = textwrap.dedent("""
    import sys, time
    from mbfg_ros.cli.common import run_cli
    from mbfg_ros.core.output import atomic_path

    def main(argv):
        with atomic_path(argv[0], 'CSV') as tmp:
            with open(tmp, 'w') as f:
                f.write('t,x\\n' * 1000)
                f.flush()
                print('ready', flush=True)
                time.sleep(60)
        return 0

    sys.exit(run_cli(main, sys.argv[1:], 'writer'))
""")


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_while_writing_leaves_the_old_file(sig, tmp_path):
    out = tmp_path / 'out.csv'
    out.write_text(OLD)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, '-c', _WRITER, str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert p.stdout.readline().strip() == 'ready'
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert out.read_text() == OLD
    if sig == signal.SIGKILL:
        return                          # nothing runs after SIGKILL: only the old file matters
    assert p.returncode == {signal.SIGTERM: 143, signal.SIGINT: 130}[sig]
    _one_error_line(err, 'writer: ')
    assert sorted(x.name for x in tmp_path.iterdir()) == ['out.csv']


def test_an_interrupt_cleans_up_even_when_sigint_was_inherited_ignored(tmp_path):
    """A job started with '&' by a non-interactive shell inherits SIGINT ignored; the tool
    must still take SIGINT as an interrupt (old file kept, one line, 130, no temporaries)."""
    out = tmp_path / 'out.csv'
    out.write_text(OLD)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, '-c', _WRITER, str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert p.stdout.readline().strip() == 'ready'
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert out.read_text() == OLD and p.returncode == 130
    _one_error_line(err, 'writer: ')
    assert sorted(x.name for x in tmp_path.iterdir()) == ['out.csv']
