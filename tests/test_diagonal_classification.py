"""Tests of the classification additions to lib.diagonal (Moroshko et al. 2020): the margin
problem against scipy's SLSQP on the primal and cvxpy's max-margin limits, and exponential-loss
training against a smaller step and the sinh form of the flow."""

import numpy as np
import pytest
import scipy.optimize

from lib import convex, diagonal


def _data(seed, N=6, d=4):
    rng = np.random.default_rng(seed)
    w_star = np.zeros(d)
    w_star[:2] = [1.0, -0.5]
    X = rng.normal(size=(N, d))
    y = np.sign(X @ w_star)
    return X, y


def _slsqp(X, y, mu, depth):
    """Independent answer: the primal min Q^D_mu(w) s.t. y_n <x_n, w> >= 1 by SLSQP."""
    A = y[:, None] * X

    def obj(w):
        return mu * float(np.sum(np.asarray(diagonal.q_D(w / mu, depth))))

    def grad(w):
        return np.asarray(diagonal.h_D_inverse(w / mu, depth))

    w0 = np.asarray(convex.max_margin(X, y, p=2)) * 1.01
    cons = {"type": "ineq", "fun": lambda w: A @ w - 1.0, "jac": lambda w: A}
    sol = scipy.optimize.minimize(obj, w0, jac=grad, constraints=[cons], method="SLSQP",
                                  options={"ftol": 1e-14, "maxiter": 500})
    assert sol.success, sol.message
    return sol.x


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("mu", [0.1, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_margin_limit_matches_primal_slsqp(seed, mu, depth):
    X, y = _data(seed)
    w = diagonal.margin_limit(X, y, mu, depth)
    ref = _slsqp(X, y, mu, depth)
    np.testing.assert_allclose(w, ref, atol=2e-5 * max(1.0, np.abs(ref).max()))
    assert np.min(y * (X @ w)) >= 1 - 1e-8


@pytest.mark.parametrize("depth", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 3])
def test_margin_limit_large_mu_is_l2_max_margin(seed, depth):
    X, y = _data(seed)
    w = diagonal.margin_limit(X, y, 1e8, depth)
    ref = np.asarray(convex.max_margin(X, y, p=2))
    np.testing.assert_allclose(w, ref, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 3])
def test_margin_limit_small_mu_approaches_l1_max_margin(seed):
    X, y = _data(seed)
    ref = np.asarray(convex.max_margin(X, y, p=1))
    errs = [np.linalg.norm(diagonal.margin_limit(X, y, mu) - ref) for mu in (1e-10, 1e-100,
                                                                             1e-300)]
    assert errs[2] <= errs[0] + 1e-7
    assert max(errs) < 0.05 * np.linalg.norm(ref)


def test_margin_limit_bad_input():
    X, y = _data(0)
    with pytest.raises(ValueError, match="mu"):
        diagonal.margin_limit(X, y, 0.0)
    with pytest.raises(ValueError, match="mu"):
        diagonal.margin_limit(X, y, -1.0)
    with pytest.raises(ValueError, match="y"):
        diagonal.margin_limit(X, 2 * y, 1.0)
    Xs = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="separable"):
        diagonal.margin_limit(Xs, np.array([1.0, -1.0]), 1.0)


@pytest.mark.parametrize("depth", [2, 3])
def test_exponential_path_reaches_below_1e_minus_300(depth):
    X, y = _data(2, N=5, d=3)
    run = diagonal.exponential_loss_path(X, y, np.array([0.5, 2.0]), depth,
                                         accuracies=[800.0, 1500.0])
    assert np.all(run.log_loss[:, 0] <= -800.0) and np.all(run.log_loss[:, 1] <= -1500.0)
    assert np.all(np.isfinite(run.w))
    # smoothed-margin bounds gamma <= -log L <= gamma + log N (margins from the weights)
    gt = -run.log_loss
    assert np.all(run.margin <= gt + 1e-9) and np.all(gt <= run.margin + np.log(5) + 1e-9)


@pytest.mark.parametrize("depth", [2, 3])
def test_exponential_path_step_independent(depth):
    """A smaller step (closer to gradient flow) gives the same predictor."""
    X, y = _data(4, N=5, d=3)
    a = diagonal.exponential_loss_path(X, y, 1.0, depth, accuracies=[20.0, 100.0], step=0.25)
    b = diagonal.exponential_loss_path(X, y, 1.0, depth, accuracies=[20.0, 100.0], step=0.05)
    np.testing.assert_allclose(a.w_hat, b.w_hat, atol=1e-3)


def test_exponential_path_has_the_link_form():
    """Along the flow w = alpha^2 h_2(A^T lam) with lam >= 0 (the sinh form, D = 2): so
    w_hat solves the stationarity of margin_limit at mu = alpha^2 / gamma, and the
    stationarity residual after fitting lam >= 0 by NNLS vanishes."""
    X, y = _data(5, N=4, d=5)
    alpha = 1.5
    run = diagonal.exponential_loss_path(X, y, alpha, accuracies=[30.0])
    w = run.w[0]
    z = np.arcsinh(w / (2 * alpha ** 2))
    A = y[:, None] * X
    lam, resid = scipy.optimize.nnls(A.T, z)
    assert resid < 1e-3 * np.linalg.norm(z)


def test_exponential_path_bad_input():
    X, y = _data(0)
    with pytest.raises(ValueError, match="accuracies"):
        diagonal.exponential_loss_path(X, y, 1.0, accuracies=[10.0, 5.0])
    with pytest.raises(ValueError, match="alpha"):
        diagonal.exponential_loss_path(X, y, -1.0)
    with pytest.raises(ValueError, match="y"):
        diagonal.exponential_loss_path(X, np.zeros_like(y), 1.0)
