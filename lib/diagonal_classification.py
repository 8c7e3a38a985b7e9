r"""Diagonal linear networks for classification: the exponential loss and its margin limits.

The model is the depth-:math:`D` diagonal network of :mod:`lib.diagonal`,
:math:`w = u_+^D - u_-^D`, started unbiased at :math:`u_\pm(0) = \alpha\mathbf 1`, now trained on
separable data with the exponential loss
:math:`L(u) = \frac1N\sum_n \exp(-y_n\langle x_n, w(u)\rangle)` (Moroshko et al. 2020, Sec. 2).
Its normalized predictor moves, as the initialization scale :math:`\alpha` and the training
accuracy grow, between the :math:`\ell_2` max-margin predictor (kernel regime) and the
:math:`\ell_{2/D}` one (rich regime), through the minimizers of :math:`Q^D_\mu` (the regularizer
:func:`lib.diagonal.Q` with :math:`\alpha^D` replaced by :math:`\mu`) under margin constraints.

Public functions:

* :func:`margin_limit`: :math:`\arg\min_w Q^D_\mu(w)` s.t. :math:`y_n\langle x_n, w\rangle \ge 1`,
  by Newton's method on its dual, with the dual multipliers if asked.
* :func:`exponential_loss_path`: the network itself, trained by normalized gradient descent
  on :math:`\log L` up to given training accuracies :math:`-\log L`.
* :func:`log_exponential_loss`: :math:`\log L` as a log-sum-exp, for :mod:`lib.flows`.

The scalar building blocks (:func:`lib.diagonal.h_D`, :func:`lib.diagonal.q_D`, ...) are those of
the regression limit in :mod:`lib.diagonal`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate
from .diagonal import (
    _MAX_ITER,
    _SERIES_Z,
    _beta_stable,
    _check_alpha,
    _check_depth,
    _check_params,
    _exponent,
    _series_coeffs,
)

__all__ = ["ExponentialRun", "exponential_loss_path", "log_exponential_loss", "margin_limit"]


def _np_link(z, log_mu, depth):
    """Numpy: w = mu h_D(z), the weights mu h_D'(z) and mu sum H_D(z) (inf outside domain)."""
    mu = np.exp(log_mu)
    if depth == 2:
        ep, em = np.exp(log_mu + z), np.exp(log_mu - z)
        small = np.abs(z) < 1.0
        H = np.where(small, 4.0 * mu * np.sinh(np.where(small, z, 0.0) / 2.0) ** 2,
                     ep + em - 2.0 * mu)
        zs = np.where(small, z, 0.0)
        w = np.where(small, 2.0 * mu * np.sinh(zs), ep - em)  # no cancellation near 0
        weight = np.where(small, 2.0 * mu * np.cosh(zs), ep + em)
        return w, weight, float(np.sum(H))
    if np.any(np.abs(z) >= 1.0):
        return None, None, np.inf
    p, q, c = _exponent(depth), 2.0 / (depth - 2.0), (depth - 2.0) / 2.0
    a, b = 1.0 - z, 1.0 + z
    near = np.abs(z) < _SERIES_Z
    zs = np.where(near, z, 0.0)
    series = sum(2.0 * ck * zs ** k for k, ck in _series_coeffs(depth))
    w = mu * np.where(near, series, a ** (-p) - b ** (-p))
    weight = mu * p * (a ** (-p - 1.0) + b ** (-p - 1.0))
    H = mu * np.where(near, sum(2.0 * ck / (k + 1) * zs ** (k + 1)
                                for k, ck in _series_coeffs(depth)),
                      c * (np.expm1(-q * np.log1p(-z)) + np.expm1(-q * np.log1p(z))))
    return w, weight, float(np.sum(H))


_MU_KERNEL = 1e150  # above it margin_limit returns its (kernel-regime) answer at this mu


