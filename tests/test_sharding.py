"""gradient_descent_sweep split over several devices gives the single-device result.

Two CPU devices are simulated with XLA_FLAGS=--xla_force_host_platform_device_count=2, which must
be set before JAX starts: each run is a fresh Python process.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json
import jax, jax.numpy as jnp, numpy as np
import lib
X = jax.random.normal(jax.random.key(0), (5, 8))
y = jnp.arange(5.0)
def loss(w, t):      # per-run data (loss_args sharded with the runs)
    return 0.5 * jnp.sum((X @ (w[:8] * w[8:]) - t) ** 2)
out = {"devices": jax.local_device_count()}
for B in (4, 3):     # 3 runs on 2 devices: padded, and the padding dropped
    alphas = jnp.geomspace(0.1, 3.0, B)
    targets = jax.random.normal(jax.random.key(1), (B, 5))
    w0 = alphas[:, None] * jnp.ones((B, 16))
    traj = lib.gradient_descent_sweep(loss, w0, step_size=0.01 / (1 + alphas ** 2),
                                      num_steps=400, snapshots=[0, 100, 400], loss_args=targets)
    shared = lib.gradient_descent_sweep(lambda w, d: 0.5 * jnp.sum((d[0] @ w - d[1]) ** 2),
                                        w0[:, :8], step_size=0.01, num_steps=300,
                                        loss_args=(X, y), loss_args_axes=None)
    out[B] = {"devices_used": len(traj.final.sharding.device_set),
              "final": np.asarray(traj.final).tolist(),
              "losses": np.asarray(traj.losses).tolist(),
              "steps": np.asarray(traj.steps).tolist(),
              "shared": np.asarray(shared.final).tolist()}
print(json.dumps(out))
"""


def run(devices):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_sharded_sweep_matches_one_device():
    one, two = run(1), run(2)
    assert one["devices"] == 1 and two["devices"] == 2
    assert two["4"]["devices_used"] == 2     # the runs really were split over both devices
    for batch in ("4", "3"):
        for field in ("final", "losses", "shared"):
            a, b = np.asarray(one[batch][field]), np.asarray(two[batch][field])
            assert a.shape == b.shape
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
        assert one[batch]["steps"] == two[batch]["steps"]
