r"""Reference solutions of convex programs, solved with cvxpy (Clarabel).

The implicit-bias theorems of the course say that gradient flow converges to the solution of
a convex program. These are the programs for the two classical limits:

* :func:`min_norm_interpolant`: :math:`\arg\min \|\beta\|_p` s.t. :math:`X\beta = y`, the limit of
  regression in the kernel regime (``p = 2``) and in the rich regime of diagonal networks
  (``p = 1``; Woodworth et al. 2020, Theorem 1 and Sec. 4).
* :func:`max_margin`: :math:`\arg\min \|w\|_p` s.t. :math:`y_n\langle x_n, w\rangle \ge 1`, the
  limit direction of classification with the exponential loss (``p = 2``: Soudry et al. 2018;
  ``p = 1``: the rich limit of diagonal networks, Moroshko et al. 2020).

Solutions are accepted only when they verify: the solver reports ``optimal``, or (the
minimum-:math:`\ell_1` interpolant, a linear program solved by HiGHS) the primal residual, dual
feasibility and duality gap are checked directly; anything else raises.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = ["Certificate", "min_norm_interpolant", "max_margin"]

# A convex solution is accepted when its relative residual, dual infeasibility and duality gap
# are at most this (the solver's own status aside).
_VERIFY_TOL = 1e-9

# A p = 2 solution is accepted when its relative residual is at most this many times
# max(N, d) eps (|X| |beta| / |y| + 1): a backward-stable solve reaches far below it.
_BACKWARD = 100.0

_TOL = dict(tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11, tol_ktratio=1e-9,
            max_iter=500)


def _check_p(p):
    # only integers: 1 + 0j, np.array(1), "1" or 2.0 compare equal to 1 or 2 but are refused
    if (isinstance(p, bool | np.bool_) or not isinstance(p, numbers.Integral)
            or p not in (1, 2)):
        raise ValueError(f"p must be 1 or 2 (an int), got {type(p).__name__} {p!r}")
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
    import warnings

    cp = _cvxpy()
    try:
        with warnings.catch_warnings():
            # "Solution may be inaccurate": the status is acted on by the callers (an
            # optimal_inaccurate answer is never returned unverified)
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=cp.CLARABEL, **_TOL)
    except cp.error.SolverError as err:
        raise RuntimeError(f"{what}: the solver failed ({err})") from err
    return problem.status


def min_norm_interpolant(X, y, p=2, *, return_certificate=False):
    r"""Minimum-:math:`\ell_p`-norm interpolant :math:`\arg\min_\beta \|\beta\|_p` s.t.
    :math:`X\beta = y`.

    Args:
        X: ``(N, d)`` float design matrix.
        y: ``(N,)`` float targets.
        p: 1 or 2.
        return_certificate: also return how the ``p = 1`` solution was verified.

    ``p = 2`` is the least-squares minimum-norm solution. ``p = 1`` is a linear program
    (:math:`\beta = u - v`, :math:`u, v \ge 0`), solved by HiGHS through
    ``scipy.optimize.linprog``; the solution is accepted only when it verifies: relative
    residual, dual feasibility of the equality multipliers :math:`\lambda`
    (:math:`\|X^\top\lambda\|_\infty \le 1`, scaled system) and relative duality gap
    :math:`|\|\beta\|_1 - y^\top\lambda| / \|\beta\|_1`, each at most 1e-9; the LP's
    point is then refined on its support :math:`S` (iterative refinement of
    :math:`X_S\beta_S = y` with residuals computed exactly) and its backward error,
    residual beyond rounding and estimated forward error on the caller's ``X`` and ``y``
    must be at most 1e-9 too (see :class:`Certificate`, which reports the exact residual,
    rounding included). (An
    interior-point solver, such as cvxpy's default Clarabel, stops at ``optimal_inaccurate``
    on the sparse-regression problem of the diagonal-regression chapter, d = 1000, N = 100
    (sizes chosen by the course), although its answer is accurate.)

    Returns:
        ``(d,)`` float64 JAX array :math:`\beta` (to about 1e-9 relative accuracy); with
        ``return_certificate=True`` the pair ``(beta, certificate)``, a :class:`Certificate`
        (``None`` for ``p = 2`` and for ``y = 0``).

    Raises:
        ValueError: bad shapes, non-finite entries, ``X`` all zero or with only subnormal entries
            (``max |X|`` below 2.2e-308), ``p`` not the int 1 or 2 (``2.0`` is
            refused too), ``return_certificate`` not a bool, an inconsistent system (no exact
            interpolant; for an ``X`` singular to rounding (``p = 2``; ``p = 1`` whenever
            the LP or its whitened form finds no interpolant: rows (1, 1, 0.5) and (1, 1 +
            2**-52, 0.5), y = (1, 2), are consistent), e.g. a duplicated row with a
            different target, a system of at most 1000 entries and 30 rows is told
            apart in exact rational arithmetic: inconsistent, or consistent with an ``X`` too
            ill-conditioned; a larger one is called inconsistent or too ill-conditioned to
            tell), for ``p = 1`` an ``X`` whose support columns are too ill-conditioned for
            the refined answer to verify (condition number near 1 / eps) or whose answer
            leaves a residual beyond rounding along a near-singular direction of ``X``
            (relative distance :math:`\|X^{+}r\| / \|\beta\|` to the interpolants above
            1e-9: rows (1, 2, 3) and (1, 2, 3 + 1e-9) with y = (1, 1), whose LP vertex
            [0, 0, 1/3] misses by 1.7e-10 along the rows' difference), for ``p = 2`` a
            near-singular ``X``
            whose least-squares residual is above rounding level (the interpolant is then
            ill-determined; the message gives the residual and singular values; a full-row-rank
            ``X`` is first retried with the backward-stable QR minimum-norm solution, so a
            consistent ill-conditioned system is not called inconsistent); for ``p = 2`` an
            ``X`` whose condition number (over the singular values kept, after scaling to
            max 1) exceeds ``1e-9 / eps`` (~4.5e6), where no float64 solution is guaranteed
            the promised accuracy (rows or columns at very different scales count here
            unless the exact route at the end of this list solves them); for either ``p``
            an ``X`` singular to rounding (a singular value at
            most ``eps max(N, d)`` times the largest, after scaling to max 1) that has a larger
            rank in exact rational arithmetic (rows (1, 1) and (1, 1 + 2**-52): its unique
            interpolant is beyond float64's accuracy), or that has more than 1000 entries or
            30 rows, too many to decide its rank exactly (an exactly rank-deficient small ``X``,
            e.g. duplicated rows with equal targets, is solved); or an interpolant outside
            float64's range: overflowing, or
            underflowing (below the normal range 2.2e-308, where rounding it would cost more
            than 1e-9 of its norm: ``X = [[1e300, 1]]``, ``y = [1e-300]`` has an interpolant
            of size about 1e-600), the message naming ``max |y| / max |X|``; an answer that
            does not interpolate the caller's ``X`` and ``y``: every answer is checked on them,
            each row's exact residual relative to :math:`|X_i||\beta| + |y_i|` at most 1e-9,
            and the message gives the worst row's. When the first solve (or its row check)
            fails and the rows'
            largest entries differ by more than 2**20, the equivalent system with rows
            divided by powers of two is solved instead (rows (1, 2) and (1e-300, 1e-300);
            ``p = 2`` then refined with exact residuals), its answer checked the same way.
            When that fails too and ``X`` is small (``N <= d``, at most 1000 entries and 10
            rows, 30 for a square ``X``; ``p = 1``: at most 500 supports of N columns) and
            well conditioned once its rows and columns are divided by powers of two
            (condition number at most ``1e-9 / eps``: ill-conditioned only through its
            scales), the interpolant is
            computed in exact rational arithmetic on the float entries and rounded
            (``p = 2``: :math:`X^\top(XX^\top)^{-1}y`; ``p = 1``: the basis whose dual
            point is exactly feasible, certificate solver "exact rational arithmetic"), and
            returned when rounding costs at most 1e-9: ``X = [[1e-181, -1e-181], [0,
            -1e171]]``, ``y = (-1, 3)`` gives ``[-1e181, -3e-171]``, ``np.eye(2)``, ``y =
            (5e-324, 1)`` gives ``[5e-324, 1]``, ``X = [[0, 1e35, 1e-30], [2e-62, 2e35,
            0]]``, ``y = (-2, -1)``, ``p = 1`` gives ``[0, -5e-36, -1.5e30]``; the errors
            above are raised only when this route does not apply or does not verify, and
            then, for such an ``X``, end by saying that it is ill-conditioned only through
            its scales, with the spans of its rows' and columns' largest entries and why the
            exact route did not answer (too large, or an interpolant outside float64's range).
        RuntimeError: the solver's answer does not verify (the message names the checks that
            failed, with the residual, dual infeasibility and gap). For ``p = 1`` a vertex
            whose multipliers miss dual feasibility is first given the multipliers recomputed
            on its support, then solved again with HiGHS's tolerances at 1e-10 (near-duplicate
            columns left HiGHS's default 1e-7 at 1e-9 to 1e-8); an answer that fails (or an
            "infeasible" verdict on a consistent,
            ill-conditioned ``X``) is retried on the whitened system
            :math:`V_r^\top\beta = S_r^{-1}U_r^\top y` (SVD of ``X``), which must verify too;
            when columns of ``X`` differ in scale by more than 1e3 and both fail, the
            equivalent weighted problem on columns scaled to max 1 is solved and verified
            (e.g. one column multiplied by 1e12; for a square ``X`` whose weights HiGHS cannot
            handle, its unique solution by LU with the dual point that certifies it).

    Example:
        >>> import numpy as np
        >>> beta = min_norm_interpolant(np.array([[1.0, 1.0]]), np.array([2.0]), p=2)
        >>> np.round(np.asarray(beta), 12).tolist()
        [1.0, 1.0]
        >>> beta, cert = min_norm_interpolant(np.array([[1.0, 2.0]]), np.array([2.0]), p=1,
        ...                                   return_certificate=True)
        >>> np.round(np.asarray(beta), 12).tolist(), cert.verified()
        ([0.0, 1.0], True)
    """
    X = _validate.nonzero_matrix("X", _validate.as_array("X", X, ndim=2))
    y = _validate.as_array("y", y, shape=(X.shape[0],))
    p = _check_p(p)
    return_certificate = _validate.boolean("return_certificate", return_certificate)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    X0, y0 = np.asarray(X), np.asarray(y)
    try:
        beta, cert = _min_norm_solve(X, y, p)
        # inside the try: an answer failing the row check on the caller's X and y is retried
        # row-scaled too (issue 21: rows (1, 2), (1e-300, 1e-300), y = (1, 1e-300), p = 2, was
        # refused with row 1 residual 0.25 although the row-scaled solve gives [1, 0])
        _check_interpolates(np.asarray(beta), X0, y0)
    except (ValueError, RuntimeError) as err:
        # rows at very different scales (rows (1, 2) and (1e-300, 1e-300)): after dividing by
        # max |X| alone the small rows fall below every solver tolerance. Retry on the
        # equivalent system with each row divided by a power of two (_row_scaled); whatever
        # it returns must interpolate the caller's X and y (_check_interpolates: on the
        # scaled system alone X = [[1, 1e20], [1, 0]], y = [0, 1] "verified" [1, 0])
        scaled = _row_scaled(X0, y0)
        failure, found = err, None
        if scaled is not None:
            try:
                beta, cert = _min_norm_solve(jnp.asarray(scaled[0]), jnp.asarray(scaled[1]), p)
                if p == 2:
                    # normwise accurate is not enough for rows at different scales: the
                    # row-scaled solve of X = [[1, 1e20], [1, 0]], y = [0, 1] gave beta_2 = 0
                    # (error 1e-20 beside |beta| = 1) where the first row needs beta_2 =
                    # -1e-20; a few steps of refinement with exact residuals on the row-scaled
                    # system fix such components (the minimum-norm correction stays in the row
                    # space of X)
                    beta = _refine_rows(np.asarray(beta), *scaled)
                _check_interpolates(np.asarray(beta), X0, y0)
                found = beta, cert
            except (ValueError, RuntimeError) as retry_err:
                # a retry that answered but fails the row check is what is reported
                if not (isinstance(retry_err, ValueError) and
                        str(retry_err).startswith("the computed beta does not interpolate")):
                    retry_err = None
                failure = retry_err or err
        if found is None:
            # rows and columns at very different scales but well conditioned once both are
            # scaled by powers of two (issue 21: X = [[1e-181, -1e-181], [0, -1e171]], y =
            # (-1, 3), whose y_2 / max |y| underflows in every float64 route): a small system
            # is solved in exact rational arithmetic and rounded
            found = _exact_interpolant(X0, y0, p)
        if found is None:
            if p == 1 and isinstance(err, ValueError) and \
                    str(err).startswith("X beta = y is inconsistent"):
                _consistent_l1_refusal(X0, y0)  # raises when exactly consistent
            note = _scale_note(X0, p, str(failure))
            if note:  # ill-conditioned only through its scales: say so, with the spans
                raise type(failure)(str(failure) + note) from failure
            if failure is err:
                raise
            raise failure from None
        beta, cert = found
    _check_interpolates(np.asarray(beta), X0, y0)
    return (beta, cert) if return_certificate else beta


def _refine_rows(beta, Xs, ys, steps=5):
    """``beta`` after up to ``steps`` of iterative refinement of ``Xs beta = ys`` with the
    residual computed exactly (:func:`_exact_residual`) and minimum-norm least-squares
    corrections; returned as a JAX array."""
    for _ in range(steps):
        r = _exact_residual(Xs, beta, ys)
        if not np.any(r):
            break
        with np.errstate(all="ignore"):
            d = np.linalg.lstsq(Xs, r, rcond=None)[0]
        if not np.all(np.isfinite(d)):
            break
        beta = beta - d
    return jnp.asarray(beta)


def _row_scaled(X, y):
    """``(X, y)`` with each row of both divided by the power of two of the row's largest
    |entry| (exact unless an entry leaves float64's normal range: the caller checks the
    answer on the original system), or None when the rows' scales differ by at most 2**20, a
    row is zero, or a scaled target over- or underflows."""
    rmax = np.max(np.abs(X), axis=1)
    if np.any(rmax == 0) or np.max(rmax) <= 2.0 ** 20 * np.min(rmax):
        return None
    r = _validate.pow2_of(rmax)
    with np.errstate(over="ignore", under="ignore"):
        ys = y / r
        Xs = X / r[:, None]
    if not np.all(np.isfinite(ys)) or np.any((np.abs(ys) < _validate.TINY) & (y != 0)):
        return None
    return Xs, ys


def _backward_error(beta, X, y):
    """``(worst, row)``: the largest over rows i of the exact residual
    :math:`|X_i\beta - y_i|` relative to :math:`|X_i||\beta| + |y_i|`, and its row (``inf``
    when not computable). Scale-safe: each term :math:`X_{ij}\beta_j` and :math:`y_i` is
    split into mantissa and power of two, and the row is scaled by a power of two to its
    largest term before the exact sum (error-free products, ``math.fsum``); terms that then
    underflow are below 2**-1000 of the row's largest, negligible. (Dividing rows and beta by
    powers of two alone let ``y_i`` underflow to 0: X = [[1e-181, -1e-181], [0, -1e171]],
    y = (-1, 3) certified [-1e181, 0], whose row 2 gives 0, not 3; issue 21.)"""
    import math

    X, beta, y = (np.asarray(a, dtype=np.float64) for a in (X, beta, y))
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        return np.inf, 0
    mx, ex = np.frexp(X)
    mb, eb = np.frexp(beta)
    my, ey = np.frexp(y)
    low = np.iinfo(np.int64).min // 4
    et = np.where((X != 0) & (beta != 0)[None, :], ex.astype(np.int64) + eb[None, :], low)
    ety = np.where(y != 0, ey.astype(np.int64), low)
    E = np.maximum(np.max(et, axis=1), ety)  # the row's largest term's power of two
    p, e = _validate.two_product(mx, mb[None, :])  # |mantissas| in [0.5, 1): exact
    shift = np.clip(et - E[:, None], -2000, 0).astype(np.int64)
    with np.errstate(under="ignore"):
        ps, es = np.ldexp(p, shift), np.ldexp(e, shift)
        ys = np.ldexp(my, np.clip(ety - E, -2000, 0).astype(np.int64))
    rel = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        if E[i] == low:  # a zero row with y_i = 0 (or beta = 0 and y_i = 0)
            continue
        res = abs(math.fsum([*ps[i], *es[i], -ys[i]]))
        scale = math.fsum(np.abs(ps[i])) + abs(ys[i])
        rel[i] = res / scale if scale > 0 else 0.0
    worst = float(np.max(rel)) if rel.size else 0.0
    return worst, int(np.argmax(rel)) if rel.size else 0


def _check_interpolates(beta, X, y):
    """Raise ValueError unless ``beta`` interpolates the caller's ``X`` and ``y``: the
    backward error (:func:`_backward_error`) must be at most 1e-9 (rounding beta to float64
    alone leaves about eps)."""
    worst, i = _backward_error(beta, X, y)
    if not worst <= _VERIFY_TOL:
        raise ValueError(f"the computed beta does not interpolate the caller's X and y: row "
                         f"{i} has residual |X_i beta - y_i| = {worst:.3e} relative to "
                         f"|X_i| |beta| + |y_i| (tol {_VERIFY_TOL:.0e}); X is too "
                         f"ill-conditioned or badly scaled for a float64 interpolant; rescale "
                         f"or regularize X")


def _consistent_l1_refusal(X, y):
    """After a p = 1 "inconsistent" from float64 (HiGHS, or the whitened system's
    least-squares residual): for a small system, decide consistency exactly
    (:func:`_exact_ranks`); a consistent one (rows (1, 1, 0.5) and (1, 1 + 2**-52, 0.5),
    y = (1, 2): beta = (1 - 2**52, 2**52, 0)) raises the ill-conditioning error instead.
    Returns when the system is inconsistent or too large to tell."""
    ranks = _exact_ranks(X, y)
    if ranks is None or ranks[0] != ranks[1]:
        return
    sv = np.linalg.svd(X / _validate.pow2_scale(X), compute_uv=False)
    raise ValueError(_ill_conditioned(sv, float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf)
                     + f" (it is consistent: in exact arithmetic X and [X | y] both have rank "
                     f"{ranks[0]})") from None


def _min_norm_solve(X, y, p):
    """The solve of :func:`min_norm_interpolant` on checked ``X`` and ``y``: ``(beta,
    certificate)``."""
    # Solve the scaled problem (X / cx) b' = y / cy, b = b' cy / cx: tolerances are then relative.
    Xn, yn, cx, cy = *_scaled(np.asarray(X), np.asarray(y)),
    if cy == 0.0:
        zero = jnp.zeros(Xn.shape[1])
        return zero, None
    if p == 2:
        beta, _, _, sv = np.linalg.lstsq(Xn, yn, rcond=None)
        resid = np.linalg.norm(Xn @ beta - yn) / np.linalg.norm(yn)
        # condition number over the singular values lstsq keeps (rcond = eps max(N, d)): the
        # relative error of any float64 solution is up to cond * eps, so beyond _VERIFY_TOL / eps
        # (~4.5e6) the promised accuracy cannot be met and the system is refused
        kept = sv[sv > np.finfo(float).eps * max(Xn.shape) * sv[0]]
        cond = float(kept[0] / kept[-1]) if kept.size else np.inf
        eps = np.finfo(float).eps
        # full row rank beyond rounding (the threshold of lstsq): a smallest singular value at
        # rounding level (e.g. a duplicated row) is a rank-deficient X, whose system with a
        # residual above 1e-8 is inconsistent (said below), not merely ill-conditioned
        full_rank = kept.size == sv.size and sv[-1] > 0
        if resid > 1e-8 and Xn.shape[0] <= Xn.shape[1] and full_rank:
            # X of full row rank: X beta = y is consistent. SVD-based lstsq (on X divided by a
            # non-power-of-two scale) loses digits in 1 / s_min on an ill-conditioned X: use the
            # backward-stable minimum-norm solution beta = Q R^-T y (QR of X^T) on the original
            # X and y instead, if its accuracy cond * eps is within the promised tolerance
            cond_all = float(sv[0] / sv[-1])
            if cond_all * eps > _VERIFY_TOL:
                raise ValueError(_ill_conditioned(sv, cond_all))
            direct = _min_norm_full_row_rank(np.asarray(X), np.asarray(y))
            if direct is not None:
                return direct, None
        if resid > 1e-8 and not full_rank:
            # singular to rounding: float64 cannot tell an inconsistent system (a duplicated row
            # with another target) from an exactly full-rank but too ill-conditioned one (rows
            # (1, 1) and (1, 1 + 1e-15)); a small system is told apart exactly, in rationals
            ranks = _exact_ranks(np.asarray(X), np.asarray(y))
            thr = np.finfo(float).eps * max(Xn.shape) * float(sv[0])
            svs = (f"singular values of X scaled to max |X| = 1: {float(sv[-1]):.3e} to "
                   f"{float(sv[0]):.3e}; below {thr:.1e} counts as 0")
            if ranks is not None and ranks[0] == ranks[1]:  # consistent, exactly
                raise ValueError(_ill_conditioned(sv, float(sv[0] / sv[-1]) if sv[-1] > 0
                                                  else np.inf))
            if ranks is not None:
                raise ValueError(f"X beta = y is inconsistent: no interpolant exists (in exact "
                                 f"arithmetic X has rank {ranks[0]} and [X | y] rank "
                                 f"{ranks[1]}: y is not in the range of X; relative "
                                 f"least-squares residual {resid:.3e}; {svs})")
            raise ValueError(f"X beta = y is inconsistent, or X is too ill-conditioned to tell: "
                             f"X has rank {kept.size} < {sv.size} to rounding ({svs}) and y has "
                             f"a component outside its numerical range (relative least-squares "
                             f"residual {resid:.3e}), so no float64 interpolant exists; e.g. a "
                             f"duplicated row of X with different targets is inconsistent")
        if resid > 1e-8:
            raise ValueError(f"X beta = y is inconsistent: no interpolant exists (relative "
                             f"least-squares residual {resid:.3e}; singular values of X "
                             f"scaled to max |X| = 1: {float(sv[-1]):.3e} to "
                             f"{float(sv[0]):.3e})")
        # optimality: lstsq returns the minimum-norm solution of X with its singular values
        # below eps max(N, d) sigma_max dropped. That is the minimum-norm interpolant of X
        # only if y has no component along the dropped directions beyond rounding, i.e. if the
        # residual is at rounding level (backward error); otherwise X is near-singular and the
        # true interpolant differs from beta by (that component) / (a tiny singular value)
        rounding = _BACKWARD * max(Xn.shape) * np.finfo(float).eps * (
            float(sv[0]) * np.linalg.norm(beta) / np.linalg.norm(yn) + 1.0)
        if resid > rounding:
            raise ValueError(f"X is near-singular (singular values {float(sv[-1]):.3e} to "
                             f"{float(sv[0]):.3e} after scaling to max |X| = 1) and y has a "
                             f"component along its smallest ones: the least-squares residual "
                             f"{resid:.3e} (relative) is above rounding level {rounding:.1e}, "
                             f"so X beta = y is inconsistent or its minimum-norm interpolant "
                             f"is ill-determined")
        if kept.size < sv.size:
            # numerically rank deficient: lstsq dropped singular values, which is right only
            # if X is exactly rank deficient (issue 21: rows (1, 1) and (1, 1 + 2**-52), y =
            # (1, 1), gave [0.5, 0.5] where the unique interpolant is [1, 0])
            _check_numerical_rank(np.asarray(X), sv, kept.size)
        if cond * eps > _VERIFY_TOL:
            raise ValueError(_ill_conditioned(sv, cond))
        # lstsq returns the minimum-norm solution for under-determined systems
        beta = _unscale(beta, cy / cx, X, y)
        return beta, None
    try:
        # numerically rank deficient: every float64 route (the LP, the whitened system) sees
        # only the kept directions, right only if X is exactly rank deficient (issue 21: rows
        # (1, 2) and (1, 2 + 2**-51), y = (2, 2), "verified" [0, 1]; the interpolant is [2, 0])
        _check_numerical_rank_of(Xn, np.asarray(X))
        try:
            beta, cert = _l1_interpolant(Xn, yn)
        except (ValueError, RuntimeError) as err:
            # HiGHS's tolerances are absolute: on an ill-conditioned X (e.g. rows (1, 1) and
            # (1, 1 + 1e-12)) it may call a consistent system infeasible or return a point that
            # does not verify; solve the whitened, equivalent system and verify that instead
            beta, cert = _l1_interpolant_whitened(Xn, yn, err)
        # the LP's point solves a perturbed system (HiGHS's tolerances, the scaling by cx, the
        # SVD of the whitened route): off by up to cond eps, which the certificate on the
        # solved system does not see (rows (1, 2, 0.5) and a copy perturbed by 1e-11 gave a
        # beta 5e-5 off, certified at residual 1e-16). Refine on the support with exact
        # residuals and certify the refined beta on the original X and y
        beta, fe = _refine_on_support(beta, np.asarray(X), np.asarray(y), cy / cx)
        beta = _unscale(beta, cy / cx, X, y)
        cert = _certify_original(cert, np.asarray(beta), np.asarray(X), np.asarray(y), fe)
    except (ValueError, RuntimeError) as err:
        # columns of very different scales (e.g. one column x 1e12): after dividing by max |X|
        # the other columns fall below HiGHS's absolute tolerances. The equivalent weighted
        # problem on columns equilibrated to max 1 (exact powers of two) is solved and
        # verified instead; if it fails too, the first error stands
        col = np.max(np.abs(Xn), axis=0)
        if not np.any(col > 0) or np.max(col) <= 1e3 * np.min(col[col > 0]):
            raise
        try:
            # the same rank test on the columns scaled to max 1 (where the LP is solved)
            Xa = np.asarray(X)
            Xc = Xa / _validate.pow2_of(np.max(np.abs(Xa), axis=0))
            _check_numerical_rank_of(Xc / _validate.pow2_scale(Xc), Xa)
            beta, cert = _l1_interpolant_columns(np.asarray(X), np.asarray(y))
        except (ValueError, RuntimeError):
            raise err from None
        beta, fe = _refine_on_support(beta, np.asarray(X), np.asarray(y), 1.0)
        cert = _certify_original(cert, beta, np.asarray(X), np.asarray(y), fe)
        beta = jnp.asarray(beta)
    return beta, cert


_EXACT_MAX = 1000
"""Largest number of entries of X for which :func:`_exact_ranks` runs (only to word an error)."""


def _certify_original(cert, beta, X, y, forward_error):
    """The certificate with ``residual`` the exact residual of the returned beta on the original
    X and y (:func:`_exact_residual`) beyond what rounding beta alone leaves (entry-wise
    ``max(0, |X beta - y| - eps |X| |beta|)``), relative to ``|y|``, and ``forward_error``
    the larger of the refinement's estimate and ``|X_S^+ (X beta - y)| / |beta|`` on the
    support S of beta (``inf`` for a support above N columns); raises ValueError (X too
    ill-conditioned) when these do not verify."""
    r = _exact_residual(X, beta, y)
    # what rounding beta to float64 (relative eps / 2 per entry) alone can leave, |X| |beta| eps,
    # is not counted: for an ill-conditioned X the exact optimum rounded has a residual far
    # above 1e-9 |y| (|beta| ~ |y| / s_min); the forward error is checked separately
    # the scale s = sx sb kept as two powers of two (their product overflowed for X = [[1e308,
    # -1e308]], y = [1e308]: residual nan, error inf at condition number 1; issue 21)
    sx, sb = _validate.pow2_scale(X), _validate.pow2_scale(beta)
    ex_s = int(np.frexp(sx)[1]) + int(np.frexp(sb)[1]) - 2  # s = 2**ex_s
    with np.errstate(over="ignore", under="ignore"):
        allow = np.finfo(float).eps * (np.abs(X / sx) @ np.abs(beta / sb))
        excess = np.maximum(np.abs((r / sx) / sb) - allow, 0.0)
        (me, ee), (my0, ey0) = _validate.norm_pow2(excess), _validate.norm_pow2(y)
        residual = float(np.ldexp(me / my0, ee + ex_s - ey0)) if my0 > 0 else np.inf
    # the forward error of the returned beta itself, from its exact residual: d = X_S^+ r on its
    # support S (a residual below the rounding allowance can still hide an error of up to
    # cond(X_S) times it), at least the refinement's own estimate
    support = np.flatnonzero(beta)
    fe = np.inf
    if 0 < support.size <= X.shape[0]:
        from scipy.linalg import lstsq as qr_lstsq

        with np.errstate(all="ignore"):
            d = qr_lstsq(X[:, support], r, lapack_driver="gelsy", check_finite=False)[0]
            # ratio of the mantissas and powers of two: no ZeroDivisionError for a beta whose
            # norm underflows (X = [[1e300, 1]], y = [1e-300] raised one)
            (md, ed), (mb, eb) = _validate.norm_pow2(d), _validate.norm_pow2(beta[support])
            fe = float(np.ldexp(md / mb, ed - eb)) if mb > 0 else np.inf
    # the residual beyond rounding, seen through all of X: a beta fitting y to 1e-10 along a
    # direction where X has singular value 1e-10 is O(1) away from every interpolant (rows
    # (1, 2, 3) and (1, 2, 3 + 1e-9), y = (1, 1): the LP's [0, 0, 1/3] leaves a residual
    # 1.7e-10 along the rows' difference, invisible to X_S^+ on its single column, while the
    # optimum is [0, 0.5, 0]). |X^+ excess| / |beta| bounds the relative distance from beta to
    # the interpolants (X of full row rank); X^+ by SVD, singular values below rounding kept out
    with np.errstate(all="ignore"):
        Xs = X / _validate.pow2_scale(X)
        U, sv_all, Vt = np.linalg.svd(Xs, full_matrices=False)
        keep = sv_all > max(X.shape) * np.finfo(float).eps * sv_all[0]
        signed = np.sign(r) * excess  # scaled by s and by pow2_scale(X) like Xs
        d_all = Vt[keep].T @ ((U[:, keep].T @ signed) / sv_all[keep])
        # |d_all| s / sx / |beta| = |d_all| sb / |beta|, as mantissas and powers of two
        (mda, eda), (mnb, enb) = _validate.norm_pow2(d_all), _validate.norm_pow2(beta)
        fe_all = (float(np.ldexp(mda / mnb, eda + int(np.frexp(sb)[1]) - 1 - enb))
                  if mnb > 0 else np.inf)
    forward_error = max(float(forward_error), fe if np.isfinite(fe) else np.inf,
                        fe_all if np.isfinite(fe_all) else np.inf)
    # the certificate reports the exact residual, rounding included (rows (2, -3, -1, -3),
    # (2 + 9.9e-11, -3, -1, -3), (-1, 3, -2, 0): 1.7e-7 of |y| where 0.0 was reported, all of
    # it what rounding the accurate beta ~ 1e10 to float64 leaves), and accepts on the
    # backward error (relative to |X_i||beta| + |y_i| per row), the residual beyond rounding
    # and the forward error, each at most 1e-9
    backward, _ = _backward_error(beta, X, y)
    with np.errstate(all="ignore"):
        (mr, er), (my, ey) = _validate.norm_pow2(r), _validate.norm_pow2(y)
        exact = float(np.ldexp(mr / my, er - ey))
    cert = cert._replace(residual=exact, backward_error=backward, forward_error=forward_error)
    if not (cert.verified() and residual <= _VERIFY_TOL):
        sv = np.linalg.svd(X / _validate.pow2_scale(X), compute_uv=False)
        support = np.flatnonzero(beta)
        cond_s = (float(np.linalg.cond(X[:, support])) if 0 < support.size <= X.shape[0]
                  else np.inf)
        raise ValueError(f"X is too ill-conditioned for a minimum-l1 interpolant accurate to "
                         f"{_VERIFY_TOL:.0e} in float64: on the LP's support ({support.size} "
                         f"columns) the condition number is {cond_s:.3e} (singular values of "
                         f"X scaled to max |X| = 1: {float(sv[-1]):.3e} to {float(sv[0]):.3e}), "
                         f"and the solution, refined with exact residuals, verifies only to "
                         f"relative error {forward_error:.1e}, backward error {backward:.1e} "
                         f"and relative residual {residual:.1e} beyond rounding ({exact:.1e} "
                         f"with it) ({cert}); rescale or regularize X")
    return cert


def _exact_ranks(X, y):
    """``(rank X, rank [X | y])`` in exact rational arithmetic on the float entries (Gaussian
    elimination on Fractions), or None when X has more than :data:`_EXACT_MAX` entries or more
    than 30 rows. The system X beta = y is consistent exactly when the two ranks are equal."""
    from fractions import Fraction

    if X.size > _EXACT_MAX or X.shape[0] > 30:
        return None
    M = [[Fraction(float(v)) for v in row] + [Fraction(float(t))] for row, t in zip(X, y,
                                                                                     strict=True)]
    rank, rank_x = 0, None
    for col in range(X.shape[1] + 1):
        if col == X.shape[1]:
            rank_x = rank
        piv = next((i for i in range(rank, len(M)) if M[i][col] != 0), None)
        if piv is None:
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(rank + 1, len(M)):
            if M[i][col] != 0:
                f = M[i][col] / M[rank][col]
                M[i] = [a - f * b for a, b in zip(M[i], M[rank], strict=True)]
        rank += 1
        if rank == len(M):
            break
    if rank_x is None:  # every row had a pivot among the columns of X
        rank_x = rank
    return rank_x, rank


_BASES_MAX = 500
"""Most bases (supports of N columns) that :func:`_exact_interpolant` tries for ``p = 1``."""

_EXACT_ROWS = 10
"""Most rows for :func:`_exact_interpolant` (rational elimination on 30 rows with entries at
scales 2**+-300 took 20 to 30 s)."""


def _fraction_solve(A, b):
    """The solution of the square system ``A x = b`` (lists of Fractions) by Gaussian
    elimination in exact arithmetic, or None when ``A`` is singular."""
    n = len(A)
    M = [list(row) + [t] for row, t in zip(A, b, strict=True)]
    for col in range(n):
        piv = next((i for i in range(col, n) if M[i][col] != 0), None)
        if piv is None:
            return None
        M[col], M[piv] = M[piv], M[col]
        for i in range(col + 1, n):
            if M[i][col] != 0:
                f = M[i][col] / M[col][col]
                M[i] = [a - f * c for a, c in zip(M[i], M[col], strict=True)]
    x = [None] * n
    for i in range(n - 1, -1, -1):
        x[i] = (M[i][n] - sum(M[i][j] * x[j] for j in range(i + 1, n))) / M[i][i]
    return x


def _exact_interpolant(X, y, p):
    r"""``(beta, certificate)``: the minimum-:math:`\ell_p` interpolant of a small system
    computed in exact rational arithmetic on the float entries and rounded to float64, or
    None when this route does not apply or its rounded answer is not accurate to 1e-9.

    For an ``X`` that is ill-conditioned only through its scales (rows and columns at very
    different sizes) and well conditioned once both are divided by powers of two
    (:func:`_equilibrate`; condition number at most ``1e-9 / eps``), but whose float64 solves
    fail (a target or an entry leaves float64's range after scaling: X = [[1e-181, -1e-181],
    [0, -1e171]], y = (-1, 3), issue 21). Applies to ``N <= d``, at most :data:`_EXACT_MAX`
    entries and :data:`_EXACT_ROWS` rows (30 for a square ``X``, whose unique solution is
    the answer for either ``p``: one exact elimination). ``p = 2``: :math:`\beta =
    X^\top (XX^\top)^{-1} y`. ``p = 1``: the bases S of N columns are tried (at most
    :data:`_BASES_MAX`); :math:`\beta_S = X_S^{-1}y` is optimal when the dual point
    :math:`\lambda = X_S^{-\top}\mathrm{sign}(\beta_S)` (either sign for a zero entry)
    has :math:`\|X^\top\lambda\|_\infty \le 1`, checked exactly (LP duality: zero gap).
    The certificate's forward error is the exact relative error of the rounding."""
    import math
    from fractions import Fraction
    from itertools import combinations, product

    N, d = X.shape
    square = N == d
    if N > d or X.size > _EXACT_MAX or N > (30 if square else _EXACT_ROWS):
        return None
    with np.errstate(all="ignore"):
        sv = np.linalg.svd(_equilibrate(X), compute_uv=False)
    if not (sv[-1] > 0 and sv[0] / sv[-1] * np.finfo(float).eps <= _VERIFY_TOL):
        return None  # ill-conditioned beyond its scales (or singular): not this route's case
    Xf = [[Fraction(float(v)) for v in row] for row in X]
    yf = [Fraction(float(t)) for t in y]
    lam = None
    if square:  # the unique interpolant, for either p; one exact elimination (about 1 s at 30)
        b = _fraction_solve(Xf, yf)
        if b is None:
            return None
        if p == 1:  # X^T lam = sign(b) exactly: |X^T lam| <= 1 and zero gap
            lam = _fraction_solve([list(col) for col in zip(*Xf, strict=True)],
                                  [Fraction((v > 0) - (v < 0)) for v in b])
            if lam is None:
                return None
    elif p == 2:
        G = [[sum(a * b for a, b in zip(ri, rj, strict=True)) for rj in Xf] for ri in Xf]
        a = _fraction_solve(G, yf)
        if a is None:
            return None
        b = [sum(Xf[i][j] * a[i] for i in range(N)) for j in range(d)]
    else:
        if math.comb(d, N) > _BASES_MAX:
            return None
        b = None
        for S in combinations(range(d), N):
            A = [[row[j] for j in S] for row in Xf]
            bS = _fraction_solve(A, yf)
            if bS is None:
                continue
            zeros = [k for k, v in enumerate(bS) if v == 0]
            if len(zeros) > 8:
                continue
            At = [list(col) for col in zip(*A, strict=True)]
            for signs in product((1, -1), repeat=len(zeros)):
                s = [Fraction((v > 0) - (v < 0)) for v in bS]
                for k, sg in zip(zeros, signs, strict=True):
                    s[k] = Fraction(sg)
                lam_S = _fraction_solve(At, s)
                if lam_S is not None and all(
                        abs(sum(Xf[i][j] * lam_S[i] for i in range(N))) <= 1 for j in range(d)):
                    b = [Fraction(0)] * d
                    for k, j in enumerate(S):
                        b[j] = bS[k]
                    lam = lam_S
                    break
            if b is not None:
                break
        if b is None:
            return None
    try:
        beta = np.array([float(v) for v in b])
    except OverflowError:
        return None
    bf = [Fraction(float(v)) for v in beta]
    norm2 = sum(v * v for v in b)
    if norm2 == 0:
        return None
    forward = math.sqrt(float(sum((u - v) ** 2 for u, v in zip(bf, b, strict=True)) / norm2))
    if not forward <= _VERIFY_TOL:
        return None  # rounding to float64 (underflow) costs more than 1e-9: refused as before
    if p == 2:
        return jnp.asarray(beta), None
    r = [sum(xa * bb for xa, bb in zip(row, bf, strict=True)) - t
         for row, t in zip(Xf, yf, strict=True)]
    ny2 = sum(t * t for t in yf)
    residual = math.sqrt(float(sum(v * v for v in r) / ny2))
    n1 = sum(abs(v) for v in bf)
    gap = float(abs(n1 - sum(t * v for t, v in zip(yf, lam, strict=True))) / n1)
    cert = Certificate(solver=("exact rational arithmetic (unique solution, square X)" if square
                               else "exact rational arithmetic (basis enumeration)"),
                       status="optimal basis: dual point feasible exactly", residual=residual,
                       dual_infeasibility=0.0, gap=gap, forward_error=forward,
                       backward_error=_backward_error(beta, X, y)[0])
    if not cert.verified():
        return None
    return jnp.asarray(beta), cert


