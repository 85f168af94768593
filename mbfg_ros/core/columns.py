"""One naming of CSV columns for every CSV the tools read and write (issue 30 item 1).

===========================  ===============================================================
``t``                        time, s (readers also accept ``time``)
``<name>.<quantity>``        a value of a coordinate, joint or actuator ``name``; quantity is
                             ``position``, ``velocity``, ``acceleration``, ``effort`` (torque
                             or force) or ``command``
``<name>.<quantity>_std``    its standard deviation (the estimator's marginals)
``<name>.effort_measured``   a logged effort written next to a computed ``<name>.effort``
``<name>.fx``, ``.fy``,      a planar joint reaction: force components, couple
``.m``
``phi_norm``, ``status``...  scalars of the row, plain names
===========================  ===============================================================

Readers take the columns of this convention and, so that files written before it still
load, the older names (``position_<joint>``, ``velocity_<joint>``, ``effort_<joint>``,
``<name>``, ``<name>_dot``, ``<name>_ddot``, ``tau_<name>``, ``<name>.position``...).
Documented once, in docs/cli.md (CSV columns).
"""
from __future__ import annotations

from typing import Sequence

__all__ = ['TIME', 'QUANTITIES', 'column', 'columns', 'legacy_names', 'time_column',
           'find_columns']

TIME = 't'
QUANTITIES = ('position', 'velocity', 'acceleration', 'effort', 'command')
_LEGACY_TIME = ('time',)


def column(name: str, quantity: str, suffix: str = '') -> str:
    """``<name>.<quantity>[_suffix]``: ``column('elbow', 'position', 'std')`` is
    ``elbow.position_std``."""
    if quantity not in QUANTITIES:
        raise ValueError(f'quantity {quantity!r}: expected one of {", ".join(QUANTITIES)}')
    return f'{name}.{quantity}' + (f'_{suffix}' if suffix else '')


def columns(names: Sequence[str], quantity: str, suffix: str = '') -> list[str]:
    """:func:`column` of each name, in order."""
    return [column(n, quantity, suffix) for n in names]


def legacy_names(name: str, quantity: str) -> tuple[str, ...]:
    """Names the same column had before the convention, most common first."""
    return {
        'position': (f'position_{name}', name),
        'velocity': (f'velocity_{name}', f'{name}_dot'),
        'acceleration': (f'acceleration_{name}', f'{name}_ddot'),
        'effort': (f'effort_{name}', f'tau_{name}'),
        'command': (f'command_{name}',),
    }[quantity]


def time_column(header: Sequence[str]) -> str | None:
    """The time column of a header: ``t``, else the older ``time``; None when neither."""
    for name in (TIME, *_LEGACY_TIME):
        if name in header:
            return name
    return None


def find_columns(header: Sequence[str], names: Sequence[str], quantity: str
                 ) -> list[str] | None:
    """Per name, the header's column for ``quantity``: ``<name>.<quantity>``, else an older
    name (:func:`legacy_names`). None when some name has neither (the caller decides
    whether that quantity is required and says which column it wanted)."""
    present = set(header)
    out = []
    for name in names:
        found = next((c for c in (column(name, quantity), *legacy_names(name, quantity))
                      if c in present), None)
        if found is None:
            return None
        out.append(found)
    return out
