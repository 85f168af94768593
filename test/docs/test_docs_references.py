"""Every name the docs give exists (issue 23, "Docs by topic").

README.md, BENCHMARKS.md and docs/*.md name files (``mbfg_ros/...py``, ``config/...``,
``launch/...``, ``bench/...``, ``test/...``, ``docs/...``), Python modules
(``mbfg_ros.x.y`` or an attribute ``mbfg_ros.x.y.Name``), command-line flags next to an
``mbfg-*`` command and, in docs/node-reference.md, node parameters. Code moves; these tests
make the docs move with it. The helpers are tested on names that do not exist, so each check
is known to be able to fail.
"""
from __future__ import annotations

import functools
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / 'README.md', ROOT / 'BENCHMARKS.md'] + sorted((ROOT / 'docs').glob('*.md'))
TOOLS = ('simulate', 'inverse', 'statics', 'replay', 'identify', 'demo')


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _text(path: Path) -> str:
    return path.read_text(encoding='utf-8')


# ------------------------------------------------------------------ what the docs name

PATH_RE = re.compile(r'(?<![\w/.-])((?:mbfg_ros|config|launch|bench|test|docs|scripts)/'
                     r'[\w./-]*[\w/])')
LAUNCH_RE = re.compile(r'(?<![\w/.-])(\w+\.launch\.py)\b')
MODULE_RE = re.compile(r'(?<![\w/.])(mbfg_ros(?:\.\w+)+)')
LINK_RE = re.compile(r'\]\(([^)\s]+)\)')
TOOL_RE = re.compile(r'(?:\bmbfg-(simulate|inverse|statics|replay|identify)\b'
                     r'|\bmbfg_ros(?:\.cli)?\.(demo)\b)')
FLAG_RE = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')
HEADING_RE = re.compile(r'^(#{1,6})\s+(.*)$')


def named_paths(text: str) -> set[str]:
    """Repository paths named in ``text`` (``mbfg_ros/...``, ``config/...``, ...)."""
    return {m.rstrip('/') for m in PATH_RE.findall(text)}


def missing_paths(names: set[str], root: Path = ROOT) -> list[str]:
    """Paths that do not exist. A shell prefix (``d=test/data/dfki/run`` used as
    ``${d}_01.csv``) counts when files ``<prefix>_*`` exist."""
    out = []
    for name in sorted(names):
        p = root / name
        if not p.exists() and not list(p.parent.glob(p.name + '_*')):
            out.append(name)
    return out


def named_modules(text: str) -> set[str]:
    """Dotted names ``mbfg_ros.x.y[.Name]`` in ``text``."""
    return set(MODULE_RE.findall(text))