def _scale_note(X, p, message):
    """The end of a refusal message for an ``X`` with ``N <= d`` that is well conditioned once
    its rows and columns are divided by powers of two (:func:`_equilibrate`): its
    ill-conditioning is only its scales, which are named, with why :func:`_exact_interpolant`
    did not answer; "" otherwise (and when ``message`` already says that the interpolant
    over- or underflows float64, the reason then)."""
    import math

    N, d = X.shape
    if N > d:
        return ""
    with np.errstate(all="ignore"):
        sv = np.linalg.svd(_equilibrate(X), compute_uv=False)
    if not (sv[-1] > 0 and sv[0] / sv[-1] * np.finfo(float).eps <= _VERIFY_TOL):
        return ""
    rmax, cmax = np.max(np.abs(X), axis=1), np.max(np.abs(X), axis=0)
    # spans as powers of ten from logarithms: 1e300 / 1e-300 overflows
    span_r = float(np.log10(np.max(rmax)) - np.log10(np.min(rmax[rmax > 0])))
    span_c = float(np.log10(np.max(cmax)) - np.log10(np.min(cmax[cmax > 0])))
    rows = 30 if N == d else _EXACT_ROWS
    if X.size > _EXACT_MAX or N > rows or (p == 1 and N < d and math.comb(d, N) > _BASES_MAX):
        why = (f"it is too large for the exact rational route (N = {N} rows, {X.size} entries, "
               f"{'square' if N == d else f'{math.comb(d, N)} bases of N columns'}; at most "
               f"{rows} rows, {_EXACT_MAX} entries" +
               (f", {_BASES_MAX} bases" if p == 1 and N < d else "") + ")")
    elif "flows float64" in message:
        return ""
    else:
        why = ("its exact interpolant, computed in rational arithmetic, is outside float64's "
               "range (rounding it costs more than 1e-9: an entry over- or underflows)")
    return (f"; X is ill-conditioned only through its scales: with rows and columns divided "
            f"by powers of two its condition number is {float(sv[0] / sv[-1]):.3e}, but the "
            f"largest entries of its rows span a ratio 1e{span_r:.0f} and of its columns "
            f"1e{span_c:.0f}, beyond what the float64 solvers resolve; {why}")


