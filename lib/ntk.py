r"""Empirical tangent kernels and linearized models, computed with JAX alone.

For a model :math:`f(\theta, x)` with scalar output, the (empirical, or finite-width) neural
tangent kernel at parameters :math:`\theta` is

.. math::
    K_\theta(x, x') = \langle \nabla_\theta f(\theta, x), \nabla_\theta f(\theta, x') \rangle,

(Jacot et al. 2018; Chizat, Oyallon & Bach 2019). Training the *linearization*

.. math::
    \bar f(\theta, x) = f(\theta_0, x)
        + \langle \nabla_\theta f(\theta_0, x), \theta - \theta_0\rangle

by gradient descent on the square loss is kernel gradient descent with :math:`K_{\theta_0}`
from the initial function :math:`f(\theta_0, \cdot)` (converging, from
:math:`f(\theta_0, \cdot) = 0`, to the minimum-norm kernel interpolant); the kernel
(lazy) regime is when training the model itself stays close to training its linearization.

The kernel is computed from Jacobians of chunks of the inputs, so that memory stays bounded by
``chunk_size x num_params`` floats (width 10^4 and 10^3 inputs fit in a few hundred MB).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from . import _validate

PyTree = Any

__all__ = ["empirical_ntk", "linearize", "relu_ntk"]


def _check_model(f, params, x, x_name="x1"):
    _validate.scalar_model("f", f, params, x.shape[1:], x_name=x_name)


def _jacobian(f, params, x):
    """Rows are grad_theta f(theta, x_i), flattened: shape (n, num_params)."""
    flat, unravel = ravel_pytree(params)

    def g(theta, xi):
        return f(unravel(theta), xi)

    return jax.vmap(jax.grad(g), in_axes=(None, 0))(flat, x)


_jacobian_jit = jax.jit(_jacobian, static_argnums=0)


def empirical_ntk(f: Callable, params: PyTree, x1, x2=None, *, chunk_size: int = 128):
    r"""The empirical tangent kernel matrix :math:`K_{ij} = \langle\nabla_\theta f(\theta, x^1_i),
    \nabla_\theta f(\theta, x^2_j)\rangle`.

    Args:
        f: model ``f(params, x)`` returning a scalar for one input ``x`` (not a batch).
        params: parameters :math:`\theta`, any pytree of float arrays.
        x1: ``(n1, ...)`` float inputs; the leading axis indexes points.
        x2: ``(n2, ...)`` inputs with the same trailing shape; defaults to ``x1``.
        chunk_size: number of points whose Jacobian is held in memory at once (>= 1).

    Returns:
        ``(n1, n2)`` float64 array. With ``x2=None`` it is symmetric positive semidefinite.

    Raises:
        ValueError: ``f`` not callable, failing on ``params`` and one row of ``x1`` (a shape
            mismatch between model, parameters and inputs) or not returning a real scalar for
            one input; ``params`` empty or with a leaf that is not a finite real array;
            inputs that are not finite real arrays, with different trailing shapes or fewer
            than one point; ``chunk_size`` not an integer >= 1.

    Example:
        >>> import jax.numpy as jnp
        >>> f = lambda w, x: jnp.dot(w, x)            # linear model: K(x, x') = <x, x'>
        >>> x = jnp.eye(3)
        >>> empirical_ntk(f, jnp.ones(3), x).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    x1 = _validate.as_array("x1", x1)
    x2 = x1 if x2 is None else _validate.as_array("x2", x2)
    for name, x in (("x1", x1), ("x2", x2)):
        if x.ndim < 1 or x.shape[0] < 1:
            raise ValueError(f"{name} must have a leading axis of points, got shape {x.shape}")
    if x1.shape[1:] != x2.shape[1:]:
        raise ValueError(f"x1 and x2 must share their trailing shape, got {x1.shape} and "
                         f"{x2.shape}")
    chunk_size = _validate.integer("chunk_size", chunk_size, minimum=1)
    _validate.function("f", f, "f(params, x)", hashable=True)
    params = _real_params("params", params)
    _check_model(f, params, x1)
    if x2 is not x1:
        _check_model(f, params, x2, "x2")

    def chunks(x):
        return [x[i:i + chunk_size] for i in range(0, x.shape[0], chunk_size)]

    same = x2 is x1
    blocks2 = chunks(x2)
    rows = []
    for i, c1 in enumerate(chunks(x1)):
        j1 = _jacobian_jit(f, params, c1)
        row = []
        for j, c2 in enumerate(blocks2):
            if same and j < i:
                row.append(rows[j][i].T)  # symmetric: reuse the block already computed
                continue
            j2 = j1 if (same and i == j) else _jacobian_jit(f, params, c2)
            row.append(j1 @ j2.T)
        rows.append(row)
    K = jnp.block(rows)
    if not bool(jnp.all(jnp.isfinite(K))):
        raise ValueError("the tangent kernel has non-finite entries: the model or its gradient "
                         "overflows or is NaN at these params and inputs")
    return K


