"""Checkers for the exercises of the chapter *When gradient descent beats the tangent kernel*
(``chapters/parity.md``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lib import parity

from . import CheckFailed, register


@register("parity/best-linear-loss")
def _best_linear_loss(answer, key):
    """``answer(n, k, alpha)``: exact loss of the best linear predictor on D_I, I = first k."""
    rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1)))
    cases = [(128, 7, 0.5), (2, 2, 0.9), (20, 1, 0.3)]
    cases += [(int(n), int(rng.integers(2, n + 1)), float(rng.uniform(0.01, 1.0)))
              for n in rng.integers(2, 40, size=4)]
    for n, k, alpha in cases:
        want = parity.bsp_best_linear_loss(n, list(range(k)), alpha)
        got = answer(n, k, alpha)
        try:
            got = float(got)
        except (TypeError, ValueError) as err:
            raise CheckFailed(f"return one number (the loss), got {type(got).__name__}") from err
        if not np.isfinite(got):
            raise CheckFailed(f"your loss is {got} for (n, k, alpha) = ({n}, {k}, {alpha})")
        if abs(got - want) <= 1e-9:
            continue
        c = np.asarray(parity.bsp_correlations(n, list(range(k)), alpha))
        if abs(got - (0.5 - 0.5 * c @ c)) < 1e-12:
            raise CheckFailed("you used Sigma = I: under the biased component the bits are "
                              "correlated, E[x_i x_j] = alpha/4 for i != j")
        if abs(got - (0.5 + 0.5 * (c @ c))) < 1e-9:
            raise CheckFailed("the sign of the edge is wrong: the best loss is 1/2 MINUS "
                              "c^T Sigma^-1 c / 2")
        raise CheckFailed(f"for (n, k, alpha) = ({n}, {k}, {alpha}) your loss is {got:.10g}, "
                          "it should be between 1/2 - alpha/2 and 1/2 (check c and Sigma)")


@register("parity/beyond-kernel")
def _beyond_kernel(answer, key):
    """``answer(theta, x)``: f(0, x) = 0, grad f(0, x) = x, and one exact gradient step from 0 on
    a biased 2-parity beats the best linear predictor (the tangent kernel) by a clear margin."""
    if not callable(answer):
        raise CheckFailed("pass the model itself: a function f(theta, x)")
    i, j = (int(v) for v in jax.random.choice(key, 4, (2,), replace=False))
    cases = [(4, sorted([i, j]), 0.5), (6, [2, 5], 0.3)]
    etas = jnp.logspace(-2, 2, 41)

    def outputs(theta, x):
        return jax.vmap(answer, in_axes=(None, 0))(theta, x)

    @jax.jit
    def analysis(x, y, prob):
        """Value and gradient at 0, and the loss after one exact step of each size (one compile
        per shape: eager calls would compile every operation separately)."""
        zero = jnp.zeros(x.shape[1])

        def loss(theta):
            return 0.5 * jnp.sum(prob * (outputs(theta, x) - y) ** 2)

        g = jax.grad(loss)(zero)
        return (outputs(zero, x), jax.vmap(jax.grad(answer), in_axes=(None, 0))(zero, x),
                jax.vmap(lambda eta: loss(-eta * g))(etas), g)

    for n, subset, alpha in cases:
        x, y, prob = parity.parity_atoms(n, subset, alpha)
        try:
            out, grads, step_losses, g = analysis(x, y, prob)
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - any failure of the student's code
            raise CheckFailed(f"f(theta, x) must take theta of shape ({n},) and one input x of "
                              f"shape ({n},) and return a scalar: {err}") from err
        if not np.allclose(np.asarray(out), 0.0, atol=1e-12):
            raise CheckFailed("f(0, x) should be 0 at every x (an unbiased initialization)")
        if not np.allclose(np.asarray(grads), np.asarray(x), atol=1e-9):
            raise CheckFailed("the gradient at theta = 0 should be x: make every extra term flat "
                              "(zero value and slope) at theta = 0")
        best = float(jnp.min(step_losses))
        linear = parity.bsp_best_linear_loss(n, subset, alpha)
        if not np.isfinite(best) or (0.5 - best) < 1.5 * (0.5 - linear):
            theta = -etas[20] * g
            rows = jax.vmap(jax.grad(answer), in_axes=(None, 0))(theta, x)
            xs = np.asarray(x)
            cos = np.sum(np.asarray(rows) * xs, 1) / (
                np.linalg.norm(np.asarray(rows), axis=1) * np.sqrt(n) + 1e-300)
            hint = (" Every gradient of your model is a multiple of x: it is a link of the linear "
                    "predictor <theta, x>, add a term that multiplies parameters."
                    if np.all(np.abs(np.abs(cos) - 1) < 1e-9) else "")
            raise CheckFailed(f"on the biased parity (n, I, alpha) = ({n}, {subset}, {alpha}) "
                              f"one step reaches edge {0.5 - best:.4f}, the best linear "
                              f"predictor {0.5 - linear:.4f}: not clearly beyond the kernel "
                              f"(need 1.5 times).{hint}")
