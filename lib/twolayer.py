r"""Two-layer ReLU networks, the model of the lazy-training, F1/F2 and parity chapters.

.. math::
    f(\theta, x) = \frac{s}{m} \sum_{j=1}^m a_j\, (b_j^\top x)_+ ,
    \qquad \theta = (a, B),\ a \in \mathbb{R}^m,
    \ B = (b_1, \dots, b_m)^\top \in \mathbb{R}^{m\times d}.

The output scale ``s`` selects the regime (Chizat 2020, blog Sec. 6; Chizat, Oyallon &
Bach 2019): ``s = 1`` is the mean-field scaling :math:`1/m`, ``s = sqrt(m)`` the NTK scaling
:math:`1/\sqrt m`, and any larger ``s`` multiplies the model by :math:`\alpha = s`, which is the
lazy-training scaling. A bias is added by appending a constant coordinate to ``x``.

At initialization the input weights :math:`b_j` are uniform on the unit sphere
:math:`\mathbb{S}^{d-1}` (so that :math:`\mathbb{E}[b b^\top] = I/d`) and the output weights are
:math:`a_j = \kappa \epsilon_j` with random signs :math:`\epsilon_j`. With ``symmetric=True`` the
units come in pairs :math:`(a_j, b_j), (-a_j, b_j)`, so the network is 0 at initialization (up
to the rounding of the sum) whatever the scale (the *unbiased* initialization that Woodworth
et al. 2020, Sec. 3, attribute to Chizat, Oyallon & Bach 2019) while its tangent kernel is
unchanged in expectation
(its fluctuations come from m/2 independent pairs instead of m units).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = ["MAX_ENTRIES", "init_two_layer", "two_layer", "two_layer_batch"]

MAX_ENTRIES = 2**31
"""Largest ``d * width`` :func:`init_two_layer` draws (16 GiB of float64 weights)."""


def init_two_layer(key, d: int, width: int, *, kappa: float = 1.0, scale: float = 1.0,
                   symmetric: bool = True):
    r"""Random initial parameters of a width-``m`` two-layer ReLU network.

    Args:
        key: a ``jax.random`` key.
        d: input dimension (>= 1), including a bias coordinate if the data carry one.
        width: number of hidden units ``m`` (>= 1; even when ``symmetric=True``).
        kappa: output-weight scale :math:`\kappa > 0`: :math:`|a_j| = \kappa` times ``scale``.
        scale: multiplies both layers (the initialization scale :math:`\sigma > 0`).
        symmetric: pair units with opposite output weights so that :math:`f(\theta_0) = 0`.

    Returns:
        ``{"a": (m,), "B": (m, d)}`` float64 arrays: ``a = scale * kappa * signs`` and the rows
        of ``B`` are ``scale`` times uniform unit vectors.

    Raises:
        ValueError: non-positive ``d``, ``width``, ``kappa`` or ``scale``; odd ``width`` with
            ``symmetric=True``; ``symmetric`` not a boolean; ``d * width > MAX_ENTRIES``; a
            ``key`` that is not a JAX PRNG key; weights that overflow or underflow float64.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> p = init_two_layer(jax.random.key(0), d=3, width=4)
        >>> abs(float(two_layer(p, jnp.ones(3)))) < 1e-15   # symmetric: 0 up to rounding
        True
    """
    key = _validate.prng_key("key", key)
    d = _validate.integer("d", d, minimum=1)
    width = _validate.integer("width", width, minimum=1)
    kappa = _validate.positive("kappa", kappa)
    scale = _validate.positive("scale", scale)
    symmetric = _validate.boolean("symmetric", symmetric)
    if d * width > MAX_ENTRIES:
        # Python ints of any size (10**400) are formatted as ints, not floats (OverflowError)
        raise ValueError(f"d * width = {_validate._short(d * width)} weights exceed "
                         f"MAX_ENTRIES = {MAX_ENTRIES} ({_validate._short(8 * d * width // 2**30)}"
                         " GiB)")
    if symmetric and width % 2:
        raise ValueError(f"width must be even when symmetric=True, got {width}")
    try:
        params = _draw_two_layer(key, d, width, symmetric, kappa, scale)
    except TypeError as err:
        raise ValueError(f"key must be a jax.random key (jax.random.key(seed)), got "
                         f"{key!r}") from err
    if isinstance(params["B"], jax.core.Tracer):  # under jit/vmap: values cannot be checked
        return params
    sizes = (np.asarray(params["a"]), np.abs(np.asarray(params["B"])).max(1))
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
    r"""Output :math:`f(\theta, x) = \frac{s}{m}\sum_j a_j (b_j^\top x)_+` for one input
    (the two-layer ReLU network of Chizat & Bach 2020, with output scale :math:`s`).

    Args:
        params: ``{"a": (m,), "B": (m, d)}`` real arrays (as from :func:`init_two_layer`).
        x: ``(d,)`` real input.
        output_scale: ``s > 0``, a scalar (1: mean field, ``sqrt(m)``: NTK scaling).

    Returns:
        A scalar float64 array.

    Raises:
        ValueError: malformed ``params``, ``x`` of the wrong shape, complex inputs, a
            non-scalar or non-positive ``output_scale``; and, when the inputs are concrete (not
            traced by ``jax.jit``/``grad``/``vmap``), NaN or inf in the inputs (checked before
            computing) or an output beyond float64's range (an intermediate product that
            overflows while the output is finite is recomputed in scaled form, and so is an
            output below 1e-290 in magnitude, which XLA's flushing of subnormal inputs,
            weights or ``output_scale`` would turn into 0, and any output computed from a
            subnormal entry of ``x``, ``a`` or ``B``, which XLA reads as 0 even where a huge
            weight makes it count: ``b = (1, 1e305)``, ``x = (1e-5, 1e-310)`` gives 2e-5).

    Example:
        >>> import jax.numpy as jnp
        >>> p = {"a": jnp.array([1.0, -1.0]), "B": jnp.array([[1.0, 0.0], [0.0, 1.0]])}
        >>> float(two_layer(p, jnp.array([3.0, 1.0])))   # (3 - 1) / 2
        1.0
    """
    a, B = _unpack(params)
    x = _validate.real_array("x", x)
    if x.shape != (B.shape[1],):
        raise ValueError(f"x must have shape ({B.shape[1]},) for one input; got {x.shape} "
                         "(use two_layer_batch for a batch)")
    s = _scale(output_scale)
    _finite_inputs((a, B, x))
    return _finite_output(s / a.shape[0] * jnp.dot(a, jax.nn.relu(B @ x)), (a, B, x),
                          lambda: _scaled_output(a, B, x[None, :], s)[0],
                          _subnormal_rows(a, B, x[None, :]))


def two_layer_batch(params, X, output_scale: float = 1.0):
    """:func:`two_layer` on a batch of inputs.

    Args:
        params: ``{"a": (m,), "B": (m, d)}`` real arrays.
        X: ``(n, d)`` real inputs, one per row.
        output_scale: ``s > 0``, a scalar.

    Returns:
        ``(n,)`` float64 array of outputs.

    Raises:
        ValueError: as :func:`two_layer`, with ``X`` of the wrong shape.

    Example:
        >>> import jax.numpy as jnp
        >>> p = {"a": jnp.array([1.0, -1.0]), "B": jnp.array([[1.0, 0.0], [0.0, 1.0]])}
        >>> two_layer_batch(p, jnp.array([[3.0, 1.0], [0.0, 2.0]])).tolist()
        [1.0, -1.0]
    """
    a, B = _unpack(params)
    X = _validate.real_array("X", X)
    if X.ndim != 2 or X.shape[1] != B.shape[1]:
        raise ValueError(f"X must have shape (n, {B.shape[1]}), got {X.shape}")
    s = _scale(output_scale)
    _finite_inputs((a, B, X))
    return _finite_output(s / a.shape[0] * (jax.nn.relu(X @ B.T) @ a), (a, B, X),
                          lambda rows=None: _scaled_output(
                              a, B, X if rows is None else np.asarray(X)[rows], s),
                          _subnormal_rows(a, B, X))


def _scale(output_scale):
    s = _validate.real_array("output_scale", output_scale)
    if s.ndim != 0:
        raise ValueError(f"output_scale must be a scalar, got shape {s.shape}")
    if not isinstance(s, jax.core.Tracer) and not (np.isfinite(float(s)) and float(s) > 0):
        raise ValueError(f"output_scale must be a finite number > 0, got {output_scale!r}")
    return s


def _finite_inputs(inputs):
    """Refuse NaN or inf in concrete inputs before computing: an infinite input can give a
    finite, wrong output (``relu(-inf) = 0``), so checking the output alone is not enough."""
    names = ("params['a']", "params['B']", "the input")
    for name, v in zip(names, inputs, strict=True):
        if not isinstance(v, jax.core.Tracer) and not np.isfinite(np.asarray(v)).all():
            raise ValueError(f"{name} contains NaN or inf")


def _subnormal_rows(a, B, X):
    """Boolean ``(n,)`` mask of the inputs (rows of X) whose output XLA would compute from a
    flushed subnormal number: every row when ``a`` or ``B`` holds a subnormal entry, else the
    rows of X that hold one (None when any of them is traced). A subnormal entry times a huge
    weight is not negligible: x = (1e-5, 1e-310) with b = (1, 1e305) gives 2e-5, not 1e-5."""
    if any(isinstance(v, jax.core.Tracer) for v in (a, B, X)):
        return None
    tiny = np.finfo(np.float64).tiny

    def sub(v):
        v = np.abs(np.asarray(v, dtype=np.float64))
        return (v > 0) & (v < tiny)

    rows = sub(X).any(axis=1) if np.ndim(X) == 2 else np.zeros(0, bool)
    if sub(a).any() or sub(B).any():
        rows = np.ones_like(rows)
    return rows


def _finite_output(out, inputs, scaled=None, subnormal=None):
    """Return a concrete result if finite; else recompute it in scaled form (an intermediate
    such as a_j (b_j^T x)_+ may overflow while the output s/m sum_j ... is finite) and raise
    only when the output itself is beyond float64's range, naming the cause. Outputs flagged
    in ``subnormal`` (computed by XLA from a flushed subnormal input) are recomputed too."""
    if isinstance(out, jax.core.Tracer):
        return out
    if np.isfinite(np.asarray(out)).all():
        small = np.abs(np.asarray(out)) < _SMALL
        if subnormal is not None and np.any(subnormal):
            small = small | np.asarray(subnormal).reshape(small.shape)
        if not small.any() or scaled is None or any(isinstance(v, jax.core.Tracer)
                                                    for v in inputs):
            return out
        # an output near or below the smallest normal float64 (or 0): XLA on CPU flushes
        # subnormal inputs, weights and intermediate products to zero, so a true value such
        # as 6.7e-302 came out 0; those entries are recomputed in scaled form (numpy), the
        # others are kept bit-for-bit
        if np.ndim(out) == 0:
            return jnp.asarray(np.asarray(scaled()).reshape(()))
        fixed = np.array(out, dtype=np.float64)
        fixed[small] = scaled(small)  # only the small rows are recomputed
        return jnp.asarray(fixed)
    names = ("params['a']", "params['B']", "the input")
    for name, v in zip(names, inputs, strict=True):
        if not isinstance(v, jax.core.Tracer) and not np.isfinite(np.asarray(v)).all():
            raise ValueError(f"{name} contains NaN or inf")
    if scaled is not None and not any(isinstance(v, jax.core.Tracer) for v in inputs):
        again = scaled()
        if np.all(np.isfinite(again)):
            return jnp.asarray(again)
    raise ValueError("the output overflows float64: |output| is above ~1.8e308 (inputs, "
                     "weights or output_scale too large)")


def _scaled_output(a, B, X, s):
    """s/m sum_j a_j relu(b_j^T x) for each row x of X, every product and sum carried as a
    mantissa and a power of two (numpy's frexp), so that no intermediate overflows, underflows
    or is flushed (subnormal inputs count at full weight: 1e305 * 1e-310 = 1e-5), the power
    of two applied once at the end."""
    a, B, X = (np.asarray(v, dtype=np.float64) for v in (a, B, X))
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(B)
    sm, se = np.frexp(float(s))
    out = np.empty(X.shape[0])
    for k, x in enumerate(X):  # one input at a time: an (m, d) block of products
        mx, ex = np.frexp(x)
        zm, ze = _validate.pow2_sum(mb * mx[None, :], eb.astype(np.int64) + ex[None, :], axis=1)
        zm = np.maximum(zm, 0.0)  # the ReLU acts on the sign of the mantissa
        om, oe = _validate.pow2_sum((ma * zm)[None, :], (ea.astype(np.int64) + ze)[None, :],
                                    axis=1)
        with np.errstate(over="ignore", under="ignore"):
            out[k] = np.ldexp(om[0] * sm / a.shape[0], int(oe[0]) + int(se))
    return out


_SMALL = 1e-290
"""Outputs below this in magnitude (including 0) are recomputed in scaled form when the inputs
are concrete: below ~2.2e-308 XLA flushes subnormal numbers to zero."""


def _unpack(params):
    """Check the parameter dict's shapes (static, so this also works under jit/vmap/grad)."""
    if not isinstance(params, dict) or set(params) != {"a", "B"}:
        raise ValueError("params must be a dict with keys 'a' (m,) and 'B' (m, d)")
    a = _validate.real_array("params['a']", params["a"])
    B = _validate.real_array("params['B']", params["B"])
    if a.ndim != 1 or B.ndim != 2 or B.shape[0] != a.shape[0] or a.shape[0] == 0:
        raise ValueError(f"params['a'] must be (m,) and params['B'] (m, d) with m >= 1, got "
                         f"{a.shape} and {B.shape}")
    return a, B