def _real_params(name, params):
    """Cast a pytree of real arrays to float64; reject empty, complex or non-finite leaves."""
    return _validate.real_tree(name, params)


def linearize(f: Callable, params0: PyTree) -> Callable:
    r"""The first-order Taylor model of ``f`` around ``params0``.

    .. math::
        \bar f(\theta, x) = f(\theta_0, x) + \partial_\theta f(\theta_0, x)\,[\theta - \theta_0]

    computed with one ``jax.jvp`` (no Jacobian is formed). Its tangent kernel is
    :math:`K_{\theta_0}` at every :math:`\theta`, which is what makes training it a kernel method
    (Chizat, Oyallon & Bach 2019).

    Args:
        f: model ``f(params, x)``, any output shape (scalar outputs are not required here).
        params0: the expansion point :math:`\theta_0`, a pytree of finite real arrays (cast to
            float64), with at least one leaf.

    Returns:
        A function ``f_lin(params, x)`` with the same signature and output shape as ``f``;
        ``f`` is evaluated at ``params0`` on every call. ``f_lin`` raises ``ValueError`` when
        ``params`` does not have the pytree structure and leaf shapes of ``params0`` or has a
        complex or non-numeric leaf, or when ``x`` is not a real numeric array (complex,
        bool, a string, None, objects) or does not fit ``f`` (dtype checks only, so it also
        works under ``jax.jit``/``grad``; values are not checked).

    Raises:
        ValueError: ``f`` is not callable; ``params0`` has no leaf, or a leaf that is
            complex, not numeric or not finite (NaN or inf).

    Example:
        >>> import jax.numpy as jnp
        >>> f = lambda w, x: jnp.sin(w * x)
        >>> f_lin = linearize(f, 0.0)
        >>> float(f_lin(0.1, 2.0))      # 0 + cos(0) * 2 * 0.1
        0.2
    """
    _validate.function("f", f, "f(params, x)")
    params0 = _real_params("params0", params0)

    def f_lin(params, x):
        # dtype checks only (trace-safe): complex params or inputs would otherwise lose their
        # imaginary part in the float64 cast with only a warning
        params = _validate.real_tree("params", params, finite=False)
        if jax.tree_util.tree_structure(params) != jax.tree_util.tree_structure(params0):
            raise ValueError("params must have the pytree structure of params0")
        for leaf, leaf0 in zip(jax.tree_util.tree_leaves(params),
                               jax.tree_util.tree_leaves(params0), strict=True):
            if leaf.shape != leaf0.shape:
                raise ValueError(f"params must have the shapes of params0, got a leaf of shape "
                                 f"{leaf.shape} for {leaf0.shape}")
        if x is None or not jax.tree_util.tree_leaves(x):
            raise ValueError(f"x must be a real numeric array, got {x!r:.60}")
        for leaf in jax.tree_util.tree_leaves(x):
            _validate.real_array("x", leaf)  # dtype only: refuses complex, str, bool, objects
        delta = jax.tree_util.tree_map(lambda p, p0: p - p0, params, params0)
        try:
            out0, tangent = jax.jvp(lambda p: f(p, x), (params0,), (delta,))
        except TypeError as err:
            raise ValueError(f"f(params0, x) fails for x of shape {np.shape(x)}: "
                             f"{type(err).__name__}: {str(err)[:300]}; check that x matches "
                             "the model") from err
        return out0 + tangent

    return f_lin


