"""Checks of the shared ROS test helpers (test/support/ros_data.py)."""
from __future__ import annotations

from support.ros_data import T0, fourbar_data, unique_domain


def test_fourbar_data_is_stamped_after_t0_and_sorted():
    _, traj, recs = fourbar_data()
    stamps = [r.t for r in recs]
    assert stamps == sorted(stamps)
    assert stamps[0] == T0 and abs(stamps[-1] - (T0 + traj.t[-1])) < 1e-9


def test_unique_domain_is_a_valid_domain_id_distinct_per_offset():
    ids = [unique_domain(k) for k in range(90)]
    assert all(0 <= d <= 101 for d in ids), ids      # valid on every RMW
    assert len(set(ids)) == 90, 'two offsets of one process share a domain'
