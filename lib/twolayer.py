r"""Two-layer ReLU networks, the model of the lazy-training, F1/F2 and parity chapters.

.. math::
    f(\theta, x) = \frac{s}{m} \sum_{j=1}^m a_j\, (b_j^\top x)_+ ,
    \qquad \theta = (a, B),\ a \in \mathbb{R}^m,
    \ B = (b_1, \dots, b_m)^\top \in \mathbb{R}^{m\times d}.

The output scale ``s`` selects the regime (Chizat & Bach 2020, blog Sec. 6; Chizat, Oyallon &
Bach 2019): ``s = 1`` is the mean-field scaling :math:`1/m`, ``s = sqrt(m)`` the NTK scaling
:math:`1/\sqrt m`, and any larger ``s`` multiplies the model by :math:`\alpha = s`, which is the
lazy-training scaling. A bias is added by appending a constant coordinate to ``x``.

At initialization the input weights :math:`b_j` are uniform on the unit sphere
:math:`\mathbb{S}^{d-1}` (so that :math:`\mathbb{E}[b b^\top] = I/d`) and the output weights are
:math:`a_j = \kappa \epsilon_j` with random signs :math:`\epsilon_j`. With ``symmetric=True`` the
units come in pairs :math:`(a_j, b_j), (-a_j, b_j)`, so the network is 0 at initialization (up
to the rounding of the sum) whatever the scale (the *unbiased* initialization of Chizat, Oyallon &
Bach 2019 and Woodworth et al. 2020, Sec. 2) while its tangent kernel is unchanged in distribution.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = ["init_two_layer", "two_layer", "two_layer_batch"]


def init_two_layer(key, d: int, width: int, *, kappa: float = 1.0, scale: float = 1.0,
                   symmetric: bool = True):
    r"""Random initial parameters of a width-``m`` two-layer ReLU network.

    Args:
        key: a ``jax.random`` key.
        d: input dimension (>= 1), including a bias coordinate if the data carry one.
        width: number of hidden units ``m`` (>= 1; even when ``symmetric=True``).
        kappa: output-weight scale :math:`\kappa > 0`: :math:`|a_j| = \kappa`.
        scale: multiplies both layers (the initialization scale :math:`\sigma > 0`).
        symmetric: pair units with opposite output weights so that :math:`f(\theta_0) = 0`.

    Returns:
        ``{"a": (m,), "B": (m, d)}`` float64 arrays: ``a = scale * kappa * signs`` and the rows
        of ``B`` are ``scale`` times uniform unit vectors.

    Raises:
        ValueError: non-positive ``d``, ``width``, ``kappa`` or ``scale``; odd ``width`` with
            ``symmetric=True``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> p = init_two_layer(jax.random.key(0), d=3, width=4)
        >>> abs(float(two_layer(p, jnp.ones(3)))) < 1e-15   # symmetric: 0 up to rounding
        True
    """
    d = _validate.integer("d", d, minimum=1)
    width = _validate.integer("width", width, minimum=1)
    kappa = _validate.positive("kappa", kappa)
    scale = _validate.positive("scale", scale)
    if symmetric and width % 2:
        raise ValueError(f"width must be even when symmetric=True, got {width}")
    params = _draw_two_layer(key, d, width, symmetric, kappa, scale)
    sizes = (np.asarray(params["a"]), np.abs(np.asarray(params["B"])).sum(1))
    if not all(np.all(np.isfinite(v) & (v != 0)) for v in sizes):
        raise ValueError(f"scale * kappa = {scale * kappa:g} and scale = {scale:g} overflow or "
                         "underflow float64")
    return params


@partial(jax.jit, static_argnums=(1, 2, 3))
def _draw_two_layer(key, d, width, symmetric, kappa, scale):
    """The random draw of :func:`init_two_layer` (compiled once per shape: drawn op by op it
    costs about half a second of compilation for every new ``(d, width)``)."""
    half = width // 2 if symmetric else width
    k_sign, k_dir = jax.random.split(key)
    b = jax.random.normal(k_dir, (half, d), dtype=jnp.float64)
    b = b / jnp.linalg.norm(b, axis=1, keepdims=True)
    a = kappa * jax.random.rademacher(k_sign, (half,), dtype=jnp.float64)
    if symmetric:
        a = jnp.concatenate([a, -a])
        b = jnp.concatenate([b, b])
    return {"a": scale * a, "B": scale * b}


def two_layer(params, x, output_scale: float = 1.0):
    r"""Output :math:`f(\theta, x) = \frac{s}{m}\sum_j a_j (b_j^\top x)_+` for one input.

    Args:
        params: ``{"a": (m,), "B": (m, d)}``.
        x: ``(d,)`` input.
        output_scale: ``s`` (1: mean field, ``sqrt(m)``: NTK scaling).

    Returns:
        A scalar float64 array.
    """
    a, B = _unpack(params)
    x = jnp.asarray(x, dtype=jnp.float64)
    if x.shape != (B.shape[1],):
        raise ValueError(f"x must have shape ({B.shape[1]},) for one input; got {x.shape} "
                         "(use two_layer_batch for a batch)")
    return output_scale / a.shape[0] * jnp.dot(a, jax.nn.relu(B @ x))


def two_layer_batch(params, X, output_scale: float = 1.0):
    """:func:`two_layer` on a batch ``X`` of shape ``(n, d)``; returns ``(n,)``."""
    a, B = _unpack(params)
    X = jnp.asarray(X, dtype=jnp.float64)
    if X.ndim != 2 or X.shape[1] != B.shape[1]:
        raise ValueError(f"X must have shape (n, {B.shape[1]}), got {X.shape}")
    return output_scale / a.shape[0] * (jax.nn.relu(X @ B.T) @ a)


def _unpack(params):
    """Check the parameter dict's shapes (static, so this also works under jit/vmap/grad)."""
    if not isinstance(params, dict) or set(params) != {"a", "B"}:
        raise ValueError("params must be a dict with keys 'a' (m,) and 'B' (m, d)")
    a = jnp.asarray(params["a"], dtype=jnp.float64)
    B = jnp.asarray(params["B"], dtype=jnp.float64)
    if a.ndim != 1 or B.ndim != 2 or B.shape[0] != a.shape[0] or a.shape[0] == 0:
        raise ValueError(f"params['a'] must be (m,) and params['B'] (m, d) with m >= 1, got "
                         f"{a.shape} and {B.shape}")
    return a, B
