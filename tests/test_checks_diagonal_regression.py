"""Checkers of the chapter *Diagonal linear networks*: a correct answer passes, a wrong one
fails with a hint, a stub is "not attempted". Reference answers written independently."""

import jax.numpy as jnp
import numpy as np
from checker_contract import checker_contract

import lib
from homework.checks import check


def _dual(nu, X, y, alpha):
    # H_3(z) = ((1 - z)^-2 + (1 + z)^-2) / 2, integrated by hand from h_3
    z = X.T @ nu
    return alpha ** 3 * jnp.sum(0.5 / (1 - z) ** 2 + 0.5 / (1 + z) ** 2) - y @ nu


def _alpha_for_l1(X, y, depth, eps):
    """Bisection in log(alpha) (a different method from the chapter's grid)."""
    l1 = float(np.abs(np.asarray(lib.min_norm_interpolant(X, y, p=1))).sum())

    def excess(log_a):
        b = np.asarray(lib.implicit_bias_limit(X, y, float(np.exp(log_a)), depth))
        return np.abs(b).sum() / l1 - 1 - eps

    lo, hi = -300.0, 5.0  # excess(lo) < 0 < excess(hi)
    while hi - lo > 0.3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) <= 0 else (lo, mid)
    return float(np.exp(lo))


CORRECT = {"diagonal_regression/dual-d3": _dual,
           "diagonal_regression/alpha-for-l1": _alpha_for_l1}
WRONG = {
    # the D = 2 answer (2 alpha^2 cosh) where D = 3 is asked
    "diagonal_regression/dual-d3": lambda nu, X, y, alpha:
        alpha ** 2 * jnp.sum(2 * jnp.cosh(X.T @ nu)) - y @ nu,
    "diagonal_regression/alpha-for-l1": lambda X, y, depth, eps: 1e-300,
}


def test_too_large_alpha_fails():
    result = check("diagonal_regression/alpha-for-l1", lambda X, y, depth, eps: 10.0, quiet=True)
    assert result.status == "fails" and "go smaller" in result.message


def test_sign_error_in_dual_is_named():
    result = check("diagonal_regression/dual-d3",
                   lambda nu, X, y, a: -(a ** 3 * jnp.sum(0.5 / (1 - X.T @ nu) ** 2
                                                          + 0.5 / (1 + X.T @ nu) ** 2) - y @ nu),
                   quiet=True)
    assert result.status == "fails" and "sign" in result.message


(test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
 test_stub_is_not_attempted) = checker_contract("diagonal_regression", CORRECT, WRONG)
