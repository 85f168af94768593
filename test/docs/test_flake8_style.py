"""Lint gate: ruff (rules E, F, W; see ruff.toml) over the package, tests, benchmarks, scripts."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    targets = [d for d in ('mbfg_ros', 'test', 'bench', 'scripts') if (ROOT / d).is_dir()]
    try:
        proc = subprocess.run(
            [sys.executable, '-m', 'ruff', 'check', '--no-cache', *targets],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
    except FileNotFoundError as exc:  # pragma: no cover
        raise AssertionError(f'cannot run ruff: {exc}') from exc
    if 'No module named ruff' in proc.stderr:
        raise AssertionError('ruff is not installed in this environment (make venv)')
    assert proc.returncode == 0, f'ruff found problems:\n{proc.stdout}\n{proc.stderr}'
