"""Checkers for the exercises of the chapter *When gradient descent beats the tangent kernel*
(``chapters/parity.md``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import parity
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


@register("parity/unbiased-model")
def _unbiased_model(answer, key):
    """``answer(phi)`` returns ``f(theta, x)``: f(0, x) = 0, grad f(0, x) = phi(x), nonlinear."""
    k1, k2, k3 = jax.random.split(key, 3)
    n, p = 4, 3
    W = jax.random.normal(k1, (p, n))

    def phi(x):
        return jnp.tanh(W @ x)

    x = jnp.sign(jax.random.normal(k2, (6, n)))
    f = answer(phi)
    if not callable(f):
        raise CheckFailed("return a function f(theta, x)")
    zero = jnp.zeros(p)
    f0 = np.array([float(f(zero, xi)) for xi in x])
    if not np.allclose(f0, 0.0, atol=1e-12):
        raise CheckFailed("f(0, x) should be 0 at every x (unbiased), got up to "
                          f"{abs(f0).max():.3g}")
    grads = np.stack([np.asarray(jax.grad(f)(zero, xi)) for xi in x])
    want = np.stack([np.asarray(phi(xi)) for xi in x])
    if grads.shape != want.shape:
        raise CheckFailed(f"the gradient in theta has shape {grads.shape[1:]}, expected ({p},)")
    if not np.allclose(grads, want, atol=1e-9):
        raise CheckFailed("the gradient at theta = 0 should be phi(x): make every extra term "
                          "flat (zero value and slope) at theta = 0")
    theta = jax.random.normal(k3, (p,))
    gap = max(abs(float(f(theta, xi)) - float(theta @ phi(xi))) for xi in x)
    if gap < 1e-8:
        raise CheckFailed("your model equals its linearization <theta, phi(x)>: it is a kernel "
                          "model; add a term that vanishes to second order at 0")