def _check_numerical_rank_of(Xs, X):
    """:func:`_check_numerical_rank` of ``X`` with the numerical rank of ``Xs`` (``X``
    rescaled to max 1, rows or columns by powers of two)."""
    sv = np.linalg.svd(Xs, compute_uv=False)
    rank = int(np.sum(sv > np.finfo(float).eps * max(Xs.shape) * sv[0]))
    if rank < sv.size:
        _check_numerical_rank(X, sv, rank)


def _check_numerical_rank(X, sv, rank):
    """Raise ValueError unless ``X``, of numerical rank ``rank`` (singular values ``sv`` of X
    scaled to max 1, those at most eps max(N, d) sv[0] counted as 0), has exactly that rank
    in rational arithmetic (:func:`_exact_ranks`): a larger exact rank is an X singular only
    to rounding, whose interpolant no float64 solve determines; a system too large for the
    exact test is refused too."""
    ranks = _exact_ranks(X, np.zeros(X.shape[0]))
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf
    if ranks is None:
        raise ValueError(_ill_conditioned(sv, cond) + f" (X has numerical rank {rank} < "
                         f"{sv.size}, and it is too large ({X.size} entries, {X.shape[0]} "
                         f"rows; at most {_EXACT_MAX} and 30) to decide its rank exactly)")
    if ranks[0] > rank:
        raise ValueError(_ill_conditioned(sv, cond) + f" (X has rank {ranks[0]} in exact "
                         f"arithmetic but only {rank} to rounding)")


