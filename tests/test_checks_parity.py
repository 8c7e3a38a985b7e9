"""The parity chapter's exercise checks: correct answers pass, wrong ones fail with a hint, stubs
are not attempted. The reference answers here are written independently of the checkers."""

import jax
import jax.numpy as jnp
import numpy as np
from checker_contract import checker_contract

from homework.checks import check


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


def _gated_pairs(theta, x):
    # explicit double loop over the pairs i < j (not the closed form of the chapter's solution)
    n = theta.shape[0]
    pairs = sum(theta[i] * theta[j] * x[i] * x[j] for i in range(n) for j in range(i + 1, n))
    return jnp.dot(theta, x) + 2.0 * pairs


CORRECT = {"parity/best-linear-loss": _best_linear_loss,
           "parity/beyond-kernel": _gated_pairs}
WRONG = {
    "parity/best-linear-loss": [_identity_sigma, lambda n, k, a: 0.5 - a / 2],
    "parity/beyond-kernel": [
        lambda theta, x: jnp.dot(theta, x),                                # the kernel itself
        lambda theta, x: jnp.dot(theta, x) + jnp.tanh(jnp.dot(theta, x)) ** 3,  # monotone link
        lambda theta, x: 1.0 + jnp.dot(theta, x) ** 2,                     # biased
        lambda theta, x: jnp.dot(theta, x) + jnp.sum(theta),               # wrong gradient
    ],
}


def test_identity_sigma_gets_the_specific_hint():
    result = check("parity/best-linear-loss", _identity_sigma, quiet=True)
    assert "Sigma = I" in result.message
    assert not np.isclose(_identity_sigma(20, 3, 0.5), _best_linear_loss(20, 3, 0.5))
    assert jax.numpy.isfinite(_best_linear_loss(3, 2, 0.5))


(test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
 test_stub_is_not_attempted) = checker_contract("parity", CORRECT, WRONG)
