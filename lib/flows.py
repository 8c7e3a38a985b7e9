r"""Gradient descent and gradient flow over a pytree of parameters.

Every experiment in the course trains a model by minimising a loss :math:`L(\theta)` with

.. math::
    \theta_{k+1} = \theta_k - \eta_k \nabla L(\theta_k)
    \qquad\text{or, as } \eta \to 0, \qquad
    \dot\theta(t) = -\nabla L(\theta(t)),

the *gradient flow* of Woodworth et al. (2020, Sec. 2) and Chizat & Bach (2020). This module
provides both, written once for any loss over any pytree of parameters:

* :func:`gradient_descent` runs a fixed step size (optionally *normalized*: the step is divided
  by the loss, as Moroshko et al. 2020 do for the exponential loss) inside a compiled
  ``lax.while_loop``. The trajectory is recorded only at chosen snapshot steps, written into a
  preallocated buffer by a compiled ``lax.scan`` over the snapshots; between snapshots the loop
  advances without leaving compiled code, so a run of 10^7 steps stores a few dozen states.
  Training stops early once the loss reaches a target.
* :func:`gradient_descent_sweep` runs the same training for a batch of initializations (for
  instance a grid of initialization scales ``alpha``) with a single compilation, through
  ``jax.vmap``, split over all local devices when there are several (``jax.sharding``).
* :func:`gradient_flow` integrates the ODE with an adaptive-step solver from diffrax, to the
  tolerances you choose; it is the reference that small-step gradient descent approaches.

Losses that become astronomically small (exponential loss at training accuracy
:math:`-\log L` in the thousands) are handled in *log domain*: pass ``log_domain=True`` and a
function returning :math:`\log L`. Then normalized GD uses :math:`\nabla L / L = \nabla \log L`,
which neither underflows nor stalls, and the recorded losses and the target are logs.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from tqdm import tqdm

from . import _validate

PyTree = Any

__all__ = [
    "DivergenceError",
    "Trajectory",
    "gradient_descent",
    "gradient_descent_sweep",
    "gradient_flow",
    "snapshot_steps",
]


class DivergenceError(RuntimeError):
    """Raised when the loss or the parameters become non-finite during training."""


class Trajectory(NamedTuple):
    """A training run recorded at snapshot steps.

    Attributes:
        steps: ``(S,)`` int array, number of steps taken when each snapshot was recorded.
            After an early stop (target reached or divergence) the remaining snapshots
            repeat the final state and show the step count at which training stopped.
        times: ``(S,)`` float64, the flow time of each snapshot: ``steps * step_size`` for
            gradient descent (in units of the normalized step when ``normalized=True``).
        params: the parameter pytree with a leading axis of length ``S``.
        losses: ``(S,)`` loss at each snapshot (``log L`` when ``log_domain=True``).
        final: the parameters when training stopped.
        num_steps: steps taken in total (an int, or an ``(B,)`` array for a sweep).
        converged: ``True`` where the loss reached ``target`` (``False`` if no target).
        diverged: ``True`` where the loss became non-finite (only with
            ``on_divergence="stop"``).

    For :func:`gradient_descent_sweep` every field has an extra leading batch axis ``B``.
    """

    steps: jax.Array
    times: jax.Array
    params: PyTree
    losses: jax.Array
    final: PyTree
    num_steps: Any
    converged: Any
    diverged: Any


class _State(NamedTuple):
    params: PyTree
    step: jax.Array
    loss: jax.Array
    done: jax.Array
    bad: jax.Array


def snapshot_steps(num_steps, count=64):
    """Snapshot steps spaced geometrically from 1 to ``num_steps``, with 0 prepended.

    Implicit-bias plots are read on a logarithmic time axis, so this is the default spacing.

    Args:
        num_steps: total number of steps, an int >= 1.
        count: approximate number of snapshots after step 0 (duplicates are removed).

    Returns:
        A sorted ``numpy`` int array starting at 0 and ending at ``num_steps``.

    Raises:
        ValueError: ``num_steps`` not an integer in ``[1, 2**62]`` or ``count`` not an
            integer in ``[1, 10**7]`` (bools are refused).

    Example:
        >>> snapshot_steps(1000, 4).tolist()
        [0, 1, 10, 100, 1000]
    """
    num_steps = _validate.size("num_steps", num_steps, minimum=1, maximum=2**62)
    count = _validate.size("count", count, minimum=1, maximum=10**7)
    geo = np.geomspace(1, num_steps, count).round()
    # float64 rounds steps above 2**53: clip so that no snapshot lies past num_steps
    geo = np.clip(geo, 1, float(num_steps)).astype(np.int64)
    geo = np.minimum(geo, num_steps)
    return np.unique(np.concatenate([[0], geo, [num_steps]]))


def _loss_and_direction(loss, params, loss_args, normalized, log_domain):
    """Loss value and the descent direction ``d`` with update ``params - eta * d``."""
    if loss_args is None:
        value, grad = jax.value_and_grad(loss)(params)
    else:
        value, grad = jax.value_and_grad(loss)(params, loss_args)
    if log_domain:
        # value = log L; grad L = L * grad log L and grad L / L = grad log L.
        scale = 1.0 if normalized else jnp.exp(value)
    else:
        # at loss exactly 0 (the minimum of a nonnegative loss) grad L / L is 0 / 0: no step
        # is taken there (the run has converged), instead of a NaN reported as divergence
        scale = jnp.where(value != 0, 1.0 / value, 0.0) if normalized else 1.0
    direction = jax.tree_util.tree_map(lambda g: scale * g, grad)
    return value, direction


def _all_finite(tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _advance_impl(loss, state, stop_step, step_size, target, loss_args, normalized, log_domain,
                  batched, args_axes=0):
    """Run steps until ``stop_step`` or until the target is reached (traced)."""

    def run_one(state, step_size, target, loss_args):
        def cond(s):
            return (s.step < stop_step) & ~s.done

        def body(s):
            value, direction = _loss_and_direction(loss, s.params, loss_args, normalized,
                                                   log_domain)
            reached = value <= target
            bad = ~jnp.isfinite(value) | ~_all_finite(direction)
            stop = reached | bad
            new_params = jax.tree_util.tree_map(
                lambda p, d: jnp.where(stop, p, p - step_size * d), s.params, direction)
            return _State(new_params, s.step + jnp.where(stop, 0, 1), value, stop, bad)

        s = jax.lax.while_loop(cond, body, state)
        # Loss at the state actually reached (the loop records the loss before each step).
        value, _ = _loss_and_direction(loss, s.params, loss_args, normalized, log_domain)
        bad = s.bad | ~jnp.isfinite(value)
        return s._replace(loss=value, done=s.done | (value <= target) | bad, bad=bad)

    if batched:
        axes_args = None if loss_args is None else args_axes
        return jax.vmap(run_one, in_axes=(0, 0, None, axes_args))(state, step_size, target,
                                                                  loss_args)
    return run_one(state, step_size, target, loss_args)


# Snapshots recorded per compiled call. One fixed size, so the loop is compiled once per loss
# whatever the number of snapshots (as before); the progress bar and the early stop are checked
# between calls, and a padded stop costs nothing (lax.cond skips it).
_CHUNK = 64


def _check_memory(num_snapshots, params0, batch):
    """Refuse a recording that would not fit in memory, naming its size."""
    per_state = sum(int(np.prod(np.shape(x))) * 8 for x in jax.tree_util.tree_leaves(params0))
    per_state += 8 * 2 * (batch or 1) + 2 * (batch or 1)  # step, loss, done, bad
    need = 2 * num_snapshots * per_state  # the chunks, then their concatenation
    avail = _validate.available_memory()
    if avail is not None and need > _validate.MEMORY_FRACTION * avail:
        raise ValueError(
            f"snapshots: recording {num_snapshots} snapshots of {per_state / 2**20:.3g} MiB each "
            f"needs about {need / 2**30:.3g} GiB, more than half of the "
            f"{avail / 2**30:.3g} GiB of memory available; record fewer snapshots (an int k "
            "records about k steps spaced geometrically)")


@functools.partial(jax.jit, static_argnames=("loss", "normalized", "log_domain", "batched",
                                             "args_axes"))
def _advance_chunk(loss, state, stops, fresh, step_size, target, loss_args, normalized,
                   log_domain, batched, args_axes=0):
    """Advance to each step of ``stops`` in turn, recording the state there: a ``lax.scan``
    whose stacked outputs are the preallocated snapshot buffer. A stop already reached is
    skipped (``lax.cond``), except the first one when ``fresh`` (the state's loss is not yet
    evaluated). Returns (final state, states with a leading axis ``len(stops)``)."""

    def advance(s, stop):
        return _advance_impl(loss, s, stop, step_size, target, loss_args, normalized,
                             log_domain, batched, args_axes)

    def body(carry, stop):
        s, first = carry
        go = first | jnp.any((s.step < stop) & ~s.done)
        s = jax.lax.cond(go, advance, lambda s, stop: s, s, stop)
        return (s, jnp.zeros_like(first)), s

    (state, _), states = jax.lax.scan(body, (state, jnp.asarray(fresh)), stops)
    return state, states




def _progress_enabled(progress):
    if progress is not None:
        return bool(progress)
    env = os.environ.get("LIB_PROGRESS")
    if env is not None:
        return env not in ("", "0", "false", "False")
    return sys.stderr.isatty()


def _check_snapshots(snapshots, num_steps):
    _validate.no_prng_key("snapshots", snapshots, "an int or a 1-D array of step indices")
    if snapshots is None:
        return snapshot_steps(num_steps)
    if isinstance(snapshots, int | np.integer) and not isinstance(snapshots, bool):
        return snapshot_steps(num_steps, _validate.size("snapshots", snapshots, minimum=1,
                                                        maximum=10**7))
    steps = np.asarray(snapshots)
    if steps.ndim != 1 or steps.size == 0 or not np.issubdtype(steps.dtype, np.integer):
        raise ValueError("snapshots must be an int or a non-empty 1-D array of step indices")
    if np.any(np.diff(steps) <= 0) or steps[0] < 0 or steps[-1] > num_steps:
        raise ValueError(f"snapshots must be strictly increasing steps in [0, {num_steps}]")
    return steps


def _step_sizes(step_size, batched):
    """A step size > 0 (or, for a sweep, a 1-D array of them): bools, strings, complex and
    None are refused, not coerced to 1.0."""
    if batched and np.ndim(step_size) == 1 and not isinstance(step_size, str | bytes):
        return _validate.step_size("step_size", step_size)
    return _validate.step_size("step_size", _validate.positive("step_size", step_size))


def _run(loss, params0, step_size, num_steps, snapshots, target, normalized, log_domain,
         loss_args, progress, on_divergence, batched, args_axes=0):
    num_steps = _validate.size("num_steps", num_steps, minimum=0, maximum=2**62)
    if not isinstance(on_divergence, str) or on_divergence not in ("raise", "stop"):
        raise ValueError(f"on_divergence must be 'raise' or 'stop', got {on_divergence!r}")
    _validate.function("loss", loss, "loss(params) -> scalar", hashable=True)
    normalized = _validate.boolean("normalized", normalized)
    log_domain = _validate.boolean("log_domain", log_domain)
    if progress is not None:
        progress = _validate.boolean("progress", progress)
    if target is not None:
        target = _validate.not_subnormal("target", _validate.scalar("target", target))
    params0 = _validate.real_tree("params0", params0)
    _step_sizes(step_size, batched)
    steps = _check_snapshots(snapshots, max(num_steps, 1)) if num_steps > 0 else np.array([0])
    leaves = jax.tree_util.tree_leaves(params0)
    if not leaves:
        raise ValueError("params0 must contain at least one array")
    params0 = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.float64), params0)
    if not bool(_all_finite(params0)):
        raise ValueError("params0 contains non-finite values")
    batch = leaves[0].shape[0] if batched else None
    eta = np.asarray(step_size, dtype=np.float64)
    if not np.all(np.isfinite(eta)) or np.any(eta <= 0):
        raise ValueError(f"step_size must be finite and > 0, got {step_size!r}")
    if batched:
        eta = np.broadcast_to(eta, (batch,)) if eta.ndim == 0 else eta
        if eta.shape != (batch,):
            raise ValueError(f"step_size must be a scalar or have shape ({batch},)")
    elif eta.ndim != 0:
        raise ValueError("step_size must be a scalar")
    target = -jnp.inf if target is None else jnp.float64(target)
    eta = jnp.asarray(eta)

    shape = (batch,) if batched else ()
    zeros = jnp.zeros(shape)
    state = _State(params0, jnp.zeros(shape, dtype=jnp.int64), zeros,
                   jnp.zeros(shape, dtype=bool), jnp.zeros(shape, dtype=bool))
    # Evaluate the initial loss through the same compiled path (stop_step = 0 takes no step).
    try:
        state, _ = _advance_chunk(loss, state, jnp.zeros(_CHUNK, dtype=jnp.int64), True, eta,
                                  target, loss_args, normalized, log_domain, batched, args_axes)
    except TypeError as err:
        raise ValueError(f"loss must return a real float64 scalar for params0 (and loss_args): "
                         f"{err}") from err
    except ValueError as err:
        if batched and "vmap" in str(err):
            raise ValueError(f"loss_args do not match the batch: {err}. Pass "
                             "loss_args_axes=None for data shared by all runs") from err
        raise
    initial = np.asarray(state.loss)
    if initial.shape != shape:
        raise ValueError(f"loss must return a scalar per run, got shape {initial.shape}")
    if not np.all(np.isfinite(initial)):
        raise ValueError("loss is not finite at params0 (NaN or inf)")
    if normalized and not log_domain and np.any(initial < 0):
        raise ValueError("normalized=True divides by the loss, which must be >= 0 at params0 "
                         f"(got {initial.min():g}); use log_domain=True for losses near 0")

    # snapshots that stop before num_steps: the run still goes to num_steps (or the target),
    # through one extra stop at num_steps whose state is dropped from the recording
    extra = num_steps > 0 and int(steps[-1]) < num_steps
    if extra:
        steps = np.append(steps, num_steps)
    _check_memory(steps.size, params0, batch)
    # Record the snapshots in chunks: one compiled lax.scan per chunk advances to each stop and
    # writes the state into the scan's preallocated output buffer; the chunks are joined once at
    # the end. Time and memory are linear in the number of snapshots.
    chunk = _CHUNK
    parts = []
    bar = tqdm(total=int(steps[-1]), disable=not _progress_enabled(progress), leave=False,
               desc="gradient descent")
    recorded = 0
    while recorded < steps.size:
        stops = steps[recorded:recorded + chunk]
        count = stops.size
        if count < chunk:  # pad with the last stop: no step is taken, the shape is reused
            stops = np.concatenate([stops, np.full(chunk - count, stops[-1])])
        state, part = _advance_chunk(loss, state, jnp.asarray(stops), False, eta, target,
                                     loss_args, normalized, log_domain, batched, args_axes)
        parts.append(part if count == chunk else
                     jax.tree_util.tree_map(lambda x, c=count: x[:c], part))
        recorded += count
        bar.n = int(stops[count - 1])
        bar.refresh()
        if bool(jnp.all(state.bad)) or bool(jnp.all(state.done)):
            break
    bar.close()
    if recorded < steps.size:  # fill snapshots after an early stop with the final state
        rest = steps.size - recorded
        parts.append(jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, (rest, *x.shape)), state))
    if on_divergence == "raise" and bool(jnp.any(state.bad)):
        if batched:  # name the diverged runs, each with its own step count and step size
            bad = np.flatnonzero(np.asarray(state.bad))
            at = np.asarray(state.step)[bad].tolist()
            etas = np.asarray(eta)[bad].tolist()
            raise DivergenceError(
                f"runs {bad.tolist()} diverged: the loss became non-finite after {at} steps "
                f"respectively (step sizes {etas}); reduce their step_size or pass "
                "on_divergence='stop'")
        raise DivergenceError(
            f"loss became non-finite after {int(state.step)} steps "
            f"(step_size={float(eta)!r}); reduce step_size or pass on_divergence='stop'")

    stacked = (parts[0] if len(parts) == 1 else
               jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *parts))
    del parts
    if extra:  # the stop at num_steps was not requested: drop its snapshot
        stacked = jax.tree_util.tree_map(lambda x: x[:-1], stacked)
    if batched:  # put the batch axis first: (B, S, ...)
        stacked = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), stacked)
    step_arr = stacked.step
    times = step_arr * (eta[:, None] if batched else eta)
    # normalized GD at loss exactly 0 stays there (grad L / L is taken as 0): converged
    at_zero = (state.loss == 0) if (normalized and not log_domain) else False
    reached = (state.loss <= target) | at_zero
    return Trajectory(
        steps=step_arr,
        times=times,
        params=stacked.params,
        losses=stacked.loss,
        final=state.params,
        num_steps=np.asarray(state.step) if batched else int(state.step),
        converged=np.asarray(reached) if batched else bool(reached),
        diverged=np.asarray(state.bad) if batched else bool(state.bad),
    )


def gradient_descent(loss: Callable, params0: PyTree, *, step_size: float, num_steps: int,
                     snapshots=None, target: float | None = None, normalized: bool = False,
                     log_domain: bool = False, loss_args: PyTree = None,
                     progress: bool | None = None, on_divergence: str = "raise") -> Trajectory:
    r"""Gradient descent :math:`\theta_{k+1} = \theta_k - \eta\, d_k` on any loss over a pytree.

    The direction is :math:`d_k = \nabla L(\theta_k)`, or :math:`\nabla L / L` with
    ``normalized=True`` (normalized GD, used for the exponential loss by Moroshko et al. 2020,
    Sec. 5). The loop is compiled once per ``loss`` function and advances between snapshots
    in compiled chunks; only the snapshots are stored.

    Args:
        loss: ``loss(params)`` or ``loss(params, loss_args)`` returning a scalar float64: the
            loss :math:`L`, or :math:`\log L` when ``log_domain=True``. Pass the same function
            object to repeated calls to reuse the compiled loop.
        params0: initial parameters, a pytree of float arrays (cast to float64).
        step_size: :math:`\eta > 0`.
        num_steps: maximal number of steps, an int >= 0.
        snapshots: steps at which to record the state: an int ``k`` for about ``k`` steps
            spaced geometrically (default 64), or an increasing int array in
            ``[0, num_steps]``. The run goes to ``num_steps`` (or the target) whatever the
            last snapshot; ``final`` and ``num_steps`` describe that end.
        target: stop as soon as the loss (or ``log L``) is at most this value.
        normalized: divide the gradient by the loss. At a loss of exactly 0 (the minimum of
            a nonnegative loss) no step is taken and the run counts as converged.
        log_domain: ``loss`` returns :math:`\log L`; the update uses
            :math:`\nabla L = L\,\nabla\log L` (or :math:`\nabla \log L` when normalized).
        loss_args: optional pytree passed as the second argument of ``loss``.
        progress: show a tqdm progress bar; ``None`` shows it only in a terminal or when the
            environment variable ``LIB_PROGRESS=1`` is set (built pages stay clean).
        on_divergence: ``"raise"`` (default) raises :class:`DivergenceError` when the loss or
            the gradient becomes non-finite; ``"stop"`` stops there and flags ``diverged``.

    Returns:
        A :class:`Trajectory` whose ``params`` leaves have a leading snapshot axis.

    Raises:
        ValueError: ``step_size`` not a finite real number > 0 (``True``, ``"1"``, complex
            are refused, not coerced) or subnormal (below ~2.2e-308: XLA flushes it to zero,
            so no step would move); ``num_steps`` not an integer in ``[0, 2**62]``;
            malformed ``snapshots`` (an int outside ``[1, 10**7]``, named ``snapshots``);
            ``params0`` empty or with a leaf that is not a finite
            real array (complex leaves are refused, not truncated); ``loss`` not callable
            or not a finite real scalar at ``params0``; ``target`` not a finite real number
            or subnormal (XLA would flush it to 0);
            ``normalized``, ``log_domain`` (or ``progress``, unless None) not a bool;
            ``on_divergence`` not ``"raise"`` or ``"stop"``; ``snapshots`` whose recording
            would need more than half the memory available (the message gives the size).
        DivergenceError: the run diverged and ``on_divergence="raise"``.

    Recording costs time and memory linear in the number of snapshots (each state is written
    into a preallocated buffer inside the compiled loop), so ``snapshots=np.arange(N + 1)``
    is fine when the ``N + 1`` states fit in memory.

    Example:
        >>> import jax.numpy as jnp
        >>> traj = gradient_descent(lambda w: jnp.sum((w - 3.0) ** 2), jnp.zeros(2),
        ...                         step_size=0.1, num_steps=200)
        >>> bool(jnp.allclose(traj.final, 3.0))
        True
    """
    return _run(loss, params0, step_size, num_steps, snapshots, target, normalized, log_domain,
                loss_args, progress, on_divergence, batched=False)


def gradient_descent_sweep(loss: Callable, params0: PyTree, *, step_size, num_steps: int,
                           snapshots=None, target: float | None = None,
                           normalized: bool = False, log_domain: bool = False,
                           loss_args: PyTree = None, loss_args_axes: int | None = 0,
                           progress: bool | None = None,
                           on_divergence: str = "raise", shard: bool | None = None) -> Trajectory:
    """:func:`gradient_descent` for a batch of ``B`` runs at once, with one compilation.

    Use it to sweep a grid of initialization scales: stack the initial parameters along a
    new leading axis (for example ``alpha[:, None] * w0``) and, if the step depends on the
    scale, pass one step size per run.

    Args:
        loss: as in :func:`gradient_descent`, for one run (it is vectorized with ``jax.vmap``).
        params0: pytree whose leaves all have a leading batch axis of length ``B``.
        step_size: a scalar, or a ``(B,)`` array of step sizes > 0.
        loss_args: ``None`` or a pytree passed as the second argument of ``loss``. By default
            (``loss_args_axes=0``) its leaves have a leading axis ``B``: one slice per run.
        loss_args_axes: ``0`` (per-run ``loss_args``, sliced along their first axis) or
            ``None`` (the same ``loss_args`` for every run: data shared by the sweep). Say
            ``None`` for shared data even when its first axis happens to equal ``B``.
        num_steps, snapshots, target, normalized, log_domain, progress, on_divergence: as in
            :func:`gradient_descent`; ``target`` is shared by all runs.
        shard: split the ``B`` runs over all local JAX devices (``jax.sharding``; the batch is
            padded to a multiple of the device count and the padding dropped from the result).
            ``None`` (default): shard when there are several devices, e.g. on a multi-GPU host
            or on CPU with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``. The runs are
            independent, so the result is the same as on one device.

    Returns:
        A :class:`Trajectory` whose fields have a leading batch axis: ``params`` leaves are
        ``(B, S, ...)``, ``losses`` and ``steps`` are ``(B, S)``, ``num_steps``,
        ``converged`` and ``diverged`` are ``(B,)`` numpy arrays. Each run stops on its own.

    Raises:
        ValueError: as :func:`gradient_descent`, or if ``step_size`` has the wrong shape, an
            entry <= 0 or a subnormal entry (named as subnormal), or ``shard`` is not a bool
            or None.

    Example:
        >>> import jax.numpy as jnp
        >>> alphas = jnp.array([0.5, 1.0, 2.0])
        >>> traj = gradient_descent_sweep(lambda w: jnp.sum((w - 1.0) ** 2),
        ...                               alphas[:, None] * jnp.ones((3, 4)),
        ...                               step_size=0.1, num_steps=300)
        >>> traj.final.shape
        (3, 4)
    """
    leaves = jax.tree_util.tree_leaves(params0)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError("params0 leaves must have a leading batch axis")
    sizes = {jnp.shape(x)[0] for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"params0 leaves must share the batch size, got sizes {sorted(sizes)}")
    if loss_args_axes not in (0, None) or isinstance(loss_args_axes, bool):
        raise ValueError(f"loss_args_axes must be 0 or None, got {loss_args_axes!r}")
    if shard is not None and not isinstance(shard, bool):
        raise ValueError(f"shard must be True, False or None, got {shard!r}")
    devices = jax.local_devices()
    batch = sizes.pop()
    if (len(devices) > 1 if shard is None else shard) and len(devices) > 1:
        pad = (-batch) % len(devices)
        params0 = _shard_runs(params0, pad, devices)
        if loss_args_axes == 0 and loss_args is not None:
            loss_args = _shard_runs(loss_args, pad, devices)
        eta = np.asarray(step_size, dtype=np.float64)
        if eta.ndim == 1 and pad:
            step_size = np.concatenate([eta, np.repeat(eta[-1:], pad)])
    traj = _run(loss, params0, step_size, num_steps, snapshots, target, normalized, log_domain,
                loss_args, progress, on_divergence, batched=True, args_axes=loss_args_axes)
    if jax.tree_util.tree_leaves(traj.final)[0].shape[0] != batch:  # drop the padding
        traj = jax.tree_util.tree_map(lambda x: x[:batch], traj)
    return traj


def _shard_runs(tree, pad, devices):
    """Pad the leading (run) axis of every leaf to a multiple of the device count by repeating
    the last run, and split it over the devices."""
    mesh = jax.sharding.Mesh(np.array(devices), ("runs",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("runs"))

    def put(x):
        x = jnp.asarray(x)
        if jnp.ndim(x) == 0:
            raise ValueError("params0 and per-run loss_args leaves need a leading batch axis")
        if pad:
            x = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)])
        return jax.device_put(x, sharding)

    return jax.tree_util.tree_map(put, tree)


@functools.lru_cache(maxsize=64)
def _flow_functions(loss):
    """The loss value and the vector field -grad L, built once per loss function so that
    repeated calls with the same ``loss`` reuse diffrax's compiled solve (a new closure per call
    would recompile every time)."""

    def value(y, args):
        return loss(y) if args is None else loss(y, args)

    def field(t, y, args):
        g = jax.grad(value)(y, args)
        return jax.tree_util.tree_map(jnp.negative, g)

    return value, field


@functools.lru_cache(maxsize=64)
def _target_event(loss, target, rtol, atol, bisection=False):
    """The event L(theta(t)) = target, located by Newton's method on t, or (``bisection``) by
    bisection, which needs only the sign of L - target and so also converges where L near the
    target is resolved to a few digits only (e.g. a target of 1e-20 for a loss that is a
    square of differences of O(1) numbers)."""
    value, _ = _flow_functions(loss)
    finder = optx.Bisection(rtol=rtol, atol=atol) if bisection else \
        optx.Newton(rtol=rtol, atol=atol)
    return diffrax.Event(lambda t, y, args, **kw: value(y, args) - target, root_finder=finder)


def gradient_flow(loss: Callable, params0: PyTree, times, *, rtol: float = 1e-10,
                  atol: float = 1e-12, loss_args: PyTree = None, target: float | None = None,
                  max_steps: int = 1_000_000, stiff: bool = False) -> Trajectory:
    r"""Integrate the gradient flow :math:`\dot\theta = -\nabla L(\theta)` with diffrax.

    An adaptive Runge-Kutta method (``Tsit5``, or the implicit ``Kvaerno5`` when
    ``stiff=True``) with a PID step-size controller integrates the flow to relative tolerance
    ``rtol`` and absolute tolerance ``atol`` and returns the state at the requested times.
    This is the reference against which gradient descent with small steps is compared, and
    the flow whose limits the implicit-bias theorems describe (Woodworth et al. 2020,
    Theorem 1; Chizat & Bach 2020).

    Args:
        loss: ``loss(params)`` or ``loss(params, loss_args)`` returning a scalar.
        params0: initial parameters, a pytree of float arrays.
        times: ``(S,)`` increasing times >= 0 at which to record the state; the flow is
            integrated from 0 to ``times[-1]``.
        rtol, atol: tolerances of the step-size controller, > 0.
        loss_args: optional second argument of ``loss``.
        target: stop when the loss reaches this value; later snapshots repeat the final state.
        max_steps: bound on the solver's steps.
        stiff: use the implicit solver ``Kvaerno5``.

    Returns:
        A :class:`Trajectory` with ``times`` as given and ``steps`` the solver's step count
        (the same for every snapshot).

    Raises:
        ValueError: ``times`` not a finite, non-empty, strictly increasing real array >= 0;
            ``rtol``/``atol`` not finite real numbers > 0, subnormal, or ``rtol`` below
            float64's precision (2.2e-16: the step size would collapse); ``max_steps`` not an
            integer in
            ``[1, 1e9]``; ``loss`` not callable, not a scalar, not of a real floating dtype
            (complex or integer losses have no real gradient) or not finite at ``params0``;
            ``params0`` empty or with a leaf that is not a finite real array (complex, None,
            strings, bools are refused); ``target`` not a finite real number or subnormal;
            ``stiff`` not a
            bool.
        RuntimeError: the solver failed (too many steps, step size collapsed), with the
            gradient norm reached. (When Newton's method cannot locate the time the loss
            reaches ``target``, e.g. a target of 1e-20 that the loss resolves to a few digits
            only, the crossing is located by bisection instead.)

    Example:
        >>> import jax.numpy as jnp
        >>> traj = gradient_flow(lambda w: 0.5 * jnp.sum(w ** 2), jnp.ones(2), jnp.array([0., 1.]))
        >>> round(float(traj.final[0]), 8)  # exp(-1)
        0.36787944
    """
    times = _validate.as_array("times", times, ndim=1)
    if times.size == 0 or bool(jnp.any(jnp.diff(times) <= 0)) or float(times[0]) < 0:
        raise ValueError("times must be a non-empty, strictly increasing array of times >= 0")
    if _validate.positive("rtol", rtol, normal=True) < np.finfo(np.float64).eps:
        raise ValueError(f"rtol = {rtol!r} is below float64's relative precision "
                         f"({np.finfo(np.float64).eps:.3e}): the step size would collapse")
    _validate.positive("atol", atol, normal=True)
    max_steps = _validate.size("max_steps", max_steps, minimum=1, maximum=10**9)
    stiff = _validate.boolean("stiff", stiff)
    _validate.function("loss", loss, "loss(params) -> scalar", hashable=True)
    params0 = _validate.real_tree("params0", params0)
    if not bool(_all_finite(params0)):
        raise ValueError("params0 contains non-finite values")
    if target is not None:
        target = jnp.float64(_validate.not_subnormal("target", _validate.scalar("target",
                                                                                target)))

    value, field = _flow_functions(loss)
    try:
        loss0 = value(params0, loss_args)
    except TypeError as err:
        raise ValueError(f"loss must return a real scalar for params0: {err}") from err
    if jnp.shape(loss0) != ():
        raise ValueError(f"loss must return a scalar, got shape {jnp.shape(loss0)}")
    if not jnp.issubdtype(jnp.asarray(loss0).dtype, jnp.floating):
        raise ValueError(f"loss must return a real floating-point scalar (its gradient drives "
                         f"the flow), got dtype {jnp.asarray(loss0).dtype}")
    if not bool(jnp.isfinite(loss0)):
        raise ValueError(f"loss must be a finite scalar at params0, got {loss0}")
    if target is not None and float(loss0) <= float(target):  # already there: nothing to do
        stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x] * times.shape[0]), params0)
        return Trajectory(steps=jnp.zeros(times.shape, dtype=jnp.int64), times=times,
                          params=stacked, losses=jnp.full(times.shape, loss0), final=params0,
                          num_steps=0, converged=True, diverged=False)
    event = None
    if target is not None:  # a continuous event located by Newton's method: stop at L = target
        event = _target_event(loss, float(target), float(rtol), float(atol))
    solver = diffrax.Kvaerno5() if stiff else diffrax.Tsit5()

    def solve(event):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field), solver, t0=0.0, t1=float(times[-1]), dt0=None, y0=params0,
            args=loss_args, saveat=diffrax.SaveAt(ts=times, t1=True),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
            max_steps=max_steps, event=event, throw=False)

    sol = solve(event)
    if target is not None and sol.result == diffrax.RESULTS.nonlinear_max_steps_reached:
        # the target was crossed but Newton's method could not locate the crossing (L near
        # the target known to a few digits only): locate it by bisection instead
        sol = solve(_target_event(loss, float(target), float(rtol), float(atol), True))
    stopped = target is not None and sol.result == diffrax.RESULTS.event_occurred
    if sol.result != diffrax.RESULTS.successful and not stopped:
        ok = np.flatnonzero(np.isfinite(np.asarray(sol.ts)))
        last = jax.tree_util.tree_map(lambda x: x[ok[-1]] if ok.size else x[0], sol.ys)
        gnorm = float(jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(
            jax.grad(value)(last, loss_args)))))
        raise RuntimeError(f"gradient_flow failed: {sol.result}; gradient norm {gnorm:.3e} at "
                           f"the last saved time, after {int(sol.stats['num_steps'])} steps")
    # diffrax packs the saved states: the snapshots reached, then the state at the end (t1 or
    # the event time), then inf padding for the snapshots after an event.
    num_saved = int(np.sum(np.isfinite(np.asarray(sol.ts))))
    final = jax.tree_util.tree_map(lambda x: x[num_saved - 1], sol.ys)
    idx = np.minimum(np.arange(times.shape[0]), num_saved - 1)
    ys = jax.tree_util.tree_map(lambda x: x[idx], sol.ys)
    losses = jax.vmap(lambda y: value(y, loss_args))(ys)
    n = int(sol.stats["num_steps"])
    return Trajectory(steps=jnp.full(times.shape, n), times=times, params=ys, losses=losses,
                      final=final, num_steps=n,
                      converged=bool(stopped),
                      diverged=False)
