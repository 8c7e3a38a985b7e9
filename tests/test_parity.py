"""Tests of lib.parity against independent answers: Monte Carlo, enumeration of the support,
least squares, finite differences and hand-derived values."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lib import parity as P

CASES = [(4, [0, 1], 0.5), (6, [1, 3, 5], 0.3), (7, [0, 2, 3, 6], 0.9), (5, [2], 0.4),
         (6, [0, 1, 2, 3, 4, 5], 0.2), (5, [0, 4], 0.0), (5, [1, 2], 1.0)]


def _enumerate_moments(n, subset, alpha):
    """E[y x] and E[x x^T] by an explicit double loop over {-1,1}^n (no vectorization)."""
    c = np.zeros(n)
    S = np.zeros((n, n))
    for bits in itertools.product((-1, 1), repeat=n):
        x = np.array(bits, dtype=float)
        ones = int((x > 0).sum())
        p = (1 - alpha) / 2**n + alpha * 0.75**ones * 0.25 ** (n - ones)
        y = np.prod(x[subset])
        c += p * y * x
        S += p * np.outer(x, x)
    return c, S


@pytest.mark.parametrize("n,subset,alpha", CASES)
def test_correlations_and_moments_match_enumeration(n, subset, alpha):
    c, S = _enumerate_moments(n, subset, alpha)
    np.testing.assert_allclose(P.bsp_correlations(n, subset, alpha), c, atol=1e-14)
    np.testing.assert_allclose(P.bsp_second_moments(n, alpha), S, atol=1e-14)


@pytest.mark.parametrize("n,subset,alpha", [(8, [0, 3], 0.5), (10, [1, 4, 7], 0.8)])
def test_sampler_matches_closed_form_correlations(n, subset, alpha):
    N = 200_000
    x, y = P.biased_sparse_parity(jax.random.key(3), N, n, subset, alpha)
    assert x.shape == (N, n) and y.shape == (N,) and x.dtype == jnp.float64
    assert set(np.unique(np.asarray(x))) == {-1.0, 1.0}
    np.testing.assert_array_equal(y, np.prod(np.asarray(x)[:, subset], axis=1))
    mc = np.asarray(x).T @ np.asarray(y) / N
    # each correlation is a mean of N variables in [-1, 1]: 5 standard errors
    np.testing.assert_allclose(mc, P.bsp_correlations(n, subset, alpha), atol=5 / np.sqrt(N))
    np.testing.assert_allclose(np.asarray(x).mean(0), alpha / 2, atol=5 / np.sqrt(N))


@pytest.mark.parametrize("n,subset,alpha", CASES)
def test_best_linear_loss_closed_form_vs_least_squares(n, subset, alpha):
    atoms = P.parity_atoms(n, subset, alpha)
    loss_ls, w = P.best_feature_loss(lambda x: x, atoms)
    assert P.bsp_best_linear_loss(n, subset, alpha) == pytest.approx(loss_ls, abs=1e-12)
    # the weights solve the normal equations Sigma w = c
    np.testing.assert_allclose(P.bsp_second_moments(n, alpha) @ w,
                               P.bsp_correlations(n, subset, alpha), atol=1e-10)


@pytest.mark.parametrize("n,k", [(2, 2), (8, 2), (10, 3), (64, 5), (128, 7)])
@pytest.mark.parametrize("alpha", [0.01, 0.3, 0.99])
def test_claim_3_2_brackets_the_kernel_loss(n, k, alpha):
    loss = P.bsp_best_linear_loss(n, list(range(k)), alpha)
    assert 0.5 - alpha / 2 <= loss <= 0.5 - alpha**2 / 2 ** (2 * k)


@pytest.mark.parametrize("n,subset,alpha", CASES)
def test_best_linear_edge_vs_least_squares(n, subset, alpha):
    # independent answer: weighted least squares over the enumerated distribution
    loss_ls, _ = P.best_feature_loss(lambda x: x, P.parity_atoms(n, subset, alpha))
    assert P.bsp_best_linear_edge(n, subset, alpha) == pytest.approx(0.5 - loss_ls, abs=1e-12)


@pytest.mark.parametrize("n,k", [(10, 3), (128, 7)])
@pytest.mark.parametrize("alpha", [1e-7, 1e-5, 1e-3, 0.2])
def test_best_linear_edge_keeps_relative_precision(n, k, alpha):
    # independent answer: the moments written from the mixture (uniform bits with prob.
    # 1 - alpha, bits of mean 1/2 with prob. alpha), solved densely; relative agreement even
    # where the edge is far below the rounding error of 1/2
    c = np.full(n, alpha * 0.5 ** (k + 1))
    c[:k] = alpha * 0.5 ** (k - 1)
    sigma = np.eye(n) + alpha * 0.25 * (np.ones((n, n)) - np.eye(n))
    edge = 0.5 * c @ np.linalg.solve(sigma, c)
    assert P.bsp_best_linear_edge(n, range(k), alpha) == pytest.approx(edge, rel=1e-10)
    # and the small-alpha limit (2k + (n - k)/8) tau^2, with a relative correction O(n alpha)
    tau = alpha / 2**k
    limit = (2 * k + (n - k) / 8) * tau**2
    assert abs(edge / limit - 1) < n * alpha


def test_uniform_parity_has_no_linear_edge():
    assert P.bsp_best_linear_loss(12, [0, 5, 7], 0.0) == 0.5


@pytest.mark.parametrize("kind", ["biased", "leaky"])
@pytest.mark.parametrize("n,subset,alpha", [(3, [0, 1], 0.25), (5, [1, 2, 4], 0.6)])
def test_atoms_match_samplers(kind, n, subset, alpha):
    x, y, p = P.parity_atoms(n, subset, alpha, kind)
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-14)
    sampler = P.biased_sparse_parity if kind == "biased" else P.leaky_parity
    N = 100_000
    xs, ys = sampler(jax.random.key(1), N, n, subset, alpha)
    # Monte Carlo of E[y x_j] and E[x_j] against the exact atom sums
    for f in (lambda x, y: y[:, None] * x, lambda x, y: x + 0 * y[:, None]):
        exact = np.asarray(p) @ np.asarray(f(x, y))
        mc = np.asarray(f(xs, ys)).mean(0)
        np.testing.assert_allclose(mc, exact, atol=5 / np.sqrt(N))


def test_leaky_sampler_structure():
    n, subset, alpha = 6, [0, 2], 0.3
    x, y = P.leaky_parity(jax.random.key(2), 50_000, n, subset, alpha)
    at_point = np.all(np.asarray(x) == np.asarray(P.leaky_point(n, subset)), axis=1)
    assert abs(at_point.mean() - (alpha + (1 - alpha) / 2**n)) < 0.01
    off = ~at_point
    np.testing.assert_array_equal(np.asarray(y)[off], np.prod(np.asarray(x)[off][:, subset], 1))
    assert abs(np.asarray(y)[at_point].mean()) < 0.05          # random labels at x^I


def test_smooth_step_values_and_derivative():
    z = jnp.linspace(-0.5, 1.5, 2001)
    s = P.smooth_step(z)
    assert float(s.min()) == 0.0 and float(s.max()) == 1.0
    ds = jax.vmap(jax.grad(P.smooth_step))(z)
    fd = (P.smooth_step(z + 1e-6) - P.smooth_step(z - 1e-6)) / 2e-6
    np.testing.assert_allclose(ds, fd, atol=1e-5)             # C^1: no jump in the slope
    assert float(jnp.abs(ds).max()) <= 2.0 + 1e-12


@pytest.mark.parametrize("model,value", [(P.selected_parity, 0.0),
                                         (P.leaky_selected_parity, -1.0)])
@pytest.mark.parametrize("n", [3, 6])
def test_models_at_zero(model, value, n):
    x, _, _ = P.parity_atoms(n, [0], 0.0)
    theta = jnp.zeros(n)
    f0 = jax.vmap(lambda xi: model(theta, xi))(x)
    np.testing.assert_array_equal(f0, value)
    eye = jnp.eye(n)
    for xi in x[:5]:
        fd = jnp.array([(model(theta + 1e-7 * e, xi) - model(theta - 1e-7 * e, xi)) / 2e-7
                        for e in eye])
        np.testing.assert_allclose(fd, 2 * xi, atol=1e-6)


@pytest.mark.parametrize("n,subset", [(5, [1, 3]), (6, [0, 1, 2, 5]), (4, [2])])
def test_selected_parity_outputs_the_parity(n, subset):
    x, y, _ = P.parity_atoms(n, subset, 0.0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        theta = rng.uniform(-2 / n, 2 / n, n)
        theta[subset] = rng.choice([-1, 1], len(subset)) * rng.uniform(3 / n, 5 / n, len(subset))
        t = jnp.asarray(theta)
        f = jax.vmap(P.selected_parity, in_axes=(None, 0))(t, x)
        np.testing.assert_allclose(f, y, atol=1e-14)


@pytest.mark.parametrize("n,subset", [(5, [1, 3]), (6, [0, 1, 2, 5])])
def test_leaky_model_outputs_the_parity(n, subset):
    x, y, _ = P.parity_atoms(n, subset, 0.0)
    theta = -np.full(n, 4.0 / n)
    theta[subset] = 3.0 / n
    f = jax.vmap(lambda xi: P.leaky_selected_parity(jnp.asarray(theta), xi))(x)
    np.testing.assert_allclose(f, y, atol=1e-14)


def test_population_loss_and_best_features():
    atoms = P.parity_atoms(5, [0, 1, 2], 0.0)
    x = atoms[0]
    assert float(P.population_loss(lambda x: jnp.prod(x[:, :3], 1), atoms)) == 0.0
    # orthonormal features (uniform x): the parity itself gives loss 0, others loss 1/2
    loss, w = P.best_feature_loss(jnp.stack([x[:, 0] * x[:, 1] * x[:, 2], x[:, 3]], 1), atoms)
    assert loss == pytest.approx(0.0, abs=1e-14)
    np.testing.assert_allclose(w, [1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("bad", [
    dict(subset=[0, 0]), dict(subset=[5]), dict(subset=[-1, 2]), dict(alpha=-0.1),
    dict(alpha=1.5), dict(subset=[0, 1, 2, 3, 4, 5]), dict(subset=[]), dict(n=0),
    dict(subset=[0.5, 1]), dict(alpha=True)])
def test_bad_input_raises(bad):
    args = dict(n=5, subset=[0, 1], alpha=0.5) | bad
    with pytest.raises(ValueError):
        P.biased_sparse_parity(jax.random.key(0), 3, **args)
    with pytest.raises(ValueError):
        P.leaky_parity(jax.random.key(0), 3, **args)
    with pytest.raises(ValueError):
        P.bsp_correlations(**args)


def test_bad_enumeration_and_atoms():
    with pytest.raises(ValueError, match="n = 17"):
        P.parity_atoms(17, [0], 0.5)
    with pytest.raises(ValueError, match="kind"):
        P.parity_atoms(3, [0], 0.5, kind="other")
    atoms = P.parity_atoms(3, [0], 0.5)
    with pytest.raises(ValueError, match="predictions"):
        P.population_loss(jnp.zeros(4), atoms)
    with pytest.raises(ValueError, match="prob"):
        P.population_loss(jnp.zeros(8), (atoms[0], atoms[1], 2 * atoms[2]))
    with pytest.raises(ValueError, match="features"):
        P.best_feature_loss(jnp.zeros((7, 2)), atoms)
    with pytest.raises(ValueError, match="num_samples"):
        P.biased_sparse_parity(jax.random.key(0), 0, 3, [0], 0.5)


# ---------------------------------------------------------------- bad input (adversarial review)

@pytest.mark.parametrize("call, match", [
    (lambda: P.parity_atoms(3, "01", 0.5), "subset"),
    (lambda: P.parity_atoms(3, [True, False], 0.5), "subset"),
    (lambda: P.parity_atoms(3, [1 + 0j], 0.5), "subset"),
    (lambda: P.parity_atoms(3, [[0, 1]], 0.5), "subset"),
    (lambda: P.parity_atoms(3, [float("inf")], 0.5), "subset"),
    (lambda: P.bsp_correlations(4, [0, 1], np.array([0.5])), "alpha"),
    (lambda: P.population_loss(jnp.zeros(8) + 1j, P.parity_atoms(3, [0, 1], 0.5)), "real"),
    (lambda: P.best_feature_loss(lambda x: x, P.parity_atoms(3, [0], 0.5), rcond=float("nan")),
     "rcond"),
    (lambda: P.selected_parity(jnp.zeros((2, 3)), jnp.ones(3)), "shape"),
    (lambda: P.selected_parity(jnp.zeros(3), jnp.ones(4)), "shape"),
    (lambda: P.selected_parity(jnp.array([jnp.nan, 0.0]), jnp.ones(2)), "NaN"),
    (lambda: P.leaky_selected_parity(jnp.zeros(3) + 0j, jnp.ones(3)), "real"),
])
def test_bad_input_is_a_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("n,alpha,p", [(4, 0.3, 5), (6, 0.05, 12), (5, 0.0, 3)])
def test_leaky_kernel_edges_match_least_squares_per_problem(n, alpha, p):
    """Every edge of the vectorized Sherman-Morrison formula against weighted least squares on
    the enumerated leaky distribution of that subset (and the subset list against the
    definition of P^lp: all J with |J| >= 2)."""
    rng = np.random.default_rng(n)
    W, b = rng.normal(size=(n, p)), rng.normal(size=p)
    x = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
    edges, subsets = P.leaky_kernel_edges(np.maximum(x @ W + b, 0.0), alpha)
    assert len(subsets) == 2**n - n - 1
    for J, e in zip(subsets, edges, strict=True):
        loss, _ = P.best_feature_loss(lambda z: np.maximum(np.asarray(z) @ W + b, 0.0),
                                      P.parity_atoms(n, list(J), alpha, kind="leaky"))
        assert e == pytest.approx(0.5 - loss, abs=1e-12)


def test_leaky_kernel_edges_memorization_and_errors():
    """Indicator features of p points not containing x^J give edge (1 - alpha) p / 2^(n+1)."""
    n, alpha = 4, 0.25
    phi = np.zeros((16, 3))
    phi[[0, 1, 2], [0, 1, 2]] = 1.0            # points (-1,-1,-1,-1), ..., none is an x^J
    edges, _ = P.leaky_kernel_edges(phi, alpha)
    np.testing.assert_allclose(edges, (1 - alpha) * 3 / 2 ** (n + 1), atol=1e-15)
    with pytest.raises(ValueError, match="features"):
        P.leaky_kernel_edges(np.ones((15, 2)), 0.1)
    with pytest.raises(ValueError, match="alpha"):
        P.leaky_kernel_edges(np.ones((16, 2)), 1.0)
    with pytest.raises(ValueError, match="min_order"):
        P.leaky_kernel_edges(np.ones((16, 2)), 0.1, min_order=5)


def test_selected_parity_keeps_a_subnormal_theta():
    """Issue 21 round 9 (F5): selected_parity((1e-310, 0), (1, 1)) returned 0 (XLA reads the
    subnormal theta_0 as 0). With every gate closed (|theta_i| <= 2/n) the model is exactly
    2 <theta, x>: 2e-310, computed here in exact rationals."""
    from fractions import Fraction as F

    for theta, x in [([1e-310, 0.0], [1.0, 1.0]), ([1e-310, -3e-311, 0.0], [1.0, -1.0, 1.0])]:
        want = 2 * sum(F(t) * F(v) for t, v in zip(theta, x, strict=True))
        got = float(P.selected_parity(np.array(theta), np.array(x)))
        assert abs(F(got) - want) <= F(2.0 ** -1075), (got, float(want))
