"""Property-based tests (hypothesis) of the public functions of ``lib`` (issue 21).

Valid random inputs give finite results with the function's defining property (an
interpolant interpolates, a kernel is symmetric positive semidefinite, a limit satisfies its
KKT conditions, a margin is scale invariant, ...); invalid inputs give a ``ValueError`` or
``TypeError`` naming the argument. Magnitudes range over 1e-150 .. 1e150. The profile (in
``conftest.py``) is derandomized; example counts are small and shapes fixed (JAX compiles once
per shape), so the whole file runs in well under 60 s.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from lib import (  # noqa: E402
    config,
    convex,
    diagonal,
    flows,
    kernels,
    lazy,
    margins,
    ntk,
    parity,
    twolayer,
)
from lib import diagonal_classification as dc  # noqa: E402

FAST = settings(max_examples=10)
SLOW = settings(max_examples=3)

# entries of order one, or exactly 0 (the overall magnitude is varied separately by `scales`)
nonzero_unit = st.one_of(st.floats(1e-3, 1.0), st.floats(-1.0, -1e-3))
unit = st.one_of(st.just(0.0), nonzero_unit)
# an overall scale spanning extreme magnitudes
scales = st.sampled_from([1e-150, 1e-30, 1e-3, 1.0, 7.0, 1e30, 1e150])


def arrays(shape, elements=unit):
    return hnp.arrays(np.float64, shape, elements=elements)


def well_conditioned(shape):
    """Matrices I-like enough that linear algebra is meaningful at 1e-9 accuracy."""
    return arrays(shape).map(lambda A: A + 3.0 * np.eye(*shape))


# ----------------------------------------------------------------------------- bad values

BAD_ARRAYS = [None, "abc", np.array([1.0 + 1j, 2.0]), np.array([True, False]),
              np.array([np.nan, 1.0]), np.array([np.inf, 1.0])]
BAD_POSITIVE = [None, "1", True, 1 + 1j, -1.0, 0.0, np.nan, np.inf, np.array([1.0, 2.0])]
BAD_BOOL = ["yes", 1, 0.0, None, np.array([True])]


def _raises_naming(name, f):
    with pytest.raises((ValueError, TypeError)) as info:
        f()
    assert name in str(info.value), f"message does not name {name!r}: {info.value}"


CASES = {  # function name -> (argument name, callable taking the bad value)
    "kernel_distance/K0": ("K0", lambda v: kernels.kernel_distance(v, np.eye(2))),
    "relative_kernel_change/K1": ("K1", lambda v: kernels.relative_kernel_change(np.eye(2), v)),
    "kernel_regression/y": ("y", lambda v: kernels.kernel_regression(np.eye(2), v)),
    "rkhs_norm/c": ("c", lambda v: kernels.rkhs_norm(np.eye(2), v)),
    "relu_ntk/x1": ("x1", lambda v: ntk.relu_ntk(v)),
    "smoothed_margin/margins": ("margins", lambda v: margins.smoothed_margin(v)),
    "compress_radius/points": ("points", lambda v: margins.compress_radius(v)),
    "Q/beta": ("beta", lambda v: diagonal.Q(v, 1.0)),
    "min_norm_interpolant/y": ("y", lambda v: convex.min_norm_interpolant(np.eye(2), v)),
    "relative_movement/params": ("params", lambda v: lazy.relative_movement(np.ones(2), v)),
    "gradient_descent/params0": ("params0", lambda v: flows.gradient_descent(
        lambda w: jnp.sum(w ** 2), v, step_size=0.1, num_steps=2)),
    "linearize/params0": ("params0", lambda v: ntk.linearize(lambda w, x: w @ x, v)),
    "population_loss/predictions": ("predictions", lambda v: parity.population_loss(
        v, parity.parity_atoms(2, [0], 0.5))),
}
POSITIVE_CASES = {
    "smoothed_margin/beta": ("beta", lambda v: margins.smoothed_margin([1.0, 2.0], beta=v)),
    "relu_ntk/kappa": ("kappa", lambda v: ntk.relu_ntk(np.eye(2), kappa=-1.0 if (
        isinstance(v, float) and v == 0.0) else v)),  # kappa = 0 is allowed
    "Q/alpha": ("alpha", lambda v: diagonal.Q([1.0], v)),
    "kernel_regression/tol": ("tol", lambda v: kernels.kernel_regression(np.eye(2), np.ones(2),
                                                                          tol=v)),
    "f1_path_norm/output_scale": ("output_scale", lambda v: margins.f1_path_norm(
        {"a": np.ones(2), "B": np.ones((2, 2))}, v)),
    "neuron_positions/scale": ("scale", lambda v: margins.neuron_positions(
        {"a": np.ones(2), "B": np.ones((2, 2))}, v)),
    "init_two_layer/kappa": ("kappa", lambda v: twolayer.init_two_layer(
        jax.random.key(0), 2, 4, kappa=v)),
    "gradient_descent/step_size": ("step_size", lambda v: flows.gradient_descent(
        lambda w: jnp.sum(w ** 2), jnp.ones(2), step_size=v, num_steps=2)),
    "implicit_bias_limit/alpha": ("alpha", lambda v: diagonal.implicit_bias_limit(
        np.array([[1.0, 2.0]]), [1.0], np.array([1.0, -2.0]) if np.ndim(v) else v)),
    "train/alpha": ("alpha", lambda v: lazy.train(lambda w, x: w @ x, jnp.ones(2),
                                                  jnp.eye(2), jnp.ones(2), alpha=v,
                                                  step_size=0.1, num_steps=1)),
}
BOOL_CASES = {
    "gradient_descent/normalized": ("normalized", lambda v: flows.gradient_descent(
        lambda w: jnp.sum(w ** 2) + 1, jnp.ones(2), step_size=0.1, num_steps=2, normalized=v)),
    "gradient_flow/stiff": ("stiff", lambda v: flows.gradient_flow(
        lambda w: jnp.sum(w ** 2), jnp.ones(2), [0.0, 1.0], stiff=v)),
    "init_two_layer/symmetric": ("symmetric", lambda v: twolayer.init_two_layer(
        jax.random.key(0), 2, 4, symmetric=v)),
    "train_sweep/linearized": ("linearized", lambda v: lazy.train(
        lambda w, x: w @ x, jnp.ones(2), jnp.eye(2), jnp.ones(2), step_size=0.1, num_steps=1,
        linearized=v)),
    "gradient_flow_path/stiff": ("stiff", lambda v: diagonal.gradient_flow_path(
        np.array([[1.0, 2.0]]), [1.0], 1.0, stiff=v)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=len(BAD_ARRAYS))
@given(bad=st.sampled_from(BAD_ARRAYS))
def test_bad_arrays_name_the_argument(case, bad):
    name, f = CASES[case]
    _raises_naming(name, lambda: f(bad))


@pytest.mark.parametrize("case", sorted(POSITIVE_CASES))
@settings(max_examples=len(BAD_POSITIVE))
@given(bad=st.sampled_from(BAD_POSITIVE))
def test_bad_positive_scalars_name_the_argument(case, bad):
    name, f = POSITIVE_CASES[case]
    _raises_naming(name, lambda: f(bad))


@pytest.mark.parametrize("case", sorted(BOOL_CASES))
@settings(max_examples=len(BAD_BOOL))
@given(bad=st.sampled_from(BAD_BOOL))
def test_bad_booleans_name_the_argument(case, bad):
    name, f = BOOL_CASES[case]
    _raises_naming(name, lambda: f(bad))


@settings(max_examples=10)
@given(key=st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3),
                     st.floats(allow_nan=True), st.sampled_from(["split", "raw3", "raw22"])))
def test_bad_keys_name_the_key(key):
    key = {"split": jax.random.split(jax.random.key(1)),
           "raw3": jnp.zeros(3, jnp.uint32),
           "raw22": jnp.zeros((2, 2), jnp.uint32)}.get(key, key) if isinstance(key, str) else key
    for f in (lambda: twolayer.init_two_layer(key, 2, 4),
              lambda: parity.biased_sparse_parity(key, 3, 3, [0], 0.5),
              lambda: parity.leaky_parity(key, 3, 3, [0], 0.5)):
        _raises_naming("key", f)


@settings(max_examples=10)
@given(n=st.one_of(st.integers(-(10**3), 0), st.integers(2**62 + 1, 10**40),
                   st.sampled_from([True, 2.5, "3", None])))
def test_bad_sizes_name_the_argument(n):
    _raises_naming("num_samples", lambda: parity.biased_sparse_parity(
        jax.random.key(0), n, 3, [0], 0.5))
    _raises_naming("num_steps", lambda: flows.snapshot_steps(n))


# ----------------------------------------------------------------------------- kernels

@FAST
@given(A=arrays((4, 3)), c=scales)
def test_kernel_measures_are_scale_free(A, c):
    K0 = A @ A.T + np.eye(4)
    K1 = K0 + 0.3 * np.outer(A[:, 0], A[:, 0])
    kd = kernels.kernel_distance(c * K0, c * K1)
    rk = kernels.relative_kernel_change(c * K0, c * K1)
    assert 0.0 <= kd <= 1.0 and np.isfinite(rk)
    assert kd == pytest.approx(kernels.kernel_distance(K0, K1), abs=1e-12)
    assert rk == pytest.approx(np.linalg.norm(K1 - K0) / np.linalg.norm(K0), rel=1e-10, abs=1e-14)
    assert kernels.kernel_distance(c * K0, 3.0 * c * K0) == pytest.approx(0.0, abs=1e-12)


@FAST
@given(A=well_conditioned((3, 3)), y=arrays((3,)), cy=scales, ck=scales)
def test_kernel_regression_interpolates(A, y, cy, ck):
    K = ck * (A @ A.T)
    c = np.asarray(kernels.kernel_regression(K, cy * y))
    assert np.all(np.isfinite(c))
    assert np.linalg.norm(K @ c - cy * y) <= 1e-8 * max(np.linalg.norm(cy * y), 1e-300)
    # the RKHS norm is sqrt(y^T K^-1 y), computed in scaled form
    ref = np.sqrt(y @ np.linalg.solve(A @ A.T, y)) * cy / np.sqrt(ck)
    assert kernels.rkhs_norm(K, c) == pytest.approx(ref, rel=1e-8, abs=1e-300)


@SLOW
@given(x=arrays((4, 3)), c=st.sampled_from([1e-100, 1e-3, 1.0, 1e3, 1e100]),
       kappa=st.floats(0.0, 3.0))
def test_relu_ntk_is_symmetric_psd_and_homogeneous(x, c, kappa):
    K = np.asarray(ntk.relu_ntk(x, kappa=kappa))
    assert np.all(np.isfinite(K)) and np.allclose(K, K.T, atol=1e-14)
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * max(np.abs(K).max(), 1e-300)
    Kc = np.asarray(ntk.relu_ntk(c * x, kappa=kappa))
    assert np.allclose(Kc, c * c * K, rtol=1e-10, atol=1e-10 * c * c * np.abs(K).max())


@SLOW
@given(w=arrays((3,)), x=arrays((4, 3)))
def test_empirical_ntk_of_linear_model_is_the_gram_matrix(w, x):
    K = ntk.empirical_ntk(lambda p, xi: p @ xi, w, x)
    assert np.allclose(K, x @ x.T, atol=1e-12)
    f_lin = ntk.linearize(lambda p, xi: jnp.sin(p @ xi), w)
    # the linearization is exact at params0 and has the model's gradient there
    assert float(f_lin(w, x[0])) == pytest.approx(float(np.sin(w @ x[0])), abs=1e-14)


# ----------------------------------------------------------------------------- lazy

@FAST
@given(p0=arrays((5,), nonzero_unit), d=arrays((5,)), c=scales)
def test_relative_movement_is_scale_invariant(p0, d, c):
    ref = np.linalg.norm(d) / np.linalg.norm(p0)
    assert lazy.relative_movement(c * p0, c * (p0 + d)) == pytest.approx(ref, rel=1e-10,
                                                                         abs=1e-14)


@SLOW
@given(y=arrays((2,)))
def test_lazy_train_of_linear_model_reaches_least_squares(y):
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    run = lazy.train(lambda w, x: w @ x, jnp.zeros(2), X, y, step_size=1.0, num_steps=200)
    assert np.allclose(run.final, y, atol=1e-10)  # X = I: the interpolant is y itself
    loss = lazy.scaled_square_loss(lambda w, x: w @ x, X, y)
    assert float(loss(run.final, 1.0)) <= 1e-20


# ----------------------------------------------------------------------------- margins

@FAST
@given(z=arrays((5,), st.floats(-1e3, 1e3)), beta=st.sampled_from([1e-20, 1e-3, 1.0, 1e3, 1e20]),
       c=st.sampled_from([1e-100, 1.0, 1e100]))
def test_smoothed_margin_is_sandwiched_and_homogeneous(z, beta, c):
    F = float(margins.smoothed_margin(z, beta=beta))
    assert np.isfinite(F)
    assert z.min() - 1e-9 * (1 + abs(z).max()) <= F <= z.min() + np.log(5) / beta + 1e-9 * (
        1 + abs(z).max())
    # F_beta(c z) = c F_{c beta}(z)
    Fc = float(margins.smoothed_margin(c * z, beta=beta / c))
    assert Fc == pytest.approx(c * F, rel=1e-9, abs=1e-9 * c * (1 + abs(z).max()))


@FAST
@given(a=arrays((3,), nonzero_unit), B=arrays((3, 2), nonzero_unit), c=scales)
def test_f1_normalized_margin_is_scale_invariant(a, B, c):
    X, y = np.array([[1.0, 0.5], [-0.5, 1.0]]), np.array([1.0, -1.0])
    ref = float(margins.f1_normalized_margin({"a": a, "B": B}, X, y))
    got = float(margins.f1_normalized_margin({"a": c * a, "B": c * B}, X, y))
    assert np.isfinite(got) and got == pytest.approx(ref, rel=1e-10, abs=1e-14)
    pos, _ = margins.neuron_positions({"a": c * a, "B": c * B})
    assert np.all(np.linalg.norm(pos, axis=1) <= 1.0 + 1e-12)


@FAST
@given(P=arrays((3, 2)), c=scales)
def test_compress_radius_keeps_directions(P, c):
    out = np.asarray(margins.compress_radius(c * P))
    r = np.linalg.norm(out, axis=1)
    assert np.all(np.isfinite(out)) and np.all(r <= 1.0 + 1e-12)
    for p, o in zip(P, out, strict=True):  # same direction (compared after scaling to max 1)
        if np.abs(p).max() > 0 and np.abs(o).max() > 1e-290:
            assert np.allclose(o / np.abs(o).max(), p / np.abs(p).max(), atol=1e-12)


@SLOW
@given(X=arrays((3, 3), st.floats(0.1, 1.0)), c=scales)
def test_max_margin_kkt_and_scaling(X, c):
    y = np.ones(3)
    w = np.asarray(convex.max_margin(c * X, y, p=2))
    assert np.all(np.isfinite(w)) and np.all(y * (c * X @ w) >= 1 - 1e-6)
    w1 = np.asarray(convex.max_margin(X, y, p=2))
    assert np.allclose(c * w, w1, rtol=1e-5, atol=1e-8 * np.abs(w1).max())


# ----------------------------------------------------------------------------- diagonal

@FAST
@given(beta=arrays((3,)), alpha=st.sampled_from([1e-100, 1e-5, 1.0, 1e5]), depth=st.just(2))
def test_q_is_finite_even_and_nonnegative(beta, alpha, depth):
    q = float(diagonal.Q(beta, alpha, depth))
    assert np.isfinite(q) and q >= 0
    assert float(diagonal.Q(-beta, alpha, depth)) == pytest.approx(q, rel=1e-12, abs=1e-300)


@SLOW
@given(X=arrays((2, 4), nonzero_unit), y=arrays((2,), nonzero_unit),
       cx=st.sampled_from([1e-150, 1.0, 1e150]), cy=st.sampled_from([1e-150, 1.0, 1e150]))
def test_implicit_bias_limit_satisfies_kkt(X, y, cx, cy):
    X = X + np.array([[3.0, 0, 0, 0], [0, 3.0, 0, 0]])  # full row rank
    alpha = 0.5
    try:
        beta, info = diagonal.implicit_bias_limit(cx * X, cy * y, alpha, return_info=True)
    except ValueError as err:  # a range refused with a clear message is acceptable
        assert "range" in str(err)
        return
    beta = np.asarray(beta)
    assert np.all(np.isfinite(beta))
    assert np.linalg.norm(cx * X @ beta - cy * y) <= 1e-9 * np.linalg.norm(cy * y)
    # KKT: beta = alpha^2 h_2(X^T nu) = 2 alpha^2 sinh(X^T nu) for some nu, i.e.
    # arcsinh(beta / (2 alpha^2)) lies in the row space of X
    z = np.arcsinh(beta / (2 * alpha ** 2))
    Xs = cx * X / np.abs(cx * X).max()
    proj = Xs.T @ np.linalg.lstsq(Xs.T, z, rcond=None)[0]
    assert np.linalg.norm(z - proj) <= 1e-6 * max(np.linalg.norm(z), 1.0)


@settings(max_examples=1)
@given(X=arrays((1, 2), st.floats(0.5, 2.0)), y=st.floats(0.5, 2.0))
def test_gradient_flow_path_converges_to_the_limit(X, y):
    run = diagonal.gradient_flow_path(X, [y], 1.0)
    assert run.converged and run.stop_time >= 0
    beta = np.asarray(run.final_beta)
    assert float(np.sum((X @ beta - y) ** 2)) <= 1e-20 * y ** 2 * 1.01
    assert np.allclose(beta, np.asarray(diagonal.implicit_bias_limit(X, [y], 1.0)), atol=1e-6)


# ----------------------------------------------------------------------------- flows

@SLOW
@given(w0=arrays((3,)), eta=st.sampled_from([0.05, 0.1, 0.2]))
def test_gradient_descent_matches_the_closed_form(w0, eta):
    # L = |w - 1|^2: w_k - 1 = (1 - 2 eta)^k (w_0 - 1)
    traj = flows.gradient_descent(_square_to_one, w0, step_size=eta,
                                  num_steps=50, snapshots=np.array([0, 50]))
    assert np.allclose(traj.final, 1.0 + (1 - 2 * eta) ** 50 * (w0 - 1.0), atol=1e-12)


def _half_square(w):
    return 0.5 * jnp.sum(w ** 2)


def _square_to_one(w):
    return jnp.sum((w - 1.0) ** 2)


@SLOW
@given(w0=arrays((2,)))
def test_gradient_flow_matches_the_closed_form(w0):
    traj = flows.gradient_flow(_half_square, w0, jnp.array([0.0, 1.0]))
    assert np.allclose(traj.final, np.exp(-1.0) * w0, atol=1e-9)


# ----------------------------------------------------------------------------- parity, nets

@SLOW
@given(n=st.just(4), data=st.data())
def test_parity_samples_are_pm_one_and_labels_are_parities(n, data):
    k = data.draw(st.integers(1, n))
    subset = data.draw(st.permutations(list(range(n))))[:k]
    alpha = data.draw(st.floats(0.0, 1.0))
    seed = data.draw(st.integers(0, 2**31 - 1))
    x, y = parity.biased_sparse_parity(jax.random.key(seed), 8, n, subset, alpha)
    assert set(np.unique(np.asarray(x))) <= {-1.0, 1.0}
    assert np.array_equal(np.asarray(y), np.asarray(parity.parity(x, subset)))
    atoms = parity.parity_atoms(n, subset, alpha)
    assert float(jnp.sum(atoms[2])) == pytest.approx(1.0, abs=1e-12)
    # the best constant-free linear loss is at most the null predictor's 1/2
    loss, _ = parity.best_feature_loss(lambda xx: xx, atoms)
    assert -1e-12 <= loss <= 0.5 + 1e-12


@SLOW
@given(seed=st.integers(0, 2**31 - 1), c=st.sampled_from([1e-100, 1.0, 1e100]))
def test_two_layer_is_positively_homogeneous(seed, c):
    p = twolayer.init_two_layer(config.key(seed % 1000), 3, 4, symmetric=False)
    X = np.array([[1.0, -0.5, 0.2], [0.3, 0.3, -1.0]])
    out = np.asarray(twolayer.two_layer_batch(p, X))
    assert np.allclose(twolayer.two_layer_batch(p, c * X), c * out, rtol=1e-12, atol=1e-300)
    assert float(twolayer.two_layer(p, X[0])) == pytest.approx(out[0], rel=1e-12, abs=1e-15)


# ----------------------------------------------------------------------------- more functions

@FAST
@given(A=well_conditioned((2, 3)), y=arrays((2,)), c=scales)
def test_min_norm_interpolant_interpolates(A, y, c):
    beta = np.asarray(convex.min_norm_interpolant(c * A, y, p=2))
    assert np.all(np.isfinite(beta))
    assert np.linalg.norm(c * A @ beta - y) <= 1e-9 * max(np.linalg.norm(y), 1e-300)
    assert np.allclose(beta, np.linalg.pinv(A) @ y / c, rtol=1e-8,
                       atol=1e-12 * np.abs(np.linalg.pinv(A) @ y / c).max() + 1e-300)


@FAST
@given(a=arrays((3,)), B=arrays((3, 2)), c=st.sampled_from([1e-100, 1e-3, 1.0, 1e3, 1e100]))
def test_f1_path_norm_is_two_homogeneous(a, B, c):
    ref = float(np.sum(np.abs(a) * np.linalg.norm(B, axis=1)) / 3)
    got = float(margins.f1_path_norm({"a": c * a, "B": c * B}))
    assert got == pytest.approx(c * c * ref, rel=1e-12, abs=1e-300)


@SLOW
@given(X=arrays((3, 2), st.floats(0.2, 1.0)), c=scales)
def test_simplex_max_margin_is_homogeneous(X, c):
    y = np.ones(3)
    a, gamma = margins.simplex_max_margin(X, y)
    a_c, gamma_c = margins.simplex_max_margin(c * X, y)
    assert np.isclose(float(np.sum(a_c)), 1.0) and np.all(np.asarray(a_c) >= -1e-9)
    assert gamma_c == pytest.approx(c * gamma, rel=1e-6)
    assert np.min(X @ np.asarray(a)) >= gamma - 1e-8


@SLOW
@given(alpha=st.floats(0.0, 1.0), data=st.data())
def test_bsp_correlations_match_the_exact_atoms(alpha, data):
    subset = sorted(data.draw(st.permutations([0, 1, 2, 3]))[:data.draw(st.integers(1, 4))])
    x, y, prob = parity.parity_atoms(4, subset, alpha)
    exact = np.asarray((prob * y) @ x)
    assert np.allclose(parity.bsp_correlations(4, subset, alpha), exact, atol=1e-12)
    assert float(parity.selected_parity(jnp.zeros(4), x[0])) == 0.0


@SLOW
@given(X=arrays((2, 3), st.floats(0.2, 1.0)), mu=st.sampled_from([1e-20, 1e-2, 1.0, 1e3]))
def test_margin_limit_satisfies_its_constraints(X, mu):
    y = np.ones(2)
    w = np.asarray(dc.margin_limit(X, y, mu))
    assert np.all(np.isfinite(w)) and np.min(X @ w) >= 1 - 1e-8


@SLOW
@given(w0=arrays((2, 3)))
def test_gradient_descent_sweep_runs_each_member(w0):
    traj = flows.gradient_descent_sweep(_square_to_one, w0, step_size=0.1, num_steps=50,
                                        snapshots=np.array([0, 50]))
    assert np.allclose(traj.final, 1.0 + 0.8 ** 50 * (w0 - 1.0), atol=1e-12)


@SLOW
@given(w0=arrays((2,), nonzero_unit), w1=arrays((2,)))
def test_laziness_of_a_linear_model(w0, w1):
    lz = lazy.laziness(lambda w, x: w @ x, w0, w1, np.eye(2))
    assert lz.kernel_change == 0.0 and lz.kernel_distance == pytest.approx(0.0, abs=1e-12)
    assert lz.movement == pytest.approx(np.linalg.norm(w1 - w0) / np.linalg.norm(w0), rel=1e-12)