def margin_limit(X, y, mu, depth=2, *, tol=1e-10, max_iter=500, return_dual=False):
    r"""The transition-regime limit of the exponential loss:
    :math:`\arg\min_w Q^D_\mu(w)` s.t. :math:`y_n\langle x_n, w\rangle \ge 1` for all n.

    Moroshko et al. (2020, main result) show that, under a condition "concerning stability of
    the support vectors" (their words; the condition itself is not in our copy of the paper),
    the margin-normalized predictor of the depth-D diagonal network tends to this point as the
    initialization scale and the training accuracy go to their limits together; the pairing
    :math:`\alpha^D / \log(1/\epsilon) \to \mu` is our reconstruction of that joint limit.
    A fixed set of support vectors is not enough: the run's dual multipliers can only grow,
    so the multipliers of the limit must not fall as :math:`\mu` decreases (see the
    diagonal-classification chapter);
    :math:`Q^D_\mu(w) = \mu\sum_i q_D(w_i/\mu)` is the regularizer of :func:`lib.diagonal.Q` with
    :math:`\alpha^D` replaced by :math:`\mu`. As :math:`\mu\to\infty` it tends to the
    :math:`\ell_2` max-margin predictor, as :math:`\mu\to 0` to the :math:`\ell_1` (D = 2) one.

    Solved through its dual, a smooth bound-constrained problem in the multipliers
    :math:`\lambda\in\mathbb R^N_{\ge 0}` (with :math:`A = \mathrm{diag}(y) X`):

    .. math::
        \min_{\lambda\ge 0}\ \mu\sum_i H_D\big((A^\top\lambda)_i\big) - \mathbf 1^\top\lambda,
        \qquad w = \mu\, h_D(A^\top\lambda),

    by projected Newton (Bertsekas 1982) with Armijo backtracking along the projection arc and
    steps capped at 5 in :math:`A^\top\lambda` (so that small :math:`\mu` is reached in
    :math:`O(\log(1/\mu))` iterations). :math:`\mu h_2` and :math:`\mu H_2` are evaluated as
    :math:`e^{\log\mu \pm z}`: no overflow for :math:`\mu` down to :math:`10^{-300}`.
    Near the solution the decrease of the dual objective can fall below its rounding level
    (D >= 3 with small :math:`\mu`, where the curvature is large), so Armijo's test rejects
    every step; if the first pass stops there, a second pass accepts steps that reduce the
    KKT residual instead (results that converge in the first pass are unchanged).

    Args:
        X: ``(N, d)`` inputs, finite. y: ``(N,)`` labels in {-1, +1}.
        mu: float > 0 (for D >= 3 keep :math:`\mu\ge 10^{-12}`: the gap :math:`1 - |z|`
            is not tracked to relative precision here). Above :math:`10^{150}` the answer at
            :math:`\mu = 10^{150}` is returned (the multipliers rescaled by
            :math:`10^{150}/\mu`): there :math:`Q^D_\mu` is quadratic to rounding.
        depth: int D >= 2.
        tol: KKT tolerance: stop when :math:`\max_n |\min(\lambda_n, g_n)| \le` ``tol`` with
            :math:`g_n = y_n\langle x_n, w\rangle - 1` (margins :math:`\ge 1 -` ``tol``).
            The returned ``w`` and :math:`\lambda` meet it, checked after the fact (a run
            that stops above ``tol`` is polished by the second pass described above, and
            raises if that does not reach it; before, up to ``100 tol`` was accepted).
        max_iter: Newton iterations.
        return_dual: also return :math:`\lambda`.

    Returns:
        ``(d,)`` float64 numpy array ``w`` (and ``lam`` ``(N,)`` with ``return_dual``).

    Raises:
        ValueError: ``X`` empty (no row or column) or all zero or with only subnormal entries
            (``max |X|`` below 2.2e-308), labels outside {-1, +1}, ``mu`` not a
            finite number > 0, ``tol`` not a finite number in (0, 1) (``tol >= 1`` would accept
            :math:`w = 0`),
            ``max_iter`` not an integer in [1, 1e9], ``return_dual`` not a bool, bad shapes, data
            not linearly separable through the origin (checked with
            :func:`lib.convex.max_margin` when no KKT point is found: a KKT point itself
            certifies separability); ``mu * max|X|`` outside float64's range. ``X`` with
            ``max|X|`` outside [1e-100, 1e100] is solved in scaled form
            (``w(X, mu) = w(X / c, mu c) / c``).
        RuntimeError: no KKT point within ``tol`` after ``max_iter`` iterations of each
            pass (message gives the KKT residual and the iterations).

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 2.0]]); y = np.array([1.0])
        >>> np.round(margin_limit(X, y, mu=1e3), 4).tolist()   # ~ l2 max-margin
        [0.2, 0.4]
        >>> np.round(margin_limit(X, y, mu=1e-30), 3).tolist()  # ~ l1 max-margin
        [0.0, 0.5]
    """
    from . import convex

    depth = _check_depth(depth)
    X = _validate.nonempty("X", _validate.as_array("X", X, ndim=2))
    X = _validate.nonzero_matrix("X", X)
    y = _validate.labels("y", y, X.shape[0])
    mu = _validate.positive("mu", mu)
    # tol >= 1 would accept w = 0 (margins >= 1 - tol <= 0): an answer that ignores the data
    _validate.scalar("tol", tol, minimum=0.0, maximum=1.0, allow_min=False, allow_max=False)
    max_iter = _validate.integer("max_iter", max_iter, minimum=1, maximum=_MAX_ITER)
    return_dual = _validate.boolean("return_dual", return_dual)
    cx = _validate.max_abs(X)
    if not 1e-100 <= cx <= 1e100:
        # scaled form (as implicit_bias_limit): with X = cx X', w = v / cx turns the problem
        # into min Q_{mu cx}(v) / cx s.t. y <x', v> >= 1, so w(X, mu) = w(X', mu cx) / cx and
        # the multipliers are lam = lam' / cx
        with np.errstate(over="ignore", under="ignore"):
            mu_s = mu * cx
        if not (np.isfinite(mu_s) and mu_s >= _validate.TINY):
            raise ValueError(f"mu and X are out of range together: the limit depends on them "
                             f"through mu * max|X| = {mu:.3e} * {cx:.3e}, outside float64's "
                             "range: rescale X or mu")
        try:
            out = margin_limit(np.asarray(X) / cx, y, mu_s, depth, tol=tol,
                               max_iter=max_iter, return_dual=return_dual)
        except (ValueError, RuntimeError) as err:
            # the inner message names the rescaled mu; say what the caller passed
            raise type(err)(f"margin_limit with mu={mu:.3e} and max|X| = {cx:.3e} (solved in "
                            f"scaled form as X / max|X| with mu * max|X| = {mu_s:.3e}, the "
                            f"mu named below): {err}") from err
        with np.errstate(over="ignore", under="ignore"):
            w = (out[0] if return_dual else out) / cx
        if not np.all(np.isfinite(w)):
            raise ValueError(f"the limit is outside float64's range (max |X| = {cx:.3e})")
        return (w, out[1] / cx) if return_dual else w
    if mu > _MU_KERNEL:
        # deep in the kernel regime Q^D_mu(w) = |w|^2 / (2 c mu) (1 + O(max|w/mu|^2)), c =
        # h_D'(0): the minimizer at mu equals the one at _MU_KERNEL to rounding while
        # max|w| <= 1e-8 _MU_KERNEL, and the multipliers scale like 1/mu (KKT: q_D'(w/mu) =
        # A^T lam with q_D'(u) = u / c (1 + O(u^2))); Newton's scaled dual loses accuracy there
        w, lam = margin_limit(X, y, _MU_KERNEL, depth, tol=tol, max_iter=max_iter,
                              return_dual=True)
        if np.max(np.abs(w)) > 1e-8 * _MU_KERNEL:
            raise ValueError(f"mu = {mu:.3e} with a limit of size {np.max(np.abs(w)):.3e}: "
                             "outside the range solved here (rescale X)")
        return (w, lam * (_MU_KERNEL / mu)) if return_dual else w
    A = np.asarray(y)[:, None] * np.asarray(X)
    log_mu = np.log(mu)
    N = A.shape[0]
    cap = 5.0 if depth == 2 else 0.5

    # lam = s nu with s = 1 / (mu h_D'(0)) for large mu keeps nu of order one; the objective
    # is divided by s, so its gradient in nu is still g = A w - 1
    slope0 = 2.0 if depth == 2 else 2.0 * _exponent(depth)
    s = 1.0 / (mu * slope0) if mu * slope0 > 1.0 else 1.0

    def evaluate(lam):
        z = s * (A.T @ lam)
        with np.errstate(over="ignore", invalid="ignore"):
            w, weight, H = _np_link(z, log_mu, depth)
        if w is None or not np.isfinite(H):
            return w, weight, np.inf
        return w, s * weight, H / s - float(np.sum(lam))

    def newton(lam, w, weight, f, rounding):
        it, res = -1, np.inf
        for it in range(max_iter):  # noqa: B007 (it is reported after the loop)
            g = A @ w - 1.0
            res = float(np.max(np.abs(np.minimum(lam, g))))
            if res <= tol:
                break
            eps_k = min(1e-9, res)
            active = (lam <= eps_k) & (g > 0)
            free = ~active
            Hm = (A * weight[None, :]) @ A.T
            # Newton direction d = mag * dn, with the Hessian normalized by its largest diagonal
            # entry first (for small mu it is ~ mu: 1 / mu would overflow)
            hmax = float(np.max(np.diag(Hm)))
            Hn = Hm / hmax
            dn = np.zeros(N)
            if np.any(free):
                Hf = Hn[np.ix_(free, free)]
                Hf = Hf + 1e-13 * np.eye(Hf.shape[0])
                dn[free] = -np.linalg.solve(Hf, g[free])
            dn[active] = -g[active] / np.maximum(np.diag(Hn)[active], 1e-300)
            size = float(np.max(np.abs(dn)))
            if not size > 0 or not np.isfinite(size):
                break
            dn = dn / size
            mag = size / hmax
            dzv = s * (A.T @ dn)
            dz = float(np.max(np.abs(dzv)))
            t = min(mag, cap / dz) if dz > 0 else mag
            if depth > 2:  # fraction to the boundary |z| = 1: at most halve each gap 1 - |z|
                gaps = 1.0 - np.abs(s * (A.T @ lam))
                t = min(t, 0.5 * float(np.min(gaps / np.maximum(np.abs(dzv), 1e-300))))
            d = dn
            # rounding level of the dual objective f = H / s - sum(lam): near the solution the
            # decrease a Newton step brings (~ residual^2 / curvature) falls below it, and Armijo's
            # test then rejects every step (the run stalled at KKT residuals ~1e-8 for D = 3 and
            # small mu, where the curvature mu h_D' is large). In a second pass (``rounding``, only
            # when the first one did not converge, so converged results are unchanged) a step is
            # accepted there when it reduces the KKT residual instead.
            noise = 1e2 * np.finfo(float).eps * (abs(f) + float(np.sum(lam)) + 1.0)
            for _ in range(80):
                lam_new = np.maximum(lam + t * d, 0.0)
                w_new, weight_new, f_new = evaluate(lam_new)
                decrease = float(g @ (lam_new - lam))
                if np.isfinite(f_new) and f_new <= f + 1e-4 * decrease:
                    break
                if (rounding and np.isfinite(f_new) and abs(decrease) < noise
                        and np.all(np.isfinite(w_new))
                        and float(np.max(np.abs(np.minimum(lam_new, A @ w_new - 1.0)))) < res):
                    break
                t *= 0.5
            else:
                break  # no decrease at rounding level: stalled
            lam, w, weight, f = lam_new, w_new, weight_new, f_new
        return lam, w, weight, f, it

    lam = np.zeros(N)
    w, weight, f = evaluate(lam)
    lam, w, weight, f, it = newton(lam, w, weight, f, False)
    res = float(np.max(np.abs(np.minimum(lam, A @ w - 1.0))))
    if not res <= tol or not np.all(np.isfinite(w)):
        lam, w, weight, f, it2 = newton(lam, w, weight, f, True)
        it += it2 + 1
    g = A @ w - 1.0
    res = float(np.max(np.abs(np.minimum(lam, g))))
    if not res <= tol or not np.all(np.isfinite(w)):
        # KKT points certify separability (margins >= 1 - tol); without one, find out why
        convex.max_margin(X, y, p=2)  # raises ValueError if the data are not separable
        raise RuntimeError(f"margin_limit: projected Newton did not converge for mu={mu:.3e}, "
                           f"depth={depth}: KKT residual {res:.3e} after {it + 1} iterations "
                           f"(tol {tol:.1e})")
    return (w, s * lam) if return_dual else w