def _ill_conditioned(sv, cond):
    return (f"X is too ill-conditioned for a minimum-norm interpolant accurate to "
            f"{_VERIFY_TOL:.0e} in float64: condition number {cond:.3e} (singular values "
            f"{float(sv[-1]):.3e} to {float(sv[0]):.3e} after scaling to max |X| = 1), so any "
            f"float64 solution may be off by cond * eps ~ {cond * np.finfo(float).eps:.1e} "
            f"(relative); the system may be consistent, but rescale or regularize X")


def _l1_interpolant_columns(X, y):
    """min ||b||_1 s.t. X b = y with the columns of X and y scaled by powers of two (exact):
    X = Xc diag(c), b = b' / c, so min sum_j |b'_j| / c_j s.t. Xc b' = y / sy, an LP with
    weights whose every column has max 1 (HiGHS). Verified like :func:`_l1_interpolant` with
    the weighted dual (|(Xc^T lam)_j| <= 1 / c_j), and on the original X, y (residual)."""
    from scipy.optimize import linprog

    m = np.max(np.abs(X), axis=0)
    c = _validate.pow2_of(m)
    sy = _validate.pow2_scale(y)
    Xc, yc = X / c, y / sy
    wts = 1.0 / c
    d = X.shape[1]
    res = linprog(np.concatenate([wts, wts]), A_eq=np.hstack([Xc, -Xc]), b_eq=yc,
                  bounds=(0, None), method="highs")
    if (res.x is None or res.eqlin is None) and Xc.shape[0] == d:
        # weights spanning more than HiGHS handles (1 / c from 2**-117 to 2**205 for X =
        # [[0, 1e35], [2e-62, 2e35]], issue 21): a square X nonsingular after column scaling has
        # one interpolant, optimal by itself; its dual point lam = Xc^-T (s / c) with s =
        # sign(b') makes the weighted gap sum |b'_j| / c_j - yc^T lam zero
        with np.errstate(all="ignore"):
            bp = np.linalg.solve(Xc, yc)
            lam = np.linalg.solve(Xc.T, np.sign(bp) * wts)
        if np.all(np.isfinite(bp)) and np.all(np.isfinite(lam)):
            from types import SimpleNamespace

            res = SimpleNamespace(x=np.concatenate([np.maximum(bp, 0), np.maximum(-bp, 0)]),
                                  eqlin=SimpleNamespace(marginals=lam), status=0,
                                  message="unique solution (square X, LU)")
    if res.x is None or res.eqlin is None:
        raise RuntimeError(f"min_norm_interpolant: HiGHS returned no solution on the "
                           f"column-scaled system (status {res.status}: {res.message})")
    bp = res.x[:d] - res.x[d:]
    lam = np.asarray(res.eqlin.marginals)
    norm1 = float(np.sum(wts * np.abs(bp)))
    cert = Certificate(
        solver=("LU (columns scaled)" if isinstance(res.message, str) and
                res.message.startswith("unique") else "HiGHS (columns scaled)"),
        status=str(res.message),
        residual=float(np.linalg.norm(Xc @ bp - yc) / np.linalg.norm(yc)),
        dual_infeasibility=float(max(0.0, np.max(np.abs(Xc.T @ lam) / wts) - 1.0)),
        gap=float(abs(norm1 - yc @ lam) / max(norm1, np.finfo(float).tiny)))
    if not cert.verified():
        raise RuntimeError(f"min_norm_interpolant: the column-scaled solution does not verify "
                           f"({cert})")
    with np.errstate(over="ignore", under="ignore"):
        beta = (bp / c) * sy
    # exact residual, scaled norms (np.linalg.norm of [1e-300] is 0: a beta flushed to 0
    # "solved" y = [1e-300])
    if not (np.all(np.isfinite(beta)) and
            _validate.norm(_exact_residual(X, beta, y)) <= 1e-8 * _validate.norm(y)):
        raise RuntimeError("min_norm_interpolant: the column-scaled solution does not solve "
                           "X beta = y")
    return beta, cert


