"""lib.margins against independent answers: brute force, closed forms, other solvers."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 1e4])
@pytest.mark.parametrize("seed", [0, 1])
def test_smoothed_margin_sandwich_and_direct_formula(beta, seed):
    z = np.random.default_rng(seed).normal(size=9) + 0.5
    F = float(lib.smoothed_margin(z, beta))
    assert z.min() - 1e-12 <= F <= z.min() + np.log(z.size) / beta + 1e-12
    if beta <= 10:  # direct formula, no underflow at these scales
        direct = -np.log(np.mean(np.exp(-beta * z))) / beta
        np.testing.assert_allclose(F, direct, rtol=1e-12)


def test_smoothed_margin_batch_and_limit():
    z = np.array([[0.3, 1.0, 2.0], [1.0, 1.0, 1.0]])
    F = lib.smoothed_margin(z, 1e6)
    np.testing.assert_allclose(F, [0.3 + np.log(3) / 1e6, 1.0], rtol=1e-9)
    with pytest.raises(ValueError, match="beta"):
        lib.smoothed_margin(z, 0.0)
    with pytest.raises(ValueError, match="margins"):
        lib.smoothed_margin(np.array([1.0, np.nan]), 1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_path_norm_equals_weight_decay_when_balanced(seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(6, 3))
    a = np.linalg.norm(B, axis=1) * rng.choice([-1.0, 1.0], size=6)   # balanced units
    path = float(lib.f1_path_norm({"a": a, "B": B}))
    np.testing.assert_allclose(path, np.sum(a**2 + np.sum(B**2, axis=1)) / (2 * 6), rtol=1e-12)
    a2 = 3.0 * a   # unbalanced: strict AM-GM
    assert float(lib.f1_path_norm({"a": a2, "B": B})) < np.sum(a2**2 + np.sum(B**2, 1)) / 12


def test_f1_normalized_margin_is_scale_invariant_and_matches_definition():
    p = lib.init_two_layer(jax.random.key(0), 3, 10, symmetric=False)
    X = np.random.default_rng(0).normal(size=(5, 3))
    y = np.sign(np.asarray(lib.two_layer_batch(p, X)))
    g = float(lib.f1_normalized_margin(p, X, y))
    h = np.asarray(lib.two_layer_batch(p, X))
    path = np.mean(np.abs(np.asarray(p["a"])) * np.linalg.norm(np.asarray(p["B"]), axis=1))
    np.testing.assert_allclose(g, np.min(y * h) / path, rtol=1e-12)
    scaled = {"a": 7.0 * p["a"], "B": 0.5 * p["B"]}
    np.testing.assert_allclose(float(lib.f1_normalized_margin(scaled, X, y)), g, rtol=1e-12)
    with pytest.raises(ValueError, match="path norm 0"):
        lib.f1_normalized_margin({"a": jnp.zeros(2), "B": jnp.ones((2, 3))}, X, y)
    with pytest.raises(ValueError, match="y"):
        lib.f1_normalized_margin(p, X, 2 * y)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_max_margin_linear_kernel_is_l2_max_margin(seed):
    """With K = X X^T (rank-deficient), the kernel SVM is the l2 max-margin on X."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 4))
    y = np.sign(X @ rng.normal(size=4))
    res = lib.kernel_max_margin(X @ X.T, y)
    w = np.asarray(lib.max_margin(X, y, p=2))
    np.testing.assert_allclose(res.margin, 1 / np.linalg.norm(w), rtol=1e-6)
    np.testing.assert_allclose(X @ X.T @ np.asarray(res.coef), X @ w, atol=1e-6)
    np.testing.assert_allclose(res.norm**2, res.coef @ (X @ X.T) @ res.coef, rtol=1e-6)


def test_kernel_max_margin_two_points_closed_form():
    """Two points, K = [[p, q], [q, s]], labels (+1, -1): both constraints active,
    c = K^{-1} (1, -1), ||h||^2 = (1, -1) K^{-1} (1, -1)."""
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    v = np.array([1.0, -1.0])
    res = lib.kernel_max_margin(K, v)
    np.testing.assert_allclose(res.coef, np.linalg.solve(K, v), rtol=1e-7)
    np.testing.assert_allclose(res.norm, np.sqrt(v @ np.linalg.solve(K, v)), rtol=1e-7)


