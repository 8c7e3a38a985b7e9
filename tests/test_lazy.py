"""Lazy-training helpers: the scaled loss, training against an independent loop, the
linearized run against closed-form kernel gradient descent, and the laziness measures."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib
from lib.twolayer import init_two_layer, two_layer, two_layer_batch


def _data():
    t = jnp.linspace(-1.0, 1.0, 5)
    return jnp.stack([t, jnp.ones_like(t)], axis=1), jnp.cos(2 * t)


def _linear(w, x):
    return w @ x


def test_scaled_square_loss_closed_form():
    X, y = _data()
    p = init_two_layer(jax.random.key(0), 2, 6, symmetric=False)
    loss = lib.scaled_square_loss(two_layer, X, y)
    want = 0.5 * np.mean((3.0 * np.asarray(two_layer_batch(p, X)) - np.asarray(y)) ** 2)
    assert float(loss(p, 3.0)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 10.0])
def test_train_matches_plain_python_loop(alpha):
    """The compiled sweep against a plain Python loop of jax.grad steps."""
    X, y = _data()
    p0 = init_two_layer(jax.random.key(1), 2, 8, symmetric=False)
    loss = lib.scaled_square_loss(two_layer, X, y)
    step = 2.0 / alpha**2
    p = p0
    for _ in range(30):
        g = jax.grad(loss)(p, alpha)
        p = jax.tree_util.tree_map(lambda u, v: u - step * v, p, g)
    run = lib.lazy.train(two_layer, p0, X, y, alpha=alpha, step_size=step, num_steps=30,
                         num_snapshots=3)
    for k in ("a", "B"):
        np.testing.assert_allclose(run.final[k], p[k], rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(run.params[k][0], p0[k])
    assert run.steps.tolist() == [0, 10, 20, 30]
    assert float(run.losses[-1]) == pytest.approx(float(loss(p, alpha)), rel=1e-10)


def test_linearized_run_is_kernel_gradient_descent():
    """Training the linearization: the predictor follows f_{k+1} = f_k - (s alpha^2 / n) K r_k
    with the tangent kernel K at init (closed-form recursion)."""
    X, y = _data()
    p0 = init_two_layer(jax.random.key(2), 2, 16)          # symmetric: f_0 = 0
    alpha, step, steps = 5.0, 0.5, 40
    run = lib.lazy.train(two_layer, p0, X, y, alpha=alpha, step_size=step, num_steps=steps,
                         linearized=True)
    K = np.asarray(lib.empirical_ntk(two_layer, p0, X))
    f = np.zeros(5)
    for _ in range(steps):
        f = f - step * alpha**2 / 5 * K @ (f - np.asarray(y))
    h_lin = lib.linearize(two_layer, p0)
    got = alpha * jax.vmap(lambda x: h_lin(run.final, x))(X)
    np.testing.assert_allclose(got, f, rtol=1e-9, atol=1e-12)


def test_sweep_batched_params_and_homogeneity():
    """p = 2 homogeneity: from sigma W with step eta sigma^-2 equals alpha = sigma^2 from W with
    step eta sigma^-4, iterate by iterate (Chizat & Bach 2020, Sec. 6)."""
    X, y = _data()
    W = init_two_layer(jax.random.key(3), 2, 10)
    sigma, eta = 4.0, 0.3
    params = jax.tree_util.tree_map(lambda p: jnp.stack([sigma * p, p]), W)
    run = lib.lazy.train_sweep(two_layer, params, X, y, alphas=jnp.array([1.0, sigma**2]),
                               step_sizes=jnp.array([eta / sigma**2, eta / sigma**4]),
                               num_steps=50, batched=True)
    for k in ("a", "B"):
        np.testing.assert_allclose(run.final[k][0] / sigma, run.final[k][1], rtol=1e-10)


def test_train_errors_and_divergence():
    X, y = _data()
    p0 = init_two_layer(jax.random.key(4), 2, 4)
    with pytest.raises(ValueError, match="alphas"):
        lib.lazy.train_sweep(two_layer, p0, X, y, alphas=jnp.array([1.0, -1.0]),
                             step_sizes=0.1, num_steps=10)
    with pytest.raises(ValueError, match="step_sizes"):
        lib.lazy.train_sweep(two_layer, p0, X, y, alphas=jnp.ones(2), step_sizes=0.0,
                             num_steps=10)
    with pytest.raises(ValueError, match="multiple"):
        lib.lazy.train(two_layer, p0, X, y, step_size=0.1, num_steps=10, num_snapshots=3)
    with pytest.raises(ValueError, match="y"):
        lib.lazy.train(two_layer, p0, X, y[:3], step_size=0.1, num_steps=10)
    with pytest.raises(ValueError, match="leading axis"):
        lib.lazy.train_sweep(two_layer, p0, X, y, alphas=jnp.ones(2), step_sizes=0.1,
                             num_steps=10, batched=True)
    with pytest.raises(lib.DivergenceError, match="diverged"):
        lib.lazy.train(_linear, jnp.ones(2), X, y, alpha=10.0, step_size=1e3, num_steps=400)


def test_relative_movement_and_laziness():
    assert lib.relative_movement({"w": jnp.array([3.0, 4.0])},
                                 {"w": jnp.array([3.0, 4.5])}) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="structure"):
        lib.relative_movement({"w": jnp.ones(2)}, {"v": jnp.ones(2)})
    with pytest.raises(ValueError, match="zero"):
        lib.relative_movement(jnp.zeros(2), jnp.ones(2))
    # two-layer net: kernel change against the explicit gradient features
    X, _ = _data()
    p0 = init_two_layer(jax.random.key(5), 2, 6, symmetric=False)
    p1 = jax.tree_util.tree_map(lambda p: 1.3 * p + 0.1, p0)

    def ntk(p):
        pre = np.asarray(X @ p["B"].T)
        a = np.asarray(p["a"])
        return (np.maximum(pre, 0) @ np.maximum(pre, 0).T
                + ((pre > 0) * a**2) @ (pre > 0).T * np.asarray(X @ X.T)) / 36
    lz = lib.laziness(two_layer, p0, p1, X)
    K0, K1 = ntk(p0), ntk(p1)
    assert lz.kernel_change == pytest.approx(np.linalg.norm(K1 - K0) / np.linalg.norm(K0),
                                             rel=1e-10)
    assert lz.kernel_distance == pytest.approx(
        1 - np.sum(K0 * K1) / np.linalg.norm(K0) / np.linalg.norm(K1), rel=1e-8)
