r"""Margins of classifiers and the max-margin references of the F1/F2 chapter.

Gradient descent on an unregularized exponential (or logistic) loss over separable data
drives the parameters to infinity; what converges is the *direction* of the predictor, and
its limit is a max-margin classifier whose norm depends on what is trained (Chizat 2020,
blog Secs. 2-5, and the main theorem of Chizat & Bach 2020):

* a linear model, or the output layer of a network with frozen hidden weights, converges to
  the :math:`\ell_2` (kernel, :math:`\mathcal F_2`) max-margin classifier
  (:func:`kernel_max_margin`; :func:`lib.convex.max_margin` in feature space);
* the 2-homogeneous linear model :math:`a = r\odot r` converges to the max-margin classifier
  over the simplex (:func:`simplex_max_margin`);
* a two-layer ReLU network with both layers trained converges to the
  :math:`\mathcal F_1` (variation-norm) max-margin classifier; :func:`dictionary_f1_max_margin`
  solves that problem restricted to a finite dictionary of neuron directions, and
  :func:`f1_normalized_margin` measures a network against it.

Margins are read through the *smoothed margin* :func:`smoothed_margin`, and neurons are drawn
with the radius compressed by ``tanh`` (:func:`compress_radius`, :func:`neuron_positions`)
so that the unit circle stands for the directions at infinity.
"""

from __future__ import annotations

from typing import NamedTuple

import cvxpy as cp
import jax
import jax.numpy as jnp
import numpy as np

from . import _validate
from .convex import _TOL, _margin_solve, max_margin

__all__ = [
    "KernelMaxMargin",
    "compress_radius",
    "dictionary_f1_max_margin",
    "f1_normalized_margin",
    "f1_path_norm",
    "kernel_max_margin",
    "neuron_positions",
    "simplex_max_margin",
    "smoothed_margin",
]


def smoothed_margin(margins, beta: float = 1.0):
    r"""Smoothed margin :math:`F_\beta = -\frac1\beta \log\big(\frac1n\sum_i e^{-\beta z_i}\big)`.

    With :math:`z_i = y_i f(x_i)` the margins of a classifier on ``n`` points, this is minus
    the log of the exponential loss at scale :math:`\beta` (Chizat 2020, blog eq. (5)),
    and it is sandwiched by the hard margin:

    .. math:: \min_i z_i \le F_\beta \le \min_i z_i + \frac{\log n}{\beta}.

    Computed in the shifted form :math:`F_\beta = m - \frac1\beta\,\mathrm{log1p}\big(
    \frac1n\sum_i \mathrm{expm1}(-\beta(z_i - m))\big)` with :math:`m = \min_i z_i`, so it
    neither overflows for large ``beta`` or margins nor loses its digits for tiny ``beta``
    (where it tends to the mean margin).

    Args:
        margins: ``(..., n)`` float array of margins :math:`z_i` (the last axis indexes points).
        beta: scale :math:`\beta > 0`.

    Returns:
        ``(...)`` float64 array.

    Raises:
        ValueError: ``beta`` not a finite real number > 0 (bools, strings and complex are
            refused); ``margins`` not a finite real array with a non-empty last axis. The
            form is chosen row by row, so in a batch a row whose :math:`\beta(z_i - m)` is
            below 1e-30 keeps its own (mean-margin) value next to rows of huge spread;
            subnormal margins are computed in scaled form in numpy (XLA flushes them).

    Example:
        >>> float(smoothed_margin(jnp.array([1.0, 1.0]), beta=3.0))
        1.0
    """
    z = _validate.as_array("margins", margins)
    if z.ndim < 1 or z.shape[-1] < 1:
        raise ValueError(f"margins must have a last axis of points, got shape {z.shape}")
    beta = _validate.positive("beta", beta)
    # shifted by the hard margin m = min_i z_i: F = m - log1p(mean(expm1(-beta (z - m)))) / beta,
    # exact for tiny beta (no cancellation of log n against the logsumexp; beta = 1e-20 gives
    # the mean margin) and for huge beta or margins (expm1 -> -1, no overflow)
    zn = np.asarray(z)
    with np.errstate(over="ignore", invalid="ignore"):
        dn = zn - zn.min(axis=-1, keepdims=True)
    if not np.all(np.isfinite(dn)):
        # margins spanning more than float64's range (z - m overflows): the same formulas on
        # z / s with s a power of two (exact), multiplied back (W2 of issue 21)
        return jnp.asarray(_smoothed_margin_scaled(zn, beta))
    if np.any((zn != 0) & (np.abs(zn) < _validate.TINY)):
        # subnormal margins (XLA would flush them to 0): the scaled form, in numpy
        return jnp.asarray(_smoothed_margin_scaled(zn, beta))
    with np.errstate(under="ignore", over="ignore"):
        bd_rows = beta * dn.max(axis=-1)
        bd = beta * float(dn.max()) if dn.size else 0.0
    small_rows = bd_rows < 1e-30
    if zn.ndim > 1 and np.any(small_rows) and not np.all(small_rows):
        # a batch whose rows need different forms (the expansion where beta (z - m) would be
        # flushed to zero by XLA, the shifted formula elsewhere): each group on its own
        out = np.empty(zn.shape[:-1])
        out[small_rows] = np.asarray(smoothed_margin(zn[small_rows], beta))
        out[~small_rows] = np.asarray(smoothed_margin(zn[~small_rows], beta))
        return jnp.asarray(out)
    if beta < np.finfo(np.float64).tiny and bd >= 1e-30:
        # a subnormal beta (XLA would flush it) with beta (z - m) not negligible: the exact
        # formula in numpy, scaled (the expansion below would be off by ~(beta (z - m))^2)
        return jnp.asarray(_smoothed_margin_scaled(zn, beta))
    if bd < 1e-30:
        # beta (or beta * (z - m)) so small that XLA on CPU would flush it to zero (NaN from
        # 0 / 0): second-order expansion F = mean(z) - beta var(z) / 2, exact to float64
        # precision here (the next term is below 1e-30 relative to max(z - m))
        mean_d = dn.mean(axis=-1)
        with np.errstate(under="ignore", over="ignore"):
            var = np.mean((dn - mean_d[..., None]) ** 2, axis=-1)
            out = zn.min(axis=-1) + mean_d - 0.5 * beta * var
        if not np.all(np.isfinite(out)):  # var overflowed (spread above 1e154): scaled form
            return jnp.asarray(_smoothed_margin_scaled(zn, beta))
        return jnp.asarray(out)
    m = jnp.min(z, axis=-1, keepdims=True)
    d = z - m
    mean = jnp.mean(jnp.expm1(-beta * d), axis=-1)
    return m[..., 0] - jnp.log1p(mean) / beta


