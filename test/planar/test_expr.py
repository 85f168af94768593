"""The safe expression evaluator of the mechanism format."""
import math

import pytest

from mbfg_ros.core.errors import ExpressionError
from mbfg_ros.planar.expr import evaluate


@pytest.mark.parametrize('text, expected', [
    ('(1/3)*mass*length^2', 4.0 * 9.0 / 3.0),      # '^' binds tighter than '*'
    ('2^3^2', 2.0 ** 9),                           # right-associative power
    ('-L^2', -4.0),
    ('x1+5*cos(45*pi/180)', 1.0 + 5 * math.cos(math.pi / 4)),
    ('deg2rad(180)', math.pi),
    ('rad2deg(pi/2)', 90.0),
    ('atan2(1, 1)', math.pi / 4),
    ('sqrt(abs(-16))', 4.0),
    ('tan(0)', 0.0),
    (3, 3.0),
    (2.5, 2.5),
])
def test_evaluate_accepts_the_upstream_grammar(text, expected):
    names = {'mass': 3.0, 'length': 3.0, 'L': 2.0, 'x1': 1.0}
    if text == '(1/3)*mass*length^2':
        names['mass'] = 4.0
    assert evaluate(text, names) == pytest.approx(expected)


@pytest.mark.parametrize('text, message', [
    ('foo + 1', "unknown name 'foo'"),
    ('__import__("os")', "unknown function '__import__'"),
    ('(1).real', 'unsupported construct'),
    ('[1, 2]', 'unsupported construct'),
    ('1 +', 'cannot parse'),
    ('1/0', 'cannot evaluate'),
    ('sqrt(-1)', 'cannot evaluate'),
    ('x if 1 else 2', 'unsupported construct'),
    ('lambda: 1', 'unsupported construct'),
])
def test_evaluate_rejects_everything_else_with_a_clear_message(text, message):
    with pytest.raises(ExpressionError, match=message):
        evaluate(text, {'x': 1.0})


def test_evaluate_rejects_booleans_and_other_types():
    with pytest.raises(ExpressionError, match='expected a number'):
        evaluate(True)
    with pytest.raises(ExpressionError, match='expected a number'):
        evaluate([1.0])
