"""The package's folders draw its architecture (issue 23): data flows one way, and the two
formulations sit behind one door.

Layers, lowest first (an import may only go to the same folder or a lower layer):

    core                      interface (the Protocols), errors, records, angles, bag, ...
    planar, spatial           the two formulations, each with its own problems
    simulation                forward dynamics over the interface
    estimation                the estimator, its gate, observations, command law
    loader                    the one place that chooses planar or spatial
    ros                       the nodes and the ROS edge
    cli                       the command-line tools and the demo

``core``, ``simulation``, ``estimation`` and ``ros`` never import ``planar`` or
``spatial``, nor ask which formulation they hold (no ``hasattr``/``getattr``/
``isinstance`` probes of a formulation, no ``.mech``)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / 'mbfg_ros'

LAYERS = {'core': 0, 'planar': 1, 'spatial': 1, 'simulation': 2, 'estimation': 3,
          'loader': 4, 'ros': 5, 'cli': 6}
SHARED = ('core', 'simulation', 'estimation', 'ros')
FORMULATIONS = ('planar', 'spatial')

# Ways shared code used to ask which formulation it holds (issue 23's list).
PROBES = [
    r'\.mech\b',
    r"hasattr\([^)]*'(joint_angular|constraints|forces|z_idx|scalar_orientation|mech)'",
    r"getattr\([^)]*'(joint_angular|constraints|forces|z_idx|scalar_orientation|mech)'",
    r'\.scalar_orientation\b',
    r'\.joint_angular\b',
    r'\.z_idx\b',
    r'\bself\.spatial\b',
    r'isinstance\([^)]*\b(Mechanism|System|SpatialSystem|SpatialDescription|SensorModel|'
    r'SpatialSensorModel)\b',
]


def _folder(module: str) -> str | None:
    """'mbfg_ros.estimation.gate' -> 'estimation'; 'mbfg_ros.loader' -> 'loader'."""
    parts = module.split('.')
    if parts[0] != 'mbfg_ros' or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix('')
    parts = list(rel.parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every mbfg_ros import in ``path``, at any depth."""
    module = _module_of(path)
    package = module if path.name == '__init__.py' else module.rsplit('.', 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith('mbfg_ros')]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[:len(base) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ''
            if not target.startswith('mbfg_ros'):
                continue
            if node.module is None or node.level and not node.module:
                out += [(node.lineno, f'{target}.{a.name}') for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def _sources() -> list[Path]:
    return sorted(p for p in PKG.rglob('*.py') if '__pycache__' not in p.parts)


def violations(paths: list[Path]) -> tuple[list[str], list[str]]:
    """(upward imports, shared-to-formulation imports)."""
    upward, door = [], []
    for path in paths:
        src = _folder(_module_of(path))
        if src is None:
            continue
        for line, target in imports(path):
            dst = _folder(target)
            if dst is None or dst == src:
                continue
            where = f'{path.relative_to(ROOT)}:{line} imports {target}'
            if LAYERS[dst] > LAYERS[src]:
                upward.append(where)
            if src in SHARED and dst in FORMULATIONS:
                door.append(where)
    return upward, door


def probes(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        folder = _folder(_module_of(path))
        if folder not in SHARED:
            continue
        for k, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split('#', 1)[0]
            for pattern in PROBES:
                if re.search(pattern, code):
                    out.append(f'{path.relative_to(ROOT)}:{k}: {line.strip()}')
    return out


def test_every_module_lives_in_a_layer_folder():
    loose = [p.name for p in PKG.glob('*.py')
             if p.name not in ('__init__.py', 'loader.py', 'demo.py')]
    assert not loose, f'modules outside the layer folders: {loose}'


def test_no_import_runs_up_a_layer():
    upward, _ = violations(_sources())
    assert not upward, '\n'.join(upward)


def test_shared_layers_never_import_a_formulation():
    _, door = violations(_sources())
    assert not door, '\n'.join(door)


def test_shared_layers_never_ask_which_formulation_they_hold():
    found = probes(_sources())
    assert not found, '\n'.join(found)


def test_no_import_cycle_between_folders():
    edges: dict[str, set[str]] = {}
    for path in _sources():
        src = _folder(_module_of(path))
        for _, target in imports(path):
            dst = _folder(target)
            if src and dst and dst != src:
                edges.setdefault(src, set()).add(dst)
    cycles = _cycles(edges)
    assert not cycles, cycles


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth, type-checking ones too);
    ``from pkg import name`` counts as pkg.name where that is a module, else pkg."""
    modules = {_module_of(p) for p in _sources()}
    graph: dict[str, set[str]] = {}
    for path in _sources():
        src = _module_of(path)
        for _, target in imports(path):
            while target and target not in modules:
                target = target.rpartition('.')[0]
            if target and target != src and not src.startswith(target + '.'):
                graph.setdefault(src, set()).add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    seen, stack, cycles = set(), [], []

    def visit(node: str) -> None:
        if node in stack:
            cycles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            visit(nxt)
        stack.pop()
    for node in sorted(graph):
        visit(node)
    return cycles


def test_no_import_cycle_between_modules():
    """Data flows one way inside a folder too: where a class is the door to algorithms
    that take it (a System's integrator, sensor models, end stops), those modules declare
    the Protocol they take instead of importing the class (issue 23's layout)."""
    cycles = _cycles(_module_graph())
    assert not cycles, cycles


def test_the_cycle_check_finds_a_cycle():
    graph = _module_graph()
    graph.setdefault('mbfg_ros.planar.sensors', set()).add('mbfg_ros.planar.dynamics')
    assert ['mbfg_ros.planar.dynamics', 'mbfg_ros.planar.sensors',
            'mbfg_ros.planar.dynamics'] in _cycles(graph)


@pytest.mark.parametrize('code, kind', [
    ('from ..planar.model import Mechanism\n', 'door'),
    ('from ..ros.params import read\n', 'upward'),
    ('x = system.mech.joints\n', 'probe'),
    ("if hasattr(sys, 'constraints'):\n    pass\n", 'probe'),
])
def test_the_checks_catch_a_planted_violation(tmp_path, code, kind, monkeypatch):
    fake = PKG / 'estimation' / '_planted_for_test.py'
    monkeypatch.setattr(Path, 'read_text', _reader(fake, code))
    upward, door = violations([fake])
    found = {'door': door, 'upward': upward, 'probe': probes([fake])}[kind]
    assert found, f'{kind} not caught in {code!r}'


def _reader(fake: Path, code: str):
    real = Path.read_text

    def read_text(self, *a, **k):
        return code if self == fake else real(self, *a, **k)
    return read_text