def missing_modules(names: set[str]) -> list[str]:
    """Dotted names that are neither importable modules nor attributes of one (importlib)."""
    out = []
    for name in sorted(names):
        parts = name.split('.')
        obj, k = None, len(parts)
        while k > 0:
            try:
                obj = importlib.import_module('.'.join(parts[:k]))
                break
            except ModuleNotFoundError as exc:
                if exc.name is not None and not '.'.join(parts[:k]).startswith(exc.name):
                    raise                     # a real import error inside the package
                k -= 1
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            obj = None
        if obj is None:
            out.append(name)
    return out


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) per section; fenced code lines are kept, headings inside fences not."""
    out: list[tuple[str, list[str]]] = [('', [])]
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
        m = None if fenced else HEADING_RE.match(line)
        if m:
            out.append((m.group(2), []))
        else:
            out[-1][1].append(line)
    return out


def _commands(text: str) -> list[tuple[str, str]]:
    """(tool, command text) for each mbfg-* command in ``text``: in a fenced block, from the
    tool's name to the end of the line, continued over ``\\`` and indented synopsis lines;
    in prose, an inline code span that starts with the tool."""
    out = []
    fenced, current = False, None
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            fenced, current = not fenced, None
            continue
        if fenced:
            m = TOOL_RE.search(line)
            if m:
                body = re.split(r'\s#', line[m.start():], maxsplit=1)[0]
                current = [m.group(1) or m.group(2), body]
                out.append(current)
            elif current is not None and (line.startswith((' ', '\t')) and line.strip()):
                current[1] += ' ' + re.split(r'\s#', line, maxsplit=1)[0]
            else:
                current = None
        else:
            for span in re.findall(r'`([^`]+)`', line):
                m = TOOL_RE.match(span.strip())
                if m:
                    out.append([m.group(1) or m.group(2), span])
    return [(tool, body) for tool, body in out]


def named_flags(text: str) -> set[tuple[str, str]]:
    """(tool, --flag) pairs: flags in an mbfg-* command line or inline command, and inline
    ``--flag`` spans (table cells included) in a section whose heading names one tool."""
    pairs = {(tool, f) for tool, body in _commands(text) for f in FLAG_RE.findall(body)}
    for heading, lines in _sections(text):
        tools = set(re.findall(r'\bmbfg-(simulate|inverse|statics|replay|identify)\b', heading))
        if len(tools) != 1:
            continue
        tool = tools.pop()
        fenced = False
        for line in lines:
            if line.lstrip().startswith('```'):
                fenced = not fenced
                continue
            if fenced:
                continue
            for span in re.findall(r'`(--[a-z][^`]*)`', line):
                pairs.add((tool, FLAG_RE.match(span).group(1)))
    return pairs


@functools.lru_cache(maxsize=None)
def tool_flags(tool: str) -> frozenset[str]:
    """The flags of ``python -m mbfg_ros.cli.<tool> --help``."""
    r = subprocess.run([sys.executable, '-m', f'mbfg_ros.cli.{tool}', '--help'],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, (tool, r.stderr[-2000:])
    return frozenset(FLAG_RE.findall(r.stdout))


def missing_flags(pairs: set[tuple[str, str]]) -> list[str]:
    return sorted(f'mbfg-{t} {f}' for t, f in pairs if f not in tool_flags(t))


def named_parameters(text: str) -> set[tuple[str, str]]:
    """(node, parameter) from the tables of node-reference.md whose first column is
    ``name`` or ``parameter``; the node is the one the nearest heading names (``estimator``,
    ``simulator``, or ``any`` when it names neither or both)."""
    out = set()
    for heading, lines in _sections(text):
        h = heading.lower()
        node = ('estimator' if 'estimator' in h and 'simulator' not in h else
                'simulator' if 'simulator' in h and 'estimator' not in h else 'any')
        in_table = False
        for line in lines:
            if not line.startswith('|'):
                in_table = False
                continue
            cells = [c.strip() for c in line.strip('|').split('|')]
            if not in_table:
                in_table = cells[0] in ('name', 'parameter')
                continue
            if set(cells[0]) <= set('-: '):
                continue
            for name in cells[0].replace('`', '').split(','):
                out.add((node, name.strip()))
    return out


def node_parameter_names() -> dict[str, set[str]]:
    from mbfg_ros.ros.params import ESTIMATOR_PARAMS, SIMULATOR_PARAMS
    est = {p.name for p in ESTIMATOR_PARAMS}
    sim = {p.name for p in SIMULATOR_PARAMS}
    return {'estimator': est, 'simulator': sim, 'any': est | sim}


def missing_parameters(pairs: set[tuple[str, str]]) -> list[str]:
    known = node_parameter_names()
    return sorted(f'{node}: {name}' for node, name in pairs if name not in known[node])


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r'[^\w\- ]', '', heading.strip().lower().replace('`', ''))
    return h.replace(' ', '-')


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading, _ in _sections(text)[1:]:
        a = anchor(heading)
        n = seen.get(a, 0)
        out.add(a if n == 0 else f'{a}-{n}')
        seen[a] = n + 1
    return out


def broken_links(path: Path) -> list[str]:
    """Relative links (and their #anchors) of ``path`` that lead nowhere."""
    text = _text(path)
    out = []
    for target in LINK_RE.findall(text):
        if re.match(r'[a-z]+:', target):
            continue
        file, _, frag = target.partition('#')
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f'{_rel(path)}: {target}')
        elif frag and dest.suffix == '.md' and frag not in anchors(_text(dest)):
            out.append(f'{_rel(path)}: {target} (no such heading)')
    return out