def _min_norm_full_row_rank(X, y):
    """argmin ||b||_2 s.t. X b = y for X of full row rank (N <= d) as b = Q R^-T y with
    X^T = Q R: backward stable, so accurate where SVD-based lstsq loses digits. Returned only
    if R is numerically nonsingular, the result finite and its residual at rounding level
    (|X b - y| <= 100 max(N, d) eps |X| |b|); else None."""
    from scipy.linalg import qr, solve_triangular

    N, d = X.shape
    if N > d:
        return None
    with np.errstate(all="ignore"):
        Q, R = qr(X.T, mode="economic")
        diag = np.abs(np.diag(R))
        if not diag.min() > max(N, d) * np.finfo(float).eps * diag.max():
            return None
        beta = Q @ solve_triangular(R, y, trans="T")
        if not np.all(np.isfinite(beta)):
            return None
        resid = np.linalg.norm(X @ beta - y)
        bound = _BACKWARD * max(N, d) * np.finfo(float).eps * np.linalg.norm(X) * \
            np.linalg.norm(beta)
    if not resid <= max(bound, 1e-8 * np.linalg.norm(y)):
        return None
    return jnp.asarray(beta)


class Certificate(NamedTuple):
    r"""How a convex solution was verified (see :func:`min_norm_interpolant`).

    Attributes:
        solver: the solver that produced the point, e.g. ``"HiGHS"``.
        status: the solver's own status message.
        residual: relative primal residual :math:`\|X\beta - y\| / \|y\|` of the returned
            :math:`\beta` on the caller's ``X`` and ``y``, computed exactly (error-free products,
            exact sums), what rounding :math:`\beta` to float64 leaves included: for an
            ill-conditioned ``X`` it is far above 1e-9 (1.7e-7 for rows (2, -3, -1, -3),
            (2.0000000000993303, -3, -1, -3), (-1, 3, -2, 0), y = (-2, -3, -2), where
            :math:`\beta \sim 10^{10}`), so it is reported, not tested, once
            ``backward_error`` is set. (On the solver's own system, before that, it is the
            float64 residual and is tested.)
        backward_error: the largest over rows of the exact residual
            :math:`|X_i\beta - y_i|` relative to :math:`|X_i||\beta| + |y_i|` on the caller's
            ``X`` and ``y`` (``None`` until computed); the returned :math:`\beta` also has
            its residual beyond rounding, entry-wise :math:`\max(0, |X\beta - y| -
            \epsilon|X||\beta|)`, at most 1e-9 of :math:`\|y\|`.
        forward_error: estimated relative error :math:`\|\delta\| / \|\beta\|` of the
            returned :math:`\beta`, with :math:`\delta = X_S^{+}(X_S\beta_S - y)` on its
            support :math:`S` from the exact residual, and at least
            :math:`\|X^{+}r_+\| / \|\beta\|` with :math:`r_+` the exact residual beyond
            rounding (the relative distance to the interpolants; 0 when not estimated).
        dual_infeasibility: how far the dual point violates its constraints
            (:math:`\max(0, \|X^\top\lambda\|_\infty - 1)` for the l1 problem).
        gap: relative duality gap :math:`|\|\beta\|_1 - y^\top\lambda| / \|\beta\|_1`;
            with a feasible dual point it bounds the relative suboptimality of
            :math:`\|\beta\|_1`.
    """

    solver: str
    status: str
    residual: float
    dual_infeasibility: float
    gap: float
    forward_error: float = 0.0
    backward_error: float | None = None

    def verified(self, tol: float = _VERIFY_TOL) -> bool:
        """True when the backward error (the residual while ``backward_error`` is None), dual
        infeasibility, gap and forward error are all at most ``tol``."""
        primal = self.residual if self.backward_error is None else self.backward_error
        return max(primal, self.dual_infeasibility, self.gap, self.forward_error) <= tol