def _smoothed_margin_scaled(zn, beta):
    """smoothed_margin on margins whose spread or variance overflows float64: computed on
    z / s with s = 2^k >= max |z| (an exact division) and multiplied back; the result lies
    between min z and mean z, so it is finite."""
    m = _validate.max_abs(zn)
    s = float(np.ldexp(1.0, int(np.frexp(m)[1]) - 1)) if m > 0 else 1.0  # |z / s| < 2
    zs = zn / s
    ms = zs.min(axis=-1)
    ds = zs - ms[..., None]
    with np.errstate(under="ignore", over="ignore"):
        bs = beta * s  # beta * (z - m) = (beta s) (z/s - m/s)
        if bs * float(ds.max()) < 1e-30:
            mean_d = ds.mean(axis=-1)
            var = np.mean((ds - mean_d[..., None]) ** 2, axis=-1)
            # F = s (m_s + mean_s) - (beta s) s var_s / 2
            return s * (ms + mean_d) - ((0.5 * bs) * var) * s
        if np.isfinite(bs):
            mean = np.mean(np.expm1(-bs * ds), axis=-1)
            return s * (ms - np.log1p(mean) / bs)
        # beta s overflows (e.g. margins near 1e308 with beta = 2; beta s * 0 would be NaN):
        # the unscaled formula, where an overflowing z_i - m or beta (z_i - m) is +inf and
        # expm1(-inf) = -1 is exact; log1p(mean) is in [-log n, 0], so / beta is safe
        m = zn.min(axis=-1, keepdims=True)
        mean = np.mean(np.expm1(-beta * (zn - m)), axis=-1)
        return m[..., 0] - np.log1p(mean) / beta


def f1_path_norm(params, output_scale: float = 1.0):
    r"""Path norm :math:`\frac{s}{m}\sum_j |a_j|\,\|b_j\|_2` of a two-layer ReLU network.

    For :math:`h(x) = \frac{s}{m}\sum_j a_j (b_j^\top x)_+` (:func:`lib.two_layer`), writing each
    unit as :math:`a_j\|b_j\|\,(\theta_j^\top x)_+` with :math:`\theta_j = b_j/\|b_j\|` shows that
    ``h`` has a representation in eq. (4) of Chizat (2020, blog) of total mass equal to this number,
    so it bounds the variation norm: :math:`\|h\|_{\mathcal F_1} \le` path norm (with equality
    for the best representation). By the AM-GM inequality it is at most
    :math:`\frac{s}{2m}\sum_j (a_j^2 + \|b_j\|^2)`, with equality for balanced units.

    Args:
        params: ``{"a": (m,), "B": (m, d)}``.
        output_scale: ``s > 0``.

    Returns:
        A float64 scalar array.

    Raises:
        ValueError: ``params`` not a dict of finite real arrays ``a`` ``(m,)`` and ``B``
            ``(m, d)`` with m, d >= 1; ``output_scale`` not a finite real number > 0; a path
            norm beyond
            float64's range (computed in scaled form, so large entries are fine otherwise).

    Example:
        >>> B = jnp.array([[3.0, 4.0], [1.0, 0.0]])
        >>> float(f1_path_norm({"a": jnp.array([2.0, -1.0]), "B": B}))
        5.5
    """
    a, B = _check_params(params)
    s = _validate.positive("output_scale", output_scale)
    # each term (s / m) |a_j| ||b_j|| as mantissa * 2^exponent (row norms scaled row by row),
    # summed aligned to the largest exponent: no intermediate overflow or underflow, whatever
    # the scales of a, of each row of B and of s (in numpy: XLA flushes subnormal numbers)
    ma, ea = np.frexp(np.abs(np.asarray(a)))
    nb, eb = _validate.row_norms_pow2(B)
    ms, es = np.frexp(s)
    out = _validate.pow2_total(ma * nb * ms / a.shape[0], ea + eb + es)
    if not np.isfinite(out):
        raise ValueError(f"the path norm overflows float64 (output_scale = {s:.3e}, "
                         f"max |params['a']| = {_validate.max_abs(a):.3e}, max |params['B']| = "
                         f"{_validate.max_abs(B):.3e})")
    return jnp.asarray(out)