def relu_ntk(x1, x2=None, *, kappa: float = 1.0):
    r"""Closed-form tangent kernel of an infinitely wide two-layer ReLU network.

    For :math:`f(\theta, x) = \frac{1}{\sqrt m}\sum_j a_j (b_j^\top x)_+` with :math:`b_j`
    uniform on the sphere :math:`\mathbb{S}^{d-1}` and :math:`|a_j| = \kappa` (the
    initialization of :func:`lib.init_two_layer` with ``scale=1``, evaluated by
    :func:`lib.two_layer` with ``output_scale=sqrt(m)``), the empirical tangent kernel is an
    average of :math:`m` i.i.d. terms and converges as :math:`m \to \infty`, by the law of
    large numbers, to (Chizat 2020, blog Sec. 6; Jacot et al. 2018, Theorem 1, prove the
    analogous limit for Gaussian weights)

    .. math::
        K_\kappa(x, x') = \frac{\|x\|\,\|x'\|}{2\pi d}\,\big(\sin\varphi
        + (\pi - \varphi)\cos\varphi\big)
        + \kappa^2\, \langle x, x'\rangle\, \frac{\pi - \varphi}{2\pi},

    where :math:`\varphi` is the angle between :math:`x` and :math:`x'`. The first term is the
    gradient with respect to the output weights: :math:`k_1 / (2d)`, where
    :math:`k_1(x, x') = \frac1\pi \|x\|\,\|x'\|\,(\sin\varphi + (\pi-\varphi)\cos\varphi)` is
    the arc-cosine kernel of degree 1 in Cho & Saul's (2009) normalization, and the factor
    :math:`1/d` comes from :math:`\mathbb{E}[b b^\top] = I/d` on the sphere. The second is the
    gradient with respect to the input weights,
    :math:`\kappa^2 \langle x, x'\rangle\, \mathbb{P}(b^\top x > 0, b^\top x' > 0)`.
    At initialization scale :math:`\sigma` the kernel is :math:`\sigma^2 K_\kappa`.

    On the sphere without a bias coordinate this kernel is not universal: its Legendre
    coefficients of odd degree :math:`\ge 3` vanish (Bietti & Mairal 2019). With a constant
    coordinate appended to the inputs every degree up to 12 has a positive coefficient (both
    measured in the lazy-training chapter, Experiment 5, at :math:`d = 3`, degrees 0 to 12).

    Args:
        x1: ``(n1, d)`` float inputs (``d >= 2``; append a constant coordinate for a bias).
        x2: ``(n2, d)`` inputs; defaults to ``x1``.
        kappa: output-weight scale :math:`\kappa \ge 0`.

    Returns:
        ``(n1, n2)`` float64 kernel matrix, positive semidefinite when ``x2`` is ``None``.
        A zero input gives a zero row (the angle is then irrelevant).

    Raises:
        ValueError: inputs not finite real 2-D arrays, different ``d``, ``d < 2``, ``kappa``
            not a finite number >= 0 (Python ints of any size are converted; ``kappa**2``
            beyond float64's range is handled in scaled form), or a kernel entry beyond
            float64's range. Pairs with :math:`|\cos\varphi| > 1/2` get an accurate angle:
            the angle :math:`\alpha` to the nearer of :math:`\pm x'` is
            :math:`\operatorname{atan2}(\|x \times x'\|, |\langle x, x'\rangle|)`, with
            :math:`\|x \times x'\| = \|x'\|\,\|w_\perp\|` for
            :math:`w_l = (x_l x'_k - x_k x'_l) / x'_k` (:math:`k` the largest entry of
            :math:`x'`; 2 x 2 minors from error-free products, exactly 0 for exactly
            (anti)parallel inputs) and :math:`w_\perp` its part orthogonal to :math:`x'`
            (an exact-product projection), accurate to rounding relative to the angle
            itself, where ``arccos`` of a cosine near 1 loses half the digits. For
            :math:`\cos\varphi < -1/2`, :math:`\alpha = \pi - \varphi` and
            :math:`\sin\varphi + (\pi-\varphi)\cos\varphi = \sin\alpha - \alpha\cos\alpha`
            is its Taylor series :math:`\alpha^3/3 - \alpha^5/30 + \dots` (the direct sum
            cancels: relative error ~ eps / (pi - phi)^2, 6.8e-10 at
            :math:`\pi - \varphi = 0.0142`). Each of the two terms is then accurate to a few
            eps relative to itself at every angle (1.7e-15 at worst against 60-digit
            references, d = 2 to 16); exactly antiparallel inputs give exactly 0 (never a
            negative rounding residue). Where the two terms nearly cancel (``kappa > 0``,
            :math:`\varphi > \pi/2`) the sum is accurate relative to the terms.
            The kernel is computed on each input row
            scaled to a largest entry near 1 (it is positively homogeneous of degree 1 in
            each input), so entries of any magnitude, also rows of very different scales
            (1 and 1e-160), give the correct value within float64's range.

    Example:
        >>> import jax.numpy as jnp
        >>> x = jnp.array([[1.0, 0.0]])
        >>> float(relu_ntk(x, kappa=1.0)[0, 0])    # phi = 0: 1/(2 d) + kappa^2 / 2
        0.75
    """
    x1 = _validate.as_array("x1", x1, ndim=2)
    x2 = x1 if x2 is None else _validate.as_array("x2", x2, ndim=2)
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension d, got {x1.shape} and "
                         f"{x2.shape}")
    d = x1.shape[1]
    if d < 2:
        raise ValueError(f"the inputs must have dimension d >= 2 (sphere S^(d-1)), got d = {d}")
    kappa = _validate.positive("kappa", kappa, allow_zero=True)
    same = x2 is x1  # K(x1, x1): computed exactly symmetric
    # K is positively homogeneous of degree 1 in each input (K(c x, x') = c K(x, x') for c > 0):
    # compute it on rows scaled to a largest entry in [0.5, 1) by powers of two (exact; no
    # overflow of the norms for entries above 1e154 nor underflow below 1e-154, also when the
    # rows have very different scales) and multiply back row by row
    r1 = _validate.pow2_of(np.max(np.abs(np.asarray(x1)), axis=1))
    r2 = _validate.pow2_of(np.max(np.abs(np.asarray(x2)), axis=1))
    s1, s2 = _validate.max_abs(x1), _validate.max_abs(x2)
    # the scaling and the products are done in numpy: XLA on CPU flushes subnormal numbers to
    # zero, so inside JAX inputs below ~2.2e-308 would vanish
    u1 = np.asarray(x1) / r1[:, None]
    u2 = np.asarray(x2) / r2[:, None]
    with np.errstate(over="ignore"):
        kappa2 = np.float64(kappa) ** 2
    if np.isfinite(kappa2) and (kappa2 == 0 or kappa2 >= np.finfo(np.float64).tiny):
        K = np.asarray(_relu_ntk_unit(jnp.asarray(u1), jnp.asarray(u2), float(kappa2), d))
        K = _near_parallel(K, u1, u2, float(kappa2), d, symmetric=same)
        with np.errstate(over="ignore", under="ignore"):
            out = (K * r1[:, None]) * r2[None, :]  # powers of two: exact unless out of range
    else:
        # kappa^2 beyond float64's range (kappa above ~1.3e154 or below ~1.5e-154): the two
        # terms separately, the second scaled as (kappa r1_i) (kappa r2_j) K_2
        first = _near_parallel(np.asarray(_relu_ntk_unit(jnp.asarray(u1), jnp.asarray(u2),
                                                         0.0, d)), u1, u2, 0.0, d,
                               symmetric=same)
        second = _relu_second(u1, u2, symmetric=same)
        with np.errstate(over="ignore", under="ignore"):
            out = (first * r1[:, None]) * r2[None, :] + \
                (second * (np.float64(kappa) * r1)[:, None]) * (np.float64(kappa) * r2)[None, :]
    if not np.all(np.isfinite(out)):
        raise ValueError(f"the kernel overflows float64 (max |x1| = {s1:.3e}, max |x2| = "
                         f"{s2:.3e}, kappa = {kappa:.3e}): rescale the inputs (K is bilinear "
                         "in x1, x2)")
    return jnp.asarray(out)


