"""Gradient descent and gradient flow against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lib
from lib import flows


def _least_squares(seed=0, N=5, d=8):
    rng = np.random.default_rng(seed)
    X = jnp.asarray(rng.standard_normal((N, d)))
    y = jnp.asarray(rng.standard_normal(N))
    return X, y


@pytest.mark.parametrize("k", [1, 10, 137])
def test_gd_matches_closed_form_linear_model(k):
    """GD on 0.5||Xb - y||^2 from 0: b_k = sum_{j<k} (I - eta X^T X)^j eta X^T y."""
    X, y = _least_squares()
    eta = 0.3 / float(jnp.linalg.norm(X, 2) ** 2)
    A = np.eye(X.shape[1]) - eta * np.asarray(X.T @ X)
    want = np.zeros(X.shape[1])
    for _ in range(k):
        want = A @ want + eta * np.asarray(X.T @ y)
    traj = lib.gradient_descent(lambda b: 0.5 * jnp.sum((X @ b - y) ** 2), jnp.zeros(8),
                                step_size=eta, num_steps=k)
    np.testing.assert_allclose(traj.final, want, rtol=1e-12, atol=1e-14)
    assert traj.num_steps == k and traj.steps[-1] == k and traj.steps[0] == 0


@pytest.mark.parametrize("t", [0.5, 3.0])
def test_flow_matches_matrix_exponential(t):
    """The flow of 0.5||Xb - y||^2 from 0 is b(t) = X^+ (I - exp(-t X X^T)) y."""
    X, y = _least_squares(1)
    G = np.asarray(X @ X.T)
    want = np.asarray(X.T) @ np.linalg.solve(G, (np.eye(5) - scipy.linalg.expm(-t * G)) @ y)
    traj = lib.gradient_flow(lambda b: 0.5 * jnp.sum((X @ b - y) ** 2), jnp.zeros(8),
                             jnp.array([0.0, t]))
    np.testing.assert_allclose(traj.final, want, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(traj.params[0], 0.0)


def test_small_step_gd_approaches_flow_first_order():
    """The gap between GD and the flow at fixed time shrinks linearly in the step."""
    X, y = _least_squares(2)
    loss = lambda b: 0.5 * jnp.sum((X @ b - y) ** 2)  # noqa: E731
    T = 1.0
    ref = lib.gradient_flow(loss, jnp.zeros(8), jnp.array([T])).final
    errs = []
    for n in (100, 200, 400):
        traj = lib.gradient_descent(loss, jnp.zeros(8), step_size=T / n, num_steps=n)
        errs.append(float(jnp.linalg.norm(traj.final - ref)))
    slope = np.polyfit(np.log([100, 200, 400]), np.log(errs), 1)[0]
    assert -1.1 < slope < -0.9


def test_snapshots_and_pytree_params():
    traj = lib.gradient_descent(lambda p: jnp.sum(p["a"] ** 2) + jnp.sum((p["b"] - 1) ** 2),
                                {"a": jnp.ones(3), "b": jnp.zeros((2, 2))}, step_size=0.1,
                                num_steps=100, snapshots=np.array([0, 5, 100]))
    assert traj.params["a"].shape == (3, 3) and traj.params["b"].shape == (3, 2, 2)
    np.testing.assert_allclose(traj.params["a"][1], 0.8 ** 5 * np.ones(3), rtol=1e-12)
    np.testing.assert_allclose(traj.losses[0], 3.0 + 4.0)


def test_target_stops_early_and_fills():
    traj = lib.gradient_descent(lambda w: jnp.sum(w ** 2), jnp.ones(2), step_size=0.25,
                                num_steps=1000, target=1e-6)
    # loss after k steps is 2 * 0.25^k; the first k with 2 * 0.25^k <= 1e-6 is 11
    assert traj.converged and traj.num_steps == 11
    assert int(traj.steps[-1]) == 11 and float(traj.losses[-1]) <= 1e-6


def test_normalized_log_domain_reaches_tiny_losses():
    """Exponential loss on one separable point: normalized GD in log domain.

    log L(w) = -<x, w> and grad log L = -x, so each normalized step adds eta * x exactly.
    """
    x = jnp.array([1.0, 2.0])
    traj = lib.gradient_descent(lambda w: -jnp.dot(x, w), jnp.zeros(2), step_size=1.0,
                                num_steps=10_000, normalized=True, log_domain=True,
                                target=-5000.0)
    # -<x, k x> = -5k <= -5000 first at k = 1000
    assert traj.converged and traj.num_steps == 1000
    np.testing.assert_allclose(traj.final, 1000 * x)
    assert float(traj.losses[-1]) == pytest.approx(-5000.0)


def test_sweep_equals_separate_runs():
    X, y = _least_squares(3)
    loss = lambda b: 0.5 * jnp.sum((X @ b - y) ** 2)  # noqa: E731
    alphas = jnp.array([0.1, 1.0, 3.0])
    eta = jnp.array([0.01, 0.02, 0.03])
    init = alphas[:, None] * jnp.ones((3, 8))
    sweep = lib.gradient_descent_sweep(loss, init, step_size=eta, num_steps=50,
                                       snapshots=np.array([0, 10, 50]))
    assert sweep.params.shape == (3, 3, 8) and sweep.losses.shape == (3, 3)
    for i in range(3):
        one = lib.gradient_descent(loss, init[i], step_size=float(eta[i]), num_steps=50,
                                   snapshots=np.array([0, 10, 50]))
        np.testing.assert_allclose(sweep.params[i], one.params, rtol=1e-12)


def test_sweep_with_loss_args_and_early_stop_per_run():
    loss = lambda w, c: jnp.sum((w - c) ** 2)  # noqa: E731
    sweep = lib.gradient_descent_sweep(loss, jnp.zeros((2, 1)), step_size=0.25, num_steps=100,
                                       loss_args=jnp.array([[1.0], [100.0]]), target=1e-6)
    # loss_k = c^2 0.25^k: c = 1 stops at k = 10, c = 100 at k = 17
    assert sweep.num_steps.tolist() == [10, 17]
    assert sweep.converged.tolist() == [True, True]


def test_divergence_raises_or_stops():
    loss = lambda w: jnp.sum(w ** 2)  # noqa: E731
    with pytest.raises(flows.DivergenceError, match="non-finite"):
        lib.gradient_descent(loss, jnp.ones(2), step_size=10.0, num_steps=10_000)
    traj = lib.gradient_descent(loss, jnp.ones(2), step_size=10.0, num_steps=10_000,
                                on_divergence="stop")
    assert traj.diverged and traj.num_steps < 10_000


@pytest.mark.parametrize("kwargs, match", [
    (dict(step_size=0.0, num_steps=1), "step_size"),
    (dict(step_size=-1.0, num_steps=1), "step_size"),
    (dict(step_size=float("nan"), num_steps=1), "step_size"),
    (dict(step_size=0.1, num_steps=-1), "num_steps"),
    (dict(step_size=0.1, num_steps=10, snapshots=np.array([5, 2])), "snapshots"),
    (dict(step_size=0.1, num_steps=10, on_divergence="ignore"), "on_divergence"),
])
def test_gd_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lib.gradient_descent(lambda w: jnp.sum(w ** 2), jnp.ones(2), **kwargs)


def test_bad_params_and_times():
    with pytest.raises(ValueError, match="params0"):
        lib.gradient_descent(lambda w: jnp.sum(w ** 2), jnp.array([jnp.nan]), step_size=0.1,
                             num_steps=1)
    with pytest.raises(ValueError, match="times"):
        lib.gradient_flow(lambda w: jnp.sum(w ** 2), jnp.ones(1), jnp.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="rtol"):
        lib.gradient_flow(lambda w: jnp.sum(w ** 2), jnp.ones(1), jnp.array([1.0]), rtol=0.0)
    with pytest.raises(ValueError, match="batch"):
        lib.gradient_descent_sweep(lambda w: jnp.sum(w ** 2), {"a": jnp.ones((2, 1)),
                                   "b": jnp.ones((3, 1))}, step_size=0.1, num_steps=1)


def test_flow_failure_raises_with_residual():
    with pytest.raises(RuntimeError, match="gradient norm"):
        lib.gradient_flow(lambda w: jnp.sum(w ** 2), jnp.ones(1), jnp.array([100.0]),
                          max_steps=3)


def test_flow_target_event():
    traj = lib.gradient_flow(lambda w: 0.5 * jnp.sum(w ** 2), jnp.ones(1),
                             jnp.array([0.0, 1.0, 10.0]), target=0.5 * np.exp(-4.0))
    # loss(t) = 0.5 exp(-2t) hits the target at t = 2
    assert traj.converged
    np.testing.assert_allclose(traj.final, np.exp(-2.0), rtol=1e-6)
    np.testing.assert_allclose(traj.params[1], np.exp(-1.0), rtol=1e-8)


def test_snapshot_steps():
    s = lib.snapshot_steps(1000, 4)
    assert s.tolist() == [0, 1, 10, 100, 1000]
    with pytest.raises(ValueError, match="num_steps"):
        lib.snapshot_steps(0)


def test_float64_enabled():
    assert jnp.zeros(1).dtype == jnp.float64
    assert jax.config.jax_enable_x64


def test_sweep_shared_loss_args():
    """Shared data whose first axis equals the batch size is not sliced with axes=None."""
    X = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = jnp.array([1.0, 2.0, 3.0])
    loss = lambda w, d: 0.5 * jnp.sum((d[0] @ w - d[1]) ** 2)  # noqa: E731
    sweep = lib.gradient_descent_sweep(loss, jnp.zeros((3, 2)), step_size=0.1, num_steps=2000,
                                       loss_args=(X, y), loss_args_axes=None)
    np.testing.assert_allclose(sweep.final, np.tile([1.0, 2.0], (3, 1)), atol=1e-8)
    with pytest.raises(ValueError, match="loss_args_axes"):
        lib.gradient_descent_sweep(loss, jnp.zeros((3, 2)), step_size=0.1, num_steps=1,
                                   loss_args=(X, y), loss_args_axes=1)


@pytest.mark.parametrize("loss, kwargs, match", [
    (lambda w: (w - 1.0) ** 2, {}, "scalar"),
    (lambda w: jnp.nan * jnp.sum(w), {}, "not finite"),
    (lambda w: jnp.sum(w) - 10.0, dict(normalized=True), "must be >= 0"),
])
def test_bad_losses(loss, kwargs, match):
    with pytest.raises(ValueError, match=match):
        lib.gradient_descent(loss, jnp.ones(2), step_size=0.1, num_steps=5, **kwargs)


def test_flow_target_already_met_and_bad_loss():
    traj = lib.gradient_flow(lambda w: 0.5 * jnp.sum(w ** 2), jnp.ones(2), jnp.array([0.0, 1.0]),
                             target=5.0)
    assert traj.converged and traj.num_steps == 0
    np.testing.assert_array_equal(traj.final, 1.0)
    with pytest.raises(ValueError, match="finite scalar"):
        lib.gradient_flow(lambda w: jnp.nan * jnp.sum(w), jnp.ones(2), jnp.array([1.0]))
    with pytest.raises(ValueError, match="callable"):
        lib.gradient_flow(3, jnp.ones(2), jnp.array([1.0]))


# Issue 17: recording every step costs time and memory linear in the number of snapshots.

def test_every_step_recorded_matches_closed_form():
    """GD on L(w) = |w - c|^2 / 2 with step eta: w_k = c (1 - (1 - eta)^k) exactly; recorded
    at every step of 1300 (several compiled chunks and a padded last one)."""
    import lib.flows as flows

    c = jnp.array([1.0, -2.0, 0.5])
    eta, n = 0.01, 1300
    traj = flows.gradient_descent(lambda w: 0.5 * jnp.sum((w - c) ** 2), jnp.zeros(3),
                                  step_size=eta, num_steps=n, snapshots=np.arange(n + 1))
    k = np.arange(n + 1)
    expected = np.asarray(c)[None, :] * (1 - (1 - eta) ** k)[:, None]
    assert traj.params.shape == (n + 1, 3)
    np.testing.assert_array_equal(np.asarray(traj.steps), k)
    np.testing.assert_allclose(np.asarray(traj.params), expected, rtol=1e-10, atol=1e-13)


def test_every_step_recorded_with_early_stop_and_batch():
    """A sweep stopping at a target inside a chunk: later snapshots repeat the final state."""
    import lib.flows as flows

    scales = jnp.array([1.0, 4.0])
    traj = flows.gradient_descent_sweep(lambda w: 0.5 * jnp.sum(w ** 2), scales[:, None]
                                        * jnp.ones((2, 2)), step_size=0.1, num_steps=700,
                                        snapshots=np.arange(701), target=1e-6)
    # loss_k = s^2 (0.9)^(2k): first k with loss <= 1e-6
    first = [int(np.ceil(np.log(1e-6 / float(s) ** 2) / (2 * np.log(0.9)))) for s in scales]
    assert traj.params.shape == (2, 701, 2)
    for b in range(2):
        assert int(traj.num_steps[b]) == first[b]
        np.testing.assert_array_equal(np.asarray(traj.steps[b, first[b]:]), first[b])
        np.testing.assert_allclose(np.asarray(traj.params[b, -1]),
                                   float(scales[b]) * 0.9 ** first[b] * np.ones(2), rtol=1e-12)


def test_recording_that_does_not_fit_is_refused(monkeypatch):
    import lib.flows as flows

    monkeypatch.setattr(flows._validate, "available_memory", lambda: 10 * 2**20)  # 10 MiB free
    with pytest.raises(ValueError, match=r"snapshots: recording 5001 snapshots .* GiB"):
        flows.gradient_descent(lambda w: jnp.sum(w ** 2), jnp.ones(2000), step_size=0.1,
                               num_steps=5000, snapshots=np.arange(5001))