def f1_normalized_margin(params, X, y, output_scale: float = 1.0):
    r"""Margin of a two-layer network divided by its path norm:
    :math:`\min_i y_i h(x_i) / \big(\frac{s}{m}\sum_j |a_j|\|b_j\|\big)`.

    Since the path norm bounds :math:`\|h\|_{\mathcal F_1}` (:func:`f1_path_norm`), this is a
    lower bound on the :math:`\mathcal F_1`-normalized margin of ``h``, hence on the
    :math:`\mathcal F_1` max-margin :math:`\max_{\|h\|_{\mathcal F_1}\le 1}\min_i y_i h(x_i)`
    that gradient flow on both layers approaches (Chizat & Bach 2020, main theorem). It is
    invariant to rescaling the parameters, so it can be followed along a diverging run.

    Args:
        params: ``{"a": (m,), "B": (m, d)}``.
        X: ``(n, d)`` inputs (with the bias coordinate, if any).
        y: ``(n,)`` labels in {-1, +1}.
        output_scale: ``s > 0``.

    Returns:
        A float64 scalar array (negative when a point is misclassified).

    Raises:
        ValueError: ``params`` not a dict of finite real arrays ``a`` ``(m,)`` and ``B``
            ``(m, d)`` with m, d >= 1; ``X`` not a finite real ``(n, d)`` array with n >= 1;
            ``y`` not in {-1, +1}^n;
            ``output_scale`` not a finite real number > 0; a network with path norm 0.
            Computed on rescaled parameters and on each row of ``X`` scaled separately, so
            entries near 1e+-300 are fine, also in rows of very different scales (a row at
            1e300 next to one at 1e-300).

    Example:
        >>> p = {"a": jnp.array([1.0]), "B": jnp.array([[1.0, 0.0]])}
        >>> float(f1_normalized_margin(p, jnp.array([[2.0, 1.0]]), jnp.array([1.0])))
        2.0
    """
    a, B = _check_params(params)
    X = _validate.nonempty("X", _validate.as_array("X", X, shape=(None, B.shape[1])))
    y = _validate.labels("y", y, X.shape[0])
    output_scale = _validate.positive("output_scale", output_scale)
    # h(x) = (s/m) sum_j c_j (theta_j . x)_+ with c_j = a_j ||b_j||, theta_j = b_j / ||b_j||,
    # and path norm (s/m) sum_j |c_j|: the ratio is invariant to rescaling c, so c is kept as
    # mantissa * 2^exponent (row norms scaled row by row) and aligned to its largest term, and
    # X is divided by max |X| (the margin is linear in X). In numpy: no overflow, no underflow
    # of squared entries, no subnormal numbers flushed by XLA.
    ma, ea = np.frexp(np.asarray(a))
    nb, eb = _validate.row_norms_pow2(B)
    mc, ec = ma * nb, ea + eb
    nz = mc != 0
    if not np.any(nz):
        raise ValueError("params has path norm 0: the normalized margin is undefined")
    c = np.ldexp(mc, np.where(nz, ec - int(np.max(ec[nz])), 0))
    U = np.ldexp(np.asarray(B), -eb[:, None])
    theta = U / np.where(nb > 0, nb, 1.0)[:, None]
    # each row x_i is divided by the power of two 2^e_i of its largest entry (exact; the
    # margin is linear in x_i), and its margin is formed as ldexp(y_i h(x_i / 2^e_i) / ||c||_1,
    # e_i): rows of any scales, 1e300 next to 1e-300, keep their digits (one scale for all of
    # X flushed the small rows to 0)
    Xa = np.asarray(X)
    ex = np.frexp(np.max(np.abs(Xa), axis=1))[1]  # 0 for a zero row
    Xn = np.ldexp(Xa, -ex[:, None])
    with np.errstate(under="ignore", over="ignore"):
        h = np.maximum(Xn @ theta.T, 0.0) @ c
        out = float(np.min(np.ldexp(np.asarray(y) * h / np.sum(np.abs(c)), ex)))
    if not np.isfinite(out):
        sx = _validate.max_abs(X)
        raise ValueError(f"the normalized margin overflows float64 (max |X| = {sx:.3e})")
    return jnp.asarray(out)