def test_kernel_max_margin_errors():
    with pytest.raises(ValueError, match="symmetric"):
        lib.kernel_max_margin(np.array([[1.0, 0.5], [0.0, 1.0]]), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="positive semidefinite"):
        lib.kernel_max_margin(np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="not separable"):   # rank 1: same point, two labels
        lib.kernel_max_margin(np.ones((2, 2)), np.array([1.0, -1.0]))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_simplex_max_margin_on_doubled_features_is_l1_max_margin(seed):
    """max over the simplex of [X, -X] = l1 max-margin of X = 1 / min ||w||_1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(10, 5))
    y = np.sign(X @ rng.normal(size=5))
    a, gamma = lib.simplex_max_margin(np.concatenate([X, -X], axis=1), y)
    w1 = np.asarray(lib.max_margin(X, y, p=1))
    np.testing.assert_allclose(gamma, 1 / np.abs(w1).sum(), rtol=1e-6)
    assert np.all(np.asarray(a) >= -1e-9) and abs(float(jnp.sum(a)) - 1) < 1e-9


def test_simplex_max_margin_brute_force_small():
    """d = 2: the simplex is a segment; compare with a fine grid (value may be negative)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(6, 2))
    y = rng.choice([-1.0, 1.0], size=6)
    _, gamma = lib.simplex_max_margin(X, y)
    s = np.linspace(0, 1, 200_001)
    A = np.stack([s, 1 - s], axis=1)
    brute = np.max(np.min((y[:, None] * X) @ A.T, axis=0))
    np.testing.assert_allclose(gamma, brute, atol=1e-5)


def test_dictionary_f1_max_margin_against_enumeration():
    """Two directions: the l1 LP equals the best over the (four) sign patterns of the
    simplex vertices, solved here by a grid over the l1 sphere."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.uniform(-1, 1, size=(8, 2)), np.ones((8, 1))], axis=1)
    theta = np.array([[1.0, 0.0, 0.3], [0.0, -1.0, 0.2]])
    unit = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    y = np.sign(np.maximum(X @ unit.T, 0) @ np.array([1.0, -1.0]) + 1e-3)   # separable
    r, gamma = lib.dictionary_f1_max_margin(X, y, 5.0 * theta)   # rows get normalized
    feats = np.maximum(X @ unit.T, 0)
    best = -np.inf
    for s1, s2 in itertools.product([-1, 1], repeat=2):
        t = np.linspace(0, 1, 100_001)
        R = np.stack([s1 * t, s2 * (1 - t)], axis=1)
        best = max(best, np.max(np.min((y[:, None] * feats) @ R.T, axis=0)))
    np.testing.assert_allclose(gamma, best, atol=1e-5)
    np.testing.assert_allclose(float(jnp.sum(jnp.abs(r))), 1.0, rtol=1e-9)


@pytest.mark.parametrize("shape", [(5, 2), (4, 3), (3,)])
def test_compress_radius(shape):
    P = np.random.default_rng(0).normal(size=shape) * 3
    Q = np.asarray(lib.compress_radius(P))
    r = np.linalg.norm(P, axis=-1)
    np.testing.assert_allclose(np.linalg.norm(Q, axis=-1), np.tanh(r), rtol=1e-12)
    np.testing.assert_allclose(np.sum(Q * P, axis=-1), np.tanh(r) * r, rtol=1e-12)  # same dir.
    assert np.all(np.asarray(lib.compress_radius(np.zeros(shape))) == 0)


def test_neuron_positions():
    a = np.array([-2.0, 0.5, 0.0])
    B = np.array([[0.0, 1.0], [3.0, 4.0], [1.0, 1.0]])
    pos, sign = lib.neuron_positions({"a": a, "B": B}, scale=2.0)
    np.testing.assert_allclose(pos[0], [0.0, np.tanh(1.0)])
    np.testing.assert_allclose(pos[1], np.tanh(1.25) * np.array([0.6, 0.8]))
    np.testing.assert_allclose(pos[2], [0.0, 0.0])
    np.testing.assert_array_equal(sign, [-1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="scale"):
        lib.neuron_positions({"a": a, "B": B}, scale=-1.0)
    with pytest.raises(ValueError, match="params"):
        lib.neuron_positions({"a": a}, scale=1.0)


def test_compress_radius_keeps_an_image_entry_in_the_subnormal_range():
    """Issue 21 round 12 (item 6): (-5.8e34, 1.5e-288) maps to tanh(r) p / r with r = |p|, so
    (-1, 1.5e-288 / 5.8e34 = 2.59e-323) to rounding (tanh(r) = 1 and r = 5.8e34 in float64):
    the second entry is subnormal and XLA flushed it to 0. Compared with the exact rational
    quotient rounded once to the subnormal grid (one ulp there is 4.9e-324)."""
    from fractions import Fraction as F

    out = np.asarray(lib.compress_radius(np.array([-5.8e34, 1.5e-288])))
    want = float(F(1.5e-288) / F(5.8e34))
    assert want > 0 and out[0] == -1.0
    assert abs(out[1] - want) <= 5e-324
