"""Paper-size probe for the parity chapter's network (n = 128, k = 7): which schedule makes the
two-layer ReLU network of the chapter (NTK scaling, symmetric init, bias coordinate) learn the
biased sparse parity?  Network only (no kernel); several seeds run as one vmapped, compiled call;
test loss and test error (sign disagreement) every 1000 steps on 2000 fresh samples per seed.

    python scripts/parity_full_probe.py '{"width": 64, "opt": "adam", "lr": 0.003,
        "batch": 256, "steps": 30000, "seeds": [0, 1, 2, 3, 4]}'  [more JSON specs ...]

Keys: width, opt ("sgd" or "adam", optax), lr, batch, steps, seeds (default [0]), alpha (default
0.5), loss ("sq", the chapter's square loss, or "logistic"). Prints one JSON line per spec:
final test loss and error per seed, the first step with error < 0.1, wall and CPU seconds.
The measured schedules are tabulated in chapters/parity.md (section "Paper size: what it
took").  Seeds here are this script's own (init key 5 + s, data key 8 + s, test key 100 + s),
not KRR_SEED.
"""
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import lib  # noqa: F401  (float64)
from lib import parity as P

n, k = 128, 7
I = jnp.arange(k)


def run(width, opt, lr, batch, steps, seeds=(0,), alpha=0.5, every=1000, loss="sq"):
    scale = float(np.sqrt(width))

    def sample(key, num):
        x, y = P._bsp_sample(key, num, n, I, alpha)
        return jnp.concatenate([x, jnp.ones((num, 1))], axis=1), y

    def out(p, X):
        return (scale / width) * (jax.nn.relu(X @ p["B"].T) @ p["a"])

    def objective(p, X, y):
        f = out(p, X)
        if loss == "logistic":
            return jnp.mean(jnp.logaddexp(0.0, -y * f))
        return 0.5 * jnp.mean((f - y) ** 2)

    tx = {"sgd": optax.sgd, "adam": optax.adam}[opt](lr)

    @jax.jit
    @jax.vmap
    def train(p, key, Xt, yt):
        def step(c, t):
            p, st = c
            X, y = sample(jax.random.fold_in(key, t), batch)
            u, st = tx.update(jax.grad(objective)(p, X, y), st, p)
            return (optax.apply_updates(p, u), st), None

        def block(c, b):
            c, _ = jax.lax.scan(step, c, b * every + jnp.arange(every))
            f = out(c[0], Xt)
            return c, (0.5 * jnp.mean((f - yt) ** 2), jnp.mean(jnp.sign(f) != yt))

        return jax.lax.scan(block, (p, tx.init(p)), jnp.arange(steps // every))[1]

    inits = [lib.init_two_layer(jax.random.key(5 + s), n + 1, width) for s in seeds]
    p0 = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *inits)
    keys = jnp.stack([jax.random.key(8 + s) for s in seeds])
    tests = [sample(jax.random.key(100 + s), 2000) for s in seeds]
    Xt, yt = jnp.stack([t[0] for t in tests]), jnp.stack([t[1] for t in tests])
    t0, c0 = time.perf_counter(), time.process_time()
    sq, err = (np.asarray(v) for v in train(p0, keys, Xt, yt))
    print(json.dumps(dict(
        width=width, opt=opt, lr=lr, batch=batch, steps=steps, alpha=alpha, loss=loss,
        seeds=list(seeds), final_loss=[round(float(v), 4) for v in sq[:, -1]],
        final_err=[round(float(v), 4) for v in err[:, -1]],
        first_err_below_0p1=[int(np.argmax(e < 0.1)) * every + every if (e < 0.1).any() else None
                             for e in err],
        wall=round(time.perf_counter() - t0, 1), cpu=round(time.process_time() - c0, 1))),
        flush=True)


if __name__ == "__main__":
    for spec in sys.argv[1:]:
        run(**json.loads(spec))