class KernelMaxMargin(NamedTuple):
    """Solution of the hard-margin kernel SVM without intercept.

    Attributes:
        coef: ``(n,)`` coefficients ``c`` of ``h = sum_i c_i K(x_i, .)`` with
            ``y_i h(x_i) >= 1`` and minimal RKHS norm.
        norm: ``||h||_K = sqrt(c^T K c)``.
        margin: the max-margin ``1 / ||h||_K`` (the margin of ``h / ||h||_K``).
    """

    coef: jax.Array
    norm: float
    margin: float


_KERNEL_MARGIN_TOL = 1e-6
"""Relative tolerance of :func:`kernel_max_margin`'s check in the original coordinates of K."""


def kernel_max_margin(K, y) -> KernelMaxMargin:
    r"""Hard-margin kernel SVM: :math:`\min \|h\|_K` s.t. :math:`y_i h(x_i) \ge 1`.

    By the representer theorem :math:`h = \sum_i c_i K(x_i,\cdot)`, so the problem is the
    quadratic program :math:`\min_c c^\top K c` s.t. :math:`y \odot (Kc) \ge 1`, solved with
    cvxpy (Clarabel) after factoring :math:`K = LL^\top`. The maximal margin over the RKHS unit
    ball, :math:`\max_{\|h\|_K\le1}\min_i y_i h(x_i)`, is :math:`1/\|h\|_K`. With
    :math:`K = \Phi\Phi^\top` for features :math:`\Phi` this is the :math:`\ell_2` max-margin
    of :func:`lib.convex.max_margin` on :math:`\Phi`; with the random-feature or tangent
    kernel of a network it is the limit of training the output layer only (Chizat 2020,
    blog Sec. 3) or of the lazy regime (Sec. 6).

    Args:
        K: ``(n, n)`` symmetric positive semidefinite kernel matrix on the training points.
        y: ``(n,)`` labels in {-1, +1}.

    Returns:
        A :class:`KernelMaxMargin` ``(coef, norm, margin)``.

    Raises:
        ValueError: ``K`` not a finite real non-empty square matrix, zero, not symmetric or
            with a negative eigenvalue below ``-1e-8 * max|K|``; labels not in {-1, +1};
            data not separable in the RKHS; a norm outside float64's range. Eigenvalues
            below ``n eps max(eig K)`` (rounding level) are treated as 0. The solution is
            verified in the original coordinates of ``K``: a margin constraint
            :math:`y_i (Kc)_i \ge 1` violated, or :math:`c^\top K c` differing from the
            solver's squared norm, by more than ``1e-6`` relative (a near-singular ``K``
            whose margin float64 does not determine to that accuracy) raises a
            ``ValueError`` naming ``K`` with both residuals.
        RuntimeError: the solver stopped without reaching optimality, or its answer does
            not verify (margin constraints, KKT stationarity, duality gap; ill-conditioned
            K are solved in whitened form first, see :func:`lib.convex.max_margin`).

    Example:
        >>> K = jnp.array([[1.0, 0.0], [0.0, 4.0]])
        >>> round(kernel_max_margin(K, jnp.array([1.0, -1.0])).margin, 6)   # 1/sqrt(1 + 1/4)
        0.894427
    """
    K = _validate.as_array("K", K, ndim=2)
    n = K.shape[0]
    if K.shape != (n, n) or n < 1:
        raise ValueError(f"K must be a non-empty square matrix, got shape {K.shape}")
    y = _validate.labels("y", y, n)
    Kn = np.asarray(K)
    scale = float(np.abs(Kn).max())
    if scale == 0.0:
        raise ValueError("K must not be the zero matrix: no h in its RKHS separates y (every "
                         "h(x_i) is 0)")
    if not np.allclose(Kn, Kn.T, rtol=1e-10, atol=1e-12 * scale):
        raise ValueError("K must be symmetric")
    evals, evecs = np.linalg.eigh(Kn / scale)
    if evals.min() < -1e-8:
        raise ValueError(f"K must be positive semidefinite; smallest eigenvalue "
                         f"{evals.min() * scale:.3e}")
    # eigenvalues above rounding level (n eps max): smaller ones are indistinguishable from 0
    keep = evals > n * np.finfo(float).eps * max(evals.max(), 1e-300)
    L = evecs[:, keep] * np.sqrt(evals[keep])  # K / scale = L L^T
    # In feature space: h(x_i) = (L w)_i with ||h||_{K/scale} = |w|; solve min |w|^2 s.t.
    # y (L w) >= 1 (the l2 max-margin on the rows of L), then map back to c. The answer is
    # checked against its own constraints and KKT conditions; ill-conditioned K (small kept
    # eigenvalues) are solved in whitened form (lib.convex._margin_solve)
    yn = np.asarray(y)
    try:
        wv = _margin_solve(L, yn, 2, "kernel_max_margin")
    except ValueError as err:
        raise ValueError("the labels y are not separable in the RKHS of K (K is "
                         "rank-deficient and no h in its span has y_i h(x_i) > 0 for all "
                         "i)") from err
    # h = L w on the data = (K/scale) c with c = V diag(1/sqrt(lambda)) w; ||h||_{K/scale} = |w|.
    c_scaled = evecs[:, keep] @ (wv / np.sqrt(evals[keep]))
    # verified in the original coordinates of K (not only in the eigenbasis, where a near-
    # singular K hides its error): h = (K / scale) c must meet every margin constraint and
    # have ||h||^2 = c^T (K / scale) c = |w|^2, both to _KERNEL_MARGIN_TOL relative
    Ks = Kn / scale
    worst = 1.0 - float(np.min(yn * (Ks @ c_scaled)))
    q = float(c_scaled @ Ks @ c_scaled)
    mismatch = abs(q - float(wv @ wv)) / float(wv @ wv)
    if max(worst, mismatch) > _KERNEL_MARGIN_TOL:
        raise ValueError(
            f"K is too ill-conditioned for a verified max-margin solution (eigenvalues kept "
            f"down to {float(evals[keep].min() / evals.max()):.1e} of the largest): in K's own "
            f"coordinates the solution violates a margin constraint by {max(worst, 0.0):.2e} "
            f"(relative) and its norm^2 differs by {mismatch:.2e} from the solver's, above the "
            f"tolerance {_KERNEL_MARGIN_TOL:.0e}; the margin is not determined to that accuracy "
            "by K in float64 (regularize K or use features and lib.convex.max_margin)")
    with np.errstate(over="ignore", under="ignore"):
        c = c_scaled / scale  # h = K c
        norm = float(np.linalg.norm(wv) / np.sqrt(scale))  # ||h||_K^2 = c^T K c = |w|^2/scale
    if not (np.all(np.isfinite(c)) and np.isfinite(norm) and norm > 0):
        raise ValueError(f"the max-margin solution is outside float64's range for max |K| = "
                         f"{scale:.3e}: rescale K")
    return KernelMaxMargin(jnp.asarray(c), norm, 1.0 / norm)


