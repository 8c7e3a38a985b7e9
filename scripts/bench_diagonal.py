"""Timing of lib.diagonal.implicit_bias_limit against simulating the flow to the same accuracy.

Woodworth et al. (2020)'s sparse-regression setting: d = 1000, N = 100, a 5-sparse beta* with
entries 1/sqrt(5), Gaussian X. For each depth, a grid of alphas is solved in one compiled call
(after a warm-up call that compiles); the time per alpha is reported with the Newton iterations.
The flow (lib.diagonal.gradient_flow_path, diffrax Tsit5 at rtol 1e-12) is timed on a smaller
problem (d = 100, N = 20) at a few alphas, with its relative distance to the exact limit.

Run: ``python scripts/bench_diagonal.py`` (about a minute or two; timings are wall-clock and
inflated when the machine is shared). ``--quick`` skips the flow at d = 1000.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lib import diagonal as dg  # noqa: E402


def problem(N, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d))
    beta = np.zeros(d)
    beta[:5] = 1 / np.sqrt(5)
    return X, X @ beta


def main():
    X, y = problem(100, 1000)
    alphas = np.logspace(-4, 3, 15)
    print(f"implicit_bias_limit, d=1000, N=100, {len(alphas)} alphas in [1e-4, 1e3], one call:")
    for D in (2, 3, 4, 5):
        dg.implicit_bias_limit(X, y, alphas, D)  # compile
        reps = []
        for _ in range(3):
            t = time.perf_counter()
            _, info = dg.implicit_bias_limit(X, y, alphas, D, return_info=True)
            reps.append(time.perf_counter() - t)
        per = min(reps) / len(alphas) * 1e3
        print(f"  D={D}: {per:6.1f} ms per alpha (best of 3), Newton iterations per alpha "
              f"{info.iterations.min()}-{info.iterations.max()}, max relative residual "
              f"{info.residual.max():.1e}")
    print("gradient flow (diffrax Tsit5, rtol 1e-12) to loss 1e-20 ||y||^2, d=100, N=20:")
    Xs, ys = problem(20, 100, seed=1)
    for D, a in ((2, 1e-2), (2, 1.0), (3, 0.1), (3, 1.0)):
        dg.gradient_flow_path(Xs, ys, a, D)  # compile
        dg.implicit_bias_limit(Xs, ys, a, D)
        t = time.perf_counter()
        run = dg.gradient_flow_path(Xs, ys, a, D)
        t_flow = time.perf_counter() - t
        t = time.perf_counter()
        beta = dg.implicit_bias_limit(Xs, ys, a, D)
        t_solve = time.perf_counter() - t
        err = np.linalg.norm(run.final_beta - beta) / np.linalg.norm(beta)
        print(f"  D={D} alpha={a:g}: flow {t_flow * 1e3:8.1f} ms ({run.trajectory.num_steps} "
              f"steps), exact solver {t_solve * 1e3:6.1f} ms, relative gap {err:.1e}")
    if "--quick" not in sys.argv:
        D, a = 2, 0.1
        dg.gradient_flow_path(X, y, a, D, target=1e-16 * float(y @ y))
        t = time.perf_counter()
        run = dg.gradient_flow_path(X, y, a, D, target=1e-16 * float(y @ y))
        t_flow = time.perf_counter() - t
        beta = dg.implicit_bias_limit(X, y, a, D)
        err = np.linalg.norm(run.final_beta - beta) / np.linalg.norm(beta)
        print(f"  d=1000, N=100, D={D}, alpha={a}: flow {t_flow:.2f} s "
              f"({run.trajectory.num_steps} steps), relative gap {err:.1e}")


if __name__ == "__main__":
    main()