_NEAR = 0.5  # pairs with |cos| above this get the accurate angle (pi/3 of x' or of -x')


def _pivots(u2):
    """Index of the largest absolute entry of each row of ``u2``."""
    return np.argmax(np.abs(u2), axis=1)


def _pair_angles(u1, u2, i, j, inner, piv):
    """Angle between the rows u1[i] and +-u2[j] (whichever is nearer: the angle to u2[j] when
    ``inner >= 0``, to -u2[j] otherwise, i.e. min(phi, pi - phi)), accurate to rounding
    relative to the angle itself, and exactly 0 when the rows are exactly (anti)parallel.

    With v = u2[j] and its largest entry v_k (``piv``), u = (u_k / v_k) v + w' where
    w'_l = (u_l v_k - u_k v_l) / v_k: the 2 x 2 minors with the pivot, each formed from two
    error-free products (Dekker's TwoProduct), so it is accurate to rounding relative to
    itself and exactly 0 for exactly parallel rows (then u_l v_k = u_k v_l exactly, and the
    two splits are equal). The distance of u to the line of v is the norm of the part of w'
    orthogonal to v, w' - s v with s = <w', v> / <v, v> (the product s v exact), and
    |u x v| = |v| |w' - s v|. Since w'_k = 0 and |v_k| >= |v| / sqrt(d), that part is at least
    |w'| / sqrt(d): no cancellation beyond sqrt(d), and the rounding of s only adds a
    component along v (second order in the norm). The angle is atan2(|u x v|, |<u, v>|),
    with |<u, v>| >= |u| |v| / 2 here (``|cos| > 0.5``), so its rounding is relative too."""
    u, v = u1[i], u2[j]
    k = piv[j]
    rows = np.arange(i.size)
    uk, vk = u[rows, k][:, None], v[rows, k][:, None]
    p1, e1 = _validate.two_product(u, vk)
    p2, e2 = _validate.two_product(uk, v)
    w = ((p1 - p2) + (e1 - e2)) / vk
    vv = np.sum(v * v, axis=1)
    s = np.sum(w * v, axis=1) / vv
    w = _minus_scaled(w, s, v)
    cross = np.linalg.norm(w, axis=1) * np.sqrt(vv)
    return np.arctan2(cross, np.abs(inner))