def simplex_max_margin(X, y):
    r"""Max-margin over the simplex: :math:`\max_{a\in\Delta_d}\min_i y_i x_i^\top a`.

    The linear program :math:`\max \gamma` s.t. :math:`y_i x_i^\top a \ge \gamma`,
    :math:`a \ge 0`, :math:`\sum_k a_k = 1`, solved with cvxpy (Clarabel). It is the limit of
    the normalized predictor :math:`r\odot r/\|r\|^2` of the 2-homogeneous linear model
    trained by gradient flow on the exponential loss (Chizat 2020, blog Sec. 4). The
    value may be negative (no nonnegative separator); it is returned all the same.

    Args:
        X: ``(n, d)`` inputs.
        y: ``(n,)`` labels in {-1, +1}.

    Returns:
        ``(a, gamma)``: the ``(d,)`` maximizer on the simplex and the margin ``gamma``.

    Raises:
        ValueError: ``X`` not a finite real 2-D array with at least one row and column, or
            all zero; ``y`` not in {-1, +1}^n. (Solved on ``X / max|X|``, so entries of any
            magnitude are fine.)
        RuntimeError: the solver stopped without reaching optimality, or its answer does not
            verify to 1e-7 relative to ``max |X|`` (simplex feasibility, margin of ``a``,
            duality gap with the constraints' multipliers); the message gives the numbers.
            An interior-point answer whose residuals are not also below 1e-9 ``|gamma|`` (a
            margin near 0, e.g. 1e-8) is replaced by HiGHS's simplex vertex when that verifies
            better.

    Example:
        >>> X = jnp.array([[1.0, 0.0], [0.0, -1.0]])
        >>> a, gamma = simplex_max_margin(X, jnp.array([1.0, -1.0]))
        >>> [round(v, 6) for v in a.tolist()], round(gamma, 6)
        ([0.5, 0.5], 0.5)
    """
    X = _validate.nonempty("X", _validate.as_array("X", X, ndim=2))
    y = _validate.labels("y", y, X.shape[0])
    Z = np.asarray(y)[:, None] * np.asarray(X)
    # the margin is linear in X: solve on Z / max|Z| (the solver's tolerances are relative)
    # and multiply gamma back, so entries near 1e+-300 neither overflow nor fail the solver
    cz = _validate.max_abs(Z)
    if cz == 0:
        raise ValueError("X must not be identically zero")
    Z = Z / cz
    a = cp.Variable(Z.shape[1])
    gamma = cp.Variable()
    prob = cp.Problem(cp.Maximize(gamma), [Z @ a >= gamma, a >= 0, cp.sum(a) == 1])
    try:
        prob.solve(solver=cp.CLARABEL, **_TOL)
    except cp.error.SolverError as err:
        raise RuntimeError(f"simplex_max_margin: the solver failed ({err})") from err
    if prob.status != cp.OPTIMAL:
        raise RuntimeError(f"simplex_max_margin: solver status {prob.status!r}")
    # verify on the scaled problem (max |Z| = 1, so every tolerance below is relative to the
    # data's scale): a on the simplex, gamma its margin, and a zero duality gap with the
    # multipliers p of the margin constraints (p on the simplex; the dual value is
    # max_k (Z^T p)_k >= gamma for every feasible point)
    av, gv = np.asarray(a.value), float(gamma.value)
    p_dual = np.asarray(prob.constraints[0].dual_value)
    p_dual = np.clip(p_dual, 0.0, None) / max(float(np.clip(p_dual, 0.0, None).sum()), 1e-300)
    checks = {"simplex": max(float(-av.min()), abs(float(av.sum()) - 1.0)),
              "margin": abs(float(np.min(Z @ av)) - gv),
              "gap": float(np.max(Z.T @ p_dual)) - gv}
    # an interior-point answer is accurate to its tolerances in absolute terms (max |Z| = 1):
    # for a margin gamma near 0 (e.g. 1e-8) that is a large relative error. Accept it only
    # if its residuals are also small relative to |gamma|; otherwise take HiGHS's vertex
    # (simplex method: exact active set), whose gamma is min_i (Z a)_i recomputed from a
    worst = max(abs(v) for v in checks.values())
    if worst > 1e-9 * abs(gv):
        av_h, gv_h, checks_h = _simplex_vertex(Z)
        if av_h is not None and max(abs(v) for v in checks_h.values()) <= 1e-7 and (
                max(abs(v) for v in checks_h.values()) < worst or worst > 1e-7):
            av, gv, checks = av_h, gv_h, checks_h
    if max(abs(v) for v in checks.values()) > 1e-7:
        raise RuntimeError(f"simplex_max_margin: the solution does not verify (relative to "
                           f"max |y_i x_i| = {cz:.3e}): {checks}")
    return jnp.asarray(av), gv * cz


