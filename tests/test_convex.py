"""Convex references against closed forms and hand-solved problems."""

import numpy as np
import pytest

import lib


def test_min_l2_is_pseudo_inverse():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 15))
    y = rng.standard_normal(6)
    np.testing.assert_allclose(lib.min_norm_interpolant(X, y, 2), np.linalg.pinv(X) @ y,
                               rtol=1e-10, atol=1e-12)


def test_min_l1_hand_solved_with_negative_entries():
    """x1 + x2 + x3 = 1 and x1 - x2 = -3: l1-minimal point is (-1.5, 1.5, 1).

    Parametrize x1 = s - 3/2... directly: x2 = x1 + 3, x3 = -2 - 2 x1; |x1| + |x1+3| + |2+2x1|
    is minimal (value 4) at x1 = -1, giving (-1, 2, 0)."""
    X = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 0.0]])
    y = np.array([1.0, -3.0])
    beta = lib.min_norm_interpolant(X, y, 1)
    np.testing.assert_allclose(beta, [-1.0, 2.0, 0.0], atol=1e-8)
    assert beta[0] < 0


def test_min_l1_sparse_recovery_against_lp_bound():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 60))
    beta_star = np.zeros(60)
    beta_star[[3, 17]] = [2.0, -1.5]
    beta = lib.min_norm_interpolant(X, X @ beta_star, 1)
    np.testing.assert_allclose(beta, beta_star, atol=1e-7)


def test_inconsistent_system():
    X = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="inconsistent"):
        lib.min_norm_interpolant(X, np.array([1.0, 2.0]), 1)
    with pytest.raises(ValueError, match="inconsistent"):
        lib.min_norm_interpolant(X, np.array([1.0, 2.0]), 2)


def test_max_margin_hand_solved_2d():
    """Points (2, 1) labelled +1 and (-1, 1) labelled -1 (a margin problem through 0).

    l2: minimise |w|^2 s.t. 2 w1 + w2 >= 1 and w1 - w2 >= 1: both active gives w = (2/3, -1/3).
    l1: minimise |w1| + |w2|: w = (1, 0) meets both constraints with norm 1, and any w with
    |w|_1 < 1 has 2 w1 + w2 < ... (checked by the LP optimum 1 below)."""
    X = np.array([[2.0, 1.0], [-1.0, 1.0]])
    y = np.array([1.0, -1.0])
    np.testing.assert_allclose(lib.max_margin(X, y, 2), [2 / 3, -1 / 3], atol=1e-8)
    w1 = lib.max_margin(X, y, 1)
    assert np.abs(w1).sum() == pytest.approx(1.0, abs=1e-8)
    assert np.all(y * (X @ w1) >= 1 - 1e-8)


def test_max_margin_not_separable():
    X = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="not linearly separable"):
        lib.max_margin(X, np.array([1.0, -1.0]), 2)


@pytest.mark.parametrize("bad, match", [
    (dict(p=3), "p must"), (dict(p=True), "p must"),
    (dict(y=np.array([1.0, 0.0])), "-1 and \\+1"),
    (dict(X=np.ones(2)), "X must have 2"),
    (dict(X=np.array([[np.inf, 0.0], [1.0, 1.0]])), "X contains non-finite"),
    (dict(y=np.array([1.0])), "y must have shape"),
])
def test_bad_input(bad, match):
    args = dict(X=np.array([[1.0, 0.0], [0.0, 1.0]]), y=np.array([1.0, -1.0]), p=2)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        lib.max_margin(args["X"], args["y"], args["p"])