def _l1_interpolant(Xn, yn, _tight=False):
    r"""min ||b||_1 s.t. Xn b = yn as the LP b = u - v, u, v >= 0, solved by HiGHS (scipy).

    The LP is solved by HiGHS (simplex with crossover: an exact vertex), whatever status it
    reports the point is accepted only if it verifies: primal residual, dual feasibility
    ||Xn^T lam||_inf <= 1 of the equality multipliers lam and relative duality gap
    (||b||_1 - yn^T lam) / ||b||_1 all below ``_VERIFY_TOL``.
    """
    from scipy.optimize import linprog

    N, d = Xn.shape
    # tight: HiGHS's feasibility tolerances (1e-7 by default) at 1e-10, for a retry
    opts = ({"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}
            if _tight else {})
    res = linprog(np.ones(2 * d), A_eq=np.hstack([Xn, -Xn]), b_eq=yn, bounds=(0, None),
                  method="highs", options=opts)
    if res.status == 2:
        raise ValueError("X beta = y is inconsistent: no interpolant exists")
    if res.x is None or res.eqlin is None:
        raise RuntimeError(f"min_norm_interpolant: HiGHS returned no solution "
                           f"(status {res.status}: {res.message})")
    beta = res.x[:d] - res.x[d:]
    lam = np.asarray(res.eqlin.marginals)
    norm1 = float(np.abs(beta).sum())
    cert = Certificate(
        solver="HiGHS", status=str(res.message),
        residual=float(np.linalg.norm(Xn @ beta - yn) / np.linalg.norm(yn)),
        dual_infeasibility=float(max(0.0, np.abs(Xn.T @ lam).max() - 1.0)),
        gap=float(abs(norm1 - yn @ lam) / max(norm1, np.finfo(float).tiny)))
    if not cert.verified() and cert.residual <= _VERIFY_TOL:
        # HiGHS's multipliers satisfy its own dual tolerance (1e-7), not 1e-9: with
        # near-duplicate columns |X^T lam| exceeded 1 by 1e-9 to 1e-8 (10 of 150 random
        # draws). The vertex's exact multipliers solve X_S^T lam = sign(beta_S) on its support
        # S: correct lam by the least-squares step onto that system and verify again
        S = np.abs(beta) > 1e-12 * max(float(np.max(np.abs(beta))), np.finfo(float).tiny)
        if 0 < S.sum() <= N:
            with np.errstate(all="ignore"):
                step = np.linalg.lstsq(Xn[:, S].T, np.sign(beta[S]) - Xn[:, S].T @ lam,
                                       rcond=None)[0]
            lam2 = lam + step
            if np.all(np.isfinite(lam2)):
                polished = cert._replace(
                    solver="HiGHS (multipliers recomputed on the support)",
                    dual_infeasibility=float(max(0.0, np.abs(Xn.T @ lam2).max() - 1.0)),
                    gap=float(abs(norm1 - yn @ lam2) / max(norm1, np.finfo(float).tiny)))
                if polished.verified():
                    return beta, polished
        if not _tight:  # the vertex is not optimal to 1e-9: simplex again at tolerance 1e-10
            try:
                return _l1_interpolant(Xn, yn, _tight=True)
            except RuntimeError:
                pass
    if not cert.verified():
        failed = [k for k in ("residual", "dual_infeasibility", "gap")
                  if getattr(cert, k) > _VERIFY_TOL]
        raise RuntimeError(f"min_norm_interpolant: the LP solution does not verify: "
                           f"{', '.join(failed)} above {_VERIFY_TOL:.0e} (relative residual "
                           f"{cert.residual:.3e}, dual infeasibility "
                           f"{cert.dual_infeasibility:.3e}: the multipliers violate "
                           f"|X^T lam| <= 1 by that much, so the l1 norm is certified only to "
                           f"about it; duality gap {cert.gap:.3e}; also with HiGHS's "
                           f"tolerances at 1e-10); typically nearly parallel columns of X "
                           f"({cert})")
    return beta, cert


def _l1_interpolant_whitened(Xn, yn, first_error):
    """min ||b||_1 s.t. Xn b = yn through the equivalent system V_r^T b = S_r^-1 U_r^T yn
    (Xn = U S V^T, rank r at rounding level): orthonormal rows, so HiGHS's absolute
    tolerances are relative. The system is first checked for consistency (least-squares
    residual at rounding level); the answer must verify on the whitened system (residual,
    dual feasibility, gap at most 1e-9) and solve Xn b = yn to backward-stable accuracy."""
    U, sv, Vt = np.linalg.svd(Xn, full_matrices=False)
    eps = np.finfo(float).eps * max(Xn.shape)
    keep = sv > eps * sv[0]
    U, sv, Vt = U[:, keep], sv[keep], Vt[keep]
    coef = U.T @ yn
    resid = np.linalg.norm(yn - U @ coef) / np.linalg.norm(yn)
    if resid > _BACKWARD * eps:
        raise ValueError(f"X beta = y is inconsistent: no interpolant exists (relative "
                         f"least-squares residual {resid:.3e})") from first_error
    rhs = coef / sv
    scale = float(np.max(np.abs(rhs)))
    beta, cert = _l1_interpolant(Vt, rhs / scale)
    beta = beta * scale
    resid = float(np.linalg.norm(Xn @ beta - yn) / np.linalg.norm(yn))
    rounding = _BACKWARD * eps * (float(sv[0]) * np.linalg.norm(beta) / np.linalg.norm(yn) + 1)
    if resid > rounding:
        raise RuntimeError(f"min_norm_interpolant: the whitened solution does not solve X beta "
                           f"= y to rounding level (relative residual {resid:.3e} > "
                           f"{rounding:.1e})") from first_error
    return beta, cert._replace(solver="HiGHS (whitened system)")


def _exact_residual(A, b, y):
    """``A @ b - y`` correctly rounded (each entry the float64 nearest the exact value): A, b
    and y divided by powers of two to max 1 (exact), the products split error-free
    (``_validate.two_product``) and each row summed exactly (``math.fsum``). Products below the
    normal range (about 1e-292 after scaling) lose their low bits, an error negligible beside
    the residual relative to max |y| that it is used for."""
    import math

    sa, sb = _validate.pow2_scale(A), _validate.pow2_scale(b)
    As, bs = A / sa, b / sb
    with np.errstate(under="ignore", over="ignore"):
        ys = (y / sa) / sb
        p, e = _validate.two_product(As, bs[None, :])
    rows = [math.fsum([*pi, *ei, -yi]) for pi, ei, yi in zip(p, e, ys, strict=True)]
    with np.errstate(under="ignore", over="ignore"):
        return np.asarray(rows, dtype=np.float64) * sa * sb


_REFINE_STEPS = 30
"""Most steps of iterative refinement in :func:`_refine_on_support`."""


def _refine_on_support(beta_scaled, X, y, factor):
    """The LP vertex's support S: recompute beta_S from X_S beta_S = y on the original
    (unscaled) X and y by a direct solve (LU for a square X_S, else pivoted QR) and iterative
    refinement with the residual computed exactly (:func:`_exact_residual`), so the result is
    accurate to rounding whenever cond(X_S) eps < 1, however ill-conditioned X is (a float64
    solve alone is off by up to cond(X_S) eps: 5e-5 relative at cond 1e12).

    Returns ``(beta, forward_error)`` in the scaled units of ``beta_scaled``: the refined beta
    when finite and of the LP's signs on S, else the LP's own beta; ``forward_error`` is
    ``|d| / |beta|`` for the correction ``d = X_S^+ (X_S beta_S - y)`` of the returned beta
    computed from its exact residual, an estimate of its relative error (to first order,
    exact in the correction's own relative accuracy cond(X_S) eps), or ``inf`` when it
    cannot be estimated (empty support, a support larger than N, non-finite numbers)."""
    from scipy.linalg import lstsq as qr_lstsq
    from scipy.linalg import lu_factor, lu_solve

    beta_scaled = np.asarray(beta_scaled, dtype=np.float64)
    # an entry's weight in X beta is |beta_j| max |X_j| (columns may differ by 1e12 in scale)
    with np.errstate(all="ignore"):
        w = np.abs(beta_scaled) * np.max(np.abs(X), axis=0)
    wmax = float(np.max(w)) if w.size else 0.0
    support = w > 1e-12 * wmax
    if (not 0 < support.sum() <= X.shape[0] or not np.isfinite(factor) or factor <= 0
            or not np.all(np.isfinite(beta_scaled))):
        return beta_scaled, np.inf
    XS = X[:, support]
    with np.errstate(all="ignore"):
        if XS.shape[0] == XS.shape[1]:  # LU: SVD-based lstsq loses digits in 1 / s_min
            lu = lu_factor(XS, check_finite=False)

            def solve(r):
                return lu_solve(lu, r, check_finite=False)
        else:  # QR with column pivoting
            def solve(r):
                return qr_lstsq(XS, r, lapack_driver="gelsy", check_finite=False)[0]

        def correction(b):
            r = _exact_residual(XS, b, y)
            d = solve(r)
            # scaled norms, as a ratio of mantissas and powers of two: np.linalg.norm of
            # entries near 1e-300 underflows to 0 (y = 1e-300 on the row (1e-300, 2e-300, 1)
            # gave an "error" inf at condition number 1)
            (md, ed), (mb, eb) = _validate.norm_pow2(d), _validate.norm_pow2(b)
            fe = float(np.ldexp(md / mb, ed - eb)) if mb > 0 else np.inf
            return d, (fe if np.isfinite(fe) else np.inf)

        lp = beta_scaled[support] * factor
        b = solve(y) if np.all(np.isfinite(XS)) else lp
        d, fe = correction(b) if np.all(np.isfinite(b)) else (None, np.inf)
        for _ in range(_REFINE_STEPS):
            if not fe > 2 * np.finfo(float).eps:
                break
            nxt = b - d
            d_n, fe_n = correction(nxt)
            if not fe_n < 0.5 * fe:  # no longer contracting: cond(X_S) eps is not << 1
                if fe_n < fe:
                    b, d, fe = nxt, d_n, fe_n
                break
            b, d, fe = nxt, d_n, fe_n
        if fe < np.inf and np.all(np.sign(b) == np.sign(lp)):
            refined = np.zeros_like(beta_scaled)
            refined[support] = b / factor
            return refined, fe
        _, fe_lp = correction(lp) if np.all(np.isfinite(lp)) else (None, np.inf)
    return beta_scaled, fe_lp


def _unscale(beta_scaled, factor, X, y):
    """beta = beta_scaled * max |y| / max |X| (``factor``, kept for the callers, is that
    ratio), the scale applied in numpy as one power-of-two shift
    (:func:`_validate.scaled_result`): a result that overflows, or lies below float64's normal
    range where rounding would cost more than 1e-9 of its norm (``X = [[1e300, 1]]``,
    ``y = [1e-300]``: beta ~ 1e-600, was returned as 0), raises ValueError naming X and y.
    A beta whose residual on the caller's X and y (computed exactly, relative to |y|) is
    above max(1e-6, rounding level) is refused too."""
    X, y = np.asarray(X), np.asarray(y)
    cx, cy = _validate.max_abs(X), _validate.max_abs(y)
    beta = _validate.scaled_result(beta_scaled, cy, cx, tol=_VERIFY_TOL,
                                   what="the interpolant beta",
                                   names=f"max |y| / max |X| = {cy:.3e} / {cx:.3e}")
    # residual on the caller's X and y, exactly and in scaled norms (np.linalg.norm of
    # entries near 1e-300 underflows to 0, which made a zero beta "fit" y = 1e-300)
    r = _exact_residual(X, beta, y)
    nr, ny = _validate.norm_pow2(r), _validate.norm_pow2(y)
    nx, nb = _validate.norm_pow2(X), _validate.norm_pow2(beta)
    # the product X beta has rounding error ~ eps |X| |beta|, large for ill-conditioned X
    with np.errstate(all="ignore"):
        log_slack = (np.log2(_BACKWARD * max(X.shape) * np.finfo(float).eps)
                     + (np.log2(nx[0]) + nx[1] + np.log2(nb[0]) + nb[1]
                        if nb[0] > 0 else -np.inf))
        log_rel = (np.log2(nr[0]) + nr[1] if nr[0] > 0 else -np.inf) - (np.log2(ny[0]) + ny[1])
        log_rel_slack = log_slack - (np.log2(ny[0]) + ny[1])
    if not log_rel <= max(np.log2(1e-6), log_rel_slack):
        raise ValueError(f"the interpolant beta does not solve X beta = y on the caller's X and "
                         f"y: relative residual 2^{log_rel:.1f} (computed exactly) with max |y| "
                         f"/ max |X| = {cy:.3e} / {cx:.3e}; rescale X or y")
    return jnp.asarray(beta)


# A max-margin solution is accepted when its constraint violation, stationarity residual and
# duality gap (relative, on the scaled problem) are at most this.
_MARGIN_TOL = 1e-8


def _margin_checks(Z, w, a, p):
    """Residuals of min ||w||_p s.t. Z w >= 1 at (w, multipliers a): relative constraint
    violation, dual infeasibility (p = 1: ||Z^T a||_inf - 1; p = 2: ||w - Z^T a|| / ||w|| with
    the KKT condition w = Z^T a of min ||w||^2 / 2) and relative duality gap. Rounding in the
    products Z w, Z^T a (for p = 1 computed in extended precision) is allowed for (|Z| |w| eps,
    |Z| |a| eps) with eps that of the extended format."""
    # for p = 1 the products in extended precision (numpy's longdouble, 64-bit mantissa on
    # x86): with float64 the rounding allowance eps |Z| |a| can exceed the tolerance itself
    # when Z^T a cancels (rows (1, 1e-9) and (1, -1e-9) accepted a w 4.7e-8 above the optimum)
    ld = np.longdouble if p == 1 else np.float64  # p = 2: multipliers of the whitened solve
    eps = float(np.finfo(ld).eps) * max(Z.shape)
    Zl = np.asarray(Z, dtype=ld)
    zabs = np.abs(Zl)
    margins = np.asarray(Zl @ np.asarray(w, dtype=ld), dtype=float)
    round_m = eps * float(np.max(zabs @ np.abs(np.asarray(w, dtype=ld))))
    a = np.clip(a, 0.0, None)
    za = np.asarray(Zl.T @ np.asarray(a, dtype=ld), dtype=float)
    round_a = eps * float(np.max(zabs.T @ np.asarray(a, dtype=ld))) if a.size else 0.0
    if p == 1:
        nw = float(np.abs(w).sum())
        dual = max(0.0, float(np.max(np.abs(za))) - 1.0 - round_a)
        gap = abs(nw - float(a.sum())) / max(nw, 1e-300)
    else:
        nw = float(np.linalg.norm(w))
        dual = max(0.0, float(np.linalg.norm(w - za)) - round_a * np.sqrt(w.size)) / \
            max(nw, 1e-300)
        gap = abs(nw ** 2 - float(a.sum())) / max(nw ** 2, 1e-300)
    return {"violation": max(0.0, 1.0 - float(np.min(margins)) - round_m),
            "dual": dual, "gap": gap}


def _margin_solve(Xn, yn, p, what):
    """min ||w||_p s.t. Z w >= 1 (rows z_i = y_i x_i, max |Z| = 1), accepted only when it
    verifies (:func:`_margin_checks` at most ``_MARGIN_TOL``). First the problem as posed
    (Clarabel); when that answer does not verify or the solver calls it infeasible, a
    better-conditioned equivalent: for p = 2 the whitened problem (Z = U S V^T, w = V S^-1 u:
    constraints U u >= 1, objective ||(s_min / S) u||^2), for p = 1 the linear program with
    columns scaled to max 1 (HiGHS). Data that the reformulation also finds infeasible are
    not separable (ValueError); a solution that still does not verify raises RuntimeError
    with its residuals. A solver error of the first attempt (Clarabel's numerical trouble)
    also goes to the reformulation."""
    cp = _cvxpy()
    Z = yn[:, None] * Xn
    w = cp.Variable(Xn.shape[1])
    objective = cp.norm1(w) if p == 1 else cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(objective), [cp.multiply(yn, Xn @ w) >= 1])
    try:
        status = _solve(prob, what)
    except RuntimeError:  # Clarabel gave up (numerical trouble): the reformulation below
        status = "solver_error"
    if status == "solver_error":
        pass
    elif status == cp.OPTIMAL:
        wv = np.asarray(w.value)
        mult = np.asarray(prob.constraints[0].dual_value)
        checks = _margin_checks(Z, wv, mult if p == 1 else mult / 2.0, p)
        if max(checks.values()) <= _MARGIN_TOL:
            return wv
    elif status not in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"{what}: solver status {status!r}")
    # (optimal_inaccurate, on rows nearly opposite to 1e-9, goes to the reformulation too)
    try:
        wv, mult, infeasible = (_margin_whitened if p == 2 else _margin_l1_scaled)(Z, what)
    except RuntimeError as err:
        _tiny_margin(Z, what, err)
        raise
    if infeasible:  # checked independently: not separable, unresolvable, or solver failure
        raise _unseparable(Z, what)
    checks = _margin_checks(Z, wv, mult, p)
    if max(checks.values()) > _MARGIN_TOL:
        err = RuntimeError(f"{what}: the solution does not verify (relative residuals, tol "
                           f"{_MARGIN_TOL:.0e}): {checks}")
        _tiny_margin(Z, what, err)
        raise err
    return wv


