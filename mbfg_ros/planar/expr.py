"""Safe evaluation of the arithmetic expressions used in mechanism YAML files.

The upstream format (seed 000, Listing 1) writes lengths, masses and inertias as
expressions such as ``(1/3)*mass*length^2``. They are parsed with :mod:`ast`
and evaluated by walking the tree: only numbers, names from the given
namespace, ``+ - * / ^ **``, parentheses and a fixed set of functions are
accepted. Python's ``eval`` is never used.
"""
from __future__ import annotations

import ast
import math
from typing import Callable, Mapping

from ..core.errors import ExpressionError

__all__ = ['evaluate', 'FUNCTIONS', 'CONSTANTS', 'MAX_EXPRESSION']

#: Longest expression accepted (characters): a bound checked before parsing, so a
#: hostile file cannot exhaust the stack or memory of the parser (issue 26). The
#: longest expression of the shipped configs is under 60 characters.
MAX_EXPRESSION = 1000

FUNCTIONS: Mapping[str, Callable[..., float]] = {
    'sin': math.sin, 'cos': math.cos, 'tan': math.tan,
    'asin': math.asin, 'acos': math.acos, 'atan': math.atan, 'atan2': math.atan2,
    'sqrt': math.sqrt, 'abs': abs, 'exp': math.exp, 'log': math.log,
    'deg2rad': math.radians, 'rad2deg': math.degrees,
    'min': min, 'max': max,
}
CONSTANTS: Mapping[str, float] = {'pi': math.pi, 'e': math.e}

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a ** b,
}
_UNARY = {ast.UAdd: lambda a: +a, ast.USub: lambda a: -a}


def evaluate(text: str | int | float, names: Mapping[str, float] | None = None) -> float:
    """Evaluate an arithmetic expression and return a float.

    :param text: the expression, or a number (returned as a float).
    :param names: the variables the expression may use (parameters, ``x1``...).
    :raises ExpressionError: on syntax errors, unknown names or functions,
        disallowed constructs, or arithmetic errors (division by zero...).
    """
    if isinstance(text, bool):
        raise ExpressionError(f'expected a number or an expression, got {text!r}')
    if isinstance(text, (int, float)):
        # YAML numbers (``.nan``, ``.inf``, a 400-digit integer) are checked like expressions
        try:
            value = float(text)
        except OverflowError:
            raise ExpressionError(f'number too large: {str(text)[:20]}... '
                                  f'({len(str(text))} digits)') from None
        if not math.isfinite(value):
            raise ExpressionError(f'number {text!r} is not finite')
        return value
    if not isinstance(text, str):
        raise ExpressionError(f'expected a number or an expression, got {type(text).__name__}')
    if len(text) > MAX_EXPRESSION:
        raise ExpressionError(f'expression of {len(text)} characters, longer than the '
                              f'{MAX_EXPRESSION} accepted: {text[:20]!r}...')
    names = names or {}
    try:
        # '^' is power in the upstream format; Python parses it as XOR, with a
        # lower precedence than '*', so it is rewritten before parsing.
        tree = ast.parse(text.strip().replace('^', '**'), mode='eval')
    except (SyntaxError, ValueError):
        raise ExpressionError(f'cannot parse expression {text!r}') from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f'expression nested too deeply: {text[:20]!r}...') from None
    try:
        value = _eval(tree.body, names, text)
    except ExpressionError:
        raise
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ExpressionError(f'cannot evaluate {text!r}: {exc}') from None
    except RecursionError:
        raise ExpressionError(f'expression nested too deeply: {text[:20]!r}...') from None
    if not math.isfinite(value):
        raise ExpressionError(f'expression {text!r} is not finite ({value})')
    return float(value)


def _eval(node: ast.AST, names: Mapping[str, float], text: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id in names:
            return float(names[node.id])
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        known = ', '.join(sorted(set(names) | set(CONSTANTS))) or 'none'
        raise ExpressionError(f'unknown name {node.id!r} in {text!r} (known: {known})')
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names, text),
                                      _eval(node.right, names, text))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names, text))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn = FUNCTIONS.get(node.func.id)
        if fn is None:
            raise ExpressionError(f'unknown function {node.func.id!r} in {text!r}')
        return float(fn(*[_eval(a, names, text) for a in node.args]))
    raise ExpressionError(f'unsupported construct in expression {text!r}')
