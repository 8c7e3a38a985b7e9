"""Checkers for the exercises of the chapter *Diagonal linear networks for classification*
(``chapters/diagonal_classification.md``)."""

from __future__ import annotations

import jax
import numpy as np

from lib import diagonal

from . import CheckFailed, register


@register("diagonal_classification/margin-dual")
def _margin_dual(answer, key):
    """``answer(lam, X, y, mu)``: the dual objective mu sum H_2(A^T lam) - sum lam of the
    margin problem (D = 2), A = diag(y) X; compared with lib.diagonal.H_D."""
    k1, k2, k3 = jax.random.split(key, 3)
    N, d = 5, 4
    X = np.asarray(jax.random.normal(k1, (N, d)))
    y = np.where(np.asarray(jax.random.normal(k2, (N,))) > 0, 1.0, -1.0)
    lam = np.abs(np.asarray(jax.random.normal(k3, (N,))))
    for mu in (0.1, 3.0):
        z = (y[:, None] * X).T @ lam
        want = mu * float(np.sum(np.asarray(diagonal.H_D(z, 2)))) - float(np.sum(lam))
        got = float(answer(lam, X, y, mu))
        if not np.isfinite(got):
            raise CheckFailed("your objective is not finite")
        no_labels = mu * float(np.sum(np.asarray(diagonal.H_D(X.T @ lam, 2)))) - lam.sum()
        if np.isclose(got, no_labels, rtol=1e-8) and not np.isclose(want, no_labels):
            raise CheckFailed("the labels are missing: use z = X^T (y * lam)")
        if abs(got - want) > 1e-9 * max(1.0, abs(want)):
            raise CheckFailed(f"at mu = {mu} you return {got:.6g}, expected {want:.6g}; "
                              "recall H_2(z) = 2 cosh z - 2 and the minus sum of lam")
