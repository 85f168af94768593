"""The README a newcomer reads first: reachable commands, links and files that exist, lists
that end before the next paragraph (issue 14)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / 'README.md').read_text()


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for k, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        if not fenced:
            out.append((k, line))
    return out


def test_readme_says_how_to_reach_the_commands():
    assert 'source .venv/bin/activate' in README
    setup = (ROOT / 'setup.py').read_text()
    for cmd in re.findall(r"'(mbfg-[a-z]+) = ", setup):
        assert cmd in README.split('## Use it on your robot')[0], cmd


def test_benchmark_tables_live_in_benchmarks_md_linked_from_the_readme():
    bench = (ROOT / 'BENCHMARKS.md').read_text()
    assert '[BENCHMARKS.md](BENCHMARKS.md)' in README
    for table in ('Seed 000 Table 3: inverse dynamics CPU time', 'Four-bar free fall, 5 s',
                  'RMSE so far mm', 'scenario                                         crank'):
        assert table in bench and table not in README, table


def test_every_file_the_docs_and_configs_name_exists():
    texts = [README, (ROOT / 'BENCHMARKS.md').read_text()]
    texts += [p.read_text() for p in sorted((ROOT / 'config').glob('*.yaml'))]
    named = set()
    for text in texts:
        named |= set(re.findall(r'\b((?:test|config|bench)/[\w./-]+\.(?:py|yaml|txt|md))',
                                text))
    assert 'test/test_statics_equilibrium.py' in named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, missing


def test_no_paragraph_runs_into_the_list_above_it():
    lines = _prose(README)
    bad = []
    for (_, prev), (k, line) in zip(lines, lines[1:]):
        in_list = bool(re.match(r'\s*([-*]|\d+\.)\s', prev)) or (prev.startswith('  ')
                                                                and prev.strip())
        starts_paragraph = bool(line.strip()) and not line[0].isspace() and not re.match(
            r'([-*]\s|[|#>]|\d+\.\s)', line)
        if in_list and starts_paragraph:
            bad.append(f'README.md:{k}: {line[:50]}')
    assert not bad, bad


def test_readme_statics_section_shows_the_balance_check():
    section = README.split('### Statics and reactions you can check')[1].split('\n## ')[0]
    for word in ('force_balance', 'moment_balance', 'pivot_on_bar', 'saddle', '--no-stable',
                 'test/test_reactions_balance.py'):
        assert word in section, word


def test_the_readme_balance_check_runs_and_balances():
    section = README.split('### Statics and reactions you can check')[1].split('\n## ')[0]
    code = section.split('```python\n')[1].split('```')[0]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        ns: dict = {}
        exec(compile(code, 'README.md', 'exec'), ns)      # noqa: S102 (our own README)
    finally:
        os.chdir(cwd)
    assert ns['eq'].verdict == 'stable'
    assert np.linalg.norm(ns['force_balance']) < 1e-9
    assert abs(ns['moment_balance']) < 1e-9
    assert np.allclose(ns['pivot'], [11.0819, 9.0014], atol=1e-4)
    assert abs(ns['couple'] + 1.2809) < 1e-4