def _tiny_margin(Z, what, err):
    """After the reformulated problem failed (``err``): raise the ValueError of
    :func:`_unseparable` when the rows ``Z`` have a margin, if any, below
    :data:`_MARGIN_RESOLUTION` (a convex combination of the equilibrated rows of norm at most
    that), where no solver answer verifies (rows (x, -x + 1e-9 g), labels +1, gave
    RuntimeError "solver status 'optimal_inaccurate'" or "does not verify"; issue 21);
    return otherwise."""
    v, comb = _hull_distance(_equilibrate(Z))
    if comb is not None and v <= _MARGIN_RESOLUTION:
        raise _unseparable(Z, what) from err


def _margin_whitened(Z, what):
    """p = 2 on the whitened problem; returns (w, multipliers a with w = Z^T a, infeasible)."""
    cp = _cvxpy()
    U, sv, Vt = np.linalg.svd(Z, full_matrices=False)
    keep = sv > max(Z.shape) * np.finfo(float).eps * sv[0]
    U, sv, Vt = U[:, keep], sv[keep], Vt[keep]
    smin = float(sv[-1])
    u = cp.Variable(sv.size)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(smin / sv, u))), [U @ u >= 1])
    status = _solve(prob, what)
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return None, None, True
    if status != cp.OPTIMAL:
        raise RuntimeError(f"{what}: solver status {status!r} on the whitened problem")
    w = Vt.T @ (np.asarray(u.value) / sv)
    # stationarity 2 (smin/s)^2 u = U^T mu is 2 smin^2 w = Z^T mu: a = mu / (2 smin^2)
    a = np.asarray(prob.constraints[0].dual_value) / (2.0 * smin ** 2)
    return w, a, False


def _margin_l1_scaled(Z, what):
    """p = 1 as the LP w = (p - q) / c, p, q >= 0 with columns scaled to max 1 (HiGHS);
    returns (w, multipliers, infeasible)."""
    from scipy.optimize import linprog

    c = np.max(np.abs(Z), axis=0)
    c = np.where(c > 0, c, 1.0)
    Zc = Z / c
    d = Z.shape[1]
    res = linprog(np.concatenate([1.0 / c, 1.0 / c]), A_ub=-np.hstack([Zc, -Zc]),
                  b_ub=-np.ones(Z.shape[0]), bounds=(0, None), method="highs")
    if res.status == 2 or res.x is None or res.ineqlin is None:
        # infeasible, or no solution at all (HiGHS status 4 on rows (1e20, 1), (-1, -1e-20)):
        # the caller's independent check decides between not separable and solver failure
        return None, None, True
    w = (res.x[:d] - res.x[d:]) / c
    return w, -np.asarray(res.ineqlin.marginals), False


_MARGIN_RESOLUTION = 1e-6
"""Smallest relative margin (of the rows y_n x_n with rows and columns scaled to max 1 by
powers of two) that the separability tests resolve: the linear programs run at HiGHS's
feasibility tolerance 1e-7."""


def _equilibrate(Z):
    """Z with rows, then columns, divided by powers of two to max |entry| in [0.5, 1): exact,
    and positive row and column scalings leave separability (some w with Z w > 0) unchanged.
    Zero rows and columns are left as they are."""
    Z = np.asarray(Z, dtype=np.float64)
    r = _validate.pow2_of(np.where(np.any(Z != 0, axis=1), np.max(np.abs(Z), axis=1), 1.0))
    Z = Z / r[:, None]
    c = _validate.pow2_of(np.where(np.any(Z != 0, axis=0), np.max(np.abs(Z), axis=0), 1.0))
    return Z / c[None, :]


def _hull_distance(Z):
    """``(v, comb)``: ``comb = Z^T a`` for the ``a >= 0``, ``sum a = 1`` that minimizes
    ``||Z^T a||_inf`` (an LP, HiGHS), recomputed in extended precision, and ``v = ||comb||_2``:
    an upper bound on the l2 margin ``max_{|w| = 1} min_n z_n . w`` of the rows of ``Z`` (0
    exactly certifies that no w separates them); ``(nan, None)`` if the LP fails."""
    from scipy.optimize import linprog

    N, d = Z.shape
    # variables (a, t): min t s.t. -t <= Z^T a <= t, a >= 0, sum a = 1
    res = linprog(np.concatenate([np.zeros(N), [1.0]]),
                  A_ub=np.block([[Z.T, -np.ones((d, 1))], [-Z.T, -np.ones((d, 1))]]),
                  b_ub=np.zeros(2 * d), A_eq=np.concatenate([np.ones(N), [0.0]])[None, :],
                  b_eq=[1.0], bounds=(0, None), method="highs")
    if res.x is None:
        return float("nan"), None
    a = np.clip(res.x[:N], 0.0, None)
    a = a / a.sum()
    comb = np.asarray(np.asarray(Z, np.longdouble).T @ np.asarray(a, np.longdouble),
                      dtype=np.float64)
    return float(np.linalg.norm(comb)), comb


