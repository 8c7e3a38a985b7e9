r"""Lazy training: train a scaled model :math:`\alpha h(\theta)` and measure how lazy it was.

Chizat, Oyallon & Bach (2019, Sec. 2) and Chizat & Bach (2020, blog Sec. 6) study gradient
descent on :math:`L_\alpha(\theta) = R(\alpha h(\theta))` with step :math:`\eta/\alpha^2`:

.. math::
    \theta_{k+1} = \theta_k - \frac{\eta}{\alpha}\, Dh(\theta_k)^\top \nabla R(\alpha h(\theta_k)).

The parameters move by :math:`O(1/\alpha)` while the predictor :math:`\alpha h` moves by
:math:`O(1)`; as :math:`\alpha\to\infty` training the model is the same as training its
linearization, i.e. kernel regression with the tangent kernel at initialization.

* :func:`scaled_square_loss` builds :math:`L(\theta, \alpha) = \frac{1}{2n}\sum_i
  (\alpha h(\theta, x_i) - y_i)^2`, with :math:`\alpha` passed as ``loss_args`` so one
  compiled loop serves a whole sweep of scales (:func:`lib.gradient_descent_sweep`).
* :func:`train` and :func:`train_sweep` run gradient descent on it, on the model or on its
  linearization (:func:`lib.linearize`).
* :func:`relative_movement` and :func:`laziness` answer "is my run lazy?": how far the
  parameters moved, and how much the tangent kernel changed (:mod:`lib.kernels`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from . import _validate, flows, kernels, ntk

PyTree = Any

__all__ = ["Laziness", "laziness", "relative_movement", "scaled_square_loss", "train",
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
        ValueError: ``model`` not callable; ``X`` not 2-D; ``y`` of the wrong shape; non-finite
            data.

    Example:
        >>> import jax.numpy as jnp
        >>> loss = scaled_square_loss(lambda w, x: w @ x, jnp.eye(2), jnp.ones(2))
        >>> float(loss(jnp.ones(2), 2.0))     # (2 - 1)^2 / 2 on each point, averaged
        0.5
    """
    if not callable(model):
        raise ValueError("model must be a callable model(params, x)")
    X, y = _data(X, y)
    n = X.shape[0]

    def loss(params, alpha):
        out = jax.vmap(lambda x: model(params, x))(X)
        return 0.5 * jnp.sum((alpha * out - y) ** 2) / n

    return loss


def train(model: Callable, params0: PyTree, X, y, *, alpha: float = 1.0, step_size: float,
          num_steps: int, linearized: bool = False, snapshots=None) -> flows.Trajectory:
    r"""Gradient descent on :math:`\frac{1}{2n}\sum_i(\alpha h(\theta, x_i) - y_i)^2` from
    ``params0``.

    Args:
        model: ``h(params, x)``, scalar output.
        params0: initial parameters (pytree of float arrays).
        X: ``(n, d)`` inputs; y: ``(n,)`` targets.
        alpha: output scale :math:`\alpha > 0`.
        step_size: the actual step :math:`\eta > 0` (pass ``eta / alpha**2`` for the lazy
            scaling of Chizat, Oyallon & Bach 2019).
        num_steps: number of steps (>= 0).
        linearized: train the linearization :math:`\bar h(\theta) = h(\theta_0) +
            Dh(\theta_0)(\theta - \theta_0)` instead of ``h`` (kernel regression with the
            tangent kernel at ``params0``).
        snapshots: as in :func:`lib.gradient_descent`.

    Returns:
        A :class:`lib.Trajectory`.

    Raises:
        ValueError: as :func:`scaled_square_loss` and :func:`lib.gradient_descent`, or
            ``alpha <= 0``.
        lib.DivergenceError: the step is too large and the loss became non-finite.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from lib.twolayer import init_two_layer, two_layer
        >>> X, y = jnp.array([[1.0, 1.0], [-1.0, 1.0]]), jnp.array([1.0, 0.0])
        >>> p0 = init_two_layer(jax.random.key(0), 2, 100)
        >>> traj = train(two_layer, p0, X, y, alpha=10.0, step_size=100 / 10.0 ** 2,
        ...              num_steps=2000)
        >>> float(traj.losses[-1]) < 1e-6
        True
    """
    alpha = _validate.positive("alpha", alpha)
    h = ntk.linearize(model, params0) if linearized else model
    loss = scaled_square_loss(h, X, y)
    return flows.gradient_descent(loss, params0, step_size=step_size, num_steps=num_steps,
                                  snapshots=snapshots, loss_args=jnp.float64(alpha))


