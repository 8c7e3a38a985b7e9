"""Tests of lib.diagonal_classification (Moroshko et al. 2020): the margin
problem against scipy's SLSQP on the primal and cvxpy's max-margin limits, and exponential-loss
training against a smaller step and the sinh form of the flow."""

import numpy as np
import pytest
import scipy.optimize

from lib import convex, diagonal
from lib import diagonal_classification as dc


def _data(seed, N=6, d=4):
    rng = np.random.default_rng(seed)
    w_star = np.zeros(d)
    w_star[:2] = [1.0, -0.5]
    X = rng.normal(size=(N, d))
    y = np.sign(X @ w_star)
    return X, y


def _slsqp(X, y, mu, depth):
    """Independent answer: the primal min Q^D_mu(w) s.t. y_n <x_n, w> >= 1 by SLSQP."""
    A = y[:, None] * X

    def obj(w):
        return mu * float(np.sum(np.asarray(diagonal.q_D(w / mu, depth))))

    def grad(w):
        return np.asarray(diagonal.h_D_inverse(w / mu, depth))

    w0 = np.asarray(convex.max_margin(X, y, p=2)) * 1.01
    cons = {"type": "ineq", "fun": lambda w: A @ w - 1.0, "jac": lambda w: A}
    sol = scipy.optimize.minimize(obj, w0, jac=grad, constraints=[cons], method="SLSQP",
                                  options={"ftol": 1e-14, "maxiter": 500})
    assert sol.success, sol.message
    return sol.x


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("mu", [0.1, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_margin_limit_matches_primal_slsqp(seed, mu, depth):
    X, y = _data(seed)
    w = dc.margin_limit(X, y, mu, depth)
    ref = _slsqp(X, y, mu, depth)
    np.testing.assert_allclose(w, ref, atol=2e-5 * max(1.0, np.abs(ref).max()))
    assert np.min(y * (X @ w)) >= 1 - 1e-8


@pytest.mark.parametrize("depth", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 3])
def test_margin_limit_large_mu_is_l2_max_margin(seed, depth):
    X, y = _data(seed)
    w = dc.margin_limit(X, y, 1e8, depth)
    ref = np.asarray(convex.max_margin(X, y, p=2))
    np.testing.assert_allclose(w, ref, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 3])
def test_margin_limit_small_mu_approaches_l1_max_margin(seed):
    X, y = _data(seed)
    ref = np.asarray(convex.max_margin(X, y, p=1))
    errs = [np.linalg.norm(dc.margin_limit(X, y, mu) - ref) for mu in (1e-10, 1e-100,
                                                                             1e-300)]
    assert errs[2] <= errs[0] + 1e-7
    assert max(errs) < 0.05 * np.linalg.norm(ref)