def _range_text(Z):
    """The ratio of the largest to the smallest nonzero |entry|, for messages."""
    nz = np.abs(np.asarray(Z))[np.asarray(Z) != 0]
    return f"X's nonzero entries span a ratio {nz.max() / nz.min():.1e}" if nz.size else ""


def _unseparable(Z, what):
    """The error for rows ``Z = y_n x_n`` that a solver found not separable (or failed on),
    after an independent check, the Farkas alternative on the rows and columns scaled to max 1
    (:func:`_equilibrate`, :func:`_hull_distance`): a convex combination that is exactly 0
    certifies that no w separates (ValueError "not linearly separable"); one of norm ``v`` at
    most :data:`_MARGIN_RESOLUTION` bounds the margin, if any, below what the solvers resolve
    (ValueError naming X, saying so, not "not separable"); otherwise the solver was wrong
    (RuntimeError)."""
    v, comb = _hull_distance(_equilibrate(Z))
    if comb is None:
        return RuntimeError(f"{what}: the solver found the data not separable, and the "
                            f"check of that claim failed too")
    if v == 0.0:
        return ValueError("the data (X, y) are not linearly separable through the origin "
                          "(a convex combination of the rows y_n x_n is exactly 0)")
    if v <= _MARGIN_RESOLUTION:
        return ValueError(
            f"X: the data (X, y) are not linearly separable through the origin, or are "
            f"separable only with a margin below the resolvable relative size "
            f"{_MARGIN_RESOLUTION:.0e}: with the rows y_n x_n and the columns scaled to max 1, "
            f"a convex combination of the rows has norm {v:.1e}, an upper bound on any such "
            f"margin ({_range_text(Z)}); rescale or regularize X")
    return RuntimeError(f"{what}: the solver found the data not separable (or failed), but "
                        f"the convex combinations of the rows y_n x_n (rows and columns scaled "
                        f"to max 1) stay about {np.max(np.abs(comb)):.1e} away from 0 in every "
                        f"coordinate direction: solver failure")


def max_margin(X, y, p=2):
    r"""Maximum-margin linear classifier :math:`\arg\min_w \|w\|_p` s.t.
    :math:`y_n \langle x_n, w\rangle \ge 1` for all n.

    The :math:`\ell_p` margin of the data is :math:`1 / \|w\|_p` and its direction is
    :math:`w / \|w\|_p`. For ``p = 2`` the verified solver answer is polished on its active
    constraints: the minimum-norm solution of those taken as equalities, kept only when it is
    feasible with nonnegative multipliers (optimal to rounding).

    Args:
        X: ``(N, d)`` float inputs.
        y: ``(N,)`` labels in {-1, +1}.
        p: 1 or 2.

    Returns:
        ``(d,)`` float64 JAX array ``w``.

    Raises:
        ValueError: bad shapes or labels, ``X`` all zero or with only subnormal entries (``max |X|``
            below 2.2e-308), ``p`` not the int 1 or 2,
            data that are not linearly separable through the origin (certified by a convex
            combination of the rows ``y_n x_n`` that is exactly 0), data whose margin, if any,
            is below the resolvable relative size 1e-6 (a message naming ``X``: a combination
            of the rows, scaled to max 1, of norm at most 1e-6, e.g. rows (1e20, 1) and
            (-1, -1e-20)), or a classifier outside float64's range
            (``max |X|`` so small that ``1 / max |X|`` overflows), or a margin below what
            float64 resolves: the returned ``w`` must meet every constraint
            :math:`y_n\langle x_n, w\rangle \ge 1` to 1e-8, computed exactly on the caller's
            ``X`` and ``y``, and rounding ``w`` to float64 must move no margin by more than
            1e-8 of its size (eps :math:`|x_n||w|`; beyond that neither feasibility nor
            optimality to 1e-8 is certified), else the message names ``X`` and gives the
            margin :math:`1 / \|w\|_p`, the rounding and the violation (rows (1, 2) and
            (-1, -2 + 1e-9), labels +1: margin 2.2e-10 (``p = 2``), where rounding ``w ~
            4.5e9`` moves the margins by about 1e-6).
        RuntimeError: the solver stopped without reaching optimality, or its answer does not
            verify: every answer is checked against its own constraints and optimality
            conditions (constraint violation, dual feasibility, duality gap, relative, at
            most 1e-8); when the problem as posed fails this (ill-conditioned data, e.g.
            ``x = (1, +-1e-8)``), a whitened (p = 2) or column-scaled (p = 1) equivalent is
            solved and checked instead, and the message gives the residuals if that fails too
            (a ValueError naming ``X`` instead when the data's margin, if any, is below the
            resolvable 1e-6, as above: rows (x, -x + 1e-9 g) with labels +1).

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 0.5], [-1.0, 0.5]]); y = np.array([1.0, -1.0])
        >>> [round(v, 6) for v in max_margin(X, y, p=2).tolist()]
        [1.0, 0.0]
    """
    X = _validate.nonzero_matrix("X", _validate.as_array("X", X, ndim=2))
    y = _validate.labels("y", y, X.shape[0])
    p = _check_p(p)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    # Scale the inputs to max |X| = 1 (w = w' / cx), so the solver's tolerances are relative.
    Xn, _, cx, _ = _scaled(np.asarray(X), np.ones(1))
    yn = np.asarray(y)
    w = _margin_solve(Xn, yn, p, "max_margin")
    if p == 2:
        w = _polish_l2_margin(Xn, yn, np.asarray(w, dtype=np.float64))
    with np.errstate(over="ignore"):
        w = w / cx
    if not np.all(np.isfinite(w)):
        raise ValueError(f"the max-margin classifier is outside float64's range: its norm "
                         f"scales as 1 / max |X| and max |X| = {cx:.3e}; rescale X")
    _check_margins(w, np.asarray(X), yn, p)
    return jnp.asarray(w)


def _check_margins(w, X, y, p):
    r"""Raise ValueError naming X unless the returned ``w`` meets every constraint
    :math:`y_n\langle x_n, w\rangle \ge 1` on the caller's X and y to ``_MARGIN_TOL``, the
    margins computed exactly (:func:`_exact_residual`, error-free products and exact sums),
    and float64 resolves the margins to that tolerance: rounding ``w`` alone moves margin n
    by up to eps :math:`|x_n||w|`, at most ``_MARGIN_TOL`` times :math:`\max(1,
    y_n\langle x_n, w\rangle)`. The solver's checks allow that rounding, which for a tiny
    margin exceeds the tolerance itself: rows (1, 2) and (-1, -2 + 1e-9), labels +1, have
    |w| ~ 4.5e9 and the verified answer missed a constraint by 1.7e-6; rows x and -x + 2e-10 g
    gave a feasible w with |w|_2 6.4e-7 above the optimum (issue 21). There no float64 w is
    certified feasible and optimal to 1e-8 (rounding the exact optimum alone moves the
    margins by about eps |x_n| |w| / 2), so the data are refused."""
    Z = y[:, None] * X  # exact: y in {-1, +1}
    with np.errstate(all="ignore"):
        r = _exact_residual(Z, w, np.ones(Z.shape[0]))  # Z w - 1, correctly rounded
    finite = bool(np.all(np.isfinite(r)))
    viol = float(max(0.0, -float(np.min(r)))) if finite else np.inf
    sx, sw = _validate.pow2_scale(Z), _validate.pow2_scale(w)
    ex = int(np.frexp(sx)[1]) + int(np.frexp(sw)[1]) - 2  # sx sw = 2**ex
    eps = np.finfo(float).eps
    with np.errstate(all="ignore"):
        # eps |z_n| |w| / max(1, z_n . w) (scaled: no overflow), what rounding w alone may
        # cost margin n relative to its size
        zw = np.ldexp(np.abs(Z / sx) @ np.abs(w / sw), ex)
        kappa = float(np.max(zw / np.maximum(1.0 + r, 1.0))) if finite else np.inf
    if viol <= _MARGIN_TOL and eps * kappa <= _MARGIN_TOL:
        return
    with np.errstate(all="ignore"):
        (mw, ew) = _validate.norm_pow2(w) if p == 2 else (float(np.sum(np.abs(w / sw))),
                                                          int(np.frexp(sw)[1]) - 1)
        margin = float(np.ldexp(1.0 / mw, -ew)) if mw > 0 else np.inf
    raise ValueError(
        f"X: the data (X, y) are separable only with a margin below what float64 resolves: "
        f"the l{p} max-margin classifier w has margin 1 / |w|_{p} = {margin:.3e} (max |X| = "
        f"{_validate.max_abs(X):.3e}); rounding w to float64 alone moves y_n <x_n, w> by up "
        f"to eps |x_n| |w| = {eps * kappa:.1e} of its size (tolerance {_MARGIN_TOL:.0e}), "
        f"so no float64 w is certified to meet the constraints and optimality to "
        f"{_MARGIN_TOL:.0e} (the solver's answer misses a constraint y_n <x_n, w> >= 1 by "
        f"{viol:.2e}, computed exactly; {_range_text(Z)}); rescale or regularize X")


def _polish_l2_margin(Xn, yn, w):
    r"""Active-set polish of the (verified) interior-point max-margin ``w`` (p = 2): on the
    constraints active to 1e-6, the minimum-norm w2 with :math:`y_n\langle x_n, w_2\rangle =
    1` there, w2 = Z_A^T a, is the exact optimum when it is feasible (all margins at least 1)
    and a >= 0 (KKT); then returned, else ``w`` (Clarabel's answer was off by 1e-6 on small
    integer data: [2.3e-7, -1, 1.7e-6] for [0, -1, 0]; issue 21)."""
    Z = yn[:, None] * Xn
    m = Z @ w
    active = m <= 1 + 1e-6
    eps = np.finfo(float).eps
    for _ in range(Z.shape[0]):
        if not np.any(active):
            return w
        Za = Z[active]
        with np.errstate(all="ignore"):
            w2 = np.linalg.lstsq(Za, np.ones(Za.shape[0]), rcond=None)[0]
            a = np.linalg.lstsq(Za.T, w2, rcond=None)[0]
        if not (np.all(np.isfinite(w2)) and np.all(np.isfinite(a))):
            return w
        tol = 1e3 * max(Z.shape) * eps
        if a.min() < -tol * max(float(np.max(np.abs(a))), 1.0):
            idx = np.flatnonzero(active)
            active[idx[np.argmin(a)]] = False  # drop the most negative multiplier
            continue
        ok = (np.linalg.norm(Za.T @ a - w2) <= tol * max(np.linalg.norm(w2), 1.0)
              and float(np.min(Z @ w2)) >= 1 - tol
              and np.linalg.norm(w2) <= np.linalg.norm(w) * (1 + 1e-6))
        return w2 if ok else w
    return w
