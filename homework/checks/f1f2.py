"""Checkers for the exercises of the chapter *F1 vs F2* (``chapters/f1_f2.md``)."""

from __future__ import annotations

import jax
import numpy as np

from lib import margins

from . import CheckFailed, assert_close, register


def _close(got, want, what, rtol=1e-8, atol=1e-10):
    assert_close(got, want, what, rtol=rtol, atol=atol)


@register("f1_f2/smoothed-margin")
def _smoothed_margin(answer, key):
    """``answer(z, beta)``: F_beta = -(1/beta) log(mean exp(-beta z))."""
    k1, k2 = jax.random.split(key)
    z = jax.random.normal(k1, (7,)) + 1.0
    for beta in (0.5, 3.0):
        got = answer(z, beta)
        want = margins.smoothed_margin(z, beta)
        if np.ndim(got) == 0 and np.isfinite(float(got)):
            if np.isclose(float(got), float(want - np.log(z.shape[0]) / beta), rtol=1e-8):
                raise CheckFailed("the 1/n inside the logarithm is missing (your value is off "
                                  "by log(n)/beta)")
            if np.isclose(float(got), float(-want), rtol=1e-8):
                raise CheckFailed("the sign is wrong: F_beta is MINUS the log of the loss, "
                                  "divided by beta")
        _close(got, want, f"F_beta at beta = {beta}")
    z = jax.random.uniform(k2, (5,), minval=0.5, maxval=2.0)
    got = answer(z, 1e4)
    if not np.all(np.isfinite(np.asarray(got, dtype=np.float64))):
        raise CheckFailed("at beta = 1e4 every exp(-beta z_i) underflows to 0 and the log is "
                          "-inf: factor out the largest term (jax.scipy.special.logsumexp)")
    _close(got, margins.smoothed_margin(z, 1e4), "F_beta at beta = 1e4")


@register("f1_f2/neuron-picture")
def _neuron_picture(answer, key):
    """``answer(a, B)``: tanh-compressed |a_j| b_j, shape (m, d)."""
    k1, k2 = jax.random.split(key)
    m, d = 9, 3
    a = 2.0 * jax.random.normal(k1, (m,))
    B = jax.random.normal(k2, (m, d))
    B = B.at[0].set(0.0)  # a dead neuron sits at the origin
    got = np.asarray(answer(a, B), dtype=np.float64)
    want, _ = margins.neuron_positions({"a": a, "B": B})
    if got.shape == (m, d) and np.all(np.isfinite(got)):
        P = np.abs(np.asarray(a))[:, None] * np.asarray(B)
        if np.allclose(got, np.tanh(P), rtol=1e-8):
            raise CheckFailed("tanh was applied to each coordinate: compress the radius |p_j| "
                              "and keep the direction p_j / |p_j|")
        signed = np.asarray(margins.compress_radius(np.asarray(a)[:, None] * np.asarray(B)))
        if np.allclose(got, signed, rtol=1e-8) and not np.allclose(signed, want):
            raise CheckFailed("use |a_j| b_j: the sign of a_j is shown by the colour, not the "
                              "position")
    if got.shape == (m, d) and not np.all(np.isfinite(got[0])):
        raise CheckFailed("a neuron with b_j = 0 gives 0/0: map the origin to itself")
    _close(got, want, "your positions")


@register("f1_f2/f2-norm")
def _f2_norm(answer, key):
    """``answer(K, y)``: RKHS norm of the minimal-norm interpolant, sqrt(y^T K^{-1} y)."""
    k1, k2 = jax.random.split(key)
    n, p = 6, 15
    Phi = jax.random.normal(k1, (n, p))
    y = jax.random.normal(k2, (n,))
    K = Phi @ Phi.T
    # Independent answer: in feature space, the minimal-norm w with Phi w = y has |w| = |h|_K.
    want = float(np.linalg.norm(np.linalg.pinv(np.asarray(Phi)) @ np.asarray(y)))
    got = answer(K, y)
    if np.ndim(got) != 0:
        raise CheckFailed(f"return a scalar, got shape {np.shape(got)}")
    got = float(got)
    if np.isclose(got, want**2, rtol=1e-6):
        raise CheckFailed("this is the squared norm y^T K^{-1} y: take the square root")
    if np.isclose(got, float(np.sqrt(np.asarray(y) @ np.asarray(K) @ np.asarray(y))), rtol=1e-6):
        raise CheckFailed("you used K instead of its inverse: the coefficients solve K c = y")
    _close(got, want, "your norm", rtol=1e-7)