def _simplex_vertex(Z):
    """max gamma s.t. Z a >= gamma, a on the simplex, as a linear program solved by HiGHS;
    returns (a, gamma = min_i (Z a)_i, checks) or (None, None, None)."""
    from scipy.optimize import linprog

    n, d = Z.shape
    c = np.zeros(d + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.hstack([-Z, np.ones((n, 1))]), b_ub=np.zeros(n),
                  A_eq=np.concatenate([np.ones(d), [0.0]])[None, :], b_eq=[1.0],
                  bounds=[(0, None)] * d + [(None, None)], method="highs")
    if res.status != 0 or res.x is None or res.ineqlin is None:
        return None, None, None
    av = np.clip(res.x[:d], 0.0, None)
    av = av / av.sum()
    gv = float(np.min(Z @ av))
    p_dual = np.clip(-np.asarray(res.ineqlin.marginals), 0.0, None)
    p_dual = p_dual / max(float(p_dual.sum()), 1e-300)
    checks = {"simplex": max(float(-av.min()), abs(float(av.sum()) - 1.0)),
              "margin": 0.0, "gap": float(np.max(Z.T @ p_dual)) - gv}
    return av, gv, checks


def dictionary_f1_max_margin(X, y, directions):
    r""":math:`\mathcal F_1` max-margin restricted to a dictionary of neuron directions.

    With directions :math:`\theta_1,\dots,\theta_K` on the sphere, solves
    :math:`\max \min_i y_i \sum_k r_k(\theta_k^\top x_i)_+` s.t. :math:`\sum_k|r_k| \le 1`, an
    :math:`\ell_1` max-margin problem on the ReLU features (via :func:`lib.convex.max_margin`
    with ``p = 1``). Every feasible ``r`` defines a predictor of variation norm at most 1
    (Chizat 2020, blog eq. (4), with the uniform measure replaced by atoms), so the
    value is a lower bound on the :math:`\mathcal F_1` max-margin, and it converges to it as
    the dictionary becomes dense on the sphere.

    Args:
        X: ``(n, d)`` inputs (with the bias coordinate, if any).
        y: ``(n,)`` labels in {-1, +1}.
        directions: ``(K, d)`` unit vectors :math:`\theta_k` (rows are normalized here, in
            scaled form: rows of any non-zero norm, 1e-200 or 1e300, are fine).

    Returns:
        ``(r, gamma)``: the ``(K,)`` signed weights with :math:`\|r\|_1 = 1` and the margin.

    Raises:
        ValueError: malformed arguments, a zero direction, features that are all zero on
            ``X``, labels the dictionary's features cannot separate, or a margin outside
            float64's range. (Solved on ``X`` scaled by a power of two, so entries of any
            magnitude, subnormal ones included, are fine otherwise.)
        RuntimeError: the solver stopped without reaching optimality.

    Example:
        >>> X = jnp.array([[1.0, 1.0], [-1.0, 1.0]]); y = jnp.array([1.0, -1.0])
        >>> r, gamma = dictionary_f1_max_margin(X, y, jnp.array([[1.0, 0.0], [-1.0, 0.0]]))
        >>> [round(v, 6) for v in r.tolist()], round(gamma, 6)
        ([0.5, -0.5], 0.5)
    """
    X = _validate.nonempty("X", _validate.as_array("X", X, ndim=2))
    y = _validate.labels("y", y, X.shape[0])
    theta = _validate.as_array("directions", directions, shape=(None, X.shape[1]))
    # row norms in scaled form (row / max|row| first, in numpy): rows of norm 1e-200 or
    # 1e300 are fine; unit rows theta / |theta| are then what the features use
    tn = np.asarray(theta)
    rmax = np.max(np.abs(tn), axis=1, keepdims=True) if tn.size else np.zeros((0, 1))
    if theta.shape[0] < 1 or not np.all(rmax > 0):
        raise ValueError("directions must be a non-empty array of non-zero rows")
    unit_rows = tn / rmax
    unit_rows = unit_rows / np.linalg.norm(unit_rows, axis=1, keepdims=True)
    ordinary = _validate.safe_scale(rmax) and not np.any(
        (tn != 0) & (np.abs(tn) < _validate.TINY))
    if ordinary:  # as before, bit for bit
        theta = jnp.asarray(tn)
        norms = jnp.linalg.norm(theta, axis=1, keepdims=True)
        if not bool(jnp.all(jnp.isfinite(norms) & (norms > 0))):
            theta, norms = jnp.asarray(unit_rows), 1.0
    else:
        theta, norms = jnp.asarray(unit_rows), 1.0
    # the features are positively homogeneous in X: solve on X / s with s a power of two
    # (exact, so results within range are unchanged), in numpy (XLA on CPU flushes subnormal
    # inputs to zero), and multiply the margin back; r does not depend on s
    sx = _validate.pow2_scale(X)
    features = jax.nn.relu(jnp.asarray(_validate.np_div(X, sx)) @ (theta / norms).T)
    if not bool(jnp.any(features != 0)):
        raise ValueError("the dictionary's ReLU features (theta_k^T x_i)_+ are all zero on X: "
                         "no direction is active on any point, so y cannot be separated")
    try:
        w = max_margin(features, y, p=1)
    except ValueError as err:
        if "separable" not in str(err):
            raise
        raise ValueError("the dictionary's ReLU features (theta_k^T x_i)_+ cannot separate y "
                         "(the features, not necessarily the data X, are not linearly "
                         "separable): add directions active on every point") from None
    l1 = float(jnp.sum(jnp.abs(w)))
    with np.errstate(over="ignore", under="ignore"):
        gamma = float(np.float64(1.0 / l1) * np.float64(sx))
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"the margin is outside float64's range (max |X| = "
                         f"{_validate.max_abs(X):.3e}): rescale X")
    return w / l1, gamma


