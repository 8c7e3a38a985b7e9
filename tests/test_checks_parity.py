"""The parity chapter's exercise checks: correct answers pass, wrong ones fail with a hint, stubs
are not attempted. The reference answers here are written independently of the checkers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lib.checks import check, registered


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


def _stub(*args):
    raise NotImplementedError


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


def test_every_parity_exercise_is_covered():
    assert sorted(e for e in registered() if e.startswith("parity/")) == sorted(CORRECT)


@pytest.mark.parametrize("exercise", sorted(CORRECT))
def test_correct_passes(exercise):
    assert check(exercise, CORRECT[exercise], quiet=True).status == "passes"


@pytest.mark.parametrize("exercise,index", [(e, i) for e in WRONG for i in range(len(WRONG[e]))])
def test_wrong_fails_with_hint(exercise, index):
    result = check(exercise, WRONG[exercise][index], quiet=True)
    assert result.status == "fails" and result.message


@pytest.mark.parametrize("exercise", sorted(CORRECT))
def test_stub_is_not_attempted(exercise):
    assert check(exercise, _stub, quiet=True).status == "not attempted"


def test_identity_sigma_gets_the_specific_hint():
    result = check("parity/best-linear-loss", _identity_sigma, quiet=True)
    assert "Sigma = I" in result.message
    assert not np.isclose(_identity_sigma(20, 3, 0.5), _best_linear_loss(20, 3, 0.5))
    assert jax.numpy.isfinite(_best_linear_loss(3, 2, 0.5))
