r"""Reference solutions of convex programs, solved with cvxpy (Clarabel).

The implicit-bias theorems of the course say that gradient flow converges to the solution of
a convex program. These are the programs for the two classical limits:

* :func:`min_norm_interpolant`: :math:`\arg\min \|\beta\|_p` s.t. :math:`X\beta = y`, the limit of
  regression in the kernel regime (``p = 2``) and in the rich regime of diagonal networks
  (``p = 1``; Woodworth et al. 2020, Theorem 1 and Sec. 4).
* :func:`max_margin`: :math:`\arg\min \|w\|_p` s.t. :math:`y_n\langle x_n, w\rangle \ge 1`, the
  limit direction of classification with the exponential loss (``p = 2``: Soudry et al. 2018;
  ``p = 1``: the rich limit of diagonal networks, Moroshko et al. 2020).

Solutions are accepted only when the solver reports ``optimal``; anything else raises.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = ["min_norm_interpolant", "max_margin"]

_TOL = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11, tol_ktratio=1e-9,
            max_iter=500)


def _check_p(p):
    if isinstance(p, bool) or p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    return int(p)


def _cvxpy():
    """cvxpy, imported on first use (it takes seconds to import; most chapters never need it)."""
    import cvxpy

    return cvxpy


def _scaled(X, y):
    """Divide X and y by their largest absolute entries; return (X', y', cx, cy)."""
    cx = float(np.max(np.abs(X)))
    cy = float(np.max(np.abs(y)))
    if cx == 0.0:
        raise ValueError("X must not be identically zero")
    return X / cx, (y / cy if cy > 0 else y), cx, cy


def _solve(problem, what):
    cp = _cvxpy()
    try:
        problem.solve(solver=cp.CLARABEL, **_TOL)
    except cp.error.SolverError as err:
        raise RuntimeError(f"{what}: the solver failed ({err})") from err
    return problem.status


def min_norm_interpolant(X, y, p=2):
    r"""Minimum-:math:`\ell_p`-norm interpolant :math:`\arg\min_\beta \|\beta\|_p` s.t.
    :math:`X\beta = y`.

    Args:
        X: ``(N, d)`` float design matrix.
        y: ``(N,)`` float targets.
        p: 1 or 2.

    Returns:
        ``(d,)`` float64 JAX array :math:`\beta` (to about 1e-9 relative accuracy).

    Raises:
        ValueError: bad shapes, non-finite entries, ``p`` not in {1, 2}, an inconsistent
            system (no exact interpolant), or an interpolant outside float64's range.
        RuntimeError: the solver stopped without reaching optimality (with its residual).

    Example:
        >>> import numpy as np
        >>> beta = min_norm_interpolant(np.array([[1.0, 1.0]]), np.array([2.0]), p=2)
        >>> np.round(np.asarray(beta), 12).tolist()
        [1.0, 1.0]
    """
    X = _validate.as_array("X", X, ndim=2)
    y = _validate.as_array("y", y, shape=(X.shape[0],))
    p = _check_p(p)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    # Solve the scaled problem (X / cx) b' = y / cy, b = b' cy / cx: tolerances are then relative.
    Xn, yn, cx, cy = *_scaled(np.asarray(X), np.asarray(y)),
    if cy == 0.0:
        return jnp.zeros(Xn.shape[1])
    if p == 2:
        beta = np.linalg.lstsq(Xn, yn, rcond=None)[0]
        resid = np.linalg.norm(Xn @ beta - yn) / np.linalg.norm(yn)
        if resid > 1e-8:
            raise ValueError(f"X beta = y is inconsistent (relative least-squares residual "
                             f"{resid:.3e})")
        # lstsq returns the minimum-norm solution for under-determined systems
        return _unscale(beta, cy / cx, X, y)
    cp = _cvxpy()
    beta = cp.Variable(Xn.shape[1])
    prob = cp.Problem(cp.Minimize(cp.norm1(beta)), [Xn @ beta == yn])
    status = _solve(prob, "min_norm_interpolant")
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("X beta = y is inconsistent: no interpolant exists")
    if status != cp.OPTIMAL:
        resid = (np.nan if beta.value is None
                 else np.linalg.norm(Xn @ beta.value - yn) / np.linalg.norm(yn))
        raise RuntimeError(f"min_norm_interpolant: solver status {status!r} (relative "
                           f"residual {resid:.3e} of the scaled system)")
    return _unscale(beta.value, cy / cx, X, y)


def _unscale(beta_scaled, factor, X, y):
    """beta = beta_scaled * factor, refusing a result outside float64's range."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        beta = beta_scaled * factor
        ok = np.all(np.isfinite(beta)) and np.all(np.isfinite(X @ beta))
        fits = ok and np.linalg.norm(X @ beta - y) <= 1e-6 * np.linalg.norm(y)
    if not (ok and fits):
        raise ValueError(f"the interpolant is outside float64's range (|y| / |X| = {factor:.3g}):"
                         " rescale X or y")
    return jnp.asarray(beta)


def max_margin(X, y, p=2):
    r"""Maximum-margin linear classifier :math:`\arg\min_w \|w\|_p` s.t.
    :math:`y_n \langle x_n, w\rangle \ge 1` for all n.

    The :math:`\ell_p` margin of the data is :math:`1 / \|w\|_p` and its direction is
    :math:`w / \|w\|_p`.

    Args:
        X: ``(N, d)`` float inputs.
        y: ``(N,)`` labels in {-1, +1}.
        p: 1 or 2.

    Returns:
        ``(d,)`` float64 JAX array ``w``.

    Raises:
        ValueError: bad shapes or labels, ``p`` not in {1, 2}, or data that are not linearly
            separable (through the origin).
        RuntimeError: the solver stopped without reaching optimality.

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 0.5], [-1.0, 0.5]]); y = np.array([1.0, -1.0])
        >>> [round(v, 6) for v in max_margin(X, y, p=2).tolist()]
        [1.0, 0.0]
    """
    X = _validate.as_array("X", X, ndim=2)
    y = _validate.labels("y", y, X.shape[0])
    p = _check_p(p)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    # Scale the inputs to max |X| = 1 (w = w' / cx), so the solver's tolerances are relative.
    Xn, _, cx, _ = _scaled(np.asarray(X), np.ones(1))
    yn = np.asarray(y)
    cp = _cvxpy()
    w = cp.Variable(Xn.shape[1])
    objective = cp.norm1(w) if p == 1 else cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(objective), [cp.multiply(yn, Xn @ w) >= 1])
    status = _solve(prob, "max_margin")
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("the data (X, y) are not linearly separable through the origin")
    if status != cp.OPTIMAL:
        raise RuntimeError(f"max_margin: solver status {status!r}")
    w = w.value / cx
    if not np.all(np.isfinite(w)):
        raise RuntimeError("max_margin: the solution overflowed (inputs too small to separate)")
    return jnp.asarray(w)