def compress_radius(points):
    r"""Map points of :math:`\mathbb R^d` into the unit ball by
    :math:`p \mapsto \tanh(\|p\|)\, p/\|p\|`.

    This is how Chizat (2020, blog Secs. 2-5) draws diverging trajectories: the
    direction is kept, the radius is compressed, and the unit sphere stands for the directions
    at infinity. The map is continuous, with 0 sent to 0.

    Args:
        points: ``(..., d)`` float array (the last axis holds coordinates).

    Returns:
        An array of the same shape with every row of norm at most 1: below 1 for
        :math:`\|p\| \lesssim 18` and equal to 1 to rounding beyond (``tanh`` of a radius
        above ~19.1 rounds to 1.0 in float64, so those points land on the unit sphere, the
        directions at infinity).

    Raises:
        ValueError: ``points`` not a finite real array (None, strings, complex, bool, NaN or
            inf) or 0-d. Norms are computed in scaled form, so entries near 1e300 are fine;
            rows with subnormal entries (below ~2.2e-308), or entries that become subnormal
            once divided by the row's largest (or in the image), are computed in numpy, since
            XLA on CPU would flush those entries to zero. An empty array is returned as is.

    Example:
        >>> [round(v, 6) for v in compress_radius(jnp.array([3.0, 4.0])).tolist()]
        [0.599946, 0.799927]
    """
    P = _validate.as_array("points", points)
    if P.ndim < 1:
        raise ValueError("points must have a last axis of coordinates")
    Pv = np.asarray(P)
    if Pv.size == 0:  # no point, or points of R^0 (each is its own image)
        return jnp.zeros(Pv.shape)
    s = np.max(np.abs(Pv), axis=-1, keepdims=True)
    # also entries that become subnormal after the row's scaling (|p_j| / max|row| or the
    # image below 2.2e-308: (-5.8e34, 1.5e-288) maps to (-1, 2.5e-323), was (-1, 0) in JAX)
    with np.errstate(under="ignore"):
        small = np.abs(Pv) < _validate.TINY * np.maximum(s, 1.0) * (np.sqrt(Pv.shape[-1]) + 1)
    subnormal = bool(np.any((Pv != 0) & small))
    if _validate.safe_scale(s) and not subnormal:  # the ordinary range: in JAX as always
        return _compress_jax(P)
    return jnp.asarray(_compress_np(Pv))


def _compress_jax(P):
    # scaled form: row / max|row| first, so norms of entries above 1e154 do not overflow
    s = jnp.max(jnp.abs(P), axis=-1, keepdims=True)
    Pn = P / jnp.where(s > 0, s, 1.0)
    rn = jnp.linalg.norm(Pn, axis=-1, keepdims=True)
    safe = jnp.where(rn > 0, rn, 1.0)
    return jnp.where(s > 0, jnp.tanh(s * rn) * Pn / safe, 0.0)