def log_exponential_loss(params, args):
    r""":math:`\log L` for :math:`L(u) = \frac1N\sum_n \exp(-y_n\langle x_n, w(u)\rangle)`,
    :math:`w = u_+^D - u_-^D`, as a log-sum-exp (finite however small :math:`L` is).

    The exponential loss of the diagonal network studied by Moroshko et al. 2020 (Sec. 2;
    trained by normalized gradient descent, Sec. 5), in log domain for
    :func:`lib.flows.gradient_descent` and :func:`lib.flows.gradient_descent_sweep` with
    ``log_domain=True`` (:func:`exponential_loss_path` runs its own loop on the same
    :math:`\log L`, the step recomputed at every iterate). The predictor is computed as
    :math:`(u_+ - u_-)\sum_k u_+^k u_-^{D-1-k}`, without cancellation when :math:`u_+ \approx
    u_-`.

    Args:
        params: dict ``{"w_plus": (d,), "w_minus": (d,)}`` of real arrays (:math:`u_\pm`).
        args: tuple ``(A, depth)``: :math:`A = \mathrm{diag}(y) X`, an ``(N, d)`` real array
            with ``N >= 1``, and ``depth`` a Python int :math:`D \ge 2`. Only dtypes and
            shapes of the arrays are checked, since the loss runs traced inside the compiled
            training loop: NaN or inf entries give a NaN or infinite :math:`\log L`, which
            :func:`lib.flows.gradient_descent` reports as an error.

    Returns:
        A float64 JAX scalar :math:`\log L`, finite even when :math:`L` underflows.

    Raises:
        ValueError: ``params`` not a dict with keys ``"w_plus"`` and ``"w_minus"`` of shape
            ``(d,)``; ``args`` not a pair ``(A, depth)``; ``A`` not 2-D with at least one
            row or not real numeric; ``depth`` not an integer ``>= 2``.

    Example:
        >>> import numpy as np
        >>> params = {"w_plus": np.array([1.0, 0.0]), "w_minus": np.zeros(2)}
        >>> A = np.array([[1.0, 0.0], [0.0, 1.0]])   # margins 1 and 0
        >>> round(float(log_exponential_loss(params, (A, 2))), 12)  # log((e^-1 + 1) / 2)
        -0.379885493042
    """
    if not isinstance(args, tuple | list) or len(args) != 2:
        raise ValueError("args must be a tuple (A, depth)")
    depth = _check_depth(args[1])
    A = _validate.real_array("A", args[0], ndim=2)
    if A.shape[0] < 1:
        raise ValueError(f"A must have at least one row, got shape {A.shape}")
    w_plus, w_minus = _check_params(params, A.shape[1])
    w = _beta_stable(w_plus, w_minus, depth)
    m = A @ w
    return jax.scipy.special.logsumexp(-m) - jnp.log(A.shape[0])