_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant for float64


def _minus_scaled(u, t, v):
    """``u - t[:, None] * v`` with the product exact: ``t v = p + q`` (Dekker's TwoProduct, for
    entries of moderate size), then ``(u - p) - q``, so the result is accurate to rounding
    relative to itself even when ``u`` and ``t v`` nearly cancel."""
    a, b = np.broadcast_arrays(t[:, None], v)
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    q = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return (u - p) - q


def _geometry(u1, u2):
    """Row norms products, inner products and cosines of the rows of u1 and u2 (numpy)."""
    n1, n2 = np.linalg.norm(u1, axis=1), np.linalg.norm(u2, axis=1)
    norms = n1[:, None] * n2[None, :]
    inner = u1 @ u2.T
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.clip(inner / np.where(norms > 0, norms, 1.0), -1.0, 1.0)
    return norms, inner, cos


def _near_parallel(K, u1, u2, kappa2, d, *, chunk=1 << 14, symmetric=False):
    """Recompute the entries of K whose cosine is above 0.5 in absolute value with the exact
    angle (:func:`_pair_angles`); the other entries are left bit-for-bit unchanged.

    For ``cos > 0.5`` (phi < pi/3) the angle phi and the closed form directly (no
    cancellation: sin phi + (pi - phi) cos phi >= 1.4); for ``cos < -0.5``, with
    e = pi - phi < pi/3 the angle to -x' (computed directly, not as pi - phi),
    sin(phi) + (pi - phi) cos(phi) = sin e - e cos e = e^3/3 - e^5/30 + ..., by its series
    (the direct sum cancels: relative error ~ eps / e^2, 6.8e-10 at e = 0.0142).
    ``symmetric`` (u1 is u2): the entries above the diagonal are computed and mirrored, so K
    stays exactly symmetric (the pivot of the accurate angle is taken in the second row)."""
    norms, inner, cos = _geometry(u1, u2)
    mask = (np.abs(cos) > _NEAR) & (norms > 0)
    if symmetric:
        mask = np.triu(mask)
    ii, jj = np.nonzero(mask)
    K = np.array(K, copy=True)
    piv = _pivots(u2)
    for start in range(0, ii.size, chunk):
        i, j = ii[start:start + chunk], jj[start:start + chunk]
        dot = inner[i, j]
        a = _pair_angles(u1, u2, i, j, dot, piv)  # phi, or pi - phi when dot < 0
        anti = dot < 0
        shape = np.where(anti, _sin_minus_x_cos(np.where(anti, a, 0.0)),
                         np.sin(a) + (np.pi - a) * np.cos(a))
        gap = np.where(anti, a, np.pi - a)  # pi - phi
        K[i, j] = norms[i, j] * shape / (2 * np.pi * d) + kappa2 * dot * gap / (2 * np.pi)
        if symmetric:
            K[j, i] = K[i, j]
    return K


