"""Checkers for the exercises of the chapter *Diagonal linear networks*
(``chapters/diagonal_regression.md``)."""

from __future__ import annotations

import jax
import numpy as np

from lib import convex, diagonal

from . import CheckFailed, register


def _data(key, N=4, d=9):
    k1, k2 = jax.random.split(key)
    X = np.asarray(jax.random.normal(k1, (N, d)))
    y = np.asarray(jax.random.normal(k2, (N,)))
    return X, y


@register("diagonal_regression/dual-d3")
def _dual_d3(answer, key):
    """``answer(nu, X, y, alpha)``: the D = 3 dual objective on ``|X^T nu| < 1``, up to an
    additive constant (H_3 is not displayed in the chapter: the student integrates h_3)."""
    X, y = _data(key)
    alpha = 0.7
    nus = np.asarray(jax.random.normal(jax.random.fold_in(key, 1), (4, X.shape[0])))
    # points inside the domain, some of them near its boundary, where the pole matters
    inside = np.array([[0.2], [0.5], [0.8], [0.95]])
    nus = nus / np.max(np.abs(nus @ X), axis=1, keepdims=True) * inside
    got = np.array([float(answer(nu, X, y, alpha)) for nu in nus])
    want = np.array([float(diagonal.dual_objective(nu, X, y, alpha, 3)) for nu in nus])
    if not np.all(np.isfinite(got)):
        raise CheckFailed("your objective returned NaN or inf inside the domain |X^T nu| < 1")
    diff_got, diff_want = got - got[0], want - want[0]
    scale = np.max(np.abs(diff_want))
    if np.allclose(diff_got, -diff_want, rtol=1e-8, atol=1e-10 * scale):
        raise CheckFailed("the sign of the y^T nu term (or of the whole objective) is flipped")
    if not np.allclose(diff_got, diff_want, rtol=1e-8, atol=1e-10 * scale):
        ratio = diff_got[1:] / np.where(diff_want[1:] == 0, 1, diff_want[1:])
        raise CheckFailed("differences of your objective do not match the dual's (ratios "
                          f"{np.round(ratio, 3).tolist()}); check the alpha^3 factor and "
                          "that the derivative of your H_3 is h_3")


@register("diagonal_regression/alpha-for-l1")
def _alpha_for_l1(answer, key):
    """``answer(X, y, depth, eps)``: alpha with ||beta_alpha||_1 <= (1+eps) l1, 2 alpha not."""
    X, y = _data(key, N=5, d=14)
    eps = 0.05
    l1 = float(np.abs(np.asarray(convex.min_norm_interpolant(X, y, p=1))).sum())
    for depth in (2, 3):
        alpha = float(answer(X, y, depth, eps))
        if not np.isfinite(alpha) or alpha <= 0:
            raise CheckFailed(f"alpha must be a positive number, got {alpha!r} (depth {depth})")
        b1, b2 = np.asarray(diagonal.implicit_bias_limit(X, y, np.array([alpha, 2 * alpha]),
                                                         depth))
        n1, n2 = np.abs(b1).sum() / l1 - 1, np.abs(b2).sum() / l1 - 1
        if n1 > eps:
            raise CheckFailed(f"depth {depth}: at your alpha = {alpha:.3e} the l1 norm is "
                              f"{n1:.3f} above the minimum (need <= {eps}); go smaller")
        if n2 <= eps:
            raise CheckFailed(f"depth {depth}: alpha = {alpha:.3e} is needlessly small: "
                              f"2 alpha already gives an excess of {n2:.4f} <= {eps}")