def test_margin_limit_bad_input():
    X, y = _data(0)
    with pytest.raises(ValueError, match="mu"):
        dc.margin_limit(X, y, 0.0)
    with pytest.raises(ValueError, match="mu"):
        dc.margin_limit(X, y, -1.0)
    with pytest.raises(ValueError, match="y"):
        dc.margin_limit(X, 2 * y, 1.0)
    Xs = np.array([[1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="separable"):
        dc.margin_limit(Xs, np.array([1.0, -1.0]), 1.0)


@pytest.mark.parametrize("depth", [2, 3])
def test_exponential_path_reaches_below_1e_minus_300(depth):
    X, y = _data(2, N=5, d=3)
    run = dc.exponential_loss_path(X, y, np.array([0.5, 2.0]), depth,
                                         accuracies=[800.0, 1500.0])
    assert np.all(run.log_loss[:, 0] <= -800.0) and np.all(run.log_loss[:, 1] <= -1500.0)
    assert np.all(np.isfinite(run.w))
    # smoothed-margin bounds gamma <= -log L <= gamma + log N (margins from the weights)
    gt = -run.log_loss
    assert np.all(run.margin <= gt + 1e-9) and np.all(gt <= run.margin + np.log(5) + 1e-9)


@pytest.mark.parametrize("depth", [2, 3])
def test_exponential_path_step_independent(depth):
    """A smaller step (closer to gradient flow) gives the same predictor."""
    X, y = _data(4, N=5, d=3)
    a = dc.exponential_loss_path(X, y, 1.0, depth, accuracies=[20.0, 100.0], step=0.25)
    b = dc.exponential_loss_path(X, y, 1.0, depth, accuracies=[20.0, 100.0], step=0.05)
    np.testing.assert_allclose(a.w_hat, b.w_hat, atol=1e-3)


def test_exponential_path_has_the_link_form():
    """Along the flow w = alpha^2 h_2(A^T lam) with lam >= 0 (the sinh form, D = 2): so
    w_hat solves the stationarity of margin_limit at mu = alpha^2 / gamma, and the
    stationarity residual after fitting lam >= 0 by NNLS vanishes."""
    X, y = _data(5, N=4, d=5)
    alpha = 1.5
    run = dc.exponential_loss_path(X, y, alpha, accuracies=[30.0])
    w = run.w[0]
    z = np.arcsinh(w / (2 * alpha ** 2))
    A = y[:, None] * X
    lam, resid = scipy.optimize.nnls(A.T, z)
    assert resid < 1e-3 * np.linalg.norm(z)


def test_exponential_path_records_the_weight_integral_on_one_point():
    """On one point the softmax weight is p = 1 at every step, so the recorded integral
    s = sum_j eta_j p_j equals the normalized-flow time (accumulated separately)."""
    run = dc.exponential_loss_path(np.array([[1.0, 2.0]]), np.array([1.0]),
                                         np.array([0.5, 2.0]), 2, accuracies=[5.0, 40.0])
    assert run.s.shape == (2, 2, 1)
    np.testing.assert_allclose(run.s[..., 0], run.times, rtol=1e-12)


@pytest.mark.parametrize("depth", [2, 3])
def test_exponential_path_weight_integral_gives_the_flow_form(depth):
    """Independent answer: the gradient flow has w = alpha^2 h_2(4 A^T s) for D = 2 and
    w = alpha^D h_D(D (D - 2) alpha^(D - 2) A^T s) for D >= 3 (integrating du/dt =
    -grad log L). The run's recorded s must give its recorded w up to the discretization,
    which shrinks with the step (a wrong or unrecorded s gives an O(1) mismatch)."""
    X, y = _data(3, N=4, d=3)
    X = np.abs(X) + 0.2
    y = np.ones(4)
    A = y[:, None] * X
    alpha = 0.8
    c = 4.0 if depth == 2 else depth * (depth - 2) * alpha ** (depth - 2)
    errs = []
    for step in (0.1, 0.05):
        run = dc.exponential_loss_path(X, y, alpha, depth, accuracies=[3.0, 30.0],
                                             step=step)
        assert np.all(run.s >= 0) and np.all(np.diff(run.s, axis=0) >= 0)
        w_flow = alpha ** depth * np.asarray(diagonal.h_D(c * run.s @ A, depth))
        errs.append(np.max(np.linalg.norm(w_flow - run.w, axis=1)
                           / np.linalg.norm(run.w, axis=1)))
    assert errs[0] < 2e-2 and errs[1] < 0.7 * errs[0], errs


def test_exponential_path_bad_input():
    X, y = _data(0)
    with pytest.raises(ValueError, match="accuracies"):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[10.0, 5.0])
    with pytest.raises(ValueError, match="alpha"):
        dc.exponential_loss_path(X, y, -1.0)
    with pytest.raises(ValueError, match="y"):
        dc.exponential_loss_path(X, np.zeros_like(y), 1.0)


# ---------------------------------------------------------------------------------------------
# exponential_loss_path against an independent integration of the gradient flow
# ---------------------------------------------------------------------------------------------

def _gaussian(seed):
    """The Gaussian 5x8 instances on which the step fixed per level used to diverge."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(5, 8))
    return X, np.sign(rng.normal(size=5))


_X3, _Y3 = np.array([[1.0, 2.0], [2.0, 0.5], [-1.0, 1.5]]), np.ones(3)


def _flow_field(X, y, depth):
    """log L and the field -grad log L of u = (u_+, u_-), by hand in numpy."""
    from scipy.special import logsumexp, softmax
    A = y[:, None] * X
    N, d = A.shape

    def w_of(u):
        return u[:d] ** depth - u[d:] ** depth

    def log_loss(u):
        return logsumexp(-A @ w_of(u)) - np.log(N)

    def field(_, u):
        g = -A.T @ softmax(-A @ w_of(u))          # d log L / d w
        return -np.concatenate([depth * u[:d] ** (depth - 1) * g,
                                -depth * u[d:] ** (depth - 1) * g])
    return log_loss, field, w_of


def _exp_flow(X, y, alpha, depth, losses=None, t_end=None):
    """Independent answer: LSODA integration of du/dt = -grad log L from u_+ = u_- = alpha.
    With ``losses`` (decreasing log L values): [(t, w)] where log L first crosses each; with
    ``t_end``: log L at that time."""
    from scipy.integrate import solve_ivp
    log_loss, field, w_of = _flow_field(X, y, depth)
    u0 = np.full(2 * X.shape[1], float(alpha))
    if t_end is not None:
        sol = solve_ivp(field, [0, t_end], u0, method="LSODA", rtol=1e-10, atol=1e-14)
        assert sol.success, sol.message
        return log_loss(sol.y[:, -1])
    events = []
    for v in losses:
        def ev(_, u, v=v):
            return log_loss(u) - v
        ev.direction = -1
        events.append(ev)
    events[-1].terminal = True
    sol = solve_ivp(field, [0, 1e15], u0, method="LSODA", rtol=1e-10, atol=1e-14,
                    events=events)
    assert sol.success and all(len(t) for t in sol.t_events), sol.message
    return [(te[0], w_of(ue[0])) for te, ue in zip(sol.t_events, sol.y_events, strict=True)]


@pytest.mark.parametrize(("instance", "alpha", "depth"), [
    ("3x2", 1e-6, 3), ("3x2", 1e-4, 4), ("3x2", 1.0, 2),
    (0, 1e-2, 3), (0, 0.1, 4), (0, 1.0, 2),
    (1, 1e-2, 2), (1, 0.1, 3), (1, 0.1, 4)])
def test_exponential_path_follows_the_gradient_flow(instance, alpha, depth):
    """Margin, w, w_hat = w / margin and flow time against LSODA's integration of the flow of
    log L, where the loss reached at accuracies 1, 5, 10 is crossed (the first iterate below
    an accuracy passes it by up to one step's decrease, so the comparison is at the loss
    reached). The step fixed per level of the accuracy range diverged on the Gaussian
    instances (alpha = 1e-2, D = 3 after 49 steps). Measured errors at step 0.25: at most
    8.0e-3 (margin), 3.0e-2 (w), 2.5e-2 (w_hat), 7.5e-2 (flow time); first order in the
    step: halving it halves the largest error (ratios 0.50-0.51)."""
    X, y = (_X3, _Y3) if instance == "3x2" else _gaussian(instance)
    A = y[:, None] * X
    errors = []
    for step in (0.25, 0.125):
        run = dc.exponential_loss_path(X, y, alpha, depth, [1.0, 5.0, 10.0], step=step)
        assert np.all(run.log_loss <= -run.accuracies)
        err = []
        for k, (t, w) in enumerate(_exp_flow(X, y, alpha, depth, run.log_loss)):
            margin = np.min(A @ w)
            # at accuracy 1 the margin may be near 0 or negative (gamma <= -log L <=
            # gamma + log N): errors of margin relative to max(|margin|, 1), of w_hat only
            # once the margin is >= 1
            err.append([abs(run.margin[k] - margin) / max(abs(margin), 1.0),
                        np.linalg.norm(run.w[k] - w) / np.linalg.norm(w),
                        np.linalg.norm(run.w_hat[k] - w / margin) / np.linalg.norm(w / margin)
                        if margin >= 1 else 0.0,
                        abs(run.times[k] / t - 1)])
        errors.append(np.max(err, axis=0))
    assert np.all(errors[0] <= [0.015, 0.04, 0.04, 0.09]), errors
    assert 0.4 <= errors[1].max() / errors[0].max() <= 0.6, errors


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_curvature_bound_dominates_the_hessian(depth):
    """M(u) >= ||hessian of log L||_2 (jax.hessian of log_exponential_loss) at random points:
    random data, x_n in {-1, +1}^d, u_+ = u_- (the start, where the bound summing both halves
    of u per coordinate is needed: the one with max_i u_i^(2D-2) is off by 2x there) and
    scales over two decades. It is attained in the limit: at the start u_+ = u_- = a with
    rows x, -x, x, -x (log L has curvature ||x||^2 along w there, and no gradient), the
    ratio is 1 - O(1 / a^D), so no smaller multiple of the first term bounds the Hessian (the
    bound with max_i u_i^(2D-2) was half of it)."""
    import jax
    import jax.numpy as jnp
    N, d = 4, 3

    def f(u, A):
        return dc.log_exponential_loss({"w_plus": u[:d], "w_minus": u[d:]}, (A, depth))
    hessian = jax.jit(jax.hessian(f))
    rng = np.random.default_rng(depth)
    ratios = []
    for trial in range(60):
        X = (rng.choice([-1.0, 1.0], size=(N, d)) if trial % 3 == 0
             else rng.normal(size=(N, d)) * np.exp(rng.normal()))
        A = rng.choice([-1.0, 1.0], N)[:, None] * X
        up = np.exp(rng.normal() + rng.normal(size=d))
        um = up.copy() if trial % 2 == 0 else np.exp(rng.normal() + rng.normal(size=d))
        H = np.asarray(hessian(jnp.asarray(np.concatenate([up, um])), jnp.asarray(A)))
        xmax = np.max(np.linalg.norm(X, axis=1))
        M = float(dc._curvature_bound(jnp.asarray(up), jnp.asarray(um), xmax, depth))
        ratios.append(np.linalg.norm(H, 2) / M)
    assert max(ratios) <= 1 + 1e-9, max(ratios)
    x = np.array([1.0, -2.0, 0.5])
    A = np.stack([x, -x, x, -x])
    u = np.full(2 * d, 100.0)
    H = np.asarray(hessian(jnp.asarray(u), jnp.asarray(A)))
    M = float(dc._curvature_bound(jnp.asarray(u[:d]), jnp.asarray(u[d:]),
                                        np.linalg.norm(x), depth))
    assert 1 - 1e-4 < np.linalg.norm(H, 2) / M <= 1 + 1e-12, np.linalg.norm(H, 2) / M


def _message_numbers(msg):
    import re
    t = float(re.search(r"flow time ([0-9.e+-]+)\)", msg).group(1))
    f = float(re.search(r"log L = ([0-9.e+-]+)\)", msg).group(1))
    return t, f


@pytest.mark.parametrize(("alpha", "depth"), [(1e-6, 3), (1e-6, 4), (1e-4, 4)])
def test_exponential_path_stops_on_a_plateau(alpha, depth):
    """Near the saddle at u = 0 the flow needs times 5.5e5, 2.1e11, 2.1e7 to reach
    -log L = 1 on this instance (LSODA), more steps than allowed: a RuntimeError naming the
    plateau, never a divergence error (as with the step fixed per level) or a wrong answer.
    The flow time and loss it reports agree with LSODA: the flow at that time is still at
    that loss, short of the accuracy."""
    X, y = _gaussian(0)
    with pytest.raises(RuntimeError, match=r"plateau.*saddle point.*larger max_steps") as info:
        dc.exponential_loss_path(X, y, alpha, depth, [1.0, 10.0], max_steps=50_000)
    assert "50000 steps" in str(info.value)
    t, f = _message_numbers(str(info.value))
    assert f > -1.0
    assert _exp_flow(X, y, alpha, depth, t_end=t) == pytest.approx(f, abs=1e-4)
    (t_star, _), = _exp_flow(X, y, alpha, depth, [-1.0])
    assert t_star > 1.05 * t


def test_exponential_path_plateau_at_the_default_budget():
    """The same plateau with the default max_steps (2e6 per checkpoint): a RuntimeError
    after 2e6 steps (about 8 s), also for a batch of scales."""
    X, y = _gaussian(0)
    with pytest.raises(RuntimeError, match=r"max_steps=2000000 steps.*plateau"):
        dc.exponential_loss_path(X, y, np.array([1e-6, 1e-4]), 4, [1.0])


def test_exponential_path_names_the_argument_at_fault():
    """Round-9 findings F9, F10: max_ratio = 1 + 1e-12 asked for 1e13 levels (a MemoryError
    of 16.8 TiB); step = 1e-300 was blamed on alpha, step = 5e-324 on the curvature bound,
    accuracies = [1e-320] on a 'target'."""
    X, y = _X3, _Y3
    with pytest.raises(ValueError, match=r"max_ratio=1.000000000001 is too close to 1"):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[10.0], max_ratio=1 + 1e-12)
    with pytest.raises(ValueError, match=r"max_ratio must be > 1"):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[10.0], max_ratio=1 + 1e-17)
    with pytest.raises(ValueError, match=r"^step=1e-300 is too small.*pass step >="):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[1.0], step=1e-300)
    with pytest.raises(ValueError, match=r"^step = 5e-324 is subnormal"):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[1.0], step=5e-324)
    with pytest.raises(ValueError, match=r"^accuracies has a subnormal value"):
        dc.exponential_loss_path(X, y, 1.0, accuracies=[1e-320])
    # the largest accepted step resolution at the start: alpha is at fault, not step
    with pytest.raises(ValueError, match=r"^alpha=100000000.0 is too large"):
        dc.exponential_loss_path(X, y, 1e8, accuracies=[1.0], step=0.01)


def test_exponential_path_checkpoints_do_not_change_the_path():
    """max_ratio and max_steps only count the step budget: a coarse and a fine set of
    checkpoints give the same iterates (the step depends on the iterate alone)."""
    X, y = _gaussian(1)
    a = dc.exponential_loss_path(X, y, 0.1, 3, [1.0, 10.0], max_ratio=1.01)
    b = dc.exponential_loss_path(X, y, 0.1, 3, [1.0, 10.0], max_ratio=1e6)
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_array_equal(a.w, b.w)


def test_exponential_w_hat_is_nan_exactly_where_the_margin_is_not_positive():
    """Issue 21 round 10: at an accuracy -log eps <= log N the loss L <= eps does not force
    every margin positive (mean exp(-margin_n) <= eps gives margin_n > 0 only for N eps < 1),
    and w / margin was [nan, inf] (margin 0) or a sign-flipped predictor (margin < 0). By
    hand, at the start (w = 0, L = 1) the first iterate with L <= exp(-1e-3) for rows (1, 0),
    (-1, 1) is the first step, which moves only the second coordinate (the gradient of
    exp(-w1) + exp(w1 - w2) in w1 is 0 at w = 0): margin min(w1, w2 - w1) = 0 exactly."""
    X = np.array([[1.0, 0.0], [-1.0, 1.0]])
    run = dc.exponential_loss_path(X, np.array([1.0, 1.0]), 1.0, 2,
                                         accuracies=[1e-3, 0.05])
    assert run.margin[0] == 0.0 and run.w[0, 0] == 0.0
    assert np.all(np.isnan(run.w_hat[0]))
    assert run.margin[1] > 0
    np.testing.assert_array_equal(run.w_hat[1], run.w[1] / run.margin[1])
    X = np.array([[1.0, 0.0], [-2.0, 1.0]])
    run = dc.exponential_loss_path(X, np.array([1.0, 1.0]), 1.0, 2,
                                         accuracies=[0.1, 0.3, 1.0])
    # margins recomputed from w: negative at the first two (N = 2, log N = 0.69 > 0.3)
    margins = np.min(X @ run.w.T, axis=0)
    assert margins[0] < 0 and margins[1] < 0 and margins[2] > 0
    assert np.all(np.isnan(run.w_hat[:2])) and np.all(np.isfinite(run.w_hat[2]))
    # each accuracy reached: mean exp(-margin_n) <= eps, recomputed independently
    assert np.all(np.log(np.mean(np.exp(-(X @ run.w.T)), axis=0)) <= -run.accuracies)


def test_margin_limit_meets_its_kkt_tolerance_on_random_instances():
    """Issue 21 round 12 (item 3): the documented KKT tolerance (default 1e-10) holds for the
    returned (w, lam) on random separable instances, checked independently here: lam >= 0,
    w = mu h_D(A^T lam) recomputed from lam by the closed-form link for D = 2
    (w = 2 mu sinh(A^T lam)), and max_n |min(lam_n, y_n <x_n, w> - 1)| <= 1e-10. Before, up to
    100 tol was accepted in silence (4 of 150 such draws at 1e-9 to 1e-8)."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(40):
        N, d = int(rng.integers(2, 7)), int(rng.integers(2, 9))
        X = rng.standard_normal((N, d))
        y = np.sign(X @ rng.standard_normal(d))
        y[y == 0] = 1.0
        mu, depth = 10 ** rng.uniform(-6, 3), int(rng.choice([2, 3]))
        w, lam = dc.margin_limit(X, y, mu, depth, return_dual=True)
        assert np.all(lam >= 0)
        kkt = float(np.max(np.abs(np.minimum(lam, y * (X @ w) - 1.0))))
        worst = max(worst, kkt)
        if depth == 2:
            z = (y[:, None] * X).T @ lam
            np.testing.assert_allclose(w, 2 * mu * np.sinh(z), rtol=1e-8,
                                       atol=1e-8 * np.max(np.abs(w)))
    assert worst <= 1e-10
