r"""Kernel regression and distances between kernels, for any kernel matrix.

Two questions recur whenever training is compared with a kernel method:

* *What does the kernel method predict?* Gradient descent from 0 on the square loss of a linear
  model :math:`f(x) = \langle w, \phi(x)\rangle` converges to the interpolant of minimal
  norm, :math:`f^\star(x) = K(x, X)\, K(X, X)^{-1} y`, the minimum-RKHS-norm interpolant of the
  kernel :math:`K(x, x') = \langle\phi(x), \phi(x')\rangle` (Chizat, Oyallon & Bach 2019;
  Woodworth et al. 2020, Sec. 3). With a ridge :math:`\lambda > 0` it is kernel ridge
  regression. :func:`kernel_regression` returns the coefficients :math:`c` with
  :math:`f^\star = K(\cdot, X)\, c`; :func:`rkhs_norm` its norm :math:`\sqrt{c^\top K c}`.
* *Has the kernel moved?* :func:`relative_kernel_change` measures
  :math:`\|K_1 - K_0\|_F / \|K_0\|_F` and :func:`kernel_distance` the scale-free
  :math:`1 - \langle K_0, K_1\rangle_F / (\|K_0\|_F \|K_1\|_F)` (Fort et al. 2020, Sec. 4).
  Both are near 0 in the lazy regime. In the rich regime the change is large; the distance,
  blind to changes of scale, can stay small (a kernel that grows without turning has
  distance 0), so only a large distance is informative.

Nothing here depends on where the kernel matrix comes from: an empirical tangent kernel
(:func:`lib.empirical_ntk`), the closed-form :func:`lib.relu_ntk`, or any Gram matrix.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = ["kernel_distance", "kernel_regression", "relative_kernel_change", "rkhs_norm"]


def _square(name, K):
    K = _validate.as_array(name, K, ndim=2)
    if K.shape[0] != K.shape[1] or K.shape[0] < 1:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {K.shape}")
    return K


def kernel_regression(K, y, *, ridge: float = 0.0, rcond: float = 1e-12, tol: float = 1e-8):
    r"""Coefficients :math:`c` of kernel (ridge) regression, :math:`f(x) = \sum_i c_i K(x, x_i)`.

    With ``ridge = 0`` this is the minimum-RKHS-norm interpolant
    :math:`c = K^{+} y` (pseudo-inverse on the eigenvalues above ``rcond * max eigenvalue``),
    the limit of gradient flow on the square loss of the linear model with features
    :math:`\phi` from zero (Chizat, Oyallon & Bach 2019). With ``ridge > 0`` it is
    kernel ridge regression :math:`c = (K + \lambda I)^{-1} y`.

    With ``ridge = 0`` the pseudo-inverse solution is improved by iterative refinement with
    the residual :math:`y - Kc` computed in doubled precision (error-free products and sums,
    Ogita, Rump & Oishi 2005), and that accurately computed residual is what ``tol`` bounds.
    ``tol`` bounds only the residual: the relative error of ``c`` can be up to
    :math:`\mathrm{cond}(K)` times the relative residual. After refinement it is usually
    near rounding when :math:`\varepsilon\,\mathrm{cond}(K) \ll 1`. Examples: 3e-15 on the
    8 x 8 Hilbert matrix with ``y = 1`` (cond 1.5e10; it was 5.3e-8 with the
    eigendecomposition alone), and 0 on ``[[1, 1], [1, 1 + 1e-8]]``, ``y = (1, -1)``.

    Args:
        K: ``(n, n)`` symmetric positive semidefinite kernel matrix on the training inputs.
        y: ``(n,)`` targets.
        ridge: :math:`\lambda \ge 0`.
        rcond: relative cut-off for small eigenvalues when ``ridge = 0``, in ``(0, 1)``.
        tol: with ``ridge = 0``, the largest relative interpolation residual
            :math:`\|K c - y\| / \|y\|` accepted (computed in doubled precision for the
            returned ``c``; it bounds the residual, not the error of ``c``); with
            ``ridge > 0``, the largest relative error bound
            :math:`\varepsilon\,\mathrm{cond}(K + \lambda I)` accepted
            (:math:`\varepsilon \approx 2.2 \cdot 10^{-16}`, the condition number from the
            eigenvalues of ``K``).

    Returns:
        ``(n,)`` float64 coefficients; predict at new points with ``K_test @ c`` where
        ``K_test[i, j] = K(x_test_i, x_j)``.

    Raises:
        ValueError: ``K`` not square, not symmetric (relative asymmetry above 1e-10), with a
            negative eigenvalue below ``-1e-10 * max eigenvalue``, or non-finite; ``y`` of the
            wrong shape; ``ridge`` not a finite number >= 0, or so large (small) relative to
            ``K`` that ``ridge / max |K|`` overflows (underflows); ``rcond`` not in
            ``(0, 1)``; ``tol`` not a finite number > 0; a zero ``K``; with ``ridge = 0``,
            ``y`` not interpolable: its component outside the span of the eigenvectors of the
            eigenvalues kept (those above ``rcond * max eigenvalue``) above ``tol`` relative
            to ``|y|`` (the message gives it, the residual and the eigenvalues treated as 0);
            with ``ridge = 0`` and ``y`` interpolable, a residual of the refined float64
            coefficients still above ``tol``: an ill-conditioned ``K`` with coefficients so
            large that rounding them to float64 leaves a residual of up to about
            :math:`\varepsilon \|K\| \|c\| / \|y\|` (e.g. ``K`` with eigenvalues 1 to
            2e-12 and ``y`` along all eigenvectors: 3.5e-7), refused with the condition number,
            the residual and that rounding level (pass a larger ``tol`` or ``ridge > 0``);
            with ``ridge > 0``, a
            ``ridge`` too small for an accurate float64 solution, i.e. with
            :math:`\varepsilon\,(\lambda_{\max} + \lambda) / (\max(\lambda_{\min}, 0) +
            \lambda) >` ``tol`` (a ``K`` singular to rounding, such as a Gram matrix
            :math:`\Phi\Phi^\top` with more points than features, and a ridge below about
            ``eps * max eigenvalue / tol``; the message names the smallest accepted
            ``ridge``); coefficients outside float64's range: overflowing, or underflowing
            (below the normal range 2.2e-308, where rounding to float64 would cost more than
            ``tol`` of their norm, e.g. ``K = [[1e300]]``, ``y = [1e-300]``: c = 1e-600;
            subnormal coefficients accurate to ``tol``, e.g. 1e-308 for ``K = I`` with
            ``ridge = 1e308``, are returned). Entries of any magnitude, subnormal ones
            included, are handled by scaling ``K`` and ``y`` by powers of two (exact) to a
            largest entry in ``[0.5, 1)`` first (in numpy).

    Example:
        >>> import jax.numpy as jnp
        >>> K = jnp.array([[2.0, 1.0], [1.0, 2.0]])
        >>> c = kernel_regression(K, jnp.array([1.0, 1.0]))
        >>> [round(float(v), 6) for v in c]
        [0.333333, 0.333333]
    """
    K = _square("K", K)
    n = K.shape[0]
    y = _validate.as_array("y", y, shape=(n,))
    ridge = _validate.positive("ridge", ridge, allow_zero=True)
    rcond = _validate.scalar("rcond", rcond, minimum=0.0, maximum=1.0, allow_min=False,
                             allow_max=False)
    tol = _validate.positive("tol", tol)
    # scale-free: K / 2^a and y / 2^b with max |K / 2^a|, max |y / 2^b| in [0.5, 1) (entries
    # near 1e+-300 neither overflow nor underflow); powers of two, so the scaled problem is the
    # given one exactly (a division by max |K| rounded K and moved c by eps cond(K) relative);
    # c = (c' 2^b) / 2^a
    kmax, ymax = _validate.max_abs(K), _validate.max_abs(y)
    if kmax == 0.0:
        raise ValueError("K must not be the zero matrix")
    kscale, yscale = _validate.pow2_scale(K), _validate.pow2_scale(y)
    with np.errstate(over="ignore", under="ignore"):
        rel_ridge = ridge / kscale
    if ridge > 0 and not np.isfinite(rel_ridge):
        raise ValueError(f"ridge = {ridge:.3e} is outside float64's range relative to K "
                         f"(max |K| = {kmax:.3e})")
    if ridge > 0 and rel_ridge < np.finfo(np.float64).tiny:
        raise ValueError(f"ridge = {ridge:.3e} is negligible relative to K (max |K| = "
                         f"{kmax:.3e}; ridge / max|K| underflows float64): pass ridge=0 for "
                         "the interpolant, or a larger ridge")
    # scaled in numpy: XLA on CPU flushes subnormal numbers to zero, so K / kscale computed in
    # JAX would lose entries below ~2.2e-308 and all of K / kscale for kscale above ~4.5e307
    c, den = _kernel_regression_scaled(
        jnp.asarray(_validate.np_div(K, kscale)),
        jnp.asarray(_validate.np_div(y, yscale)), rel_ridge, rcond, tol, kscale)
    # c = c' max|y| / (max|K| den), the factor applied in numpy as one power of two: the true
    # coefficients may lie below float64's normal range (K = [[1e300]], y = [1e-300]: c =
    # 1e-600, was returned as 0), refused then rather than flushed to zero
    with np.errstate(over="ignore", under="ignore"):
        kd = kscale * den
    if not np.isfinite(kd):
        kd_num, kd_den = yscale, kscale
        c = np.asarray(c) / den
    else:
        kd_num, kd_den = yscale, kd
    out = _validate.scaled_result(np.asarray(c), kd_num, kd_den, tol=tol,
                                  what="the coefficients c",
                                  names=f"max |y| / max |K| = {ymax:.3e} / {kmax:.3e}")
    return jnp.asarray(out)


def _kernel_regression_scaled(K, y, ridge, rcond, tol, kscale=1.0):
    """kernel_regression on K with max |K| in [0.5, 1) (scaled by the caller); ``kscale`` (the
    power of two K was divided by) only for the messages. Returns ``(c', den)``: the
    coefficients are ``c' / den`` (``den`` > 1 only with a ridge, the largest eigenvalue of
    ``K + ridge I``)."""
    scale = float(jnp.max(jnp.abs(K)))
    if float(jnp.max(jnp.abs(K - K.T))) > 1e-10 * max(scale, 1e-300):
        raise ValueError("K must be symmetric")
    evals, evecs = jnp.linalg.eigh(0.5 * (K + K.T))
    top = float(evals[-1])
    if float(evals[0]) < -1e-10 * max(abs(top), 1e-300):
        raise ValueError(f"K must be positive semidefinite; smallest eigenvalue "
                         f"{float(evals[0]):.3e}")
    if ridge > 0:
        # the computed eigenvalues are exact to about eps * max eigenvalue (backward stable), so
        # the coefficients have a relative error up to about eps * cond(K + ridge I): with K
        # singular to rounding and a ridge near eps * max, 1 / (evals + ridge) is set by the
        # rounding noise of the null-space eigenvalues (67 % off at ridge 1e-16). Refused
        # beyond tol, as the ridge = 0 branch refuses a residual beyond tol
        eps = float(np.finfo(np.float64).eps)
        floor, top_r = max(float(evals[0]), 0.0), max(top, 0.0) + ridge
        cond = top_r / (floor + ridge)
        if eps * cond > tol:
            need = eps * max(top, 0.0) / tol * kscale
            raise ValueError(
                f"ridge = {ridge * kscale:.3e} is too small for this K: K is singular to "
                f"rounding (eigenvalues {float(evals[0]) * kscale:.3e} to {top * kscale:.3e}), "
                f"so K + ridge I has condition number {cond:.3e} and its float64 solution may "
                f"be off by eps * cond ~ {eps * cond:.1e} (relative) > tol = {tol:.1e}; pass "
                f"ridge >= {need:.1e} (or a larger tol), or ridge=0 for the interpolant")
        # divided by the largest denominator first: with ridge ~ 1e308 the coefficients 1 / (1
        # + ridge) are subnormal, which XLA flushes to 0; the caller applies it in numpy
        # (in numpy: XLA divides by multiplying with 1 / dmax, itself subnormal, hence NaN)
        den = np.clip(np.asarray(evals), 0.0, None) + ridge
        dmax = float(np.max(den))
        return evecs @ ((evecs.T @ y) / jnp.asarray(den / dmax)), dmax
    # ridge = 0: the pseudo-inverse on the eigenvalues kept, then iterative refinement with
    # residuals y - K c computed in doubled precision (error-free products and sums), so that c
    # is accurate to about eps (not eps * cond(K)) and the residual judged is the one of the
    # coefficients returned. The eigendecomposition alone left a residual ~ eps cond(K) |y|
    # that was refused as "y cannot be interpolated" for an invertible K (relative residual
    # 1.2e-8 on [[1, 1], [1, 1 + 1e-8]], y = (1, -1), whose exact c is returned to rounding now)
    Ks = np.asarray(0.5 * (K + K.T), dtype=np.float64)  # K itself when K is symmetric
    yv = np.asarray(y, dtype=np.float64)
    ev, V = np.asarray(evals, dtype=np.float64), np.asarray(evecs, dtype=np.float64)
    keep = ev > rcond * max(top, 0.0)
    inv = np.where(keep, 1.0 / np.where(keep, ev, 1.0), 0.0)

    def solve(r):
        return V @ (inv * (V.T @ r))

    eps = float(np.finfo(np.float64).eps)
    c = solve(yv)
    r = _accurate_residual(Ks, c, yv)
    rn = float(np.linalg.norm(r))
    for _ in range(10):  # contraction ~ eps cond per step: a few steps for cond up to 1e12
        dc = solve(r)
        if not np.all(np.isfinite(dc)):
            break
        c_new = c + dc
        r_new = _accurate_residual(Ks, c_new, yv)
        rn_new = float(np.linalg.norm(r_new))
        if not rn_new < rn:
            break
        c, r, rn = c_new, r_new, rn_new
        if float(np.linalg.norm(dc)) <= eps * float(np.linalg.norm(c)):
            break
    ynorm = max(float(np.linalg.norm(yv)), 1e-300)
    residual = rn / ynorm
    if residual > tol:
        dropped = int(np.sum((ev > 0) & ~keep))
        # the part of y no c in the range kept can reach: its component along the eigenvectors
        # of the eigenvalues treated as 0
        outside = float(np.linalg.norm(V[:, ~keep].T @ yv)) / ynorm if (~keep).any() else 0.0
        if outside > tol:
            why = (f"; {dropped} positive eigenvalue(s) of K below rcond * max = "
                   f"{rcond * max(top, 0.0):.1e} were treated as 0 (pass a smaller rcond if they "
                   "are meaningful)") if dropped else ""
            raise ValueError(
                f"y cannot be interpolated with K: its component outside the range of K (the "
                f"eigenvectors of the {int(keep.sum())} eigenvalue(s) kept) has relative size "
                f"{outside:.3e} > tol = {tol:.1e} (relative residual {residual:.3e}){why}; pass "
                "ridge > 0 for kernel ridge regression")
        low = float(np.min(ev[keep]))
        cnorm = float(np.linalg.norm(c))
        floor = eps * max(top, 0.0) * cnorm / ynorm
        raise ValueError(
            f"kernel_regression: y can be interpolated with K (its component outside the range "
            f"kept is {outside:.1e} <= tol), but the float64 coefficients leave a relative "
            f"residual {residual:.3e} > tol = {tol:.1e} (computed in doubled precision, after "
            f"iterative refinement): K has condition number {max(top, 0.0) / low:.3e} "
            f"(eigenvalues kept {low * kscale:.3e} to {top * kscale:.3e}), so coefficients of "
            f"relative size |c| |K| / |y| = {max(top, 0.0) * cnorm / ynorm:.3e} rounded to "
            f"float64 leave a residual of up to about eps |K| |c| / |y| ~ {floor:.1e}; pass "
            f"tol >= {2 * residual:.1e}, or ridge > 0")
    return jnp.asarray(c), 1.0


def _accurate_residual(K, c, y):
    """``y - K c`` as if computed in doubled precision (Ogita, Rump & Oishi 2005, Dot2,
    vectorized over the rows): every product ``K_ij c_j`` split error-free
    (``_validate.two_product``) and the sums accumulated with error-free additions (TwoSum),
    then rounded once: accurate to rounding relative to the residual itself unless it is below
    about ``n eps^2 |K| |c|``. ``c`` is scaled by a power of two first (exact) so the splits
    cannot overflow."""
    sc = _validate.pow2_scale(c)
    cs = c / sc
    with np.errstate(under="ignore", over="ignore"):
        s = y / sc
        err = np.zeros_like(s)
        for j in range(K.shape[1]):
            p, e = _validate.two_product(K[:, j], -cs[j])
            t = s + p
            bb = t - s
            err += ((s - (t - bb)) + (p - bb)) + e
            s = t
        return (s + err) * sc


def rkhs_norm(K, c):
    r"""RKHS norm :math:`\|f\|_K = \sqrt{c^\top K c}` of :math:`f = \sum_i c_i K(\cdot, x_i)`.

    Args:
        K: ``(n, n)`` positive semidefinite kernel matrix.
        c: ``(n,)`` coefficients, e.g. from :func:`kernel_regression`.

    Returns:
        A nonnegative float.

    Raises:
        ValueError: ``K`` not a square finite real matrix or not symmetric (relative
            asymmetry above 1e-10, as in :func:`kernel_regression`), ``c`` not a finite real
            vector of matching length, ``K`` not positive semidefinite (smallest eigenvalue
            below ``-1e-10`` times the largest, as in :func:`kernel_regression`, even when
            :math:`c^\top K c \ge 0` for this ``c``, also for ``c = 0``), or a norm beyond
            float64's range.
            Computed in scaled form, so entries near 1e+-300 give the correct finite value,
            and :math:`c^\top K c` in exact arithmetic (error-free products, exact sum) rounded
            once: a float64 sum loses digits when :math:`|c|^2|K| \gg c^\top K c` (``c`` from
            a ridge-regularized fit on a singular ``K``).

    Example:
        >>> import jax.numpy as jnp
        >>> rkhs_norm(jnp.eye(2), jnp.array([3.0, 4.0]))
        5.0
    """
    K = _square("K", K)
    c = _validate.as_array("c", c, shape=(K.shape[0],))
    # scaled form: sqrt(c^T K c) = sqrt(sk) sc sqrt(c'^T K' c'), with K' = K / sk, c' = c / sc
    sk, sc = _validate.max_abs(K), _validate.max_abs(c)
    if sk == 0.0:  # the zero matrix: symmetric and positive semidefinite, every norm is 0
        return 0.0
    Kn = np.asarray(K) / sk
    if float(np.max(np.abs(Kn - Kn.T))) > 1e-10:  # the test of kernel_regression
        raise ValueError("K must be symmetric (relative asymmetry above 1e-10)")
    # the test of kernel_regression: an indefinite K is refused even when c^T K c >= 0 for
    # this c (sqrt(c^T K c) is then no norm)
    evals = np.linalg.eigvalsh(0.5 * (Kn + Kn.T))
    if evals[0] < -1e-10 * max(abs(float(evals[-1])), 1e-300):
        raise ValueError(f"K must be positive semidefinite; smallest eigenvalue "
                         f"{float(evals[0]) * sk:.3e}")
    if sc == 0.0:  # c = 0, after the checks of K (a bad K is refused for every c)
        return 0.0
    # c^T K c in exact arithmetic on the scaled inputs (powers of two: exact), rounded once:
    # a float64 sum cancels when |c|^2 |K| >> c^T K c (c from a ridge-regularized solve on a
    # singular Gram matrix: 0.077258 for an exact 0.077600, |c|^2 |K| ~ 1e12)
    sk2, sc2 = _validate.pow2_scale(K), _validate.pow2_scale(c)
    cn = np.asarray(c, dtype=np.float64) / sc2
    q = _exact_quadratic_form(np.asarray(K, dtype=np.float64) / sk2, cn)
    # back to the units of Kn = K / sk and cn = c / sc used below
    q = q * (sk2 / sk) * (sc2 / sc) ** 2
    cn = cn * (sc2 / sc)
    if q < -1e-10 * float(cn @ cn):
        raise ValueError(f"c^T K c = {q * sk * sc ** 2:.3e} < 0: K is not positive semidefinite")
    out = float(np.sqrt(sk) * sc * np.sqrt(max(q, 0.0)))
    if not np.isfinite(out):
        raise ValueError(f"the RKHS norm overflows float64 (max |K| = {sk:.3e}, max |c| = "
                         f"{sc:.3e})")
    return out


def _exact_quadratic_form(K, c):
    """``c^T K c`` for max |K|, max |c| <= 1: every term ``c_i K_ij c_j`` split error-free into
    four floats (``_validate.two_product`` twice), each row's terms summed with error-free
    additions (its sum and its rounding errors' sum: accurate as in doubled precision) and the
    rows' parts summed exactly (``math.fsum``): the exact value rounded once, up to about
    ``n eps^2 sum |c_i K_ij c_j|`` (and products below the normal range, ~1e-308, lost in
    full: negligible beside a norm of the scaled inputs)."""
    import math

    with np.errstate(under="ignore"):
        p1, e1 = _validate.two_product(K, c[None, :])
        p2, e2 = _validate.two_product(c[:, None], p1)
        p3, e3 = _validate.two_product(c[:, None], e1)
        terms = np.concatenate([p2, e2, p3, e3], axis=1)  # row i: its 4n terms
    # each row summed with error-free additions (TwoSum), vectorized over the rows: the row
    # sum is then s + (sum of the errors), the errors' float sum adding only eps^2 relative
    s = np.zeros(terms.shape[0])
    err = np.zeros(terms.shape[0])
    for col in terms.T:
        t = s + col
        bb = t - s
        err += (s - (t - bb)) + (col - bb)
        s = t
    return math.fsum(np.concatenate([s, err]).tolist())


def _pair(K0, K1):
    K0 = _validate.as_array("K0", K0, ndim=2)
    K1 = _validate.as_array("K1", K1, ndim=2)
    if K0.shape != K1.shape:
        raise ValueError(f"K0 and K1 must have the same shape, got {K0.shape} and {K1.shape}")
    if K0.size == 0:
        raise ValueError("K0 and K1 must not be empty")
    return K0, K1


def relative_kernel_change(K0, K1) -> float:
    r"""Relative change :math:`\|K_1 - K_0\|_F / \|K_0\|_F` of a kernel matrix.

    The kernel (lazy) regime is where the tangent kernel barely moves during training. For the
    scaled model :math:`\alpha h` with a smooth ``h`` and :math:`\alpha h(\theta_0)` bounded,
    the parameters move by :math:`O(1/\alpha)` (Chizat 2020, blog Sec. 6), hence so does the
    tangent kernel of ``h``. For a width-``m`` two-layer ReLU network with :math:`1/\sqrt m`
    output scaling the lazy-training chapter (Experiment 2, symmetric initialization) measures
    a change of order :math:`m^{-1/2}` overall; with the activation pattern frozen at
    initialization the change scales like :math:`m^{-1}`, and the :math:`m^{-1/2}` comes from
    activation flips, units whose pre-activation :math:`b_j^\top x` changes sign.

    Args:
        K0: ``(n1, n2)`` reference kernel matrix (typically at initialization), not all zero.
        K1: ``(n1, n2)`` kernel matrix to compare (typically after training).

    Returns:
        A float >= 0.

    Raises:
        ValueError: ``K0`` or ``K1`` not a finite real 2-D array, shapes differ, ``K0`` is
            exactly zero, or ``K1`` so much larger than ``K0`` that the ratio overflows
            float64 (e.g. ``K0 = 1e-300 I``, ``K1 = 1e300 I``). Computed in scaled form (both
            norms as mantissa and power of two): entries of any magnitude (1e-300 to 1e300)
            are fine, and a difference in the subnormal range keeps its digits.

    Example:
        >>> import jax.numpy as jnp
        >>> relative_kernel_change(jnp.eye(2), 1.1 * jnp.eye(2))
        0.10000000000000009
    """
    K0, K1 = _pair(K0, K1)
    _unit_or_zero("K0", K0)  # names a zero K0 as a matrix
    return _validate.relative_difference("K1", K1, "K0", K0)


def kernel_distance(K0, K1) -> float:
    r"""Kernel distance :math:`1 - \langle K_0, K_1\rangle_F / (\|K_0\|_F\, \|K_1\|_F)`.

    One minus the cosine of the angle between the two matrices (Fort et al. 2020, Sec. 4,
    where it tracks how far the tangent kernel travels during training). It is 0 when ``K1``
    is a positive multiple of ``K0``, so it ignores a change of overall scale (which does not
    change the kernel interpolant, only the speed of kernel gradient descent) and sees only a
    change of *shape*; it lies in ``[0, 2]``, and in ``[0, 1]`` for positive semidefinite
    matrices.

    Args:
        K0, K1: ``(n1, n2)`` kernel matrices, neither all zero.

    Returns:
        A float in ``[0, 2]``.

    Raises:
        ValueError: ``K0`` or ``K1`` not a finite real 2-D array, shapes differ, or either is
            exactly zero. Computed in scaled form: entries of any magnitude are fine.
            Computed as :math:`\tfrac12 \|K_0/\|K_0\|_F - K_1/\|K_1\|_F\|_F^2` (equal to
            the formula above), accurate also for nearly equal kernels (no :math:`1 - \cos`
            cancellation).

    Example:
        >>> import jax.numpy as jnp
        >>> round(kernel_distance(jnp.eye(2), 3.0 * jnp.eye(2)), 15)
        0.0
        >>> kernel_distance(jnp.eye(2), jnp.array([[0.0, 1.0], [1.0, 0.0]]))
        1.0
    """
    K0, K1 = _pair(K0, K1)
    _unit_or_zero("K0", K0)
    _unit_or_zero("K1", K1)
    # 1 - cos = ||U0 - U1||^2 / 2 with U = K / ||K|| (unit Frobenius norm, computed in scaled
    # form): no cancellation for nearly equal kernels, where 1 - cos computed directly loses
    # every digit (K0 + 1e-8 E gave 0.0 for a true 9.7e-18), and no overflow for huge entries
    # With A = K / 2^k (exact, max |A| in [0.5, 1)), n = ||A||_F and D = A1 - A0:
    # A1/n1 - A0/n0 = D/n1 + A0 (n0 - n1)/(n0 n1), n0 - n1 = -<D, A0 + A1>/(n0 + n1), so the
    # difference of the unit matrices is formed from D itself (no rounding of two nearly
    # equal unit matrices), accurate to rounding relative to the distance
    A0 = np.asarray(K0) / _validate.max_abs(K0)
    A1 = np.asarray(K1) / _validate.max_abs(K1)
    cos = float(np.sum(A0 * A1)) / float(np.sqrt(np.sum(A0 * A0) * np.sum(A1 * A1)))
    if 1.0 - cos >= 1e-4:  # far apart: 1 - cos directly, as before (its absolute error
        return float(np.clip(1.0 - cos, 0.0, 2.0))  # ~1e-16 is relatively small here)
    A0 = np.asarray(K0) / _validate.pow2_scale(K0)
    A1 = np.asarray(K1) / _validate.pow2_scale(K1)
    n0, n1 = float(np.sqrt(np.sum(A0 * A0))), float(np.sqrt(np.sum(A1 * A1)))
    D = A1 - A0
    dn = -float(np.sum(D * (A0 + A1))) / (n0 + n1)  # n0 - n1
    U = D / n1 + A0 * (dn / (n0 * n1))
    return float(np.clip(0.5 * np.sum(U * U), 0.0, 2.0))


def _unit_or_zero(name, K):
    """(K / ||K||, ||K||) in scaled form; a ValueError naming ``name`` if K is exactly 0."""
    if _validate.max_abs(K) == 0.0:
        raise ValueError(f"{name} must not be the zero matrix (all entries are 0)")
    return _validate.unit(K)