# Smallest update of normalized GD, in units in the last place of u, accepted by
# exponential_loss_path (see the check there).
_MIN_ULPS_PER_STEP = 1024

# Most loss checkpoints (levels of ratio max_ratio, see exponential_loss_path) accepted.
_MAX_LEVELS = 100_000

# Status codes of the compiled normalized-GD loop of exponential_loss_path.
_RUNNING, _DONE, _PLATEAU, _NONFINITE, _RESOLUTION, _OVERFLOW, _ASCENT = range(7)


def _curvature_bound(up, um, xmax, depth):
    r"""A bound :math:`M(u) \ge \|\nabla^2 \log L(u)\|_2` (one run; ``up``, ``um`` of shape
    ``(d,)``): with :math:`F(w) = \log L` as a function of :math:`w = u_+^D - u_-^D`,
    :math:`\nabla^2_u \log L = J^\top \nabla^2 F J + \sum_i \partial_i F\, \nabla^2 w_i`, where
    :math:`\|\nabla^2 F\| \le \max_n\|x_n\|^2` (a covariance of the rows under softmax weights),
    :math:`\|J\|^2 = D^2\max_i(u_{+,i}^{2D-2} + u_{-,i}^{2D-2})` (both halves of :math:`u` feed
    coordinate :math:`i`), :math:`|\partial_i F| \le \max_n\|x_n\|` and :math:`\nabla^2 w_i` is
    diagonal with entries :math:`\pm D(D-1)u_{\pm,i}^{D-2}`. Written as squares of
    :math:`u^{D-1}\max_n\|x_n\|` so that tiny or huge ``xmax`` neither underflows nor
    overflows before the product does."""
    a = (jnp.abs(up) ** (depth - 1) * xmax) ** 2 + (jnp.abs(um) ** (depth - 1) * xmax) ** 2
    umax = jnp.maximum(jnp.max(jnp.abs(up)), jnp.max(jnp.abs(um)))
    return depth ** 2 * jnp.max(a) + depth * (depth - 1) * umax ** (depth - 2) * xmax


def _log_loss_value(up, um, A, depth):
    """log L of one run, as :func:`log_exponential_loss` without its argument checks."""
    w = _beta_stable(up, um, depth)
    return jax.scipy.special.logsumexp(-(A @ w)) - jnp.log(A.shape[0])


def _ulps(x):
    """Spacing of float64 at |x| (XLA flushes subnormals: at least the smallest normal)."""
    ax = jnp.abs(x)
    return jnp.maximum(jnp.nextafter(ax, jnp.inf) - ax, _validate.TINY)


