r"""Sparse parities on which gradient descent beats every small kernel (Malach et al. 2021).

Two learning problems over :math:`x \in \{-1, +1\}^n`, one distribution per subset
:math:`I \subset [n]` of size :math:`k`, with the square loss :math:`\tfrac12 (f - y)^2` (so the
null predictor has loss 1/2, and the *edge* of a predictor is 1/2 minus its loss):

* **biased sparse parities** :math:`\mathcal{P}^{\mathrm{bsp}}[n, k, \alpha]` (Malach, Kamath,
  Abbe & Srebro 2021, Sec. 3): with probability :math:`1 - \alpha` the bits are uniform, with
  probability :math:`\alpha` they are i.i.d. with :math:`P(x_i = 1) = 3/4`; the label is the
  parity :math:`y = \chi_I(x) = \prod_{i \in I} x_i`. Then

  .. math::
      \mathbb{E}[y x_j] = \alpha 2^{1-k} \ (j \in I), \qquad
      \mathbb{E}[y x_j] = \alpha 2^{-k-1} \ (j \notin I) \qquad (k \ge 2),

  so a *linear* predictor has a small edge, which one gradient step can detect.
* **leaky parities** :math:`\mathcal{P}^{\mathrm{lp}}[n, \alpha]` (Sec. 5): with probability
  :math:`1 - \alpha`, uniform :math:`x` and :math:`y = \chi_I(x)`; with probability
  :math:`\alpha`, the single point :math:`x^I` (here :math:`x^I_i = +1` on :math:`I`, :math:`-1`
  off it) with a uniformly random label.

The paper's smooth models (its eqs. 9-13 and 28) are not reproduced; :func:`selected_parity` and
:func:`leaky_selected_parity` are constructions of this course with the properties the proofs
use (checked in ``tests/test_parity.py``): value and gradient at :math:`\theta = 0`, and exact
parity output once one gradient step has moved :math:`\theta` onto the relevant coordinates.

Exact population quantities are computed either in closed form
(:func:`bsp_correlations`, :func:`bsp_second_moments`, :func:`bsp_best_linear_loss`,
:func:`bsp_best_linear_edge`) or by
enumerating the finite support of the distribution (:func:`parity_atoms`,
:func:`population_loss`, :func:`best_feature_loss`), which is exact for :math:`n \le 16`.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from . import _validate

__all__ = [
    "MAX_ENUMERATE",
    "best_feature_loss",
    "biased_sparse_parity",
    "bsp_best_linear_edge",
    "bsp_best_linear_loss",
    "bsp_correlations",
    "bsp_second_moments",
    "leaky_kernel_edges",
    "leaky_parity",
    "leaky_point",
    "leaky_selected_parity",
    "parity",
    "parity_atoms",
    "population_loss",
    "selected_parity",
    "smooth_step",
]

MAX_ENUMERATE = 16
"""Largest ``n`` for which :func:`parity_atoms` enumerates :math:`\\{-1,+1\\}^n` (65536 points)."""

_BIAS = 0.75  # P(x_i = +1) in the biased component


# ----------------------------------------------------------------------------- validation

def _check_problem(n, subset, alpha):
    n = _validate.size("n", n, minimum=1)  # refuses sizes that cannot be allocated (10**30)
    alpha = _validate.scalar("alpha", alpha)  # also a Python int of any size: "too large"
    if not (0.0 <= alpha <= 1.0):
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    _validate.no_prng_key("subset", subset, "a sequence of integer indices")
    if isinstance(subset, str | bytes):
        raise ValueError(f"subset must be a sequence of integer indices, got {subset!r}")
    raw = np.asarray(subset)
    if raw.ndim > 1 or raw.dtype == np.bool_ or np.iscomplexobj(raw) or raw.dtype == object \
            or (raw.size and raw.dtype.kind not in "iuf"):  # strings "0" are not indices
        raise ValueError(f"subset must be a flat sequence of integer indices, got {subset!r}")
    try:
        idx = [int(i) for i in raw.ravel()]
        ok = all(float(i) == float(j) for i, j in zip(idx, raw.ravel(), strict=True))
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"subset must be a sequence of integer indices, got {subset!r}") from err
    if not ok:
        raise ValueError(f"subset must contain integer indices, got {subset!r}")
    k = len(idx)
    if k < 1:
        raise ValueError("subset must contain at least one index (k >= 1)")
    if k > n:
        raise ValueError(f"subset has k = {k} indices but n = {n}; need k <= n")
    if len(set(idx)) != k:
        raise ValueError(f"subset must not contain repeated indices, got {idx}")
    if min(idx) < 0 or max(idx) >= n:
        raise ValueError(f"subset indices must lie in [0, n) = [0, {n}), got {idx}")
    return n, np.array(sorted(idx)), alpha


# ----------------------------------------------------------------------------- samplers

def parity(x, subset):
    r"""The parity :math:`\chi_I(x) = \prod_{i \in I} x_i` of the columns ``subset`` of ``x``.

    Args:
        x: ``(N, n)`` array with entries in {-1, +1}.
        subset: indices :math:`I` (integers in ``[0, n)``, no repeats, at least one).

    Returns:
        ``(N,)`` float64 array with entries in {-1, +1}.

    Raises:
        ValueError: ``x`` not a finite real 2-D array with entries in {-1, +1}, or
            ``subset`` invalid.

    Example:
        >>> import jax.numpy as jnp
        >>> parity(jnp.array([[1.0, -1.0, -1.0]]), [1, 2]).tolist()
        [1.0]
    """
    x = _validate.as_array("x", x, ndim=2)
    _pm_one("x", x)
    _, idx, _ = _check_problem(x.shape[1], subset, 0.0)
    return jnp.prod(x[:, idx], axis=1)


def _pm_one(name, v):
    """Entries of a concrete array must be -1 or +1 (a parity of other values is not one)."""
    if not isinstance(v, jax.core.Tracer) and not np.all(np.isin(np.asarray(v), (-1.0, 1.0))):
        bad = np.asarray(v)[~np.isin(np.asarray(v), (-1.0, 1.0))].ravel()[:3].tolist()
        raise ValueError(f"{name} must have entries in {{-1, +1}}, got e.g. {bad}")


def biased_sparse_parity(key, num_samples: int, n: int, subset, alpha: float):
    r"""Samples of the biased sparse parity :math:`\mathcal{D}_I \in \mathcal{P}^{\mathrm{bsp}}
    [n, k, \alpha]` (Malach et al. 2021, Sec. 3, as reconstructed from the proof of Claim 3.1).

    Each sample is, with probability :math:`1 - \alpha`, uniform on :math:`\{-1,+1\}^n`, and with
    probability :math:`\alpha` made of i.i.d. bits with :math:`P(x_i = +1) = 3/4`; its label is
    :math:`y = \prod_{i \in I} x_i`.

    Args:
        key: a ``jax.random`` key.
        num_samples: number of samples ``N >= 1``.
        n: input dimension (>= 1).
        subset: the parity's indices :math:`I` (``k = len(subset)`` distinct integers in
            ``[0, n)``, ``1 <= k <= n``).
        alpha: mixture weight of the biased component, in ``[0, 1]``.

    Returns:
        ``(x, y)``: ``x`` of shape ``(N, n)`` and ``y`` of shape ``(N,)``, float64, entries in
        {-1, +1}.

    Raises:
        ValueError: ``key`` not a single JAX PRNG key (``0``, ``None``, strings and split
            pairs are refused); ``subset`` not integer indices (strings such as ``"0"``
            are refused), out of range, repeated or longer than ``n``;
            ``alpha`` outside [0, 1]; ``num_samples`` or ``n`` not integers >= 1;
            ``n`` or ``num_samples * n`` above ``lib._validate.MAX_ELEMENTS`` or needing more
            than half of the memory available (checked before anything is allocated).

    Example:
        >>> import jax
        >>> x, y = biased_sparse_parity(jax.random.key(0), 5, n=4, subset=[0, 2], alpha=0.5)
        >>> x.shape, y.shape
        ((5, 4), (5,))
    """
    key = _validate.prng_key("key", key)
    num_samples = _validate.size("num_samples", num_samples, minimum=1)
    n, idx, alpha = _check_problem(n, subset, alpha)
    _validate.size("num_samples * n", num_samples * n)
    return _bsp_sample(key, num_samples, n, jnp.asarray(idx), alpha)


def _bsp_sample(key, num_samples, n, idx, alpha):
    """Unvalidated sampler (usable inside ``jax.jit`` / ``lax.scan``)."""
    k_unif, k_bias, k_pick = jax.random.split(key, 3)
    uniform = jax.random.bernoulli(k_unif, 0.5, (num_samples, n))
    biased = jax.random.bernoulli(k_bias, _BIAS, (num_samples, n))
    pick = jax.random.bernoulli(k_pick, alpha, (num_samples, 1))
    x = 2.0 * jnp.where(pick, biased, uniform).astype(jnp.float64) - 1.0
    return x, jnp.prod(x[:, idx], axis=1)


def leaky_point(n: int, subset):
    r"""The point :math:`x^I` of the leaky parity: :math:`+1` on ``subset``, :math:`-1` off it.

    Args:
        n: input dimension (>= 1).
        subset: indices :math:`I` (distinct integers in ``[0, n)``).

    Returns:
        ``(n,)`` float64 array.

    Raises:
        ValueError: invalid ``n`` or ``subset``.

    Example:
        >>> leaky_point(4, [1, 2]).tolist()
        [-1.0, 1.0, 1.0, -1.0]
    """
    n, idx, _ = _check_problem(n, subset, 0.0)
    return jnp.full(n, -1.0).at[idx].set(1.0)


def leaky_parity(key, num_samples: int, n: int, subset, alpha: float):
    r"""Samples of the leaky parity :math:`\mathcal{D}_I \in \mathcal{P}^{\mathrm{lp}}[n, \alpha]`
    (Malach et al. 2021, Sec. 5).

    With probability :math:`1 - \alpha`: :math:`x` uniform and :math:`y = \chi_I(x)`; with
    probability :math:`\alpha`: :math:`x = x^I` (:func:`leaky_point`) and :math:`y` uniform on
    {-1, +1}. Different subsets have different input distributions: the point :math:`x^I` leaks
    :math:`I` to a learner that looks at unlabeled inputs.

    Args:
        key: a ``jax.random`` key.
        num_samples: ``N >= 1``.
        n: input dimension (>= 1).
        subset: :math:`I` (distinct integers in ``[0, n)``, ``1 <= k <= n``).
        alpha: weight of the leaked point, in ``[0, 1]``.

    Returns:
        ``(x, y)`` of shapes ``(N, n)`` and ``(N,)``, float64, entries in {-1, +1}.

    Raises:
        ValueError: as :func:`biased_sparse_parity`.

    Example:
        >>> import jax
        >>> x, y = leaky_parity(jax.random.key(0), 3, n=5, subset=[0, 1], alpha=1.0)
        >>> bool((x == leaky_point(5, [0, 1])).all())
        True
    """
    key = _validate.prng_key("key", key)
    num_samples = _validate.size("num_samples", num_samples, minimum=1)
    n, idx, alpha = _check_problem(n, subset, alpha)
    _validate.size("num_samples * n", num_samples * n)
    k_unif, k_pick, k_label = jax.random.split(key, 3)
    uniform = 2.0 * jax.random.bernoulli(k_unif, 0.5, (num_samples, n)).astype(jnp.float64) - 1
    pick = jax.random.bernoulli(k_pick, alpha, (num_samples,))
    point = leaky_point(n, idx)
    x = jnp.where(pick[:, None], point[None, :], uniform)
    coin = jax.random.rademacher(k_label, (num_samples,), dtype=jnp.float64)
    y = jnp.where(pick, coin, jnp.prod(uniform[:, idx], axis=1))
    return x, y


# ----------------------------------------------------------------------------- exact moments

def bsp_correlations(n: int, subset, alpha: float):
    r"""Exact correlations :math:`c_j = \mathbb{E}[y\, x_j]` under the biased sparse parity.

    .. math::
        c_j = (1-\alpha)\,[I = \{j\}] + \alpha\, 2^{1-k} \ (j \in I), \qquad
        c_j = \alpha\, 2^{-k-1} \ (j \notin I),

    since under the biased component :math:`\mathbb{E}[x_i] = 1/2` independently, and under the
    uniform one :math:`\mathbb{E}[x_j \chi_I] = 0` unless :math:`I = \{j\}` (Malach et al. 2021,
    proof of Claim 3.1).

    Args:
        n, subset, alpha: the distribution, as in :func:`biased_sparse_parity`.

    Returns:
        ``(n,)`` float64 array.

    Raises:
        ValueError: as :func:`biased_sparse_parity`.

    Example:
        >>> bsp_correlations(4, [0, 1], 0.5).tolist()
        [0.25, 0.25, 0.0625, 0.0625]
    """
    n, idx, alpha = _check_problem(n, subset, alpha)
    k = len(idx)
    on = alpha * 2.0 ** (1 - k) + (1.0 - alpha) * (k == 1)
    c = np.full(n, alpha * 2.0 ** (-k - 1))
    c[idx] = on
    return jnp.asarray(c)


def bsp_second_moments(n: int, alpha: float):
    r"""Exact :math:`\Sigma = \mathbb{E}[x x^\top]` under the biased sparse parity's input law.

    .. math::
        \Sigma = (1 - \alpha/4)\, I_n + (\alpha/4)\, \mathbf{1}\mathbf{1}^\top ,

    since :math:`\mathbb{E}[x_i x_j] = \alpha (1/2)^2` for :math:`i \ne j`.

    Args:
        n: input dimension (>= 1).
        alpha: in ``[0, 1]``.

    Returns:
        ``(n, n)`` float64 array.

    Raises:
        ValueError: ``n`` not an integer >= 1 or with ``n * n`` above
            ``lib._validate.MAX_ELEMENTS`` (the matrix would not fit in memory); ``alpha``
            not a real number in ``[0, 1]``.

    Example:
        >>> bsp_second_moments(2, 1.0).tolist()
        [[1.0, 0.25], [0.25, 1.0]]
    """
    n, _, alpha = _check_problem(n, [0], alpha)
    _validate.size("n * n", n * n)  # the (n, n) matrix must fit in memory
    return (1.0 - alpha / 4) * jnp.eye(n) + alpha / 4 * jnp.ones((n, n))


def bsp_best_linear_loss(n: int, subset, alpha: float):
    r"""Exact population loss of the best linear predictor :math:`h_w(x) = \langle w, x\rangle`.

    The selected-parity model's tangent kernel at :math:`\theta = 0` is :math:`4\langle x,
    x'\rangle` (Malach et al. 2021, Claim 3.2), so its span is the linear predictors, and

    .. math::
        \min_w \tfrac12 \mathbb{E}(y - \langle w, x\rangle)^2 = \tfrac12 - \tfrac12\, c^\top
        \Sigma^{-1} c, \qquad
        c^\top \Sigma^{-1} c = \frac{1}{a}\Bigl(\|c\|^2 - \frac{b\,(\mathbf 1^\top c)^2}{a + n b}
        \Bigr),

    with :math:`c` from :func:`bsp_correlations` and :math:`\Sigma = a I + b \mathbf 1
    \mathbf 1^\top` (:func:`bsp_second_moments`, :math:`a = 1 - \alpha/4`, :math:`b =
    \alpha/4`), inverted by the Sherman-Morrison formula. Since :math:`c` takes only two
    values, :math:`c_{\rm on}` on the ``k`` coordinates of the subset and :math:`c_{\rm off}`
    on the other ``n - k``, Lagrange's identity :math:`n\|c\|^2 - (\mathbf 1^\top c)^2 =
    k(n-k)(c_{\rm on} - c_{\rm off})^2` turns the difference into the sum of nonnegative terms

    .. math::
        c^\top \Sigma^{-1} c = \frac{a\|c\|^2 + b\,k(n-k)\,(c_{\rm on} - c_{\rm off})^2}
        {a\,(a + n b)},

    which is how it is computed (accurate to rounding for every ``n``; the difference lost
    about :math:`n\alpha\varepsilon` relative, 4e-9 at :math:`n = 10^6`). Claim 3.2 brackets
    it, for
    :math:`k \ge 2`, between :math:`\tfrac12 - \tfrac\alpha2` and
    :math:`\tfrac12 - \alpha^2/2^{2k}`.

    Args:
        n, subset, alpha: the distribution, as in :func:`biased_sparse_parity`.

    Returns:
        A Python float, the minimal loss (the edge is ``0.5 - loss``).

    Raises:
        ValueError: as :func:`biased_sparse_parity`.

    Example:
        >>> bsp_best_linear_loss(10, [0, 1, 2], 0.0)
        0.5
    """
    return float(0.5 - bsp_best_linear_edge(n, subset, alpha))


def bsp_best_linear_edge(n: int, subset, alpha: float):
    r"""Exact edge :math:`\tfrac12 c^\top \Sigma^{-1} c` of the best linear predictor.

    The same quantity as ``0.5 - bsp_best_linear_loss(n, subset, alpha)`` (Malach et al. 2021,
    Claim 3.2; see :func:`bsp_best_linear_loss` for the Sherman-Morrison formula and its
    cancellation-free form, used here), computed without the subtraction from 1/2, so it
    keeps its relative precision when the edge is far below the rounding error of 1/2 (at
    :math:`n = 128`, :math:`k = 7`, :math:`\alpha = 10^{-6}` the edge is about
    :math:`2 \cdot 10^{-15}`). As :math:`\alpha \to 0` with :math:`\tau = \alpha/2^k` and
    :math:`k \ge 2`, the edge is :math:`\bigl(2k + (n-k)/8\bigr)\tau^2 \bigl(1 + O(n\alpha)\bigr)`.

    Args:
        n, subset, alpha: the distribution, as in :func:`biased_sparse_parity`.

    Returns:
        A Python float in :math:`[0, \tfrac12]`.

    Raises:
        ValueError: as :func:`biased_sparse_parity`.

    Example:
        >>> tau = 1e-8 / 2**7
        >>> round(bsp_best_linear_edge(128, range(7), 1e-8) / tau**2, 3)   # 2k + (n - k)/8
        29.125
    """
    n, idx, alpha = _check_problem(n, subset, alpha)
    k = len(idx)
    # c has k entries `on` and n - k entries `off`; with S2 = ||c||^2 and S1 = 1^T c,
    # n S2 - S1^2 = k (n - k) (on - off)^2 (Lagrange's identity), so the Sherman-Morrison form
    # (S2 - b S1^2 / (a + n b)) / a = (a S2 + b k (n - k) (on - off)^2) / (a (a + n b)), a sum of
    # nonnegative terms: no cancellation (the difference lost n alpha eps, 4e-9 at n = 1e6),
    # and on - off = 3 alpha 2^(-k-1) + (1 - alpha) [k = 1] is formed without a subtraction
    on = alpha * 2.0 ** (1 - k) + (1.0 - alpha) * (k == 1)
    off = alpha * 2.0 ** (-k - 1)
    gap = 3.0 * alpha * 2.0 ** (-k - 1) + (1.0 - alpha) * (k == 1)
    a, b = 1.0 - alpha / 4, alpha / 4
    s2 = k * on * on + (n - k) * off * off
    quad = (a * s2 + b * (k * (n - k)) * gap * gap) / (a * (a + n * b))
    return float(0.5 * quad)


# ----------------------------------------------------------------------------- enumeration

def parity_atoms(n: int, subset, alpha: float, kind: str = "biased"):
    r"""The finite support of a parity distribution: atoms :math:`(x, y)` with probabilities.

    ``kind="biased"``: all :math:`2^n` points, weight :math:`(1-\alpha) 2^{-n} + \alpha
    \prod_i (3/4)^{[x_i = 1]} (1/4)^{[x_i = -1]}`, label :math:`\chi_I(x)`.
    ``kind="leaky"``: all :math:`2^n` points with weight :math:`(1-\alpha)2^{-n}` and label
    :math:`\chi_I(x)`, plus two atoms :math:`(x^I, \pm 1)` of weight :math:`\alpha/2` each.
    Expectations over these atoms are exact population expectations.

    Args:
        n: input dimension, ``1 <= n <= MAX_ENUMERATE``.
        subset, alpha: as in :func:`biased_sparse_parity`.
        kind: ``"biased"`` or ``"leaky"``.

    Returns:
        ``(x, y, prob)`` of shapes ``(M, n)``, ``(M,)``, ``(M,)``; ``prob`` sums to 1.

    Raises:
        ValueError: ``n > MAX_ENUMERATE``, unknown ``kind``, or invalid ``subset`` / ``alpha``.

    Example:
        >>> x, y, p = parity_atoms(3, [0, 1], 0.5)
        >>> x.shape, round(float(p.sum()), 12)
        ((8, 3), 1.0)
    """
    n, idx, alpha = _check_problem(n, subset, alpha)
    if n > MAX_ENUMERATE:
        raise ValueError(f"n = {n} is too large to enumerate 2^n points; need n <= "
                         f"{MAX_ENUMERATE}")
    if not isinstance(kind, str) or kind not in ("biased", "leaky"):
        raise ValueError(f"kind must be 'biased' or 'leaky', got {kind!r}")
    x = np.array(list(itertools.product((-1.0, 1.0), repeat=n)))
    y = np.prod(x[:, idx], axis=1)
    uniform = np.full(len(x), 2.0 ** -n)
    if kind == "biased":
        ones = (x > 0).sum(axis=1)
        biased = _BIAS ** ones * (1 - _BIAS) ** (n - ones)
        prob = (1 - alpha) * uniform + alpha * biased
    else:
        point = np.asarray(leaky_point(n, idx))
        x = np.vstack([x, point, point])
        y = np.concatenate([y, [1.0, -1.0]])
        prob = np.concatenate([(1 - alpha) * uniform, [alpha / 2, alpha / 2]])
    return jnp.asarray(x), jnp.asarray(y), jnp.asarray(prob)


def _check_atoms(atoms):
    try:
        x, y, prob = atoms
    except (TypeError, ValueError) as err:
        raise ValueError("atoms must be a triple (x, y, prob) as from parity_atoms") from err
    x = _validate.as_array("atoms[0] (x)", x, ndim=2)
    y = _validate.as_array("atoms[1] (y)", y, shape=(x.shape[0],))
    _pm_one("atoms[0] (x)", x)
    _pm_one("atoms[1] (y)", y)
    prob = _validate.as_array("atoms[2] (prob)", prob, shape=(x.shape[0],))
    if np.any(np.asarray(prob) < 0) or abs(float(prob.sum()) - 1.0) > 1e-9:
        raise ValueError("atoms[2] (prob) must be non-negative and sum to 1")
    return x, y, prob


def population_loss(predictions, atoms):
    r"""Exact population square loss :math:`\sum_a p_a \tfrac12 (f(x_a) - y_a)^2`.

    Args:
        predictions: ``(M,)`` predictions at the atoms' inputs, or a callable mapping the
            ``(M, n)`` inputs to them.
        atoms: ``(x, y, prob)`` from :func:`parity_atoms`.

    Returns:
        A scalar float64 array (differentiable if ``predictions`` is).

    Raises:
        ValueError: ``atoms`` not a triple of finite real arrays with ``x`` and ``y`` in
            {-1, +1} and ``prob`` a probability vector; ``predictions`` not a real numeric
            array (complex, bool, strings, objects are refused by dtype), of the
            wrong shape or (when concrete) not finite, or so large that the loss overflows
            float64 (when concrete).

    Example:
        >>> atoms = parity_atoms(3, [0, 1], 0.3)
        >>> round(float(population_loss(lambda x: 0 * x[:, 0], atoms)), 12)   # null predictor
        0.5
    """
    x, y, prob = _check_atoms(atoms)
    f = predictions(x) if callable(predictions) else predictions
    if f is None or isinstance(f, str | bytes):
        raise ValueError(f"predictions must be a real array, got {type(f).__name__}")
    # dtype checks only (trace-safe): complex, bool, strings and object arrays are refused
    f = _validate.real_array("predictions", f)
    if f.shape != y.shape:
        raise ValueError(f"predictions must have shape {y.shape}, got {f.shape}")
    try:
        finite = bool(jnp.all(jnp.isfinite(f)))
    except jax.errors.ConcretizationTypeError:  # traced (under jax.grad / jit): cannot check
        finite = True
    if not finite:
        raise ValueError("predictions contain NaN or inf")
    loss = 0.5 * jnp.sum(prob * (f - y) ** 2)
    if not isinstance(loss, jax.core.Tracer) and not bool(jnp.isfinite(loss)):
        # (f - y)^2 may overflow while the weighted sum is finite: scaled form
        r = np.asarray(f) - np.asarray(y)
        sc = _validate.max_abs(r)
        with np.errstate(over="ignore", under="ignore"):
            again = (0.5 * float(np.sum(np.asarray(prob) * (r / sc) ** 2)) * sc) * sc
        if np.isfinite(again):
            return jnp.asarray(again)
        raise ValueError(f"the loss overflows float64: predictions are too large "
                         f"(max |predictions| = {float(jnp.max(jnp.abs(f))):.3e})")
    return loss


def best_feature_loss(features, atoms, *, rcond: float = 1e-10):
    r"""Exact loss of the best predictor :math:`h(x) = \langle w, \phi(x)\rangle` in the span of
    the features (any norm bound: the infimum over :math:`\mathcal{F}(K, B)` as :math:`B \to
    \infty`).

    .. math::
        \min_w \tfrac12 \mathbb{E}(y - \langle w, \phi(x)\rangle)^2
        = \tfrac12 \mathbb{E}[y^2] - \tfrac12\, c^\top \Sigma^{+} c, \qquad
        c = \mathbb{E}[y\, \phi(x)],\ \Sigma = \mathbb{E}[\phi(x)\phi(x)^\top],

    computed by weighted least squares (``numpy.linalg.lstsq`` on :math:`\sqrt{p}\,\Phi`), which
    handles rank-deficient features. With a kernel :math:`K(x, x') = \langle\phi(x),
    \phi(x')\rangle` this is the best loss any kernel predictor can reach.

    Args:
        features: ``(M, p)`` features :math:`\phi(x_a)` at the atoms, or a callable mapping the
            ``(M, n)`` inputs to them.
        atoms: ``(x, y, prob)`` from :func:`parity_atoms`.
        rcond: relative cut-off for small singular values (``lstsq``'s ``rcond``), decided on
            the features with columns equilibrated (each scaled by a power of two to a largest
            entry in ``[0.5, 1)``), so rescaling a feature does not change the loss.

    Returns:
        ``(loss, w)``: a float and the ``(p,)`` minimizing weights.

    Raises:
        ValueError: malformed ``atoms`` (as :func:`population_loss`); ``features`` not a
            finite real ``(M, p)`` array; ``rcond`` not a real number in ``[0, 1)``; best
            weights beyond float64's range (tiny features; computed on features scaled by a
            power of two, so the loss itself is right for entries of any magnitude).

    Example:
        >>> atoms = parity_atoms(4, [0, 1], 0.0)
        >>> loss, w = best_feature_loss(lambda x: x, atoms)   # linear: no edge on a 2-parity
        >>> round(loss, 12)
        0.5
    """
    x, y, prob = _check_atoms(atoms)
    phi = features(x) if callable(features) else features
    phi = _validate.as_array("features", phi, ndim=2)
    if phi.shape[0] != x.shape[0]:
        raise ValueError(f"features must have {x.shape[0]} rows (one per atom), got "
                         f"{phi.shape[0]}")
    sq = np.sqrt(np.asarray(prob))
    A = np.asarray(phi) * sq[:, None]
    b = np.asarray(y) * sq
    rcond = _validate.scalar("rcond", rcond, minimum=0.0, maximum=1.0, allow_max=False)
    sa = _validate.max_abs(A)
    if sa == 0 or 1e-150 <= sa <= 1e150:  # the ordinary range: as always
        w, _, rank, _ = np.linalg.lstsq(A, b, rcond=rcond)
        if rank == _equilibrated_rank(A, rcond, rank):
            loss = 0.5 * float(np.sum((A @ w - b) ** 2))
            return loss, jnp.asarray(w)
    # the rank decision must not depend on the scale of each feature (column), which the best
    # predictor absorbs: when rcond on A itself keeps a different number of singular values
    # than on A with columns equilibrated (e.g. columns x [1e-5, 1, 1e5]), or A is near
    # 1e+-300, solve on the equilibrated A / 2^k (exact divisions) and scale w back
    d = _column_scales(A)
    Ad = A / d
    w_s, *_ = np.linalg.lstsq(Ad, b, rcond=rcond)
    loss = 0.5 * float(np.sum((Ad @ w_s - b) ** 2))
    with np.errstate(over="ignore", under="ignore"):
        w = w_s / d
    if not np.all(np.isfinite(w)):
        raise ValueError(f"the best weights overflow float64 (max |features| = {sa:.3e}): "
                         "rescale the features (the loss does not depend on their scale)")
    return loss, jnp.asarray(w)


def _column_scales(A):
    """Per-column powers of two bringing each column's largest entry into [0.5, 1) (1 for a
    zero column): dividing by them is exact, and the column span does not change."""
    m = np.max(np.abs(A), axis=0) if A.size else np.zeros(A.shape[1])
    return _validate.pow2_of(m)


def _equilibrated_rank(A, rcond, rank):
    """Numerical rank of A with columns equilibrated (:func:`_column_scales`), with lstsq's
    rule (singular values above rcond * the largest): invariant to the scale of each column.
    ``rank`` (A's own) is returned when all columns have the same power-of-two scale (then the
    equilibration is an exact global rescaling and changes no decision)."""
    d = _column_scales(A)
    if d.size == 0 or np.all(d == d[0]):
        return rank
    sv = np.linalg.svd(A / d, compute_uv=False)
    return int(np.sum(sv > rcond * sv[0])) if sv.size and sv[0] > 0 else 0


def leaky_kernel_edges(features, alpha: float, *, min_order: int = 2, rcond: float = 1e-12):
    r"""Exact best edge of a fixed feature map on **every** leaky parity
    :math:`\mathcal{D}_J \in \mathcal{P}^{\mathrm{lp}}[n, \alpha]` at once.

    For a feature map :math:`\phi` tabulated on the cube, the best predictor
    :math:`h = \langle w, \phi\rangle` on :math:`\mathcal{D}_J` (weight :math:`(1-\alpha)2^{-n}`
    on each point with label :math:`\chi_J`, weight :math:`\alpha` on :math:`x^J` with a random
    label, :func:`parity_atoms` with ``kind="leaky"``) has edge

    .. math::
        \gamma_J = \tfrac12\, r_J^\top (I + \alpha u_J u_J^\top)^{-1} r_J
                 = \tfrac12 \Bigl(\|r_J\|^2 - \frac{\alpha (u_J^\top r_J)^2}{1 + \alpha\|u_J\|^2}
                   \Bigr),

    where :math:`\psi` is :math:`\phi` in a basis orthonormal for the uniform part
    (:math:`(1-\alpha)2^{-n}\Psi^\top\Psi = I`), :math:`r_J = (1-\alpha)2^{-n}\Psi^\top\chi_J` and
    :math:`u_J = \psi(x^J)` (Sherman-Morrison); all :math:`r_J` come from one fast
    Walsh-Hadamard transform. This is the quantity that Malach et al. (2021),
    Claim 5.3, bounds for every kernel of dimension :math:`p`.

    Args:
        features: ``(2**n, p)`` real array, :math:`\phi` at the points of the cube in the order of
            :func:`parity_atoms` (``itertools.product((-1, 1), repeat=n)``), ``n <= MAX_ENUMERATE``.
        alpha: weight of the leaked point, in ``[0, 1)``.
        min_order: smallest subset size :math:`|J|` included (2: the paper's
            :math:`2^n - n - 1` problems).
        rcond: relative cut-off below which eigenvalues of the features' second-moment matrix
            :math:`(1-\alpha)2^{-n}\Phi^\top\Phi` are dropped (rank-deficient features);
            decided on the features with columns equilibrated (each scaled by a power of two
            to a largest entry in ``[0.5, 1)``), so rescaling a feature changes no edge.

    Returns:
        ``(edges, subsets)``: ``(S,)`` float64 array of exact best edges, and the list of the
        ``S`` subsets :math:`J` (sorted tuples), in increasing size then lexicographic order.

    Raises:
        ValueError: ``features`` not a finite real ``(2**n, p)`` array, ``alpha`` outside
            ``[0, 1)``, ``min_order`` not in ``[1, n]``, or ``rcond`` outside ``[0, 1)``.

    Example:
        >>> import itertools, numpy as np
        >>> x = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))
        >>> edges, subsets = leaky_kernel_edges(x, 0.2)       # linear features: no edge
        >>> len(subsets), float(np.abs(edges).max()) < 1e-15
        (4, True)
    """
    phi = np.asarray(_validate.as_array("features", features, ndim=2))
    size = phi.shape[0]
    n = size.bit_length() - 1
    if size < 2 or 2**n != size or n > MAX_ENUMERATE:
        raise ValueError(f"features must have 2**n rows (n <= {MAX_ENUMERATE}), got {size}")
    _, _, alpha = _check_problem(n, [0], alpha)
    if alpha >= 1.0:
        raise ValueError(f"alpha must be in [0, 1), got {alpha!r}")
    min_order = _validate.integer("min_order", min_order, minimum=1)
    if min_order > n:
        raise ValueError(f"min_order must be in [1, n] = [1, {n}], got {min_order}")
    rcond = _validate.scalar("rcond", rcond, minimum=0.0, maximum=1.0, allow_max=False)
    weight = (1.0 - alpha) / size
    # the edges do not depend on the scale of the features (the best w absorbs it): divide by
    # a power of two (exact, so results within range are bit-for-bit unchanged) to bring
    # max |phi| into [0.5, 1), so phi^T phi neither overflows (|phi| ~ 1e160) nor underflows
    # to zero (|phi| ~ 1e-160)
    phi = phi / _validate.pow2_scale(phi)
    lam, V = np.linalg.eigh(weight * phi.T @ phi)          # p x p: cheaper than an SVD
    keep = lam > rcond * max(lam.max(), np.finfo(float).tiny)
    d = _column_scales(phi)
    if not np.all(d == d[0]):
        # the rank decision must not depend on the scale of each feature: with columns
        # equilibrated (exact powers of two; the span, hence every edge, is unchanged) rcond
        # may keep a different number of eigenvalues, and then that decision is used
        lam_d, V_d = np.linalg.eigh(weight * (phi / d).T @ (phi / d))
        keep_d = lam_d > rcond * max(lam_d.max(), np.finfo(float).tiny)
        if keep_d.sum() != keep.sum():
            phi, lam, V, keep = phi / d, lam_d, V_d, keep_d
    psi = phi @ (V[:, keep] / np.sqrt(lam[keep]))          # (2^n, r), weight * psi^T psi = I
    subsets = [J for r in range(min_order, n + 1) for J in itertools.combinations(range(n), r)]
    masks = np.array([sum(1 << (n - 1 - i) for i in J) for J in subsets], dtype=np.int64)
    # r_J for every J at once: a fast Walsh-Hadamard transform of the columns of psi (axis i of
    # the reshaped table is x_i, index 0 <=> -1; afterwards index 1 <=> i in J)
    table = psi.reshape((2,) * n + (psi.shape[1],))
    for axis in range(n):
        lo, hi = np.take(table, 0, axis=axis), np.take(table, 1, axis=axis)
        table = np.stack([hi + lo, hi - lo], axis=axis)
    R = weight * table.reshape(size, -1)[masks].T          # (r, S)
    Uj = psi[masks]                                        # x^J: +1 exactly on J
    ur = np.einsum("sr,rs->s", Uj, R)
    # ||r||^2 - a (u.r)^2 / (1 + a ||u||^2) = (||r||^2 + a ||u||^2 ||r_perp||^2) / (1 + a ||u||^2)
    # with r_perp = r - (u.r / ||u||^2) u (Lagrange's identity): a sum of nonnegative terms,
    # without the cancellation of the difference when r is nearly parallel to u (the same
    # 1 - cos^2 pattern as in kernel_distance)
    r2 = np.sum(R**2, axis=0)
    u2 = np.sum(Uj**2, axis=1)
    coef = np.where(u2 > 0, ur / np.where(u2 > 0, u2, 1.0), 0.0)
    perp2 = np.sum((R - coef[None, :] * Uj.T) ** 2, axis=0)
    edges = 0.5 * (r2 + alpha * u2 * perp2) / (1.0 + alpha * u2)
    return edges, subsets


# ----------------------------------------------------------------------------- models

def _model_args(theta, x):
    """Static checks (valid under jit/grad/vmap): theta and x real, 1-D, the same length."""
    theta = _validate.real_array("theta", theta)
    x = _validate.real_array("x", x)
    if theta.ndim != 1 or theta.shape[0] == 0 or x.shape != theta.shape:
        raise ValueError(f"theta and x must both have shape (n,) with n >= 1 (one input: use "
                         f"jax.vmap for a batch), got {theta.shape} and {x.shape}")
    for name, v in (("theta", theta), ("x", x)):
        if not isinstance(v, jax.core.Tracer) and not np.isfinite(np.asarray(v)).all():
            raise ValueError(f"{name} contains NaN or inf")
    _pm_one("x", x)
    return theta.astype(jnp.float64), x.astype(jnp.float64)


def smooth_step(z):
    r"""A piecewise-quadratic sigmoid :math:`\sigma` with the properties of the activation of
    Malach et al. (2021, Sec. 3).

    .. math::
        \sigma(z) = 0\ (z \le 0),\quad 2z^2\ (0 \le z \le \tfrac12),\quad
        1 - 2(1-z)^2\ (\tfrac12 \le z \le 1),\quad 1\ (z \ge 1).

    It is continuously differentiable, :math:`|\sigma'| \le 2`, and flat (value and slope
    constant) outside :math:`(0, 1)`: the gates of the models below switch on or off without
    changing the gradient where they are closed. The formula is this course's reconstruction:
    the paper's definition is lost in the text available to us, which keeps only these
    properties and the identity :math:`z^2 = 2r^2(\sigma(z/2r) + \sigma(-z/2r))` on
    :math:`[-r, r]`, which this :math:`\sigma` satisfies.

    Args:
        z: float array of any shape.

    Returns:
        Array of the shape of ``z`` with values in [0, 1].

    Raises:
        ValueError: ``z`` not real numeric (checked from its dtype only: this element-wise
            function runs inside compiled models, so values are not checked; NaN gives NaN;
            the public entry points check their inputs).

    Example:
        >>> import jax.numpy as jnp
        >>> smooth_step(jnp.array([-1.0, 0.25, 0.5, 0.75, 2.0])).tolist()
        [0.0, 0.125, 0.5, 0.875, 1.0]
    """
    z = jnp.clip(_validate.real_array("z", z), 0.0, 1.0)
    return jnp.where(z < 0.5, 2.0 * z**2, 1.0 - 2.0 * (1.0 - z) ** 2)


def selected_parity(theta, x):
    r"""The selected-parity model: a linear predictor that turns into the parity of the
    coordinates it has selected (this course's version of Malach et al. 2021, eqs. 8-13).

    .. math::
        g_i = \sigma\Bigl(\frac{n^2\theta_i^2 - 4}{5}\Bigr), \quad
        A = \sigma\Bigl(\sum_i g_i\Bigr), \quad
        f_\theta(x) = (1 - A)\, 2\langle\theta, x\rangle + A \prod_{i=1}^n (1 - g_i + g_i x_i),

    with :math:`\sigma` = :func:`smooth_step`. The gate :math:`g_i` is 0 when
    :math:`|\theta_i| \le 2/n` and 1 when :math:`|\theta_i| \ge 3/n` (threshold
    :math:`\nu \in [2/n, 3/n]`), so

    * at :math:`\theta = 0`: :math:`f_0(x) = 0` (unbiased) and :math:`\nabla_\theta f_0(x) = 2x`
      (tangent kernel :math:`4\langle x, x'\rangle`), because every gate is flat there;
    * if :math:`|\theta_i| \ge 3/n` exactly on :math:`I \ne \emptyset` and
      :math:`|\theta_i| \le 2/n` elsewhere: :math:`f_\theta(x) = \chi_I(x)` for every ``x``.

    Args:
        theta: ``(n,)`` float parameters.
        x: ``(n,)`` input in {-1, +1}^n (one point: use ``jax.vmap`` for a batch).

    Returns:
        Scalar float64 array.

    Raises:
        ValueError: ``theta`` or ``x`` not real 1-D arrays of the same length (checked also
            under ``jit``/``grad``/``vmap``), or, for concrete inputs, NaN or inf in them,
            an entry of ``x`` outside {-1, +1}, or a model value outside float64's range
            (e.g. ``theta`` near -1e308, where :math:`2\langle\theta, x\rangle` overflows;
            traced inputs are not value-checked). Subnormal entries of a concrete ``theta``
            count (the linear term is then computed in numpy: XLA reads them as 0).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.array([1.0, -1.0, -1.0, 1.0])
        >>> float(selected_parity(jnp.zeros(4), x))
        0.0
        >>> jax.grad(selected_parity)(jnp.zeros(4), x).tolist()
        [2.0, -2.0, -2.0, 2.0]
        >>> float(selected_parity(jnp.array([1.0, 1.0, 0.0, 0.0]), x))   # parity of x_0 x_1
        -1.0
    """
    theta, x = _model_args(theta, x)
    n = theta.shape[0]
    g = smooth_step((n**2 * theta**2 - 4.0) / 5.0)
    gate = smooth_step(jnp.sum(g))
    out = (1.0 - gate) * 2.0 * jnp.dot(_closed(gate, theta), x) \
        + gate * jnp.prod(1.0 - g + g * x)
    if not any(isinstance(v, jax.core.Tracer) for v in (theta, x, out)):
        th = np.asarray(theta)
        if np.any((th != 0) & (np.abs(th) < _validate.TINY)):
            # XLA reads a subnormal theta_i as 0 (its gate is closed either way, g_i = 0): the
            # linear term 2 <theta, x> is recomputed in numpy, which keeps subnormals
            # (theta = (1e-310, 0), x = (1, 1) gave 0 for 2e-310)
            ga = float(gate)
            lin = 2.0 * float(np.dot(np.where(ga < 1.0, th, 0.0), np.asarray(x)))
            out = jnp.asarray((1.0 - ga) * lin + ga * float(jnp.prod(1.0 - g + g * x)))
    return _validate.finite_result(out, _OUTSIDE_RANGE.format(_max_abs_text(theta)))


def leaky_selected_parity(theta, x):
    r"""The biased-initialization model for leaky parities (this course's version of Malach et
    al. 2021, eq. 28).

    .. math::
        g_i = \sigma(n\theta_i - 2), \quad A = \sigma\Bigl(\sum_i g_i\Bigr), \quad
        f_\theta(x) = (1 - A)\bigl(-1 + 2\langle\theta, x\rangle\bigr)
                      + A \prod_{i=1}^n (1 - g_i + g_i x_i).

    The gate is one-sided: it opens only for :math:`\theta_i \ge 3/n` (and is closed for
    :math:`\theta_i \le 2/n`, negative values included). At :math:`\theta = 0`:
    :math:`f_0 = -1` (a *biased* initialization) and :math:`\nabla_\theta f_0(x) = 2x`, so the
    tangent kernel with its bias feature :math:`f_0` is :math:`1 + 4\langle x, x'\rangle`.

    Args:
        theta: ``(n,)`` float parameters.
        x: ``(n,)`` input in {-1, +1}^n.

    Returns:
        Scalar float64 array.

    Raises:
        ValueError: ``theta`` or ``x`` not real 1-D arrays of the same length (checked also
            under ``jit``/``grad``/``vmap``), or, for concrete inputs, NaN or inf in them,
            an entry of ``x`` outside {-1, +1}, or a model value outside float64's range
            (e.g. ``theta`` near -1e308, where :math:`2\langle\theta, x\rangle` overflows;
            traced inputs are not value-checked).

    Example:
        >>> import jax.numpy as jnp
        >>> float(leaky_selected_parity(jnp.zeros(3), jnp.ones(3)))
        -1.0
    """
    theta, x = _model_args(theta, x)
    n = theta.shape[0]
    g = smooth_step(n * theta - 2.0)
    gate = smooth_step(jnp.sum(g))
    out = (1.0 - gate) * (-1.0 + 2.0 * jnp.dot(_closed(gate, theta), x)) \
        + gate * jnp.prod(1.0 - g + g * x)
    return _validate.finite_result(out, _OUTSIDE_RANGE.format(_max_abs_text(theta)))


_OUTSIDE_RANGE = ("theta is too large: the model's value (its linear term 2 <theta, x>) is "
                  "outside float64's range (max |theta| = {})")


def _max_abs_text(theta):
    import jax as _jax

    return "traced" if isinstance(theta, _jax.core.Tracer) else \
        f"{float(jnp.max(jnp.abs(theta))):.3e}"


def _closed(gate, theta):
    """``theta`` where the gate is not fully open, else 0: the linear term is multiplied by
    ``1 - gate = 0`` there anyway, and huge ``theta`` (near 1e308) would make
    ``<theta, x>`` overflow to inf and ``0 * inf`` NaN. Values and gradients are unchanged
    elsewhere (``smooth_step`` is flat at 1, so the gate's slope is 0 where it is open)."""
    return jnp.where(gate < 1.0, theta, 0.0)
