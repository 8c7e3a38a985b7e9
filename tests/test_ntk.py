"""Empirical tangent kernels against explicit Jacobian products, and the linearization."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib


def _mlp(p, x):
    return p["a"] @ jnp.tanh(p["W"] @ x + p["c"])


def _params(key, m=6, d=3):
    k1, k2, k3 = jax.random.split(key, 3)
    return {"a": jax.random.normal(k1, (m,)), "W": jax.random.normal(k2, (m, d)),
            "c": jax.random.normal(k3, (m,))}


def _explicit_jacobian(f, params, x):
    """Jacobian built by hand from jax.jacrev per leaf (an independent path)."""
    leaves, _ = jax.tree_util.tree_flatten(params)
    rows = []
    for xi in x:
        g = jax.jacrev(f)(params, xi)
        rows.append(jnp.concatenate([jnp.ravel(v) for v in jax.tree_util.tree_leaves(g)]))
    assert sum(v.size for v in leaves) == rows[0].size
    return jnp.stack(rows)


@pytest.mark.parametrize("chunk_size", [1, 2, 5, 128])
def test_ntk_equals_jacobian_product(chunk_size):
    key = jax.random.key(0)
    p = _params(key)
    x1 = jax.random.normal(jax.random.key(1), (7, 3))
    x2 = jax.random.normal(jax.random.key(2), (4, 3))
    J1, J2 = _explicit_jacobian(_mlp, p, x1), _explicit_jacobian(_mlp, p, x2)
    np.testing.assert_allclose(lib.empirical_ntk(_mlp, p, x1, x2, chunk_size=chunk_size),
                               J1 @ J2.T, rtol=1e-12)
    K = lib.empirical_ntk(_mlp, p, x1, chunk_size=chunk_size)
    np.testing.assert_allclose(K, J1 @ J1.T, rtol=1e-12)
    np.testing.assert_allclose(K, K.T)


def test_ntk_finite_differences():
    """Each Jacobian entry by central differences, for a tiny model."""
    p = jnp.array([0.3, -0.7])
    f = lambda w, x: jnp.sin(w[0] * x[0]) * w[1] + w[0] ** 2 * x[1]  # noqa: E731
    x = jnp.array([[0.5, 1.0], [-1.0, 2.0]])
    h = 1e-6
    J = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            e = jnp.zeros(2).at[j].set(h)
            J[i, j] = (f(p + e, x[i]) - f(p - e, x[i])) / (2 * h)
    np.testing.assert_allclose(lib.empirical_ntk(f, p, x), J @ J.T, rtol=1e-7)


def test_ntk_rejects_vector_output_and_bad_input():
    f = lambda w, x: w * x  # noqa: E731  (vector output)
    with pytest.raises(ValueError, match="scalar"):
        lib.empirical_ntk(f, jnp.ones(3), jnp.ones((2, 3)))
    g = lambda w, x: jnp.dot(w, x)  # noqa: E731
    with pytest.raises(ValueError, match="x1"):
        lib.empirical_ntk(g, jnp.ones(3), jnp.array([[jnp.nan, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="trailing shape"):
        lib.empirical_ntk(g, jnp.ones(3), jnp.ones((2, 3)), jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="chunk_size"):
        lib.empirical_ntk(g, jnp.ones(3), jnp.ones((2, 3)), chunk_size=0)


def test_ntk_large_width_memory_bounded():
    """Width 10^4, 10^3 points: runs in chunks (J would be 10^3 x 3*10^4 floats at once)."""
    m, d = 10_000, 2
    p = {"a": jnp.ones(m) / m, "W": jax.random.normal(jax.random.key(0), (m, d))}
    f = lambda q, x: q["a"] @ jax.nn.relu(q["W"] @ x)  # noqa: E731
    x = jax.random.normal(jax.random.key(1), (1000, d))
    K = lib.empirical_ntk(f, p, x[:1000], x[:3], chunk_size=100)
    assert K.shape == (1000, 3) and bool(jnp.all(jnp.isfinite(K)))


def test_linearize_first_order():
    p0 = _params(jax.random.key(3))
    f_lin = lib.linearize(_mlp, p0)
    x = jnp.array([0.2, -0.4, 1.0])
    d = _params(jax.random.key(4))
    for eps in (1e-2, 1e-3):
        p = jax.tree_util.tree_map(lambda a, b, eps=eps: a + eps * b, p0, d)
        # the linearization is exact at first order: the gap is O(eps^2)
        gap = abs(float(_mlp(p, x) - f_lin(p, x)))
        assert gap < 50 * eps ** 2
    np.testing.assert_allclose(f_lin(p0, x), _mlp(p0, x))
    # the linearization's kernel is the kernel at p0, wherever it is evaluated
    p1 = jax.tree_util.tree_map(lambda a, b: a + b, p0, d)
    xs = jax.random.normal(jax.random.key(5), (4, 3))
    np.testing.assert_allclose(lib.empirical_ntk(f_lin, p1, xs), lib.empirical_ntk(_mlp, p0, xs),
                               rtol=1e-10)
