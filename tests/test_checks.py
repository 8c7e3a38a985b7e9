"""The exercise-check convention: correct answers pass, wrong ones fail with a hint, stubs are
reported as not attempted. Reference answers here are written independently of the checkers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import homework.checks
import lib
from homework.checks import check, registered


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
    assert homework.checks.results[exercise].status == "passes"


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
    from homework.checks import _key
    a = jax.random.normal(_key("setup/symmetrize"), (3,))
    b = jax.random.normal(_key("setup/gd-least-squares"), (3,))
    assert not np.allclose(a, b)


# --------------------------------------------------------------------------------------------
# Setup exercises: the checkers agree with the chapter's model and wording (issue 20)
# --------------------------------------------------------------------------------------------

def test_symmetrize_kernel_is_half_for_the_chapters_1_over_m_network():
    """Independent of the checker: lib.two_layer divides by the width, so doubling the units
    with opposite output weights halves the tangent kernel (and zeroes the output)."""
    a = jnp.array([0.3, -1.2, 0.7])
    B = jnp.array([[1.0, 0.5], [-0.4, 2.0], [0.9, -1.1]])
    x = jnp.array([[1.0, 2.0], [-0.5, 0.3], [2.0, -1.0]])
    a2, B2 = _symmetrize(a, B)
    assert np.allclose(lib.two_layer_batch({"a": a2, "B": B2}, x), 0.0, atol=1e-15)
    K = lib.empirical_ntk(lib.two_layer, {"a": a, "B": B}, x)
    K2 = lib.empirical_ntk(lib.two_layer, {"a": a2, "B": B2}, x)
    # by hand: unit j contributes (1/m^2)[relu(b.x) relu(b.x') + a^2 1{b.x>0} 1{b.x'>0} x.x']
    pre = np.asarray(x @ B.T)
    act, gate = np.maximum(pre, 0), (pre > 0).astype(float)
    K_hand = (act @ act.T + (gate * np.asarray(a) ** 2) @ gate.T * np.asarray(x @ x.T)) / 9
    assert np.allclose(K, K_hand, rtol=1e-12)
    assert np.allclose(K2, 0.5 * K_hand, rtol=1e-12)


@pytest.mark.parametrize("wrong", [
    lambda a, B: (jnp.concatenate([a, -a]), jnp.concatenate([B, -B])),      # output not 0
    lambda a, B: (jnp.zeros(2 * a.shape[0]), jnp.concatenate([B, B])),      # kernel lost
    lambda a, B: (jnp.concatenate([2 * a, -2 * a]), jnp.concatenate([B, B])),  # wrong scale
])
def test_symmetrize_wrong_answers_fail_without_giving_the_answer(wrong):
    result = check("setup/symmetrize", wrong, quiet=True)
    assert result.status == "fails"
    assert "opposite sign" not in result.message and "same input weights" not in result.message


def _gd_python_loop(X, y, eta, k):
    beta = np.zeros(X.shape[1])
    for _ in range(k):
        beta = beta - eta * np.asarray(X).T @ (np.asarray(X) @ beta - np.asarray(y))
    return beta


def _gd_fori_loop(X, y, eta, k):
    return jax.lax.fori_loop(0, k, lambda _, b: b - eta * X.T @ (X @ b - y), jnp.zeros(X.shape[1]))


def _gd_eigen(X, y, eta, k):
    lam, U = np.linalg.eigh(np.asarray(X @ X.T))
    return np.asarray(X).T @ (U @ (((1 - (1 - eta * lam) ** k) / lam) * (U.T @ np.asarray(y))))


@pytest.mark.parametrize("looped", [_gd_python_loop, _gd_fori_loop])
def test_gd_least_squares_rejects_a_loop_over_steps(looped):
    # the loop computes the right iterates (compare with the closed form at k = 7) ...
    X = jnp.array([[1.0, 0.5, -0.2], [0.3, -1.0, 0.8]])
    y = jnp.array([1.0, -0.5])
    assert np.allclose(looped(X, y, 0.1, 7), _gd(np.asarray(X), np.asarray(y), 0.1, 7))
    # ... yet the exercise asks for no loop, and the check says so
    result = check("setup/gd-least-squares", looped, quiet=True)
    assert result.status == "fails" and "loop" in result.message


def test_gd_least_squares_accepts_another_closed_form():
    assert check("setup/gd-least-squares", _gd_eigen, quiet=True).status == "passes"


def test_ntk_hint_does_not_give_the_formula():
    result = check("setup/ntk-linear-two-layer", WRONG["setup/ntk-linear-two-layer"], quiet=True)
    assert result.status == "fails" and "||v||^2" not in result.message
