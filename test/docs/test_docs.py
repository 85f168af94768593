"""The README a newcomer reads first and the docs by topic: reachable commands, a short README,
every measured table once (in BENCHMARKS.md, under its command), lists that end before the
next paragraph, a balance you can check (issues 14 and 23). Names (files, modules, flags,
parameters, links) are checked by test_docs_references.py."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / 'README.md').read_text()
BENCH = (ROOT / 'BENCHMARKS.md').read_text()
PAGES = ('urdf-arms', 'planar-yaml', 'node-reference', 'running-on-a-robot', 'real-hardware',
         'science', 'architecture', 'cli')
DOCS = {p.name: p.read_text() for p in sorted((ROOT / 'docs').glob('*.md'))}


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


def _section(text: str, heading: str) -> str:
    """The text under the heading that starts with ``heading``, up to the next heading of
    the same or a higher level (headings inside fenced code do not count)."""
    out, level, fenced = None, 0, False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
        m = None if fenced else re.match(r'(#+) (.*)', line)
        if out is None:
            if m and m.group(2).startswith(heading):
                out, level = [], len(m.group(1))
        elif m and len(m.group(1)) <= level:
            break
        else:
            out.append(line)
    assert out is not None, heading
    return '\n'.join(out)


def _table_rows(text: str) -> list[str]:
    """Measured rows: Markdown table rows and fenced output lines that carry numbers."""
    rows, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        s = line.strip()
        if s.startswith('|') and not set(s) <= set('|-: ') and re.search(r'\d\.\d', s):
            rows.append(s)
        elif fenced and re.search(r'\d\.\d.*\d\.\d', s) and len(s) > 40:
            rows.append(s)
    return rows


def test_readme_is_short_and_links_every_docs_page():
    assert len(README.splitlines()) <= 400
    for page in PAGES:
        assert (ROOT / 'docs' / f'{page}.md').exists(), page
        assert f'(docs/{page}.md)' in README, page
    assert '[BENCHMARKS.md](BENCHMARKS.md)' in README


def test_readme_says_how_to_reach_the_commands():
    quick = README.split('## Use it on your robot')[0]
    assert 'source .venv/bin/activate' in quick
    for make in ('make demo', 'make test', 'make test-jazzy'):
        assert make in quick, make
    setup = (ROOT / 'setup.py').read_text()
    commands = re.findall(r"'(mbfg-[a-z]+) = ", setup)
    assert len(commands) >= 5
    for cmd in commands:
        assert cmd in quick, cmd


def test_every_bench_script_has_its_section_and_command():
    scripts = sorted(p.name for p in (ROOT / 'bench').glob('*.py') if p.name != 'common.py')
    assert len(scripts) >= 10
    for name in scripts:
        assert f'python bench/{name}' in BENCH, name
    assert 'bench/common.py' in BENCH


def test_every_benchmark_table_follows_its_command():
    """In each section of BENCHMARKS.md, the first table comes after a ``python bench/`` line."""
    for section in re.split(r'\n(?=#{2,3} )', BENCH):
        rows = _table_rows(section)
        if not rows:
            continue
        before = section.split(rows[0])[0]
        assert re.search(r'python bench/\w+\.py', before), section.splitlines()[0]


def test_benchmark_tables_live_in_benchmarks_md_once():
    for table in ('Seed 000 Table 3: inverse dynamics CPU time', 'Four-bar free fall, 5 s',
                  'RMSE so far mm', 'scenario                                         crank',
                  '| fourbar | 100 Hz enc + IMU | 100 Hz | quiet |', 'puma560 (6R)      QR µs',
                  'numpy τ+J', '| 01 | rigid | 0.193 (r 0.89)', '| nominal | 0.93 / 1.15 |'):
        assert BENCH.count(table) == 1, table
        assert table not in README, table
        for name, text in DOCS.items():
            assert table not in text, (name, table)
    rows = _table_rows(BENCH)
    assert len(rows) > 100
    dup = sorted({r for r in rows if rows.count(r) > 1})
    assert not dup, dup[:5]
    for name, text in [('README.md', README)] + list(DOCS.items()):
        again = [r for r in _table_rows(text) if r in rows]
        assert not again, (name, again[:3])


def test_every_file_the_configs_name_exists():
    named = set()
    for p in sorted((ROOT / 'config').rglob('*')):
        if p.suffix not in ('.yaml', '.md'):
            continue
        named |= set(re.findall(r'\b((?:test|config|bench)/[\w./-]+\.(?:py|yaml|txt|md))',
                                p.read_text()))
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, missing


@pytest.mark.parametrize('name', ['README.md', 'BENCHMARKS.md'] + sorted(DOCS))
def test_no_paragraph_runs_into_the_list_above_it(name):
    text = (ROOT / name).read_text() if name in ('README.md', 'BENCHMARKS.md') else DOCS[name]
    lines = _prose(text)
    bad = []
    for (_, prev), (k, line) in zip(lines, lines[1:]):
        in_list = bool(re.match(r'\s*([-*]|\d+\.)\s', prev)) or (prev.startswith('  ')
                                                                and prev.strip())
        starts_paragraph = bool(line.strip()) and not line[0].isspace() and not re.match(
            r'([-*]\s|[|#>]|\d+\.\s)', line)
        if in_list and starts_paragraph:
            bad.append(f'{name}:{k}: {line[:50]}')
    assert not bad, bad


def test_statics_docs_show_the_verdicts_and_the_balance_check():
    cli = _section(DOCS['cli.md'], 'mbfg-statics')
    for word in ('saddle', '--no-stable', 'stable equilibrium at crank'):
        assert word in cli, word
    science = _section(DOCS['science.md'], 'Statics and reactions you can check')
    for word in ('force_balance', 'moment_balance', 'pivot_on_bar',
                 'test/planar/test_reactions_balance.py'):
        assert word in science, word


def test_the_docs_balance_check_runs_and_balances():
    section = _section(DOCS['science.md'], 'Statics and reactions you can check')
    code = section.split('```python\n')[1].split('```')[0]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        ns: dict = {}
        exec(compile(code, 'docs/science.md', 'exec'), ns)      # noqa: S102 (our own docs)
    finally:
        os.chdir(cwd)
    assert ns['eq'].verdict == 'stable'
    assert np.linalg.norm(ns['force_balance']) < 1e-9
    assert abs(ns['moment_balance']) < 1e-9
    assert np.allclose(ns['pivot'], [11.0819, 9.0014], atol=1e-4)
    assert abs(ns['couple'] + 1.2809) < 1e-4


def test_the_output_rules_and_the_load_checks_are_documented_with_the_codes_numbers():
    # issue 26: the numbers the docs give are the code's (a changed cap changes the docs)
    from mbfg_ros.core.trajectory import MAX_GAP
    from mbfg_ros.planar.expr import MAX_EXPRESSION
    from mbfg_ros.spatial.urdf import MAX_JOINTS, MAX_URDF_BYTES
    cli = _section(DOCS['cli.md'], 'Conventions')
    for word in ('--force', 'never an output', 'metadata.yaml', 'renamed into place',
                 'SIGTERM is handled like Ctrl-C', 'status 130', 'by SIGTERM: 143',
                 'simulator_node', f'longer than {MAX_GAP:g} median steps'):
        assert word in cli, word
    urdf = _section(DOCS['urdf-arms.md'], 'What is refused at load')
    for word in (f'{MAX_URDF_BYTES // 2 ** 20} MB', f'{MAX_JOINTS} joints', '<!DOCTYPE>',
                 'mass ≤ 0', 'positive definite', 'triangle inequality', 'NaN', 'lower > upper',
                 'IMU `topic`', 'same rigid body', 'test/data/hostile/'):
        assert word in urdf, word
    planar = _section(DOCS['planar-yaml.md'], 'What is refused at load')
    for word in ('NaN or infinite', f'over {MAX_EXPRESSION} characters', 'mass` below 0',
                 '`mass·|cog|²`', 'lower < upper', 'mass: 0', 'test/data/hostile/'):
        assert word in planar, word
