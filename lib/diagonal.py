r"""Diagonal linear networks: the implicit bias of gradient flow, computed exactly.

The depth-:math:`D` diagonal linear network of Woodworth et al. (2020, Sec. 4-5) predicts with

.. math::
    f(w, x) = \langle \beta(w), x\rangle, \qquad \beta(w) = w_+^D - w_-^D

(elementwise powers), is trained by gradient flow on the square loss
:math:`L(w) = \sum_n (\langle \beta(w), x_n\rangle - y_n)^2` and starts *unbiased* at
:math:`w_+(0) = w_-(0) = \alpha \mathbf 1`, so that :math:`\beta(0) = 0` for every scale
:math:`\alpha`. Along the flow, :math:`\beta(t) = \alpha^D h_D(X^\top \nu(t))` for some
:math:`\nu(t) \in \mathbb R^N`, with the link function

.. math::
    h_2(z) = 2\sinh z, \qquad
    h_D(z) = (1 - z)^{-D/(D-2)} - (1 + z)^{-D/(D-2)} \quad (D \ge 3,\ |z| < 1).

If the flow reaches zero loss, its limit is therefore the solution of the convex program

.. math::
    \min_\beta Q^D_\alpha(\beta) = \alpha^D \sum_i q_D(\beta_i / \alpha^D)
    \quad\text{s.t.}\quad X\beta = y, \qquad q_D(u) = \int_0^u h_D^{-1}(v)\,dv

(Woodworth et al. 2020, Sec. 4 for :math:`D = 2`, Sec. 5 for :math:`D \ge 3`), whose
dual is the smooth convex problem (strictly convex when :math:`X` has full row rank), over all
of :math:`\mathbb R^N` for :math:`D = 2` and over the open set :math:`\|X^\top\nu\|_\infty < 1`
for :math:`D \ge 3` (where :math:`H_D` blows up at the boundary)

.. math::
    \min_\nu\ \Phi(\nu) = \alpha^D \sum_i H_D\big((X^\top\nu)_i\big) - y^\top \nu,
    \qquad H_D' = h_D,\ H_D(0) = 0,

with :math:`\beta = \alpha^D h_D(X^\top \nu)` at the optimum.

Public functions:

* :func:`Q`: the regularizer :math:`Q^D_\alpha`.
* :func:`implicit_bias_limit`: the limit of the flow, by Newton's method on the dual, for one
  :math:`\alpha` or a whole grid in one compiled call.
* :func:`gradient_flow_path` / :func:`gradient_descent_path`: simulate the model itself
  (through :mod:`lib.flows`) and return the trajectory of :math:`\beta`.

The scalar functions :func:`h_D`, :func:`H_D`, :func:`h_D_inverse`, :func:`q_D` and
:func:`dual_objective` are the building blocks of both the regression limit here and the
classification limit (:math:`\arg\min Q^D_\mu` s.t. margins :math:`\ge 1`, Moroshko et al. 2020),
which lives with the exponential loss in :mod:`lib.diagonal_classification`.

Numerics. The solver never forms :math:`\cosh` of a large argument or :math:`1 - z` near the
boundary :math:`|z| = 1`. It keeps, per coordinate, two *gaps* :math:`a = 1 - z` and
:math:`b = 1 + z` (for :math:`D = 2`: :math:`a = -z`, :math:`b = z`) as separate state, updated
by the Newton increments, so that :math:`w_\pm^D = \alpha^D a^{-D/(D-2)}` keeps its relative
precision even when the gap is :math:`10^{-15}` (small :math:`\alpha`, large :math:`D`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from . import _validate, flows

__all__ = [
    "DiagonalRun",
    "H_D",
    "Q",
    "beta_of",
    "dual_objective",
    "gradient_descent_path",
    "gradient_flow_path",
    "h_D",
    "h_D_inverse",
    "implicit_bias_limit",
    "init_diagonal",
    "q_D",
    "square_loss",
]

_SERIES_Z = 0.05  # below this |z| the D >= 3 functions use their Taylor series
_MAX_ITER = 10**9  # Newton iterations: a compiled loop bound (static, an int64 in jit)
_Q_QUADRATIC = 1e-100  # below this |u|, Q uses q_D(u) = u^2 / (2 h_D'(0)) to rounding
_SERIES_TERMS = 10


# ----------------------------------------------------------------------------------------------
# Scalar building blocks
# ----------------------------------------------------------------------------------------------


MAX_DEPTH = 10**6
"""Largest depth accepted (far beyond any use; Python ints such as ``10**400`` would otherwise
overflow in ``D / (D - 2)``)."""


def _check_depth(depth):
    return _validate.integer("depth", depth, minimum=2, maximum=MAX_DEPTH)


def _exponent(depth):
    """p = D / (D - 2), the exponent of the gaps for D >= 3."""
    return depth / (depth - 2.0)


def _series_coeffs(depth):
    """Coefficients c_k = (p)_k / k! of (1 - z)^(-p) = sum_k c_k z^k for odd k < 2 K."""
    p = _exponent(depth)
    coeffs, c = [], 1.0
    for k in range(1, 2 * _SERIES_TERMS):
        c *= (p + k - 1) / k
        if k % 2 == 1:
            coeffs.append((k, c))
    return coeffs


def h_D(z, depth=2):
    r"""The link function :math:`h_D` with :math:`\beta = \alpha^D h_D(X^\top \nu)`.

    .. math::
        h_2(z) = 2\sinh z, \qquad h_D(z) = (1-z)^{-D/(D-2)} - (1+z)^{-D/(D-2)}\ (D \ge 3)

    (Woodworth et al. 2020, Sec. 4 and 5). It is odd and increasing, with
    :math:`h_2'(0) = 2` and :math:`h_D'(0) = 2D/(D-2)` for :math:`D \ge 3`; near 0 the
    :math:`D \ge 3` form is evaluated by its Taylor series (no cancellation).

    Args:
        z: real array of any shape (int or float, cast to float64): any real for
            :math:`D = 2` (:math:`|z| \gtrsim 710` overflows to :math:`\pm\infty`), the
            domain :math:`|z| < 1` for :math:`D \ge 3`. Only the dtype is checked, not the
            values (``h_D`` runs inside the compiled solvers, on traced arrays): for
            :math:`|z| \ge 1` and :math:`D \ge 3` the formula is evaluated as written and is
            meaningless there (NaN or infinite when :math:`D/(D-2)` is not an integer, a
            finite wrong value for :math:`D = 3, 4`, e.g. ``h_D(2.0, 3)`` is ``-1.037``); NaN
            gives NaN.
        depth: int :math:`D \ge 2` (a Python int or a 0-d integer array).

    Returns:
        float64 JAX array of the shape of ``z``, odd in ``z``.

    Raises:
        ValueError: ``depth`` is not an integer in ``[2, MAX_DEPTH]``; ``z`` is None, a string,
            complex, boolean or otherwise not real numeric (checked from its dtype, so also
            under ``jax.jit``).

    Example:
        >>> float(h_D(0.5, depth=3))  # 0.5^-3 - 1.5^-3
        7.703703703703704
    """
    depth = _check_depth(depth)
    z = _validate.real_array("z", z)
    if depth == 2:
        return _subnormal_linear(z, 2.0 * jnp.sinh(z), 2.0)
    p = _exponent(depth)
    direct = (1.0 - z) ** (-p) - (1.0 + z) ** (-p)
    series = sum(2.0 * c * z ** k for k, c in _series_coeffs(depth))
    return _subnormal_linear(z, jnp.where(jnp.abs(z) < _SERIES_Z, series, direct), 2.0 * p)


def _subnormal_linear(x, out, slope):
    """``out`` with its entries at subnormal ``x`` replaced by ``slope * x`` computed in numpy,
    for an element-wise function with ``f(x) = slope * x`` to rounding near 0 (``h_D``, its
    inverse): XLA on CPU reads subnormal inputs as 0, so ``h_D(1e-310)`` came out 0 instead of
    2e-310. Traced inputs are returned unchanged (they cannot be inspected)."""
    if isinstance(x, jax.core.Tracer) or isinstance(out, jax.core.Tracer):
        return out
    xa = np.asarray(x, dtype=np.float64)
    sub = (xa != 0) & (np.abs(xa) < _validate.TINY)
    if not sub.any():
        return out
    fixed = np.array(out, dtype=np.float64)
    with np.errstate(under="ignore"):
        fixed[sub] = slope * xa[sub]
    return jnp.asarray(fixed)


def H_D(z, depth=2):
    r"""The antiderivative :math:`H_D` of :math:`h_D` with :math:`H_D(0) = 0`.

    .. math::
        H_2(z) = 2\cosh z - 2 = 4\sinh^2(z/2), \qquad
        H_D(z) = \tfrac{D-2}{2}\Big[(1-z)^{-2/(D-2)} + (1+z)^{-2/(D-2)} - 2\Big]\ (D \ge 3).

    It is even and strictly convex; :math:`\alpha^D \sum_i H_D((X^\top\nu)_i) - y^\top\nu` is the
    dual of :math:`\min Q^D_\alpha` s.t. :math:`X\beta = y`, and :math:`q_D` is its convex
    conjugate, :math:`q_D(u) = u z - H_D(z)` at :math:`z = h_D^{-1}(u)`. Near 0 a Taylor
    series avoids cancellation; for :math:`D \ge 3`, :math:`H_D \to \infty` as :math:`|z| \to 1`
    (a barrier: the dual domain is :math:`\|X^\top \nu\|_\infty < 1`).

    Source: Woodworth et al. 2020, Sec. 4 (:math:`D = 2`) and Sec. 5 (:math:`D \ge 3`),
    through the dual of their regularizer; the same dual, with :math:`\alpha^D` replaced by
    :math:`\mu` and :math:`X` by :math:`\mathrm{diag}(y) X`, gives the margin problem of
    Moroshko et al. 2020 (see :func:`lib.diagonal_classification.margin_limit`).

    Args:
        z: real array of any shape (int or float, cast to float64): any real for
            :math:`D = 2` (:math:`|z| \gtrsim 710` overflows to ``inf``), the domain
            :math:`|z| < 1` for :math:`D \ge 3`. Only the dtype is checked, not the values
            (``H_D`` is differentiated and traced by JAX): for :math:`D \ge 3` the result is
            ``inf`` at :math:`|z| = 1` and NaN for :math:`|z| > 1` (:func:`dual_objective`
            maps both to ``inf``); NaN gives NaN.
        depth: int :math:`D \ge 2` (a Python int or a 0-d integer array).

    Returns:
        float64 JAX array of the shape of ``z``, :math:`\ge 0` on the domain.

    Raises:
        ValueError: ``depth`` is not an integer in ``[2, MAX_DEPTH]``; ``z`` is None, a string,
            complex, boolean or otherwise not real numeric (checked from its dtype, so also
            under ``jax.jit``).

    Example:
        >>> round(float(H_D(1.0, depth=2)), 12)  # 2 cosh 1 - 2
        1.08616126963
    """
    depth = _check_depth(depth)
    z = _validate.real_array("z", z)
    if depth == 2:
        return 4.0 * jnp.sinh(z / 2.0) ** 2
    q = 2.0 / (depth - 2.0)
    c = (depth - 2.0) / 2.0
    direct = c * (jnp.expm1(-q * jnp.log1p(-z)) + jnp.expm1(-q * jnp.log1p(z)))
    series = sum(2.0 * ck / (k + 1) * z ** (k + 1) for k, ck in _series_coeffs(depth))
    return jnp.where(jnp.abs(z) < _SERIES_Z, series, direct)


def _gap_of(u, depth, iters=80):
    """For D >= 3 and u >= 0: the gap g = 1 - z in (0, 1] with h_D(1 - g) = u.

    Safeguarded Newton in log g on the bracket [(u+1)^(-1/p), min(1, u^(-1/p))], which holds
    because g^-p - 1 <= h_D(1 - g) <= g^-p.
    """
    p = _exponent(depth)
    lo = (u + 1.0) ** (-1.0 / p)
    hi = jnp.minimum(1.0, jnp.where(u > 0, u, 1.0) ** (-1.0 / p))

    def F(g):  # h_D(1 - g) - u, decreasing in g
        return g ** (-p) - (2.0 - g) ** (-p) - u

    def body(_, state):
        lo, hi, g = state
        f = F(g)
        lo = jnp.where(f > 0, g, lo)
        hi = jnp.where(f > 0, hi, g)
        dfdlog = -p * g ** (-p) - p * g * (2.0 - g) ** (-p - 1.0)  # dF / d log g
        g_new = g * jnp.exp(-f / dfdlog)
        inside = (g_new > lo) & (g_new < hi)
        # sqrt(lo) sqrt(hi), not sqrt(lo hi): the product underflows for gaps below ~1e-154
        g_new = jnp.where(inside, g_new, jnp.sqrt(lo) * jnp.sqrt(hi))
        return lo, hi, g_new

    _, _, g = jax.lax.fori_loop(0, iters, body, (lo, hi, jnp.sqrt(lo) * jnp.sqrt(hi)))
    return g


def _z_small(u, depth, iters=60):
    """For D >= 3 and 0 <= u <= h_D(0.5): z in [0, 0.5] with h_D(z) = u (safeguarded Newton)."""

    def body(_, state):
        lo, hi, z = state
        f = h_D(z, depth) - u
        lo = jnp.where(f < 0, z, lo)
        hi = jnp.where(f < 0, hi, z)
        p = _exponent(depth)
        df = p * ((1.0 - z) ** (-p - 1.0) + (1.0 + z) ** (-p - 1.0))
        z_new = z - f / df
        inside = (z_new >= lo) & (z_new <= hi)
        z_new = jnp.where(inside, z_new, 0.5 * (lo + hi))
        return lo, hi, z_new

    z0 = u / (2.0 * _exponent(depth))
    _, _, z = jax.lax.fori_loop(0, iters, body, (jnp.zeros_like(u), jnp.full_like(u, 0.5),
                                                 jnp.minimum(z0, 0.5)))
    return z


def h_D_inverse(u, depth=2):
    r"""The inverse link :math:`h_D^{-1} = q_D'`, an odd increasing map onto
    :math:`\mathbb R` (:math:`D = 2`) or :math:`(-1, 1)` (:math:`D \ge 3`).

    :math:`h_2^{-1}(u) = \operatorname{arcsinh}(u/2)`; for :math:`D \ge 3` it has no closed form
    and is computed to machine precision by safeguarded Newton iterations (in :math:`\log(1-|z|)`
    when :math:`|z| > 1/2`). Use ``_gap_of`` when :math:`1 - |z|` itself is needed to full
    relative precision. It is the mirror map of the implicit bias (Woodworth et al. 2020,
    Sec. 4 and 5): :math:`h_D^{-1}(\beta/\alpha^D) \in \operatorname{range}(X^\top)`
    at the limit of the flow.

    Args:
        u: real array of any shape (int or float, cast to float64); every finite value is in
            the domain. Only the dtype is checked, not the values: :math:`u = \pm\infty` gives
            :math:`\pm\infty` for :math:`D = 2` and :math:`\pm 1` for :math:`D \ge 3`, NaN
            gives NaN.
        depth: int :math:`D \ge 2` (a Python int or a 0-d integer array).

    Returns:
        float64 JAX array ``z`` of the shape of ``u`` with :math:`h_D(z) = u`
        (:math:`|z| < 1` for :math:`D \ge 3` and finite ``u``).

    Raises:
        ValueError: ``depth`` is not an integer in ``[2, MAX_DEPTH]``; ``u`` is None, a string,
            complex, boolean or otherwise not real numeric (checked from its dtype).

    Example:
        >>> round(float(h_D_inverse(h_D(0.9, depth=4), depth=4)), 12)
        0.9
    """
    depth = _check_depth(depth)
    u = _validate.real_array("u", u)
    if depth == 2:
        return _subnormal_linear(u, jnp.arcsinh(u / 2.0), 0.5)
    a = jnp.abs(u)
    u_half = float(h_D(0.5, depth))
    small = _z_small(jnp.minimum(a, u_half), depth)
    large = 1.0 - _gap_of(jnp.maximum(a, u_half), depth)
    return _subnormal_linear(u, jnp.sign(u) * jnp.where(a <= u_half, small, large),
                             1.0 / (2.0 * _exponent(depth)))


def q_D(u, depth=2):
    r"""The potential :math:`q_D(u) = \int_0^u h_D^{-1}(v)\,dv` of :math:`Q^D_\alpha`.

    .. math::
        q_2(u) = 2 - \sqrt{4 + u^2} + u \operatorname{arcsinh}(u/2), \qquad
        q_D(u) = u z - H_D(z),\ z = h_D^{-1}(u)\ (D \ge 3)

    (Woodworth et al. 2020, Sec. 4 and 5; the second form is the Legendre transform
    of :math:`H_D`). It is even, convex, :math:`q_D(u) \approx u^2 / (2 h_D'(0))` for small
    :math:`u`. For large :math:`|u|` the two cases differ: :math:`q_2(u) = |u|(\log|u| - 1) + 2 +
    O(1/|u|)` grows faster than :math:`|u|` by a log factor, while for :math:`D \ge 3`,
    :math:`q_D(u) = |u| - \tfrac D2 |u|^{2/D} + O(1)` (because :math:`h_D^{-1}(u) \to 1`). The
    quadratic zone is the :math:`\ell_2` behaviour, the large-:math:`|u|` zone the
    :math:`\ell_1` one.

    Args:
        u: real array of any shape (int or float, cast to float64); every finite value is in
            the domain. Only the dtype is checked, not the values (an element-wise function
            used inside compiled code; :func:`Q` checks its inputs): :math:`u = \pm\infty`
            and NaN give NaN, and a value :math:`q_D(u)` above float64's range (e.g.
            :math:`q_2(u) \approx |u| \log|u|` for :math:`|u| \gtrsim 2.5 \cdot 10^{305}`) gives
            inf.
        depth: int :math:`D \ge 2` (a Python int or a 0-d integer array).

    Returns:
        float64 JAX array of the shape of ``u``, :math:`\ge 0` and even in ``u``.

    Raises:
        ValueError: ``depth`` is not an integer in ``[2, MAX_DEPTH]``; ``u`` is None, a string,
            complex, boolean or otherwise not real numeric (checked from its dtype).

    Example:
        >>> round(float(q_D(2.0, depth=2)), 12)  # 2 - sqrt(8) + 2 arcsinh(1)
        0.934320049293
    """
    depth = _check_depth(depth)
    u = _validate.real_array("u", u)
    if depth == 2:
        a = jnp.abs(u)
        # 2 - sqrt(4 + u^2) = -u^2 / (2 + sqrt(4 + u^2)): no cancellation for small u
        # (a^2 written as a * a / ..., hypot for sqrt(4 + a^2): no overflow for a > 1e154)
        return a * jnp.arcsinh(a / 2.0) - a * (a / (2.0 + jnp.hypot(2.0, a)))
    a = jnp.abs(u)
    p = _exponent(depth)
    qq = 2.0 / (depth - 2.0)
    c = (depth - 2.0) / 2.0
    z = jnp.abs(h_D_inverse(a, depth))
    # small z: series of u z - H(z) = sum 2 c_k k / (k + 1) z^(k+1), no cancellation
    series = sum(2.0 * ck * k / (k + 1) * z ** (k + 1) for k, ck in _series_coeffs(depth))
    # large z: in terms of the gap g = 1 - z, H = c (g^-q + (2 - g)^-q - 2)
    g = _gap_of(jnp.maximum(a, float(h_D(_SERIES_Z, depth))), depth)
    # g^-q - 1 + (2 - g)^-q - 1 as expm1(-q log g) + expm1(-q log1p(1 - g)): for large D
    # (q = 2 / (D - 2) small, c = 1 / q large) the powers are 1 + O(q) and the difference
    # with 2 cancelled (relative error ~ D eps: 4.7e-9 at D = 1e6)
    direct = a * (1.0 - g) - c * (jnp.expm1(-qq * jnp.log(g))
                                  + jnp.expm1(-qq * jnp.log1p(1.0 - g)))
    del p
    return jnp.where(z < _SERIES_Z, series, direct)


# ----------------------------------------------------------------------------------------------
# Q and the dual
# ----------------------------------------------------------------------------------------------


def _check_alpha(alpha):
    _validate.no_prng_key("alpha", alpha, "a positive number or a 1-D array of them")
    raw = None if isinstance(alpha, bool | str | bytes) else _validate.concrete("alpha", alpha)
    if raw is not None and (np.iscomplexobj(raw) or not np.issubdtype(raw.dtype, np.number)
                            or raw.dtype == np.bool_):
        raw = None
    arr = None if raw is None else raw.astype(np.float64)
    if arr is None or arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"alpha must be a positive number or a 1-D array of them, got {alpha!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"alpha must be finite and > 0, got {alpha!r}")
    if np.any(arr < _validate.TINY):
        raise ValueError(f"alpha has subnormal values (below {_validate.TINY:.3e}): XLA "
                         f"flushes them to zero; got {alpha!r}")
    return arr


def Q(beta, alpha, depth=2):
    r"""The implicit regularizer :math:`Q^D_\alpha(\beta) = \alpha^D \sum_i q_D(\beta_i/\alpha^D)`.

    If gradient flow on the depth-:math:`D` diagonal network from scale :math:`\alpha` reaches
    zero loss, its limit is :math:`\arg\min Q^D_\alpha(\beta)` s.t. :math:`X\beta = y`
    (Woodworth et al. 2020, Sec. 4 for :math:`D = 2`, Sec. 5 for :math:`D \ge 3`). The
    small-scale limit depends on the depth: for :math:`D = 2`,
    :math:`Q_\alpha(\beta) / \log(1/\alpha^2) \to \|\beta\|_1` as :math:`\alpha \to 0` (a log
    factor, from :math:`q_2(u) \approx |u|\log|u|`); for
    :math:`D \ge 3`, :math:`Q^D_\alpha(\beta) \to \|\beta\|_1` itself, with an error
    :math:`O(\alpha^{D-2})` (from :math:`q_D(u) = |u| - \tfrac D2|u|^{2/D} + O(1)`). As
    :math:`\alpha \to \infty`, :math:`Q^D_\alpha(\beta)\,\alpha^D \to
    \|\beta\|_2^2 / (2 h_D'(0))` for every :math:`D`.

    Args:
        beta: ``(d,)`` finite float vector.
        alpha: initialization scale, a float > 0.
        depth: int :math:`D \ge 2`.

    Returns:
        A float64 scalar :math:`\ge 0`.

    Raises:
        ValueError: ``beta`` not a finite vector, ``alpha <= 0`` or not finite, ``depth`` not an
            integer in ``[2, MAX_DEPTH]``, ``alpha**depth`` overflowing or below the smallest
            normal float64 (subnormal: flushed to zero by XLA), ``beta / alpha**depth``
            overflowing, or the value itself outside float64's range. Entries with
            :math:`|\beta_i/\alpha^D| < 10^{-100}` are summed in the quadratic form
            :math:`\beta_i^2 / (2 h_D'(0)\alpha^D)` (no underflow of :math:`u^2`).

    Example:
        >>> round(float(Q([2.0, 0.0], alpha=1.0)), 12)  # q(2) + q(0)
        0.934320049293
    """
    depth = _check_depth(depth)
    beta = _validate.as_array("beta", beta, ndim=1)
    alpha = _validate.positive("alpha", alpha)
    scale = _validate.power("alpha", alpha, depth)
    with np.errstate(over="ignore"):
        ratio = _validate.max_abs(beta) / scale
    if not np.isfinite(ratio):
        raise ValueError(f"beta / alpha**depth overflows float64 (max |beta| = "
                         f"{_validate.max_abs(beta):.3e}, alpha**depth = {scale:.3e})")
    b = np.asarray(beta)
    u = b / scale  # in numpy: XLA would flush subnormal ratios to zero
    small = np.abs(u) < _Q_QUADRATIC
    if not np.any(small):
        total = scale * jnp.sum(q_D(beta / scale, depth))
    else:
        # quadratic zone: q_D(u) = k2 u^2 (1 + O(u^2)) with k2 = 1 / (2 h_D'(0)); alpha^D q_D(u)
        # = k2 |beta| |u| in this order (u^2 underflows long before alpha^D u^2 does)
        k2 = float(q_D(_Q_QUADRATIC, depth)) / _Q_QUADRATIC ** 2
        tiny_part = float(np.sum(k2 * np.abs(b[small]) * np.abs(u[small])))
        big_part = scale * jnp.sum(q_D(jnp.asarray(np.where(small, 0.0, u)), depth))
        total = jnp.asarray(float(big_part) + tiny_part)
    if not bool(jnp.isfinite(total)):
        raise ValueError(f"Q_alpha^D(beta) is outside float64's range or cannot be computed in "
                         f"it (max |beta| = {_validate.max_abs(beta):.3e}, alpha**depth = "
                         f"{scale:.3e}, depth = {depth})")
    return total


def dual_objective(nu, X, y, alpha, depth=2):
    r"""The dual objective :math:`\Phi(\nu) = \alpha^D \sum_i H_D((X^\top\nu)_i) - y^\top\nu`.

    Its minimiser :math:`\nu^*` gives the implicit-bias limit
    :math:`\beta = \alpha^D h_D(X^\top\nu^*)` (the optimality condition :math:`\nabla\Phi =
    X\beta - y = 0`). For :math:`D \ge 3` it is :math:`+\infty` outside
    :math:`\|X^\top\nu\|_\infty < 1`. Straightforward evaluation, for reading and checking; the
    solver uses a gap parametrization instead. Source: Woodworth et al. 2020, Sec. 4
    (:math:`D = 2`) and Sec. 5 (:math:`D \ge 3`), whose limit is the primal
    :math:`\min Q^D_\alpha(\beta)` s.t. :math:`X\beta = y` of this dual.

    Args:
        nu: ``(N,)`` finite real vector, the dual variable.
        X: ``(N, d)`` finite real design matrix.
        y: ``(N,)`` finite real targets.
        alpha: initialization scale, a finite float > 0 with :math:`\alpha^D` inside the
            float64 range.
        depth: int :math:`D \ge 2`.

    Returns:
        A float64 JAX scalar; ``inf`` outside the domain (:math:`D \ge 3`) or when
        :math:`\alpha^D H_D` overflows.

    Raises:
        ValueError: ``nu``, ``X`` or ``y`` not real numeric, non-finite, or of the wrong
            rank or shape (``X`` 2-D, ``nu`` and ``y`` of length ``N``); ``X`` all zero or with only
            subnormal entries (``max |X|`` below 2.2e-308); ``alpha`` not a
            finite number > 0, or ``alpha**depth`` outside the normal float64 range (overflow
            or subnormal); ``depth`` not an integer in ``[2, MAX_DEPTH]``.

    Example:
        >>> import numpy as np
        >>> float(dual_objective(np.zeros(1), np.ones((1, 2)), np.ones(1), 1.0))
        0.0
    """
    depth = _check_depth(depth)
    X = _validate.nonzero_matrix("X", _validate.as_array("X", X, ndim=2))
    nu = _validate.as_array("nu", nu, shape=(X.shape[0],))
    y = _validate.as_array("y", y, shape=(X.shape[0],))
    alpha = _validate.positive("alpha", alpha)
    scale = _validate.power("alpha", alpha, depth)
    z = X.T @ nu
    H = H_D(z, depth)
    if depth > 2:
        H = jnp.where(jnp.abs(z) < 1, H, jnp.inf)
    return scale * jnp.sum(H) - jnp.dot(y, nu)


def _link(z, a, b, log_scale, depth):
    """beta = alpha^D h_D(z) and the dual Hessian weights alpha^D h_D'(z), per coordinate.

    ``a`` and ``b`` are the gaps 1 - z and 1 + z (for D = 2: -z and z) kept as separate state:
    far from 0, beta is computed from them (full relative precision near the boundary, no
    overflow); near 0 from ``z`` itself with the odd series (no cancellation for large alpha).
    """
    scale = jnp.exp(log_scale)
    if depth == 2:
        va, vb = jnp.exp(log_scale - a), jnp.exp(log_scale - b)
        far = va - vb
        near = 2.0 * scale * jnp.sinh(jnp.clip(z, -1.0, 1.0))
        return jnp.where(jnp.abs(z) < 1.0, near, far), va + vb
    p = _exponent(depth)
    va, vb = jnp.exp(log_scale - p * jnp.log(a)), jnp.exp(log_scale - p * jnp.log(b))
    zc = jnp.clip(z, -_SERIES_Z, _SERIES_Z)
    near = scale * sum(2.0 * c * zc ** k for k, c in _series_coeffs(depth))
    beta = jnp.where(jnp.abs(z) < _SERIES_Z, near, va - vb)
    return beta, p * (va / a + vb / b)


def _dpsi(a, e, log_scale, depth):
    """alpha^D [Psi(a + e) - Psi(a)] for one branch (Psi(a) = e^-a, or (D-2)/2 a^(-2/(D-2))),
    without cancellation; +inf where a + e leaves the domain."""
    if depth == 2:
        out = jnp.exp(log_scale - a) * jnp.expm1(-e)
        return jnp.where(jnp.isnan(out), jnp.inf, out)
    q = 2.0 / (depth - 2.0)
    ratio = e / a
    base = (depth - 2.0) / 2.0 * jnp.exp(log_scale - q * jnp.log(a))
    out = base * jnp.expm1(-q * jnp.log1p(jnp.maximum(ratio, -1.0 + 1e-16)))
    out = jnp.where(ratio <= -1.0, jnp.inf, out)
    return jnp.where(jnp.isnan(out), jnp.inf, out)


class _Newton(NamedTuple):
    nu: jax.Array
    z: jax.Array
    a: jax.Array
    b: jax.Array
    it: jax.Array
    res: jax.Array
    stalled: jax.Array


def _newton(X, y, log_scale, start, depth, tol, max_iter):
    """Damped Newton on the dual for one alpha; z and the gaps (a, b) are updated by the same
    increments. Globalized by Armijo backtracking on the dual objective while its decrease is
    above rounding, then on the residual norm (the Newton step is a descent direction of
    ||X beta - y||^2 as well)."""
    ynorm = jnp.linalg.norm(y)
    nu0, z0, a0, b0 = start  # warm start: the gaps are carried, not recomputed from nu

    def residual(z, a, b):
        return X @ _link(z, a, b, log_scale, depth)[0] - y

    def cond(s):  # aim three digits below the tolerance; stop early if Newton stalls
        return (s.res > 1e-3 * tol * ynorm) & (s.it < max_iter) & ~s.stalled

    def body(s):
        beta, w = _link(s.z, s.a, s.b, log_scale, depth)
        r = X @ beta - y
        Hm = (X * w[None, :]) @ X.T  # Hessian of the dual: X diag(alpha^D h_D'(z)) X^T
        dscale = jnp.sqrt(jnp.diag(Hm))
        Hs = Hm / dscale[:, None] / dscale[None, :]
        # In the sparse (degenerate) rich regime the Hessian's condition number exceeds 1e16:
        # fall back to a tiny ridge only where the plain Cholesky factorization breaks down.
        plain = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(Hs, lower=True),
                                           r / dscale)
        ridge = jax.scipy.linalg.cho_solve(
            jax.scipy.linalg.cho_factor(Hs + 1e-13 * jnp.eye(Hm.shape[0]), lower=True),
            r / dscale)
        step = -jnp.where(jnp.all(jnp.isfinite(plain)), plain, ridge) / dscale
        delta = X.T @ step  # z moves by t * delta
        slope = jnp.dot(r, step)  # directional derivative of the dual, < 0
        if depth == 2:  # a trust region in z: at most 10 per step (exp(10) ~ 2e4)
            t0 = jnp.minimum(1.0, 10.0 / jnp.max(jnp.abs(delta)))
        else:  # stay inside |z| < 1
            lim_a = jnp.where(delta > 0, s.a / jnp.where(delta > 0, delta, 1.0), jnp.inf)
            lim_b = jnp.where(delta < 0, s.b / jnp.where(delta < 0, -delta, 1.0), jnp.inf)
            t0 = jnp.minimum(1.0, 0.95 * jnp.minimum(jnp.min(lim_a), jnp.min(lim_b)))
        lin = jnp.sum(jnp.abs(beta * delta)) + jnp.abs(jnp.dot(y, step))
        use_phi = -slope > 1e-10 * lin
        rnorm = jnp.linalg.norm(r)

        def rejected(t):
            change = (jnp.sum(_dpsi(s.a, -t * delta, log_scale, depth))
                      + jnp.sum(_dpsi(s.b, t * delta, log_scale, depth)) - t * jnp.dot(y, step))
            res_t = jnp.linalg.norm(residual(s.z + t * delta, s.a - t * delta, s.b + t * delta))
            return jnp.where(use_phi, ~(change <= 1e-4 * t * slope),
                             ~(res_t <= (1.0 - 1e-4 * t) * rnorm))

        t, k = jax.lax.while_loop(lambda c: rejected(c[0]) & (c[1] < 60),
                                  lambda c: (0.5 * c[0], c[1] + 1), (t0, 0))
        stalled = k >= 60
        t = jnp.where(stalled, 0.0, t)
        z, a, b = s.z + t * delta, s.a - t * delta, s.b + t * delta
        res = jnp.linalg.norm(residual(z, a, b))
        return _Newton(s.nu + t * step, z, a, b, s.it + 1, res, stalled)

    res0 = jnp.linalg.norm(residual(z0, a0, b0))
    s = jax.lax.while_loop(cond, body, _Newton(nu0, z0, a0, b0, jnp.array(0), res0,
                                               jnp.array(False)))
    return _link(s.z, s.a, s.b, log_scale, depth)[0], s


@functools.partial(jax.jit, static_argnames=("depth", "max_iter"))
def _solve_grid(X, y, log_scales, depth, tol, max_iter):
    """Solve for each log(alpha^D) in the order given, warm-starting from the previous nu."""

    def step(start, log_scale):
        beta, s = _newton(X, y, log_scale, start, depth, tol, max_iter)
        return (s.nu, s.z, s.a, s.b), (beta, s.res, s.it, s.nu)

    z0 = jnp.zeros(X.shape[1])
    start = (jnp.zeros(X.shape[0]), z0, z0 if depth == 2 else z0 + 1.0, z0 if depth == 2
             else z0 + 1.0)
    _, (betas, res, its, nus) = jax.lax.scan(step, start, log_scales)
    return betas, res, its, nus


class _Info(NamedTuple):
    residual: np.ndarray
    iterations: np.ndarray
    nu: np.ndarray


def _check_system(X, y):
    X = _validate.nonzero_matrix("X", _validate.as_array("X", X, ndim=2))
    N, d = X.shape
    y = _validate.as_array("y", y, shape=(N,))
    if N < 1 or N >= d:
        raise ValueError(f"X must have fewer rows than columns (N < d), got shape {X.shape}")
    s = np.linalg.svd(np.asarray(X), compute_uv=False)
    if s[-1] <= 1e-12 * s[0]:
        resid = np.linalg.norm(X @ np.linalg.lstsq(np.asarray(X), np.asarray(y), rcond=None)[0]
                               - y)
        ny = float(np.linalg.norm(y))
        # relative tests (scale invariant): inconsistency against |y|, rank against rounding
        # level max(N, d) eps s_max (a cond-4e12 X has full rank: it is ill-conditioned)
        if s[-1] <= max(N, d) * np.finfo(float).eps * s[0]:
            what = (f"X beta = y is inconsistent (relative least-squares residual "
                    f"{resid / max(ny, 1e-300):.3e})" if resid > 1e-8 * ny else
                    "X is rank deficient (smallest singular value at rounding level)")
        else:  # full row rank: X beta = y is consistent whatever y is
            what = (f"X is too ill-conditioned (condition number {s[0] / s[-1]:.2e} above "
                    "1e12): the limit would not be determined to the tolerance")
        raise ValueError(f"X must have full row rank and condition number <= 1e12: {what} "
                         f"(singular values {s[0]:.3e} ... {s[-1]:.3e})")
    if not np.any(np.asarray(y)):
        raise ValueError("y must not be identically zero (the limit is then beta = 0 trivially)")
    return X, y


def implicit_bias_limit(X, y, alpha, depth=2, *, tol=1e-9, max_iter=500, return_info=False):
    r"""The limit :math:`\beta^\infty_{\alpha,D}` of gradient flow on a diagonal linear network.

    Solves :math:`\min_\beta Q^D_\alpha(\beta)` s.t. :math:`X\beta = y` (Woodworth et al. 2020,
    Sec. 4 for :math:`D = 2`, Sec. 5 for :math:`D \ge 3`) by damped Newton's method on
    the dual :math:`\Phi(\nu) = \alpha^D\sum_i H_D((X^\top\nu)_i) - y^\top\nu`, returning
    :math:`\beta = \alpha^D h_D(X^\top\nu^*)`. The flow is *not* simulated.

    A grid of scales is solved in one compiled call, from the largest :math:`\alpha` (where the
    solution is nearly the min-:math:`\ell_2` one and Newton starts at :math:`\nu = 0`) down,
    each solve warm-started from the previous one. Numerics: the per-coordinate gaps
    :math:`1 \mp z` are the solver's state (see the module docstring), so neither ``cosh``
    overflow nor cancellation at the boundary :math:`|z| \to 1` occurs.

    Args:
        X: ``(N, d)`` float64 design matrix with ``N < d`` and full row rank.
        y: ``(N,)`` targets, finite, not all zero.
        alpha: a float > 0, or a 1-D array of them (any order).
        depth: int :math:`D \ge 2`.
        tol: required accuracy: the solver aims at :math:`\|X\beta - y\|_2 \le
            10^{-3}` ``tol`` :math:`\|y\|_2` (or until Newton stalls at rounding level) and
            raises if :math:`\|X\beta - y\|_2 >` ``tol`` :math:`\|y\|_2` or if the relative
            error of :math:`\beta`, estimated as the Newton correction
            :math:`\|W Q (Q^\top W Q)^{-1} R^{-\top} r\| / \|\beta\|` (:math:`X^\top = QR`,
            :math:`W = \alpha^D h_D'(X^\top\nu)`, :math:`r = X\beta - y` computed exactly),
            is above ``tol`` (after a retry on the system with orthonormal rows).
        max_iter: Newton iterations per :math:`\alpha` (a cold start at tiny :math:`\alpha`
            needs about :math:`1.7 \log(1/\alpha)` damped steps for :math:`D = 2`; warm-started
            grid points need a handful).
        return_info: also return ``(residual, iterations, nu)`` per :math:`\alpha`.

    Returns:
        ``(d,)`` float64 array for a scalar ``alpha``, ``(K, d)`` for ``K`` scales (in the order
        given); with ``return_info``, a pair ``(beta, info)``.

    Raises:
        ValueError: ``X`` not a finite real ``(N, d)`` array with ``N < d``, or all zero
            or with only subnormal entries (``max |X|`` below 2.2e-308), or not of full row
            rank with condition number at most 1e12 (rank-deficient, inconsistent, or more
            ill-conditioned systems are refused, each named as such); ``y`` not a finite
            real ``(N,)`` vector or all zero; ``alpha`` not finite and > 0 (a number or a
            1-D array) or subnormal; ``depth`` not an integer >= 2; ``tol`` not a finite number in
            (0, 1) (``tol >= 1`` would accept :math:`\beta = 0`);
            ``max_iter`` not an integer in [1, 1e9]; ``return_info`` not a bool; ``alpha**depth``
            (after the rescaling below) or the limit outside float64's range. ``X`` and ``y``
            with entries beyond ``1e+-100`` are solved in scaled form (the limit for
            :math:`(c_x X', c_y y', \alpha)` is :math:`c_y/c_x` times the limit for
            :math:`(X', y', \alpha (c_x/c_y)^{1/D})`; a limit below the normal range
            2.2e-308 whose rounding to float64 would cost more than ``tol`` of its norm is
            refused as underflowing, e.g. ``X = [[1e200, 1e200]]``, ``y = [1e-200]``, limit
            about 5e-401); an ``X`` so ill-conditioned that
            the limit's own rounding, :math:`\epsilon\,\||X||\beta|\| / \|y\|`, is above
            ``tol / 100`` and Newton (also on the equivalent system with orthonormal rows,
            tried when the first solve fails) does not reach ``tol``; an ``X`` for which the
            estimated error of :math:`\beta` stays above ``tol`` (rows (1, 2, 0.5) and
            (1, 2, 0.5 + 1e-8) at ``tol = 1e-9``: about 1e-8), with that estimate.
        RuntimeError: Newton's method did not reach ``tol`` (message gives the residual and
            the iterations). A run that uses all ``max_iter`` iterations without reaching its
            aim ``1e-3 tol`` counts as not converged whatever its residual (on an
            ill-conditioned ``X`` a residual at ``tol`` does not bound the error in
            :math:`\beta`): it is retried on the system with orthonormal rows, which must
            meet ``tol`` in its own residual, else this is raised.

    Example:
        >>> import numpy as np
        >>> X = np.array([[1.0, 2.0]]); y = np.array([1.0])
        >>> np.round(np.asarray(implicit_bias_limit(X, y, alpha=1e-3)), 4).tolist()  # ~ l1
        [0.0007, 0.4996]
        >>> np.round(np.asarray(implicit_bias_limit(X, y, alpha=1e3)), 4).tolist()   # ~ l2
        [0.2, 0.4]
    """
    depth = _check_depth(depth)
    X, y = _check_system(X, y)
    alphas = _check_alpha(alpha)
    scalar = alphas.ndim == 0
    alphas = np.atleast_1d(alphas)
    max_iter = _validate.integer("max_iter", max_iter, minimum=1, maximum=_MAX_ITER)
    # tol >= 1 would accept beta = 0 (its residual is ||y||): a limit that ignores the data
    _validate.scalar("tol", tol, minimum=0.0, maximum=1.0, allow_min=False, allow_max=False)
    return_info = _validate.boolean("return_info", return_info)
    cx, cy = _validate.max_abs(X), _validate.max_abs(y)
    if not (1e-100 <= cx <= 1e100 and 1e-100 <= cy <= 1e100):
        # scaled form: the limit for (cx X', cy y', alpha) is cy / cx times the limit for
        # (X', y', alpha (cx / cy)^(1/depth)) (Q is homogeneous under these rescalings)
        log_a = np.log(alphas) + (np.log(cx) - np.log(cy)) / depth
        if np.any(np.abs(depth * log_a) > 700):
            worst = float(np.max(np.abs(depth * log_a)) * np.sign(
                depth * log_a[np.argmax(np.abs(depth * log_a))]))
            raise ValueError(f"alpha, X and y are out of range together: the limit depends on "
                             f"them through alpha**depth * max|X| / max|y| = exp({worst:.0f}), "
                             f"outside float64's range (exp(+-700)); got alpha={alpha!r}, "
                             f"max |X| = {cx:.3e}, max |y| = {cy:.3e}: rescale X, y or alpha")
        res = implicit_bias_limit(np.asarray(X) / cx, np.asarray(y) / cy,
                                  np.exp(log_a) if not scalar else float(np.exp(log_a[0])),
                                  depth, tol=tol, max_iter=max_iter, return_info=return_info)
        beta, info = res if return_info else (res, None)
        # beta cy / cx in numpy, one power-of-two shift: a limit below float64's normal range
        # is refused when rounding it costs more than tol (X = [[1e200, 1e200]], y = [1e-200]
        # has the limit [5e-401, 5e-401], was returned as [0, 0])
        beta = np.asarray(beta)
        rows = beta.reshape(-1, beta.shape[-1])
        beta = np.stack([_validate.scaled_result(
            row, cy, cx, tol=tol, what="the limit beta",
            names=f"max |y| / max |X| = {cy:.3e} / {cx:.3e}") for row in rows]).reshape(
                beta.shape)
        beta = jnp.asarray(beta)
        if return_info:
            return beta, info._replace(nu=np.asarray(info.nu) / cx)
        return beta
    with np.errstate(over="ignore", under="ignore"):
        gram = np.asarray(X) @ np.asarray(X).T
    if not np.all(np.isfinite(gram)) or np.abs(np.diag(gram)).min() < 1e-280:
        raise ValueError("X X^T over- or underflows float64 (entries of X too large or too "
                         "small): rescale X, using that the limit for (c X, alpha) is the limit "
                         "for (X, alpha c^(1/depth)) divided by c")
    log_scales = depth * np.log(alphas)
    if np.any(np.abs(log_scales) > 700):
        raise ValueError(f"alpha**depth must stay within float64 range; got alpha={alpha!r}")
    order = np.argsort(-alphas, kind="stable")
    betas, res, its, nus = _solve_grid(X, y, jnp.asarray(log_scales[order]), depth, tol,
                                       max_iter)
    inv = np.argsort(order)
    betas, res, its, nus = betas[inv], np.asarray(res)[inv], np.asarray(its)[inv], nus[inv]
    ynorm = float(jnp.linalg.norm(y))

    def failed(res, its, betas):
        # Newton aims at 1e-3 tol |y| and stops early only when it stalls at rounding level: a
        # run that used every iteration without reaching the aim has not converged, whatever
        # its residual (rows (1, 2, 0.5) and (1, 2, 0.5 + 1e-9), alpha = 1: residual 4e-10
        # after 500 iterations, beta [0.18, 0.37, 0.17] against the limit [0.10, 0.20, 1.00])
        return (~(res <= tol * ynorm) | ~np.all(np.isfinite(np.asarray(betas)), axis=1)
                | ((np.asarray(its) >= max_iter) & ~(res <= 1e-3 * tol * ynorm)))

    bad = failed(res, its, betas)
    if np.any(bad) and X.shape[0] > 1:
        # nearly parallel rows (condition number 1e10: rows differing by 1e-10) make the dual
        # Hessian X W X^T too ill-conditioned for Newton (residual 0.2 after 500 iterations):
        # retry those alphas on the equivalent system with orthonormal rows
        betas, res, its, nus = (np.array(v) for v in (betas, res, its, nus))
        fixed = _whitened_retry(X, y, log_scales[bad], depth, tol, max_iter)
        if fixed is not None:
            betas[bad], res[bad], its[bad], nus[bad], met = fixed
            # on orthonormal rows the dual Hessian Q^T W Q has the condition number of W alone,
            # so there the whitened residual at tol (not only its 1e-3 aim) bounds the error
            retried = np.zeros_like(bad)
            retried[bad] = met
            bad = failed(res, its, betas) & ~(retried & (res <= tol * ynorm))
        betas = jnp.asarray(betas)
        if np.any(bad):
            # the residual of beta rounded to float64 alone is ~ eps |X| |beta|: when that is
            # above tol |y| no float64 answer meets tol (rows (1, 2, 0.5) and (1, 2,
            # 0.5 + 1e-10) with targets (1, 1.5): |beta| ~ 5e9, floor 2e-6 relative)
            k = int(np.flatnonzero(bad)[0])
            b = np.asarray(betas)[k]
            with np.errstate(all="ignore"):
                floor = float(np.finfo(float).eps * np.linalg.norm(np.abs(np.asarray(X))
                                                                   @ np.abs(b)) / ynorm)
            if np.all(np.isfinite(b)) and floor > 1e-2 * tol:
                raise _ill_conditioned_limit(
                    X, tol, alphas[k], f"has max |beta| ~ {np.max(np.abs(b)):.3e}, so rounding "
                    f"beta to float64 alone leaves a relative residual ~ eps |X| |beta| / |y| "
                    f"= {floor:.1e} (the residual reached is {res[k] / ynorm:.1e})")
    if not np.any(bad):
        # a residual <= tol |y| does not bound the error in beta on an ill-conditioned X (rows
        # (1, 2, 0.5) and (1, 2, 0.5 + 1e-8), alpha = 1: residual below tol, beta 1.9e-4 off
        # the limit): estimate the error from the exact residual, retry on orthonormal rows
        # and refuse what still misses tol
        betas = np.array(betas)
        res, its, nus = np.array(res), np.array(its), np.array(nus)
        fe = _forward_errors(X, y, betas, log_scales, depth, tol)
        over = ~(fe <= tol) & np.isfinite(fe)
        if np.any(over) and X.shape[0] > 1:
            fixed = _whitened_retry(X, y, log_scales[over], depth, tol, max_iter)
            if fixed is not None:
                b2, r2, i2, n2, met = fixed
                f2 = _forward_errors(X, y, b2, log_scales[over], depth, tol)
                ok = met & (r2 <= tol * ynorm) & (f2 < fe[over])
                idx = np.flatnonzero(over)[ok]
                betas[idx], res[idx], its[idx], nus[idx], fe[idx] = (
                    b2[ok], r2[ok], i2[ok], n2[ok], f2[ok])
                over = ~(fe <= tol) & np.isfinite(fe)
        betas = jnp.asarray(betas)
        if np.any(over):
            k = int(np.flatnonzero(over)[0])
            raise _ill_conditioned_limit(
                X, tol, alphas[k], f"is determined only to relative error ~ {fe[k]:.1e} "
                f"(estimated from the exact residual {res[k] / ynorm:.1e} through the dual "
                f"Hessian on orthonormal rows)")
    if np.any(bad):
        k = int(np.flatnonzero(bad)[0])
        raise RuntimeError(
            f"implicit_bias_limit: Newton did not converge for alpha={alphas[k]:.3e}, "
            f"depth={depth}: relative residual ||X beta - y|| / ||y|| = {res[k] / ynorm:.3e} "
            f"after {int(its[k])} iterations (tol {tol:.1e})")
    out = betas[0] if scalar else betas
    if return_info:
        if scalar:
            return out, _Info(res[0] / ynorm, its[0], np.asarray(nus[0]))
        return out, _Info(res / ynorm, its, np.asarray(nus))
    return out


def _ill_conditioned_limit(X, tol, alpha, detail):
    """The ValueError of implicit_bias_limit for an X too ill-conditioned for ``tol``."""
    sv = np.linalg.svd(np.asarray(X), compute_uv=False)
    return ValueError(f"X is too ill-conditioned for tol = {tol:.1e}: condition number "
                      f"{sv[0] / sv[-1]:.3e}, and the limit for alpha={alpha:.3e} {detail}; "
                      f"pass a larger tol or rescale or regularize X")


def _dual_weights(betas, log_scales, depth):
    """W = alpha^D h_D'(h_D^-1(beta / alpha^D)) per entry of ``betas`` (K, d), in NumPy: for
    D = 2 it is sqrt(beta^2 + 4 alpha^4); for D >= 3 the gap g = 1 - |z| solves
    g^-k - (2 - g)^-k = |u| (u = beta / alpha^D, k = D / (D - 2)) and lies in
    [(|u| + 1)^(-1/k), min(1, |u|^(-1/k))], where 60 bisection steps in log g find it to a
    relative 1e-12 or better (W is only needed to a few digits: it weights an error estimate)."""
    ls = np.asarray(log_scales, dtype=np.float64)[:, None]
    with np.errstate(all="ignore"):
        if depth == 2:
            return np.hypot(betas, 2.0 * np.exp(ls))
        k = _exponent(depth)
        u = np.abs(betas) * np.exp(-ls)
        lo = -np.log1p(u) / k
        hi = np.minimum(0.0, -np.log(u) / k)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            g = np.exp(mid)
            above = g ** -k - (2.0 - g) ** -k > u  # f decreases in g: the root is above mid
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        g = np.exp(0.5 * (lo + hi))
        return np.exp(ls) * k * (g ** (-k - 1.0) + (2.0 - g) ** (-k - 1.0))


def _forward_errors(X, y, betas, log_scales, depth, tol):
    """Estimated relative error |d| / |beta| of each row of ``betas`` (one per log alpha^D),
    d = W Q (Q^T W Q)^-1 R^-T r: the Newton correction, on the equivalent system with
    orthonormal rows (X^T = Q R), for the residual r = X beta - y, W = alpha^D
    h_D'(h_D^-1(beta / alpha^D)). First order in r, so accurate while it is small; NaN where
    the estimate is not finite.

    Two passes, so that well-determined limits cost a few small matrix products: all rows at
    once with r computed in numpy's extended precision and rounded to float64, whose error is
    at most gamma_{d+1} (|X||beta| + |y|) + eps_64 |r| per entry (gamma_n = n eps / (1 - n
    eps), eps that of the extended format), carried through the operator's norm as a bound
    ``unc`` on the change that rounding can make; rows with ``estimate + unc <= tol`` are
    accepted as they are (the exact estimate is then below tol too), and only the others get
    r computed exactly (:func:`lib.convex._exact_residual`)."""
    Xa, ya = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    try:  # not a declared dependency of lib (it comes with the course's environment)
        from threadpoolctl import threadpool_limits
    except ImportError:
        return _forward_errors_serial(Xa, ya, betas, log_scales, depth, tol)
    # small factorizations and batched products: one BLAS thread (several, on a loaded
    # machine, made this 20 times slower: 3.6 s instead of 0.15 s at N = 100, d = 1000)
    with threadpool_limits(limits=1, user_api="blas"):
        return _forward_errors_serial(Xa, ya, betas, log_scales, depth, tol)


def _forward_errors_serial(Xa, ya, betas, log_scales, depth, tol):
    """:func:`_forward_errors` on float64 arrays (run under a one-thread BLAS limit)."""
    from scipy.linalg import qr, solve_triangular

    from .convex import _exact_residual

    Q, R = qr(Xa.T, mode="economic")
    betas = np.asarray(betas, dtype=np.float64)
    out = np.full(len(betas), np.nan)
    W = _dual_weights(betas, log_scales, depth)
    ok = (np.all(np.isfinite(betas), axis=1) & np.any(betas != 0, axis=1)
          & np.all(np.isfinite(W), axis=1))
    if not np.any(ok):
        return out
    fe, unc = _first_pass(Xa, ya, Q, R, betas[ok], W[ok])
    done = np.isfinite(fe) & np.isfinite(unc) & (fe + unc <= tol)
    idx = np.flatnonzero(ok)
    out[idx[done]] = fe[done]
    for i in idx[~done]:  # near or above tol: the estimate from the exact residual
        with np.errstate(all="ignore"):
            rw = solve_triangular(R, _exact_residual(Xa, betas[i], ya), trans="T")
            try:
                dnu = np.linalg.solve((Q.T * W[i]) @ Q, rw)
            except np.linalg.LinAlgError:
                continue
            f = float(np.linalg.norm(W[i] * (Q @ dnu)) / np.linalg.norm(betas[i]))
        out[i] = f if np.isfinite(f) else np.nan
    return out


def _first_pass(Xa, ya, Q, R, b, w):
    """The float64 estimates of :func:`_forward_errors` for all rows ``b`` (weights ``w``) at
    once, and the bound on what rounding of the residual can change in them."""
    from scipy.linalg import solve_triangular

    d = Xa.shape[1]
    # r in numpy's extended precision (x86: 64-bit mantissa), its rounding error bounded by
    # gamma_{d+1} of that format: ~2000 times below float64's, so the fallback is rare
    ld = np.longdouble
    eps = float(np.finfo(ld).eps)
    gamma = (d + 1) * eps / (1.0 - (d + 1) * eps)
    with np.errstate(all="ignore"):
        A = (Q.T[None, :, :] * w[:, None, :]) @ Q  # Q^T W Q per row, (K, N, N)
        try:
            Ainv = np.linalg.inv(A)
        except np.linalg.LinAlgError:
            Ainv = np.full_like(A, np.nan)
        r = np.asarray(np.asarray(b, ld) @ np.asarray(Xa, ld).T - np.asarray(ya, ld)[None, :],
                       dtype=np.float64)
        rw = solve_triangular(R, r.T, trans="T").T
        B = w[:, :, None] * (Q[None, :, :] @ Ainv)  # W Q (Q^T W Q)^-1, (K, d, N)
        bnorm = np.linalg.norm(b, axis=1)
        fe = np.linalg.norm((B @ rw[:, :, None])[:, :, 0], axis=1) / bnorm
        rinv = 1.0 / np.linalg.svd(R, compute_uv=False)[-1]
        # + float64 rounding of r itself (relative eps / 2 per entry)
        rnd = (gamma * np.linalg.norm(np.abs(b) @ np.abs(Xa).T + np.abs(ya)[None, :], axis=1)
               + np.finfo(np.float64).eps * np.linalg.norm(r, axis=1))
        unc = np.linalg.norm(B, axis=(1, 2)) * rinv * rnd / bnorm
    return fe, unc


def _whitened_retry(X, y, log_scales, depth, tol, max_iter):
    """The limits for ``log_scales`` from the equivalent system with orthonormal rows,
    ``Q^T beta = R^-T y`` (``X^T = Q R``), whose dual Hessian ``Q^T W Q`` has the condition
    number of ``W`` alone. Its tolerance is tightened by ``|y| / (|R| |R^-T y|)`` so that the
    residual on the original system meets ``tol``; returned as ``(betas, res, its, nus, met)`` with
    ``res`` recomputed on the original ``X`` and ``y`` and ``nu = R^-1 nu'`` (and ``met``: the
    whitened residual is at most ``tol_w |R^-T y|``), or None if the
    factorization is not usable."""
    from scipy.linalg import qr, solve_triangular

    Xa, ya = np.asarray(X), np.asarray(y)
    Q, R = qr(Xa.T, mode="economic")
    with np.errstate(all="ignore"):
        yw = solve_triangular(R, ya, trans="T")
        if not np.all(np.isfinite(yw)):
            return None
        ynorm = float(np.linalg.norm(ya))
        tol_w = tol * ynorm / (float(np.linalg.norm(R, 2)) * float(np.linalg.norm(yw)))
    tol_w = max(tol_w, 1e-15)
    order = np.argsort(-np.asarray(log_scales), kind="stable")
    betas, res_w, its, nus = _solve_grid(jnp.asarray(Q.T), jnp.asarray(yw),
                                     jnp.asarray(np.asarray(log_scales)[order]), depth, tol_w,
                                     max_iter)
    inv = np.argsort(order)
    betas, its, nus = np.asarray(betas)[inv], np.asarray(its)[inv], np.asarray(nus)[inv]
    met = np.asarray(res_w)[inv] <= tol_w * float(np.linalg.norm(yw))
    with np.errstate(all="ignore"):
        res = np.linalg.norm(betas @ Xa.T - ya[None, :], axis=1)
        nus = solve_triangular(R, nus.T).T
    return betas, res, its, nus, met


# ----------------------------------------------------------------------------------------------
# The model itself, trained by gradient flow or gradient descent
# ----------------------------------------------------------------------------------------------


def _check_params(params, d=None):
    """The parameter dict {"w_plus", "w_minus"} of real arrays of one shape (..., d), checked
    from dtypes and shapes only (so also on traced arrays); returns the two as float64."""
    if not isinstance(params, Mapping) or not {"w_plus", "w_minus"} <= set(params):
        got = (f"keys {sorted(map(str, params))}" if isinstance(params, Mapping)
               else type(params).__name__)
        raise ValueError(f'params must be a dict with keys "w_plus" and "w_minus", got {got}')
    shape = None if d is None else (d,)
    w_plus = _validate.real_array('params["w_plus"]', params["w_plus"], shape=shape)
    w_minus = _validate.real_array('params["w_minus"]', params["w_minus"], shape=shape)
    if w_plus.ndim < 1 or w_plus.shape != w_minus.shape:
        raise ValueError('params["w_plus"] and params["w_minus"] must have the same shape '
                         f"(..., d), got {w_plus.shape} and {w_minus.shape}")
    return w_plus, w_minus


def beta_of(params, depth=2):
    r"""The linear predictor :math:`\beta(w) = w_+^D - w_-^D` (elementwise powers) of the
    depth-:math:`D` diagonal linear network, computed as
    :math:`(w_+ - w_-)\sum_k w_+^k w_-^{D-1-k}` (no cancellation when :math:`w_+ \approx w_-`).

    The model :math:`f(w, x) = \langle \beta(w), x\rangle` of Woodworth et al. 2020 (Sec. 4
    for :math:`D = 2`, Sec. 5 for :math:`D \ge 3`); Moroshko et al. 2020 train the same model
    on the exponential loss. It works on traced parameters (inside ``jax.grad``, ``vmap``),
    e.g. to build the model for :func:`lib.empirical_ntk`.

    Args:
        params: dict ``{"w_plus": w_+, "w_minus": w_-}`` of real arrays of one shape
            ``(..., d)``, any leading axes (e.g. the snapshot axis of a trajectory), cast to
            float64. Values are not checked (NaN gives NaN).
        depth: int :math:`D \ge 2` (a Python int or a 0-d integer array).

    Returns:
        float64 JAX array ``beta`` of shape ``(..., d)``.

    Raises:
        ValueError: ``params`` is not a dict with keys ``"w_plus"`` and ``"w_minus"``, its
            two arrays are not real numeric, are 0-d or differ in shape; ``depth`` is not an
            integer or is ``< 2``.

    Example:
        >>> import jax.numpy as jnp
        >>> params = {"w_plus": jnp.array([2.0, 1.0]), "w_minus": jnp.array([1.0, 1.0])}
        >>> beta_of(params, depth=3).tolist()  # 2^3 - 1^3, 1^3 - 1^3
        [7.0, 0.0]
    """
    depth = _check_depth(depth)
    w_plus, w_minus = _check_params(params)
    return _power_difference(w_plus, w_minus, depth)


def _beta_stable(up, um, depth):
    """u_+^D - u_-^D = (u_+ - u_-) sum_k u_+^k u_-^(D-1-k): no cancellation when u_+ ~ u_-."""
    s = sum(up ** k * um ** (depth - 1 - k) for k in range(depth))
    return (up - um) * s


def _power_difference(a, b, depth):
    """``a**depth - b**depth`` without cancellation when ``a ~ b`` (or ``a ~ -b``, ``depth``
    even): the factored form ``(a - b) sum_k a^k b^(depth-1-k)`` whose terms all have one sign
    (on ``|a|, |b|`` for even ``depth``; on ``a, b`` of the same sign for odd ``depth``; for odd
    ``depth`` and opposite signs the two powers add and the direct form is exact to rounding)."""
    if depth % 2 == 0:
        return _beta_stable(jnp.abs(a), jnp.abs(b), depth)
    return jnp.where(a * b >= 0, _beta_stable(a, b, depth), a ** depth - b ** depth)


def init_diagonal(d, alpha):
    r"""The unbiased initialization :math:`w_+ = w_- = \alpha\mathbf 1 \in \mathbb R^d`
    (so :math:`\beta(0) = 0`), as the parameter dict used by :func:`square_loss`.

    Woodworth et al. 2020 (Sec. 4 and 5) start the diagonal network there, so that the
    prediction is zero at every scale :math:`\alpha` and only :math:`\alpha` selects the
    regime: kernel for large :math:`\alpha`, rich for small :math:`\alpha`.

    Args:
        d: input dimension, an int >= 1.
        alpha: initialization scale, a finite float > 0.

    Returns:
        dict ``{"w_plus": (d,), "w_minus": (d,)}`` of float64 JAX arrays filled with ``alpha``
        (the same array object twice).

    Raises:
        ValueError: ``d`` not an integer ``>= 1`` or above ``lib._validate.MAX_ELEMENTS``
            (would not fit in memory); ``alpha`` not a finite number > 0, or subnormal (XLA
            would flush it to 0).

    Example:
        >>> params = init_diagonal(3, 0.5)
        >>> params["w_plus"].tolist(), beta_of(params).tolist()
        ([0.5, 0.5, 0.5], [0.0, 0.0, 0.0])
    """
    d = _validate.size("d", d, minimum=1)  # refuses sizes that cannot be allocated (10**30)
    alpha = _validate.positive("alpha", alpha, normal=True)
    w = jnp.full((d,), alpha)
    return {"w_plus": w, "w_minus": w}


def square_loss(params, args):
    r"""The square loss :math:`L(w) = \sum_n (\langle w_+^D - w_-^D, x_n\rangle - y_n)^2` of
    the diagonal network, in the form :func:`lib.flows.gradient_descent` calls.

    The training loss of Woodworth et al. 2020 (Sec. 4 and 5; no factor 1/2, no mean), whose
    gradient flow from :func:`init_diagonal` converges to :func:`implicit_bias_limit` when it
    reaches zero loss. ``depth`` is an argument in ``args``, a float array, so that one
    compiled loss serves every depth.

    Args:
        params: dict ``{"w_plus": (d,), "w_minus": (d,)}`` of real arrays.
        args: tuple ``(X, y, depth)``: ``X`` an ``(N, d)`` real design matrix, ``y`` ``(N,)``
            real targets, ``depth`` a real scalar :math:`D \ge 2` (Python number or 0-d
            array, possibly traced). Only dtypes and shapes are checked, since the loss runs
            traced inside the compiled training loop: NaN or inf values give a NaN or inf loss
            (which :func:`lib.flows.gradient_descent` reports as an error), and a non-integer
            or negative ``depth`` is not detected (use :func:`gradient_descent_path`, which
            validates its arguments).

    Returns:
        A float64 JAX scalar :math:`\ge 0`.

    Raises:
        ValueError: ``params`` not a dict with keys ``"w_plus"`` and ``"w_minus"`` of shape
            ``(d,)``; ``args`` not a triple ``(X, y, depth)``; ``X`` not 2-D, ``y`` not of
            shape ``(N,)``, ``depth`` not a scalar; any of them not real numeric.

    Example:
        >>> import numpy as np
        >>> params = {"w_plus": np.array([1.0, 1.0]), "w_minus": np.array([0.0, 1.0])}
        >>> X, y = np.array([[1.0, 2.0]]), np.array([3.0])
        >>> float(square_loss(params, (X, y, 2.0)))  # (<(1, 0), (1, 2)> - 3)^2
        4.0
    """
    if not isinstance(args, tuple | list) or len(args) != 3:
        raise ValueError("args must be a tuple (X, y, depth)")
    X = _validate.real_array("X", args[0], ndim=2)
    y = _validate.real_array("y", args[1], shape=(X.shape[0],))
    depth = _validate.real_array("depth", args[2], shape=())
    w_plus, w_minus = _check_params(params, X.shape[1])
    beta = w_plus ** depth - w_minus ** depth
    r = X @ beta - y
    return jnp.sum(r ** 2)


def _beta_shifted(delta, alpha, depth):
    """beta for w = alpha + delta, as alpha^D [expm1(D log1p(delta_+/alpha)) - (same for -)]:
    exact in float64 even when the change of w is 1e-16 of alpha (large alpha)."""
    def power(dl):
        return jnp.expm1(depth * jnp.log1p(dl / alpha))
    return alpha ** depth * (power(delta["delta_plus"]) - power(delta["delta_minus"]))


def _shifted_loss(delta, args):
    """c * L(alpha + delta): the same gradient flow as in w (a translation), with time sped up
    by the constant c; args = (X, y, alpha, depth, c), all arrays (no recompilation)."""
    X, y, alpha, depth, c = args
    r = X @ _beta_shifted(delta, alpha, depth) - y
    return c * jnp.sum(r ** 2)


_UNIT = np.linspace(0.0, 1.0, 17)


@functools.partial(jax.jit, static_argnames=("max_steps", "stiff"))
def _integrate_jit(delta, args, rtol, atol, max_steps, stiff):
    def field(t, y, a):
        g = jax.grad(_shifted_loss)(y, a[:5])
        return jax.tree_util.tree_map(jnp.negative, g)

    def reached(t, y, a, **kwargs):
        return _shifted_loss(y, a[:5]) <= a[5]

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field), diffrax.Kvaerno5() if stiff else diffrax.Tsit5(), t0=0.0,
        t1=1.0, dt0=None, y0=delta, args=args,
        saveat=diffrax.SaveAt(ts=jnp.asarray(_UNIT), t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps, event=diffrax.Event(reached), throw=False)
    return sol.ys, sol.ts, sol.result == diffrax.RESULTS.event_occurred, \
        sol.result == diffrax.RESULTS.successful, sol.stats["num_steps"]


def _integrate(delta, args, rtol, atol, max_steps, stiff):
    """One segment of the rescaled flow on [0, 1]: compiled once per shape (the scale, the
    time factor and the target are arguments), stopped by an event at the end of the step
    where the loss reaches the target (no root finding: the state is taken where it is)."""
    ys, ts, hit, ok, n = _integrate_jit(delta, args, rtol, atol, max_steps, stiff)
    if not (bool(hit) or bool(ok)):
        raise RuntimeError(f"gradient_flow_path: the integrator failed after {int(n)} steps "
                           "(max_steps reached or step size collapsed)")
    num_saved = int(np.sum(np.isfinite(np.asarray(ts))))
    final = jax.tree_util.tree_map(lambda x: x[num_saved - 1], ys)
    t_end = float(np.asarray(ts)[num_saved - 1])
    idx = np.minimum(np.arange(_UNIT.shape[0]), num_saved - 1)
    params = jax.tree_util.tree_map(lambda x: x[idx], ys)
    losses = jax.vmap(lambda p: _shifted_loss(p, args[:5]))(params) / args[4]
    return flows.Trajectory(steps=jnp.full(_UNIT.shape, int(n)), times=jnp.asarray(_UNIT),
                            params=params, losses=losses, final=final, num_steps=int(n),
                            converged=bool(hit), diverged=False), t_end


class DiagonalRun(NamedTuple):
    """A simulated run of the diagonal network.

    Attributes:
        times: ``(S,)`` flow times of the snapshots (``steps * step_size`` for GD).
        beta: ``(S, d)`` predictor :math:`w_+^D - w_-^D` at each snapshot.
        losses: ``(S,)`` training loss :math:`L` at each snapshot.
        final_beta: ``(d,)`` predictor when the run stopped.
        converged: whether the loss reached ``target``.
        trajectory: the underlying :class:`lib.flows.Trajectory` (for the flow: of the
            displacements ``delta_plus = w_+ - alpha``, ``delta_minus``, in rescaled time; for
            gradient descent: of ``w_plus``, ``w_minus``).
        stop_time: for the flow, the flow time at the end of the integrator step in which the
            loss first fell to ``target`` (not the crossing time itself, which lies within that
            step); for gradient descent, ``num_steps * step_size``.
    """

    times: jax.Array
    beta: jax.Array
    losses: jax.Array
    final_beta: jax.Array
    converged: bool
    trajectory: flows.Trajectory
    stop_time: float


def _run_args(X, y, alpha, depth):
    depth = _check_depth(depth)
    X = _validate.nonzero_matrix("X", _validate.as_array("X", X, ndim=2))
    y = _validate.as_array("y", y, shape=(X.shape[0],))
    alpha = _validate.positive("alpha", alpha, normal=True)
    return X, y, alpha, depth


def _check_flow_system(X, y, alpha, depth):
    """The flow needs a nonzero X, a nonzero y and a consistent system X beta = y (otherwise
    the loss never reaches a target near 0); checked in scaled form."""
    sx, sy = _validate.max_abs(X), _validate.max_abs(y)
    if X.size == 0 or sx == 0:
        raise ValueError(f"X must have at least one nonzero entry, got shape {X.shape} with "
                         "max |X| = 0")
    with np.errstate(over="ignore", under="ignore"):
        gram = np.asarray(X) @ np.asarray(X).T
    if not np.all(np.isfinite(gram)) or np.abs(np.diag(gram)).max() < 1e-280:
        raise ValueError(f"X X^T over- or underflows float64 (max |X| = {sx:.3e}): rescale X "
                         "(the flow for (c X, alpha) is the flow for (X, alpha c^(1/depth)) "
                         "with beta divided by c and time by c^(2/depth))")
    if sy == 0:
        raise ValueError("y must not be identically zero (the flow then stays at beta = 0)")
    Xn, yn = np.asarray(X) / sx, np.asarray(y) / sy
    resid = np.linalg.norm(Xn @ np.linalg.lstsq(Xn, yn, rcond=None)[0] - yn) / np.linalg.norm(yn)
    if resid > 1e-8:
        from .convex import _min_norm_full_row_rank

        # an ill-conditioned X of full row rank can leave an SVD least-squares residual above
        # 1e-8 although X beta = y has an exact solution: only a residual that the
        # backward-stable QR solution also leaves means inconsistency
        if _min_norm_full_row_rank(Xn, yn) is not None:
            sv = np.linalg.svd(Xn, compute_uv=False)
            raise ValueError(f"X is ill-conditioned (singular values {sv[-1]:.3e} to "
                             f"{sv[0]:.3e} after scaling to max |X| = 1): X beta = y has an "
                             "exact solution (it is consistent), but its least-squares "
                             f"residual in float64 is {resid:.1e} and the flow needs a time of "
                             f"order 1 / s_min^2 = {1 / sv[-1] ** 2:.1e} to reach it; the "
                             "zero-loss target cannot be certified")
    if resid > 1e-8:
        raise ValueError(f"X beta = y is inconsistent (relative least-squares residual "
                         f"{resid:.3e}): the square loss cannot reach 0, so the flow has no "
                         "target to reach")
    with np.errstate(over="ignore", under="ignore"):
        big, small = np.float64(alpha) ** (2 * depth - 2), np.float64(alpha) ** depth
    if not np.isfinite(big) or small == 0:
        raise ValueError(f"alpha**depth must stay within float64 range; got alpha={alpha!r}")


def _time_scale(X, y, alpha, depth):
    """Flow time to leave the initialization and converge, up to a constant: the escape time
    log(1/alpha) / |g| (D = 2) or alpha^(2-D) / (D (D-2) |g|) (D >= 3) with g = 2 X^T y the
    initial gradient in beta, plus the kernel time 1 / (4 D^2 alpha^(2D-2) lambda(X X^T))."""
    g = 2.0 * float(jnp.max(jnp.abs(X.T @ y)))
    ev = np.linalg.eigvalsh(np.asarray(X @ X.T))
    lam = float(ev[ev > 1e-12 * ev[-1]][0])  # smallest positive eigenvalue (X may lack rank)
    kernel = 1.0 / (4.0 * depth ** 2 * alpha ** (2 * depth - 2) * lam)
    if alpha >= 1:
        return kernel
    esc = (np.log(1.0 / alpha) / (2.0 * g) if depth == 2
           else alpha ** (2 - depth) / (depth * (depth - 2) * g))
    return esc + kernel + 1.0 / lam


def gradient_flow_path(X, y, alpha, depth=2, *, target=None, rtol=1e-12, max_segments=40,
                       max_steps=300_000, stiff=False):
    r"""Integrate the gradient flow :math:`\dot w = -\nabla L(w)` of the diagonal network from
    :math:`w_\pm(0) = \alpha\mathbf 1` with :func:`lib.flows.gradient_flow` (diffrax, Tsit5)
    until the loss reaches ``target``.

    This simulates the model itself, not its limit: it is the reference against which
    :func:`implicit_bias_limit` is checked (Woodworth et al. 2020, Sec. 4 and 5). Two
    changes of variables that leave the flow unchanged keep it accurate over the whole range
    of scales: the state is the displacement :math:`\delta = w - \alpha`, with
    :math:`w^D = \alpha^D \exp(D\,\mathrm{log1p}(\delta/\alpha))` (at :math:`\alpha = 10^3`,
    :math:`D = 5` the weights move by :math:`10^{-13}`, below the resolution of :math:`w`
    itself), and time is measured in units of a time scale :math:`T` of the run (the loss is
    multiplied by :math:`T`). Integration proceeds in segments of :math:`T, 2T, 4T, \dots`
    until the loss reaches ``target`` (located by the solver's event handling).

    Args:
        X: ``(N, d)`` design matrix. y: ``(N,)`` targets.
        alpha: scale > 0. depth: int >= 2.
        target: stop when :math:`L \le` ``target``; default
            ``max(1e-20, rtol**2) * ||y||^2``, above the floor that the integrator's own error
            leaves in the loss (about ``rtol**2 * ||y||^2``).
        rtol: relative tolerance of the adaptive solver (the absolute one is ``rtol`` times the
            typical size of :math:`\delta`).
        max_segments: segments of doubling length before giving up.
        max_steps: solver steps per segment.
        stiff: use the implicit solver Kvaerno5 instead of Tsit5. For :math:`D \ge 3` and
            :math:`\alpha^{D-2} \lesssim 10^{-3}` the plateaus between the escapes of successive
            coordinates are long compared with the fast time scale of the escaped ones and the
            explicit solver needs more than ``max_steps``; use :func:`implicit_bias_limit` there.

    Returns:
        A :class:`DiagonalRun`; ``times`` are flow times of :math:`\dot w = -\nabla L`.

    Raises:
        ValueError: ``X`` not a finite real 2-D array, or all zero or with only subnormal entries
            (``max |X|`` below 2.2e-308); ``y`` not a finite real
            ``(N,)`` vector or all zero; ``X beta = y`` inconsistent (no zero-loss point), or
            consistent but so ill-conditioned that its float64 least-squares residual
            exceeds 1e-8 (the message says which, with the singular values);
            ``alpha`` not a finite number > 0, subnormal, or ``alpha**depth`` outside
            float64's range; ``depth`` not an integer >= 2; ``target`` not a finite number
            > 0 or subnormal (XLA would flush it to 0); ``rtol`` not in
            ``(0, 1)``; ``max_segments``/``max_steps`` not integers >= 1 (``max_steps`` at most
            1e9); ``stiff`` not a bool.
        RuntimeError: the integrator failed (the message names the target and ``rtol``), or
            the loss did not reach ``target`` within
            ``max_segments`` (the message gives the loss reached), or, checked after the fact,
            the final ``beta`` does not satisfy :math:`L \le` ``target`` (magnitudes of ``X``
            or ``y`` far from 1, e.g. 1e150, that the flow cannot resolve).

    Example:
        >>> import numpy as np
        >>> run = gradient_flow_path(np.array([[1.0, 2.0]]), np.array([1.0]), alpha=1.0)
        >>> bool(run.converged), round(float(run.final_beta @ np.array([1.0, 2.0])), 9)
        (True, 1.0)
    """
    X, y, alpha, depth = _run_args(X, y, alpha, depth)
    max_segments = _validate.integer("max_segments", max_segments, minimum=1)
    rtol = _validate.scalar("rtol", rtol, minimum=0.0, maximum=1.0, allow_min=False,
                            allow_max=False)
    max_steps = _validate.size("max_steps", max_steps, minimum=1, maximum=10**9)
    stiff = _validate.boolean("stiff", stiff)
    _check_flow_system(X, y, alpha, depth)
    default_target = target is None
    if target is None:
        # the loss floor the integrator's own error leaves is about rtol^2 ||y||^2 (measured
        # on rows (1, 2, 0.5): rtol = 1e-10 .. 1e-4 reach rtol^2 ||y||^2, not 1e-4 of it), so
        # below rtol = 1e-10 the target 1e-20 ||y||^2 is reachable, above it rtol^2 ||y||^2
        target = max(1e-20, rtol ** 2) * _validate.norm(y) ** 2
        if not target > 0:
            raise ValueError(f"y is too small (||y|| = {_validate.norm(y):.3e}): the default "
                             "target max(1e-20, rtol^2) ||y||^2 underflows; rescale y or pass "
                             "target")
    else:
        target = _validate.positive("target", target, normal=True)
    T = _time_scale(X, y, alpha, depth)
    # typical size of the displacement at the end: |beta|^(1/D) (small alpha) or
    # |beta| / (D alpha^(D-1)) (large alpha), with |beta| ~ the min-l2 solution's entries
    b2 = float(jnp.max(jnp.abs(jnp.linalg.lstsq(X, y)[0])))
    size = min(b2 ** (1.0 / depth), b2 / (depth * alpha ** (depth - 1)))
    atol = 1e-3 * rtol * size
    delta = {"delta_plus": jnp.zeros(X.shape[1]), "delta_minus": jnp.zeros(X.shape[1])}
    t0, seg_T, pieces, times, converged = 0.0, T, [], [], False
    for _ in range(max_segments):
        args = (X, y, jnp.float64(alpha), jnp.float64(depth), jnp.float64(seg_T),
                jnp.float64(target * seg_T))
        try:
            traj, t_end = _integrate(delta, args, jnp.float64(rtol), jnp.float64(atol),
                                     max_steps, stiff)
        except RuntimeError as err:
            which = ("the default target max(1e-20, rtol^2) ||y||^2" if default_target
                     else "target")
            raise RuntimeError(f"{err}, on the way to {which} = {target:.3e} with rtol = "
                               f"{rtol:.1e}: a target below about rtol^2 ||y||^2 = "
                               f"{rtol ** 2 * _validate.norm(y) ** 2:.1e} may lie under the loss "
                               f"floor the integrator's own error leaves; pass a larger target "
                               f"or a smaller rtol (or raise max_steps, use stiff=True)") \
                from err
        pieces.append(traj)
        times.append(t0 + seg_T * np.asarray(_UNIT))
        delta = traj.final
        t0 += seg_T
        seg_T *= 2.0
        if traj.converged:
            converged = True
            t_stop = t0 - seg_T / 2.0 + seg_T / 2.0 * t_end
            break
    params = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *[p.params for p in pieces])
    beta = jax.vmap(lambda p: _beta_shifted(p, alpha, depth))(params)
    losses = jnp.sum((beta @ X.T - y[None, :]) ** 2, axis=1)
    final_beta = _beta_shifted(delta, alpha, depth)
    if not converged:
        raise RuntimeError(
            f"gradient_flow_path: loss {float(losses[-1]):.3e} still above target {target:.1e} "
            f"at flow time {t0:.3e} (alpha={alpha}, depth={depth})")
    # checked after the fact: the reported result must satisfy the stated tolerance, up to
    # the rounding of the residual itself (1e-14 of |X| |beta| + |y|, far below sqrt(target)
    # unless the magnitudes are extreme)
    with np.errstate(over="ignore", invalid="ignore"):
        Xa, ba, ya = np.asarray(X), np.asarray(final_beta), np.asarray(y)
        final_loss = _validate.norm(Xa @ ba - ya) ** 2
        rounding = 1e-14 * (_validate.norm(np.abs(Xa) @ np.abs(ba)) + _validate.norm(ya))
        allowed = (np.sqrt(target) + rounding) ** 2
    if not (np.all(np.isfinite(ba)) and final_loss <= allowed and t_stop >= 0):
        raise RuntimeError(
            f"gradient_flow_path: the integrator stopped but the loss of the final beta is "
            f"{final_loss:.3e} > target {target:.1e} (alpha={alpha}, depth={depth}, max |X| = "
            f"{_validate.max_abs(X):.3e}, max |y| = {_validate.max_abs(y):.3e}): the "
            "magnitudes are outside the range the rescaled flow resolves; rescale X and y "
            "towards 1 (the flow for (c X, alpha) is the flow for (X, alpha c^(1/depth)) "
            "with beta divided by c and time by c^(2/depth))")
    traj = flows.Trajectory(steps=jnp.concatenate([p.steps for p in pieces]),
                            times=jnp.asarray(np.concatenate(times)), params=params,
                            losses=losses, final=delta,
                            num_steps=sum(p.num_steps for p in pieces), converged=True,
                            diverged=False)
    return DiagonalRun(traj.times, beta, losses, final_beta, True, traj, t_stop)


def gradient_descent_path(X, y, alpha, depth=2, *, step_size, num_steps, snapshots=None,
                          target=None, on_divergence="raise"):
    r"""Gradient descent :math:`w_{k+1} = w_k - \eta\nabla L(w_k)` on the diagonal network from
    :math:`w_\pm(0) = \alpha\mathbf 1`, through :func:`lib.flows.gradient_descent`.

    With a small step it tracks the flow (whose limit is Woodworth et al. 2020, Sec. 4
    and 5); with a large one its limit differs from the flow's (the chapter measures how). The
    loss is :func:`square_loss`.

    Args:
        X: ``(N, d)`` finite real design matrix.
        y: ``(N,)`` finite real targets.
        alpha: initialization scale, a finite float > 0.
        depth: int :math:`D \ge 2`.
        step_size: :math:`\eta`, a finite float > 0.
        num_steps: maximal number of steps, an int >= 0.
        snapshots: steps at which to record the state, as in
            :func:`lib.flows.gradient_descent` (an int ``k`` for about ``k`` geometrically
            spaced steps, default 64, or an increasing int array in ``[0, num_steps]``).
        target: stop as soon as :math:`L \le` ``target`` (default: never, run all steps).
        on_divergence: ``"raise"`` (default) or ``"stop"`` (stop and flag the trajectory's
            ``diverged``) when the loss or the gradient becomes non-finite.

    Returns:
        A :class:`DiagonalRun` with ``times = steps * step_size``, ``beta`` of shape
        ``(S, d)`` for the ``S`` snapshots, ``converged`` whether ``target`` was reached and
        ``stop_time = num_steps_taken * step_size``.

    Raises:
        ValueError: ``X`` not 2-D, ``y`` not of shape ``(N,)``, either non-finite or not
            real numeric; ``X`` all zero or with only subnormal entries (``max |X|`` below
            2.2e-308); ``alpha`` not a finite number > 0; ``depth`` not an integer ``>= 2``;
            ``step_size`` not finite and > 0; ``num_steps`` not an integer ``>= 0``;
            malformed ``snapshots``; ``on_divergence`` not ``"raise"`` or ``"stop"``; the
            loss not finite at the initialization (e.g. ``alpha**depth`` overflows).
        lib.flows.DivergenceError: the loss or the gradient became non-finite (step too
            large) and ``on_divergence="raise"``.

    Example:
        >>> import numpy as np
        >>> run = gradient_descent_path(np.array([[1.0, 2.0]]), np.array([1.0]), alpha=1.0,
        ...                             step_size=0.01, num_steps=2000)
        >>> round(float(run.losses[-1]), 6)
        0.0
    """
    X, y, alpha, depth = _run_args(X, y, alpha, depth)
    with np.errstate(over="ignore", under="ignore"):
        if not np.isfinite(np.float64(alpha) ** depth):
            raise ValueError(f"alpha**depth overflows float64 (alpha={alpha!r}, "
                             f"depth={depth}): the weights w_plus^D, w_minus^D are not finite")
    args = (X, y, jnp.float64(depth))
    traj = flows.gradient_descent(square_loss, init_diagonal(X.shape[1], alpha),
                                  step_size=step_size, num_steps=num_steps, snapshots=snapshots,
                                  target=target, loss_args=args, on_divergence=on_divergence)
    return DiagonalRun(traj.times, beta_of(traj.params, depth), traj.losses,
                       beta_of(traj.final, depth), traj.converged, traj,
                       float(traj.num_steps * step_size))