def _compress_np(P):
    """compress_radius on a concrete float64 array, scaled in numpy (XLA on CPU flushes
    subnormal numbers to zero, so tiny rows would vanish inside JAX)."""
    # scaled form: row / max|row| first, so norms of entries above 1e154 do not overflow
    s = np.max(np.abs(P), axis=-1, keepdims=True)
    Pn = P / np.where(s > 0, s, 1.0)
    rn = np.asarray(jnp.linalg.norm(jnp.asarray(Pn), axis=-1, keepdims=True))
    safe = np.where(rn > 0, rn, 1.0)
    with np.errstate(under="ignore"):
        r = s * rn
    out = np.asarray(jnp.tanh(jnp.asarray(r))) * Pn / safe
    # tanh(r) = r to float64 precision for r < 1e-8: the map is the identity there, and a
    # tiny (e.g. subnormal) r would be flushed to 0 by tanh inside XLA
    tiny = (r < 1e-8) & (s > 0)
    out = np.where(tiny, P, out)
    return np.where(s > 0, out, 0.0)


def neuron_positions(params, scale: float = 1.0):
    r"""Where Chizat's blog (2020) draws each neuron: :math:`|a_j| b_j`, radius compressed by tanh.

    A unit :math:`a_j(b_j^\top x)_+` is drawn at :math:`\mathrm{compress}(|a_j| b_j / c)`
    (:func:`compress_radius`), coloured by the sign of :math:`a_j`. Its direction is the
    neuron's direction :math:`\theta_j`, its uncompressed radius :math:`|a_j|\|b_j\|` its
    contribution to the path norm. The constant ``c`` (``scale``) sets which radius maps to
    :math:`\tanh(1)`.

    Args:
        params: ``{"a": (m,), "B": (m, d)}``.
        scale: ``c > 0``.

    Returns:
        ``(positions, signs)``: ``(m, d)`` points in the open unit ball and ``(m,)`` signs in
        {-1, 0, 1}.

    Raises:
        ValueError: ``params`` not a dict of finite real arrays ``a`` ``(m,)`` and ``B``
            ``(m, d)`` with m, d >= 1; ``scale`` not a finite real number > 0. Entries or
            ``scale`` or coordinates :math:`|a_j| b_{jk} / c` outside ``[1e-290, 1e290]``
            (e.g. subnormal) are computed in numpy,
            since XLA on CPU flushes subnormal numbers to zero.

    Example:
        >>> pos, sgn = neuron_positions({"a": jnp.array([-2.0]), "B": jnp.array([[0.0, 1.0]])})
        >>> [round(v, 6) for v in pos[0].tolist()], sgn.tolist()
        ([0.0, 0.964028], [-1.0])
    """
    a, B = _check_params(params)
    c = _validate.positive("scale", scale)
    # |a_j| b_j / c as (|a_j| / c) b_j, with b_j / max|b_j| first: no spurious overflow;
    # in numpy outside the ordinary range, since XLA on CPU flushes subnormal numbers (tiny
    # a_j, b_j or radii) to zero
    an = np.asarray(a)
    with np.errstate(over="ignore", under="ignore"):
        sb_np = np.max(np.abs(np.asarray(B)), axis=1)
        ordinary = (_validate.safe_scale(sb_np) and _validate.safe_scale(an / c)
                    and _validate.safe_scale(an) and _validate.safe_scale(c)
                    and _validate.safe_scale(np.abs(an) / c * sb_np)
                    # every coordinate |a_j| b_jk / c too: one tiny entry of b_j times a
                    # normal radius may be subnormal, and XLA would flush it to 0
                    and _validate.safe_scale(np.abs(an)[:, None] / c * np.asarray(B)))
    if ordinary:
        sbj = jnp.max(jnp.abs(B), axis=1, keepdims=True)
        sbj = jnp.where(sbj > 0, sbj, 1.0)
        radius = jnp.abs(a)[:, None] / c * sbj
        return compress_radius(jnp.where(jnp.isfinite(radius), radius, 1e300) * (B / sbj)), \
            jnp.asarray(np.sign(an))
    a, B = an, np.asarray(B)
    sb = np.max(np.abs(B), axis=1, keepdims=True)
    sb = np.where(sb > 0, sb, 1.0)
    with np.errstate(over="ignore", under="ignore"):
        radius = np.abs(a)[:, None] / c * sb  # may be inf only where the true radius is
    # signs in numpy: XLA flushes a subnormal a_j to 0 and would give it sign 0
    return jnp.asarray(_compress_np(np.where(np.isfinite(radius), radius, 1e300) * (B / sb))), \
        jnp.asarray(np.sign(a))


def _check_params(params):
    if not isinstance(params, dict) or set(params) != {"a", "B"}:
        raise ValueError("params must be a dict {'a': (m,), 'B': (m, d)}")
    a = _validate.as_array("params['a']", params["a"], ndim=1)
    B = _validate.as_array("params['B']", params["B"], shape=(a.shape[0], None))
    if a.shape[0] < 1 or B.shape[1] < 1:
        raise ValueError(f"params must have m >= 1 units and d >= 1 inputs, got params['B'] "
                         f"of shape {B.shape}")
    return a, B