@functools.lru_cache(maxsize=None)
def _exponential_loop(depth):
    """Normalized GD on log L for a batch of runs, compiled once per depth: one
    ``jax.lax.while_loop`` per run (vectorized with ``jax.vmap``), the step
    ``step / M(u_k)`` recomputed at every iterate; the state at the first iterate where
    :math:`-\\log L` reaches each accuracy is recorded."""
    value_and_grad = jax.value_and_grad(_log_loss_value, argnums=(0, 1))

    def one(up, um, A, acc, levels, step, xmax, max_steps):
        K, d = acc.shape[0], up.shape[0]
        f0, (gp0, gm0) = value_and_grad(up, um, A, depth)
        zero_i = jnp.zeros((), jnp.int64)
        state = dict(up=up, um=um, f=f0, gp=gp0, gm=gm0, k=zero_i, t=jnp.zeros(()),
                     level=zero_i, since=zero_i, status=zero_i,
                     done=jnp.zeros(K, bool), rec_w=jnp.zeros((K, d)), rec_f=jnp.zeros(K),
                     rec_k=jnp.zeros(K, jnp.int64), rec_t=jnp.zeros(K),
                     s=jnp.zeros(A.shape[0]), rec_s=jnp.zeros((K, A.shape[0])),
                     ulps=jnp.zeros(()), bound=jnp.zeros(()), f_new=f0, f_mid=f0)

        def body(s):
            s = dict(s)
            f = s["f"]
            # record the first iterate at which -log L reaches each accuracy
            reached = (-f >= acc) & ~s["done"]
            w = _beta_stable(s["up"], s["um"], depth)
            s["rec_w"] = jnp.where(reached[:, None], w[None, :], s["rec_w"])
            s["rec_f"] = jnp.where(reached, f, s["rec_f"])
            s["rec_k"] = jnp.where(reached, s["k"], s["rec_k"])
            s["rec_t"] = jnp.where(reached, s["t"], s["rec_t"])
            s["rec_s"] = jnp.where(reached[:, None], s["s"][None, :], s["rec_s"])
            s["done"] = s["done"] | reached
            # step budget: max_steps between consecutive checkpoints of -log L
            # (one checkpoint per iterate: a step past several is caught up on the next ones)
            passed = -f >= levels[jnp.minimum(s["level"], levels.shape[0] - 1)]
            level = jnp.where(passed, s["level"] + 1, s["level"])
            since = jnp.where(passed, 0, s["since"])
            bound = _curvature_bound(s["up"], s["um"], xmax, depth)
            eta = step / bound
            # float64 resolution of the step, in units in the last place of u: at the start
            # the move itself; later the move the step allows at the largest gradient the
            # data give (|d log L / d w_i| <= max ||x_n||), since near a saddle point the
            # gradient, and with it the move, is small without any loss of resolution
            move = jnp.maximum(jnp.max(jnp.abs(eta * s["gp"]) / _ulps(s["up"])),
                               jnp.max(jnp.abs(eta * s["gm"]) / _ulps(s["um"])))
            reach = eta * depth * xmax * jnp.maximum(
                jnp.max(jnp.abs(s["up"]) ** (depth - 1) / _ulps(s["up"])),
                jnp.max(jnp.abs(s["um"]) ** (depth - 1) / _ulps(s["um"])))
            move = jnp.where(s["k"] == 0, move, reach)
            up_new, um_new = s["up"] - eta * s["gp"], s["um"] - eta * s["gm"]
            f_new, (gp_new, gm_new) = value_and_grad(up_new, um_new, A, depth)
            finite = jnp.isfinite(f_new) & jnp.all(jnp.isfinite(up_new)) \
                & jnp.all(jnp.isfinite(um_new))
            # log L must decrease (the step is below 2 / curvature); allow rounding of log L
            ascent = f_new > f + 64 * jnp.finfo(jnp.float64).eps * jnp.maximum(1.0, jnp.abs(f))
            status = jnp.select(
                [jnp.all(s["done"]), since >= max_steps, ~jnp.isfinite(bound),
                 ~(move >= _MIN_ULPS_PER_STEP), ~finite, ascent],
                [_DONE, _PLATEAU, _OVERFLOW, _RESOLUTION, _NONFINITE, _ASCENT], _RUNNING)
            take = status == _RUNNING
            # log L halfway through the budget of the current checkpoint (rate for messages)
            s["f_mid"] = jnp.where(since == max_steps // 2, f, s["f_mid"])
            s.update(status=status, level=level, since=jnp.where(take, since + 1, since),
                     ulps=move, bound=bound, f_new=f_new)
            for key, new in (("up", up_new), ("um", um_new), ("f", f_new), ("gp", gp_new),
                             ("gm", gm_new)):
                s[key] = jnp.where(take, new, s[key])
            s["k"] = jnp.where(take, s["k"] + 1, s["k"])
            s["t"] = jnp.where(take, s["t"] + eta, s["t"])
            # the integral of the softmax loss weights p_n = exp(-<a_n, w>) / sum_m exp(...)
            # over the normalized-flow time, along the steps taken (left Riemann sum)
            p = jax.nn.softmax(-(A @ w))
            s["s"] = jnp.where(take, s["s"] + eta * p, s["s"])
            return s

        return jax.lax.while_loop(lambda s: s["status"] == _RUNNING, body, state)

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None, None, None, None, None)))


class ExponentialRun(NamedTuple):
    """Exponential-loss training stopped at given training accuracies.

    Attributes:
        accuracies: ``(K,)`` the requested training accuracies :math:`-\\log\\epsilon`.
        w: ``(B, K, d)`` predictor :math:`w_+^D - w_-^D` when :math:`L` first reaches
            :math:`\\epsilon_k` (``(K, d)`` for a scalar ``alpha``).
        w_hat: same shape: the margin-normalized predictor :math:`w / \\gamma` where the
            margin :math:`\\gamma > 0`, NaN where :math:`\\gamma \\le 0` (possible at an
            accuracy :math:`-\\log\\epsilon \\le \\log N`: :math:`L \\le \\epsilon` forces
            every margin positive only when :math:`N\\epsilon < 1`).
        margin: ``(B, K)`` margin :math:`\\gamma = \\min_n y_n\\langle x_n, w\\rangle`.
        log_loss: ``(B, K)`` :math:`\\log L` reached (:math:`\\le \\log\\epsilon_k`).
        steps: ``(B, K)`` normalized-GD steps taken. times: ``(B, K)`` normalized-flow time
            :math:`\\sum_k \\eta_k` (the time of :math:`\\dot u = -\\nabla\\log L`).
        s: ``(B, K, N)`` the integral of the loss weights over that time,
            :math:`s_n = \\sum_{j<k}\\eta_j p_{j,n}` with
            :math:`p_j = \\operatorname{softmax}(-y_n\\langle x_n, w_j\\rangle)` (the
            discrete :math:`\\int_0^t p`; the gradient flow has :math:`u_\\pm =
            \\alpha\\exp(\\pm 2A^\\top s)` for depth 2 and :math:`z = D(D-2)\\alpha^{D-2}A^\\top s`
            for depth :math:`D\\ge3`, so it gives the multipliers of the margin problem).
    """

    accuracies: np.ndarray
    w: np.ndarray
    w_hat: np.ndarray
    margin: np.ndarray
    log_loss: np.ndarray
    steps: np.ndarray
    times: np.ndarray
    s: np.ndarray


