#!/usr/bin/env python3
"""Soak of the live estimator_node: 1 kHz encoder + 1 kHz IMU over DDS for N minutes.

The same three processes as ``bench/node_throughput.py`` (node, load generator,
this monitor), ticks at 500 Hz, lag 0.1 s. Each minute it prints the node's
resident memory (VmRSS), the latency from a tick's stamp to the estimate's arrival
here (p50 / p99 over that minute), the node's own per-second latency p99 and
garbage-collector pauses (median / max of its ``/diagnostics`` over the minute), the
load generator's own lateness (its publish time − the stamp, per-second p99: a late
generator looks like a slow node), the readings dropped so far, the node's CPU share
and the whole machine's (busy and hypervisor-stolen, all cores). At the end: RSS flat
within 5 % after minute 1, and latency p99 at most 10 ms (the issue's targets).
``--trace FILE`` writes the per-second values as CSV.

    .venv/bin/python bench/node_soak.py [--minutes 10] [--trace soak.csv]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from node_throughput import (  # noqa: I001
    ENC_SIGMA, MECH, NodeRun, cpu_seconds, generator_lateness, make_data)


def rss_mb(pid: int) -> float:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024.0
    return float('nan')


def machine_jiffies() -> np.ndarray:
    """The machine's CPU time so far (all cores, /proc/stat): (busy, steal, total)."""
    f = np.array(Path('/proc/stat').read_text().split('\n', 1)[0].split()[1:], float)
    idle = f[3] + f[4]                               # idle + iowait
    return np.array([f[:8].sum() - idle - f[7], f[7], f[:8].sum()])


def node_side(diags: list, key: str = 'latency.ms_p99') -> str:
    """Median and max over ``diags`` of a per-period value of the node (by default its
    own latency p99, stamp to publish)."""
    x = [float(kv.value) for d in diags for kv in d.status[0].values
         if kv.key == key and kv.value != '-']
    return f'{np.median(x):.1f} / {max(x):.1f}' if x else '-'


def generator_late(late: dict[int, tuple[float, float]], minute: int) -> str:
    """Median and max over the seconds of ``minute`` (1-based) of the load generator's
    per-second p99 lateness (its publish time − the reading's stamp)."""
    x = [p99 for sec, (p99, _) in late.items() if 60 * (minute - 1) <= sec < 60 * minute]
    return f'{np.median(x):.1f} / {max(x):.1f}' if x else '-'


def write_trace(path: Path, diags: list, start_file: Path) -> None:
    """Per second of the run: the node's diagnostics (latency, ticks) and the generator's
    lateness over the same second (matched by the diagnostics' stamps)."""
    from mbfg_ros.ros import conversions as cv

    keys = ('latency.ms_p50', 'latency.ms_p99', 'ticks.rate_hz', 'ticks.ms_max', 'gc.ms_max')
    start = int(start_file.read_text())
    late = generator_lateness(start_file)
    with open(path, 'w') as f:
        f.write('second,' + ','.join(keys) + ',generator_late_ms_p99,generator_late_ms_max\n')
        for d in diags:
            second = (cv.stamp_ns(d.header.stamp) - start) // 1_000_000_000 - 1
            if second < 0:
                continue
            v = {kv.key: kv.value for kv in d.status[0].values}
            g = late.get(second, ('', ''))
            f.write(f'{second},' + ','.join(str(v.get(k, '')) for k in keys)
                    + f',{g[0]},{g[1]}\n')
    print(f'per-second trace: {path}')


def main(argv: list[str] | None = None) -> int:
    from mbfg_ros.ros import conversions as cv

    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--minutes', type=float, default=10.0)
    ap.add_argument('--trace', type=Path, help='CSV of the per-second values')
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
              'max ms | generator late p99 per s, median / max ms | GC pause per s, median / max '
              'ms | dropped so far (reason: n) | node CPU % | machine busy / stolen % | '
              'estimates |', flush=True)
        print('|---|---|---|---|---|---|---|---|---|---|', flush=True)
        minute = 0
        while gen.poll() is None and minute < args.minutes:
            lat.clear()
            first_diag = len(run.diags)
            cpu0, wall0, jif0 = cpu_seconds(pid), time.monotonic(), machine_jiffies()
            run.spin_while(lambda: gen.poll() is None, 60.0)
            minute += 1
            v = run.last_diagnostics()
            dropped = {k.split('.', 1)[1]: int(x) for k, x in v.items()
                       if ('dropped' in k or 'rejected' in k) and x.isdigit() and int(x)}
            row = (minute, rss_mb(pid), float(np.percentile(lat, 50)) if lat else np.nan,
                   float(np.percentile(lat, 99)) if lat else np.nan,
                   100.0 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0), len(lat))
            jif = machine_jiffies() - jif0
            rows.append(row)
            print(f'| {minute} | {row[1]:.1f} | {row[2]:.1f} / {row[3]:.1f} | '
                  f'{node_side(run.diags[first_diag:])} | '
                  f"{generator_late(generator_lateness(tmp / 'start'), minute)} | "
                  f"{node_side(run.diags[first_diag:], 'gc.ms_max')} | "
                  f"{', '.join(f'{k}: {n}' for k, n in sorted(dropped.items())) or '-'} | "
                  f'{row[4]:.0f} | {100 * jif[0] / jif[2]:.0f} / {100 * jif[1] / jif[2]:.1f} | '
                  f'{row[5]} |', flush=True)
        if args.trace:
            write_trace(args.trace, run.diags, tmp / 'start')
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
