"""The parity chapter's exercise checks: correct answers pass, wrong ones fail with a hint, stubs
are not attempted. The reference answers here are written independently of the checkers."""

import jax
import jax.numpy as jnp
import numpy as np
from checker_contract import checker_contract

from lib.checks import check


def _best_linear_loss(n, k, alpha):
    # build Sigma and c explicitly and solve (no closed form, no lib.parity)
    c = np.full(n, alpha * 2.0 ** (-k - 1))
    c[:k] = alpha * 2.0 ** (1 - k) + (1 - alpha) * (k == 1)
    S = (1 - alpha / 4) * np.eye(n) + alpha / 4 * np.ones((n, n))
    return 0.5 - 0.5 * c @ np.linalg.solve(S, c)


def _identity_sigma(n, k, alpha):
    c = np.full(n, alpha * 2.0 ** (-k - 1))
    c[:k] = alpha * 2.0 ** (1 - k) + (1 - alpha) * (k == 1)
    return 0.5 - 0.5 * c @ c


def _unbiased_model(phi):
    def f(theta, x):
        lin = jnp.dot(theta, phi(x))
        return lin + jnp.sum(theta**2) * lin          # second-order term: flat at 0
    return f


CORRECT = {"parity/best-linear-loss": _best_linear_loss,
           "parity/unbiased-model": _unbiased_model}
WRONG = {
    "parity/best-linear-loss": [_identity_sigma, lambda n, k, a: 0.5 - a / 2],
    "parity/unbiased-model": [
        lambda phi: (lambda theta, x: jnp.dot(theta, phi(x))),          # linear: no feature
        lambda phi: (lambda theta, x: 1.0 + jnp.dot(theta, phi(x)) ** 2),  # biased
        lambda phi: (lambda theta, x: jnp.dot(theta, phi(x)) + jnp.sum(theta)),  # wrong grad
    ],
}


def test_identity_sigma_gets_the_specific_hint():
    result = check("parity/best-linear-loss", _identity_sigma, quiet=True)
    assert "Sigma = I" in result.message
    assert not np.isclose(_identity_sigma(20, 3, 0.5), _best_linear_loss(20, 3, 0.5))
    assert jax.numpy.isfinite(_best_linear_loss(3, 2, 0.5))


(test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
 test_stub_is_not_attempted) = checker_contract("parity", CORRECT, WRONG)
