r"""Lazy training: train a scaled model :math:`\alpha h(\theta)` and measure how lazy it was.

Chizat, Oyallon & Bach (2019) and Chizat (2020, blog Sec. 6) study gradient
descent on :math:`L_\alpha(\theta) = R(\alpha h(\theta))` with step :math:`\eta/\alpha^2`:

.. math::
    \theta_{k+1} = \theta_k - \frac{\eta}{\alpha}\, Dh(\theta_k)^\top \nabla R(\alpha h(\theta_k)).

When :math:`\alpha h(\theta_0)` stays bounded (e.g. :math:`h(\theta_0) = 0`), the parameters
move by :math:`O(1/\alpha)` while the predictor :math:`\alpha h` moves by :math:`O(1)`; as
:math:`\alpha\to\infty` training the model approaches training its linearization, i.e. kernel
gradient descent with the tangent kernel at initialization, started from the initial function
and stopped at the same time.

* :func:`scaled_square_loss` builds :math:`L(\theta, \alpha) = \frac{1}{2n}\sum_i
  (\alpha h(\theta, x_i) - y_i)^2`, with :math:`\alpha` passed as ``loss_args`` so one
  compiled loop serves a whole sweep of scales (:func:`lib.gradient_descent_sweep`).
* :func:`train` and :func:`train_sweep` run fixed-step gradient descent on it, on the model
  or on its linearization (as :func:`lib.linearize`), for a batch of scales at once.
* :func:`relative_movement` and :func:`laziness` answer "is my run lazy?": how far the
  parameters moved, and how much the tangent kernel changed (:mod:`lib.kernels`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from . import _validate, flows, kernels, ntk

PyTree = Any

__all__ = ["Laziness", "Run", "laziness", "relative_movement", "scaled_square_loss", "train",
           "train_sweep"]


def _data(X, y):
    X = _validate.as_array("X", X, ndim=2)
    y = _validate.as_array("y", y, shape=(X.shape[0],))
    if X.shape[0] < 1:
        raise ValueError("X must contain at least one point")
    return X, y


def scaled_square_loss(model: Callable, X, y) -> Callable:
    r"""The loss :math:`L(\theta, \alpha) = \frac{1}{2n}\sum_i (\alpha\, h(\theta, x_i) - y_i)^2`.

    Args:
        model: ``h(params, x)`` returning a scalar for one input ``x`` of shape ``(d,)``.
        X: ``(n, d)`` training inputs.
        y: ``(n,)`` targets.

    Returns:
        ``loss(params, alpha)``, a scalar; ``alpha`` is a float (or 0-d array).

    Raises:
        ValueError: ``model`` not callable; ``X`` not a finite real 2-D array with at least
            one row; ``y`` not a finite real ``(n,)`` vector; and, when ``loss`` is called, a
            ``model`` that does not return a scalar per input (a static shape check, also
            under ``jax.jit``), an ``alpha`` that is not a real 0-d number (vectors, complex,
            bools, strings; NaN or inf when concrete) or ``params`` that are not a pytree of
            real arrays (checked by dtype, so also under ``jax.jit``).

    Example:
        >>> import jax.numpy as jnp
        >>> loss = scaled_square_loss(lambda w, x: w @ x, jnp.eye(2), jnp.ones(2))
        >>> float(loss(jnp.ones(2), 2.0))     # (2 - 1)^2 / 2 on each point, averaged
        0.5
    """
    _validate.function("model", model, "model(params, x)")
    X, y = _data(X, y)
    n = X.shape[0]

    def loss(params, alpha):
        # trace-safe checks (dtype and rank; values when concrete): a vector, complex, bool,
        # string or NaN alpha, or params that are not real arrays, are refused by name
        alpha = _validate.traced_scalar("alpha", alpha)
        params = _validate.real_tree("params", params, finite=False)
        try:
            out = jax.vmap(lambda x: model(params, x))(X)
        except TypeError as err:
            raise ValueError(f"model(params, x) fails on the rows of X (shape {X.shape}): "
                             f"{type(err).__name__}: {str(err)[:300]}; check that params "
                             "match the model") from err
        if out.shape != (n,):  # static shape check: also under jit/grad
            raise ValueError(f"model must return a scalar for one input x of shape "
                             f"{X.shape[1:]}, got output shape {out.shape[1:]} per input")
        return 0.5 * jnp.sum((alpha * out - y) ** 2) / n

    return loss


class Run(NamedTuple):
    """A batch of gradient-descent runs recorded every ``num_steps / num_snapshots`` steps.

    Attributes:
        steps: ``(S + 1,)`` int array of step counts, from 0 to ``num_steps``.
        params: the parameter pytree with leading axes ``(B, S + 1)``.
        losses: ``(B, S + 1)`` training loss at each recorded step.
        final: the parameters after ``num_steps`` steps, leading axis ``B``.
    """

    steps: np.ndarray
    params: PyTree
    losses: jax.Array
    final: PyTree


def _linearized(model, params0):
    def h(params, x):
        delta = jax.tree_util.tree_map(jnp.subtract, params, params0)
        out0, tangent = jax.jvp(lambda p: model(p, x), (params0,), (delta,))
        return out0 + tangent

    return h


@functools.partial(jax.jit, static_argnames=("model", "linearized", "num_chunks", "chunk"))
def _gd_square(model, params, params0, X, y, alpha, step, linearized, num_chunks, chunk):
    """Fixed-step GD on the scaled square loss, vmapped over runs; compiled once per model,
    shapes and schedule (X and y are arguments, so new data reuse the compiled loop)."""

    def one(p, p0, a, s):
        h = _linearized(model, p0) if linearized else model

        def loss(q):
            out = jax.vmap(lambda x: h(q, x))(X)
            return 0.5 * jnp.mean((a * out - y) ** 2)

        grad = jax.grad(loss)

        def body(_, q):
            return jax.tree_util.tree_map(lambda u, g: u - s * g, q, grad(q))

        def chunk_fn(q, _):
            q = jax.lax.fori_loop(0, chunk, body, q)
            return q, (q, loss(q))

        last, (snaps, losses) = jax.lax.scan(chunk_fn, p, None, length=num_chunks)
        snaps = jax.tree_util.tree_map(lambda s0, ss: jnp.concatenate([s0[None], ss]), p, snaps)
        return last, snaps, jnp.concatenate([loss(p)[None], losses])

    return jax.vmap(one)(params, params0, alpha, step)


def train_sweep(model: Callable, params0: PyTree, X, y, *, alphas, step_sizes, num_steps: int,
                num_snapshots: int = 1, linearized: bool = False,
                batched: bool = False) -> Run:
    r"""Gradient descent on :math:`\frac{1}{2n}\sum_i (\alpha_b h(\theta, x_i) - y_i)^2` for a
    batch of runs :math:`b = 1, \dots, B`, each with its own scale and step.

    This is the experiment of Chizat, Oyallon & Bach (2019): with step
    ``eta / alpha**2`` the predictor :math:`\alpha h` follows the same time scale for every
    :math:`\alpha`, and as :math:`\alpha` grows the run approaches the run of the
    linearization (``linearized=True``), kernel gradient descent with the tangent kernel at
    ``params0`` from the initial function (the limit needs :math:`\alpha h(\theta_0)` bounded,
    e.g. a symmetric initialization). A fixed-step loop (``lax.fori_loop`` inside
    ``lax.scan``) vmapped over the runs
    and compiled once per model, shapes and schedule: a new data set, new scales or new steps of
    the same shapes reuse the compiled code. (For snapshots on a log scale, early stopping or
    other losses, use :func:`lib.gradient_descent_sweep`.)

    Args:
        model: ``h(params, x)`` returning a scalar for one input ``x`` of shape ``(d,)``; a
            module-level function (it is a static argument of the compiled loop).
        params0: initial parameters; a pytree shared by all runs, or with a leading axis ``B``
            on every leaf when ``batched=True``. The linearization is taken at each run's own
            initial parameters.
        X: ``(n, d)`` inputs; y: ``(n,)`` targets.
        alphas: ``(B,)`` output scales > 0 (the batch size ``B`` is read from here).
        step_sizes: a step > 0 or ``(B,)`` steps (e.g. ``eta / alphas**2``).
        num_steps: total steps, a multiple of ``num_snapshots``.
        num_snapshots: number of recorded states after step 0 (evenly spaced).
        linearized: train :math:`\bar h(\theta) = h(\theta_0) + Dh(\theta_0)(\theta-\theta_0)`.
        batched: ``params0`` carries the batch axis.

    Returns:
        A :class:`Run`.

    Raises:
        ValueError: ``model`` not callable, failing on one row of ``X`` with ``params0`` (a
            shape mismatch) or not returning a scalar; ``params0`` empty or with a leaf that
            is not a finite real array (complex is refused); ``X``, ``y`` not finite real
            arrays of shapes ``(n, d)``, ``(n,)``; ``alphas`` or ``step_sizes`` not finite
            and > 0 (bools and strings refused) or subnormal; ``num_steps`` not a positive
            multiple of ``num_snapshots`` (at most 1e6 snapshots); ``linearized`` or
            ``batched`` not a bool; an ``alphas`` entry so large that its run's initial loss
            (before any step) overflows float64.
        lib.DivergenceError: a run's loss or parameters became non-finite (the step is too
            large); the message names the runs.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from lib.twolayer import init_two_layer, two_layer
        >>> X, y = jnp.array([[1.0, 1.0], [-1.0, 1.0]]), jnp.array([1.0, 0.0])
        >>> p0 = init_two_layer(jax.random.key(0), 2, 100)
        >>> a = jnp.array([10.0, 100.0])
        >>> run = train_sweep(two_layer, p0, X, y, alphas=a, step_sizes=100 / a ** 2,
        ...                   num_steps=2000)
        >>> run.final["a"].shape, bool(jnp.all(run.losses[:, -1] < 1e-6))
        ((2, 100), True)
    """
    _validate.function("model", model, "model(params, x)", hashable=True)
    X, y = _data(X, y)
    linearized = _validate.boolean("linearized", linearized)
    batched = _validate.boolean("batched", batched)
    params0 = _validate.real_tree("params0", params0)
    alphas = _validate.as_array("alphas", alphas, ndim=1)
    an = np.asarray(alphas)  # compared in numpy: XLA would flush subnormal values to 0
    if an.size == 0 or bool(np.any(an <= 0)):
        raise ValueError("alphas must be a non-empty 1-D array of values > 0")
    if bool(np.any(an < _validate.TINY)):
        raise ValueError(f"alphas has subnormal values (below {_validate.TINY:.3e}): XLA "
                         "flushes them to zero")
    B = alphas.shape[0]
    if np.ndim(step_sizes) == 0 or isinstance(step_sizes, str | bytes):
        step_sizes = jnp.full((B,), _validate.step_size("step_sizes", step_sizes))
    steps = _validate.as_array("step_sizes", step_sizes, shape=(B,))
    if bool(jnp.any(steps <= 0)):
        raise ValueError("step_sizes must be > 0")
    _validate.step_size("step_sizes", steps)  # subnormal step sizes are flushed to zero
    num_steps = _validate.size("num_steps", num_steps, minimum=1, maximum=2**62)
    num_snapshots = _validate.size("num_snapshots", num_snapshots, minimum=1, maximum=10**6)
    if num_steps % num_snapshots:
        raise ValueError(f"num_steps ({num_steps}) must be a multiple of num_snapshots "
                         f"({num_snapshots})")
    params0 = jax.tree_util.tree_map(lambda p: jnp.asarray(p, jnp.float64), params0)
    if batched:
        if any(jnp.ndim(p) == 0 or jnp.shape(p)[0] != B
               for p in jax.tree_util.tree_leaves(params0)):
            raise ValueError(f"with batched=True every leaf of params0 needs a leading axis {B}")
    else:
        params0 = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, (B, *jnp.shape(p))),
                                         params0)
    if not all(bool(jnp.all(jnp.isfinite(p))) for p in jax.tree_util.tree_leaves(params0)):
        raise ValueError("params0 contains non-finite values")
    one = jax.tree_util.tree_map(lambda p: p[0], params0)
    _validate.scalar_model("model", model, one, X.shape[1:], params_name="params0")
    chunk = num_steps // num_snapshots
    last, snaps, losses = _gd_square(model, params0, params0, X, y, alphas, steps,
                                     bool(linearized), num_snapshots, chunk)
    finite = np.array(jnp.all(jnp.isfinite(losses), axis=1))
    for leaf in jax.tree_util.tree_leaves(last):
        finite &= np.array(jnp.all(jnp.isfinite(leaf.reshape(B, -1)), axis=1))
    if not finite.all():
        bad = np.flatnonzero(~finite)
        start = ~np.asarray(jnp.isfinite(losses[:, 0]))
        if start.any():
            # the loss at step 0 involves no step: alpha * model(params0, X) - y overflows
            runs = np.flatnonzero(start)
            raise ValueError(f"alphas {np.asarray(alphas)[runs].tolist()} (runs "
                             f"{runs.tolist()}) are too large: the initial loss "
                             f"|alpha model(params0, X) - y|^2 / (2n) is beyond float64's range "
                             f"before any step; reduce alpha or rescale params0 or X")
        # the first snapshot with a non-finite loss brackets the step of divergence
        lf = ~np.asarray(jnp.isfinite(losses))[bad]
        first = [int(np.argmax(row)) * chunk if row.any() else num_steps for row in lf]
        raise flows.DivergenceError(
            f"runs {bad.tolist()} diverged: non-finite loss or parameters by step {first} "
            f"respectively (checked every {chunk} steps, of {num_steps}); reduce their "
            "step_sizes")
    return Run(np.arange(num_snapshots + 1) * chunk, snaps, losses, last)


def train(model: Callable, params0: PyTree, X, y, *, alpha: float = 1.0, step_size: float,
          num_steps: int, num_snapshots: int = 1, linearized: bool = False) -> Run:
    r"""One run of :func:`train_sweep` (batch axis of length 1 removed).

    Args:
        model, params0, X, y, num_steps, num_snapshots, linearized: as in :func:`train_sweep`.
        alpha: output scale :math:`\alpha > 0`.
        step_size: the step :math:`\eta > 0` (``eta / alpha**2`` for the lazy scaling).

    Returns:
        A :class:`Run` without the batch axis: ``losses`` is ``(S + 1,)``.

    Raises:
        ValueError, lib.DivergenceError: as :func:`train_sweep` (``alpha`` subnormal too: XLA
            would flush it to 0; ``alpha`` so large that the initial loss overflows).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from lib.twolayer import init_two_layer, two_layer
        >>> X, y = jnp.array([[1.0, 1.0], [-1.0, 1.0]]), jnp.array([1.0, 0.0])
        >>> p0 = init_two_layer(jax.random.key(0), 2, 100)
        >>> run = train(two_layer, p0, X, y, alpha=10.0, step_size=100 / 10.0 ** 2,
        ...             num_steps=2000)
        >>> float(run.losses[-1]) < 1e-6
        True
    """
    alpha = _validate.positive("alpha", alpha, normal=True)
    step_size = _validate.step_size("step_size", step_size)
    _validate.boolean("linearized", linearized)
    try:
        run = train_sweep(model, params0, X, y, alphas=jnp.array([alpha]),
                          step_sizes=jnp.array([step_size]), num_steps=num_steps,
                          num_snapshots=num_snapshots, linearized=linearized)
    except ValueError as err:
        if str(err).startswith("alphas ["):  # an overflow of the initial loss: name alpha
            raise ValueError(f"alpha = {alpha!r} is too large: the initial loss |alpha "
                             f"model(params0, X) - y|^2 / (2n) is beyond float64's range before "
                             f"any step; reduce alpha or rescale params0 or X") from None
        raise
    return Run(run.steps, *(jax.tree_util.tree_map(lambda p: p[0], t)
                            for t in (run.params, run.losses, run.final)))


def relative_movement(params0: PyTree, params: PyTree) -> float:
    r"""Relative parameter movement :math:`\|\theta - \theta_0\| / \|\theta_0\|` (Euclidean norm
    over all leaves).

    In the lazy regime (scale :math:`\alpha \to \infty` with :math:`\alpha h(\theta_0)`
    bounded) it is :math:`O(1/\alpha)` (Chizat 2020, blog Sec. 6).

    Args:
        params0: reference parameters (not all zero).
        params: parameters with the same pytree structure and shapes.

    Returns:
        A float >= 0.

    Raises:
        ValueError: ``params0`` or ``params`` empty, with a leaf that is not a finite real
            array (None, string, complex, boolean, NaN or inf); structures or shapes differ;
            ``params0`` is zero; or ``params`` so much larger than ``params0`` that the ratio
            overflows. Computed in scaled form: entries of any magnitude are fine.

    Example:
        >>> import jax.numpy as jnp
        >>> relative_movement(jnp.array([3.0, 4.0]), jnp.array([3.0, 4.5]))
        0.1
    """
    params0 = _validate.real_tree("params0", params0)
    params = _validate.real_tree("params", params)
    flat0, _ = ravel_pytree(params0)
    leaves0 = jax.tree_util.tree_leaves(params0)
    leaves1 = jax.tree_util.tree_leaves(params)
    same = (jax.tree_util.tree_structure(params0) == jax.tree_util.tree_structure(params)
            and all(jnp.shape(a) == jnp.shape(b) for a, b in zip(leaves0, leaves1, strict=True)))
    if not same:
        raise ValueError("params must have the same pytree structure and shapes as params0")
    flat1, _ = ravel_pytree(params)
    flat0 = _validate.as_array("params0", flat0)
    flat1 = _validate.as_array("params", flat1)
    return _validate.relative_difference("params", flat1, "params0", flat0)


class Laziness(NamedTuple):
    """How far a run is from the kernel regime (all three are 0 for a perfectly lazy run).

    Attributes:
        movement: relative parameter movement :math:`\\|\\theta-\\theta_0\\|/\\|\\theta_0\\|`.
        kernel_change: :math:`\\|K_1 - K_0\\|_F / \\|K_0\\|_F` for the empirical tangent kernels.
        kernel_distance: :math:`1 - \\cos(K_0, K_1)` (:func:`lib.kernel_distance`).
    """

    movement: float
    kernel_change: float
    kernel_distance: float


def laziness(model: Callable, params0: PyTree, params: PyTree, X) -> Laziness:
    r"""Answer "is my run lazy?": parameter movement and tangent-kernel change between two states.

    The tangent kernels :math:`K_0, K_1` are the empirical tangent kernels of ``model`` at
    ``params0`` and ``params`` on the inputs ``X`` (:func:`lib.empirical_ntk`). This function
    only measures; it gives no verdict. A small ``kernel_change`` is necessary for the run to
    follow kernel gradient descent with :math:`K_0` (from the initial function, stopped at the
    same time), not sufficient: with an initial function that grows with the output scale, or
    at moderate scale, the kernel can change by a few percent while the outputs are several
    percent away from the kernel method (lazy-training chapter, "Is my run lazy?"). To decide,
    compare the outputs with those of the kernel method. A small ``kernel_distance`` says even
    less: it ignores changes of scale, so a kernel that grows a lot without turning has
    distance 0; only a large distance is informative (the run is not lazy).

    Args:
        model: ``h(params, x)`` with scalar output (an overall output scale does not matter:
            the measures are relative).
        params0: parameters at initialization.
        params: parameters after training (same structure).
        X: ``(n, d)`` inputs on which the kernels are compared (training or test points).

    Returns:
        A :class:`Laziness` of three floats.

    Raises:
        ValueError: ``model`` not a hashable callable, failing on ``params0`` or ``params``
            and one row of ``X``, or not returning a real floating-point scalar; ``X`` not a
            finite real 2-D array with at least one row; ``params0``/``params`` as in
            :func:`relative_movement`; a tangent kernel that is zero (at ``params0`` or
            ``params``) or not finite.

    Example:
        >>> import jax.numpy as jnp
        >>> f = lambda w, x: w @ x                 # linear model: the kernel never moves
        >>> lz = laziness(f, jnp.ones(2), 2 * jnp.ones(2), jnp.eye(2))
        >>> lz.movement, lz.kernel_change, round(lz.kernel_distance, 12)
        (1.0, 0.0, 0.0)
    """
    _validate.function("model", model, "model(params, x)", hashable=True)
    X = _validate.as_array("X", X, ndim=2)
    if X.shape[0] < 1:
        raise ValueError(f"X must have at least one row (input), got shape {X.shape}")
    move = relative_movement(params0, params)
    # check the model here, so that errors name this function's arguments (model, params0,
    # params, X), not empirical_ntk's (f, params, x1)
    for pname, p in (("params0", params0), ("params", params)):
        _validate.scalar_model("model", model, _validate.real_tree(pname, p), X.shape[1:],
                               params_name=pname, x_name="X")
    K0 = ntk.empirical_ntk(model, params0, X)
    K1 = ntk.empirical_ntk(model, params, X)
    if _validate.max_abs(K0) == 0.0:
        raise ValueError("the tangent kernel of model at params0 on X is zero (the model's "
                         "gradient vanishes there): the kernel change relative to it is "
                         "undefined")
    if _validate.max_abs(K1) == 0.0:
        raise ValueError("the tangent kernel of model at params on X is zero (the model's "
                         "gradient vanishes there): the kernel distance is undefined")
    return Laziness(move, kernels.relative_kernel_change(K0, K1),
                    kernels.kernel_distance(K0, K1))

