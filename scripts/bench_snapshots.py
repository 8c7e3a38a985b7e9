"""Benchmark: cost of recording every step of a gradient-descent trajectory (issue 17).

    python scripts/bench_snapshots.py [STEPS ...]      # default 1000 2000 5000

Runs ``lib.flows.gradient_descent`` on a least-squares loss with d = 2000 parameters
(N = 200 Gaussian samples) with ``snapshots=np.arange(steps + 1)``, each size in a fresh
process, and prints wall time, CPU time (user + sys) and the growth of the peak resident
memory over the process before the run. Recording is linear when the time per snapshot and
the memory per snapshot stay flat as the number of steps grows. Not a test: timings depend on
the machine and its load.

Measured for issue 17 on the 2-core machine shared with other jobs (wall time inflated by the
load; CPU time is the better guide):

    steps   before: wall / CPU / +peak MB     after: wall / CPU / +peak MB
    1000            6.8 /  3.9 /  75                 2.8 / 0.48 /  42
    2000           33.6 / 15.1 / 193                 4.3 / 0.71 /  74
    5000          508.8 / 77.5 / 578                 6.8 / 1.37 / 165

Before, states were stacked from a Python list by one XLA operation with one input per
snapshot (CPU time growing like steps^2); after, a compiled ``lax.scan`` writes them into its
preallocated output, 64 snapshots per call: CPU time and memory grow linearly (5001 states of
2000 float64 are 80 MB; the peak holds the chunks and their concatenation).
"""

from __future__ import annotations

import json
import subprocess
import sys

D, N = 2000, 200

CHILD = r"""
import json, resource, sys, time
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import lib.flows as flows

steps = int(sys.argv[1])
rng = np.random.default_rng(0)
X = jnp.asarray(rng.standard_normal(({N}, {D})) / np.sqrt({D}))
y = X @ jnp.asarray(rng.standard_normal({D}))

def loss(w):
    return 0.5 * jnp.mean((X @ w - y) ** 2)

flows.gradient_descent(loss, jnp.zeros({D}), step_size=0.5, num_steps=10,
                       snapshots=np.arange(11))  # warm-up: imports, first compilation
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c0, t0 = time.process_time(), time.perf_counter()
traj = flows.gradient_descent(loss, jnp.zeros({D}), step_size=0.5, num_steps=steps,
                              snapshots=np.arange(steps + 1))
jax.block_until_ready(traj.params)
t1, c1 = time.perf_counter(), time.process_time()
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert traj.params.shape == (steps + 1, {D})
print(json.dumps(dict(steps=steps, wall=t1 - t0, cpu=c1 - c0, mb=(rss1 - rss0) / 1024)))
""".replace("{N}", str(N)).replace("{D}", str(D))


def main(argv):
    sizes = [int(a) for a in argv] or [1000, 2000, 5000]
    print(f"gradient_descent, d = {D}, snapshots = every step")
    print(f"{'steps':>6} {'wall s':>8} {'cpu s':>8} {'+peak MB':>9} {'ms/snapshot':>12}")
    for steps in sizes:
        out = subprocess.run([sys.executable, "-c", CHILD, str(steps)], capture_output=True,
                             text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['steps']:>6} {r['wall']:>8.2f} {r['cpu']:>8.2f} {r['mb']:>9.0f} "
              f"{1e3 * r['wall'] / (steps + 1):>12.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