def _check_separable(X, y):
    """Refuse data that are not linearly separable through the origin before any training:
    a feasibility linear program (find w with y_n <x_n, w> >= 1) solved by HiGHS on the rows
    y_n x_n with rows and columns scaled to max 1 by powers of two (which leaves separability
    unchanged: rows (1, 1e-12) and (-1, 1e-12), margin 1e-12, become (1, 1) and (-1, 1)); a
    claim of infeasibility is checked by :func:`lib.convex._unseparable`, which tells data
    that are not separable from a margin too small to resolve. Without this, normalized GD on
    non-separable data runs every step of every level before failing (the loss is bounded
    below by a positive value)."""
    from scipy.optimize import linprog

    from .convex import _MARGIN_RESOLUTION, _equilibrate, _hull_distance, _unseparable

    A = np.asarray(y)[:, None] * np.asarray(X)
    res = linprog(np.zeros(A.shape[1]), A_ub=-_equilibrate(A), b_ub=-np.ones(A.shape[0]),
                  bounds=(None, None), method="highs")
    if res.status != 0:
        err = _unseparable(A, "exponential_loss_path")
        if isinstance(err, ValueError):
            raise ValueError(f"{err}: the exponential loss has a positive infimum (or one "
                             f"reached only at a scale of w beyond float64), so the accuracy "
                             f"levels -log L cannot be reached") from None
        raise err
    # the path itself is not invariant under column scaling: its progress is set by the l2
    # margin of the rows as given (rows (1, 1e-12) and (-1, 1e-12): 1e-12, far too slow to
    # follow; the step-resolution check would blame alpha)
    scale = float(np.max(np.linalg.norm(A / _validate.max_abs(A), axis=1))) * _validate.max_abs(A)
    v, _ = _hull_distance(A / scale)
    if v <= _MARGIN_RESOLUTION:
        raise ValueError(
            f"X: the data (X, y) are separable only with a margin below the resolvable relative "
            f"size {_MARGIN_RESOLUTION:.0e}: a convex combination of the rows y_n x_n / max "
            f"||x_n|| has norm {v:.1e}, an upper bound on their l2 margin, and normalized GD "
            f"would need of order 1 / margin^2 steps; rescale the columns of X")


def _max_accuracy(shape, depth, step):
    """The largest -log L that normalized GD can reach while its steps stay resolved: the
    check ``reach >= 1024`` (see :func:`_exponential_loop`; reach = eta D max||x_n|| max_i
    |u_i|^(D-1) / ulp(u_i), eta = step / M, M >= D^2 |u|_max^(2D-2) max||x_n||^2, ulp(u) >=
    |u| eps / 2) keeps |u|_max^D <= 2 step / (1024 eps D max||x_n||); then |w_i| <= 2
    |u|_max^D and -log L <= log N + max||x_n|| ||w||_2 <= log N + 4 sqrt(d) step /
    (1024 eps D), taken four times larger for the one step between a check and the iterate
    it admits."""
    N, d = shape
    eps = float(np.finfo(np.float64).eps)
    return float(np.log(N) + 16.0 * np.sqrt(d) * step / (_MIN_ULPS_PER_STEP * eps * depth))


