"""The one CSV column convention (issue 30 item 1): names written, names read back, and the
older names still read."""
from __future__ import annotations

import pytest

from mbfg_ros.core.columns import column, columns, find_columns, time_column


def test_columns_are_name_dot_quantity_with_an_optional_suffix():
    assert column('elbow', 'position') == 'elbow.position'
    assert column('elbow', 'velocity', 'std') == 'elbow.velocity_std'
    assert columns(['a', 'b'], 'effort', 'measured') == ['a.effort_measured',
                                                          'b.effort_measured']
    with pytest.raises(ValueError, match="quantity 'speed'"):
        column('elbow', 'speed')


@pytest.mark.parametrize('header, quantity, expected', [
    (['t', 'a.position', 'b.position'], 'position', ['a.position', 'b.position']),
    (['time', 'position_a', 'position_b'], 'position', ['position_a', 'position_b']),
    (['t', 'a', 'b', 'a_dot', 'b_dot'], 'velocity', ['a_dot', 'b_dot']),
    (['t', 'a_ddot', 'b.acceleration'], 'acceleration', ['a_ddot', 'b.acceleration']),
    (['t', 'tau_a', 'effort_b'], 'effort', ['tau_a', 'effort_b']),
    (['t', 'a.position', 'position_a'], 'position', None),         # b missing
])
def test_readers_find_the_convention_first_then_the_older_names(header, quantity, expected):
    assert find_columns(header, ['a', 'b'], quantity) == expected


def test_the_convention_wins_over_an_older_name_in_the_same_file():
    assert find_columns(['t', 'position_a', 'a.position'], ['a'], 'position') == ['a.position']


def test_time_is_t_else_time():
    assert time_column(['t', 'time']) == 't'
    assert time_column(['time', 'x']) == 'time'
    assert time_column(['stamp']) is None