# ------------------------------------------------------------------ the helpers can fail

def test_the_helpers_find_wrong_names():
    text = """See `mbfg_ros/core/nope.py`, `config/nope.yaml` and `bench/estimator.py`.
Python: `mbfg_ros.core.nope`, `mbfg_ros.core.bag.NoSuchThing`, `mbfg_ros.core.bag`.

```bash
mbfg-simulate config/fourbar.yaml --no-such-flag 3 \\
    --duration 1
mbfg-statics config/spring_pendulum.yaml --output eq.csv   # not --bogus-comment
```

Old form: `mbfg-replay BAG --not-a-replay-flag`.

## mbfg-identify options

| option | meaning |
|---|---|
| `--weights auto` | fine |
| `--no-such-identify-flag` | wrong |

## estimator_node parameters

| name | default | meaning |
|---|---|---|
| frequency, no_such_param | 500 | x |
| dt | 1e-3 | a simulator parameter, not the estimator's |
"""
    assert missing_paths(named_paths(text)) == ['config/nope.yaml', 'mbfg_ros/core/nope.py']
    assert missing_modules(named_modules(text)) == ['mbfg_ros.core.bag.NoSuchThing',
                                                    'mbfg_ros.core.nope']
    flags = named_flags(text)
    assert ('simulate', '--duration') in flags and ('statics', '--bogus-comment') not in flags
    assert missing_flags(flags) == ['mbfg-identify --no-such-identify-flag',
                                    'mbfg-replay --not-a-replay-flag',
                                    'mbfg-simulate --no-such-flag']
    params = named_parameters(text)
    assert ('estimator', 'frequency') in params
    assert missing_parameters(params) == ['estimator: dt', 'estimator: no_such_param']


def test_anchors_follow_github():
    assert anchor("Seed 002's factor graph on a URDF robot") == \
        'seed-002s-factor-graph-on-a-urdf-robot'
    assert anchor('Live parameters (`ros2 param set`)') == 'live-parameters-ros2-param-set'
    assert anchor('Forward dynamics: seed 000 Table 1') == 'forward-dynamics-seed-000-table-1'


# ------------------------------------------------------------------ the docs

@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_every_named_file_exists(doc):
    assert not missing_paths(named_paths(_text(doc))), _rel(doc)
    launch = sorted(n for n in set(LAUNCH_RE.findall(_text(doc)))
                    if not (ROOT / 'launch' / n).exists())
    assert not launch, launch


@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_every_named_module_imports(doc):
    assert not missing_modules(named_modules(_text(doc))), _rel(doc)


@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_every_named_cli_flag_exists(doc):
    assert not missing_flags(named_flags(_text(doc))), _rel(doc)


@pytest.mark.parametrize('doc', DOCS, ids=_rel)
def test_every_link_leads_somewhere(doc):
    assert not broken_links(doc)


def test_every_node_parameter_in_the_reference_exists_and_every_one_is_there():
    text = _text(ROOT / 'docs' / 'node-reference.md')
    named = named_parameters(text)
    assert len(named) > 40
    assert not missing_parameters(named)
    known = node_parameter_names()
    documented = {name for _, name in named}
    assert not sorted(known['any'] - documented)


def test_the_docs_name_the_cli_flags_they_document():
    """Enough flags are found that the check means something."""
    found = set().union(*(named_flags(_text(d)) for d in DOCS))
    for tool in ('simulate', 'inverse', 'statics', 'replay', 'identify'):
        assert sum(t == tool for t, _ in found) >= 3, tool
