"""Paper-scale probe for the parity chapter (n = 128, k = 7, alpha = 0.5): does the two-layer ReLU
network of the chapter (NTK scaling, symmetric init, bias coordinate) learn the biased parity with
a longer run, larger batch, step size or width?  Network only (no kernel), test loss every 500
steps on 4000 fresh samples.  Run in the background: ``python scripts/parity_full_probe.py``.

Measured on the shared 2-core machine (30 Nov 2026), final / lowest test loss:
width 16, lr 0.2, batch 32, 20 000 steps: 0.500 / 0.500;  width 16, lr 1.0, batch 32, 20 000:
0.500 / 0.500;  width 16, lr 1.0, batch 256, 20 000: 0.500 / 0.500;  width 64, lr 1.0, batch 256,
20 000: 0.500 / 0.499;  width 16, lr 2.0, batch 256, 40 000: 0.445 / 0.415 (starts to learn);
width 16, lr 2.0, batch 256, 100 000 steps (25.6 M samples, 158 s): 0.369 / 0.369 (still falling).
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import lib
from lib import parity as P

n, k, alpha = 128, 7, 0.5
I = jnp.arange(k)
def run(width, lr, batch, steps, seed=0):
    scale = float(np.sqrt(width))
    def sample(key, num):
        x, y = P._bsp_sample(key, num, n, I, alpha)
        return jnp.concatenate([x, jnp.ones((num, 1))], axis=1), y
    def loss(p, X, y):
        return 0.5 * jnp.mean((lib.two_layer_batch(p, X, scale) - y) ** 2)
    Xt, yt = sample(jax.random.key(100 + seed), 4000)
    @jax.jit
    def train(p, key):
        def step(p, t):
            X, y = sample(jax.random.fold_in(key, t), batch)
            g = jax.grad(loss)(p, X, y)
            return jax.tree_util.tree_map(lambda a, d: a - lr * d, p, g), None
        def block(p, b):
            p, _ = jax.lax.scan(step, p, b * 500 + jnp.arange(500))
            return p, loss(p, Xt, yt)
        return jax.lax.scan(block, p, jnp.arange(steps // 500))
    p0 = lib.init_two_layer(jax.random.key(5 + seed), n + 1, width)
    t = time.perf_counter()
    _, curve = train(p0, jax.random.key(8 + seed))
    c = np.asarray(curve)
    first = int(np.argmax(c < 0.25)) * 500 + 500 if (c < 0.25).any() else None
    print(f"width {width} lr {lr} batch {batch} steps {steps}: final {c[-1]:.3f}, "
          f"min {c.min():.3f}, first < 0.25 at step {first}, "
          f"{time.perf_counter() - t:.0f} s", flush=True)


CONFIGS = [(16, 0.2, 32, 20000), (16, 1.0, 32, 20000), (16, 1.0, 256, 20000),
           (64, 1.0, 256, 20000), (16, 2.0, 256, 40000), (16, 2.0, 256, 100000)]
for width, lr, batch, steps in CONFIGS[int(sys.argv[1]) if len(sys.argv) > 1 else 0:]:
    run(width, lr, batch, steps)
