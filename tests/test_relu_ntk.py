"""The closed-form two-layer ReLU tangent kernel against Monte Carlo on the sphere and the
empirical kernel of a wide network."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib


@pytest.mark.parametrize("d,kappa", [(2, 0.0), (3, 1.0), (5, 2.5)])
def test_relu_ntk_monte_carlo(d, kappa):
    """E over b uniform on S^(d-1) of (b.x)+(b.x')+ + kappa^2 <x,x'> 1{b.x>0} 1{b.x'>0}."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((4, d))
    b = rng.standard_normal((400_000, d))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    pre = X @ b.T
    mc = (np.maximum(pre, 0) @ np.maximum(pre, 0).T
          + kappa**2 * (X @ X.T) * ((pre > 0).astype(float) @ (pre > 0).T)) / b.shape[0]
    np.testing.assert_allclose(lib.relu_ntk(X, kappa=kappa), mc, rtol=0.02, atol=2e-3)


def test_relu_ntk_special_angles_and_symmetry():
    x = jnp.array([[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])
    K = np.asarray(lib.relu_ntk(x, kappa=1.0))
    # phi = 0: ||x||^2 (1/(2d) + kappa^2/2); phi = pi/2: ||x|| ||x'|| / (2 pi d); phi = pi: 0
    assert K[0, 0] == pytest.approx(4 * (0.25 + 0.5))
    assert K[0, 1] == pytest.approx(6 / (4 * np.pi))
    assert K[0, 2] == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-12
    np.testing.assert_allclose(lib.relu_ntk(x, x[:2], kappa=1.0), K[:, :2])


def test_relu_ntk_against_wide_network():
    X = jax.random.normal(jax.random.key(0), (5, 3))
    m = 40_000
    p = lib.init_two_layer(jax.random.key(1), 3, m, kappa=0.7, symmetric=False)
    K_m = lib.empirical_ntk(lambda q, x: lib.two_layer(q, x, output_scale=np.sqrt(m)), p, X)
    K = lib.relu_ntk(X, kappa=0.7)
    assert float(jnp.linalg.norm(K_m - K) / jnp.linalg.norm(K)) < 0.03


def test_relu_ntk_errors():
    with pytest.raises(ValueError, match="x1"):
        lib.relu_ntk(jnp.ones(3))
    with pytest.raises(ValueError, match="d >= 2"):
        lib.relu_ntk(jnp.ones((3, 1)))
    with pytest.raises(ValueError, match="same dimension"):
        lib.relu_ntk(jnp.ones((2, 3)), jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="kappa"):
        lib.relu_ntk(jnp.ones((2, 3)), kappa=-1.0)
    with pytest.raises(ValueError, match="non-finite"):
        lib.relu_ntk(jnp.array([[1.0, jnp.nan]]))