def train_sweep(model: Callable, params0: PyTree, X, y, *, alphas, step_sizes, num_steps: int,
                linearized: bool = False, snapshots=None) -> flows.Trajectory:
    r""":func:`train` for a grid of output scales :math:`\alpha_b` from the same ``params0``.

    All runs share one compiled loop (:func:`lib.gradient_descent_sweep`).

    Args:
        model, X, y, linearized, snapshots: as in :func:`train`.
        params0: initial parameters shared by every run (no batch axis).
        alphas: ``(B,)`` output scales > 0.
        step_sizes: a step > 0, or ``(B,)`` steps (e.g. ``eta / alphas**2``).
        num_steps: number of steps.

    Returns:
        A :class:`lib.Trajectory` with a leading batch axis ``B``.

    Raises:
        ValueError: non-positive ``alphas`` or ``step_sizes``, shape mismatch, bad data.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from lib.twolayer import init_two_layer, two_layer
        >>> X, y = jnp.array([[1.0, 1.0], [-1.0, 1.0]]), jnp.array([1.0, 0.0])
        >>> p0 = init_two_layer(jax.random.key(0), 2, 100)
        >>> a = jnp.array([10.0, 100.0])
        >>> traj = train_sweep(two_layer, p0, X, y, alphas=a, step_sizes=100 / a ** 2,
        ...                    num_steps=2000)
        >>> traj.final["a"].shape
        (2, 100)
    """
    alphas = _validate.as_array("alphas", alphas, ndim=1)
    if alphas.size == 0 or bool(jnp.any(alphas <= 0)):
        raise ValueError("alphas must be a non-empty array of values > 0")
    B = alphas.shape[0]
    h = ntk.linearize(model, params0) if linearized else model
    loss = scaled_square_loss(h, X, y)
    stacked = jax.tree_util.tree_map(
        lambda p: jnp.broadcast_to(jnp.asarray(p, jnp.float64), (B, *jnp.shape(p))), params0)
    return flows.gradient_descent_sweep(loss, stacked, step_size=step_sizes,
                                        num_steps=num_steps, snapshots=snapshots,
                                        loss_args=alphas)


def relative_movement(params0: PyTree, params: PyTree) -> float:
    r"""Relative parameter movement :math:`\|\theta - \theta_0\| / \|\theta_0\|` (Euclidean norm
    over all leaves).

    In the lazy regime it is :math:`O(1/\alpha)` (Chizat, Oyallon & Bach 2019, Sec. 2).

    Args:
        params0: reference parameters (not all zero).
        params: parameters with the same pytree structure and shapes.

    Returns:
        A float >= 0.

    Raises:
        ValueError: structures or shapes differ, non-finite values, or ``params0`` is zero.

    Example:
        >>> import jax.numpy as jnp
        >>> relative_movement(jnp.array([3.0, 4.0]), jnp.array([3.0, 4.5]))
        0.1
    """
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
    n0 = float(jnp.linalg.norm(flat0))
    if n0 == 0:
        raise ValueError("params0 must not be all zero")
    return float(jnp.linalg.norm(flat1 - flat0)) / n0


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
    ``params0`` and ``params`` on the inputs ``X`` (:func:`lib.empirical_ntk`). A run is in the
    kernel regime when ``kernel_change`` (and ``kernel_distance``) stay small, say below 0.1:
    then the trained model is close to kernel regression with :math:`K_0`
    (Chizat, Oyallon & Bach 2019, Sec. 2; Fort et al. 2020).

    Args:
        model: ``h(params, x)`` with scalar output (an overall output scale does not matter:
            the measures are relative).
        params0: parameters at initialization.
        params: parameters after training (same structure).
        X: ``(n, d)`` inputs on which the kernels are compared (training or test points).

    Returns:
        A :class:`Laziness` of three floats.

    Raises:
        ValueError: as :func:`relative_movement`, :func:`lib.empirical_ntk` and
            :func:`lib.relative_kernel_change`.

    Example:
        >>> import jax.numpy as jnp
        >>> f = lambda w, x: w @ x                 # linear model: the kernel never moves
        >>> lz = laziness(f, jnp.ones(2), 2 * jnp.ones(2), jnp.eye(2))
        >>> lz.movement, lz.kernel_change, round(lz.kernel_distance, 12)
        (1.0, 0.0, 0.0)
    """
    X = _validate.as_array("X", X, ndim=2)
    move = relative_movement(params0, params)
    K0 = ntk.empirical_ntk(model, params0, X)
    K1 = ntk.empirical_ntk(model, params, X)
    return Laziness(move, kernels.relative_kernel_change(K0, K1),
                    kernels.kernel_distance(K0, K1))

