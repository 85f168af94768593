#!/usr/bin/env python3
"""Soak of the live estimator_node: 1 kHz encoder + 1 kHz IMU over DDS for N minutes.

The same three processes as ``bench/node_throughput.py`` (node, load generator,
this monitor), ticks at 500 Hz, lag 0.1 s. Each minute it prints the node's
resident memory (VmRSS), the latency from a tick's stamp to the estimate's arrival
here (p50 / p99 over that minute), the node's own per-second latency p99 and
garbage-collector pauses (median / max of its ``/diagnostics`` over the minute), the
readings dropped so far and the node's CPU share. At the end: RSS flat within 5 %
after minute 1, and latency p99 at most 10 ms (the issue's targets).

    .venv/bin/python bench/node_soak.py [--minutes 10]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from node_throughput import ENC_SIGMA, MECH, NodeRun, cpu_seconds, make_data  # noqa: I001


def rss_mb(pid: int) -> float:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024.0
    return float('nan')


def node_side(diags: list, key: str = 'latency.ms_p99') -> str:
    """Median and max over ``diags`` of a per-period value of the node (by default its
    own latency p99, stamp to publish)."""
    x = [float(kv.value) for d in diags for kv in d.status[0].values
         if kv.key == key and kv.value != '-']
    return f'{np.median(x):.1f} / {max(x):.1f}' if x else '-'


def main(argv: list[str] | None = None) -> int:
    from mbfg_ros.ros import conversions as cv

    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--minutes', type=float, default=10.0)
    args = ap.parse_args(argv)
    duration = 60.0 * args.minutes
    tmp = Path(tempfile.mkdtemp())
    data = tmp / 'data.npz'
    print(f'soak: {args.minutes:g} min of 1 kHz encoder + IMU; computing the truth ...',
          flush=True)
    make_data(1000, duration, data)
    lat: list[float] = []
    on_state = lambda m: lat.append(  # noqa: E731
        (time.time_ns() - cv.stamp_ns(m.header.stamp)) / 1e6)
    params = {'mechanism': MECH, 'frequency': 500.0, 'lag_duration': 0.1,
              'encoder_sigma': ENC_SIGMA}
    rows = []
    with NodeRun(params, 60 + os.getpid() % 40, tmp / 'node.log', on_state) as run:
        pid = run.node.pid           # the wheels' re-exec keeps the pid
        gen = run.start_generator(data, tmp / 'start')
        print('| minute | node RSS MB | latency p50 / p99 ms | node-side p99 per s, median / '
              'max ms | GC pause per s, median / max ms | dropped so far (reason: n) | '
              'node CPU % | estimates |', flush=True)
        print('|---|---|---|---|---|---|---|---|', flush=True)
        minute = 0
        while gen.poll() is None and minute < args.minutes:
            lat.clear()
            first_diag = len(run.diags)
            cpu0, wall0 = cpu_seconds(pid), time.monotonic()
            run.spin_while(lambda: gen.poll() is None, 60.0)
            minute += 1
            v = run.last_diagnostics()
            dropped = {k.split('.', 1)[1]: int(x) for k, x in v.items()
                       if ('dropped' in k or 'rejected' in k) and x.isdigit() and int(x)}
            row = (minute, rss_mb(pid), float(np.percentile(lat, 50)) if lat else np.nan,
                   float(np.percentile(lat, 99)) if lat else np.nan,
                   100.0 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0), len(lat))
            rows.append(row)
            print(f'| {minute} | {row[1]:.1f} | {row[2]:.1f} / {row[3]:.1f} | '
                  f'{node_side(run.diags[first_diag:])} | '
                  f"{node_side(run.diags[first_diag:], 'gc.ms_max')} | "
                  f"{', '.join(f'{k}: {n}' for k, n in sorted(dropped.items())) or '-'} | "
                  f'{row[4]:.0f} | {row[5]} |', flush=True)
    if len(rows) >= 2:
        rss = [r[1] for r in rows[1:]]
        flat = (max(rss) - min(rss)) / rss[0] <= 0.05
        p99 = max(r[3] for r in rows)
        print(f'\nRSS after minute 1 within 5 %: {"PASS" if flat else "MISS"} '
              f'({min(rss):.1f} .. {max(rss):.1f} MB); latency p99 <= 10 ms: '
              f'{"PASS" if p99 <= 10 else "MISS"} (worst minute {p99:.1f} ms)')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