def exponential_loss_path(X, y, alpha, depth=2, accuracies=(1.0, 10.0), *, step=0.25,
                          max_ratio=1.3, max_steps=2_000_000):
    r"""Train the depth-D diagonal network on the exponential loss with normalized gradient
    descent until :math:`L \le \epsilon` for each :math:`-\log\epsilon` in ``accuracies``.

    The model is :math:`w = u_+^D - u_-^D` with loss
    :math:`L(u) = \frac1N\sum_n \exp(-y_n\langle x_n, w\rangle)` (Moroshko et al. 2020, Sec. 2),
    started at :math:`u_\pm = \alpha\mathbf 1`. Normalized GD (Moroshko et al. 2020, Sec. 5;
    Nacson et al. 2019) steps along :math:`\nabla L / L = \nabla\log L`:

    .. math:: u_{k+1} = u_k - \eta_k \nabla\log L(u_k), \qquad
              \eta_k = \mathtt{step} / M(u_k),

    a discretization of the flow :math:`\dot u = -\nabla\log L(u)` (:math:`\log L` is
    computed as a log-sum-exp, so :math:`L = 10^{-300}` and far below is reached without
    underflow). :math:`M` bounds the curvature of :math:`\log L` at the iterate,

    .. math:: M(u) = D^2 \max_i\big(u_{+,i}^{2D-2} + u_{-,i}^{2D-2}\big)\max_n\|x_n\|^2
              + D(D-1)\,\|u\|_\infty^{D-2}\max_n\|x_n\|
              \;\ge\; \|\nabla^2\log L(u)\|_2,

    and is recomputed at every iterate (the scale of :math:`u` grows by orders of magnitude
    from a small :math:`\alpha` at :math:`D\ge3`), so the step stays below :math:`2/M` and
    :math:`\log L` decreases at every step (checked). The time :math:`t_k=\sum_{j<k}\eta_j`
    is the time of the flow; its error, like that of :math:`w`, is proportional to ``step``
    (0.25 gives a few percent; halve ``step`` to halve it). All scales run in one compiled
    ``jax.lax.while_loop`` batch, each run stopping on its own.

    Small :math:`\alpha` with :math:`D\ge3` starts at a saddle point of :math:`\log L`
    (:math:`u = 0`): the flow can stay on a plateau of the loss for a long time (on a
    Gaussian 5x8 instance, flow times up to 2e11 at :math:`\alpha = 10^{-6}`, :math:`D = 4`),
    which normalized GD at a step bounded by the curvature cannot cross in a reasonable
    number of steps; such runs stop with a :class:`RuntimeError` (below), never with a
    wrong answer.

    Args:
        X: ``(N, d)`` real inputs; y: ``(N,)`` labels in {-1, +1}; the data must be linearly
            separable through the origin.
        alpha: float > 0 or ``(B,)`` array of scales (normal float64). depth: int D >= 2.
        accuracies: ``(K,)`` increasing training accuracies :math:`-\log\epsilon > 0`.
        step: step in units of :math:`1/M(u_k)` (0 < step <= 0.5).
        max_ratio: the step budget is counted between checkpoints of :math:`-\log L` in
            geometric progression of ratio at most ``max_ratio`` (> 1) up to each accuracy;
            at most 100 000 checkpoints.
        max_steps: steps allowed between two consecutive checkpoints (int >= 1).

    Returns:
        An :class:`ExponentialRun` (fields of leading shape ``(B, K)``, or ``(K,)`` for a
        scalar ``alpha``) holding the first iterate at which :math:`\log L \le \log\epsilon_k`;
        its ``w_hat`` is NaN where the margin is :math:`\le 0` (possible at accuracies
        :math:`\le \log N`), never a division by a non-positive margin.

    Raises:
        ValueError: ``X`` not a finite real 2-D array with at least one row and column, or
            all zero or with only subnormal entries (``max |X|`` below 2.2e-308); ``y`` not in {-1,
            +1}^N; ``alpha`` not finite and > 0 or subnormal; ``depth``
            not an integer >= 2; ``accuracies`` not a non-empty 1-D array of finite real
            numbers (bools, strings, None and complex are refused), increasing, > 0 and
            normal (not subnormal), or above the most that resolved steps can reach,
            :math:`\log N + 16\sqrt d\,\mathtt{step} / (1024\,\epsilon D)` (about 1e13 for
            small ``d``; see ``_max_accuracy``); ``step`` not in (0, 0.5] or subnormal;
            ``max_ratio`` not > 1 or so close to 1 that the accuracies need more than 100 000
            checkpoints; ``max_steps`` not an integer >= 1; data ``(X, y)`` that are not
            linearly separable through the origin (checked first, by a feasibility linear
            program on rows and columns scaled to max 1, a claim of infeasibility checked by
            its Farkas alternative) or whose l2 margin relative to max ||x_n|| is at most
            1e-6 (message naming ``X``; e.g. rows (1, 1e-12) and (-1, 1e-12), margin 1e-12,
            would need of order 1e24 steps); a curvature bound :math:`M` that overflows
            (``X`` or ``alpha`` too large); a step that moves :math:`u` by fewer than 1024
            units in the last place (rounding would distort the path by more than about
            1e-4, and below half a unit :math:`u` never moves), checked at the start and,
            later, for the move at the largest gradient the data allow (near a saddle
            point the gradient is small without any loss of resolution). The message
            names the argument at fault:
            ``alpha`` (or the scale of ``X``) when this happens at the start even at
            ``step = 0.5``, roughly when ``depth * alpha**depth * max ||x_n|| > 1e11``;
            ``step`` when a larger step would be resolved; ``accuracies`` when :math:`u`
            has grown that large during training.
        RuntimeError: a checkpoint of :math:`-\log L` not reached within ``max_steps``
            steps: a plateau of the loss near a saddle point, or steady but slow progress
            towards a large accuracy (the message says which, from the rise of
            :math:`-\log L` over the last half of the steps, and gives the loss reached, the
            steps and flow time used, and what to do); :math:`\log L`
            non-finite or increasing at a step (not expected: the step is below
            :math:`2/M`); a returned :math:`w` whose recomputed :math:`\log L` misses its
            accuracy.

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 2.0], [2.0, 0.5]]); y = np.array([1.0, 1.0])
        >>> run = exponential_loss_path(X, y, 1.0, accuracies=[700.0, 2000.0])
        >>> bool(run.log_loss[-1] <= -2000.0)   # L < 1e-868
        True
    """
    depth = _check_depth(depth)
    X = _validate.nonempty("X", _validate.as_array("X", X, ndim=2))
    X = _validate.nonzero_matrix("X", X)
    y = _validate.labels("y", y, X.shape[0])
    alphas = _check_alpha(alpha)
    scalar = alphas.ndim == 0
    alphas = np.atleast_1d(alphas)
    # dtype first (strings, None, complex and bools are refused, not coerced), then values
    acc = np.asarray(_validate.as_array("accuracies", accuracies, ndim=1), dtype=np.float64)
    if acc.ndim != 1 or acc.size == 0 or not np.all(np.isfinite(acc)) or np.any(acc <= 0) \
            or np.any(np.diff(acc) <= 0):
        raise ValueError("accuracies must be a non-empty increasing 1-D array of numbers > 0")
    if acc[0] < _validate.TINY:
        raise ValueError(f"accuracies has a subnormal value {acc[0]!r} (below "
                         f"{_validate.TINY:.3e}): XLA flushes it to zero; pass normal numbers")
    step = _validate.positive("step", step, normal=True)
    if step > 0.5:
        raise ValueError(f"step must be in (0, 0.5], got {step}")
    top = _max_accuracy(X.shape, depth, step)
    if acc[-1] > top:
        # beyond it the resolution check stops every run first, after minutes of steps
        raise ValueError(
            f"accuracies must be at most {top:.3e} for X of shape {tuple(X.shape)}, "
            f"depth={depth}, step={step} (got {acc[-1]:.3e}): a step resolved to 1024 units "
            f"in the last place keeps |u|^depth below 2 step / (1024 eps depth max ||x_n||), "
            f"so -log L = log N + max_n y_n <x_n, w> cannot exceed that bound")
    max_ratio = _validate.positive("max_ratio", max_ratio)
    if max_ratio <= 1:
        raise ValueError(f"max_ratio must be > 1, got {max_ratio}")
    max_steps = _validate.integer("max_steps", max_steps, minimum=1)
    # checkpoints of -log L: from below -log L(0) = 0 to each accuracy, ratio <= max_ratio;
    # counted before they are built (max_ratio = 1 + 1e-12 would ask for 1e13 of them)
    lo = min(acc[0], 1.0) / max_ratio
    log_ratio = np.log1p(max_ratio - 1.0)
    bounds = np.concatenate([[lo], acc])
    counts = np.maximum(np.ceil(np.log(bounds[1:] / bounds[:-1]) / log_ratio), 1.0)
    if not np.sum(counts) <= _MAX_LEVELS:
        raise ValueError(
            f"max_ratio={max_ratio!r} is too close to 1: the accuracies up to {acc[-1]:.4g} "
            f"would need {np.sum(counts):.3g} checkpoints of the loss (at most {_MAX_LEVELS}); "
            "pass a larger max_ratio (and a larger max_steps if steps run out)")
    levels = np.concatenate([np.geomspace(a, b, int(n) + 1)[1:]
                             for a, b, n in zip(bounds[:-1], bounds[1:], counts, strict=True)])
    levels[np.cumsum(counts.astype(int)) - 1] = acc   # the accuracies themselves, exactly
    _check_separable(X, y)
    A = np.asarray(y)[:, None] * np.asarray(X, dtype=np.float64)
    # squares of entries above 1e154 overflow, below 1e-154 are flushed: row-scaled norms
    nb, eb = _validate.row_norms_pow2(A)
    with np.errstate(over="ignore"):
        xmax = float(np.max(np.ldexp(nb, eb)))
    d = X.shape[1]
    u0 = jnp.asarray(np.repeat(alphas[:, None], d, 1))
    s = _exponential_loop(depth)(u0, u0, jnp.asarray(A), jnp.asarray(acc), jnp.asarray(levels),
                                 jnp.float64(step), jnp.float64(xmax), jnp.int64(max_steps))
    s = {key: np.asarray(v) for key, v in s.items()}
    status = s["status"]
    settings = _PathSettings(depth, step, xmax, acc, levels, max_steps)
    for b in np.flatnonzero(status != _DONE):
        _raise_exponential_failure({key: v[b] for key, v in s.items()}, float(alphas[b]),
                                   settings)
    w = s["rec_w"]
    margin = np.min(np.einsum("nd,bkd->bkn", A, w), axis=-1)
    # checked after the fact: each returned w reaches its accuracy (log L recomputed from w)
    from scipy.special import logsumexp
    log_loss = logsumexp(-np.einsum("nd,bkd->bkn", A, w), axis=-1) - np.log(A.shape[0])
    slack = 1e-12 * np.maximum(1.0, acc)
    if not np.all(log_loss <= -acc + slack):
        b, k = np.argwhere(~(log_loss <= -acc + slack))[0]
        raise RuntimeError(
            f"exponential_loss_path: the returned w for alpha={alphas[b]!r}, accuracy "
            f"{acc[k]:.6g} has log L = {log_loss[b, k]:.6g} recomputed from w (the loop "
            f"recorded {s['rec_f'][b, k]:.6g}): rounding of w misses the accuracy")
    # L <= eps makes every margin positive only when N eps < 1 (accuracy > log N): at a lower
    # accuracy the margin can be <= 0 and w / margin is no normalized predictor (division by
    # 0, or a sign flip), so w_hat is NaN there, never a wrong finite vector
    with np.errstate(divide="ignore", invalid="ignore"):
        w_hat = np.where((margin > 0)[..., None], w / np.where(margin > 0, margin, 1.0)[..., None],
                         np.nan)
    res = ExponentialRun(acc, w, w_hat, margin, s["rec_f"], s["rec_k"], s["rec_t"], s["rec_s"])
    if scalar:
        res = ExponentialRun(acc, *(np.asarray(f)[0] for f in res[1:]))
    return res


