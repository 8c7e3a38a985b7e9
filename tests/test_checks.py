"""The exercise-check convention: correct answers pass, wrong ones fail with a hint, stubs are
reported as not attempted. Reference answers here are written independently of the checkers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lib
from lib.checks import check, registered


def _ntk_linear(U, v, x1, x2):
    return (x1 @ U.T) @ (U @ x2.T) + jnp.dot(v, v) * (x1 @ x2.T)


def _symmetrize(a, B):
    return jnp.concatenate([a, -a]), jnp.concatenate([B, B])


def _gd(X, y, eta, k):
    G = X @ X.T
    n = G.shape[0]
    return X.T @ np.linalg.solve(G, (np.eye(n) - np.linalg.matrix_power(np.eye(n) - eta * G, k))
                                 @ y)


def _stub(*args):
    raise NotImplementedError("exercise")


CORRECT = {
    "setup/ntk-linear-two-layer": _ntk_linear,
    "setup/symmetrize": _symmetrize,
    "setup/gd-least-squares": _gd,
}
WRONG = {
    "setup/ntk-linear-two-layer": lambda U, v, x1, x2: (x1 @ U.T) @ (U @ x2.T),
    "setup/symmetrize": lambda a, B: (jnp.concatenate([a, a]), jnp.concatenate([B, B])),
    "setup/gd-least-squares": lambda X, y, eta, k: np.zeros(X.shape[1]),
}


def test_every_registered_exercise_is_covered_here():
    setup_ids = [e for e in registered() if e.startswith("setup/")]
    assert sorted(setup_ids) == sorted(CORRECT)


@pytest.mark.parametrize("exercise", sorted(CORRECT))
def test_correct_passes(exercise, capsys):
    assert check(exercise, CORRECT[exercise]).status == "passes"
    assert "passes" in capsys.readouterr().out
    assert lib.checks.results[exercise].status == "passes"


@pytest.mark.parametrize("exercise", sorted(WRONG))
def test_wrong_fails_with_hint(exercise):
    result = check(exercise, WRONG[exercise], quiet=True)
    assert result.status == "fails" and result.message


@pytest.mark.parametrize("exercise", sorted(CORRECT))
def test_stub_is_not_attempted(exercise):
    assert check(exercise, _stub, quiet=True).status == "not attempted"


def test_crashing_answer_is_a_failure_not_a_crash():
    result = check("setup/symmetrize", lambda a, B: 1 / 0, quiet=True)
    assert result.status == "fails" and "ZeroDivisionError" in result.message


def test_unknown_exercise():
    with pytest.raises(ValueError, match="not registered"):
        check("setup/nope", None)


def test_check_keys_differ_between_exercises():
    from lib.checks import _key
    a = jax.random.normal(_key("setup/symmetrize"), (3,))
    b = jax.random.normal(_key("setup/gd-least-squares"), (3,))
    assert not np.allclose(a, b)