def _sin_minus_x_cos(e):
    """sin(e) - e cos(e) for 0 <= e <= 1.1 by its Taylor series sum_k (-1)^(k+1) 2k
    e^(2k+1) / (2k+1)! (alternating, terms decreasing; 12 terms: truncation below 1e-24
    relative at e = 1.1), without the cancellation of the direct difference (which is
    ~e^3/3); exactly 0 at e = 0."""
    e = np.asarray(e, dtype=np.float64)
    e2 = e * e
    total = np.zeros_like(e)
    term = e  # e^(2k+1) / (2k+1)! for k = 0
    for k in range(1, 13):
        term = term * e2 / ((2 * k) * (2 * k + 1))
        total = total + (-1) ** (k + 1) * (2 * k) * term
    return total


def _relu_second(u1, u2, symmetric=False):
    """The input-weight term at kappa = 1, <u1, u2> (pi - phi) / (2 pi), exact angles for
    |cos| > 0.5 (used when kappa^2 is outside float64's range)."""
    norms, inner, cos = _geometry(u1, u2)
    gap = np.pi - np.arccos(cos)  # pi - phi
    mask = (np.abs(cos) > _NEAR) & (norms > 0)
    ii, jj = np.nonzero(np.triu(mask) if symmetric else mask)
    if ii.size:
        dot = inner[ii, jj]
        a = _pair_angles(u1, u2, ii, jj, dot, _pivots(u2))
        gap[ii, jj] = np.where(dot < 0, a, np.pi - a)
        if symmetric:
            gap[jj, ii] = gap[ii, jj]
    return np.where(norms > 0, inner * gap / (2 * np.pi), 0.0)


def _relu_ntk_unit(x1, x2, kappa2, d):
    n1 = jnp.linalg.norm(x1, axis=1)
    n2 = jnp.linalg.norm(x2, axis=1)
    inner = x1 @ x2.T
    norms = n1[:, None] * n2[None, :]
    safe = jnp.where(norms > 0, norms, 1.0)
    cos = jnp.clip(inner / safe, -1.0, 1.0)
    phi = jnp.arccos(cos)
    sin = jnp.sqrt(jnp.clip(1.0 - cos ** 2, 0.0, None))
    first = norms * (sin + (jnp.pi - phi) * cos) / (2 * jnp.pi * d)
    second = kappa2 * inner * (jnp.pi - phi) / (2 * jnp.pi)
    return jnp.where(norms > 0, first + second, 0.0)