class _PathSettings(NamedTuple):
    """What exponential_loss_path was asked for, shared by its runs (for error messages)."""
    depth: int
    step: float
    xmax: float
    acc: np.ndarray
    levels: np.ndarray
    max_steps: int


def _raise_exponential_failure(run, alpha, settings):
    """The error of one run of exponential_loss_path (``run``: its final loop state, one
    value per key; ``alpha``: its scale), naming the argument at fault."""
    depth, step, xmax, acc, levels, max_steps = settings
    status = int(run["status"])
    k, f, t = int(run["k"]), float(run["f"]), float(run["t"])
    where = (f"alpha={alpha!r}, depth={depth}, max ||x_n|| = {xmax:.3e}: after {k} steps "
             f"(flow time {t:.4g}), log L = {f:.6g}")
    if status == _OVERFLOW:
        raise ValueError(
            f"the curvature bound of log L overflows float64 ({where}): rescale X or alpha")
    if status == _RESOLUTION:
        ulps = float(run["ulps"])
        need = f"at least {_MIN_ULPS_PER_STEP} are needed for a path accurate to about 1e-4"
        if ulps * 0.5 / step >= _MIN_ULPS_PER_STEP:
            raise ValueError(
                f"step={step!r} is too small ({where}): a normalized-GD step moves u by "
                f"{ulps:.3g} units of float64 rounding ({need}); pass step >= "
                f"{step * _MIN_ULPS_PER_STEP / ulps:.3g} (at most 0.5)")
        if k == 0:
            raise ValueError(
                f"alpha={alpha!r} is too large for the scale of X (max ||x_n|| = {xmax:.3e}, "
                f"depth={depth}): a normalized-GD step moves u by {ulps:.3g} units of float64 "
                f"rounding ({need}); rescale X or alpha so that "
                "depth * alpha**depth * max ||x_n|| stays below about 1e11")
        raise ValueError(
            f"accuracies up to {acc[-1]:.6g} are beyond float64 resolution ({where}): u has "
            f"grown so large that a normalized-GD step moves it by at most {ulps:.3g} units "
            f"of float64 rounding at the largest gradient ({need}); ask for accuracies below "
            f"{-f:.4g}" + (" or pass a larger step" if step < 0.5 else ""))
    if status == _PLATEAU:
        nxt = float(levels[np.searchsorted(levels, -f, side="right")])
        target = float(acc[np.searchsorted(acc, nxt)])
        half = max_steps - max_steps // 2
        rise = float(run["f_mid"]) - f
        more = (nxt + f) / rise * half if rise > 0 else np.inf
        head = (f"exponential_loss_path: -log L did not reach the checkpoint {nxt:.4g} (on the "
                f"way to accuracy {target:.4g}) within max_steps={max_steps} steps ({where}); "
                f"over the last {half} steps it rose by {rise:.3g}. ")
        if more > 10 * max_steps:
            raise RuntimeError(
                head + "The loss is on a plateau: the gradient flow is near a saddle point of "
                "log L (small alpha with depth >= 3 starts at one) and moves slowly there, "
                "while the step stays bounded by the curvature. Pass a larger max_steps (the "
                "cost grows with the plateau's flow time), a larger alpha, or integrate the "
                "flow with an ODE solver")
        raise RuntimeError(
            head + f"The loss decreases steadily but slowly (at that rate about {more:.3g} "
            "more steps; -log L grows about linearly with the number of steps once the data "
            "are separated): pass a larger max_steps or smaller accuracies")
    if status == _ASCENT:
        raise RuntimeError(
            f"exponential_loss_path: log L increased from {f:.17g} to "
            f"{float(run['f_new']):.17g} at a step of step / M = "
            f"{step / float(run['bound']):.3g} ({where}): the curvature bound M = "
            f"{float(run['bound']):.3g} is not a bound here (a bug; please report)")
    raise RuntimeError(
        f"exponential_loss_path: log L or u became non-finite at a step ({where}; "
        f"curvature bound {float(run['bound']):.3g}, next log L {float(run['f_new'])!r})")
